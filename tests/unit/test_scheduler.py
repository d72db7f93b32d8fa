"""The streaming scheduler (``engine/scheduler.py``, Yang2020 Algorithm 1) on its own: refill, selection,
flush, over-subscription, delivery and abandon, driven by a fake strategy over a probability-table model.

The fake strategy is greedy with ``k`` identical rows per sentence (a beam that never branches) and has
none of the optional hooks; it records what each step saw, which is what these tests check. Source word
``w`` makes the table model say ``w - 3`` times the word ``w0``, then EOS, so sentences finish at
different steps and each delivered hypothesis names the sentence it belongs to.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import pytest
import torch
from torch import Tensor

from fairseq_stream.engine.input_stream import Admission
from fairseq_stream.engine.scheduler import SchedulerConfig, StreamingScheduler
from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.encoder_slots import SLOT_MODULUS
from fairseq_stream.model.model_step import ModelStep
from fairseq_stream.search.interface import Hypothesis, StepOutcome
from fairseq_stream.search.state import StrategyState, per_sentence, rows
from helpers import TableModel, make_dictionary, tiny_transformer

D = make_dictionary([f"w{i}" for i in range(16)])  # words 4 … 19
WORD = D.index("w0")
EOS = D.eos()
LIMIT = 40  # every sentence's maximum target length (longer than any table output)


def table() -> Dict:
    """Source word w → ``w - 3`` times w0, then EOS (unknown keys are EOS)."""
    return {(w, (WORD,) * j): {WORD: 1.0} for w in range(4, len(D)) for j in range(w - 3)}


def expected(word: int, limit: int = LIMIT) -> List[int]:
    return ([WORD] * (word - 3))[:limit - 1] + [EOS]


# ---- the fake strategy and source -----------------------------------------------------------
@dataclass
class FakeState(StrategyState):
    sentences: Tensor  # (S,) stream handles
    tokens: Tensor = per_sentence()  # (S, LIMIT) tokens chosen, PAD after them
    count: Tensor = per_sentence()  # (S,) tokens chosen (sentences of one group may differ under "all")
    max_len: Tensor = per_sentence()  # (S,)
    row_slot: Tensor = rows()  # (R,) s·k + j


def _scores(x: Any) -> Tensor:
    """The (R, b, V) scores of a step, whether handed over bare or in a value holding them."""
    if isinstance(x, Tensor):
        return x
    return next(v for v in (getattr(x, f.name) for f in dataclasses.fields(x)) if isinstance(v, Tensor))


class FakeGreedy:
    """Greedy search on ``k`` copies of each sentence's row; records every step. No optional hooks."""

    def __init__(self, k: int = 1) -> None:
        self.rows_per_sentence, self.pad = k, D.pad()
        self.clock = 0  # steps taken (the scheduler's clock)
        self.joined: Dict[int, int] = {}  # handle → clock at admission
        self.fed: Dict[int, int] = {}  # handle in flight → tokens fed
        self.steps: List[Dict[str, Any]] = []  # per step: handles, rows, lengths of all in flight

    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *, longest: int,
                   shortest: int) -> StepOutcome:
        assert longest == int(max_len.max()) and shortest == int(max_len.min())
        for h in sentences.tolist():
            self.joined[h], self.fed[h] = self.clock, 0
        s = len(sentences)
        state = FakeState(sentences, sentences.new_full((s, LIMIT), D.pad()), sentences.new_zeros(s), max_len,
                          torch.arange(s) * self.rows_per_sentence)
        return StepOutcome(state=state, parents=None, feed=sentences.new_full((s, 1), D.bos()))

    def step(self, state: FakeState, lprobs: Any) -> StepOutcome:
        scores = _scores(lprobs)
        handles = state.sentences.tolist()
        s, r = len(handles), scores.size(0) // len(handles)  # r: 1 at a sentence's first step, else k
        self.steps.append({"handles": handles, "rows": scores.size(0), "in_flight": dict(self.fed), "clock": self.clock})
        self.clock += 1
        for h in handles:
            self.fed[h] += 1
        tok = scores[:, -1].view(s, r, -1)[:, 0].argmax(-1)  # (S,) each sentence's first row's best word
        tok = torch.where(state.count + 1 >= state.max_len, torch.full_like(tok, EOS), tok)
        state.tokens[torch.arange(s), state.count] = tok
        state.count = state.count + 1
        done, counts = tok.eq(EOS).tolist(), state.count.tolist()
        finished = {}
        for i, h in enumerate(handles):
            if done[i]:
                finished[h] = [Hypothesis(state.tokens[i, :counts[i]].clone(), 0.0, torch.zeros(counts[i]))]
                del self.fed[h]
        keep = torch.tensor([i for i in range(s) if not done[i]], dtype=torch.long)
        new = state.select(keep)
        k = self.rows_per_sentence
        new.row_slot = torch.arange(len(keep) * k)
        parents = (keep * r).repeat_interleave(k)
        return StepOutcome(state=new, parents=parents, feed=tok.index_select(0, keep).repeat_interleave(k).unsqueeze(1),
                           finished=finished)

    def sentences(self, state: FakeState) -> int:
        return state.size

    def length(self, state: FakeState) -> int:
        return int(state.count.max()) if state.size else 0

    def concat(self, states: Sequence[FakeState]) -> FakeState:
        return FakeState.concat(states, pad=self.pad, rows_per_sentence=self.rows_per_sentence)

    def split(self, state: FakeState, sentences: int, rows_: int) -> "tuple[FakeState, FakeState]":
        return state.split(sentences, rows_, self.rows_per_sentence)

    def row_counts(self, state: FakeState) -> Tensor:
        return state.row_counts(self.rows_per_sentence)


class ListSource:
    """Sentences ``[w, EOS]``, admitted in order; records each take and each delivery."""

    def __init__(self, words: Sequence[int], strategy: FakeGreedy, limits: Optional[Sequence[int]] = None) -> None:
        self.words, self.strategy = list(words), strategy
        self.limits = list(limits) if limits is not None else [LIMIT] * len(self.words)
        self.next = 0
        self.takes: List[Dict[str, Any]] = []  # asked, got, sentences in flight, clock
        self.delivered: List[int] = []  # serials, in delivery order
        self.outputs: Dict[int, List[int]] = {}

    def take(self, n: int) -> Optional[Admission]:
        m = min(n, len(self.words) - self.next)
        self.takes.append({"asked": n, "got": m, "in_flight": dict(self.strategy.fed), "clock": self.strategy.clock})
        if m <= 0:
            return None
        first, self.next = self.next, self.next + m
        src = torch.tensor([[w, EOS] for w in self.words[first:self.next]])
        limits = self.limits[first:self.next]
        return Admission(first, src, torch.full((m,), 2), torch.tensor(limits), limits, left_pad=True)

    def deliver(self, finished: Dict[int, List[Hypothesis]]) -> None:
        for handle, nbest in finished.items():
            serial = handle // SLOT_MODULUS
            self.delivered.append(serial)
            self.outputs[serial] = nbest[0].tokens.tolist()


def scheduler(words: Sequence[int], cfg: SchedulerConfig, *, k: int = 1, model: Any = None,
              limits: Optional[Sequence[int]] = None) -> "tuple[StreamingScheduler, FakeGreedy, ListSource, DecodeStats]":
    strategy = FakeGreedy(k)
    source = ListSource(words, strategy, limits)
    stats = DecodeStats()
    if model is None:
        model = TableModel(D, table())
        # one parameter, as every real model has (the generic backend's split reads the device from it)
        model.register_parameter("anchor", torch.nn.Parameter(torch.zeros(1), requires_grad=False))
    step = ModelStep([model])
    sched = StreamingScheduler(step, strategy, cfg, source=source, bos=D.bos(), pad=D.pad(), eos=EOS,
                               rows_per_sentence=k, stats=stats, hooks=frozenset())
    return sched, strategy, source, stats


WORDS = [4 + (7 * i) % 12 for i in range(23)]  # 23 sentences of 1 … 12 words, mixed


def assert_each_delivered_once(source: ListSource, words: Sequence[int] = WORDS) -> None:
    assert sorted(Counter(source.delivered).items()) == [(i, 1) for i in range(len(words))]
    for i, w in enumerate(words):
        assert source.outputs[i] == expected(w, source.limits[i]), i


# ---- configuration ---------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,flag", [
    (dict(epsilon=1.0), "--stream-epsilon"),
    (dict(epsilon=-0.1), "--stream-epsilon"),
    (dict(capacity=0), "--stream-capacity"),
    (dict(max_candidates=-1), "--stream-max-candidates"),
    (dict(max_wait=-2), "--stream-max-wait"),
    (dict(oversubscribe=True), "--stream-max-candidates"),
    (dict(selection="shortest"), "'shortest'"),
])
def test_a_bad_setting_is_one_line_naming_its_flag(kwargs, flag):
    with pytest.raises(FairseqStreamError) as err:
        SchedulerConfig(**kwargs)
    assert flag in str(err.value) and "\n" not in str(err.value)


def test_the_settings_at_their_bounds_are_accepted():
    SchedulerConfig(epsilon=0.0, capacity=1, max_candidates=0, max_wait=0)
    SchedulerConfig(epsilon=0.99, capacity=3, max_candidates=5, oversubscribe=True, selection="all")


def test_selection_all_needs_a_model_that_steps_rows_of_different_lengths():
    with pytest.raises(FairseqStreamError, match="needs fairseq transformer models"):
        scheduler(WORDS, SchedulerConfig(selection="all"))


# ---- refill ----------------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [1 / 3, 0.0, 0.5])
def test_refill_comes_when_the_sentences_in_flight_drop_to_epsilon_n(epsilon):
    n = 6
    sched, strategy, source, stats = scheduler(WORDS, SchedulerConfig(epsilon=epsilon, capacity=n))
    sched.advance(lambda: False)
    assert_each_delivered_once(source)
    for take in source.takes:  # refills only when due, each up to the capacity
        in_flight = len(take["in_flight"])
        assert in_flight <= epsilon * n and take["asked"] == n - in_flight, take
    for step in strategy.steps:  # ... and as soon as due, until the input ended
        ended = any(t["clock"] <= step["clock"] and t["got"] < t["asked"] for t in source.takes)
        assert len(step["in_flight"]) > epsilon * n or ended, step
        assert len(step["in_flight"]) <= n
    assert stats.refills == sum(t["got"] > 0 for t in source.takes) > len(WORDS) // n


def test_with_a_candidate_budget_every_beam_counts_at_full_width():
    k, c = 3, 8  # two beams fit in C
    sched, strategy, source, _ = scheduler(WORDS, SchedulerConfig(epsilon=0.5, capacity=64, max_candidates=c), k=k)
    sched.advance(lambda: False)
    assert_each_delivered_once(source)
    assert max(len(s["in_flight"]) for s in strategy.steps) == c // k
    assert max(s["rows"] for s in strategy.steps) <= c


# ---- selection -------------------------------------------------------------------------------
def test_min_length_steps_all_the_shortest_groups_and_only_them():
    sched, strategy, source, _ = scheduler(WORDS, SchedulerConfig(epsilon=0.5, capacity=6))
    sched.advance(lambda: False)
    assert_each_delivered_once(source)
    mixed = 0
    for step in strategy.steps:
        fed = step["in_flight"]
        shortest = min(fed.values())
        assert sorted(step["handles"]) == sorted(h for h, n in fed.items() if n == shortest), step
        mixed += len(set(fed.values())) > 1
    assert mixed > 0  # groups of different lengths were in flight: the rule had something to choose


def test_selection_all_steps_every_sentence_in_flight():
    limits = [2 + (5 * i) % 7 for i in range(len(WORDS))]  # the random model's outputs end at these limits
    model = tiny_transformer(D, layers=1, dim=16).requires_grad_(False)
    sched, strategy, source, _ = scheduler(WORDS, SchedulerConfig(epsilon=0.5, capacity=6, selection="all"),
                                           model=model, limits=limits)
    sched.advance(lambda: False)
    assert sorted(Counter(source.delivered).items()) == [(i, 1) for i in range(len(WORDS))]
    assert all(len(source.outputs[i]) <= limits[i] for i in range(len(WORDS)))
    for step in strategy.steps:
        assert sorted(step["handles"]) == sorted(step["in_flight"]), step
    assert any(len(set(s["in_flight"].values())) > 1 for s in strategy.steps)  # rows of different lengths shared a step


# ---- flush -----------------------------------------------------------------------------------
def _oldest_at_refills(source: ListSource, strategy: FakeGreedy) -> List[int]:
    """Per refill that found sentences in flight: how many steps the oldest of them had been in flight."""
    return [t["clock"] - min(strategy.joined[h] for h in t["in_flight"]) for t in source.takes if t["in_flight"]]


def test_max_wait_stops_refills_while_a_sentence_waits_longer():
    words = [15] + [4, 5] * 15  # one long sentence among short ones
    cfg = dict(epsilon=0.5, capacity=4)
    sched, strategy, source, _ = scheduler(words, SchedulerConfig(**cfg))
    sched.advance(lambda: False)
    assert max(_oldest_at_refills(source, strategy)) > 3  # without max_wait, refills keep coming
    sched, strategy, source, _ = scheduler(words, SchedulerConfig(max_wait=3, **cfg))
    sched.advance(lambda: False)
    assert_each_delivered_once(source, words)
    assert max(_oldest_at_refills(source, strategy)) <= 3


# ---- over-subscription -----------------------------------------------------------------------
def test_oversubscription_steps_at_most_c_candidates_and_the_rest_wait():
    k, c = 2, 3
    cfg = SchedulerConfig(epsilon=0.25, capacity=4, max_candidates=c, oversubscribe=True)
    sched, strategy, source, stats = scheduler(WORDS, cfg, k=k)
    sched.advance(lambda: False)
    assert_each_delivered_once(source)
    assert max(len(s["in_flight"]) for s in strategy.steps) == 4  # the capacity bounds the sentences ...
    assert max(s["rows"] for s in strategy.steps) <= c  # ... and C each step's rows
    assert stats.extra["oversubscribed_steps"] > 0 and stats.extra["waiting_candidates"] > 0
    assert stats.peak_step_rows <= c


# ---- delivery and abandon --------------------------------------------------------------------
def test_advance_stops_when_done_and_keeps_the_rest_in_flight():
    sched, strategy, source, _ = scheduler(WORDS, SchedulerConfig(epsilon=0.25, capacity=8))
    sched.advance(lambda: len(source.delivered) >= 3)
    assert 3 <= len(source.delivered) < len(WORDS) and strategy.fed  # stopped with sentences in flight
    sched.advance(lambda: False)
    assert_each_delivered_once(source)
    assert not strategy.fed


def test_abandon_drops_what_is_in_flight_and_nothing_is_delivered_for_it():
    sched, strategy, source, _ = scheduler(WORDS, SchedulerConfig(epsilon=0.25, capacity=8))
    sched.advance(lambda: len(source.delivered) >= 2)
    in_flight, delivered = len(strategy.fed), list(source.delivered)
    assert in_flight > 0
    assert sched.abandon() == in_flight
    sched.read_finished()
    assert source.delivered == delivered
    steps = len(strategy.steps)
    sched.advance(lambda: False)  # the stream goes on with the sentences not admitted yet
    admitted_before = {h // SLOT_MODULUS for s in strategy.steps[:steps] for h in s["handles"]}
    assert not admitted_before & set(source.delivered[len(delivered):])
    assert len(source.delivered) == len(set(source.delivered)) == len(WORDS) - in_flight
