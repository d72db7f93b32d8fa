#!/usr/bin/env python
"""Where a k=5 decode of our strategies spends its time on a CPU, next to CTranslate2's total.

    OMP_NUM_THREADS=1 python scripts/bench/time_breakdown.py [--limit 100] [--beam 5] [--search var-stream fixed-ours]
    OMP_NUM_THREADS=1 python scripts/bench/time_breakdown.py --step-mode native --data W/bin \
        --path W/checkpoints/checkpoint_last.pt --bpe-codes W/bpe.codes --src W/raw/test.es --ref W/raw/test.en

Wraps the package's functions with wall-clock timers (1 thread; the wrappers cost microseconds
per call) and splits one decode of the first ``--limit`` sentences (the demo's, or ``--src``'s), after an untimed
warm-up, into: the encoder (``ModelStep.encode``/``admit``: encoder layers and the encoder-attention
keys/values), the decoder layers (``BlockDecoder.forward``), the output projection
(``BlockDecoder.logits``), the search step (the strategy's ``step``: the fused top-k of the
output layer and the beam step operator, listed apart), the cache reorder (``ModelStep.select``/
``accept``) and the rest (the scheduler's Python per step: admission, merges, bookkeeping).
With ctranslate2 installed the last line is CTranslate2's decode time on the same sentences.
It times parts inside one decode, which the harness (``python -m fairseq_stream.tools.bench``, whole
runs) does not; a whole run's time is the harness's.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_vs_ctranslate2, beside this

PARTS = [("encoder", "encoder"), ("decoder layers", "decoder"), ("output projection", "logits"),
         ("native decoder step (layers and output projection)", "native"),
         ("search step", "strategy"), ("  of which fused top-k + normaliser", "topk"),
         ("  of which beam step operator", "operator"), ("cache reorder", "reorder")]


@contextmanager
def timers(totals: Dict[str, float], search_class: type) -> Iterator[None]:
    """Patch the timed functions (restored on exit); their seconds accumulate in ``totals``."""
    from fairseq_stream.model import model_step
    from fairseq_stream.model import block_decoder
    from fairseq_stream.ops import backends
    from fairseq_stream.search import output

    targets = [(model_step.ModelStep, "encode", "encoder"), (model_step.ModelStep, "admit", "encoder"),
               (model_step.ModelStep, "select", "reorder"), (model_step.ModelStep, "accept", "reorder"),
               (block_decoder.BlockDecoder, "forward", "decoder"),
               (block_decoder.BlockDecoder, "logits", "logits"),
               (block_decoder.BlockDecoder, "forward_native", "native"),
               (output.OutputScorer, "top", "topk"), (backends.KernelRunner, "run", "operator"),
               (search_class, "step", "strategy")]
    with timed_calls(targets, totals):
        yield


@contextmanager
def timed_calls(targets: Sequence[Tuple[Any, str, str]], totals: Dict[str, float]) -> Iterator[None]:
    """Each ``(owner, name, key)``: ``owner.name`` wrapped by a wall-clock timer whose seconds add to
    ``totals[key]``, restored on exit (also step_profile.py's)."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]

    def wrap(fn: Any, key: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                totals[key] += time.perf_counter() - start
        return timed

    for owner, name, key in targets:
        setattr(owner, name, wrap(getattr(owner, name), key))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def breakdown(session: Any, dataset: Any, search: str, beam: int, quantize: str,
              step_mode: str) -> Tuple[float, Dict[str, float]]:
    from fairseq_stream.search.registry import get_search

    # every step through the parts timed here (the native greedy loop would run a sentence's steps in one call)
    opts = {"quantize": quantize, "step_mode": step_mode, "native_loop": "off"}
    session.translate(dataset, search=search, gen={"beam": beam}, opts=opts)  # warm-up, untimed
    totals: Dict[str, float] = defaultdict(float)
    with timers(totals, get_search(search).strategy):
        result = session.translate(dataset, search=search, gen={"beam": beam}, opts=opts)
    return result.stats.wall_seconds, totals


def ctranslate2_total(session: Any, sources: List[str], beam: int, compute_type: str, model_dir: str) -> float:
    import ctranslate2

    tokens = [session.source_text(s).split() for s in sources]
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type, intra_threads=1,
                                        inter_threads=1)
    translator.translate_batch(tokens[:8], beam_size=beam)
    start = time.perf_counter()
    translator.translate_batch(tokens, beam_size=beam, max_batch_size=64, length_penalty=1.0, max_decoding_length=200)
    return time.perf_counter() - start


def print_rows(label: str, wall: float, totals: Dict[str, float]) -> None:
    counted = sum(totals[k] for k in ("encoder", "strategy", "reorder", "decoder", "logits", "native"))
    cells = [(name, totals[key]) for name, key in PARTS] + [("rest (Python per step, scheduler)", wall - counted)]
    for name, seconds in cells:
        print(f"| {label} | {name} | {seconds:.2f} | {seconds / wall:.0%} |")
    print(f"| {label} | **total** | {wall:.2f} | 100% |")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--search", nargs="+", default=["var-stream", "fixed-ours"])
    parser.add_argument("--step-mode", default="eager", choices=["eager", "native", "static", "auto"],
                        help="the decoder step to split (native: one C++ call for the layers and the projection)")
    from bench_vs_ctranslate2 import add_model_arguments, convert, languages, load_model

    add_model_arguments(parser)  # --data, --path, --bpe-codes, --src, --ref: the demo's by default
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    src_lang, tgt_lang = languages(args)
    session, sources, dataset = load_model(args, args.limit)
    print(f"{len(sources)} sentences, beam {args.beam}, --step-mode {args.step_mode}, 1 thread\n")
    print("| run | part | seconds | share |\n|---|---|---|---|")
    for search in args.search:
        for quantize in ("none", "int8"):
            label = f"{search} {'float32' if quantize == 'none' else 'int8'}"
            print_rows(label, *breakdown(session, dataset, search, args.beam, quantize, args.step_mode))
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return
    with tempfile.TemporaryDirectory() as model_dir:
        convert(args.path, args.data, model_dir, src_lang, tgt_lang)
        for compute_type in ("float32", "int8"):
            print(f"| CTranslate2 {compute_type} | **total** | "
                  f"{ctranslate2_total(session, sources, args.beam, compute_type, model_dir):.2f} | |")


if __name__ == "__main__":
    main()
