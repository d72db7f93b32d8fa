"""Attention of one query per row (a decoder step, ``b = 1``) on a CPU: one C++ operator.

``csrc/decode_attention.cpp`` computes, for each row ``r`` and head ``h``,
``softmax(scale·q[r,h]·K[n,h,:]ᵀ)·V[n,h,:]`` over the visible keys, with ``n = kv_row[r]``:
the row's own self-attention cache, or its sentence's encoder keys, addressed per row, so
the rows of a variable-width beam share their sentence's encoder states without the padded
per-sentence layout or a gathered copy. PyTorch's CPU ``scaled_dot_product_attention`` runs
this shape at about 6 GB/s of keys and values (its kernel works in query blocks); the decoder
step's attention is bound by reading the cache, so a kernel that streams it is what pays.

Each (row, head) is computed alone by the same instructions, so a row's result never depends
on the rows beside it (``var-stream`` ≡ ``var-batch``). :func:`reference` is the PyTorch
definition the tests compare it with; where the kernel cannot be built the step uses
PyTorch's attention as before.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from fairseq_stream.ops import extension
from fairseq_stream.ops.backends import device_choice

#: As the output layer's kernel (fused_output.KERNEL_FLAGS): the widest SIMD of this CPU, a
#: vectorised exp (hence -ffast-math: no infinities enter the arithmetic, masked keys are skipped).
KERNEL_FLAGS = ("-O3", "-ffast-math", "-fopenmp", "-march=native")
_SOURCE = "decode_attention.cpp"


def cpu_kernel() -> Any:
    """The built kernel module (op ``torch.ops.fairseq_stream.decode_attention``), or None."""
    return extension.load(_SOURCE, KERNEL_FLAGS, "attention")


def usable(query: Tensor) -> bool:
    """Whether the kernel runs ``query`` (float32 on a CPU, kernel built)."""
    return (device_choice("attention", query.device.type) == "cpp" and query.dtype == torch.float32
            and cpu_kernel() is not None)


def attend(query: Tensor, keys: Tensor, values: Tensor, scale: float, *, kv_row: Optional[Tensor] = None,
           last: Optional[Tensor] = None, key_padding: Optional[Tensor] = None,
           row_table: Optional[Tensor] = None) -> Tensor:
    """(R, H, D) attention outputs of ``query`` (R, H, D) over ``keys``/``values`` (N, H, L, D).

    ``kv_row`` (R,): the keys' batch index of each row (default: row ``r`` uses ``keys[r]``);
    ``last`` (R,): row ``r`` sees keys ``j <= last[r]`` only; ``key_padding`` (N, ≥L) bool:
    True hides key ``j`` of batch ``n``; ``row_table`` (N', ≥L): key ``j`` of ``n`` lies in buffer
    row ``row_table[n, j]`` (caches that never move, ``model/row_cache.RowArena``). Every row must
    see at least one key.
    """
    return torch.ops.fairseq_stream.decode_attention(query, keys, values, kv_row, last, key_padding, scale, row_table)


def reference(query: Tensor, keys: Tensor, values: Tensor, scale: float, *, kv_row: Optional[Tensor] = None,
              last: Optional[Tensor] = None, key_padding: Optional[Tensor] = None,
              row_table: Optional[Tensor] = None) -> Tensor:
    """The PyTorch definition of :func:`attend`."""
    if row_table is not None:  # each key from its own buffer row: (N', H, L, D)
        length = keys.size(2)
        held = row_table[:, :length]
        slots = torch.arange(length, device=keys.device).expand_as(held)
        keys, values = keys[held, :, slots].transpose(1, 2), values[held, :, slots].transpose(1, 2)
    if kv_row is not None:
        keys, values = keys.index_select(0, kv_row), values.index_select(0, kv_row)
        key_padding = None if key_padding is None else key_padding.index_select(0, kv_row)
    length = keys.size(2)
    visible = torch.ones(query.size(0), length, dtype=torch.bool, device=query.device)
    if last is not None:
        visible &= torch.arange(length, device=query.device) <= last.unsqueeze(1)
    if key_padding is not None:
        visible &= ~key_padding[:, :length]
    scores = torch.einsum("rhd,rhld->rhl", query, keys) * scale
    scores = scores.masked_fill(~visible.unsqueeze(1), float("-inf"))
    return torch.einsum("rhl,rhld->rhd", torch.softmax(scores, dim=-1), values)
