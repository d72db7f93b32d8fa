"""The interface between a decoding strategy and the streaming scheduler.

The scheduler owns the model (through :class:`~fairseq_stream.model.model_step.ModelStep`) and the
decoder caches; a strategy owns the hypotheses. A strategy keeps the hypotheses of a *group*
of sentences in one state object (a :class:`~fairseq_stream.search.state.StrategyState`) and
answers these calls:

* ``init_state(sentences, max_len, src_lengths, longest=, shortest=)`` — a state for new sentences and the first
  tokens to feed;
* ``step(state, lprobs)`` — from the log-probabilities of the rows just fed, the new state,
  which rows' caches to keep (``parents``) and what to feed next, plus the sentences that
  finished with their n-best lists;
* ``concat(states)`` — one state for the sentences of several groups (the scheduler merges
  groups: equal-length groups under VAR-STREAM, everything under VAR-STR-FIFO/top-up);
* ``sentences(state)`` — how many sentences the state still holds (refill reads it);
* ``length(state)`` — how many tokens its rows have been fed (the key of VAR-STREAM's
  selection of the shortest groups);
* ``split(state, sentences, rows)`` and ``row_counts(state)`` — the first ``sentences``
  sentences (their ``rows`` rows) and the rest; the rows of each sentence (on the device):
  over-subscription steps only part of a group (:class:`~fairseq_stream.search.state.StateOps`
  provides both).

Rows of a state are its live hypotheses, sentence-major; the decoder state the scheduler
keeps beside it has the same rows in the same order.

A strategy may have **optional hooks**, each a protocol below, and has one only where its
:class:`~fairseq_stream.search.registry.Capabilities` declare it (``hooks=``; the registry checks the
methods exist when the strategy registers, and the scheduler calls a hook only where it is declared):

* ``"admit"`` (:class:`AdmitsSources`) — a strategy with models of its own (a speculative draft) encodes the
  sentences a refill admits, into the same slots as the scheduler's models;
* ``"drained"`` (:class:`DrainsCounts`) — the stream has no sentence in flight (the run's end): what the
  strategy counts on the device is read now, once, outside any step (a draft's acceptance histogram);
* ``"region"`` (:class:`SearchesInRegion`) — its output layer, and its search step, run inside a static
  decoder step's region (``output_tail``); its buffers kept with the model across runs (``share_pools``);
  its ``step`` then takes a :class:`StepScores` (what the region computed) in place of the scores alone;
* ``"rungs"`` (:class:`PrunesPerSentence`) — each sentence pruned at its own rung (``--prune-auto``'s probes);
* ``"ahead"`` (:class:`RunsAhead`) — its steps searched by the native greedy loop while no sentence may end
  (:meth:`~fairseq_stream.model.model_step.ModelStep.beam_search`; the greedy beam at few rows).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.model.static.tail import StepScores

__all__ = ["AdmitsSources", "DrainsCounts", "HOOKS", "Hypothesis", "PrunesPerSentence", "RunsAhead", "SearchStrategy",
           "SearchesInRegion", "StepOutcome", "StepScores", "StrategyContext", "cat_padded", "empty_hypothesis",
           "merge_finished"]

@dataclass
class Hypothesis:
    """One finished hypothesis. It becomes fairseq's dict only where it leaves the package
    (:meth:`to_fairseq`, called by the sentence source that hands hypotheses to fairseq)."""

    tokens: Tensor  # target tokens, EOS last
    score: float  # the score the n-best list ranks by (length-normalised)
    positional_scores: Tensor  # per-token log-probabilities, same length as ``tokens``

    def to_fairseq(self) -> Dict[str, Any]:
        return {"tokens": self.tokens, "score": self.score, "positional_scores": self.positional_scores,
                "attention": None, "alignment": None}


def empty_hypothesis(eos: int) -> Dict[str, Any]:
    """The hypothesis of an empty source: EOS alone, score 0 (fairseq's dict)."""
    return Hypothesis(tokens=torch.tensor([eos]), score=0.0, positional_scores=torch.zeros(1)).to_fairseq()


@dataclass
class StrategyContext:
    """What the engine hands a strategy's ``from_config`` besides its configuration."""

    scorer: Any  # OutputScorer: the output layer and the logits processors (Hoang2018 §3.1)
    eos: int
    pad: int
    bos: int
    dtype: torch.dtype  # of the hypothesis scores
    needs_history: bool  # a processor reads each row's tokens (n-gram blocking)
    stats: Any  # DecodeStats of the run
    step_backend: str = "auto"  # --step-backend: who runs the fused step operators (ops/backends.py)
    task: Any = None  # fairseq's task (its dictionaries), for a strategy with models of its own
    # checkpoints (fairseq's ``a.pt:b.pt``) → models loaded with the task and prepared as the run's
    # (device, dtype, --quantize, --cpu-matmul; ``quantize=`` a draft's own choice): a speculative draft
    load_models: Optional[Callable[..., List[Any]]] = None
    step_mode: str = "eager"  # --step-mode, for a strategy's own models (the draft steps as the target does)


@dataclass
class StepOutcome:
    """What a strategy decided after one decoder step of a group."""

    state: Any  # the group's new strategy state (sentences that finished are gone)
    parents: Optional[Tensor]  # (R',) rows of the old decoder state to keep, in new row order
    feed: Tensor  # (R', b) tokens to feed next
    # sentence (as given to ``init_state``: a stream handle under the scheduler) → n-best, or a
    # device-side batch with ``to_hypotheses()`` and ``len()`` that the scheduler reads later,
    # many at once (no host read in a step)
    finished: Any = field(default_factory=dict)
    accept: Optional[Tensor] = None  # (R,) block tokens to keep per old row, for block steps
    block_mask: Optional[Tensor] = None  # additive (b, b) mask inside the next block; None = causal
    index: Optional[Any] = None  # SentenceIndex of the new rows, when the strategy knows it
    max_length: Optional[int] = None  # host: the longest row after ``accept`` (block steps)
    # host: decoder rows of each sentence of ``state``, when the strategy read them anyway
    # (over-subscription splits a group by them; None = counted when needed)
    row_counts: Optional[List[int]] = None


class SearchStrategy(Protocol):
    """A decoding algorithm run by :class:`~fairseq_stream.engine.scheduler.StreamingScheduler`."""

    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *,
                   longest: int, shortest: int) -> StepOutcome:
        """``longest``/``shortest``: host-known ``max``/``min`` of ``max_len`` (no read needed)."""
        ...

    def step(self, state: Any, lprobs: Tensor) -> StepOutcome:
        """``lprobs``: (R, b, V) log-probabilities after each fed token of every row (a strategy with the
        ``"region"`` hook is given a :class:`StepScores` instead: :class:`SearchesInRegion`)."""
        ...

    def concat(self, states: Sequence[Any]) -> Any:
        ...

    def sentences(self, state: Any) -> int:
        ...

    def length(self, state: Any) -> int:
        """Tokens fed so far to every row of ``state`` (the key of min-length selection)."""
        ...

    def split(self, state: Any, sentences: int, rows: int) -> "tuple[Any, Any]":
        """The first ``sentences`` sentences of ``state`` (their ``rows`` decoder rows) and the rest."""
        ...

    def row_counts(self, state: Any) -> Tensor:
        """(S,) decoder rows of each sentence of ``state``, on the device."""
        ...


class AdmitsSources(Protocol):
    """Hook ``"admit"``: a strategy with models of its own encodes what a refill admits."""

    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        """``src_tokens`` (m, T) of the admitted sentences into the slots ``free`` (m,) of a store of ``size``."""
        ...


class DrainsCounts(Protocol):
    """Hook ``"drained"``: what the strategy counts on the device, read once when the stream drains."""

    def drained(self) -> None:
        ...


class SearchesInRegion(Protocol):
    """Hook ``"region"``: the output layer (and the search step) inside a static decoder step's region."""

    def output_tail(self, state: Any) -> Optional[Any]:
        """The output layer of the next ``step`` as a :class:`~fairseq_stream.model.static.tail.RegionTail`
        (its ``search`` set where the search step runs in the region too), or None (the step runs it after)."""
        ...

    def share_pools(self, pool: Callable[[type, Callable[[], Any]], Any]) -> None:
        """Take the buffers the model keeps across runs (``ModelStep.strategy_pool(owner class, make)``), so that a
        repeat of a run takes the addresses its step graphs were captured with."""
        ...

    def step(self, state: Any, scores: "StepScores") -> StepOutcome:
        """The strategy's step from what the decoder step computed (:class:`StepScores`)."""
        ...


class PrunesPerSentence(Protocol):
    """Hook ``"rungs"``: each sentence pruned at its own rung (δ, M), pinned when it is admitted."""

    def use_rungs(self, rungs: Sequence[Any], pin: Callable[[Tensor], Optional[Tensor]], *,
                  meter: bool = False) -> None:
        ...


class RunsAhead(Protocol):
    """Hook ``"ahead"``: steps a native loop runs itself, in place, while no sentence of the group may end — the greedy
    beam's, or one sentence's Jacobi iterations (the scheduler then hands the last call's scores to
    :meth:`SearchStrategy.step` as usual)."""

    def native_search(self, state: Any, most_calls: int) -> Optional[Any]:
        """What the loop needs for at most ``most_calls`` decoder calls (a
        :class:`~fairseq_stream.model.native_loops.GreedySearch` or
        :class:`~fairseq_stream.model.native_loops.VerifySearch`), or None (it cannot)."""
        ...

    def ran_ahead(self, state: Any, steps: int) -> Any:
        """``state`` after ``steps`` steps searched by the loop."""
        ...

    # A strategy whose loop may search its last call's step too (a beam's: ``BeamLoopSearch``, whose loop gives no
    # scores then) has ``ahead_outcome(state) -> StepOutcome``: that step's outcome, which the scheduler takes instead
    # of :meth:`SearchStrategy.step`'s.


#: every optional hook a strategy may declare (``Capabilities(hooks=...)``) → the methods it must have
HOOKS: Dict[str, Tuple[str, ...]] = {
    "admit": ("admit",),
    "drained": ("drained",),
    "region": ("output_tail", "share_pools"),
    "rungs": ("use_rungs",),
    "ahead": ("native_search", "ran_ahead"),
}


def cat_padded(parts: Sequence[Tensor], value: float = 0) -> Tensor:
    """Concatenate along dim 0, padding the last dimension of 3-d parts to the widest."""
    if parts[0].dim() == 3:
        width = max(p.size(2) for p in parts)
        parts = [torch.nn.functional.pad(p, (0, width - p.size(2)), value=value) for p in parts]
    return torch.cat(list(parts))


def merge_finished(batches: Sequence[Any]) -> Dict[int, List[Hypothesis]]:
    """What finished (dicts and device batches) → n-best lists, reading each kind of device batch once."""
    out: Dict[int, List[Hypothesis]] = {}
    deferred: Dict[type, List[Any]] = {}
    for batch in batches:
        if isinstance(batch, dict):
            out.update(batch)
        else:
            deferred.setdefault(type(batch), []).append(batch)
    for kind, items in deferred.items():
        out.update(kind.merge(items).to_hypotheses())
    return out
