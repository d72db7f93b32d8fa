"""Fused output layer on a GPU: top-k and log-normaliser of each row in one pass, in Triton.

Hoang2018 §3.1 (Algorithms 2–3) on CUDA. fairseq writes a full ``(R, V)`` log-softmax and
searches it; PyTorch's ``topk`` + ``logsumexp`` read the row twice. Here the row is read once:

1. :func:`_block_topk` — one program per (row, block of ``BLOCK`` scores): the block's maximum
   and sum of ``exp(x − max)`` (the running normaliser of Algorithm 2, per block) and its ``K``
   best scores, extracted best first (ties: the lower id, ``argmax``'s leftmost);
2. :func:`_merge` — one program per row: the ``K`` best of the blocks' candidates (in block
   order, so ties still go to the lower id) and ``lse = M + log Σ_b s_b·exp(m_b − M)``.

Two launches, nothing of size V written. Which of this and the PyTorch ops is faster depends
on V, the rows and k; :func:`fairseq_stream.ops.fused_output.topk_with_normaliser` measures
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
def _block_topk(scores, stride, V, cand_v, cand_i, block_m, block_s, n_blocks, K: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    lane = tl.arange(0, BLOCK)
    offs = blk * BLOCK + lane
    x = tl.load(scores + row * stride + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    safe = tl.where(m == float("-inf"), 0.0, m)  # a block of -inf only sums to 0, not NaN
    tl.store(block_m + row * n_blocks + blk, m)
    tl.store(block_s + row * n_blocks + blk, tl.sum(tl.exp(x - safe), axis=0))
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
    b = tl.arange(0, NB)
    m = tl.load(block_m + row * n_blocks + b, mask=b < n_blocks, other=float("-inf"))
    s = tl.load(block_s + row * n_blocks + b, mask=b < n_blocks, other=0.0)
    top = tl.max(m, axis=0)
    safe = tl.where(top == float("-inf"), 0.0, top)
    total = tl.sum(s * tl.exp(m - safe), axis=0)
    tl.store(out_lse + row, safe + tl.log(total))  # log 0 = -inf for a row of -inf


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
