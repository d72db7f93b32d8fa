"""The input ``X = {x_1 … x_N}`` of paper 000 Algorithm 1, as one stream over fairseq's batches.

fairseq hands a generator one batch at a time and prints that batch's hypotheses before it
hands over the next, so batches stay the unit of input and output. Algorithm 1 streams over
the whole input: a refill admits the next ``m`` sentences ``x_c … x_{c+m−1}`` (line 8)
whichever batch they came in. :class:`InputStream` queues the sentences of the batches the
generator was given, in order, and when a refill wants more than are queued, it reads the
next batches ahead from fairseq's iterator (:class:`~fairseq_stream.lookahead.Lookahead`).
Each finished n-best list goes back to its batch; a batch is complete once every one of its
sentences finished, while the sentences of later batches stay in flight.

Only source tokens wait here (on the host, a few hundred bytes a sentence, for the batches
read so far); encoder states exist only for sentences in flight
(:mod:`fairseq_stream.encoder_slots`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, NamedTuple, Optional

import torch
from fairseq.data import data_utils
from torch import Tensor

from fairseq_stream.encoder_slots import SLOT_MODULUS
from fairseq_stream.interface import Hypothesis
from fairseq_stream.lookahead import Batch, Lookahead


@dataclass(eq=False)
class QueuedBatch:
    """One fairseq batch: its sentences' n-best lists, filled in as they finish."""

    size: int
    hypos: List[Optional[List[Hypothesis]]] = field(repr=False)
    missing: int  # sentences not finished yet


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


class _Waiting(NamedTuple):
    tokens: Tensor  # (n,) the source without padding
    max_len: int
    batch: QueuedBatch
    row: int


class InputStream:
    """Sentences waiting for a refill, and where each one's hypotheses go."""

    def __init__(self, *, pad: int, max_lengths: Callable[[Tensor], Tensor]) -> None:
        self.pad = pad
        self.max_lengths = max_lengths  # source lengths (B,) → maximum target lengths (B,)
        self.left_pad = True  # fairseq translation's default; set by the first padded batch
        self._queue: Deque[_Waiting] = deque()
        self._first_queued = 0  # serial of the sentence at the head of the queue (serials: input order)
        self._in_flight: Dict[int, _Waiting] = {}  # serial → admitted, not finished
        self._lookahead: Optional[Lookahead] = None
        self._tickets: Dict[int, QueuedBatch] = {}  # batches read from the lookahead, not returned
        self._next_ticket = 0

    # ---- batches in -------------------------------------------------------------------------
    def batch_for(self, sample: Batch, lookahead: Optional[Lookahead]) -> QueuedBatch:
        """``sample``'s batch: queued when it was read ahead, queued now otherwise.

        ``lookahead``: fairseq's iterator ``sample`` came from, read ahead at refills; None
        decodes the batch on its own (``--stream-per-batch``, or a caller's own loop).
        """
        if lookahead is not self._lookahead:  # a new run (fairseq-interactive: a new buffer)
            self._lookahead, self._tickets, self._next_ticket = lookahead, {}, 0
        ticket = None if lookahead is None else lookahead.ticket_of(sample)
        if ticket is None:
            return self._push(sample)
        batch = self._tickets.pop(ticket, None)
        if batch is None:
            batch = self._push(sample)
            self._next_ticket = max(self._next_ticket, ticket + 1)
        return batch

    def _read_ahead(self) -> bool:
        """Queue the next batch of the lookahead; False at its end."""
        while self._lookahead is not None:
            sample = self._lookahead.peek(self._next_ticket)
            if sample is None:
                return False
            ticket, self._next_ticket = self._next_ticket, self._next_ticket + 1
            if "net_input" in sample:  # fairseq-generate skips a batch without one
                self._tickets[ticket] = self._push(sample)
                return True
        return False

    def _push(self, sample: Batch) -> QueuedBatch:
        tokens = sample["net_input"]["src_tokens"].cpu()  # (B, T)
        lengths = tokens.ne(self.pad).long().sum(dim=1)  # (B,)
        if bool(tokens[:, -1].eq(self.pad).any()):
            self.left_pad = False
        elif bool(tokens[:, 0].eq(self.pad).any()):
            self.left_pad = True
        limits = self.max_lengths(lengths).tolist()
        batch = QueuedBatch(size=len(limits), hypos=[None] * len(limits), missing=len(limits))
        width = tokens.size(1)
        for row, n in enumerate(lengths.tolist()):
            source = tokens[row, width - n:] if self.left_pad else tokens[row, :n]
            self._queue.append(_Waiting(source, limits[row], batch, row))
        return batch

    # ---- refills ----------------------------------------------------------------------------
    def take(self, n: int) -> Optional[Admission]:
        """The next ``n`` sentences (fewer at the end of the input), reading ahead as needed."""
        while len(self._queue) < n and self._read_ahead():
            pass
        if not self._queue:
            return None
        picked = [self._queue.popleft() for _ in range(min(n, len(self._queue)))]
        first = self._first_queued
        self._first_queued += len(picked)
        for i, waiting in enumerate(picked):
            self._in_flight[first + i] = waiting
        tokens = data_utils.collate_tokens([w.tokens for w in picked], self.pad, left_pad=self.left_pad)
        lengths = torch.tensor([w.tokens.numel() for w in picked])
        limits = [w.max_len for w in picked]
        return Admission(first, tokens, lengths, torch.tensor(limits), limits, self.left_pad)

    # ---- hypotheses out ---------------------------------------------------------------------
    def deliver(self, finished: Dict[int, List[Hypothesis]]) -> None:
        """File n-best lists keyed by stream handle (``serial·SLOT_MODULUS + slot``) under their batch."""
        for handle, nbest in finished.items():
            waiting = self._in_flight.pop(handle // SLOT_MODULUS)
            waiting.batch.hypos[waiting.row] = nbest
            waiting.batch.missing -= 1

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
