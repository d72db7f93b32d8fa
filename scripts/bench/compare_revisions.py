#!/usr/bin/env python
"""Decode time of this checkout against another revision, measured in one run, by wall or CPU clock.

    python scripts/bench/compare_revisions.py --base d19d4a2 --limit 200 --rounds 3 \\
        --run var-stream:beam=5,stream_capacity=32 --run fixed-ours:beam=1,stream_capacity=1,label=greedy-b1
    OMP_NUM_THREADS=1 python scripts/bench/compare_revisions.py --base f16b170 --clock cpu --limit 200

A package cannot be imported twice in one process, so each round runs every row once in each
tree, each tree in its own process, alternately (base, this, base, this, ...): a busy machine
slows both alike. The base revision is checked out into a temporary git worktree (removed
afterwards); each tree builds its own C++ kernels (their cache key follows the sources). Prints,
per row, the median time of each tree over the rounds, the ratio this/base, and whether the
outputs are identical.

``--clock wall`` (the default) runs the harness (``python -m fairseq_stream.tools.bench``) in
each tree, after an untimed first round (kernel builds, compiles, caches); the remaining
arguments go to the harness (``--limit``, ``--batch-size``, ``--threads``, ``--run`` ...), and
"identical" means the same BLEU and target tokens. ``--clock cpu`` times each decode call by
``time.process_time`` (the process's own work, not the time it waited for a core: on a machine
shared with other jobs, wall times blur), with one thread, each row after an untimed warm-up on
8 sentences; it takes ``--limit`` (default 200 demo sentences) and ``--run`` only (default rows:
our greedy, var-stream k=5 in float32 and int8, the exact beam k=5, gs-jacobi), and "identical"
means the same detokenised outputs (CPU time is not the harness's clock, hence its own loop).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: per row label: the seconds of one timed run and a fingerprint of its outputs
Measured = Dict[str, Tuple[float, str]]

#: ``--clock cpu``'s rows without ``--run``: label, search, generation options, decoding options
CPU_ROWS = [
    ("greedy", "fixed-ours", {"beam": 1}, {}),
    ("var-stream k=5", "var-stream", {"beam": 5}, {}),
    ("var-stream k=5 int8", "var-stream", {"beam": 5}, {"quantize": "int8"}),
    ("exact beam k=5", "fixed-ours", {"beam": 5}, {"beam_finalize": "fairseq"}),
    ("gs-jacobi", "gs-jacobi", {"beam": 1}, {}),
]

# Run inside each tree by --clock cpu: the demo model, every row once (after an untimed warm-up on 8 sentences).
_CPU_CHILD = r"""
import hashlib, json, sys, time, torch
torch.set_num_threads(1)
from fairseq_stream.tools.session import TranslationSession
demo, limit, rows = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
s = TranslationSession.load(demo, demo + "/checkpoint.pt", bpe_codes=demo + "/bpe.codes",
                            extra_args=["--source-lang", "es", "--target-lang", "en"])
src = [l.rstrip("\n") for l in open(demo + "/test.es", encoding="utf-8")][:limit]
data = s.encode(src)
out = {}
for label, search, gen, opts in rows:
    s.translate(s.encode(src[:8]), search=search, gen=gen, opts=opts)
    start = time.process_time()
    result = s.translate(data, search=search, gen=gen, opts=opts)
    out[label] = [time.process_time() - start, hashlib.sha1("\n".join(result.strings).encode()).hexdigest()]
print("RESULT " + json.dumps(out))
"""


def _fail(tree: str, stderr: str) -> None:
    sys.exit(f"compare_revisions: the run failed in {tree}:\n{stderr[-2000:]}")


def wall_clock(harness: Sequence[str], tmp: str) -> Callable[[str, str], Measured]:
    """One harness run in a tree (its --json: {"meta": ..., "rows": [...]}): each row's wall time."""
    def measure(name: str, tree: str) -> Measured:
        out = os.path.join(tmp, f"{name}.json")
        cmd = [sys.executable, "-m", "fairseq_stream.tools.bench", "--no-progress", "--repeats", "1", "--json", out,
               *harness]
        proc = subprocess.run(cmd, cwd=tree, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True)
        if proc.returncode != 0:
            _fail(tree, proc.stderr)
        with open(out, encoding="utf-8") as f:
            rows = json.load(f)["rows"]
        return {r["label"]: (r["wall_median"], json.dumps([r["bleu"], r["stats"].get("target_tokens")])) for r in rows}
    return measure


def cpu_clock(rows: List[Tuple[str, str, Dict, Dict]], limit: int) -> Callable[[str, str], Measured]:
    """One process in a tree that decodes every row once: each decode call's CPU seconds."""
    demo = os.path.join(REPO, "user_dir_examples", "demo")

    def measure(name: str, tree: str) -> Measured:
        proc = subprocess.run([sys.executable, "-c", _CPU_CHILD, demo, str(limit), json.dumps(rows)], cwd=tree,
                              env=dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1"), capture_output=True,
                              text=True)
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            _fail(tree, proc.stderr)
        return {label: (cpu, digest) for label, (cpu, digest) in json.loads(line[-1][len("RESULT "):]).items()}
    return measure


def cpu_rows(specs: Sequence[str]) -> List[Tuple[str, str, Dict, Dict]]:
    """``--run`` specs as ``--clock cpu``'s rows (the harness's syntax), or its default rows."""
    if not specs:
        return list(CPU_ROWS)
    import dataclasses

    from fairseq.dataclass.configs import GenerationConfig

    from fairseq_stream.tools.bench import option_kinds, parse_run

    gen = option_kinds(GenerationConfig, [f.name for f in dataclasses.fields(GenerationConfig)])
    return [(r.label, r.search, r.gen, r.opts) for r in (parse_run(spec, gen) for spec in specs)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the git revision to compare with (e.g. main before a change)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall: the harness's wall times; cpu: each decode call's process CPU time, one thread")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per tree")
    args, rest = parser.parse_known_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        if args.clock == "wall":
            measure, untimed = wall_clock(rest, tmp), 1
        else:
            cpu = argparse.ArgumentParser(prog=f"{parser.prog} --clock cpu")
            cpu.add_argument("--limit", type=int, default=200, help="demo sentences per row")
            cpu.add_argument("--run", action="append", default=[], help="SEARCH[:key=value,...] as the harness's")
            sys.path.insert(0, REPO)
            opts = cpu.parse_args(rest)
            measure, untimed = cpu_clock(cpu_rows(opts.run), opts.limit), 0
        base = os.path.join(tmp, "base")
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", base, args.base], check=True,
                       capture_output=True)
        times: Dict[str, Dict[str, List[float]]] = {"base": {}, "this": {}}
        outputs: Dict[str, Dict[str, str]] = {"base": {}, "this": {}}
        try:
            for round_ in range(untimed + args.rounds):
                for name, tree in (("base", base), ("this", REPO)):
                    measured = measure(name, tree)
                    if round_ < untimed:  # kernel builds, compiles, caches
                        continue
                    for label, (seconds, fingerprint) in measured.items():
                        times[name].setdefault(label, []).append(seconds)
                        outputs[name][label] = fingerprint
        finally:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", base], capture_output=True)
    unit = "wall s" if args.clock == "wall" else "CPU s, 1 thread"
    print(f"| row | base {args.base} ({unit}) | this ({unit}) | this / base | same outputs |")
    print("|---|---|---|---|---|")
    for label, seconds in times["this"].items():
        t = statistics.median(seconds)
        if label not in times["base"]:  # a row only one tree adds (the harness's own baselines, since they came)
            print(f"| {label} | — | {t:.2f} | — | — |")
            continue
        b = statistics.median(times["base"][label])
        same = outputs["base"][label] == outputs["this"][label]
        print(f"| {label} | {b:.2f} | {t:.2f} | {t / b:.2f} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
