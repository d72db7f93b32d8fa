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
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.search.interface import StrategyContext
from fairseq_stream.search.registry import lenpen_of, register_search
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.jacobi import JacobiConfig, JacobiDecoding, JacobiState
from fairseq_stream.search.lookahead_prior import NgramPrior, load_prior
from fairseq_stream.search.proposers import ProposeAndVerify, Proposal, Verdict, verifier_capabilities
from fairseq_stream.search.state import StrategyState


@dataclass(frozen=True)
class LookaheadConfig:
    ngram: int  # N: a pool entry is a token and the N - 1 that followed it; a block verifies N positions
    lenpen: float = 1.0  # only scales the reported score: the output is greedy's
    prior: Optional[str] = None  # --lookahead-prior: a file of lookahead_prior.py

    rows_per_sentence = 1

    def __post_init__(self) -> None:
        if not 2 <= self.ngram <= 16:
            raise FairseqStreamError(f"--lookahead-ngram must be in [2, 16], got {self.ngram}")

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "LookaheadConfig":
        return cls(ngram=int(opts.lookahead_ngram), lenpen=lenpen_of(gen_cfg),
                   prior=getattr(opts, "lookahead_prior", None) or None)


class NgramPoolProposer:
    """The :class:`~fairseq_stream.search.proposers.Proposer` of lookahead decoding (Fu et al. 2024
    §3): the pool's continuation of the last verified token, else the Jacobi iteration's own guess.
    The pool is the run's: it learns from every group's verified tokens. With a ``prior``, the pool
    starts from its one-token continuations, and its two-token continuation comes first."""

    def __init__(self, ngram: int, *, pad: int, bos: int, prior: Optional[NgramPrior] = None) -> None:
        self.ngram = ngram
        self.pad, self.bos = pad, bos
        self.prior = prior
        self.pool: Optional[Tensor] = None  # (V + 1, N − 1) token ids, pad = none; row V is scratch

    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        """No model of its own: nothing to encode."""

    def start(self, sentences: Tensor, verify: JacobiState) -> Proposal:
        return Proposal(self._guesses(verify), None)

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
        self._collect(state, verdict.pred.size(1))
        return Proposal(self._guesses(state), None)

    def _collect(self, state: JacobiState, b: int) -> None:
        """Write the n-grams this iteration completed into the pool: key ``y_c`` (BOS = column 0)
        and its continuation ``y_{c+1}..y_{c+N−1}``, for the ``b`` keys before each row's newest
        complete one (some were written before: the same values)."""
        g = self.ngram - 1
        seq = F.pad(state.tokens, (1, 0), value=self.bos)  # (S, T + 1): BOS, y_1, y_2, ...
        c = state.verified.unsqueeze(1) - g - torch.arange(b, device=seq.device)  # (S, b) key columns
        valid = c >= 0
        c = c.clamp(min=0)
        keys = seq.gather(1, c).masked_fill(~valid, self.pool.size(0) - 1)  # invalid → the scratch row
        cols = c.unsqueeze(2) + torch.arange(1, g + 1, device=seq.device)  # (S, b, g)
        conts = seq.gather(1, cols.view(cols.size(0), -1).clamp(max=seq.size(1) - 1)).view_as(cols)
        self.pool.index_put_((keys.reshape(-1),), conts.reshape(-1, g))

    def _guesses(self, state: JacobiState) -> Optional[Tensor]:
        """(S, N − 1) the pool's continuation of the last verified token where it has one, else the
        Jacobi iteration's own guess (the unverified predictions); None: no pool yet, or no room."""
        if self.pool is None or state.feed.size(1) < 2:
            return None
        last = state.feed[:, 0]  # (S,) the last verified token (BOS first)
        pooled = self.pool.index_select(0, last)  # (S, N − 1)
        if self.prior is not None:  # the last two verified tokens' continuation first, where the prior has one
            seq = F.pad(state.tokens, (1, 0), value=self.bos)  # BOS, y_1, ...: y_v is ``last``
            prev = seq.gather(1, (state.verified - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
            two = self.prior.bigram_guesses(prev.masked_fill(state.verified < 1, -1), last, self.pad)
            pooled = torch.where(two[:, :1] != self.pad, two, pooled)
        own = F.pad(state.feed[:, 1:], (0, self.ngram - state.feed.size(1)), value=self.pad)
        return torch.where(pooled[:, :1] != self.pad, pooled, own)


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
        verifier = JacobiDecoding.from_config(JacobiConfig(block=cfg.ngram, init="tail", lenpen=cfg.lenpen), ctx)
        return cls(verifier, NgramPoolProposer(cfg.ngram, pad=ctx.pad, bos=ctx.bos, prior=prior))


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
                                       reads=frozenset({"lookahead_ngram", "lookahead_prior"})),
)(LookaheadDecoding)
