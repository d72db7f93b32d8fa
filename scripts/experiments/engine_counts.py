#!/usr/bin/env python
"""Host reads and aten operations per decoder step over whole runs (the README's engine table).

    python scripts/experiments/engine_counts.py [REPO]
    python scripts/experiments/engine_counts.py --phases
    python scripts/experiments/engine_counts.py --phases --ib CHECKPOINT

counts, for the fairseq-stream tree at REPO (default: this checkout), what a GPU pays for per
decoder step (see :mod:`fairseq_stream.engine.profiling`): 100 demo sentences, fp32, 1 thread. To
compare with an older tree, check it out elsewhere and copy ``fairseq_stream/engine/profiling.py``
into it. Counting slows the run; it is not a timing.

``--phases`` splits the operations of the scheduler's steps by where they run: the decoder
call (``ModelStep.step``), the cache reorder and block accept (``ModelStep.select`` /
``accept``), and the rest, which is the strategy's search step (with the scheduler's merges),
listing the search step's most frequent operations: what fusing the search step would remove.
"""
from __future__ import annotations

import logging
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator

HERE = Path(__file__).resolve().parents[2]
PHASES = "--phases" in sys.argv[1:]
IB = sys.argv[sys.argv.index("--ib") + 1] if "--ib" in sys.argv[1:] else None
ARGS = [a for i, a in enumerate(sys.argv[1:], 1) if a not in ("--phases", "--ib") and sys.argv[i - 1] != "--ib"]
REPO = Path(ARGS[0]).resolve() if ARGS else HERE
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from fairseq_stream.engine.profiling import CostCounter, CostCounts, count_decoder_steps  # noqa: E402
from fairseq_stream.tools.session import TranslationSession  # noqa: E402

DEMO = HERE / "user_dir_examples" / "demo"
RUNS = [
    ("`var-stream` k = 5", "var-stream", {"beam": 5}, {"stream_capacity": 32}),
    ("`fixed-ours` k = 5", "fixed-ours", {"beam": 5}, {"stream_capacity": 32}),
    ("`var-stream` k = 50", "var-stream", {"beam": 50}, {"stream_capacity": 16}),
    ("`gs-jacobi` b = 3, batch 32", "gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 32}),
    ("`gs-jacobi` b = 3, batch 1", "gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 1}),
]
# --ib CHECKPOINT: an IBDecoder-family checkpoint on the demo's dictionaries (scripts/papers/ib_experiment.py,
# or the tests' tiny one) decoded with ib-beam instead
IB_RUNS = [
    ("`ib-beam` B = 4, batch 1", "ib-beam", {"beam": 4}, {"stream_capacity": 1}),
    ("`ib-beam` B = 4, batch 32", "ib-beam", {"beam": 4}, {"stream_capacity": 32}),
]
RUNS = IB_RUNS if IB else RUNS


@contextmanager
def count_phases(counts: Dict[str, CostCounts]) -> Iterator[None]:
    """Count the model's calls inside the scheduler's steps apart (``counts["steps"]`` holds all)."""
    from fairseq_stream.model.model_step import ModelStep

    originals = {name: getattr(ModelStep, name) for name in ("step", "select", "accept")}

    def counted(name: str):
        def call(self, *args, **kwargs):
            with CostCounter(counts[name]):
                return originals[name](self, *args, **kwargs)
        return call

    for name in originals:
        setattr(ModelStep, name, counted(name))
    try:
        with count_decoder_steps(counts["steps"]):
            yield
    finally:
        for name, fn in originals.items():
            setattr(ModelStep, name, fn)


def phases(session, data) -> None:
    print(f"{REPO}\n\n| strategy | steps | aten ops/step | decoder call | cache reorder + accept | search step and the rest |"
          "\n|---|---|---|---|---|---|")
    tops = []
    for label, search, gen, opts in RUNS:
        counts = {name: CostCounts() for name in ("steps", "step", "select", "accept")}
        with count_phases(counts):
            out = session.translate(data, search=search, gen=gen, opts=opts, postprocess=False)
        n = out.stats.timesteps
        # Nested counters both count an operation: the phases are inside "steps".
        model, reorder = counts["step"].ops, counts["select"].ops + counts["accept"].ops
        rest = counts["steps"].ops - model - reorder
        print(f"| {label} | {n} | {counts['steps'].ops / n:.1f} | {model / n:.1f} | {reorder / n:.1f} | {rest / n:.1f} |",
              flush=True)
        search_ops = Counter(counts["steps"].ops_by_name)
        for name in ("step", "select", "accept"):
            search_ops.subtract(counts[name].ops_by_name)
        top = ", ".join(f"{op} {v / n:.1f}" for op, v in search_ops.most_common(8))
        tops.append(f"- {label}: {top}")
    print("\nThe search step's most frequent operations, per step:\n" + "\n".join(tops))


def main() -> None:
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    session = TranslationSession.load(str(DEMO), IB or str(DEMO / "checkpoint.pt"), bpe_codes=str(DEMO / "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    lines = (DEMO / "test.es").read_text(encoding="utf-8").splitlines()[:100]
    data = session.encode(lines)
    if PHASES:
        phases(session, data)
        return
    print(f"{REPO}\n\n| strategy | steps | host reads/step | aten ops/step |\n|---|---|---|---|")
    for label, search, gen, opts in RUNS:
        with CostCounter() as cc:
            out = session.translate(data, search=search, gen=gen, opts=opts, postprocess=False)
        n = out.stats.timesteps
        print(f"| {label} | {n} | {cc.counts.host_reads / n:.2f} | {cc.counts.ops / n:.1f} |", flush=True)


if __name__ == "__main__":
    main()
