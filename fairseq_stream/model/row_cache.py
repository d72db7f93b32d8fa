"""The decoder's per-row caches: keys/values of every row (:class:`RowCache`), the encoder's
per-sentence keys/values (:class:`EncoderMemory`) and where each row's queries go among its
sentence's (:class:`SentenceIndex`).

A strategy reorders, concatenates, splits and truncates hypotheses through these; only the
decoder steps (:mod:`fairseq_stream.model.block_decoder`, :mod:`fairseq_stream.model.static`) read what is
inside them. A :class:`RowCache` holds its keys and values in one of three ways, each method with a branch
for each: buffers of its own (the eager step), a stacked buffer lent by the static step's pool (``lease``:
:mod:`fairseq_stream.model.static.slabs`; a reorder deferred into the next step's region) or an arena's
buffers read through a row table (``arena``: :mod:`fairseq_stream.model.row_arena`, the native step).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.model import row_arena
from fairseq_stream.model.row_arena import RowArena, RowsReached
from fairseq_stream.model.static.buckets import length_bucket, row_bucket
from fairseq_stream.model.static.slabs import Lease, StaticCachePool

@dataclass
class EncoderMemory:
    """Per-sentence encoder keys/values of one model, for every decoder layer.

    ``keys[l]`` and ``values[l]`` are ``(N, H, S, hd)`` for ``N`` sentences; ``padding`` is
    ``(N, S)`` with True at padded source positions. ``modulus`` is 0 when rows are addressed
    by sentence index (a pool); for the slots of a stream (``model_step.EncoderSlots``) a
    sentence's handle is ``serial·modulus + slot`` and its row is ``handle mod modulus``.
    """

    keys: List[Tensor]
    values: List[Tensor]
    padding: Optional[Tensor]
    modulus: int = 0


SLACK = 16  # slots allocated with a new cache, so most steps append without reallocating

#: per device, (0, 1, 2, …) and (0, 0, …): what a step would make again at every step — the lengths of a static
#: cache's rows of one length (one entry, expanded), a one-row-a-sentence index's columns — as views of one
#: table (no operation a step; nothing writes them)
_TABLES: Dict[Any, Tuple[Tensor, Tensor]] = {}


def counting(like: Tensor, n: int) -> Tuple[Tensor, Tensor]:
    """(0, 1, …, n − 1) and n zeros on ``like``'s device: read-only views of :data:`_TABLES`."""
    tables = _TABLES.get(like.device)
    if tables is None or tables[0].numel() < n:
        size = max(1024, 2 * n)
        tables = _TABLES[like.device] = (torch.arange(size, dtype=torch.long, device=like.device),
                                         torch.zeros(size, dtype=torch.long, device=like.device))
    return tables[0][:n], tables[1][:n]


def uniform_lens(like: Tensor, width: int, rows: int) -> Tensor:
    """(rows,) lengths all ``width``, a read-only expanded view of :data:`_TABLES` (``like``'s device)."""
    return counting(like, width + 1)[0][width: width + 1].expand(rows)


def _grown(t: Tensor, width: int, capacity: int) -> Tensor:
    """``t`` (R, H, C, hd) with ``capacity`` slots: its first ``width`` copied, the rest zeros.

    Each slot is written once (``F.pad`` zero-fills the whole buffer, then copies over it).
    """
    out = t.new_empty(t.shape[:2] + (capacity,) + t.shape[3:])
    out[:, :, :width] = t[:, :, :width]
    out[:, :, width:].zero_()  # stale slots must be finite (masked attention still reads them)
    return out


@dataclass(eq=False)  # by identity: an arena keeps its live caches in a weak set
class RowCache:
    """Self-attention keys/values of one model for ``R`` rows, addressed per row.

    ``keys[l]``/``values[l]`` are buffers ``(R, H, capacity, hd)``. Row ``r`` holds its
    ``lens[r]`` fed tokens in slots ``[0, lens[r])``; what lies beyond is stale and masked, so
    rejecting block tokens (Jacobi) is a change of ``lens`` and rows of different lengths
    share a buffer without padding. ``width`` is a host-side upper bound of ``lens`` (the
    slots a step reads), ``uniform`` says every row has ``width`` tokens (no mask needed).
    A step writes its block in place (a cache passed to a step is consumed); the beam
    reorder copies once. No method reads a device value on the host.

    Buffers are reused rather than allocated per step (a fresh multi-MB tensor costs page
    faults that took as long as the copy itself): ``owned`` are the whole buffers the keys
    and values are row-prefixes of, when no other cache shares them (``None`` for the views
    of :meth:`fairseq_stream.model.model_step._TransformerAdapter.narrow`); ``spare`` are
    buffers of the same capacity that nothing reads any more, which the next reorder writes
    into. Every slot always holds a finite value (zeros or a stale key), as masked slots are
    still multiplied by zero weights.
    """

    keys: List[Tensor]
    values: List[Tensor]
    lens: Tensor  # (R,) tokens held per row
    width: int  # host: max(lens) or more
    uniform: bool = True  # host: all lens == width
    owned: Optional[Tuple[List[Tensor], List[Tensor]]] = field(default=None, repr=False, compare=False)
    spare: Optional[Tuple[List[Tensor], List[Tensor]]] = field(default=None, repr=False, compare=False)
    # --step-mode static|graph: the keys and values are row-prefixes of one stacked buffer
    # (rows bucket, 2·layers, H, slots bucket, hd) lent by a StaticCachePool (model/static/slabs.py)
    lease: Optional[Lease] = field(default=None, repr=False, compare=False)
    pool: Optional[StaticCachePool] = field(default=None, repr=False, compare=False)
    arena: Optional[RowArena] = field(default=None, repr=False, compare=False)
    table: Optional[Tensor] = field(default=None, repr=False, compare=False)  # with arena: (R, capacity)
    home: Optional[Tensor] = field(default=None, repr=False, compare=False)  # with arena: (R,)
    # with lease: a reorder not done yet — buffer row i is to receive row rows[i] of the source lease's buffer
    # (every slot). The next static step does it inside its region (so a graph replays it); any other use of
    # the keys and values does it first (settle)
    pending: Optional[Tuple[Lease, Tensor]] = field(default=None, repr=False, compare=False)
    # with lease: the static step these rows came out of (model/static/inputs.Chain, set by that step), and after a
    # reorder (``pending``) the one the reordered rows came out of: the next step's region gathers what travels with
    # a row (its encoder slot, its output layer's inputs) from that step's buffers by the same parents
    last_step: Optional[Any] = field(default=None, repr=False, compare=False)
    chain_from: Optional[Any] = field(default=None, repr=False, compare=False)

    @staticmethod
    def on_arena(arena: RowArena, table: Tensor, home: Tensor, lens: Tensor, width: int,
                 uniform: bool = True) -> "RowCache":
        """A cache that never moves, over ``arena``'s buffers (registered there as a reader)."""
        return arena.register(RowCache(arena.keys, arena.values, lens, width, uniform, arena=arena, table=table,
                                       home=home))

    @staticmethod
    def fixed(keys: List[Tensor], values: List[Tensor], lens: Tensor, width: int, uniform: bool = True,
              slots: Optional[int] = None, reached: Optional[RowsReached] = None) -> "RowCache":
        """A cache that never moves over new buffers (P >= R, H, capacity, hd) of R = ``lens.numel()`` rows: row
        r's positions in buffer row r (buffer rows from R on are free); its table has ``slots`` columns (the
        buffers' capacity when None; at most that). ``reached``: the arena's :class:`RowsReached`."""
        r, capacity = lens.numel(), keys[0].size(2)
        assert keys[0].size(0) >= r, "RowCache.fixed: fewer buffer rows than rows"
        home = torch.arange(r, device=lens.device)
        cols = capacity if slots is None else min(slots, capacity)
        return RowCache.on_arena(RowArena(list(keys), list(values), reached), home.unsqueeze(1).expand(r, cols).clone(),
                                 home, lens, width, uniform)

    def as_fixed(self) -> "RowCache":
        """This cache as one that never moves (its buffers become an arena's)."""
        return self if self.arena is not None else RowCache.fixed(self.keys, self.values, self.lens, self.width,
                                                                  self.uniform)

    def gathered(self) -> "RowCache":
        """A cache that never moves copied into the per-row layout (for the eager step); a static cache with its
        reorder done; others as they are."""
        if self.arena is None:
            return self.settle()
        return RowCache.of(row_arena.gathered(self.keys, self.table, self.lens),  # type: ignore[arg-type]
                           row_arena.gathered(self.values, self.table, self.lens), self.lens, self.width, self.uniform)  # type: ignore[arg-type]

    def _moved(self, lens: Tensor, width: int, uniform: bool) -> "RowCache":
        """The same rows' buffers (and table, or reorder to do) with new lengths."""
        if self.arena is not None:
            return RowCache.on_arena(self.arena, self.table, self.home, lens, width, uniform)  # type: ignore[arg-type]
        return RowCache(self.keys, self.values, lens, width, uniform, self.owned, self.spare, self.lease, self.pool,
                        pending=self.pending)

    def reorder_source(self) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        """A deferred reorder for a static step's region to copy: (source buffer, each row's parent), when the
        source has this buffer's shape past its rows; else it is done now (:meth:`settle`). (None, None): none due."""
        if self.pending is None:
            return None, None
        source, parents = self.pending
        if source.buffer.shape[1:] != self.lease.buffer.shape[1:]:  # type: ignore[union-attr]
            self.settle()
            return None, None
        return source.buffer, parents

    def settle(self) -> "RowCache":
        """Do a deferred reorder now (in place; outside a step's region): the old ``select``'s one copy."""
        if self.pending is not None:
            source, rows = self.pending
            end = self.copied_slots
            torch.index_select(source.buffer[:, :, :, :end], 0, rows,
                               out=self.lease.buffer[: rows.numel(), :, :, :end])  # type: ignore[union-attr]
            self.pending = self.chain_from = None  # the rows are copied: the next step writes every input itself
        return self

    def write_slots(self, b: int) -> None:
        """With an arena: name each row's home in the table at the ``b`` slots its next block fills."""
        if self.arena is None:
            return
        table, home = self.table, self.home
        if self.uniform:
            table[:, self.width: self.width + b] = home.unsqueeze(1)  # type: ignore[index,union-attr]
        else:
            slots = self.lens.unsqueeze(1) + torch.arange(b, device=self.lens.device)
            table.scatter_(1, slots, home.unsqueeze(1).expand(-1, b))  # type: ignore[union-attr]

    @staticmethod
    def static(pool: StaticCachePool, lease: Lease, lens: Tensor, width: int, uniform: bool = True) -> "RowCache":
        """A cache over the stacked buffer of ``lease``: its first ``len(lens)`` rows are the live ones."""
        buf, r = lease.buffer, lens.numel()
        layers = buf.size(1) // 2
        return RowCache([buf[:r, i] for i in range(layers)], [buf[:r, layers + i] for i in range(layers)], lens, width,
                        uniform, lease=lease, pool=pool)

    def _static_like(self, rows: int, capacity: int) -> Lease:
        buf = self.lease.buffer  # type: ignore[union-attr]
        return self.pool.acquire(rows, capacity, buf, buf.size(1) // 2, buf.size(2), buf.size(4))  # type: ignore[union-attr]

    @staticmethod
    def of(keys: List[Tensor], values: List[Tensor], lens: Tensor, width: int, uniform: bool = True) -> "RowCache":
        """A cache over new buffers of its own."""
        return RowCache(keys, values, lens, width, uniform, owned=(keys, values))

    @property
    def rows(self) -> int:
        return self.lens.numel()

    @property
    def copied_slots(self) -> int:
        """The slots a reorder copies: the ``width`` filled ones of rows of one length, every slot otherwise."""
        return self.width if self.uniform else self.capacity

    @property
    def capacity(self) -> int:
        return self.table.size(1) if self.table is not None else self.keys[0].size(2)

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more slots beyond ``width`` (in place)."""
        capacity = self.capacity
        if self.width + extra <= capacity:
            return
        if self.arena is not None:  # the table doubles within the arena's buffers, which grow only when too short
            need = self.width + extra
            if need > self.arena.capacity:  # for every cache over them
                self.arena.reserve_slots(max(need, capacity + extra + SLACK))
            cols = min(self.arena.capacity, max(need, capacity + max(capacity, extra + SLACK)))
            self.table = torch.cat([self.table, self.home.unsqueeze(1).expand(-1, cols - capacity)], 1)  # type: ignore[list-item,union-attr]
            return
        if self.lease is not None:  # the next length bucket; every row's slots copied
            self.settle()
            lease = self._static_like(self.lease.rows, length_bucket(self.width + extra))
            lease.buffer[:, :, :, :capacity].copy_(self.lease.buffer)
            grown = RowCache.static(self.pool, lease, self.lens, self.width, self.uniform)  # type: ignore[arg-type]
            self.keys, self.values, self.lease = grown.keys, grown.values, lease
            return
        grow = max(capacity, extra + SLACK)  # doubling: a growth copies every buffer
        self.keys = [_grown(k, self.width, capacity + grow) for k in self.keys]
        self.values = [_grown(v, self.width, capacity + grow) for v in self.values]
        self.owned, self.spare = (self.keys, self.values), None  # the spare has the old capacity

    def select(self, rows: Tensor) -> "RowCache":
        """Rows ``rows`` (with repetition, in that order): the beam reorder, one copy.

        A static cache (``lease``) defers its copy into the next step's region (``pending``; a reorder of a
        reorder composes the two). Otherwise the copy goes into the spare buffers when they are big enough
        (this cache's own become the result's spare). Rows of one length copy their ``width`` filled slots only
        (the slots beyond are written before a step reads them): the reorder moves what
        attention reads, not the spare capacity. Rows of different lengths copy every slot.
        """
        r = rows.numel()
        end = self.copied_slots
        if self.arena is not None:  # the tables, not the keys and values
            lens = self.lens.index_select(0, rows)
            table, home = row_arena.select(self.arena, self.table, self.home, lens, self.width, rows, self)  # type: ignore[arg-type]
            return RowCache.on_arena(self.arena, table, home, lens, self.width, self.uniform)
        if self.lease is not None:  # a buffer of the new row bucket, filled by the next step (one copy, every layer)
            source, parents, step = self.lease, rows, self.last_step
            if self.pending is not None:  # a reorder of a reorder: one copy from the first source
                source, parents, step = self.pending[0], self.pending[1].index_select(0, rows), self.chain_from
            # rows of one length: every row's length is ``width`` whatever its parent (a view, no gather)
            lens = uniform_lens(self.lens, self.width, r) if self.uniform else self.lens.index_select(0, rows)
            out = RowCache.static(self.pool, self._static_like(row_bucket(r), self.capacity),  # type: ignore[arg-type]
                                  lens, self.width, self.uniform)
            out.pending, out.chain_from = (source, parents), step
            return out
        if self.spare is not None and self.spare[0][0].size(0) >= r:
            out_keys, out_values = self.spare
        else:
            room = max(r, self.rows)  # room for this many rows again
            if self.spare is not None and r > self.rows:  # rows added step after step (variable-width
                room = r + r // 2  # beams) outgrow the spare: room to grow, not a new pair at every step
            shape = (room,) + tuple(self.keys[0].shape[1:])
            out_keys = [self.keys[0].new_empty(shape) for _ in self.keys]
            out_values = [self.keys[0].new_empty(shape) for _ in self.values]
            for t in out_keys + out_values:  # what the copy below leaves unset must be finite too
                t[r:].zero_()
                t[:r, :, end:].zero_()
        for src, dst in zip(self.keys + self.values, out_keys + out_values):
            torch.index_select(src[:, :, :end], 0, rows, out=dst[:r, :, :end])
        return RowCache([k[:r] for k in out_keys], [v[:r] for v in out_values], self.lens.index_select(0, rows),
                        self.width, self.uniform, owned=(out_keys, out_values), spare=self.owned)

    def with_capacity(self, capacity: int) -> "RowCache":
        if capacity <= self.capacity:
            return self
        self.settle()
        return RowCache.of([_grown(k, self.capacity, capacity) for k in self.keys],
                           [_grown(v, self.capacity, capacity) for v in self.values], self.lens, self.width, self.uniform)

    @staticmethod
    def concat(caches: Sequence["RowCache"]) -> "RowCache":
        """Stack rows of several caches (rows keep their own lengths)."""
        if len(caches) == 1:
            return caches[0]
        width = max(c.width for c in caches)
        capacity = max(c.capacity for c in caches)
        uniform = all(c.uniform and c.width == width for c in caches)
        if any(c.arena is not None for c in caches):
            return RowCache._concat_fixed([c.settle().as_fixed() for c in caches], width, capacity, uniform)
        static = next((c for c in caches if c.lease is not None), None)
        if static is not None:  # one buffer of the joint row bucket; each part copies its slots
            for c in caches:
                c.settle()
            lease = static._static_like(row_bucket(sum(c.rows for c in caches)), capacity)
            start = 0
            for c in caches:
                for i, (k, v) in enumerate(zip(c.keys, c.values)):
                    lease.buffer[start: start + c.rows, i, :, : c.capacity].copy_(k)
                    lease.buffer[start: start + c.rows, len(c.keys) + i, :, : c.capacity].copy_(v)
                start += c.rows
            return RowCache.static(static.pool, lease, torch.cat([c.lens for c in caches]), width, uniform)  # type: ignore[arg-type]
        caches = [c.with_capacity(capacity) for c in caches]
        n = len(caches[0].keys)
        keys = [torch.cat([c.keys[i] for c in caches]) for i in range(n)]
        values = [torch.cat([c.values[i] for c in caches]) for i in range(n)]
        return RowCache.of(keys, values, torch.cat([c.lens for c in caches]), width, uniform)

    @staticmethod
    def _concat_fixed(caches: Sequence["RowCache"], width: int, capacity: int, uniform: bool) -> "RowCache":
        """Caches that never move in one, over the arena of the most buffer rows: the rows of the others
        are copied into it (their filled positions; a refill's new rows have none)."""
        arena: RowArena = max((c.arena for c in caches), key=lambda a: a.rows)  # type: ignore[arg-type,union-attr,return-value]
        arena.reserve_slots(capacity)
        tables, homes, placed, placed_homes = [], [], [], []  # rows adopted here are nobody's yet: taken rows exclude them
        for c in caches:
            table, home = c.table, c.home
            if c.arena is not arena:
                table, home = row_arena.adopt(arena, c.arena, table, home, c.width, placed, placed_homes)  # type: ignore[arg-type]
                placed.append(table[:, : c.width])  # type: ignore[index]
                placed_homes.append(home)
            if table.size(1) < capacity:  # type: ignore[union-attr]
                table = torch.cat([table, home.unsqueeze(1).expand(-1, capacity - table.size(1))], 1)  # type: ignore[union-attr]
            tables.append(table)
            homes.append(home)
        return RowCache.on_arena(arena, torch.cat(tables), torch.cat(homes), torch.cat([c.lens for c in caches]),  # type: ignore[arg-type]
                                 width, uniform)

    def narrow(self, start: int, length: int) -> "RowCache":
        """Rows ``[start, start + length)``: views of the buffers (or the arena's), no copy (a step
        writes only its own rows). A static cache's part gets a buffer of its own (a static step writes
        its whole row bucket); with a reorder pending, the part's rows are another reorder of its source."""
        lens = self.lens[start: start + length]
        if self.lease is not None:
            if self.pending is not None:
                return self.select(torch.arange(start, start + length, device=self.lens.device))
            lease = self._static_like(row_bucket(length), self.capacity)
            lease.buffer[:length].copy_(self.lease.buffer[start: start + length])
            return RowCache.static(self.pool, lease, lens, self.width, self.uniform)  # type: ignore[arg-type]
        if self.arena is not None:
            return RowCache.on_arena(self.arena, self.table[start: start + length], self.home[start: start + length],  # type: ignore[index]
                                     lens, self.width, self.uniform)
        return RowCache([k[start: start + length] for k in self.keys], [v[start: start + length] for v in self.values],
                        lens, self.width, self.uniform)

    def advanced(self, b: int) -> "RowCache":
        """After a step that wrote a block of ``b`` tokens for every row."""
        if self.lease is not None and self.uniform:  # a static step's rows of one length: a view
            return self._moved(uniform_lens(self.lens, self.width + b, self.lens.numel()), self.width + b, True)
        return self._moved(self.lens + b, self.width + b, self.uniform)

    def at_width(self, width: int) -> "RowCache":
        """Rows of one length with ``width`` tokens each (a native loop's blocks, the rejected slots left to be
        overwritten, as :meth:`accept` leaves them)."""
        assert self.uniform, "RowCache.at_width: rows of one length"
        return self._moved(self.lens + (width - self.width), width, True)

    def accept(self, keep: Tensor, block: int, width: int) -> "RowCache":
        """After a block step, keep the first ``keep[r]`` block tokens of each row.

        ``width`` is the host-known new maximum of ``lens`` (the strategy read it with its
        own control values); the rejected slots are simply overwritten by the next block.
        """
        out = self._moved(self.lens - block + keep, width, self.rows == 1)  # one row: lens == width
        out.last_step = self.last_step  # the same rows: what travels with them stays where the step left it
        return out


@dataclass
class SentenceIndex:
    """Where each row's queries go in the per-sentence padded layout of encoder attention.

    ``sentences`` (n,) the group's sentences (pool indices or stream handles, see
    :class:`EncoderMemory`; some may have no row);
    ``local`` (R,) index into ``sentences`` of each row; ``slot`` (R,) the row's place among
    its sentence's rows; ``width`` (host) at least the most rows of one sentence.
    """

    sentences: Tensor
    local: Tensor
    slot: Tensor
    width: int
    # encoder keys/values gathered for ``sentences``, shared by the indices of later steps
    # while no sentence leaves (see :meth:`inherit`)
    gathered: Dict[int, Tuple[Tensor, Tensor]] = field(default_factory=dict, repr=False, compare=False)
    rows: Optional[Tensor] = field(default=None, repr=False, compare=False)  # see memory_rows

    def inherit(self, previous: Optional["SentenceIndex"]) -> "SentenceIndex":
        """Reuse ``previous``'s gathered encoder states when the sentences are the same tensor."""
        if previous is not None and previous.sentences is self.sentences:
            self.gathered = previous.gathered
        return self

    def gather(self, memory: Tensor, modulus: int = 0) -> Tensor:
        """``memory`` (N, ...) rows of this index's sentences, computed once per sentence set.

        ``modulus``: rows are ``sentences mod modulus`` (stream handles); 0 = the indices.
        """
        entry = self.gathered.get(id(memory))
        # The source is kept beside its copy: a stream's slot buffers are replaced when they
        # grow, and a new tensor may reuse a freed one's id.
        if entry is None or entry[0] is not memory:
            rows = self.sentences % modulus if modulus else self.sentences
            entry = self.gathered[id(memory)] = (memory, memory.index_select(0, rows))
        return entry[1]

    def memory_rows(self, modulus: int = 0) -> Tensor:
        """(R,) the encoder-memory row of each row's sentence, computed once per index."""
        if self.rows is None:  # not in ``gathered``: indices that share it differ in ``local``
            rows = self.sentences % modulus if modulus else self.sentences
            self.rows = rows.index_select(0, self.local)
        return self.rows

    def visible(self, padding: Tensor, modulus: int = 0) -> Tensor:
        """(n, 1, 1, S) True at the source positions this index's sentences attend to (not
        padding), computed once per sentence set as :meth:`gather`."""
        key = -id(padding) - 1  # beside the gathered tensors, apart from them
        entry = self.gathered.get(key)
        if entry is None or entry[0] is not padding:
            entry = self.gathered[key] = (padding, ~self.gather(padding, modulus)[:, None, None, :])
        return entry[1]

    @staticmethod
    def one_per_row(row_sentence: Tensor) -> "SentenceIndex":
        if row_sentence.dtype != torch.long:
            r = row_sentence.numel()
            return SentenceIndex(row_sentence, torch.arange(r, device=row_sentence.device),
                                 torch.zeros_like(row_sentence), 1)
        local, slot = counting(row_sentence, row_sentence.numel())  # the same every step: views of one table
        return SentenceIndex(row_sentence, local, slot, 1)

    @staticmethod
    def build(row_sentence: Tensor) -> "SentenceIndex":
        """From ``row_sentence`` (R,), each sentence's rows consecutive (reads on the host:
        strategies that know their layout pass it instead)."""
        sentences, counts = torch.unique_consecutive(row_sentence, return_counts=True)
        local = torch.repeat_interleave(torch.arange(len(sentences), device=row_sentence.device), counts)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(len(row_sentence), device=row_sentence.device) - starts.index_select(0, local)
        return SentenceIndex(sentences, local, slot, int(counts.max()) if len(counts) else 0)

    @staticmethod
    def concat(indices: Sequence["SentenceIndex"]) -> "SentenceIndex":
        if len(indices) == 1:
            return indices[0]
        offset, local = 0, []
        for ix in indices:
            local.append(ix.local + offset)
            offset += ix.sentences.numel()
        return SentenceIndex(torch.cat([ix.sentences for ix in indices]), torch.cat(local),
                             torch.cat([ix.slot for ix in indices]), max(ix.width for ix in indices))
