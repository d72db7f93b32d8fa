"""What the GPU step kernels share: how they are compiled, their first launch, and the order
that puts the finished sentences last.

* :func:`step_jit` — ``triton.jit`` without specialisation on the values of integer arguments
  (``== 1``, ``% 16``) or the alignment of pointers: those change from step to step (sentence
  counts, blocks, views of a compacted state), and each new specialisation is a compile (~1 s)
  in the middle of a run. A step kernel compiles once per set of ``tl.constexpr`` sizes
  (power-of-two buckets, :func:`bucket`) and dtypes.
* :func:`first_contact` — Triton compiles a kernel at its first launch. A step is two
  kernels that update the state in place: if the second failed to compile after the first had
  run, the state would be half-updated. So the first launch of every compile signature runs the
  whole step on copies of the state; only when both kernels have compiled does the step run on
  the real state (a failure before that leaves the state untouched and the runner falls back).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Hashable, Set

import triton
import triton.language as tl

_ready: Set[Hashable] = set()


def step_jit(fn: Callable[..., Any]) -> Any:
    """``triton.jit`` that specialises on ``tl.constexpr`` parameters and dtypes only."""
    runtime = [p.name for p in inspect.signature(fn).parameters.values()
               if "constexpr" not in str(p.annotation)]
    return triton.jit(do_not_specialize=runtime, do_not_specialize_on_alignment=runtime)(fn)


def bucket(n: int, smallest: int = 16) -> int:
    """A power-of-two size class of at least ``smallest`` (few compile variants per run)."""
    return max(smallest, triton.next_power_of_2(max(n, 1)))


def first_contact(signature: Hashable, launch: Callable[[bool], Any]) -> Any:
    """``launch(True)`` (on copies of the state) once per compile signature, then ``launch(False)``."""
    if signature not in _ready:
        launch(True)
        _ready.add(signature)
    return launch(False)


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


@triton.jit
def live_rows(live_flags, sl, in_s, width, K2: tl.constexpr):
    """The next rows, sentence-major: of each sentence's ``width`` slots (flags ``live_flags``, (S, width)
    int8), which are live, and where each live one goes: ``kl`` (the slot lanes), ``grid`` (slot
    index s·width + j), ``live``, ``count`` per sentence, ``rank`` among its live slots and ``at``, its
    row in the flat order (the step kernels' compaction of the next rows)."""
    kl = tl.arange(0, K2)
    grid = sl[:, None] * width + kl[None, :]
    in_sk = in_s[:, None] & (kl < width)[None, :]
    live = in_sk & (tl.load(live_flags + grid, mask=in_sk, other=0) != 0)
    count = tl.sum(live.to(tl.int64), axis=1)  # (S2,)
    first = tl.cumsum(count, axis=0) - count
    rank = tl.cumsum(live.to(tl.int64), axis=1) - 1
    return kl, grid, live, count, rank, first[:, None] + rank
