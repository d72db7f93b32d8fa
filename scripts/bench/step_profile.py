#!/usr/bin/env python
"""Where a decoder step's time goes at few rows, per part, beside CTranslate2's whole step (issue 78, item 1).

    OMP_NUM_THREADS=1 python scripts/bench/step_profile.py --limit 100
    OMP_NUM_THREADS=1 python scripts/bench/step_profile.py --rows greedy --cpu-matmul packed,onednn
    OMP_NUM_THREADS=1 python scripts/bench/step_profile.py --rows greedy,block4 --quantize int8
    OMP_NUM_THREADS=1 python scripts/bench/step_profile.py --data W/bin --path W/checkpoint.pt \\
        --bpe-codes W/bpe.codes --src W/test.en --ref W/test.es

Rows (``--rows``): ``greedy`` (``fixed-ours --beam 1 --stream-capacity 1``: one row a step), ``block4``
(``gs-jacobi --jacobi-block 4 --jacobi-init tail --jacobi-parallel always`` at capacity 1: a sliding block of 4 query tokens of one row every
step, as a speculative verification's γ + 1 = 4; the default ``pad`` init's aligned windows average ~2.6 tokens) and ``k5``
(``fixed-ours --beam 5 --stream-capacity 5``: five sentences of five rows, ~25 rows a step). Each row
decodes the first ``--limit`` sentences once untimed, then twice timed, through the Python session:

1. **Wall split** (wrapped functions, perf_counter): the C++ decoder step (``decoder_step``, or the native
   loops' ``decoder_greedy_search`` / ``decoder_jacobi``, their steps' search included; the layers and
   the output projection), the Python around it (``forward_native``), the model step's Python
   (``ModelStep.scored_step``), the strategy's search step (fused top-k + normaliser, score edits, the beam
   step operator, and their Python), the encoder (``refill``: admission and encoding) and the rest
   (the scheduler's Python per step). In µs per step.
2. **Operator self-time** (``torch.profiler``, a third run; its own overhead inflates small operators):
   the layers' products, the output projection (told apart by their shape), attention, layer norm,
   the search operators (``topk_lse``, ``beam_step``, ``jacobi_step``) and every other aten operator
   (element-wise, views, allocation), in µs per step.

``--quantize int8`` profiles our int8 products (and CTranslate2's int8). With ``ctranslate2`` installed the last line
per row is CTranslate2's decode time of the same sentences
(greedy: ``max_batch_size=1``; k5: beam 5, ``max_batch_size=5``) divided by our step count — the same
tokens when the outputs agree — so "CTranslate2 µs/step" is comparable with our whole step. Warmed,
in one process: a profile, not a user's figure (``python -m fairseq_stream.tools.user_bench`` gives those).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_vs_ctranslate2, beside this

import torch  # noqa: E402
from time_breakdown import timed_calls  # noqa: E402  (beside this)

from fairseq_stream.tools.user_bench import cpu_name  # noqa: E402

ROWS: Dict[str, Tuple[str, Dict[str, Any], Dict[str, Any], int, int]] = {
    # name: (search, gen, opts, CTranslate2 beam, CTranslate2 max_batch_size)
    "greedy": ("fixed-ours", {"beam": 1}, {"stream_capacity": 1}, 1, 1),
    # --jacobi-parallel always: under the default (auto) a run whose blocks cost more per verified token than one
    # position a call runs one position a call, and the row measured a one-token step, not a block
    "block4": ("gs-jacobi", {"beam": 1}, {"stream_capacity": 1, "jacobi_block": 4, "jacobi_init": "tail",
                                          "jacobi_parallel": "always"}, 1, 1),
    "k5": ("fixed-ours", {"beam": 5}, {"stream_capacity": 5}, 5, 5),
}
WALL_PARTS = [("C++ decoder step (layers + output projection)", "cpp"), ("Python around it (forward_native)", "native_py"),
              ("model step's Python (scored_step)", "model_py"), ("search step (top-k, edits, beam operator)", "search"),
              ("encoder (refill)", "refill")]


def wall_split(session: Any, dataset: Any, search: str, gen: Dict[str, Any], opts: Dict[str, Any]) -> Tuple[float, Dict[str, float], int]:
    """(wall seconds, part → seconds, steps) of one decode, the parts exclusive of each other."""
    from fairseq_stream.engine import scheduler
    from fairseq_stream.model import block_decoder, model_step
    from fairseq_stream.search import region

    ops = torch.ops.fairseq_stream
    ops.decoder_step  # noqa: B018  (resolved once, so that the namespace holds it and it can be wrapped)
    t: Dict[str, float] = collections.defaultdict(float)
    ops.decoder_greedy_search, ops.decoder_jacobi  # noqa: B018
    # the native loops (--native-loop auto) run a sentence's greedy steps, or its Jacobi iterations (block4), their
    # search included, in one C++ call each
    targets = [(ops, "decoder_step", "cpp"), (ops, "decoder_greedy_search", "cpp"), (ops, "decoder_jacobi", "cpp"),
               (block_decoder.BlockDecoder, "forward_native", "native"),
               (block_decoder.BlockDecoder, "greedy_search_native", "native"),
               (block_decoder.BlockDecoder, "verify_native", "native"),
               (model_step.ModelStep, "scored_step", "scored"), (model_step.ModelStep, "greedy_search", "scored"),
               (model_step.ModelStep, "verify", "scored"),
               (region.SearchInRegion, "step", "search"), (scheduler.StreamingScheduler, "_refill", "refill")]
    with timed_calls(targets, t):
        start = time.perf_counter()
        result = session.translate(dataset, search=search, gen=gen, opts=opts)
        wall = time.perf_counter() - start
    parts = {"cpp": t["cpp"], "native_py": t["native"] - t["cpp"], "model_py": t["scored"] - t["native"],
             "search": t["search"], "refill": t["refill"]}
    parts["rest"] = wall - sum(parts.values())
    return wall, parts, int(result.stats.timesteps)


def operator_split(session: Any, dataset: Any, search: str, gen: Dict[str, Any], opts: Dict[str, Any],
                   vocab: int) -> Dict[str, float]:
    """Operator self-time in seconds by group, from torch.profiler (shapes recorded: the output projection
    is the product whose output has the vocabulary's width)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        session.translate(dataset, search=search, gen=gen, opts=opts)
    groups: Dict[str, float] = collections.defaultdict(float)
    products = ("fairseq_stream::packed_linear", "mkldnn::_linear_pointwise", "fairseq_stream::int8_row_linear",
                "aten::addmm", "aten::mm", "aten::linear")
    for event in prof.key_averages(group_by_input_shape=True):
        seconds, name = event.self_cpu_time_total / 1e6, event.key
        shapes = event.input_shapes or []
        if name in products:
            packed_rows = [s for s in shapes if len(s) == 3 and s[2] == 16]  # (panels, K, 16)
            out = (packed_rows[0][0] * 16 if packed_rows else shapes[1][0] if len(shapes) > 1 and shapes[1] else 0)
            groups["output projection" if out >= vocab else "layer products"] += seconds
        elif name == "fairseq_stream::decode_attention" or "attention" in name:
            groups["attention"] += seconds
        elif "layer_norm" in name:
            groups["layer norm"] += seconds
        elif name in ("fairseq_stream::topk_lse", "fairseq_stream::beam_step", "fairseq_stream::jacobi_step"):
            groups["search operators"] += seconds
        elif name in ("fairseq_stream::decoder_step", "fairseq_stream::decoder_greedy",
                      "fairseq_stream::decoder_greedy_search", "fairseq_stream::decoder_jacobi"):
            groups["the C++ step's own code"] += seconds
        else:
            groups["other aten operators"] += seconds
    return groups


def ctranslate2_seconds(session: Any, sources: List[str], beam: int, batch: int, model_dir: str,
                        compute_type: str = "float32") -> float:
    import ctranslate2

    tokens = [session.source_text(s).split() for s in sources]
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type, intra_threads=1,
                                        inter_threads=1)
    translator.translate_batch(tokens[:4], beam_size=beam, max_batch_size=batch)
    start = time.perf_counter()
    translator.translate_batch(tokens, beam_size=beam, max_batch_size=batch, length_penalty=1.0,
                               max_decoding_length=200)
    return time.perf_counter() - start


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--rows", default="greedy,block4,k5", help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--cpu-matmul", default="packed", help="comma-separated --cpu-matmul values, a column each")
    parser.add_argument("--quantize", default="none", choices=("none", "int8"),
                        help="--quantize of every column (and CTranslate2's compute type: int8 or float32)")
    from bench_vs_ctranslate2 import add_model_arguments, convert, languages, load_model

    add_model_arguments(parser)  # --data, --path, --bpe-codes, --src, --ref: the demo's by default
    args = parser.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        parser.error(f"--rows: unknown {', '.join(bad)} (choose from {', '.join(ROWS)})")
    libraries = [m for m in args.cpu_matmul.split(",") if m]
    torch.set_num_threads(1)
    src_lang, tgt_lang = languages(args)
    session, sources, dataset = load_model(args, args.limit)
    vocab = len(session.task.target_dictionary)
    ct2_dir: Optional[str] = None
    try:
        import ctranslate2  # noqa: F401

        ct2_dir = tempfile.mkdtemp(prefix="step_profile_ct2_")
        convert(args.path, args.data, ct2_dir, src_lang, tgt_lang)
    except ImportError:
        pass
    print(f"{cpu_name()}, 1 thread, torch {torch.__version__}, {len(sources)} sentences, --quantize {args.quantize}; "
          "µs per decoder step "
          "(warmed; the wall split from the faster of two timed runs)\n")
    for row in rows:
        search, gen, opts, ct2_beam, ct2_batch = ROWS[row]
        header = " | ".join(f"`{m}`" for m in libraries)
        print(f"### {row}: `{search}` {' '.join(f'{k}={v}' for k, v in {**gen, **opts}.items())}\n")
        print(f"| part | {header} |\n|---|{'---|' * len(libraries)}")
        columns = []
        for library in libraries:
            run_opts = dict(opts, cpu_matmul=library, quantize=args.quantize)
            session.translate(dataset, search=search, gen=gen, opts=run_opts)  # warm-up
            wall, parts, steps = min((wall_split(session, dataset, search, gen, run_opts) for _ in range(2)),
                                     key=lambda r: r[0])
            columns.append((wall, parts, steps, operator_split(session, dataset, search, gen, run_opts, vocab)))
        for name, key in WALL_PARTS + [("the scheduler's Python (the rest)", "rest")]:
            print(f"| {name} | " + " | ".join(f"{1e6 * c[1][key] / c[2]:.0f}" for c in columns) + " |")
        print("| **whole step** (wall / steps) | " + " | ".join(f"**{1e6 * c[0] / c[2]:.0f}** ({c[2]} steps)"
                                                            for c in columns) + " |")
        for group in ("layer products", "output projection", "attention", "layer norm", "search operators",
                      "the C++ step's own code", "other aten operators"):
            print(f"| operators: {group} (profiler) | " + " | ".join(f"{1e6 * c[3].get(group, 0.0) / c[2]:.0f}"
                                                                     for c in columns) + " |")
        if ct2_dir is not None:
            ct2_type = "int8" if args.quantize == "int8" else "float32"
            seconds = ctranslate2_seconds(session, sources, ct2_beam, ct2_batch, ct2_dir, ct2_type)
            print(f"| CTranslate2 {ct2_type} (its decode / our steps) | " + " | ".join(
                f"{1e6 * seconds / c[2]:.0f} ({seconds:.2f} s)" for c in columns) + " |")
        print()


if __name__ == "__main__":
    main()
