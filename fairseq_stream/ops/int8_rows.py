"""The kernel half of ``--quantize int8``: one product with per-row activation scales.

``y_r = m_r · (Q(x_r / m_r) · W_q) · s_w + b`` with ``m_r = max |x_r|``: every row spans [-1, 1]
before one fixed quantisation scale, so a row's result never depends on the other rows of the
call. The C++ operator ``int8_row_linear`` (``csrc/int8_rows.cpp``) does the three passes in one
dispatcher call over fbgemm's packed u8s8 weights; :func:`reference_row_linear` is the same
arithmetic in PyTorch operations (identical numbers), used where the operator cannot be built.
The layer that holds the weights is :class:`fairseq_stream.model.quantize.RowInt8Linear`.

Activation bits: 8 on CPUs with AVX-512 VNNI (fbgemm multiplies with ``vpdpbusd``, 32-bit sums),
7 elsewhere: fbgemm's AVX2 kernel adds pairs of u8 × s8 products in 16 bits, which saturate with
8-bit activations (PyTorch's ``reduce_range`` for the same reason). The two widths give different
hypotheses from one model: ``FAIRSEQ_STREAM_INT8_ACTIVATION_BITS=7`` forces the narrow one on any
CPU (to test it, or to match a machine without VNNI); the closing statistics name the width used.
The variable is read, and any other value refused, only where int8 activations are used: a run
without int8 layers ignores it (a speculative run with ``--draft-quantize none`` was refused, a
``var-stream`` run was not; issue 80).
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

#: Forces the narrow (7-bit) activations on any CPU; 8 cannot be forced (fbgemm's AVX2 sums would saturate).
BITS_ENV = "FAIRSEQ_STREAM_INT8_ACTIVATION_BITS"

_bits: Optional[int] = None


def bits_setting() -> str:
    """:data:`BITS_ENV` as given, unchecked: what a cache of int8 copies is keyed by where int8 may not be used."""
    return os.environ.get(BITS_ENV, "").strip()


def forced_bits() -> bool:
    """Whether :data:`BITS_ENV` forces the width (it is 7); a value other than 7 is refused (one line)."""
    forced = bits_setting()
    if forced and forced != "7":
        raise FairseqStreamError(f"{BITS_ENV} may only be 7 (the narrow activations on any CPU), got {forced!r}; "
                                 "unset it for this CPU's own width (8 with AVX-512 VNNI, else 7)")
    return bool(forced)


def activation_bits() -> int:
    """8 where fbgemm multiplies with AVX-512 VNNI (32-bit sums), else 7, or 7 where
    :data:`BITS_ENV` asks for it (module docstring). Called only where int8 activations are used."""
    global _bits
    if forced_bits():
        return 7
    if _bits is None:
        from fairseq_stream.ops.extension import cpu_features

        _bits = 8 if "avx512_vnni" in cpu_features().split() else 7
    return _bits


def kernel() -> Any:
    """The loaded C++ operator, or None where it cannot be built."""
    from fairseq_stream.ops import extension

    return extension.load(KERNEL_SOURCE, KERNEL_FLAGS, "int8")


def kernel_name(bits: Optional[int] = None) -> str:
    """What multiplies the int8 layers here (with ``bits``-bit activations: the layers' own), for the statistics."""
    where = "" if kernel() is not None else " through PyTorch ops"
    bits = activation_bits() if bits is None else bits
    forced = f", {BITS_ENV}" if bits == 7 and forced_bits() else ""
    return f"fbgemm u8s8 with per-row {bits}-bit activations{forced}{where}"


def row_linear(x: Tensor, packed: Any, bias: Optional[Tensor], relu: bool, scale: float, zero_point: int,
               out_features: int) -> Tensor:
    """``x`` (..., in) → (..., out) through the packed int8 weights, per-row scales; ``relu`` fused."""
    if device_choice("int8_linear", x.device.type) == "cpp" and kernel() is not None and x.dtype == torch.float32:
        return torch.ops.fairseq_stream.int8_row_linear(x, packed, bias, relu, scale, zero_point)
    return reference_row_linear(x, packed, bias, relu, scale, zero_point, out_features)


def reference_row_linear(x: Tensor, packed: Any, bias: Optional[Tensor], relu: bool, scale: float,
                         zero_point: int, out_features: int) -> Tensor:
    """The operator's arithmetic in PyTorch operations (the same numbers)."""
    flat = x.reshape(-1, x.size(-1)).float()  # (N, in)
    m = flat.abs().amax(dim=1, keepdim=True)  # (N, 1)
    m = torch.where(m > 0, m, torch.ones_like(m))
    y = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(flat / m, scale, zero_point, packed)
    y = y * m
    if bias is not None:
        y = y + bias
    if relu:
        y = torch.relu(y)
    return y.view(*x.shape[:-1], out_features)
