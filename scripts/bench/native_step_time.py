#!/usr/bin/env python
"""Microseconds per decoder step (decoder and output projection) of ``--step-mode native`` against ``eager``, CPU.

    OMP_NUM_THREADS=1 python scripts/bench/native_step_time.py --limit 40

Decodes the same sentences with ``fixed-ours`` at k = 5 (stream capacity 32) and greedy at batch 1
(capacity 1), alternating the two modes ``--repeats`` times in one process, and times each call of
the model's step (``ModelStep.scored_step``, the call the scheduler makes: the decoder step native
replaces and the ensemble's scores; the search step, the cache reorder and the encoder are left out).
It times one call inside a run, which the harness (``python -m fairseq_stream.tools.bench``, whole
runs) does not; the runs themselves are not timed here. ``--native-loop off``: every step is one such call (the
native greedy loop would run a sentence's steps in one). Prints the median per-step time of each mode, their ratio,
and whether the outputs are identical (tokens and scores ``==``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from fairseq_stream.tools.demo_files import find_demo_dir  # noqa: E402

DEMO = find_demo_dir()
ROWS = {"k=5, capacity 32": ({"beam": 5}, {"stream_capacity": 32}), "greedy, batch 1": ({"beam": 1}, {"stream_capacity": 1})}


def _same(a: Any, b: Any) -> bool:
    return all([h["tokens"].tolist() for h in x] == [h["tokens"].tolist() for h in y]
               and [h["score"] for h in x] == [h["score"] for h in y] for x, y in zip(a.hypos, b.hypos))


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=40, help="first N sentences of the demo's test set")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quantize", choices=["none", "int8"], default="none")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from fairseq_stream.model.model_step import ModelStep
    from fairseq_stream.tools.session import TranslationSession

    session = TranslationSession.load(DEMO, os.path.join(DEMO, "checkpoint.pt"), bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    with open(os.path.join(DEMO, "test.es"), encoding="utf-8") as f:
        data = session.encode([line.rstrip("\n") for line in f][: args.limit])
    times: List[float] = []
    # scored_step: the scheduler's decoder call (ModelStep.step goes through it, so it is timed once)
    step = ModelStep.scored_step

    def timed(self: Any, *a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        out = step(self, *a, **k)
        times.append(time.perf_counter() - start)
        return out

    ModelStep.scored_step = timed  # type: ignore[method-assign]
    print(f"{args.limit} sentences, demo model, cpu float32{' int8' if args.quantize == 'int8' else ''}, "
          f"{args.threads} thread(s)\n\n| row | eager µs/step | native µs/step | native / eager | identical |\n|---|---|---|---|---|")
    for label, (gen, opts) in ROWS.items():
        per_step: Dict[str, List[float]] = {"eager": [], "native": []}
        outs: Dict[str, Any] = {}
        for _ in range(args.repeats):
            for mode in per_step:
                times.clear()
                outs[mode] = session.translate(data, search="fixed-ours", gen=gen,
                                               opts=dict(opts, step_mode=mode, quantize=args.quantize, native_loop="off"))
                if not times:  # the scheduler no longer calls the timed method
                    raise SystemExit("native_step_time.py: no call of ModelStep.scored_step was timed")
                per_step[mode].append(1e6 * sum(times) / len(times))
        eager, native = statistics.median(per_step["eager"]), statistics.median(per_step["native"])
        print(f"| {label} | {eager:.0f} | {native:.0f} | {native / eager:.2f} | {_same(outs['eager'], outs['native'])} |")


if __name__ == "__main__":
    main()
