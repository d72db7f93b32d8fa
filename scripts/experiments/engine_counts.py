#!/usr/bin/env python
"""One-off experiment: host reads and aten operations per decoder step over whole runs (the engine table of docs/results.md, "The decoding engine on the CPU proxies", 2026-11-23).

    python scripts/experiments/engine_counts.py [REPO]
    python scripts/experiments/engine_counts.py --phases
    python scripts/experiments/engine_counts.py --phases --ib CHECKPOINT

counts, for the fairseq-stream tree at REPO (default: this checkout), what a GPU pays for per
decoder step (see :mod:`fairseq_stream.engine.profiling`): 100 demo sentences, fp32, 1 thread. To
compare with an older tree, check it out elsewhere and copy ``fairseq_stream/engine/profiling.py``
into it (a tree from before the static step moved to ``model/static/``, 2026-12-04, has its region in
``TransformerStepper._static_body``: that copy's ``count_decoder_steps`` then needs the old name). Counting
slows the run; it is not a timing. Every run has ``--native-loop off`` (a GPU runs no native loop: at batch 1 the
CPU's would do a sentence's steps in one C++ call, whose operations no Python phase sees).

``--phases`` splits the operations of the scheduler's steps by where they run: the decoder
call (``ModelStep.scored_step``, which the scheduler calls; ``ModelStep.step`` goes through it),
the cache reorder and block accept (``ModelStep.select`` / ``accept``), and the rest, which is the
strategy's search step (with the scheduler's merges), listing the search step's most frequent
operations: what fusing the search step would remove. (Under ``--step-mode static|graph`` the
search runs inside the decoder call and is counted there.)
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

HERE = Path(__file__).resolve().parents[2]
DEMO = HERE / "user_dir_examples" / "demo"
PER_STEP = {"native_loop": "off"}  # every step a Python step, as on a GPU
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


@contextmanager
def count_phases(counts: Dict[str, Any]) -> Iterator[None]:
    """Count the model's calls inside the scheduler's steps apart (``counts["steps"]`` holds all)."""
    from fairseq_stream.engine.profiling import CostCounter, count_decoder_steps
    from fairseq_stream.model.model_step import ModelStep

    # scored_step is the decoder call the scheduler makes (step delegates to it: counting both would
    # count a call twice)
    originals = {name: getattr(ModelStep, name) for name in ("scored_step", "select", "accept")}

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


def phases(session: Any, data: Any, runs: List[tuple], repo: Path) -> None:
    from fairseq_stream.engine.profiling import CostCounts

    print(f"{repo}\n\n| strategy | steps | aten ops/step | decoder call | cache reorder + accept | search step and the rest |"
          "\n|---|---|---|---|---|---|")
    tops = []
    for label, search, gen, opts in runs:
        counts = {name: CostCounts() for name in ("steps", "scored_step", "select", "accept")}
        with count_phases(counts):
            out = session.translate(data, search=search, gen=gen, opts=dict(opts, **PER_STEP), postprocess=False)
        n = out.stats.timesteps
        if not counts["scored_step"].ops:  # the counted method is not the one the scheduler calls any more
            raise SystemExit("engine_counts.py: no operation counted in ModelStep.scored_step: "
                             "which method does the scheduler call now?")
        # Nested counters both count an operation: the phases are inside "steps".
        model, reorder = counts["scored_step"].ops, counts["select"].ops + counts["accept"].ops
        rest = counts["steps"].ops - model - reorder
        print(f"| {label} | {n} | {counts['steps'].ops / n:.1f} | {model / n:.1f} | {reorder / n:.1f} | {rest / n:.1f} |",
              flush=True)
        search_ops = Counter(counts["steps"].ops_by_name)
        for name in ("scored_step", "select", "accept"):
            search_ops.subtract(counts[name].ops_by_name)
        top = ", ".join(f"{op} {v / n:.1f}" for op, v in search_ops.most_common(8))
        tops.append(f"- {label}: {top}")
    print("\nThe search step's most frequent operations, per step:\n" + "\n".join(tops))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", nargs="?", default=str(HERE),
                        help="the fairseq-stream tree to count (default: this checkout)")
    parser.add_argument("--phases", action="store_true", help="split the operations by where they run")
    parser.add_argument("--ib", metavar="CHECKPOINT",
                        help="an IBDecoder-family checkpoint on the demo's dictionaries, decoded with ib-beam instead")
    parser.add_argument("--limit", type=int, default=100, help="first N sentences of the demo's test set")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    repo = Path(args.repo).resolve()
    sys.path.insert(0, str(repo))  # the tree counted, before anything of fairseq_stream is imported
    import torch

    from fairseq_stream.engine.profiling import CostCounter
    from fairseq_stream.tools.session import TranslationSession

    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    runs = IB_RUNS if args.ib else RUNS
    session = TranslationSession.load(str(DEMO), args.ib or str(DEMO / "checkpoint.pt"), bpe_codes=str(DEMO / "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    lines = (DEMO / "test.es").read_text(encoding="utf-8").splitlines()[:args.limit]
    data = session.encode(lines)
    if args.phases:
        phases(session, data, runs, repo)
        return
    print(f"{repo}\n\n| strategy | steps | host reads/step | aten ops/step |\n|---|---|---|---|")
    for label, search, gen, opts in runs:
        with CostCounter() as cc:
            out = session.translate(data, search=search, gen=gen, opts=dict(opts, **PER_STEP), postprocess=False)
        n = out.stats.timesteps
        print(f"| {label} | {n} | {cc.counts.host_reads / n:.2f} | {cc.counts.ops / n:.1f} |", flush=True)


if __name__ == "__main__":
    main()
