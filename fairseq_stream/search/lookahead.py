"""Lookahead decoding without a draft model: Jacobi iteration plus an n-gram pool.

Fu et al. 2024 (Break the Sequential Dependency of LLM Inference Using Lookahead Decoding,
ICML), §3: Jacobi iteration generates n-grams from the model's own trajectories, a pool keeps
them keyed by their first token, and the n-gram that starts with the last verified token is
verified in the same decoder call; the output is greedy's. Here, in its simplest batched form:

* the **pool** maps a token ``t`` to the ``N − 1`` tokens that most recently followed ``t`` in a
  verified (greedy) output of this run — the model's own trajectories, across sentences (a
  translation repeats its phrases: "and he said to", "the LORD"). It is a device table
  ``(V + 1, N − 1)`` written by scatter, never read on the host;
* each iteration verifies **one** guess per sentence (the paper verifies several with a tree
  mask): the pool's continuation of the last verified token, or, when the pool has none, the
  Jacobi iteration's own unverified predictions (``gs-jacobi --jacobi-init tail``'s guess,
  Santilli2023), in a block of ``N`` positions;
* with ``--lookahead-prior FILE`` (:mod:`fairseq_stream.search.lookahead_prior`) the pool starts from
  the model's most frequent continuations counted offline on its greedy output of training sources,
  and the continuation of the last **two** verified tokens there, where the prior has one, comes first;
* the verification is the Jacobi iteration of :mod:`fairseq_stream.search.jacobi`
  (Santilli2023 Proposition 1): at least one token per call, the longest verified prefix
  accepted, so the output **is** greedy's, batched, with ragged acceptance per row; the pool is
  its :class:`~fairseq_stream.search.proposers.Proposer` (:class:`NgramPoolProposer`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import torch
from torch import Tensor

from fairseq_stream.model.native_loops import VerifyRun, VerifySearch
from fairseq_stream.ops import ngram_pool
from fairseq_stream.search.interface import StrategyContext
from fairseq_stream.search.registry import lenpen_of, register_search
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.jacobi import JacobiConfig, JacobiDecoding, JacobiState
from fairseq_stream.search.lookahead_prior import NgramPrior, load_prior
from fairseq_stream.search.parallel_gate import check_mode
from fairseq_stream.search.proposers import ProposeAndVerify, Proposal, Verdict, verifier_capabilities
from fairseq_stream.search.state import StrategyState


@dataclass(frozen=True)
class LookaheadConfig:
    ngram: int  # N: a pool entry is a token and the N - 1 that followed it; a block verifies N positions
    lenpen: float = 1.0  # only scales the reported score: the output is greedy's
    prior: Optional[str] = None  # --lookahead-prior: a file of lookahead_prior.py
    parallel: str = "always"  # --jacobi-parallel (search/parallel_gate.py)

    rows_per_sentence = 1

    def __post_init__(self) -> None:
        if not 2 <= self.ngram <= 16:
            raise FairseqStreamError(f"--lookahead-ngram must be in [2, 16], got {self.ngram}")
        check_mode(self.parallel)

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "LookaheadConfig":
        return cls(ngram=int(opts.lookahead_ngram), lenpen=lenpen_of(gen_cfg),
                   prior=getattr(opts, "lookahead_prior", None) or None,
                   parallel=str(getattr(opts, "jacobi_parallel", "always")))


class NgramPoolProposer:
    """The :class:`~fairseq_stream.search.proposers.Proposer` of lookahead decoding (Fu et al. 2024
    §3): the pool's continuation of the last verified token, else the Jacobi iteration's own guess.
    The pool is the run's: it learns from every group's verified tokens. With a ``prior``, the pool
    starts from its one-token continuations, and its two-token continuation comes first."""

    def __init__(self, ngram: int, *, pad: int, bos: int, prior: Optional[NgramPrior] = None, stats: Any = None,
                 native: bool = True) -> None:
        self.ngram = ngram
        self.pad, self.bos = pad, bos
        self.prior = prior
        self.stats = stats
        self.native = native  # the C++ operator where it runs (False: --step-backend reference)
        self.pool: Optional[Tensor] = None  # (V + 1, N − 1) token ids, pad = none; row V is scratch

    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        """No model of its own: nothing to encode."""

    def drained(self) -> None:
        """Nothing counted on the device."""

    def start(self, sentences: Tensor, verify: JacobiState) -> Proposal:
        return Proposal(None, None, self._propose(verify, 0))

    def propose(self, verdict: Verdict, rows: Optional[StrategyState]) -> Proposal:
        if self.pool is None:
            self.pool = torch.full((verdict.vocab + 1, self.ngram - 1), self.pad, dtype=torch.long,
                                   device=verdict.pred.device)
            if self.prior is not None:
                self.prior = self.prior.to(self.pool.device)
                self.pool.index_copy_(0, self.prior.unigram[:, 0], self.prior.unigram[:, 1:])
        state = verdict.outcome.state
        if state.size == 0:
            return Proposal(None, None)
        return Proposal(None, None, self._propose(state, verdict.pred.size(1)))

    def guess_natively(self, search: VerifySearch, rows: Optional[StrategyState]) -> Optional[VerifySearch]:
        """``search`` with this pool guessing in it (``decoder_jacobi`` calls the pool's operator after each
        iteration, as :meth:`propose` does); None before the pool exists (the first iteration) or where the
        operator does not run (``--step-backend reference``, no kernel)."""
        if self.pool is None or not (self.native and ngram_pool.runs_natively(self.pool)):
            return None
        return replace(search, pool=self.pool, bigrams=self.prior.bigrams if self.prior is not None else None)

    def ran_natively(self, run: VerifyRun, rows: Optional[StrategyState]) -> Optional[StrategyState]:
        """The pool learnt in place; the statistics name its operator."""
        if self.stats is not None:
            self.stats.note_backend(ngram_pool.OPERATOR, "cpp")
        return rows

    def _propose(self, state: JacobiState, collect: int) -> Optional[Tensor]:
        """Learn the n-grams of the ``collect`` keys before each row's newest complete one (the
        iteration's ``b``: some were written before, the same values), then guess: the prior's
        continuation of the last two verified tokens, else the pool's of the last one, else the Jacobi
        iteration's own (the unverified predictions), as the verifier's next feed (windows of at most
        N positions: its block). None: no pool yet, or no room."""
        if self.pool is None:
            return None
        feed, backend = ngram_pool.propose(self.pool, state.tokens, state.verified, state.feed, state.width, collect,
                                           bos=self.bos, pad=self.pad, native=self.native,
                                           bigrams=self.prior.bigrams if self.prior is not None else None)
        if self.stats is not None:
            self.stats.note_backend(ngram_pool.OPERATOR, backend)
        return feed


class LookaheadDecoding(ProposeAndVerify):
    """The Jacobi verifier (tail guesses, blocks of N) and an :class:`NgramPoolProposer`."""

    @classmethod
    def from_config(cls, cfg: LookaheadConfig, ctx: StrategyContext) -> "LookaheadDecoding":
        prior = None
        if cfg.prior is not None:
            if ctx.task is None:
                raise FairseqStreamError("--lookahead-prior needs the run's target dictionary (integration/build.py)")
            prior = load_prior(cfg.prior, ngram=cfg.ngram, dictionary=ctx.task.target_dictionary)
            ctx.stats.settings["lookahead prior"] = (f"{os.path.basename(cfg.prior)} ({len(prior.unigram)} one-token, "
                                                     f"{len(prior.bigram_keys)} two-token keys)")
        verifier = JacobiDecoding.from_config(JacobiConfig(block=cfg.ngram, init="tail", lenpen=cfg.lenpen,
                                                           parallel=cfg.parallel), ctx)
        return cls(verifier, NgramPoolProposer(cfg.ngram, pad=ctx.pad, bos=ctx.bos, prior=prior, stats=ctx.stats,
                                               native=ctx.step_backend != "reference"))


WHY_NO_BEAM = (
    "lookahead decoding verifies guessed tokens against the model's greedy choice, one prefix per "
    "sentence (Fu et al. 2024); a beam re-ranks k prefixes at every step. Use --beam 1"
)

register_search(
    "lookahead",
    summary="no draft model: Jacobi iteration plus a pool of n-grams from the model's own outputs, verified in one "
            "block step; output identical to greedy (Fu et al. 2024)",
    config=LookaheadConfig,
    capabilities=verifier_capabilities(why_no_beam=WHY_NO_BEAM,
                                       reads=frozenset({"lookahead_ngram", "lookahead_prior", "jacobi_parallel"})),
)(LookaheadDecoding)
