"""The streaming scheduler: which sentences are in flight and which of them take a step.

Yang2020 Algorithm 1, strategy-agnostic (the design: ``docs/architecture.md``):

* **refill** — when the sentences in flight drop to ``ε·n`` (or, with a candidate budget
  ``C``, the live candidates drop to ``ε·C``), the next sentences of the input join, up to
  the capacity (line 7), and are encoded then, into the slots of finished ones (line 9;
  :mod:`fairseq_stream.model.encoder_slots`). The input is the whole run's, not one fairseq batch
  (:mod:`fairseq_stream.engine.input_stream`). ``ε = 0`` refills only when everything finished:
  plain batches of ``n`` sentences, the VAR-BATCH / FIXED-OURS baselines. Hoang2018's top-up
  batching is ``ε = 1/2``.
* **selection** — ``min-length`` steps only the sentences with the fewest tokens (line 13),
  so the selected caches have one length and concatenate without padding; ``all`` steps
  every sentence in flight, shorter ones left-padded (VAR-STR-FIFO, App. A.2; top-up).
* **groups** — sentences that joined together form a group with one cache; a group pauses
  while a younger one catches up, and groups merge once their lengths meet.
* **over-subscription** — with a candidate budget ``C`` and ``oversubscribe`` (§3, the ATIS
  and PTB setups of §4.2), the sentences in flight are bounded by the capacity ``n`` (their
  encoder states and beams cached) and a step expands at most ``C`` candidates: when the
  selected beams hold more, the first sentences whose rows fit take the step and the others
  wait one step (VAR-STR-FIFO: the longest groups first, App. A.2), so steps stay full while
  beams narrow.
* **flush** — with ``max_wait`` (Yang2020 footnote 3), refills stop while some sentence has
  been in flight for more than ``max_wait`` steps, so long translations cannot get stuck
  behind a stream of new ones.

Sentences never influence each other's search: a strategy's step is computed per sentence,
so the output equals the batched one (exactly so in float64; see the equivalence tests).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Protocol

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.interface import Hypothesis, SearchStrategy, StepOutcome, merge_finished
from fairseq_stream.engine.input_stream import Admission
from fairseq_stream.model.model_step import DecoderState, ModelStep, Sources
from fairseq_stream.engine.stats import DecodeStats


#: the "ahead" hook runs a group of several sentences ahead natively only at this many rows or fewer: where the Python
#: between steps is a large part of a step (small batches); with more rows a sentence ends at nearly every step anyway.
#: One sentence's beam runs ahead at any width (k = 50 at batch 1: 0.9x the time of its steps in Python)
AHEAD_ROWS = 16
#: the most decoder calls one run ahead makes (the cache slots it reserves at once)
AHEAD_CALLS = 64


@dataclass(frozen=True)
class SchedulerConfig:
    epsilon: float = 1.0 / 6  # refill threshold ε; 0 = plain batches
    capacity: int = 64  # sentences in flight (n)
    max_candidates: int = 0  # live candidates in flight (C); 0 = use ``capacity``
    selection: str = "min-length"  # or "all"
    max_wait: int = 0  # flush after this many steps in flight; 0 = never
    oversubscribe: bool = False  # C bounds each step's candidates, the capacity the sentences in flight
    native_loop: bool = True  # --native-loop auto: a strategy with the "ahead" hook runs steps ahead natively

    def __post_init__(self) -> None:
        if not 0.0 <= self.epsilon < 1.0:
            raise FairseqStreamError(f"--stream-epsilon must be in [0, 1) (0 = plain batches), got {self.epsilon}")
        if self.capacity < 1:
            raise FairseqStreamError(f"--stream-capacity must be >= 1, got {self.capacity}")
        if self.max_candidates < 0:
            raise FairseqStreamError(f"--stream-max-candidates must be >= 0, got {self.max_candidates}")
        if self.max_wait < 0:
            raise FairseqStreamError(f"--stream-max-wait must be >= 0, got {self.max_wait}")
        if self.oversubscribe and not self.max_candidates:
            raise FairseqStreamError("--stream-oversubscribe needs --stream-max-candidates C, the candidates one step "
                                     "expands; add it or drop --stream-oversubscribe")
        if self.selection not in ("min-length", "all"):
            raise FairseqStreamError(f"unknown selection policy {self.selection!r}")


@dataclass(eq=False)  # groups are compared by identity
class _Group:
    state: Any  # the strategy's state of these sentences
    dec: DecoderState  # their decoder caches, same rows
    feed: Tensor  # (R, b) tokens to feed at the next step
    joined: int  # scheduler step at which the (oldest) sentences joined
    block_mask: Optional[Tensor] = None
    row_counts: Optional[List[int]] = None  # host: rows of each sentence, when known without a read


class SentenceSource(Protocol):
    """Where a stream's sentences come from and its hypotheses go (:class:`~fairseq_stream.engine.input_stream.InputStream`)."""

    def take(self, n: int) -> Optional[Admission]:
        """The next ``n`` sentences of the input (fewer at its end; None when none is left)."""
        ...

    def deliver(self, finished: Dict[int, List[Hypothesis]]) -> None:
        """n-best lists of finished sentences, keyed by stream handle."""
        ...


class StreamingScheduler:
    """Runs a :class:`~fairseq_stream.search.interface.SearchStrategy` over a stream of sentences.

    One scheduler serves a whole run: :meth:`advance` steps until its caller has what it
    needs (a fairseq batch's hypotheses) and keeps everything else in flight for the next
    call, so the stream never drains at a batch's end (Algorithm 1 runs over all of ``X``).
    ``hooks``: the optional hooks the strategy declares (``Capabilities.hooks``; the protocols of
    :mod:`fairseq_stream.search.interface`): the scheduler calls those, and no other.
    """

    def __init__(self, model: ModelStep, strategy: SearchStrategy, cfg: SchedulerConfig, *, source: SentenceSource,
                 bos: int, pad: int, eos: int, rows_per_sentence: int, stats: DecodeStats,
                 hooks: FrozenSet[str]) -> None:
        if cfg.selection == "all" and not model.mixed_lengths:
            model.require_block_steps("stepping sentences of different lengths together (VAR-STR-FIFO, top-up)")
        self.model = model
        self.strategy = strategy
        self.cfg = cfg
        self.source = source
        self.bos, self.pad, self.eos = bos, pad, eos
        self.rows_per_sentence = rows_per_sentence
        self.stats = stats
        self.memory = model.slots()  # E (line 2): encoder states of the sentences in flight
        self.groups: List[_Group] = []  # B (line 2), in groups that joined together
        self.clock = 0
        self.unread: List[Any] = []  # device-side finished batches, read in one go later
        self.unread_count = 0  # sentences in them (a shape: known without a read)
        self.hooks = hooks
        # its output layer (and search step) inside the decoder step's region, where the model's step has one
        self.in_region = "region" in hooks and model.takes_tails
        if self.in_region:  # what its steps in the region keep, kept with the model
            strategy.share_pools(model.strategy_pool)  # type: ignore[attr-defined]

    def advance(self, done: Callable[[], bool]) -> None:
        """Lines 5–18 until ``done()``, or until nothing is in flight and nothing is left to admit."""
        while not done():
            if self._refill_due(self.groups, self.clock):
                self._refill()
            if not self.groups:
                break
            group = self._select(self.groups)
            self._collect(self._step(self.memory, group, self.groups))
            self.clock += 1
        if not self.groups:  # drained: what the static step lent this stream goes back to the model
            self._drained()

    def abandon(self) -> int:
        """Drop every sentence in flight, unfinished, and the finished ones not read yet (the caller wants none of
        them: ``--prune-auto``'s probe copies once the input has ended), and hand back what the static step lent;
        the unfinished sentences dropped."""
        sentences, _ = self._in_flight(self.groups)
        self.groups, self.unread, self.unread_count = [], [], 0
        self._drained()
        return sentences

    def _drained(self) -> None:
        """Nothing in flight: the static step's buffers back to the model, the strategy's device counts read."""
        self.model.drained(self.memory)
        if "drained" in self.hooks:
            self.strategy.drained()  # type: ignore[attr-defined]

    def read_finished(self) -> None:
        """Read the device-side finished batches (once per kind) and deliver their n-best lists."""
        if self.unread:
            results = self._finish(self.unread)
            self.unread, self.unread_count = [], 0
            self.source.deliver(results)

    def _collect(self, finished: Any) -> None:
        if isinstance(finished, dict):
            if finished:
                self.source.deliver(finished)
        else:  # read later, with others: no host read in a step
            self.unread.append(finished)
            self.unread_count += len(finished)

    def _finish(self, finished: List[Any]) -> Dict[int, List[Hypothesis]]:
        """n-best lists of what finished: device-side batches are read here, once per kind."""
        return merge_finished(finished)

    # ---- refill ----------------------------------------------------------------------------
    def _in_flight(self, groups: List[_Group]) -> tuple:
        sentences = sum(self.strategy.sentences(g.state) for g in groups)
        rows = sum(g.dec.rows for g in groups)
        return sentences, rows

    def _refill_due(self, groups: List[_Group], clock: int) -> bool:
        if not groups:
            return True
        if self.cfg.max_wait and clock - min(g.joined for g in groups) > self.cfg.max_wait:
            return False  # flush: let the in-flight sentences finish first
        sentences, rows = self._in_flight(groups)
        if self._budgets_admission:
            return rows <= self.cfg.epsilon * self.cfg.max_candidates
        return sentences <= self.cfg.epsilon * self.cfg.capacity and sentences < self.cfg.capacity

    @property
    def _budgets_admission(self) -> bool:
        """C bounds the sentences admitted (each at full width) unless over-subscribed (C bounds steps)."""
        return bool(self.cfg.max_candidates) and not self.cfg.oversubscribe

    def _refill_size(self, groups: List[_Group]) -> int:
        sentences, rows = self._in_flight(groups)
        if self._budgets_admission:
            # Every beam in flight counts at full width, so no step can exceed C.
            budget = self.cfg.max_candidates - sentences * self.rows_per_sentence
            return max(0, budget // self.rows_per_sentence)
        return max(1, self.cfg.capacity - sentences)

    def _refill(self) -> None:
        """Lines 7–11: the next sentences of the input join, encoded now into free slots (line 9)."""
        size = self._refill_size(self.groups)
        admission = self.source.take(size) if size else None
        if admission is None:
            return
        m, dev = admission.count, self.model.device
        in_flight, _ = self._in_flight(self.groups)
        free = self.memory.free_slots([g.dec.row_sentence for g in self.groups], m, in_flight, dev)  # (m,)
        src_lengths = admission.src_lengths.to(dev)
        self.model.admit(self.memory, admission.src_tokens.to(dev), src_lengths, free,
                         pad=self.pad, eos=self.eos, left_pad=admission.left_pad)
        if "admit" in self.hooks:  # a strategy with models of its own (a speculative draft) encodes them too
            self.strategy.admit(admission.src_tokens.to(dev), src_lengths, free,  # type: ignore[attr-defined]
                                self.memory.size, pad=self.pad, eos=self.eos, left_pad=admission.left_pad)
        handles = torch.arange(admission.first, admission.first + m, device=dev) * self.memory.modulus + free
        out = self.strategy.init_state(handles, admission.max_len.to(dev), src_lengths,
                                       longest=max(admission.limits), shortest=min(admission.limits))
        dec = self.model.initial_state(self.memory, handles, self.bos)
        self.groups.append(_Group(out.state, dec, out.feed, self.clock, out.block_mask, out.row_counts))
        self.stats.refills += 1
        self.stats.note_encoder_memory(slots=self.memory.size, live_bytes=self.memory.meter.peak,
                                       in_flight=in_flight + m)

    # ---- selection -------------------------------------------------------------------------
    def _select(self, groups: List[_Group]) -> _Group:
        """Remove the groups to step from ``groups`` and return them merged into one."""
        if self.cfg.selection == "all":
            chosen = list(groups)
            fresh = [g for g in chosen if g.dec.max_length == 0]
            if fresh and not self.model.block_steps:
                # fairseq's own incremental states start empty: a new group takes its first
                # step alone before it can join the others.
                chosen = fresh
        else:
            lengths = [self.strategy.length(g.state) for g in groups]
            shortest = min(lengths)
            chosen = [g for g, n in zip(groups, lengths) if n == shortest]
        for g in chosen:
            groups.remove(g)
        if self.cfg.oversubscribe and self.cfg.selection == "all":  # VAR-STR-FIFO: the longest first
            chosen.sort(key=lambda g: -self.strategy.length(g.state))
        if len(chosen) == 1:
            group = chosen[0]
        else:
            counts = [g.row_counts for g in chosen]
            group = _Group(
                state=self.strategy.concat([g.state for g in chosen]),
                dec=self.model.concat([g.dec for g in chosen]),
                feed=self._stack_feeds([g.feed for g in chosen]),
                joined=min(g.joined for g in chosen),
                block_mask=chosen[0].block_mask,
                row_counts=None if any(c is None for c in counts) else [n for c in counts for n in c],
            )
        if self.cfg.oversubscribe and group.dec.rows > self.cfg.max_candidates:
            group = self._within_budget(group, groups)
        return group

    def _within_budget(self, group: _Group, groups: List[_Group]) -> _Group:
        """Over-subscription (Yang2020 §3): the first sentences whose rows fit in ``C`` take
        the step; the rest go back to ``groups`` and wait (still the shortest, they go next)."""
        counts = group.row_counts
        if counts is None:  # one small read, only on a step that holds more than C candidates
            counts = self.strategy.row_counts(group.state).tolist()
        take, rows = 0, 0
        for n in counts:
            if take and rows + n > self.cfg.max_candidates:
                break
            take, rows = take + 1, rows + n
        head, tail = self.strategy.split(group.state, take, rows)
        dec_head, dec_tail = self.model.split(group.dec, rows, take)
        groups.append(_Group(tail, dec_tail, group.feed[rows:], group.joined, group.block_mask, counts[take:]))
        self.stats.add_extra("oversubscribed_steps")
        self.stats.add_extra("waiting_candidates", group.dec.rows - rows)
        return _Group(head, dec_head, group.feed[:rows], group.joined, group.block_mask, counts[:take])

    def _stack_feeds(self, feeds: List[Tensor]) -> Tensor:
        # Blocks of different widths (Jacobi windows) share a call: the shorter ones get
        # filler tokens at the end, which the causal mask keeps from the real ones.
        width = max(f.size(1) for f in feeds)
        return torch.cat([torch.nn.functional.pad(f, (0, width - f.size(1)), value=self.pad) for f in feeds])

    # ---- one step --------------------------------------------------------------------------
    def _step(self, pool: Sources, group: _Group, groups: List[_Group]) -> Any:
        """One decoder call and one strategy step of ``group`` — after the steps it ran ahead natively, where it
        could (:meth:`_run_ahead`); what finished (dict or deferred)."""
        start = time.perf_counter() if self.stats.trace is not None else None
        sentences, rows, length = self.strategy.sentences(group.state), group.dec.rows, group.dec.max_length
        state = group.state
        ahead = self._run_ahead(pool, group, groups, sentences)
        fed = group.feed.size(1)  # the block the step's scores are of
        if ahead is not None:
            scores, dec, state, calls = ahead
            length, rows = length + calls - 1, dec.rows  # the last call's (a pruned beam's width changes)
            if scores is not None:
                fed = scores.scores.size(1)  # the loop's last call's (a speculative block may narrow at the end)
        else:
            # its output layer (and search step) inside the step's region, where it gives one
            tail = self.strategy.output_tail(state) if self.in_region else None  # type: ignore[attr-defined]
            scores, dec = self.model.scored_step(pool, group.dec, group.feed, group.block_mask, tail=tail)
        # the "region" hook's step takes what the step computed; every other strategy the scores alone
        if scores is None:  # the loop searched its last call's step too (a beam's: it reads that step's packet)
            out: StepOutcome = self.strategy.ahead_outcome(state)  # type: ignore[attr-defined]
        else:
            out = self.strategy.step(state, scores if self.in_region else scores.scores)
        if out.accept is not None:
            dec = self.model.accept(dec, out.accept, fed, out.max_length)
        if self.strategy.sentences(out.state) > 0:
            if out.parents is not None:
                dec = self.model.select(dec, out.parents, out.index)
            elif out.index is not None:
                dec.index = out.index.inherit(dec.index)
            groups.append(_Group(out.state, dec, out.feed, group.joined, out.block_mask, out.row_counts))
        self.stats.add_step(sentences=sentences, rows=rows, length=length,
                            seconds=None if start is None else time.perf_counter() - start)
        return out.finished

    def _run_ahead(self, pool: Sources, group: _Group, groups: List[_Group], sentences: int) -> Optional[tuple]:
        """The "ahead" hook: where ``group`` is the only one in flight and has few rows, its steps run in one native
        call (``ModelStep.run_ahead``: the greedy beam's steps, or one sentence's Jacobi iterations with their
        guesses) while no sentence of it may end — nothing the scheduler decides between steps (refill,
        selection, merges) can change before one does. Those steps are counted as steps; returns the last call's
        scores, the state after it (the last call's rows) and the strategy's state after the steps before it (the
        caller's strategy step takes the scores) and the calls made; or None: step as usual."""
        if (not self.cfg.native_loop or "ahead" not in self.hooks or self.in_region or groups
                or self.stats.trace is not None or (group.dec.rows > AHEAD_ROWS and sentences > 1)
                or group.block_mask is not None):
            return None
        search = self.strategy.native_search(group.state, AHEAD_CALLS)  # type: ignore[attr-defined]
        if search is None:
            return None
        ran = self.model.run_ahead(pool, group.dec, group.feed, search)
        if ran is None:
            return None
        scores, dec, rows = ran
        calls = len(rows)
        for j in range(calls - 1):  # the steps searched natively, as _step counts each (``sentences``: the group's)
            self.stats.add_step(sentences=sentences, rows=rows[j], length=group.dec.max_length + j)
        self.clock += calls - 1
        self.stats.add_extra("native_loop_steps", calls - 1)
        return scores, dec, self.strategy.ran_ahead(group.state, calls - 1), calls  # type: ignore[attr-defined]
