#!/usr/bin/env python
"""Decode CPU time of this checkout against another revision, on a machine shared with other jobs.

    OMP_NUM_THREADS=1 python scripts/experiments/cpu_time_ab.py --base f16b170 --limit 200 --rounds 3

``scripts/bench/compare_revisions.py`` compares wall times, which a busy machine blurs; this one compares
each decode call's ``time.process_time`` (the process's own work, not the time it waited for a
core), with one thread. Each round runs every row once in each tree, alternately (base, this),
each tree in its own process (a package cannot be imported twice); the base revision is checked
out into a temporary git worktree. Rows: our greedy (fixed-ours k=1), var-stream k=5 in float32
and int8, the exact beam (fixed-ours, fairseq's finalisation) k=5, gs-jacobi. Prints the median
CPU seconds per row and tree, their ratio, and whether the outputs are identical.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROWS = [
    ("greedy", "fixed-ours", {"beam": 1}, {}),
    ("var-stream k=5", "var-stream", {"beam": 5}, {}),
    ("var-stream k=5 int8", "var-stream", {"beam": 5}, {"quantize": "int8"}),
    ("exact beam k=5", "fixed-ours", {"beam": 5}, {"beam_finalize": "fairseq"}),
    ("gs-jacobi", "gs-jacobi", {"beam": 1}, {}),
]

# Run inside each tree: the demo model, every row once (after an untimed warm-up on 8 sentences).
_CHILD = r"""
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


def _run(tree: str, limit: int) -> Dict[str, List]:
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1")
    demo = os.path.join(REPO, "user_dir_examples", "demo")
    proc = subprocess.run([sys.executable, "-c", _CHILD, demo, str(limit), json.dumps(ROWS)], cwd=tree, env=env,
                          capture_output=True, text=True)
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        sys.exit(f"cpu_time_ab: the run failed in {tree}:\n{proc.stderr[-2000:]}")
    return json.loads(line[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--limit", type=int, default=200, help="demo sentences per row")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: Dict[str, Dict[str, List[float]]] = {"base": {}, "this": {}}
    digests: Dict[str, Dict[str, str]] = {"base": {}, "this": {}}
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", base, args.base], check=True,
                       capture_output=True)
        try:
            for _ in range(args.rounds):
                for name, tree in (("base", base), ("this", REPO)):
                    for label, (cpu, digest) in _run(tree, args.limit).items():
                        times[name].setdefault(label, []).append(cpu)
                        digests[name][label] = digest
        finally:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", base], capture_output=True)
    print(f"| row ({args.limit} sentences, 1 thread) | base {args.base} CPU s | this CPU s | this / base | same outputs |")
    print("|---|---|---|---|---|")
    for label, _, _, _ in ROWS:
        b, t = statistics.median(times["base"][label]), statistics.median(times["this"][label])
        same = "yes" if digests["base"][label] == digests["this"][label] else "no"
        print(f"| {label} | {b:.2f} | {t:.2f} | {t / b:.2f} | {same} |")


if __name__ == "__main__":
    main()
