#!/usr/bin/env python
"""One float32 Linear call, by library and row count: the packed kernel, oneDNN and PyTorch's default (issue 78).

    OMP_NUM_THREADS=1 python scripts/bench/packed_linear_time.py                        # the demo model's shapes
    OMP_NUM_THREADS=1 python scripts/bench/packed_linear_time.py --shapes 512x512,2048x512,512x2048 --rows 1,5,25

Each shape ``NxK`` is a layer of N outputs and K inputs (random weights); each row count M a call on
(M, K) inputs. A call is timed as the median of ``--repeats`` rounds of ``--calls`` calls after a
warm-up, the three libraries interleaved per round. The table gives microseconds per call and the
packed kernel's ratio to oneDNN (``--cpu-matmul onednn``, the default before ``packed``) and to
``torch`` (MKL's sgemm through ``F.linear``); the last column says whether the packed kernel's rows
equal its own one-row calls bit for bit (they always should: one order of sums whatever the rows). The weights are
float16 values (as a checkpoint saved in float16 holds them), so the packed kernel is timed on float32 panels and
on half panels (the float16 bits, widened in the kernel: the same results, half the bytes; ``half / packed``), and
the last column checks the half panels' bits too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, List, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

import torch  # noqa: E402

from fairseq_stream.tools.user_bench import cpu_name  # noqa: E402

# The demo model (3 + 3 x 256, FFN 1024, 6,024 target words): q/k/v stacked, out/encoder q, fc1, fc2, output.
DEMO_SHAPES = "768x256,256x256,1024x256,256x1024,6024x256"


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def parse_shapes(text: str) -> List[Tuple[int, int]]:
    shapes = []
    for item in text.split(","):
        n, _, k = item.partition("x")
        if not (n.isdigit() and k.isdigit()):
            raise SystemExit(f"packed_linear_time.py: --shapes: {item!r} is not NxK (e.g. 1024x256)")
        shapes.append((int(n), int(k)))
    return shapes


def shape_arguments(doc: str, rows: str, calls: int) -> argparse.ArgumentParser:
    """The options of a per-call benchmark over layer shapes and row counts (this script's and int8_linear_time.py's)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=DEMO_SHAPES, help="comma-separated NxK (outputs x inputs)")
    parser.add_argument("--rows", default=rows, help="comma-separated row counts M")
    parser.add_argument("--calls", type=int, default=calls, help="calls per timed round (a tenth at 100+ rows)")
    parser.add_argument("--repeats", type=int, default=5)
    return parser


def main(argv: Sequence[str] = None) -> None:
    args = shape_arguments(__doc__, "1,4,25,64,300", 100).parse_args(argv)
    from fairseq_stream.ops import packed_linear

    if packed_linear.kernel() is None:
        raise SystemExit(f"packed_linear_time.py: the packed kernel cannot be built here ({packed_linear.failure()})")
    onednn = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    rows = [int(m) for m in args.rows.split(",")]
    print(f"{cpu_name()}, {torch.get_num_threads()} thread(s), torch {torch.__version__}; microseconds per call, "
          f"median of {args.repeats}\n")
    print("| N x K | rows | packed | half panels | oneDNN | torch | half / packed | packed / oneDNN | packed / torch "
          "| rows = one-row calls, half = packed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(0)
    for n, k in parse_shapes(args.shapes):
        weight = (torch.randn(n, k, generator=g) / k ** 0.5).half().float()
        bias = torch.randn(n, generator=g)
        packed = torch.ops.fairseq_stream.packed_linear_pack(weight)  # float32 panels
        half = packed_linear.pack(weight)  # half panels (float32 under FAIRSEQ_STREAM_NO_HALF_PANELS=1)
        reordered = torch.ops.mkldnn._reorder_linear_weight(weight, None) if onednn else None
        for m in rows:
            x = torch.randn(m, k, generator=g)
            fns = {"packed": lambda: packed_linear.linear(x, packed, bias, n),
                   "half": lambda: packed_linear.linear(x, half, bias, n),
                   "torch": lambda: torch.nn.functional.linear(x, weight, bias)}
            if onednn:
                fns["onednn"] = lambda: torch.ops.mkldnn._linear_pointwise(x, reordered, bias, "none", [], "")
            calls = max(1, args.calls // 10) if m >= 100 else args.calls
            times = {name: [] for name in fns}
            for fn in fns.values():
                fn()
            for _ in range(args.repeats):
                for name, fn in fns.items():
                    times[name].append(per_call(fn, calls))
            med = {name: statistics.median(t) for name, t in times.items()}
            whole = packed_linear.linear(x, packed, bias, n)
            same = all(torch.equal(packed_linear.linear(x[i:i + 1], packed, bias, n), whole[i:i + 1])
                       for i in range(min(m, 8))) and torch.equal(packed_linear.linear(x, half, bias, n), whole)
            dnn = med.get("onednn")
            dnn_cell, dnn_ratio = ("—", "—") if dnn is None else (f"{dnn:.1f}", f"{med['packed'] / dnn:.2f}×")
            print(f"| {n} x {k} | {m} | {med['packed']:.1f} | {med['half']:.1f} | {dnn_cell} | {med['torch']:.1f} | "
                  f"{med['half'] / med['packed']:.2f}× | {dnn_ratio} | {med['packed'] / med['torch']:.2f}× | "
                  f"{'yes' if same else '**no**'} |")


if __name__ == "__main__":
    main()
