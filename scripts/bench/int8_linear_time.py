#!/usr/bin/env python
"""One ``--quantize int8`` Linear call, by row count: our int8 product (``int8_row_linear``) in µs and GMAC/s (issue 78).

    OMP_NUM_THREADS=1 python scripts/bench/int8_linear_time.py                       # the demo model's shapes
    FAIRSEQ_STREAM_KERNEL_ISA=avx2 OMP_NUM_THREADS=1 python scripts/bench/int8_linear_time.py --shapes 8000x256 --rows 1,4,35

Each shape ``NxK`` is a layer of N outputs and K inputs, quantised as ``--quantize int8`` quantises a model's
weights (random float weights, one scale per output channel: about one weight of -128 in every other channel,
as in a trained model); each row count M a call on (M, K) inputs. A call is timed as the median of ``--repeats``
rounds of ``--calls`` calls after a warm-up; the call includes the rows' quantisation and the output's scaling.
The build is the one this process loads: ``FAIRSEQ_STREAM_KERNEL_ISA=avx2`` times the AVX2 build on a CPU with
more. ``--help`` lists the options (packed_linear_time.py's). The last column says whether the call equals the
operator's arithmetic in PyTorch operations (``reference_row_linear``) bit for bit (it always should).
"""
from __future__ import annotations

import os
import statistics
import sys
from typing import Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # packed_linear_time, beside this

import torch  # noqa: E402

from packed_linear_time import parse_shapes, per_call, shape_arguments  # noqa: E402
from fairseq_stream.tools.user_bench import cpu_name  # noqa: E402


def main(argv: Sequence[str] = None) -> None:
    args = shape_arguments(__doc__, "1,4,25,35", 200).parse_args(argv)
    from fairseq_stream.model.quantize import RowInt8Linear
    from fairseq_stream.ops import env_flags, int8_rows

    if int8_rows.kernel() is None:
        raise SystemExit("int8_linear_time.py: the C++ int8 operator cannot be built here")
    rows = [int(m) for m in args.rows.split(",")]
    print(f"{cpu_name()}, C++ kernels: {env_flags.kernel_isa()} build, {torch.get_num_threads()} thread(s), "
          f"torch {torch.__version__}; µs per call, median of {args.repeats}\n")
    print("| N x K | rows | µs | GMAC/s | weights of -128 | = reference |")
    print("|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(0)
    for n, k in parse_shapes(args.shapes):
        linear = torch.nn.Linear(k, n)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(n, k, generator=g) / k ** 0.5)
        layer = RowInt8Linear.of(linear)
        minus128 = int((layer.weight_int == -128).sum())
        for m in rows:
            x = torch.randn(m, k, generator=g)
            calls = max(1, args.calls // 10) if m >= 100 else args.calls
            layer(x)  # warm-up
            us = statistics.median(per_call(lambda: layer(x), calls) for _ in range(args.repeats))
            same = torch.equal(layer(x), layer.reference(x))
            print(f"| {n} x {k} | {m} | {us:.1f} | {m * n * k / us / 1e3:.1f} | {minus128} | "
                  f"{'yes' if same else '**no**'} |")


if __name__ == "__main__":
    main()
