"""The kernel half of ``--quantize int8``: our own int8 product with one activation scale per row.

``y_r = ((S_r · s_w) · (m_r / L)) + b`` with ``m_r = max |x_r|``, ``S_r = Σ_k q_rk · W_q[:, k]`` and
``q_rk = round((x_rk / m_r) · L)``: every row spans [-L, L] before the integer product, so a row's
result never depends on the other rows of the call. ``L`` is 127 (8-bit activations) on every CPU,
63 where ``FAIRSEQ_STREAM_INT8_ACTIVATION_BITS=7`` asks for it (7 or 8; another value is refused). The C++ operator ``int8_row_linear``
(``csrc/int8_rows.cpp``: weights packed once for AVX-512 VNNI's ``vpdpbusd``, an exact 16-bit path on
AVX2, a scalar one elsewhere) gives the same bits on every CPU kind, row count and thread count: the
sum is an integer, the rest is per element in one order. :func:`reference_row_linear` is the same
arithmetic in PyTorch operations (identical numbers: the integer sum in float64 is exact), used where
the operator cannot be built.

The operator replaced fbgemm's u8s8 product (through PyTorch's packed parameters): at the one to
few rows of a batch-1 or k = 5 step its per-call work cost more than the arithmetic, and on CPUs
without VNNI its 16-bit pair sums saturated with 8-bit activations, so those CPUs ran 7 bits and
decoded other hypotheses. The variable is read, and any other value refused, only where int8
activations are used: a run without int8 layers ignores it (issue 80).
"""
from __future__ import annotations

import os
from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops.backends import device_choice

#: The C++ operator of the per-row passes; no -ffast-math (a NaN row stays NaN), no fused multiply-adds.
KERNEL_SOURCE = "int8_rows.cpp"
KERNEL_FLAGS: Tuple[str, ...] = ("-O3", "-fopenmp", "-march=native", "-ffp-contract=off")

#: The activations' bits: 7 or 8 (8 where unset).
BITS_ENV = "FAIRSEQ_STREAM_INT8_ACTIVATION_BITS"

_bits: Optional[int] = None


def bits_setting() -> str:
    """:data:`BITS_ENV` as given, unchecked: what a cache of int8 copies is keyed by where int8 may not be used."""
    return os.environ.get(BITS_ENV, "").strip()


def forced_bits() -> bool:
    """Whether :data:`BITS_ENV` sets the width (7 or 8); another value is refused (one line)."""
    forced = bits_setting()
    if forced and forced not in ("7", "8"):
        raise FairseqStreamError(f"{BITS_ENV} may only be 7 or 8 (the activations' bits), got {forced!r}; "
                                 "unset it for the 8-bit activations")
    return bool(forced)


def activation_bits() -> int:
    """8, or what :data:`BITS_ENV` asks for (module docstring). Called only where int8 activations are used."""
    return int(bits_setting()) if forced_bits() else 8


def kernel() -> Any:
    """The loaded C++ operator, or None where it cannot be built."""
    from fairseq_stream.ops import extension

    return extension.load(KERNEL_SOURCE, KERNEL_FLAGS, "int8")


def kernel_name(bits: Optional[int] = None) -> str:
    """What multiplies the int8 layers here (with ``bits``-bit activations: the layers' own), for the statistics."""
    where = "" if kernel() is not None else " through PyTorch ops"
    bits = activation_bits() if bits is None else bits
    forced = f", {BITS_ENV}" if bits == 7 else ""
    return f"s8 x per-row {bits}-bit activations{forced}{where}"


def pack(qweight: Tensor) -> Tuple[Tensor, Tensor]:
    """``qweight`` (N, K) int8 → (panels, column offsets) for :func:`row_linear`; needs :func:`kernel`."""
    return torch.ops.fairseq_stream.int8_rows_pack(qweight.contiguous())


def row_linear(x: Tensor, layer: Any, relu: bool = False) -> Tensor:
    """``x`` (..., in) → (..., out) through ``layer``'s int8 weights (a ``RowInt8Linear``), per-row scales; ``relu`` fused."""
    if (layer.packed is not None and device_choice("int8_linear", x.device.type) == "cpp"
            and x.dtype == torch.float32):
        return torch.ops.fairseq_stream.int8_row_linear(x, layer.packed, layer.offset, layer.wscale, layer.bias,
                                                        layer.out_features, relu, layer.levels)
    return reference_row_linear(x, layer.weight_int, layer.wscale, layer.bias, relu, layer.levels)


def reference_row_linear(x: Tensor, weight: Tensor, wscale: Tensor, bias: Optional[Tensor], relu: bool,
                         levels: int) -> Tensor:
    """The operator's arithmetic in PyTorch operations (the same numbers); ``weight`` (N, K) int8."""
    flat = x.reshape(-1, x.size(-1)).float()  # (M, K)
    finite = torch.isfinite(flat).all(dim=1, keepdim=True)
    safe = torch.where(finite, flat, torch.zeros_like(flat))
    m = safe.abs().amax(dim=1, keepdim=True) if flat.size(1) else torch.zeros_like(flat[:, :1])
    m = torch.where(m > 0, m, torch.ones_like(m))
    q = torch.round((safe / m) * float(levels))
    s = (q.double() @ weight.double().t()).float()  # an integer sum: exact in float64, one rounding to float32
    rscale = torch.where(finite, m / float(levels), torch.full_like(m, float("nan")))
    y = (s * wscale) * rscale
    if bias is not None:
        y = y + bias
    if relu:
        y = torch.where(y > 0, y, torch.zeros_like(y))
    return y.view(*x.shape[:-1], weight.size(0))
