"""The kernel half of ``--cpu-matmul packed``: a float32 product over weights packed once (issue 78).

At the few rows of a batch-1 or k = 5 step a decoder's products are small (a 256 x 256 layer at one
row: ~65k multiply-adds), and what a library call costs before its arithmetic dominates: oneDNN's
packed product through PyTorch takes ~25-30 us a call at one row, ~20 calls a step. This kernel
(``csrc/packed_linear.cpp``) takes a few: weights in panels of 16 columns (one 64-byte load per k),
register tiles of rows x panels, bias and ReLU applied as the tile is stored.

**Its arithmetic is the same at every row count, thread count and instruction set**: output
``y[m, n]`` is one fused multiply-add per ``k`` in the order ``k = 0 .. K-1`` into one accumulator,
then ``+ b[n]``, then the ReLU. So a row's result never depends on the rows that share the call
(var-stream ≡ var-batch when beams regroup), and the AVX-512, AVX2 and scalar builds give the same
bits (an FMA is exactly rounded whatever its width). It is not oneDNN's or MKL's summation order:
its results differ from theirs in the last bits, and this kernel is its own reference (``reference``
below is the same sum in float64 for the tests' tolerance; ``tests/unit/test_packed_linear.py``).

**Half panels, where they lose nothing**: when every weight of a layer is a float16 value — a checkpoint
saved in float16, as fairseq's ``--fp16`` training and ``tools/checkpoint.py``'s export save them, then
loaded as float32 — :func:`pack` keeps the panels as those float16 bits, and the kernel widens each
to float32 (exact) before the same multiply-adds: the same bits as float32 panels, half the bytes a
step reads. At one row a decoder step's products are bound by reading their weights (the small
models' from the cache, the base-sized one's from memory), so this is most of their time. A layer
with one weight that float16 cannot hold keeps float32 panels. ``FAIRSEQ_STREAM_NO_HALF_PANELS=1``
keeps float32 panels everywhere (for A/B measurements; the outputs are the same).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import extension
from fairseq_stream.ops.env_flags import env_flag

#: The widest SIMD of this CPU; the FMAs are explicit intrinsics (-ffp-contract=off keeps the rest as written).
KERNEL_FLAGS: Tuple[str, ...] = ("-O3", "-march=native", "-ffp-contract=off")
_SOURCE = "packed_linear.cpp"


def kernel() -> Any:
    """The built module (ops ``packed_linear_pack`` and ``packed_linear``), or None where it cannot be built."""
    return extension.load(_SOURCE, KERNEL_FLAGS, "packed-product")


def failure() -> str:
    """Why :func:`kernel` returned None."""
    if extension.disabled():
        return "FAIRSEQ_STREAM_NO_KERNEL is set"
    return extension.failures.get(_SOURCE, "not built")


def pack(weight: Tensor) -> Tensor:
    """``weight`` (N, K), as ``nn.Linear`` holds it, in panels (ceil(N / 16), K, 16): float16 where every weight
    is a float16 value (:func:`half_exact`; the module docstring), else float32; needs :func:`kernel`."""
    panels = torch.ops.fairseq_stream.packed_linear_pack(weight.detach().float())
    if half_exact(weight) and not env_flag("FAIRSEQ_STREAM_NO_HALF_PANELS"):
        return panels.half()  # exact: every value is a float16 (the zero padding too)
    return panels


def half_exact(weight: Tensor) -> bool:
    """Whether every entry of ``weight`` is a float16 value (widening its float16 copy gives it back exactly)."""
    w = weight.detach().float()
    return bool(torch.equal(w.half().float(), w))


def linear(x: Tensor, packed: Tensor, bias: Optional[Tensor], out_features: int, relu: bool = False) -> Tensor:
    """``relu?(x W^T + b)`` for ``x`` (..., K) float32 on a CPU; ``packed`` from :func:`pack`."""
    return torch.ops.fairseq_stream.packed_linear(x, packed, bias, out_features, relu)


def reference(x: Tensor, weight: Tensor, bias: Optional[Tensor], relu: bool = False) -> Tensor:
    """The same product in float64 (what the kernel's float32 result is compared with, to a tolerance)."""
    y = x.double() @ weight.double().t()
    if bias is not None:
        y = y + bias.double()
    return y.clamp_min(0) if relu else y
