"""Sentence buckets: a strategy's search step inside the static step's region (docs/architecture.md, "The static step").

A static decoder step computes every row of its row bucket (:func:`fairseq_stream.model.static.buckets.row_bucket`)
over buffers fixed for the bucket, so that its operations — one CUDA graph — do not change while the
live rows vary within it. This module gives a strategy's search step the same property over
*sentences*, so that it runs in the same region after the output layer (:class:`RegionSearch`, a
:class:`~fairseq_stream.model.static.tail.RegionTail`'s ``search``): the group's state tensors (its
:func:`~fairseq_stream.search.state.per_sentence` fields) are views of ``[0, S)`` of a **bucket state** of
``S_b`` sentences, the rest **inert** (no candidate: no hypothesis, no row; the padding contract of
:mod:`fairseq_stream.ops.beam_step`); the step runs over the whole bucket state and every row of the row
bucket (a padding row's slot is −1), and writes its packet and next rows into buffers of the bucket state,
which the host reads after the region (one read) and the next region reads again: its row slots are
the last step's (−1 past the live rows), and the sentences that finished there — compacted after
those that go on — are made inert by the last packet's count, on the device. The bucket state changes only
where the group does (a refill, a merge, a split) or falls to a bucket far smaller: one copy then.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.model.static.tail import StepScores
from fairseq_stream.model.static.buckets import next_pow2, row_bucket

#: a bucket state is kept while its group's own bucket is at least this fraction of it (fewer copies as sentences end;
#: an inert sentence costs a step little)
KEEP_FRACTION = 8


def sentence_bucket(sentences: int, rows_per_sentence: int) -> int:
    """The bucket state's sentences for ``sentences`` live ones: a power of two whose slots hold the row bucket of a
    full group (the step's row slots are a view of the bucket state's next-row slots)."""
    s = next_pow2(max(1, sentences))
    while s * rows_per_sentence < row_bucket(sentences * rows_per_sentence):
        s *= 2
    return s


@dataclass(eq=False)
class SentenceBucket:
    """A group's bucket state and the buffers its steps leave for the next one."""

    state: Any  # the bucket state: one of the strategy's class whose per-sentence tensors have S_b sentences
    size: int  # S_b
    thresholds: Tensor  # (S_b,) S_b − i for sentence i, in the packet's dtype
    packet: Tensor  # the last step's packet: which sentences went on (zeros before the first)
    rows: Tensor  # (5, S_b·k) the last step's next rows; rows[4], their slots, −1 past the live ones
    backend: str = ""  # the backend of the last step (recorded when its packet is read)
    scratch: Dict[str, Tensor] = dataclasses.field(default_factory=dict)  # the strategy's own buffers of its steps
    ordinal: int = 0  # its place in the pool's lending order
    family: Tuple[Any, ...] = ()
    lent: bool = False

    def next_rows(self, row_slot: Tensor) -> None:
        """The next step's row slots: ``row_slot`` (the group's rows), then padding rows (−1)."""
        self.rows[4].fill_(-1)
        self.rows[4, : row_slot.numel()].copy_(row_slot)

    def next_feed(self) -> Tensor:
        """(S_b·k, b) what the last step's next rows are fed: ``scratch["feed"]`` where the strategy keeps a block of
        its own there (ib-beam's z words), else the rows buffer's one token."""
        feed = self.scratch.get("feed")
        return self.rows[1].unsqueeze(1) if feed is None else feed

    def next_inputs(self, rows: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """The last step's next rows over the ``rows`` rows of a row bucket: each row's feed (rows, b), place among
        its sentence's rows, parent row and whether it is live (a padding row's slot is −1), as views."""
        r = self.rows[:, :rows]
        return self.next_feed()[:rows], r[2], r[0], r[4] >= 0

    def make_inert(self, finished: Tensor, resets: Mapping[str, Any]) -> None:
        """The last ``finished`` sentences of the bucket state (a 0-dim device tensor: the last packet's count; those
        that finished there, and the inert ones) made inert: each field of ``resets`` filled with its value."""
        inert = finished >= self.thresholds  # (S_b,): i >= S_b - finished
        for name, value in resets.items():
            t = getattr(self.state, name)
            t.masked_fill_(inert.view((-1,) + (1,) * (t.dim() - 1)), value)


def sentence_fields(state: Any) -> Dict[str, Tensor]:
    """The state's per-sentence tensors by name (the rest are rows, host bounds and parts)."""
    return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)
            if f.metadata.get("kind", "sentence") == "sentence" and torch.is_tensor(getattr(state, f.name))}


def bucket_size(sentences: int, rows_per_sentence: int, bucket: Optional[SentenceBucket]) -> int:
    """The bucket state's size for the step: ``bucket``'s while the group fits it and is not far smaller, else its own."""
    own = sentence_bucket(sentences, rows_per_sentence)
    if bucket is not None and own <= bucket.size < KEEP_FRACTION * own:
        return bucket.size
    return own


def in_bucket(state: Any, bucket: Optional[SentenceBucket], size: int) -> bool:
    """Whether every per-sentence tensor of ``state`` is the first sentences of ``bucket``'s bucket state of ``size``."""
    if bucket is None or bucket.size != size:
        return False
    whole = sentence_fields(bucket.state)
    return all(name in whole and _start(t) == _start(whole[name]) for name, t in sentence_fields(state).items())


def _start(t: Tensor) -> Tuple[int, int]:
    """Where ``t`` starts in memory — its storage and offset (``data_ptr`` is 0 for a view with no element: a
    Jacobi draft of no column)."""
    return t.untyped_storage().data_ptr(), t.storage_offset()


class BucketStatePool:
    """A strategy's bucket states, lent lowest ordinal first by family (size, the state's shapes past the sentence with
    its token columns rounded up to a power of two, dtypes, device; like the cache bucket states of
    :class:`~fairseq_stream.model.static.slabs.StaticCachePool`): a repeat of a run takes the bucket states — the
    addresses its step graphs are keyed by — of the run before, so its graphs replay. A bucket state comes back
    where its group ends, merges or moves to another bucket state (:meth:`release`); one whose group was split is
    left to the garbage collector (both parts still read it). At most ``limit`` free bucket states are kept."""

    def __init__(self, *, limit: int = 32) -> None:
        self.limit = limit
        self.free: Dict[Tuple[Any, ...], List[SentenceBucket]] = {}
        self.made = 0

    def lend(self, state: Any, size: int, inert: Mapping[str, Any], *, packet_size: int,
             rows_per_sentence: int, columns: Optional[Mapping[str, int]] = None) -> SentenceBucket:
        """A bucket state of ``size`` sentences holding ``state`` first (the rest inert: each field ``inert[name]``);
        ``state``'s tensors become views of it (the same values; token columns past its own are padding).
        ``columns``: fields whose bucket state has at least this many columns (a step's outputs written there); their
        views keep the state's own columns (a Jacobi feed's width is the next block's)."""
        fields = sentence_fields(state)
        shapes = {name: _bucket_shape(state, name, t, (columns or {}).get(name, 0)) for name, t in fields.items()}
        family = (size, packet_size, rows_per_sentence, state.sentences.device) + tuple(
            (name, shapes[name], t.dtype) for name, t in fields.items())
        free = self.free.get(family)
        bucket = free.pop(0) if free else self._make(state, fields, size, shapes, packet_size, rows_per_sentence,
                                                     family)
        s = state.size
        for name, t in fields.items():
            into = getattr(bucket.state, name)
            into.fill_(inert[name])
            own = into[(slice(0, s),) + tuple(slice(0, n) for n in t.shape[1:])]
            own.copy_(t)
            setattr(state, name, own if columns and name in columns else into[:s])
        if getattr(state, "row_slot", None) is not None:  # a beam's rows (a Jacobi sentence is its row)
            bucket.next_rows(state.row_slot)
        bucket.packet.zero_()  # nobody finished: no sentence made inert before the first step
        bucket.lent = True
        return bucket

    def hold(self, state: Any, inert: Mapping[str, Any], *, packet_size: Callable[[int], int],
             rows_per_sentence: int) -> Tuple[SentenceBucket, bool]:
        """A beam-like group's bucket state for its next step (rows of their own: ``state.row_slot``): its own where it
        still fits (:func:`bucket_size`, :func:`in_bucket`), else one lent here (``packet_size(size)``), the old
        one handed back; and whether the group's rows are that bucket state's next rows as its last step left them in
        the region (the region may read their inputs there: ``RegionSearch.gives_inputs``)."""
        bucket = state.bucket
        size = bucket_size(state.size, rows_per_sentence, bucket)
        if not in_bucket(state, bucket, size):  # a new group, a merge, a split, a far smaller bucket: one copy
            state.bucket = self.lend(state, size, inert, rows_per_sentence=rows_per_sentence,
                                     packet_size=packet_size(size))
            self.release(bucket)
            return state.bucket, False
        if state.row_slot.data_ptr() != bucket.rows[4].data_ptr():  # the last step searched after the region
            bucket.next_rows(state.row_slot)
            return bucket, False
        return bucket, True

    def release_merged(self, parts: Sequence[Any]) -> None:
        """The bucket states of states merged into one (copied from by the merge) back to the pool."""
        if len(parts) > 1:
            for part in parts:
                self.release(part.bucket)

    def release(self, bucket: Optional[SentenceBucket]) -> None:
        """``bucket`` back to the pool (its group no longer reads it; no hypothesis views it)."""
        if bucket is None or not bucket.lent:
            return
        bucket.lent = False
        free = self.free.setdefault(bucket.family, [])
        free.append(bucket)
        free.sort(key=lambda b: b.ordinal)
        if sum(len(v) for v in self.free.values()) > self.limit:  # the newest-made free bucket state goes
            family = max(self.free, key=lambda f: self.free[f][-1].ordinal if self.free[f] else -1)
            self.free[family].pop()

    @property
    def free_count(self) -> int:
        """Bucket states kept free."""
        return sum(len(v) for v in self.free.values())

    @property
    def free_bytes(self) -> int:
        """The bytes of the bucket states kept free."""
        return sum(_bucket_bytes(b) for v in self.free.values() for b in v)

    def release_free(self) -> int:
        """Drop every free bucket state (``model.model_step.release_cached_memory``); their bytes."""
        freed = self.free_bytes
        self.free.clear()
        return freed

    def _make(self, state: Any, fields: Mapping[str, Tensor], size: int, shapes: Mapping[str, Tuple[int, ...]],
              packet_size: int, rows_per_sentence: int, family: Tuple[Any, ...]) -> SentenceBucket:
        full = {name: t.new_empty((size,) + shapes[name]) for name, t in fields.items()}
        dropped = {f.name: None for f in dataclasses.fields(state) if f.metadata.get("kind") == "transient"}
        dev = state.sentences.device
        self.made += 1
        return SentenceBucket(dataclasses.replace(state, **full, **dropped), size,
                              size - torch.arange(size, dtype=torch.float64, device=dev),
                              torch.zeros(packet_size, dtype=torch.float64, device=dev),
                              torch.empty(5, size * rows_per_sentence, dtype=torch.long, device=dev),
                              ordinal=self.made, family=family)


def _bucket_bytes(bucket: SentenceBucket) -> int:
    tensors = (list(sentence_fields(bucket.state).values()) + [bucket.packet, bucket.rows, bucket.thresholds]
               + list(bucket.scratch.values()))
    return sum(t.numel() * t.element_size() for t in tensors)


def _bucket_shape(state: Any, name: str, t: Tensor, columns: int = 0) -> Tuple[int, ...]:
    """A field's shape past the sentence in a bucket state: the token columns of a field that is widened with padding
    (``per_sentence(pad=...)``, not scratch-last) rounded up to a power of two, so that groups share bucket states;
    at least ``columns`` of them."""
    meta = next(f.metadata for f in dataclasses.fields(state) if f.name == name)
    shape = tuple(t.shape[1:])
    if meta.get("pad") is not None and not meta.get("scratch_last") and shape:
        shape = shape[:-1] + (next_pow2(max(shape[-1], columns)),)
    return shape


#: ``launch(bucket_state, outputs)`` → (packet, backend): the strategy's operator in device operations, over the
#: whole bucket state and the output layer's outputs over every row of the row bucket; it writes what the next step
#: reads besides the packet (a beam's next rows, Jacobi's draft and feed) into the bucket state's buffers itself
StepLaunch = Callable[[Any, Sequence[Tensor]], Tuple[Tensor, str]]


class RegionSearch:
    """A search step a static decoder step runs inside its region, after the output layer (``RegionTail.search``):
    over ``bucket``'s bucket state, from the output layer's outputs over every row of the row bucket, into the
    bucket's packet (and what ``launch`` writes). Its operations follow the shapes only; every tensor it reads
    or writes is named by :attr:`key` (addresses) and held by :attr:`tensors` (a step graph keeps them).
    ``fits(rows)`` says whether a row bucket of ``rows`` rows (query rows: sentences × block width for a
    block step) is one this bucket state's step takes. ``tail_inputs()``, where given, computes the output layer's
    inputs over every row of the bucket (or more: the first are taken) from the bucket state, in the region before the
    layer (the step then copies none in before it)."""

    def __init__(self, bucket: SentenceBucket, launch: StepLaunch, *, resets: Mapping[str, Any], finished_at: int,
                 config: Tuple[Any, ...], fits: Callable[[int], bool], extra: Sequence[Tensor] = (),
                 tail_inputs: Optional[Callable[[], Tuple[Tensor, ...]]] = None, next_rows: bool = False) -> None:
        self.bucket, self.launch, self.resets, self.finished_at, self.fits = bucket, launch, resets, finished_at, fits
        self.tail_inputs = tail_inputs
        self.next_rows = next_rows  # the group's rows are the bucket's next rows (its last step's, in the region)
        self.tensors: List[Tensor] = (list(sentence_fields(bucket.state).values())
                                      + [bucket.packet, bucket.rows, bucket.thresholds] + list(extra))
        self.key = ("search", config, bucket.size) + tuple(t.data_ptr() for t in self.tensors)

    def gives_inputs(self, tokens: Tensor, slot: Tensor, parents: Optional[Tensor]) -> bool:
        """Whether a step's inputs — its rows' ``tokens`` (r, b), places among their sentence's rows and parents
        (None: in place) — are the bucket's next rows as its last step left them, so that the region reads them
        there (:meth:`SentenceBucket.next_inputs`)."""
        rows, feed = self.bucket.rows, self.bucket.next_feed()
        return (self.next_rows and tokens.size(1) == feed.size(1) and _start(tokens) == _start(feed)
                and tokens.stride() == feed.stride() and _start(slot) == _start(rows[2])
                and (parents is None or _start(parents) == _start(rows[0])))

    def __call__(self, outputs: Sequence[Tensor]) -> None:
        bucket = self.bucket
        bucket.make_inert(bucket.packet[self.finished_at], self.resets)
        packet, bucket.backend = self.launch(bucket.state, outputs)
        bucket.packet.copy_(packet)


class SearchInRegion:
    """The ``"region"`` hook (:class:`~fairseq_stream.search.interface.SearchesInRegion`) written once, for a
    :class:`~fairseq_stream.search.state.StateOps` strategy whose search step can run inside a static decoder
    step's region over bucket states (beam, ib-beam, Jacobi; the proposers through their verifier). Put it
    before ``StateOps`` in the bases; a strategy gives:

    * ``_tail(state)`` — its output layer as a region tail (``OutputScorer.tail``), or None;
    * ``_region_search(state)`` — the :class:`RegionSearch` of its next step over the group's bucket state;
    * ``_searched(state)`` — the outcome of a step that ran in the region (its packet read: the step's one read);
    * ``_step_after(state, scores, top)`` — the step after the region (``top``: the tail's outputs, or None).
    """

    buckets: BucketStatePool

    def output_tail(self, state: Any) -> Any:
        tail = self._tail(state)
        if tail is not None and state.size:
            tail.search = self._region_search(state)
        return tail

    def share_pools(self, pool: Callable[[type, Callable[[], Any]], Any]) -> None:
        """Take the bucket states the model keeps across runs for this class (``ModelStep.strategy_pool``): a
        repeat of a run then lends the same buffers, whose addresses its step graphs are keyed by."""
        self.buckets = pool(type(self), BucketStatePool)

    def concat(self, states: Sequence[Any]) -> Any:
        merged = super().concat(states)  # type: ignore[misc]
        self.buckets.release_merged(states)  # the parts' bucket states were copied from
        return merged

    def step(self, state: Any, scores: "Tensor | StepScores") -> Any:
        """One step from the decoder step's :class:`StepScores` (or the scores alone, from a direct caller)."""
        scores = StepScores.of(scores)
        if scores.searched:  # the search step ran in the decoder step's region (output_tail)
            return self._searched(state)
        return self._step_after(state, scores.scores, scores.top)

    def _tail(self, state: Any) -> Any:
        raise NotImplementedError

    def _region_search(self, state: Any) -> RegionSearch:
        raise NotImplementedError

    def _searched(self, state: Any) -> Any:
        raise NotImplementedError

    def _step_after(self, state: Any, scores: Tensor, top: Optional[Tuple[Tensor, ...]]) -> Any:
        raise NotImplementedError
