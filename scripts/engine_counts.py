#!/usr/bin/env python
"""Host reads and aten operations per decoder step over whole runs (the README's engine table).

    python scripts/engine_counts.py [REPO]

counts, for the fairseq-stream tree at REPO (default: this checkout), what a GPU pays for per
decoder step (see :mod:`fairseq_stream.profiling`): 100 demo sentences, fp32, 1 thread. To
compare with an older tree, check it out elsewhere and copy ``fairseq_stream/profiling.py``
into it. Counting slows the run; it is not a timing.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
REPO = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from fairseq_stream.profiling import CostCounter  # noqa: E402
from fairseq_stream.session import TranslationSession  # noqa: E402

DEMO = HERE / "user_dir_examples" / "demo"
RUNS = [
    ("`var-stream` k = 5", "var-stream", {"beam": 5}, {"stream_capacity": 32}),
    ("`fixed-ours` k = 5", "fixed-ours", {"beam": 5}, {"stream_capacity": 32}),
    ("`var-stream` k = 50", "var-stream", {"beam": 50}, {"stream_capacity": 16}),
    ("`gs-jacobi` b = 3, batch 32", "gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 32}),
    ("`gs-jacobi` b = 3, batch 1", "gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 1}),
]


def main() -> None:
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    session = TranslationSession.load(str(DEMO), str(DEMO / "checkpoint.pt"), bpe_codes=str(DEMO / "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    lines = (DEMO / "test.es").read_text(encoding="utf-8").splitlines()[:100]
    data = session.encode(lines)
    print(f"{REPO}\n\n| strategy | steps | host reads/step | aten ops/step |\n|---|---|---|---|")
    for label, search, gen, opts in RUNS:
        with CostCounter() as cc:
            out = session.translate(data, search=search, gen=gen, opts=opts, postprocess=False)
        n = out.stats.timesteps
        print(f"| {label} | {n} | {cc.counts.host_reads / n:.2f} | {cc.counts.ops / n:.1f} |", flush=True)


if __name__ == "__main__":
    main()
