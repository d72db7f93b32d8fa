"""The static step's self-attention caches: stacked buffers lent as views at the start of a few *slabs*
(flat buffers a :class:`StaticCachePool` keeps, each as large as the largest bucket it was lent for), so
that the caches of every bucket have the same few addresses, which step graphs bind."""
from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Tuple

from torch import Tensor


class Lease:
    """A stacked cache buffer lent by a :class:`StaticCachePool` (a view at the start of one of its
    slabs); the slab is back in the pool when no cache holds the lease."""

    __slots__ = ("buffer", "__weakref__")

    def __init__(self, pool: "StaticCachePool", family: Tuple[Any, ...], slab: Tensor, ordinal: int,
                 shape: Tuple[int, ...]) -> None:
        self.buffer = slab[: math.prod(shape)].view(shape)
        weakref.finalize(self, pool.release, family, slab, ordinal)

    @property
    def rows(self) -> int:
        return self.buffer.size(0)


class StaticCachePool:
    """Stacked self-attention buffers ``(rows, 2·layers, H, slots, hd)`` of every bucket, lent as views
    at the start of a few slabs.

    A buffer is lent as a :class:`Lease`, a view at offset 0 of a free slab of its family (layers,
    heads, head size, dtype, device): a step graph binds its cache buffer by address, and every bucket
    a run visits (row rungs as sentences finish, slot rungs as they grow: dozens) then has the same
    few addresses, one per slab. Slabs are as many as leases were ever held at once (a beam holds
    two across a reorder: the old cache and the new), each as large as the largest bucket it was lent
    for; one too small for its next bucket is replaced by one that fits (its graphs go, ``on_evict``).
    Before, each bucket had buffers of its own, and the free ones were bounded by the bytes lent at
    once: a run dropped many of its own buckets' buffers (and their graphs) and its repeats replayed
    no more steps than the run (the demo, 16 sentences: 63-80%).

    Each slab has an ordinal (0, 1, … in the order made) and the free one of the lowest ordinal is
    lent first: which slab a step takes depends only on which are held, not on the order earlier
    runs gave them back, so a repeat of a run meets the keys of the run (lent last-freed-first, a
    beam's two slabs swapped roles after an odd stay: 15-26% of a repeat's steps captured anew on an
    H200). A recycled slab keeps stale values: every element of it has been written with finite
    numbers (new slabs are zeros), and attention masks what a row has not written. Leases are
    exclusive, so streams stepping alternately share the pool safely. At most ``limit`` slabs are
    kept free, and at most as many bytes as were ever lent at once (``peak_lent``, or ``min_bytes``),
    the highest ordinal of the least recently used family dropped first.
    """

    def __init__(self, *, limit: int = 64, min_bytes: int = 256 * 2 ** 20,
                 on_evict: "Callable[[Tensor], None] | None" = None) -> None:
        self.limit = limit
        self.min_bytes = min_bytes
        self.on_evict = on_evict  # told of every slab dropped (the step graphs bound to it go too)
        # per family, its free slabs and their ordinals, lowest first; the least recently used family first
        self.free: "OrderedDict[Tuple[Any, ...], List[Tuple[int, Tensor]]]" = OrderedDict()
        self.ordinals: Dict[Tuple[Any, ...], set] = {}  # the ordinals of each family's slabs, lent or free
        self.free_bytes = 0
        self.lent = 0  # bytes of the slabs lent now
        self.peak_lent = 0

    def acquire(self, rows: int, capacity: int, like: Tensor, layers: int, heads: int, head_dim: int) -> Lease:
        family = (layers, heads, head_dim, like.dtype, like.device)
        shape = (rows, 2 * layers, heads, capacity, head_dim)
        spare = self.free.get(family)
        if spare:
            ordinal, slab = spare.pop(0)
            if not spare:
                del self.free[family]
            self.free_bytes -= _nbytes(slab)
            if slab.numel() < math.prod(shape):  # too small: one that fits takes its ordinal
                if self.on_evict is not None:
                    self.on_evict(slab)
                slab = like.new_zeros(math.prod(shape))
        else:
            made = self.ordinals.setdefault(family, set())
            ordinal = next(n for n in range(len(made) + 1) if n not in made)
            made.add(ordinal)
            # the bucket's own size, not the largest the pool has seen: a k = 5 run after a k = 50 one
            # zeroed two 1.1 GB slabs it did not need (2.2 s each on a CPU)
            slab = like.new_zeros(math.prod(shape))
        self.lent += _nbytes(slab)
        self.peak_lent = max(self.peak_lent, self.lent)
        return Lease(self, family, slab, ordinal, shape)

    def release_free(self) -> int:
        """Drop every free slab (their graphs go too) and forget the peak (the free slabs' budget starts again
        from what is lent now); the bytes dropped. Lent slabs stay lent."""
        freed = self.free_bytes
        for family, spare in self.free.items():
            for ordinal, slab in spare:
                self.ordinals[family].discard(ordinal)
                if self.on_evict is not None:
                    self.on_evict(slab)
        self.free.clear()
        self.free_bytes = 0
        self.peak_lent = self.lent
        return freed

    def release(self, family: Tuple[Any, ...], slab: Tensor, ordinal: int) -> None:
        self.lent -= _nbytes(slab)
        spare = self.free.setdefault(family, [])
        spare.append((ordinal, slab))
        spare.sort(key=lambda entry: entry[0])
        self.free.move_to_end(family)
        self.free_bytes += _nbytes(slab)
        budget = max(self.min_bytes, self.peak_lent)
        while self.free and (sum(len(v) for v in self.free.values()) > self.limit or self.free_bytes > budget):
            oldest, spare = next(iter(self.free.items()))
            gone, dropped = spare.pop()  # the highest ordinal: the one a run takes last
            self.ordinals[oldest].discard(gone)
            self.free_bytes -= _nbytes(dropped)
            if not spare:
                del self.free[oldest]
            if self.on_evict is not None:
                self.on_evict(dropped)


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()
