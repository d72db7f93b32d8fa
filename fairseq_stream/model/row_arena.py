"""Caches that never move: the decoder's keys and values written once, a beam reorder copies a table.

Within a sentence every row advances in lockstep, so the key of a row's position ``j`` is written
once, at the step that fed it, and never changes while a descendant of that row reads it. A
:class:`RowArena` holds the buffers ``(P, H, capacity, hd)`` per layer; a cache over it
(``row_cache.RowCache`` with ``arena``) keeps per row

* ``table`` (R, capacity): the buffer row that holds each of its positions, and
* ``home`` (R,): the buffer row its next positions are written into.

A reorder (:func:`select`) copies the rows' tables (R × positions integers, not R × positions ×
layers × d floats): the first child of a row keeps its parent's home (it continues the parent's
positions), each further child gets a buffer row that no live cache reads from the child's
position on (:meth:`RowArena.take`; a row's earlier positions may still be read by cousins).
Writes never clobber a live key: a home is written at positions no other row reads (its siblings
and cousins read it only below the position where they branched off, and lengths only grow but for
a single row's rejected block, which only that row read). Caches of different arenas join by
copying the filled positions of the rows they read (:func:`adopt`: a refill's new rows hold none).

The attention kernel reads through the table (``ops/csrc/decode_attention.cpp``'s ``row_table``,
the native step's ``table``/``home``), with one pointer per key in either layout, so the bits are
those of the copying cache's. The eager step reads a copy in the old layout (:func:`gathered`). The buffers are not zeroed (a slot
is read only after its step wrote it).
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor


#: Positions a new arena's buffers hold (model/block_decoder.py's ``empty_cache``). Allocated, not
#: touched: a (row, head)'s positions lie in pages of their own, and a page of memory is first touched
#: when a position in it is written, so a sentence costs the pages of the positions it reaches, and the
#: buffers grow (a copy of every row's filled slots) only past this; the tables grow by doubling.
FIRST_SLOTS = 256


def _thp_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as f:
            return "[always]" in f.read()
    except OSError:
        return False


#: Whether the kernel backs anonymous memory with 2 MiB pages wherever it can (transparent huge pages
#: "always"; most distributions say "madvise"): then one written position would take 2 MiB, and the
#: buffers' untouched positions (FIRST_SLOTS) would all be resident. Read once.
THP_ALWAYS = _thp_always()
MADV_NOHUGEPAGE = 15  # Linux's <sys/mman.h>


def untouched(like: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """An uninitialised buffer of ``shape`` whose pages are taken as they are written: on the CPU under
    transparent huge pages "always", the buffer is told not to use them (:func:`no_huge_pages`)."""
    out = like.new_empty(shape)
    if THP_ALWAYS and out.device.type == "cpu":
        no_huge_pages(out)
    return out


def no_huge_pages(t: Tensor) -> int:
    """``madvise(MADV_NOHUGEPAGE)`` over the whole pages of ``t``'s memory; madvise's result (0: done;
    -1 where it failed or there is no whole page), never an error: huge pages only cost memory."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    first = -(-start // page) * page
    length = (end - first) // page * page
    if length <= 0:
        return -1
    try:
        return int(_libc().madvise(ctypes.c_void_p(first), ctypes.c_size_t(length), MADV_NOHUGEPAGE))
    except (OSError, AttributeError):
        return -1


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    """The C library, loaded once (an arena's every buffer is advised)."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


class RowsReached:
    """The most buffer rows the arenas of one decoder have grown to in this process: a new CPU arena
    starts with as many (:meth:`fairseq_stream.model.block_decoder.BlockDecoder.empty_cache`), so a
    stream's later arenas do not grow. Its untouched rows cost address space, not memory (a page is
    taken when a position in it is written); a growth costs a copy of every filled slot into new
    pages: at k = 50 on the demo, 44 growths of 6 arenas made ~1M page faults, 1.8 s of system time."""

    def __init__(self) -> None:
        self.rows = 0

    def saw(self, rows: int) -> None:
        self.rows = max(self.rows, rows)


class RowArena:
    """The keys/values buffers of the caches that index them, and which buffer rows they read.

    ``keys``/``values`` are lists shared with those caches (a growth replaces their items in
    place, so every cache sees the new buffers). Live caches register (weakly): a buffer row is
    free when no live cache's table (up to its width) or home names it. ``reached`` (optional) is
    told the rows the buffers grow to.
    """

    def __init__(self, keys: List[Tensor], values: List[Tensor], reached: Optional[RowsReached] = None) -> None:
        self.keys, self.values = keys, values
        self.caches: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.reached = reached

    @property
    def rows(self) -> int:
        return self.keys[0].size(0)

    @property
    def capacity(self) -> int:
        return self.keys[0].size(2)

    def register(self, cache: Any) -> Any:
        self.caches.add(cache)
        return cache

    def _filled(self) -> int:
        """Slots a live cache may read: a growth copies no more (the others are written before read)."""
        return max((c.width for c in list(self.caches)), default=0)

    def _replace(self, grow: Any) -> None:
        for buffers in (self.keys, self.values):
            for i, t in enumerate(buffers):
                buffers[i] = grow(t)

    def reserve_slots(self, capacity: int) -> None:
        """At least ``capacity`` positions per buffer row (doubling: a growth copies every buffer)."""
        old = self.capacity
        if capacity <= old:
            return
        new = max(capacity, 2 * old)
        filled = min(self._filled(), old)

        def grow(t: Tensor) -> Tensor:
            out = untouched(t, t.shape[:2] + (new,) + t.shape[3:])  # unwritten slots are never read
            out[:, :, :filled] = t[:, :, :filled]
            return out

        self._replace(grow)

    def _grow_rows(self, rows: int) -> None:
        old, filled = self.rows, min(self._filled(), self.capacity)
        if self.reached is not None:
            self.reached.saw(rows)

        def grow(t: Tensor) -> Tensor:
            out = untouched(t, (rows,) + tuple(t.shape[1:]))
            out[:old, :, :filled] = t[:, :, :filled]
            return out

        self._replace(grow)

    def take(self, n: int, at: int, tables: Sequence[Tensor] = (), homes: Sequence[Tensor] = (),
             consumed: Any = None) -> Tensor:
        """``n`` buffer rows free from position ``at`` on: no live cache but ``consumed``, nor
        ``tables`` (R, w: position j in column j), reads one of their positions ``>= at``, and
        none is a home (of a live cache or in ``homes``). Rows read only below ``at`` are reused: a
        row that branched off wrote a few positions of a buffer row, and its cousins read only those.

        Grows the buffers (by half, at least ``n``) when too few are free.
        """
        free = (self.last_reads(tables, homes, consumed) < at).nonzero().view(-1)
        return self.enough(free, n)

    def last_reads(self, tables: Sequence[Tensor] = (), homes: Sequence[Tensor] = (), consumed: Any = None) -> Tensor:
        """(rows,) the last position of each buffer row that a live cache but ``consumed``, or ``tables``, reads
        (-1: none; the largest integer for a home: of a live cache or in ``homes``), on the device."""
        device = self.keys[0].device
        last_read = torch.full((self.rows,), -1, dtype=torch.long, device=device)
        home = torch.iinfo(torch.long).max
        readers = [(c.table[:, : c.width], c.home) for c in list(self.caches) if c is not consumed]
        for table, ids in readers + [(t, None) for t in tables] + [(None, h) for h in homes]:
            if table is not None and table.numel():
                slots = torch.arange(table.size(1), device=device).expand_as(table)
                last_read.scatter_reduce_(0, table.reshape(-1), slots.reshape(-1), "amax")
            if ids is not None:
                last_read[ids.reshape(-1)] = home
        return last_read

    def enough(self, free: Tensor, n: int) -> Tensor:
        """The first ``n`` of the free buffer rows ``free``, and new ones past them where they are too few
        (:meth:`grow_for`)."""
        if free.numel() < n:
            start = self.rows
            self.grow_for(n - free.numel())
            free = torch.cat([free, torch.arange(start, self.rows, device=free.device)])
        return free[:n]

    def grow_for(self, missing: int) -> None:
        """Rows ``rows .. rows + missing - 1`` added to the buffers: they grow by half, at least by ``missing``."""
        self._grow_rows(self.rows + max(missing, self.rows // 2, 1))


def first_of_each(rows: Tensor) -> Tensor:
    """(R,) True at the first occurrence of each value of ``rows``."""
    values, order = torch.sort(rows, stable=True)
    first = torch.ones_like(values, dtype=torch.bool)
    first[1:] = values[1:] != values[:-1]
    out = torch.empty_like(first)
    out[order] = first
    return out


def select(arena: RowArena, table: Tensor, home: Tensor, lens: Tensor, width: int, rows: Tensor,
           consumed: Any) -> Tuple[Tensor, Tensor]:
    """The new rows' tables and homes for rows ``rows`` (with repetition) of a cache whose rows
    have ``lens`` tokens (the new rows'). On a CPU one C++ operator (``ops/csrc/row_arena.cpp``: no host
    read, about a tenth of a k = 5 step at batch 1 otherwise); else :func:`reference_select`."""
    kernel = _kernel() if table.device.type == "cpu" and rows.numel() else None
    if kernel is None:
        return reference_select(arena, table, home, lens, width, rows, consumed)
    readers = [c for c in list(arena.caches) if c is not consumed]
    table, home, missing = torch.ops.fairseq_stream.arena_select(
        table, home, lens, rows, width, [c.table for c in readers], [c.width for c in readers],
        [c.home for c in readers], arena.rows)
    if missing:  # the rows the operator named past the arena
        arena.grow_for(missing)
    return table, home


def reference_select(arena: RowArena, table: Tensor, home: Tensor, lens: Tensor, width: int, rows: Tensor,
                     consumed: Any) -> Tuple[Tensor, Tensor]:
    """:func:`select` in PyTorch operations, on any device. One host read: how many rows branch and how many
    buffer rows are free where they write (the rows that do are then sorted out on the device)."""
    table = table.index_select(0, rows)
    home = home.index_select(0, rows)
    if not rows.numel():
        return table, home
    first = first_of_each(rows)
    # a row read by several children: all but the first write elsewhere, from the shortest of them on
    at = torch.where(first, torch.iinfo(torch.long).max, lens).min()
    # (every new row's home: a branching row's is its first sibling's)
    free = arena.last_reads([table[:, :width]], [home], consumed) < at
    branches, frees = torch.stack([(~first).sum(), free.sum()]).tolist()
    if branches:
        branching = _first_true(~first, branches)  # ascending, as nonzero() gives them
        home[branching] = arena.enough(_first_true(free, min(frees, branches)), branches)
    return table, home


def kernel_loaded() -> bool:
    """Whether the C++ reorder (``fairseq_stream::arena_select``) is loaded, built once where it can be: a native loop
    that calls it from C++ (``decoder_beam_search``) asks first, as a fresh process's first step may be that loop's."""
    return _kernel() is not None


def _kernel() -> Any:
    """The built operator's module (``torch.ops.fairseq_stream.arena_select``; loaded once by the extension), or None
    (the reference runs)."""
    from fairseq_stream.ops import extension

    return extension.load(*extension.ROW_ARENA)


def _first_true(mask: Tensor, n: int) -> Tensor:
    """The first ``n`` indices where ``mask`` is True, ascending (``n`` known: no host read)."""
    return torch.argsort((~mask).to(torch.uint8), stable=True)[:n]


def adopt(arena: RowArena, other: RowArena, table: Tensor, home: Tensor, width: int,
          tables: List[Tensor], homes: List[Tensor]) -> Tuple[Tensor, Tensor]:
    """Bring rows of a cache over ``other`` into ``arena``: the buffer rows they read get rows of
    ``arena`` that nobody reads (nor ``tables``, ``homes``), their first ``width`` positions are
    copied, and the table and homes are renamed."""
    held = torch.cat([table[:, :width].reshape(-1), home]).unique()
    fresh = arena.take(held.numel(), 0, tables, homes)
    arena.reserve_slots(table.size(1))
    if width:
        for mine, theirs in zip(arena.keys + arena.values, other.keys + other.values):
            mine[:, :, :width].index_copy_(0, fresh, theirs[:, :, :width].index_select(0, held))
    rename = torch.zeros(other.rows, dtype=torch.long, device=table.device)
    rename[held] = fresh
    return rename[table], rename[home]


def gathered(buffers: List[Tensor], table: Tensor, lens: Tensor) -> List[Tensor]:
    """Each layer's keys (or values) in the copying layout (R, H, capacity, hd), read through ``table``;
    the slots past a row's ``lens`` zero (the buffers' unwritten slots are never read, and the eager
    step multiplies masked slots by zero weights: they must be finite)."""
    capacity = table.size(1)
    slots = torch.arange(capacity, device=table.device).expand_as(table)
    filled = (slots < lens.unsqueeze(1))[:, :, None, None]  # (R, capacity, 1, 1)
    zero = buffers[0].new_zeros(())
    return [torch.where(filled, t[:, :, :capacity][table, :, slots], zero).transpose(1, 2).contiguous()
            for t in buffers]
