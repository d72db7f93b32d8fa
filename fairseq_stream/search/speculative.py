"""Speculative decoding: a draft proposes γ tokens, the model verifies them in one block step.

Leviathan et al. 2023 (Fast Inference from Transformers via Speculative Decoding, ICML),
Algorithm 1 with greedy acceptance, which is SpecDec's (Xia et al. 2023, Findings of EMNLP,
§3.2 "top-1 verification"): a cheap *draft* model decodes ``γ`` tokens ``d_1..d_γ``
autoregressively from the verified prefix; the target model (or ensemble) scores the ``γ + 1``
positions ``[y_n, d_1, .., d_γ]`` in **one** block-incremental decoder call; its arg-max
predictions ``p_0..p_γ`` are greedy's tokens as long as every draft token before them equals
the prediction at its position, so the longest prefix with ``d_i = p_{i-1}`` is accepted, plus
the target's own next token ``p_m``. At least one token per call, so the output **is** the
target's greedy output (``--beam 1``), whatever the draft proposes.

The verification is the Jacobi iteration of :mod:`fairseq_stream.search.jacobi` (the same
fused operator, a block of ``γ + 1`` sliding with the verified prefix), with the draft's
proposals in place of Jacobi's own guesses (:class:`DraftProposer`, a
:class:`~fairseq_stream.search.proposers.Proposer`). Beyond the papers, sentences are decoded
in batches under the streaming scheduler: each row accepts its own number of tokens (ragged),
finished sentences leave and new ones join.

The draft runs through its own :class:`~fairseq_stream.model.model_step.ModelStep` with its own
encoder slots and decoder caches, which are never recomputed: after a verification they are
rolled back to the accepted prefix (``ModelStep.accept``), and the next proposal first feeds
the one or two verified tokens the draft has not seen (two when all ``γ`` were accepted: ``d_γ``
and the target's token), then ``γ − 1`` single tokens.

``--draft-tokens auto`` picks ``γ`` before each verification from the acceptance rate ``α``
(estimated from recent verifications) and the measured cost ``c`` of a draft call relative to a
verification, maximising Leviathan et al.'s expected tokens per unit of time
``(1 − α^{γ+1}) / ((1 − α)(γc + 1))`` (§3.1 Eq. 1, Theorem 3.8). ``γ`` is one per decoder call: a
call verifies all its rows in one block of ``γ + 1`` positions, so a per-row ``γ`` would not
change its cost.

At batch 1 (``--stream-capacity 1``) ``--jacobi-parallel auto`` (:mod:`~fairseq_stream.search.parallel_gate`)
decides at each sentence's start whether it is verified with the draft's guesses or one position a call without
the draft (greedy's steps, no draft call), whichever this run has measured cheaper per verified token: where a
CPU's cache holds the model, a block of ``γ + 1`` can cost more than the tokens it verifies save.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.search.interface import StrategyContext
from fairseq_stream.model.model_step import DecoderState, ModelStep
from fairseq_stream.model.native_loops import DraftSearch, VerifyRun, VerifySearch
from fairseq_stream.search.registry import lenpen_of, register_search
from fairseq_stream.search.state import StrategyState, host, part, per_sentence
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.quantize import int8_weights
from fairseq_stream.model.row_cache import SentenceIndex
from fairseq_stream.search.jacobi import JacobiConfig, JacobiDecoding, JacobiState
from fairseq_stream.search.parallel_gate import ParallelGate, check_mode
from fairseq_stream.search.proposers import ProposeAndVerify, Proposal, Verdict, verifier_capabilities

#: ``--draft-tokens`` without a value: with the draft's calls as one native call, γ = 3 measured faster than
#: 2 and 4 on the demo model's draft on a CPU (docs/history/results-2026-11.md, speculative decoding, "Round 7").
DEFAULT_DRAFT_TOKENS = "3"
#: The largest γ ``auto`` considers.
AUTO_MAX_DRAFT_TOKENS = 8
#: ``--draft-quantize``: a draft only proposes, so its weights may be coarser than the model's; at batch 1 on a
#: CPU a draft call streams its weights from memory, and int8 makes the demo's draft call about half as long.
DRAFT_QUANTIZE = ("auto", "none", "int8")


@dataclass(frozen=True)
class SpeculativeConfig:
    draft_path: str  # the draft checkpoint(s), fairseq's ``a.pt:b.pt`` for an ensemble draft
    draft_tokens: Optional[int]  # γ; None = auto
    lenpen: float = 1.0  # only scales the reported score: the output is greedy's
    draft_quantize: str = "auto"  # the draft's weights: auto (int8 on a CPU), none, int8
    parallel: str = "auto"  # --jacobi-parallel: at batch 1 each sentence with the draft or one position a call
    lone: bool = False  # --stream-capacity 1: one sentence in flight, groups never merge (the gate acts only then)

    rows_per_sentence = 1

    def __post_init__(self) -> None:
        if not self.draft_path:
            raise FairseqStreamError("--search speculative needs --draft-path DRAFT.pt, a small model with the same "
                                     "dictionaries (scripts/train_draft.sh makes one)")
        for path in self.draft_path.split(":"):
            if not os.path.isfile(path):
                raise FairseqStreamError(f"--draft-path {path}: no such file")
        if self.draft_tokens is not None and not 1 <= self.draft_tokens <= 64:
            raise FairseqStreamError(f"--draft-tokens must be 'auto' or an integer in [1, 64], got {self.draft_tokens}")
        if self.draft_quantize not in DRAFT_QUANTIZE:
            raise FairseqStreamError(f"--draft-quantize must be one of {', '.join(DRAFT_QUANTIZE)}, "
                                     f"got {self.draft_quantize!r}")
        check_mode(self.parallel)

    @property
    def most_draft_tokens(self) -> int:
        return AUTO_MAX_DRAFT_TOKENS if self.draft_tokens is None else self.draft_tokens

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "SpeculativeConfig":
        return cls(draft_path=opts.draft_path or "",
                   draft_tokens=parse_draft_tokens(getattr(opts, "draft_tokens", None), DEFAULT_DRAFT_TOKENS),
                   lenpen=lenpen_of(gen_cfg), draft_quantize=str(getattr(opts, "draft_quantize", "auto")),
                   parallel=str(getattr(opts, "jacobi_parallel", "auto")),
                   lone=getattr(opts, "stream_capacity", None) == 1)


def parse_draft_tokens(value: Any, default: str = DEFAULT_DRAFT_TOKENS) -> Optional[int]:
    """``--draft-tokens``: an integer γ, or ``auto`` (None); not given (None): the search's ``default``."""
    text = str(default if value is None else value).strip()
    if text == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise FairseqStreamError(f"--draft-tokens must be 'auto' or an integer in [1, 64], got {value!r}") from None


# ---- the draft's state ---------------------------------------------------------------------------
@dataclass
class DraftCaches:
    """The draft's decoder caches as a part of a state (:func:`~fairseq_stream.search.state.part`):
    one row per sentence, travelling through the draft's :class:`ModelStep`."""

    model: ModelStep
    state: DecoderState

    def select(self, idx: Tensor, index: Optional[SentenceIndex] = None) -> "DraftCaches":
        """Rows ``idx``; ``index``: their layout (default: one row per sentence, from the rows)."""
        if index is None:
            index = SentenceIndex.one_per_row(self.state.row_sentence.index_select(0, idx))
        return DraftCaches(self.model, self.model.select(self.state, idx, index))

    def split(self, sentences: int, rows: int, rows_per_sentence: int) -> Tuple["DraftCaches", "DraftCaches"]:
        head, tail = self.model.split(self.state, rows, sentences)
        return DraftCaches(self.model, head), DraftCaches(self.model, tail)

    @classmethod
    def concat(cls, parts: Sequence["DraftCaches"], *, pad: int, rows_per_sentence: int) -> "DraftCaches":
        return cls(parts[0].model, parts[0].model.concat([p.state for p in parts]))


@dataclass
class DraftState(StrategyState):
    """Per sentence: the draft's caches and how many proposals beyond the verified prefix they hold."""

    sentences: Tensor
    caches: DraftCaches = part()
    unverified: Tensor = per_sentence()  # (S,) γ − 1 of the proposal that made the current feed
    most: int = host(max)  # host: max(unverified)


class DraftProposer:
    """The :class:`~fairseq_stream.search.proposers.Proposer` of speculative decoding: the draft's
    greedy continuation ``d_1..d_γ`` of each verified prefix (Leviathan et al. 2023 Algorithm 1,
    Xia et al. 2023 §3.2), ``γ`` fixed or tuned (:class:`GammaTuner`)."""

    def __init__(self, cfg: SpeculativeConfig, draft: ModelStep, *, pad: int, bos: int, stats: Any,
                 gate: Optional[ParallelGate] = None) -> None:
        self.cfg = cfg
        # --jacobi-parallel: whether a lone sentence (batch 1) is verified with the draft's guesses or one position a
        # call (greedy's steps, no draft call); a sentence without the draft has no per-sentence state (None)
        self.gate = gate
        self._with_draft = True  # the gate's choice for the sentences admitted last
        self.draft = draft
        self.memory = draft.slots()  # the draft's encodings of the sentences in flight
        self.pad, self.bos = pad, bos
        self.stats = stats
        self.gamma = cfg.draft_tokens if cfg.draft_tokens is not None else int(DEFAULT_DRAFT_TOKENS)
        self.tuner = GammaTuner(cfg.most_draft_tokens) if cfg.draft_tokens is None else None
        self.histogram = None  # (γ_max + 2,) rows that accepted k tokens in a verification, on the device
        self._left_step: Optional[float] = None  # when the last step returned (the verification's start)
        self.weights = int8_weights(draft.models) or "float"  # the closing statistics

    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        """The scheduler's refill: the draft encodes the admitted sentences into the same slots — but a lone
        sentence the gate runs one position a call (decided here, before :meth:`start`), which never calls the draft."""
        self.memory.size = size
        self._with_draft = True
        if self.gate is not None and src_tokens.size(0) == 1:
            self._with_draft = self.gate.parallel()
            if not self._with_draft:
                return
        self.draft.admit(self.memory, src_tokens, src_lengths, free, pad=pad, eos=eos, left_pad=left_pad)

    def start(self, sentences: Tensor, verify: JacobiState) -> Proposal:
        """The draft decodes ``γ`` tokens after BOS; or, for a lone sentence the gate runs one position a call, no
        guess (its windows one position wide) and no draft state."""
        if not self._with_draft:
            self._left_step = None
            return self._one_position(sentences)
        gamma = self._next_gamma()
        dec = self.draft.initial_state(self.memory, sentences, self.bos)
        start = time.perf_counter()
        tokens, dec = self.greedy(dec, verify.feed[:, 0], gamma)  # after BOS
        self.count_draft(start)
        rows = DraftState(sentences=verify.sentences.clone(), caches=DraftCaches(self.draft, dec),
                          unverified=torch.full_like(sentences, gamma - 1), most=gamma - 1)
        self._left_step = time.perf_counter()
        return Proposal(tokens, rows)

    def propose(self, verdict: Verdict, rows: Optional[DraftState]) -> Proposal:
        """The draft catches up with the verified tokens, the finished sentences leave, then it
        decodes the next ``γ``; a sentence without the draft (``rows`` None) gets no guess."""
        if rows is None:
            return Proposal(None, None) if verdict.outcome.state.size == 0 else self._one_position(
                verdict.outcome.state.sentences)
        if self._left_step is not None:  # the target's block call, timed from the host (CPU)
            self.stats.add_extra("verify_seconds", verdict.entered - self._left_step)
        out = verdict.outcome
        self._record(verdict.accept, rows.size, verdict.accepted, rows.most + 1)
        if out.state.size == 0:  # the group is done: nothing to propose
            self._left_step = time.perf_counter()
            return Proposal(None, rows)
        gamma = self._next_gamma()
        start = time.perf_counter()
        caches, first, feed = self._catch_up(rows, verdict.pred, verdict.accept, out.max_length, verdict.accepted)
        if out.parents is not None:  # finished sentences leave: their draft rows too
            caches = caches.select(out.parents, SentenceIndex.one_per_row(out.state.sentences))
            first = first.index_select(0, out.parents) if first is not None else None
            feed = feed.index_select(0, out.parents) if feed is not None else None
        if feed is not None:  # the verified tokens not fed yet: they start the γ calls
            tokens, dec = self.greedy(caches.state, feed, gamma)
        else:
            tokens, dec = self._continue(first, caches.state, gamma)
        self.count_draft(start)
        sentences = out.state.sentences
        new = DraftState(sentences=sentences, caches=DraftCaches(self.draft, dec),
                         unverified=torch.full_like(sentences, gamma - 1), most=gamma - 1)
        self._left_step = time.perf_counter()
        self.stats.add_extra("speculative_step_seconds", self._left_step - verdict.entered)
        return Proposal(tokens, new)

    @staticmethod
    def _one_position(sentences: Tensor) -> Proposal:
        """No guess: the verifier's next windows narrow to one position (``JacobiDecoding.with_guesses``)."""
        return Proposal(sentences.new_empty((sentences.numel(), 0)), None)

    # ---- the draft -------------------------------------------------------------------------
    def count_draft(self, start: float) -> None:
        """The draft's time since ``start`` and how its steps ran (a step-mode line of its own)."""
        self.stats.add_extra("draft_seconds", time.perf_counter() - start)
        self._draft_step_mode()

    def _draft_step_mode(self) -> None:
        self.stats.draft_step_mode = dict(self.draft.step_stats.as_dict(), mode=self.draft.step_mode,
                                          weights=self.weights)

    def _catch_up(self, rows: DraftState, pred: Tensor, accept: Tensor, longest: int,
                  accepted: int) -> Tuple[DraftCaches, Optional[Tensor], Optional[Tensor]]:
        """Roll the draft's caches back to the verified prefix and feed it what it has not seen.

        The draft was fed the verified prefix, then ``u = γ − 1`` proposals; ``a = accept[r]``
        tokens were verified (``a − 1`` proposals and the target's own). Its cache keeps the
        first ``min(a − 1, u)`` proposals; the one or two verified tokens after them are fed in
        one block (two when every proposal was accepted). Every row of the old order takes part
        (the finished ones leave afterwards), so the host's bounds of the lengths stay exact for
        one row. Returns the caches and each row's first new proposal (S_old,); or, for one row,
        the caches, None and the tokens to feed (1, 1 or 2), fed by the next proposal's calls.
        """
        dec = rows.caches.state
        keep = torch.minimum(accept - 1, rows.unverified)  # proposals that stay in the cache
        if rows.most > 0:
            # ``accept`` reads keep + (block − unverified) of a block of ``most``: rows of another γ too
            # the host's bound of the new lengths: exact for one row (a cache of one row is uniform)
            bound = longest - accepted + 1 + min(accepted - 1, rows.most) if rows.size == 1 else longest
            dec = self.draft.accept(dec, keep + (rows.most - rows.unverified), rows.most, min(bound, dec.max_length))
        pending = accept - keep  # (S,) 1 or 2 verified tokens the draft has not seen
        last = pred.gather(1, (accept - 1).unsqueeze(1))  # the target's token
        before = pred.gather(1, (accept - 2).clamp(min=0).unsqueeze(1))  # the last accepted proposal
        if rows.size == 1:
            # one row, its one or two tokens known on the host (the packet's total is its own): fed by
            # the proposal's first call (one token: the one-query attention kernel, cheaper on a CPU;
            # one native call for all of the proposal's calls)
            feed = last if accepted - min(accepted - 1, rows.most) == 1 else torch.cat([before, last], 1)
            return DraftCaches(self.draft, dec), None, feed
        two = pending.unsqueeze(1) == 2
        feed = torch.cat([torch.where(two, before, last), torch.where(two, last, torch.full_like(last, self.pad))], 1)
        logits, dec = self.draft.step(self.memory, dec, feed)  # (S, 2, V)
        dec = self.draft.accept(dec, pending, 2, min(longest + 1, dec.max_length))
        first = logits.gather(1, (pending - 1).view(-1, 1, 1).expand(-1, 1, logits.size(2))).squeeze(1).argmax(-1)
        self.stats.add_extra("draft_calls")
        return DraftCaches(self.draft, dec), first, None

    def _draft_call(self, dec: DecoderState, tokens: Tensor) -> Tuple[Tensor, DecoderState]:
        """One draft call of a block (S, b) → the arg-max of its last position (S,)."""
        logits, dec = self.draft.step(self.memory, dec, tokens)
        self.stats.add_extra("draft_calls")
        return logits[:, -1].argmax(-1), dec

    def _continue(self, first: Tensor, dec: DecoderState, gamma: int) -> Tuple[Tensor, DecoderState]:
        """The draft's greedy continuation ``d_1..d_γ`` (S, γ) from its first proposal ``d_1`` (S,):
        ``γ − 1`` single-token calls (the last proposal is not fed: its cache slot would be
        rolled back or fed with the target's token anyway)."""
        if gamma == 1:
            return first.unsqueeze(1), dec
        rest, dec = self.greedy(dec, first, gamma - 1)
        return torch.cat([first.unsqueeze(1), rest], 1), dec

    def greedy(self, dec: DecoderState, feed: Tensor, calls: int) -> Tuple[Tensor, DecoderState]:
        """``calls`` draft calls, the first fed ``feed`` (S,) or a block (S, f), each next one the last
        one's arg-max: the arg-maxes (S, calls). One native call where the draft runs natively (no
        interpreter between the calls), else a loop of :meth:`_draft_call`."""
        done = self.draft.greedy_steps(self.memory, dec, feed, calls)
        if done is not None:
            self.stats.add_extra("draft_calls", calls)
            return done
        tokens = []
        for _ in range(calls):
            feed, dec = self._draft_call(dec, feed if feed.dim() == 2 else feed.unsqueeze(1))
            tokens.append(feed)
        return torch.stack(tokens, 1), dec

    # ---- the native loop (ProposeAndVerify's "ahead" hook) ----------------------------------------
    def guess_natively(self, search: VerifySearch, rows: Optional[StrategyState]) -> Optional[VerifySearch]:
        """``search`` with this draft proposing in it (``decoder_speculate``: windows of γ + 1, the last proposal's
        γ), or None for a proposal of another γ. With ``--draft-tokens auto`` the verifier's block is the largest γ's
        and the run keeps the γ :class:`GammaTuner` chose before it (the tuner sees the run's verifications after
        it, :meth:`ran_natively`, and may choose another for the next run): what the Python steps would verify with
        that γ, as :meth:`JacobiDecoding.with_guesses` narrows their windows."""
        if rows is None:  # a sentence without the draft: windows of one position from here (HGJ's L), greedy's steps
            return replace(search, max_parallel=search.verified)
        windows = search.block == self.gamma + 1 if self.tuner is None else search.block >= self.gamma + 1
        if not isinstance(rows, DraftState) or rows.most != self.gamma - 1 or not windows:
            return None
        return replace(search, block=self.gamma + 1,
                       draft=DraftSearch(self.draft, self.memory, rows.caches.state, self.gamma))

    def ran_natively(self, run: VerifyRun, rows: Optional[StrategyState]) -> Optional[StrategyState]:
        """The statistics of the verifications the native loop did (one sentence; γ fixed): the tokens each
        accepted, the draft's calls, and the loop's time, ``draft_seconds`` of it the draft's calls (the rest
        verification time, the last call's block included, as :meth:`propose` counts it); the draft's caches. The
        gate (``--jacobi-parallel auto``) learns the run's cost per verified token on its side."""
        if self.gate is not None:
            self.gate.observe(rows is not None, run.seconds, run.accepted)
        if rows is None:  # one position a call: no draft
            return None
        self.stats.add_extra("draft_seconds", run.draft_seconds)
        self.stats.add_extra("verify_seconds", run.seconds - run.draft_seconds)
        self._left_step = time.perf_counter()
        for a in run.accepted:
            self._record(None, 1, a, self.gamma)
            self.stats.add_extra("draft_tokens_proposed", self.gamma)
            self.stats.add_extra("draft_proposals")
        self.stats.add_extra("draft_calls", self.gamma * len(run.accepted))
        self._draft_step_mode()
        assert isinstance(rows, DraftState) and run.draft_state is not None
        return replace(rows, caches=DraftCaches(self.draft, run.draft_state))

    # ---- γ and the statistics ---------------------------------------------------------------
    def _next_gamma(self) -> int:
        if self.tuner is not None:
            self.gamma = self.tuner.choose(self.stats)
        self.stats.add_extra("draft_tokens_proposed", self.gamma)
        self.stats.add_extra("draft_proposals")
        return self.gamma

    def _record(self, accept: Optional[Tensor], rows: int, accepted: int, gamma: int) -> None:
        """Accepted tokens per row and verification: totals from the packet; the histogram on the
        host for one row (the packet's total is that row's), else on the device, read once when the
        stream drains (:meth:`drained`: the run's end, outside any step)."""
        self.stats.add_extra("verify_steps")
        self.stats.add_extra("verify_rows", rows)
        self.stats.add_extra("verify_accepted", accepted)
        if self.tuner is not None:
            self.tuner.observe(accepted / max(rows, 1) - 1, gamma)  # drafts accepted per row, of γ
        if rows == 1:
            self.stats.add_extra(f"accepted_{accepted}")
            return
        size = AUTO_MAX_DRAFT_TOKENS + 2 if self.tuner is not None else self.cfg.most_draft_tokens + 2
        counts = torch.bincount(accept.clamp(max=size - 1), minlength=size)  # type: ignore[union-attr]
        self.histogram = counts if self.histogram is None else self.histogram + counts

    def drained(self) -> None:
        """The device histogram of accepted tokens into the statistics (one read for the run)."""
        if self.histogram is None:
            return
        for k, n in enumerate(self.histogram.tolist()):
            if n:
                self.stats.add_extra(f"accepted_{k}", n)
        self.histogram = None


class SpeculativeDecoding(ProposeAndVerify):
    """The Jacobi verifier (a block of ``γ_max + 1`` sliding with the verified prefix) and a
    :class:`DraftProposer`."""

    @classmethod
    def from_config(cls, cfg: SpeculativeConfig, ctx: StrategyContext) -> "SpeculativeDecoding":
        if ctx.load_models is None or ctx.task is None:
            raise FairseqStreamError("--search speculative needs the engine's model loader (integration/build.py)")
        draft = ModelStep(ctx.load_models(cfg.draft_path, quantize=cfg.draft_quantize),
                          step_mode=ctx.step_mode)  # static/graphs as the target
        draft.require_block_steps("a speculative draft (--draft-path)")
        verifier = JacobiDecoding.from_config(
            JacobiConfig(block=cfg.most_draft_tokens + 1, init="tail", lenpen=cfg.lenpen), ctx)
        return cls(verifier, DraftProposer(cfg, draft, pad=ctx.pad, bos=ctx.bos, stats=ctx.stats,
                                           gate=ParallelGate(cfg.parallel if cfg.lone else "always", ctx.stats)))


class GammaTuner:
    """``--draft-tokens auto``: γ from the acceptance rate and the draft's relative cost.

    ``α`` (the chance that a proposal equals the target's token, given the ones before it did) is
    fitted to the mean accepted proposals per row, ``E[m] = α(1 − α^γ) / (1 − α)`` (the geometric
    model of Leviathan et al. 2023 §3.1), as an exponential moving average over verifications;
    ``c`` is the measured time of a draft call over a verification's. γ maximises
    ``(1 − α^{γ+1}) / ((1 − α)(γc + 1))`` (Theorem 3.8's improvement factor).
    """

    def __init__(self, most: int, decay: float = 0.8) -> None:
        self.most = most
        self.decay = decay
        self.alpha = 0.6  # until measured
        self.gamma = int(DEFAULT_DRAFT_TOKENS)

    def observe(self, mean_accepted: float, gamma: int) -> None:
        if gamma < 1:
            return
        alpha = _alpha_for(max(mean_accepted, 0.0), gamma)
        self.alpha = self.decay * self.alpha + (1 - self.decay) * alpha

    def choose(self, stats: Any) -> int:
        extra = stats.extra
        calls = extra.get("draft_calls", 0.0)
        if calls and extra.get("verify_seconds"):
            draft_call = extra["draft_seconds"] / calls
            verify = extra["verify_seconds"] / max(extra.get("verify_steps", 1.0), 1.0)
            cost = draft_call / max(verify, 1e-9)
        else:
            cost = 0.2
        a = min(self.alpha, 0.999)
        self.gamma = max(range(1, self.most + 1), key=lambda g: (1 - a ** (g + 1)) / ((1 - a) * (g * cost + 1)))
        return self.gamma


def _alpha_for(mean: float, gamma: int) -> float:
    """The α with ``α(1 − α^γ)/(1 − α) = mean`` (bisection; the left side grows with α)."""
    if mean >= gamma:
        return 0.999
    lo, hi = 0.0, 0.999
    for _ in range(30):
        mid = (lo + hi) / 2
        if mid * (1 - mid ** gamma) / (1 - mid) < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---- registration ---------------------------------------------------------------------------
WHY_NO_BEAM = (
    "speculative decoding verifies the draft's tokens against the model's greedy choice, one "
    "prefix per sentence (Leviathan et al. 2023, Xia et al. 2023); a beam re-ranks k prefixes at every "
    "step. Use --beam 1"
)

register_search(
    "speculative",
    summary="a draft (--draft-path) proposes --draft-tokens γ tokens, the model verifies them in one block step; "
            "output identical to greedy (Leviathan et al. 2023 Alg. 1, Xia et al. 2023)",
    config=SpeculativeConfig,
    capabilities=verifier_capabilities(why_no_beam=WHY_NO_BEAM,
                                       reads=frozenset({"draft_path", "draft_tokens", "draft_quantize",
                                                        "jacobi_parallel"})),
)(SpeculativeDecoding)
