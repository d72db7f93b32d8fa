"""Guess, then verify: one proposer interface for the Jacobi verification.

The Jacobi iteration (Santilli2023, Proposition 1) verifies any guess of the tokens after a
row's verified prefix in one block step: the longest guessed prefix that equals the model's
arg-max predictions is accepted, plus the model's own next token, so the output **is** greedy's
whatever was guessed. Who guesses is a :class:`Proposer`:

* :class:`~fairseq_stream.search.speculative.DraftProposer` — a draft model's greedy
  continuation of ``γ`` tokens (speculative decoding, Leviathan et al. 2023 Algorithm 1 with
  greedy acceptance; Xia et al. 2023 §3.2);
* :class:`~fairseq_stream.search.lookahead.NgramPoolProposer` — the continuation of the last
  verified token in a pool of n-grams from the run's own outputs, else the iteration's own guess
  (lookahead decoding, Fu et al. 2024 §3).

:class:`ProposeAndVerify` is the strategy object of both: the verifier
(:class:`~fairseq_stream.search.jacobi.JacobiDecoding`, a block sliding with the verified prefix)
and a proposer, over one typed state (:class:`ProposedState`). Plain Jacobi decoding guesses with
its own unverified predictions and needs no proposer.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Optional, Protocol, Sequence

from torch import Tensor

from fairseq_stream.model.native_loops import VerifyRun, VerifySearch
from fairseq_stream.ops.backends import KernelRunner
from fairseq_stream.search.interface import StepOutcome, StepScores
from fairseq_stream.search.jacobi import JacobiDecoding, JacobiState
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.search.registry import Capabilities
from fairseq_stream.search.state import StateOps, StrategyState, part


class Proposal(NamedTuple):
    """A proposer's answer for the sentences of a group, in the verifier's row order."""

    guesses: Optional[Tensor]  # (S, γ) tokens after each verified prefix; None = the iteration's own
    rows: Optional[StrategyState]  # the proposer's per-sentence state (None: it keeps none)
    # or the verifier's next feed with the guesses in place, where the proposer placed them itself (its
    # windows unchanged: at most the verifier's block wide); lookahead's C++ operator does (ops/ngram_pool.py)
    feed: Optional[Tensor] = None


@dataclass
class Verdict:
    """What one verification decided, for the proposer to learn from."""

    pred: Tensor  # (S_old, b) the model's arg-max after each fed position
    accept: Tensor  # (S_old,) tokens accepted per row, in the order before the finished left
    accepted: int  # host: their sum (the packet's)
    outcome: StepOutcome  # the verifier's: the sentences that go on (state), parents, max_length
    vocab: int  # V of the scores
    entered: float  # time.perf_counter() when the step began (the model's block call had ended)


class Proposer(Protocol):
    """Who guesses the tokens a Jacobi verification checks (Santilli2023 Proposition 1: any
    guess leaves the output greedy's). Implementations: a draft model (speculative decoding,
    Leviathan et al. 2023 Alg. 1) and an n-gram pool (lookahead decoding, Fu et al. 2024)."""

    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        """The scheduler's refill: a proposer with models of its own encodes the admitted sentences
        into the scheduler's slots ``free``; others do nothing."""
        ...

    def drained(self) -> None:
        """The stream drained (the run's end): read what the proposer counted on the device, once; or nothing."""
        ...

    def start(self, sentences: Tensor, verify: JacobiState) -> Proposal:
        """Guesses for a new group: ``sentences`` as given to ``init_state``, ``verify`` the
        verifier's first state (its feed guesses the iteration's own)."""
        ...

    def propose(self, verdict: Verdict, rows: Optional[StrategyState]) -> Proposal:
        """After a verification: learn from what was accepted (``rows``: the last proposal's, in
        the order before the finished left), guess for the sentences that go on."""
        ...

    def guess_natively(self, search: VerifySearch, rows: Optional[StrategyState]) -> Optional[VerifySearch]:
        """``search`` (one sentence's iterations, run ahead natively) with this proposer's guessing in it, or None
        where the native loop cannot guess as :meth:`propose` does."""
        ...

    def ran_natively(self, run: VerifyRun, rows: Optional[StrategyState]) -> Optional[StrategyState]:
        """After the iterations the native loop did: the statistics :meth:`propose` would have counted, and
        ``rows`` as they are now."""
        ...


@dataclass
class ProposedState(StrategyState):
    """The verifier's Jacobi state and the proposer's per-sentence state, in the same order."""

    verify: JacobiState = part()
    rows: Optional[StrategyState] = part()

    @property
    def sentences(self) -> Tensor:
        return self.verify.sentences


class ProposeAndVerify(StateOps):
    """The strategy object the scheduler drives (see :mod:`fairseq_stream.search.interface`): the
    proposer's guesses, verified by the Jacobi iteration (its one host read per step)."""

    rows_per_sentence = 1

    def __init__(self, verifier: JacobiDecoding, proposer: Proposer) -> None:
        self.verifier = verifier
        self.proposer = proposer
        self.pad = verifier.pad
        self.stats = verifier.stats
        self._ahead: Optional[VerifySearch] = None  # the last native_search's, read by ran_ahead

    @property
    def scorer(self) -> OutputScorer:
        return self.verifier.scorer

    @property
    def runner(self) -> KernelRunner:
        return self.verifier.runner

    # ---- the interface ---------------------------------------------------------------------
    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        self.proposer.admit(src_tokens, src_lengths, free, size, pad=pad, eos=eos, left_pad=left_pad)

    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *,
                   longest: Optional[int] = None, shortest: Optional[int] = None) -> StepOutcome:
        out = self.verifier.init_state(sentences, max_len, src_lengths, longest=longest, shortest=shortest)
        return self._guessed(out, self.proposer.start(sentences, out.state))

    def length(self, state: ProposedState) -> int:
        return self.verifier.length(state.verify)

    # ---- the hooks its capabilities declare (verifier_capabilities): "admit", "drained", "region", "ahead" ----
    def native_search(self, state: ProposedState, most_calls: int) -> Optional[VerifySearch]:
        """The "ahead" hook: the verifier's native iterations of one sentence (``JacobiDecoding.native_verify``)
        with the proposer's guesses (``Proposer.guess_natively``), or None."""
        search = self.verifier.native_verify(state.verify, most_calls)
        self._ahead = None if search is None else self.proposer.guess_natively(search, state.rows)
        return self._ahead

    def ran_ahead(self, state: ProposedState, steps: int) -> ProposedState:
        """``state`` after the iterations the native loop did (its sentence did not end in them)."""
        search, self._ahead = self._ahead, None
        run = None if search is None else search.ran
        if run is None or not run.accepted:
            return state
        assert len(run.accepted) == steps
        return replace(state, verify=self.verifier.verified_ahead(state.verify, run),
                       rows=self.proposer.ran_natively(run, state.rows))

    def output_tail(self, state: ProposedState) -> Any:
        return self.verifier.output_tail(state.verify)

    def share_pools(self, pool: Any) -> None:
        """The verifier's bucket states are the model's (a repeat of a run replays its step graphs)."""
        self.verifier.share_pools(pool)

    def drained(self) -> None:
        """The run's end: the proposer reads what it counted on the device (the draft's histogram)."""
        self.proposer.drained()

    def concat(self, states: Sequence[ProposedState]) -> ProposedState:
        merged = super().concat(states)
        self.verifier.buckets.release_merged([st.verify for st in states])  # the parts' bucket states were copied from
        return merged

    def step(self, state: ProposedState, scores: "Tensor | StepScores") -> StepOutcome:
        """The model's scores of the fed block (S, b, V) → accepted tokens, the next guesses. Where the
        verification ran in the decoder step's region (``scores.searched``), its packet is read here and the
        predictions are the region's output layer's (the live rows' arg-max)."""
        entered = time.perf_counter()
        before = self.stats.accepted_tokens
        scores = StepScores.of(scores)
        if scores.searched:
            s, b = state.verify.size, state.verify.feed.size(1)
            pred = scores.top[1][: s * b, 0].view(s, b)  # type: ignore[index]
            out = self.verifier.step(state.verify, scores)  # the one host read (packet)
        else:
            pred, score = self.verifier.predictions(state.verify, scores.scores, scores.top)
            out = self.verifier.iterate(state.verify, pred, score)  # the one host read (packet)
        verdict = Verdict(pred=pred, accept=out.accept, accepted=self.stats.accepted_tokens - before, outcome=out,
                          vocab=scores.scores.size(-1), entered=entered)
        return self._guessed(out, self.proposer.propose(verdict, state.rows))

    def _guessed(self, out: StepOutcome, proposal: Proposal) -> StepOutcome:
        """The verifier's outcome whose next feed guesses ``proposal``'s tokens (when it has some)."""
        verify: JacobiState = out.state
        if proposal.feed is not None:
            verify = replace(verify, feed=proposal.feed)
        elif proposal.guesses is not None:
            verify = self.verifier.with_guesses(verify, proposal.guesses, proposal.guesses.size(1))
        if verify.bucket is not None:  # the next verification reads its feed and windows from the bucket state
            verify = self.verifier.into_bucket(verify)
        return replace(out, state=ProposedState(verify=verify, rows=proposal.rows), feed=verify.feed)


def verifier_capabilities(*, why_no_beam: str, reads: frozenset) -> Capabilities:
    """What a verifier + proposer strategy runs: greedy's output, one row per sentence, block steps,
    every sentence stepped each iteration (its rows have their own lengths)."""
    return Capabilities(streaming=True, default_epsilon=0.0, beam=False, why_no_beam=why_no_beam, nbest=False,
                        ngram_blocking=False, block_steps=True, selection="all", reads=reads,
                        hooks=frozenset({"admit", "drained", "region", "ahead"}))
