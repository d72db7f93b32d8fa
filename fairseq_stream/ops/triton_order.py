"""The order shared by the GPU step kernels: the sentences that go on first, the finished ones after."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def finished_last(done_flags, S, S2: tl.constexpr):
    """Of the ``S`` sentences' done flags (int8, ``S2`` a power of two ≥ S): each sentence's
    index ``sl``, ``in_s``, ``done``, ``going`` (masks), how many go on, and its position ``pos``
    in the order that keeps the sentences that go on first, each part in its old order (the C++
    operators' compaction)."""
    sl = tl.arange(0, S2)
    in_s = sl < S
    done = in_s & (tl.load(done_flags + sl, mask=in_s, other=0) != 0)
    going = in_s & ~done
    n_on = tl.sum(going.to(tl.int64), axis=0)
    pos = tl.where(going, tl.cumsum(going.to(tl.int64), axis=0) - 1, n_on + tl.cumsum(done.to(tl.int64), axis=0) - 1)
    return sl, in_s, done, going, n_on, pos
