"""The input ``X = {x_1 … x_N}`` of Yang2020 Algorithm 1, as one stream over fairseq's batches.

fairseq hands a generator one batch at a time and prints that batch's hypotheses before it
hands over the next, so batches stay the unit of input and output. Algorithm 1 streams over
the whole input: a refill admits the next ``m`` sentences ``x_c … x_{c+m−1}`` (line 8)
whichever batch they came in. :class:`InputStream` queues the sentences of the batches the
generator was given, in order, and when a refill wants more than are queued, it reads the
next batches ahead from fairseq's iterator (:class:`~fairseq_stream.integration.read_ahead.ReadAhead`).
Each finished n-best list goes back to its batch; a batch is complete once every one of its
sentences finished, while the sentences of later batches stay in flight.

Only source tokens wait here (fairseq's token tables, on the host, for the batches read so
far); a refill cuts its sentences out of them as one table, and encoder states exist only for
sentences in flight (:mod:`fairseq_stream.model.encoder_slots`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Protocol, Tuple

import torch
import torch.nn.functional as F
from fairseq.data import data_utils
from torch import Tensor

from fairseq_stream.model.encoder_slots import SLOT_MODULUS
from fairseq_stream.search.interface import Hypothesis, empty_hypothesis

Batch = Dict[str, Any]  # a collated fairseq sample


class ReadAhead(Protocol):
    """What the stream needs of fairseq's iterator read ahead (``integration/read_ahead.ReadAhead``
    implements it; declared here so that core imports nothing of the fairseq glue above it)."""

    def peek(self, ticket: int) -> Optional[Batch]:
        """Batch ``ticket`` (0-based) if not handed to fairseq's loop yet; None past the end."""
        ...

    def ticket_of(self, sample: Batch) -> Optional[int]:
        """The ticket of the batch handed out last, if ``sample`` is it."""
        ...


@dataclass(eq=False)
class QueuedBatch:
    """One fairseq batch: its sentences' n-best lists, filled in as they finish."""

    size: int
    hypos: List[Optional[List[Dict[str, Any]]]] = field(repr=False)  # fairseq's dicts
    missing: int  # sentences not finished yet
    ids: List[int] = field(default_factory=list, repr=False)  # fairseq's sentence ids (error messages)


@dataclass
class Admission:
    """The sentences one refill admits (Algorithm 1, line 8), serials ``first … first + m − 1``."""

    first: int
    src_tokens: Tensor  # (m, w) on the host, padded on the side of fairseq's batches
    src_lengths: Tensor  # (m,) non-pad tokens, EOS included
    max_len: Tensor  # (m,) maximum target lengths (fairseq's a·|x| + b per sentence)
    limits: List[int]  # the same, on the host
    left_pad: bool

    @property
    def count(self) -> int:
        return len(self.limits)


@dataclass(eq=False)
class _Segment:
    """The sentences of one batch not admitted yet: rows ``next …`` of its token table."""

    batch: QueuedBatch
    tokens: Tensor  # (B', T) on the host: fairseq's table without the empty sources
    lengths: List[int]
    limits: List[int]
    left_pad: bool
    rows: List[int]  # the batch row of each row of ``tokens``
    next: int = 0


class InputStream:
    """Sentences waiting for a refill, and where each one's hypotheses go."""

    def __init__(self, *, pad: int, max_lengths: Callable[[Tensor], Tensor], eos: int = 2, nbest: int = 1) -> None:
        self.pad = pad
        self.eos = eos
        self.nbest = nbest  # --nbest: a shorter list is counted (variable beams may end with fewer)
        self.fewer_than_nbest = 0  # sentences delivered with fewer than ``nbest`` hypotheses
        self.empty_sources = 0  # of those, empty sources (one empty hypothesis: nothing was searched)
        self.without_hypothesis = 0  # sentences whose search ended with none (given the empty one)
        self.done = 0  # sentences with their hypotheses, empty sources included
        self.on_done: Optional[Callable[[int], None]] = None  # told ``done`` as it grows (the progress bar)
        # told every refill's sentences before the stream decodes them, and each sentence's n-best lists
        # (serial, fairseq's dicts) as they leave: --prune-auto probes there (integration/prune_auto.py)
        self.on_admit: Optional[Callable[[Admission], None]] = None
        self.on_finish: Optional[Callable[[int, List[Dict[str, Any]]], None]] = None
        # told a copy's n-best list (its stream handle, fairseq's dicts) as it leaves (:meth:`add_copies`)
        self.on_copy: Optional[Callable[[int, List[Dict[str, Any]]], None]] = None
        # asked, at each refill, which of its rows (source lengths, EOS included; whether it is the input's last)
        # to copy (a row once per copy; only rows the refill keeps: below its length minus the copies), and told
        # the admission, the rows and the copies' serials once they joined it; the refill takes one sentence
        # fewer per copy (take)
        self.plan_copies: Optional[Callable[[List[int], bool], List[int]]] = None
        self.on_copies: Optional[Callable[[Admission, List[int], List[int]], None]] = None
        self.max_lengths = max_lengths  # source lengths (B,) → maximum target lengths (B,)
        self.left_pad = True  # fairseq translation's default; set by the first padded batch
        self._queue: Deque[_Segment] = deque()
        self._queued = 0
        self._next_serial = 0  # serial of the next sentence admitted (serials follow the input)
        self._in_flight: Dict[int, Tuple[QueuedBatch, int]] = {}  # serial → (batch, row), admitted
        self._copies: Dict[int, int] = {}  # serial → fairseq's id of the sentence it copies, in flight
        self._reader: Optional[ReadAhead] = None
        self._tickets: Dict[int, QueuedBatch] = {}  # batches read ahead, not returned
        self._next_ticket = 0

    # ---- batches in -------------------------------------------------------------------------
    def batch_for(self, sample: Batch, reader: Optional[ReadAhead]) -> QueuedBatch:
        """``sample``'s batch: queued when it was read ahead, queued now otherwise.

        ``reader``: fairseq's iterator ``sample`` came from, read ahead at refills; None
        decodes the batch on its own (``--stream-per-batch``, or a caller's own loop).
        """
        if reader is not self._reader:  # a new run (fairseq-interactive: a new buffer)
            self._reader, self._tickets, self._next_ticket = reader, {}, 0
        ticket = None if reader is None else reader.ticket_of(sample)
        if ticket is None:
            return self._push(sample)
        batch = self._tickets.pop(ticket, None)
        if batch is None:
            batch = self._push(sample)
            self._next_ticket = max(self._next_ticket, ticket + 1)
        return batch

    def _read_ahead(self) -> bool:
        """Queue the next batch read ahead; False at its end."""
        while self._reader is not None:
            sample = self._reader.peek(self._next_ticket)
            if sample is None:
                return False
            ticket, self._next_ticket = self._next_ticket, self._next_ticket + 1
            if "net_input" in sample:  # fairseq-generate skips a batch without one
                self._tickets[ticket] = self._push(sample)
                return True
        return False

    def _push(self, sample: Batch) -> QueuedBatch:
        tokens = sample["net_input"]["src_tokens"].cpu()  # (B, T)
        lengths = tokens.ne(self.pad).long().sum(dim=1)  # (B,) non-pad tokens, EOS included
        if bool(tokens[:, -1].eq(self.pad).any()):
            self.left_pad = False
        elif bool(tokens[:, 0].eq(self.pad).any()):
            self.left_pad = True
        limits = self.max_lengths(lengths).tolist()
        ids = sample["id"].tolist() if "id" in sample else list(range(len(limits)))
        batch = QueuedBatch(size=len(limits), hypos=[None] * len(limits), missing=len(limits), ids=ids)
        # An empty source (EOS only: an empty or blank line) gets the empty hypothesis at once,
        # without a model call: any decoder would only make a sentence up for it.
        rows = [row for row, n in enumerate(lengths.tolist()) if n > 1]
        for row in set(range(len(limits))) - set(rows):
            batch.hypos[row] = [empty_hypothesis(self.eos)]
            batch.missing -= 1
            self.fewer_than_nbest += self.nbest > 1  # one hypothesis: there is no second way to say nothing
            self.empty_sources += self.nbest > 1
        self._count_done(batch.size - len(rows))
        if rows:
            keep = torch.tensor(rows)
            self._queue.append(_Segment(batch, tokens[keep], lengths[keep].tolist(), [limits[r] for r in rows],
                                        self.left_pad, rows))
            self._queued += len(rows)
        return batch

    # ---- refills ----------------------------------------------------------------------------
    def take(self, n: int) -> Optional[Admission]:
        """The next ``n`` sentences (fewer at the end of the input), reading ahead as needed; with
        :attr:`plan_copies`, fewer by the copies it asks for, which join the refill (:meth:`add_copies`),
        so that sentences and copies together stay within ``n``."""
        while self._queued < n and self._read_ahead():
            pass
        if not self._queued:
            return None
        parts = self._peek(n)
        copies: List[int] = []
        if self.plan_copies is not None:
            lengths = [k for seg, lo, hi in parts for k in seg.lengths[lo:hi]]
            # the input's last refill (nothing queued beyond it, nothing left to read): copies would steer nothing
            last = self._queued <= len(lengths) and self._reader is not None and not self._read_ahead()
            copies = self.plan_copies(lengths, last)
            keep = len(lengths) - len(copies)
            if copies and not (keep > 0 and max(copies) < keep):
                raise RuntimeError("plan_copies may copy only the rows that the refill keeps")
            parts = self._peek(keep)
        first = self._next_serial
        for seg, lo, hi in parts:
            seg.next = hi
            if hi == len(seg.lengths):
                self._queue.popleft()
            for row in range(lo, hi):
                self._in_flight[self._next_serial] = (seg.batch, seg.rows[row])
                self._next_serial += 1
        self._queued -= self._next_serial - first
        lengths = [k for seg, lo, hi in parts for k in seg.lengths[lo:hi]]
        limits = [k for seg, lo, hi in parts for k in seg.limits[lo:hi]]
        tokens = self._table(parts, max(lengths))
        admission = Admission(first, tokens, torch.tensor(lengths), torch.tensor(limits), limits, self.left_pad)
        if self.on_admit is not None:
            self.on_admit(admission)
        if copies and self.on_copies is not None:
            self.on_copies(admission, copies, self.add_copies(admission, copies))
        return admission

    def _peek(self, n: int) -> List[Tuple[_Segment, int, int]]:
        """The queue's next ``n`` sentences as (segment, first row, end row), taking none."""
        parts: List[Tuple[_Segment, int, int]] = []
        for seg in self._queue:
            if n <= 0:
                break
            end = min(seg.next + n, len(seg.lengths))
            parts.append((seg, seg.next, end))
            n -= end - seg.next
        return parts

    def add_copies(self, admission: Admission, rows: List[int]) -> List[int]:
        """Append to ``admission`` (from :attr:`on_admit`, before the stream sees it) a copy of each of its
        ``rows``: decoded like any sentence of the refill, delivered to :attr:`on_copy` only — no batch, no
        progress, not in :attr:`in_flight` (``--prune-auto``'s probes decoded in the run's own steps). Returns
        the copies' serials, which follow the refill's."""
        if admission.first + admission.count != self._next_serial:
            raise RuntimeError("copies are added to the newest refill only")
        if not rows:
            return []
        idx = torch.tensor(rows, dtype=torch.long)
        admission.src_tokens = torch.cat([admission.src_tokens, admission.src_tokens.index_select(0, idx)])
        admission.src_lengths = torch.cat([admission.src_lengths, admission.src_lengths.index_select(0, idx)])
        admission.max_len = torch.cat([admission.max_len, admission.max_len.index_select(0, idx)])
        admission.limits = admission.limits + [admission.limits[r] for r in rows]
        serials = list(range(self._next_serial, self._next_serial + len(rows)))
        for serial, row in zip(serials, rows):
            self._copies[serial] = self.sentence_id(admission.first + row)
        self._next_serial += len(rows)
        return serials

    @property
    def copies_in_flight(self) -> int:
        return len(self._copies)

    def only_copies_left(self) -> bool:
        """Whether the copies in flight are all that is left of the input: none of its sentences is in flight
        or still to admit (so no caller will wait for what the stream decodes next)."""
        return bool(self._copies) and not self._in_flight and self.exhausted()

    def drop_copies(self) -> None:
        """Forget the copies in flight (their stream dropped them unfinished: the scheduler counts them)."""
        self._copies = {}

    def exhausted(self) -> bool:
        """Whether nothing is left to admit: none queued and fairseq's iterator at its end (one batch read
        ahead, as a refill would). False when unknown (no iterator to read ahead: interactive chunks)."""
        return self._reader is not None and not self._queued and not self._read_ahead()

    def sentence_id(self, serial: int) -> int:
        """fairseq's id of the sentence in flight under ``serial`` (a copy's: the copied sentence's)."""
        if serial in self._copies:
            return self._copies[serial]
        batch, row = self._in_flight[serial]
        return batch.ids[row]

    def _table(self, parts: List[Tuple[_Segment, int, int]], width: int) -> Tensor:
        """Rows of several batches' token tables as one (m, width) table, padded on the stream's side."""
        rows = []
        for seg, lo, hi in parts:
            block = seg.tokens[lo:hi]  # (r, T)
            if seg.left_pad != self.left_pad:  # not within a fairseq run; kept correct anyway
                block = data_utils.collate_tokens([t[t.ne(self.pad)] for t in block], self.pad, left_pad=self.left_pad)
            extra = block.size(1) - width  # > 0: columns of padding only (no row is longer than width)
            if self.left_pad:
                block = block[:, extra:] if extra >= 0 else F.pad(block, (-extra, 0), value=self.pad)
            else:
                block = block[:, :width] if extra >= 0 else F.pad(block, (0, -extra), value=self.pad)
            rows.append(block)
        return torch.cat(rows)

    # ---- hypotheses out ---------------------------------------------------------------------
    def deliver(self, finished: Dict[int, List[Hypothesis]]) -> None:
        """File n-best lists keyed by stream handle (``serial·SLOT_MODULUS + slot``) under their
        batch, as fairseq's dicts: this is where hypotheses leave for fairseq."""
        copies = 0
        for handle, nbest in finished.items():
            serial = handle // SLOT_MODULUS
            if self._copies.pop(serial, None) is not None:
                copies += 1
                if self.on_copy is not None:
                    self.on_copy(handle, [h.to_fairseq() for h in nbest])
                continue
            batch, row = self._in_flight.pop(serial)
            if nbest:
                batch.hypos[row] = [h.to_fairseq() for h in nbest]
            else:  # blocking left no candidate: fairseq would fail (IndexError) or drop the sentence
                batch.hypos[row] = [empty_hypothesis(self.eos)]  # counted, and warned about once at the end
                self.without_hypothesis += 1
            if self.on_finish is not None:
                self.on_finish(serial, batch.hypos[row])  # type: ignore[arg-type]
            self.fewer_than_nbest += max(len(nbest), 1) < self.nbest
            batch.missing -= 1
        self._count_done(len(finished) - copies)

    def _count_done(self, n: int) -> None:
        """Progress is counted here, once, as hypotheses leave for fairseq."""
        if n:
            self.done += n
            if self.on_done is not None:
                self.on_done(self.done)

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
