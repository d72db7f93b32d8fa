"""Fused output layer on a GPU: top-k and log-normaliser of each row in one pass, in Triton.

Hoang2018 §3.1 (Algorithms 2–3) on CUDA. fairseq writes a full ``(R, V)`` log-softmax and
searches it; PyTorch's ``topk`` + ``logsumexp`` read the row twice. Here the row is read once:

1. :func:`_block_topk` — one program per (row, block of ``BLOCK`` scores): the block's maximum
   and sum of ``exp(x − max)`` (the running normaliser of Algorithm 2, per block) and its ``K``
   best scores, extracted best first (ties: the lower id, ``argmax``'s leftmost);
2. :func:`_merge` — one program per row: the ``K`` best of the blocks' candidates (in block
   order, so ties still go to the lower id) and ``lse = M + log Σ_b s_b·exp(m_b − M)``.

Two launches, nothing of size V written. The unrolled rounds cost k reductions per block: fine
for beam ≤ 16 (k ≤ 32), slow to compile and to run at the k = 100 of beam 50. For large k,
:func:`topk_lse_sorted` keeps the two stages and the normaliser but finds the best by sorting:
each score and its id packed into one int64 key (float bits made order-preserving, -0.0 taken
as 0.0, ``2**31 - 1 - id`` below them so equal scores put the lower id first), a bitonic top-K2
per block (``tl.topk``; K2 = k rounded up to a power of two), then the same over the blocks'
candidates per row; the values are read back by id (bit for bit the input's). On an H100
(float16, V = 32000, k = 100) it took 0.15 ms for 50 rows (PyTorch 0.32, unrolled 0.39) and
0.25 ms for 250 (PyTorch 0.30), but lost to PyTorch from 1,600 rows (1.5 vs 1.4 ms; 6,400:
5.8 vs 5.0). Which of these is faster depends on V, the rows and k; :func:`fairseq_stream.ops.fused_output.topk_with_normaliser` measures
both once per shape class on the device and keeps the winner. The kernels run on the CPU
under Triton's interpreter (``TRITON_INTERPRET=1``, set before this module is imported):
``tests/unit/test_triton_output.py`` checks them there against the reference.
"""
from __future__ import annotations

from typing import Tuple

import torch
import triton
import triton.language as tl
from torch import Tensor

BLOCK = 1024


@triton.jit
def _block_scores(scores, stride, V, block_m, block_s, n_blocks, row, blk, BLOCK: tl.constexpr):
    """The block's scores in float32 (-inf past V), its maximum and sum of ``exp(x − max)`` stored:
    the running normaliser of Algorithm 2, per block (both top-k kernels)."""
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(scores + row * stride + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    safe = tl.where(m == float("-inf"), 0.0, m)  # a block of -inf only sums to 0, not NaN
    tl.store(block_m + row * n_blocks + blk, m)
    tl.store(block_s + row * n_blocks + blk, tl.sum(tl.exp(x - safe), axis=0))
    return x, offs


@triton.jit
def _row_lse(block_m, block_s, n_blocks, out_lse, row, NB: tl.constexpr):
    """``lse = M + log Σ_b s_b·exp(m_b − M)`` of the row's blocks (Algorithm 2's merge; both top-k paths)."""
    b = tl.arange(0, NB)
    m = tl.load(block_m + row * n_blocks + b, mask=b < n_blocks, other=float("-inf"))
    s = tl.load(block_s + row * n_blocks + b, mask=b < n_blocks, other=0.0)
    top = tl.max(m, axis=0)
    safe = tl.where(top == float("-inf"), 0.0, top)
    total = tl.sum(s * tl.exp(m - safe), axis=0)
    tl.store(out_lse + row, safe + tl.log(total))  # log 0 = -inf for a row of -inf


@triton.jit
def _block_topk(scores, stride, V, cand_v, cand_i, block_m, block_s, n_blocks, K: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    lane = tl.arange(0, BLOCK)
    x, _ = _block_scores(scores, stride, V, block_m, block_s, n_blocks, row, blk, BLOCK)
    base = (row * n_blocks + blk) * K
    for j in tl.static_range(K):
        v = tl.max(x, axis=0)
        i = tl.argmax(x, axis=0)  # the leftmost of equal maxima: ties keep the lower id
        tl.store(cand_v + base + j, v)
        tl.store(cand_i + base + j, tl.where(v == float("-inf"), 0, blk * BLOCK + i).to(tl.int64))
        x = tl.where(lane == i, float("-inf"), x)


@triton.jit
def _merge(cand_v, cand_i, block_m, block_s, n_blocks, out_v, out_i, out_lse, K: tl.constexpr, CAND: tl.constexpr,
           NB: tl.constexpr):
    row = tl.program_id(0)
    lane = tl.arange(0, CAND)
    n = n_blocks * K
    v = tl.load(cand_v + row * n + lane, mask=lane < n, other=float("-inf"))
    ids = tl.load(cand_i + row * n + lane, mask=lane < n, other=0)
    for j in tl.static_range(K):
        best = tl.max(v, axis=0)
        at = tl.argmax(v, axis=0)  # candidates are in block order: ties keep the lower id
        tl.store(out_v + row * K + j, best)
        tl.store(out_i + row * K + j, tl.sum(tl.where(lane == at, ids, 0), axis=0))
        v = tl.where(lane == at, float("-inf"), v)
    _row_lse(block_m, block_s, n_blocks, out_lse, row, NB)


def topk_lse(scores: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor]:
    """(values, ids, lse) of each row of ``scores`` (R, V): the ``k`` best raw scores, best first,
    in float32, and the rows' ``logsumexp``."""
    r, v = scores.shape
    k = min(k, v)
    scores = scores.contiguous()
    n_blocks = triton.cdiv(v, BLOCK)
    dev = scores.device
    cand_v = torch.empty(r, n_blocks, k, dtype=torch.float32, device=dev)
    cand_i = torch.empty(r, n_blocks, k, dtype=torch.int64, device=dev)
    block_m = torch.empty(r, n_blocks, dtype=torch.float32, device=dev)
    block_s = torch.empty(r, n_blocks, dtype=torch.float32, device=dev)
    _block_topk[(r, n_blocks)](scores, scores.stride(0), v, cand_v, cand_i, block_m, block_s, n_blocks, K=k, BLOCK=BLOCK)
    values = torch.empty(r, k, dtype=torch.float32, device=dev)
    ids = torch.empty(r, k, dtype=torch.int64, device=dev)
    lse = torch.empty(r, dtype=torch.float32, device=dev)
    _merge[(r,)](cand_v, cand_i, block_m, block_s, n_blocks, values, ids, lse, K=k,
                 CAND=triton.next_power_of_2(n_blocks * k), NB=triton.next_power_of_2(n_blocks))
    return values, ids, lse


# ---- Large k: sorting integer keys instead of k unrolled max/argmax rounds ----

#: scores per program of the sorting path (a bitonic top-K2 of this many keys)
SORT_BLOCK = 2048
#: ids are packed as ``_ID_MAX - id`` into the low 31 bits of a key: vocabularies below 2**31
_ID_MAX = 2 ** 31 - 1
#: ``tl.topk`` (Triton ≥ 3.4) stops the bitonic network at K2; older Tritons sort the whole block
_HAS_TOPK = hasattr(tl, "topk")


@triton.jit
def _sort_keys(x, ids):
    """Order-preserving int64 keys of float32 scores ``x``: the score's bits in the high half
    (negative floats' magnitude bits flipped, so integer order is float order and -inf lies below
    every finite score), ``_ID_MAX - id`` in the low half (equal scores: the lower id is larger)."""
    bits = x.to(tl.int32, bitcast=True)
    bits = tl.where(bits == -2147483648, 0, bits)  # -0.0 ties with 0.0, as in the reference's comparison
    high = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return (high.to(tl.int64) << 32) | (0x7FFFFFFF - ids).to(tl.int64)


@triton.jit
def _block_sort(scores, stride, V, cand, block_m, block_s, n_blocks, K2: tl.constexpr, BLOCK: tl.constexpr,
                HAS_TOPK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    lane = tl.arange(0, BLOCK)
    x, offs = _block_scores(scores, stride, V, block_m, block_s, n_blocks, row, blk, BLOCK)
    keys = _sort_keys(x, offs)  # padding lanes: -inf with ids ≥ V, below every real score and real -inf
    base = cand + (row * n_blocks + blk) * K2
    if HAS_TOPK:
        tl.store(base + tl.arange(0, K2), tl.topk(keys, K2))
    else:
        tl.store(base + lane, tl.sort(keys, descending=True), mask=lane < K2)


@triton.jit
def _merge_sorted(cand, block_m, block_s, n_blocks, scores, stride, V, out_v, out_i, out_lse, k, K2: tl.constexpr,
                  CAND: tl.constexpr, NB: tl.constexpr, HAS_TOPK: tl.constexpr):
    row = tl.program_id(0)
    lane = tl.arange(0, CAND)
    n = n_blocks * K2
    keys = tl.load(cand + row * n + lane, mask=lane < n, other=-9223372036854775807 - 1)
    if HAS_TOPK:
        best = tl.topk(keys, K2)
        j = tl.arange(0, K2)
    else:
        best = tl.sort(keys, descending=True)
        j = lane
    ids = 0x7FFFFFFF - (best & 0x7FFFFFFF)
    # the value read back by id: bit for bit the input's (its -0.0 too, which the key made 0.0)
    v = tl.load(scores + row * stride + ids, mask=(j < k) & (ids < V), other=float("-inf")).to(tl.float32)
    tl.store(out_v + row * k + j, v, mask=j < k)
    tl.store(out_i + row * k + j, ids, mask=j < k)
    _row_lse(block_m, block_s, n_blocks, out_lse, row, NB)


def topk_lse_sorted(scores: Tensor, k: int, block: int = SORT_BLOCK) -> Tuple[Tensor, Tensor, Tensor]:
    """:func:`topk_lse` by sorting keys: each block's K2 best (K2 = k rounded up to a power of
    two) by a bitonic top-K2 of (score, id) keys, then per row the ``k`` best of those the same way."""
    r, v = scores.shape
    if v > _ID_MAX:
        raise ValueError(f"topk_lse_sorted: vocabulary {v} over {_ID_MAX} (ids are packed in 31 bits)")
    k = min(k, v)
    scores = scores.contiguous()
    k2 = max(triton.next_power_of_2(k), 2)  # Triton 3.6's tl.topk fails to compile for k = 1
    block = max(min(block, triton.next_power_of_2(v)), k2)
    n_blocks = triton.cdiv(v, block)
    dev = scores.device
    cand = torch.empty(r, n_blocks, k2, dtype=torch.int64, device=dev)  # (R, blocks, K2) keys, best first
    block_m = torch.empty(r, n_blocks, dtype=torch.float32, device=dev)
    block_s = torch.empty(r, n_blocks, dtype=torch.float32, device=dev)
    _block_sort[(r, n_blocks)](scores, scores.stride(0), v, cand, block_m, block_s, n_blocks, K2=k2, BLOCK=block,
                               HAS_TOPK=_HAS_TOPK)
    values = torch.empty(r, k, dtype=torch.float32, device=dev)
    ids = torch.empty(r, k, dtype=torch.int64, device=dev)
    lse = torch.empty(r, dtype=torch.float32, device=dev)
    _merge_sorted[(r,)](cand, block_m, block_s, n_blocks, scores, scores.stride(0), v, values, ids, lse, k, K2=k2,
                        CAND=triton.next_power_of_2(n_blocks * k2), NB=triton.next_power_of_2(n_blocks),
                        HAS_TOPK=_HAS_TOPK)
    return values, ids, lse
