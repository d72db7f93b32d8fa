#!/usr/bin/env python
"""``--step-mode static`` (or ``graph``) against ``eager`` over a whole run: same hypotheses?

    python scripts/bench/compare_step_modes.py --limit 300                          # the demo model, CPU
    python scripts/bench/compare_step_modes.py --path ckpt.pt --data DIR --device cuda --mode graph

For each strategy (default: var-stream k=5, fixed-ours k=5, topup k=5, gs-jacobi b=3) the same
sentences are decoded in one process with ``--step-mode eager`` and with ``--mode``; the table
gives how many detokenised outputs are identical, the largest score difference of the best
hypotheses, the share of the run's decoder steps that ran static (or replayed) and both wall
times. Exit status 1 when an output differs or a score differs by more than ``--tolerance``.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from fairseq_stream.tools.demo_files import find_demo_dir  # noqa: E402

DEMO = find_demo_dir()
RUNS = {"var-stream": ("var-stream", {"beam": 5}, {}), "fixed-ours": ("fixed-ours", {"beam": 5}, {}),
        "topup": ("topup", {"beam": 5}, {}), "gs-jacobi": ("gs-jacobi", {"beam": 1}, {"jacobi_block": 3})}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEMO, help="directory with the dictionaries")
    parser.add_argument("--path", default=os.path.join(DEMO, "checkpoint.pt"))
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO, "test.es"))
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--strategies", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--mode", choices=["static", "graph"], default="static")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest score difference allowed")
    args = parser.parse_args(argv)
    import torch

    from fairseq_stream.tools.bench import read_lines
    from fairseq_stream.tools.session import TranslationSession

    torch.set_num_threads(args.threads)
    src_lang = os.path.splitext(args.src)[1].lstrip(".")
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes, cpu=args.device == "cpu",
                                      extra_args=["--source-lang", src_lang, "--target-lang", args.tgt_lang])
    data = session.encode(read_lines(args.src, args.limit))
    lines: List[str] = [f"{os.path.basename(args.path)}, {len(data)} sentences, {args.device}, eager vs {args.mode}", "",
                        f"| strategy | identical outputs | max score diff | steps {args.mode} | eager s | {args.mode} s |",
                        "|---|---|---|---|---|---|"]
    failed = False
    for name in args.strategies:
        search, gen, opts = RUNS[name]
        eager = session.translate(data, search=search, gen=gen, opts=dict(opts, step_mode="eager"))
        other = session.translate(data, search=search, gen=gen, opts=dict(opts, step_mode=args.mode))
        same = sum(a == b for a, b in zip(eager.strings, other.strings))
        diff = max(abs(a[0]["score"] - b[0]["score"]) for a, b in zip(eager.hypos, other.hypos))
        modes = other.stats.step_mode
        done = modes.get("steps_static", 0) + modes.get("steps_replayed", 0)
        share = done / max(1, done + modes.get("steps_eager", 0))
        failed |= same < len(data) or diff > args.tolerance
        lines.append(f"| {name} | {same}/{len(data)} | {diff:.1e} | {100 * share:.0f}% | {eager.stats.wall_seconds:.2f} | "
                     f"{other.stats.wall_seconds:.2f} |")
    print("\n".join(lines))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
