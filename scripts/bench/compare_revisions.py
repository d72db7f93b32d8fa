#!/usr/bin/env python
"""Decode time of this checkout against another revision, measured in one run.

    python scripts/bench/compare_revisions.py --base d19d4a2 --limit 200 --repeats 3 \\
        --run var-stream:beam=5,stream_capacity=32 --run fixed-ours:beam=1,stream_capacity=1,label=greedy-b1

A package cannot be imported twice in one process, so each round runs the harness
(``python -m fairseq_stream.tools.bench``) once in each tree, alternately (base, this, base, this,
...): a busy machine slows both alike. The base revision is checked out into a temporary git
worktree (removed afterwards); each tree builds its own C++ kernels (their cache key follows the
sources) in an untimed first round. Prints, per row, the median decode time of each tree
over the rounds, the ratio this/base, and whether the outputs are identical. The remaining
arguments go to the harness (``--limit``, ``--batch-size``, ``--threads``, ``--run`` ...).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bench(tree: str, args: Sequence[str], out: str) -> List[Dict]:
    """The rows of one harness run in ``tree`` (its --json: {"meta": ..., "rows": [...]})."""
    env = dict(os.environ, PYTHONPATH=tree)
    cmd = [sys.executable, "-m", "fairseq_stream.tools.bench", "--no-progress", "--repeats", "1", "--json", out, *args]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_revisions: the harness failed in {tree}:\n{proc.stderr[-2000:]}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)["rows"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the git revision to compare with (e.g. main before a change)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per tree (after one untimed round)")
    args, harness = parser.parse_known_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", base, args.base], check=True,
                       capture_output=True)
        try:
            times: Dict[str, Dict[str, List[float]]] = {"base": {}, "this": {}}
            outputs: Dict[str, Dict[str, str]] = {"base": {}, "this": {}}
            for round_ in range(args.rounds + 1):
                for name, tree in (("base", base), ("this", REPO)):
                    rows = _bench(tree, harness, os.path.join(tmp, f"{name}.json"))
                    if round_ == 0:  # untimed: kernel builds, compiles, caches
                        continue
                    for row in rows:
                        times[name].setdefault(row["label"], []).append(row["wall_median"])
                        outputs[name][row["label"]] = json.dumps([row["bleu"], row["stats"].get("target_tokens")])
        finally:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", base], capture_output=True)
    print(f"| row | base {args.base} (s) | this (s) | this / base | same BLEU and tokens |")
    print("|---|---|---|---|---|")
    for label, walls in times["this"].items():
        if label not in times["base"]:  # a row only one tree adds (the harness's own baselines, since they came)
            print(f"| {label} | — | {statistics.median(walls):.2f} | — | — |")
            continue
        b, t = statistics.median(times["base"][label]), statistics.median(walls)
        same = outputs["base"][label] == outputs["this"][label]
        print(f"| {label} | {b:.2f} | {t:.2f} | {t / b:.2f} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
