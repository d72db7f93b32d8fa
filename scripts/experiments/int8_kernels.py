#!/usr/bin/env python
"""One-off experiment: which int8 Linear kernels pay off on this CPU, the measurement behind ``--quantize int8`` (docs/history/results-2026-11.md, int8 rounds, 2026-11-25).

Times one feed-forward layer (``fc1``) and the output projection of the demo model at
decoding shapes (rows = hypotheses in a step) in float32 (PyTorch's and oneDNN's product),
PyTorch's dynamic int8 (fbgemm, one activation scale per call), ours (our own int8 product with one
activation scale per row, :mod:`fairseq_stream.model.quantize`; fbgemm's with per-row scales before 2026-12-05) and, when installed, torchao's int8
dynamic-activation and weight-only configurations (eager mode). Prints microseconds per call
(median of repeats).

    OMP_NUM_THREADS=1 python scripts/experiments/int8_kernels.py [--rows 5 50 320] [--calls 100]
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def per_call_us(layer: Callable[[torch.Tensor], Any], x: torch.Tensor, calls: int) -> float:
    layer(x)  # warm-up (packing, first-call allocations)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            layer(x)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def variants(linear: torch.nn.Linear, ours: Any) -> Dict[str, Any]:
    import warnings

    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    from fairseq_stream.model.linear_kernels import OneDnnLinear

    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices
        warnings.simplefilter("ignore")
        dynamic = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear: per_channel_dynamic_qconfig},
                                   dtype=torch.qint8)[0]
    out: Dict[str, Any] = {"float32": linear, "float32 oneDNN": OneDnnLinear.of(linear),
                           "fbgemm int8 per call": dynamic, "ours: int8 per row": ours}
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, quantize_
    except ImportError:
        return out
    for name, config in (("torchao int8 dyn", Int8DynamicActivationInt8WeightConfig()),
                         ("torchao int8 weight-only", Int8WeightOnlyConfig())):
        module = copy.deepcopy(linear)
        quantize_(module, config)
        out[name] = module
    return out


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[5, 50, 320])
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from fairseq_stream.tools.demo_files import find_demo_dir
    from fairseq_stream.model.quantize import prepare_models
    from fairseq_stream.tools.session import TranslationSession

    demo = find_demo_dir()
    session = TranslationSession.load(demo, os.path.join(demo, "checkpoint.pt"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    model = session.models[0]
    int8 = prepare_models([model], "int8")[0]
    layers = {"fc1": (model.decoder.layers[0].fc1, int8.decoder.layers[0].fc1),
              "output projection": (model.decoder.output_projection, int8.decoder.output_projection)}
    print("| layer | rows | " + " | ".join(variants(*layers["fc1"])) + " |")
    print("|---|---|" + "---|" * len(variants(*layers["fc1"])))
    with torch.no_grad():
        for name, (linear, ours) in layers.items():
            for rows in args.rows:
                x = torch.randn(rows, linear.in_features)
                cells = [f"{per_call_us(m, x, args.calls):.0f} µs" for m in variants(linear, ours).values()]
                print(f"| {name} {linear.in_features}→{linear.out_features} | {rows} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
