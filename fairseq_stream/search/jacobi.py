"""Parallel Jacobi decoding: PJ, PGJ and HGJ of Santilli2023 (Algorithms 1–3, §3.3–3.4).

Greedy decoding solves the triangular system ``y_i = argmax p(· | y_<i, x)`` by substitution,
one equation per step. Jacobi iteration guesses a block of ``y_i`` at once (a *draft*), feeds
the whole block through the decoder in one call (the block-incremental step of
:mod:`fairseq_stream.model.block_decoder`), and replaces the draft by the predictions. A
prediction is *verified* when every draft token before it in the block equals its prediction:
it was then computed from greedy's own prefix, so it is greedy's token. Each iteration
verifies at least one token (the block's first), so a sentence needs at most as many
iterations as greedy needs steps, and the output **is** greedy's (Proposition 1). The paper's
stopping rule "no token changed" (Eq. 13) is the case where the whole draft is verified.

* ``jacobi`` (PJ, Algorithm 1) — the block is the whole rest of the target, up to the
  maximum length ``a·|x| + b`` (the reference code uses greedy's length as an oracle; we don't);
* ``gs-jacobi`` (PGJ, Algorithm 2) — blocks of ``b`` positions, aligned at multiples of ``b``;
  Jacobi inside a block, then a sequential (Gauss–Seidel) step into the next;
* ``hybrid-jacobi`` (HGJ, Algorithm 3) — PGJ up to ``L`` target positions, then one token per
  step until EOS.

Initial drafts are PAD tokens (the paper's); ``--jacobi-init tail`` slides the block forward
from the verified prefix instead, so the unverified predictions of one iteration are the
draft of the next even across block boundaries. Beyond the paper, sentences are decoded in
batches under the streaming scheduler: each row has its own verified length, and a sentence
that converges leaves the batch while a new one joins.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.interface import Hypothesis, StepOutcome, StrategyContext
from fairseq_stream.ops import jacobi_step as fused
from fairseq_stream.ops import ngram_pool, packets
from fairseq_stream.ops.backends import JACOBI_STEP, KernelRunner
from fairseq_stream.ops.jacobi_step import IterationResult
from fairseq_stream.ops.packets import PacketView
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.search.parallel_gate import ParallelGate, check_mode
from fairseq_stream.model.native_loops import VerifyRun, VerifySearch
from fairseq_stream.model.row_cache import SentenceIndex, counting
from fairseq_stream.search.score_edits import RowContext
from fairseq_stream.search.registry import Capabilities, lenpen_of, register_search
from fairseq_stream.model.static.buckets import row_bucket
from fairseq_stream.search.region import (
    BucketStatePool, RegionSearch, SearchInRegion, SentenceBucket, in_bucket, sentence_fields,
)
from fairseq_stream.search.state import PAD, StateOps, StrategyState, host, per_sentence, transient


@dataclass(frozen=True)
class JacobiConfig:
    block: Optional[int]  # b; None = the whole target (PJ)
    max_parallel_len: Optional[int] = None  # L of HGJ; None = no limit
    init: str = "pad"  # "pad" (paper) or "tail"
    lenpen: float = 1.0  # only scales the reported score: the output is greedy's
    parallel: str = "always"  # --jacobi-parallel: auto (search/parallel_gate.py), always, never (L = 0)

    def __post_init__(self) -> None:
        if self.block is not None and self.block < 1:
            raise FairseqStreamError(f"--jacobi-block must be >= 1, got {self.block}")
        if self.max_parallel_len is not None and self.max_parallel_len < 0:
            raise FairseqStreamError(f"--jacobi-max-parallel-len must be >= 0, got {self.max_parallel_len}")
        if self.init not in ("pad", "tail"):
            raise FairseqStreamError(f"--jacobi-init must be 'pad' or 'tail', got {self.init!r}")
        check_mode(self.parallel)
        if self.parallel == "never":  # one position a call from the start: HGJ with L = 0
            object.__setattr__(self, "max_parallel_len", 0)

    rows_per_sentence = 1

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "JacobiConfig":
        return cls(block=None if name == "jacobi" else int(opts.jacobi_block),
                   max_parallel_len=int(opts.jacobi_max_parallel_len) if name == "hybrid-jacobi" else None,
                   init=opts.jacobi_init, lenpen=lenpen_of(gen_cfg),
                   parallel="always" if name == "jacobi" else str(getattr(opts, "jacobi_parallel", "always")))


@dataclass
class JacobiState(StrategyState):
    """``S`` sentences, one decoder row each, all on the device.

    ``tokens`` (S, T): verified tokens, left-aligned, pad after ``verified[s]`` (T is the
    longest maximum length + 3, allocated once; the last column is scratch for rejected
    predictions); ``draft`` (S, D): guesses for the positions after the verified ones (pad =
    none yet); ``width``/``feed``: the next iteration's window and the tokens fed for it. The
    decoder cache of a row holds BOS and all verified tokens but the last.
    """

    sentences: Tensor
    tokens: Tensor = per_sentence(pad=PAD, scratch_last=True)
    token_scores: Tensor = per_sentence(pad=0.0, scratch_last=True)  # as wide as ``tokens`` (the operators' rows)
    verified: Tensor = per_sentence()  # (S,)
    draft: Tensor = per_sentence(pad=PAD)
    max_len: Tensor = per_sentence()
    iterations: Tensor = per_sentence()  # (S,) decoder calls this sentence took part in
    width: Tensor = per_sentence()  # (S,)
    feed: Tensor = per_sentence(pad=PAD)  # (S, b)
    low: int = host(min)  # host: min(verified)
    high: int = host(max)  # host: max(verified)
    shortest: int = host(min)  # host: min(max_len)
    bucket: Optional[SentenceBucket] = transient()  # the bucket state of an iteration in a static step's region


#: what makes a sentence of a bucket state inert (its iteration in the region: no window past its first position, past
#: its maximum length — done at once, one token accepted, which the host subtracts; sorted after the live ones)
_RESETS = dict(verified=0, max_len=-2, width=1, iterations=0)


class JacobiDecoding(SearchInRegion, StateOps):
    """The strategy object the scheduler drives (see :mod:`fairseq_stream.search.interface`).

    An iteration reads the device once (finished sentences, the next window, the longest row).
    """

    rows_per_sentence = 1

    def __init__(self, cfg: JacobiConfig, scorer: OutputScorer, *, eos: int, pad: int, bos: int,
                 stats, dtype: torch.dtype = torch.float32, step_backend: str = "auto") -> None:
        self.cfg = cfg
        self.runner = KernelRunner(step_backend, stats)
        self.lenpen = cfg.lenpen
        self.scorer = scorer
        self.eos, self.pad, self.bos = eos, pad, bos
        self.stats = stats
        self.dtype = dtype
        self.buckets = BucketStatePool()  # the groups' bucket states of those iterations
        self._ahead: Optional[VerifySearch] = None  # the last native_search's, read by ran_ahead
        self.gate = ParallelGate(cfg.parallel, stats)  # --jacobi-parallel auto: a native run's blocks or single steps
        self._parallel: Optional[bool] = None  # the gate's choice for the last native_verify (None: it had none)

    @classmethod
    def from_config(cls, cfg: JacobiConfig, ctx: StrategyContext) -> "JacobiDecoding":
        return cls(cfg, ctx.scorer, eos=ctx.eos, pad=ctx.pad, bos=ctx.bos, stats=ctx.stats, dtype=ctx.dtype,
                   step_backend=ctx.step_backend)

    # ---- the interface -------------------------------------------------------------------
    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *,
                   longest: Optional[int] = None, shortest: Optional[int] = None) -> StepOutcome:
        s = len(sentences)
        if longest is None:
            longest = int(max_len.max()) if s else 0
        cap = longest + 3
        zeros = torch.zeros_like(sentences)
        state = JacobiState(
            # Own tensors: the fused iteration updates them in place.
            sentences=sentences.clone(),
            tokens=sentences.new_full((s, cap), self.pad),
            token_scores=torch.zeros(s, cap, dtype=self.dtype, device=sentences.device),
            verified=zeros, draft=sentences.new_full((s, 0), self.pad), max_len=max_len.clone(),
            iterations=torch.zeros_like(sentences), width=self._widths(zeros, max_len), feed=sentences.new_zeros(s, 0),
            shortest=int(max_len.min()) if shortest is None and s else (shortest or 0),
        )
        state = self._plan(state, self._first_block(longest))
        return StepOutcome(state=state, parents=None, feed=state.feed)

    def length(self, state: JacobiState) -> int:
        raise FairseqStreamError("Jacobi rows have their own lengths: schedule them with selection 'all'")

    # ---- windows -----------------------------------------------------------------------
    def _widths(self, a: Tensor, max_len: Tensor) -> Tensor:
        """(S,) the window solved from the first unverified position ``a``."""
        remaining = max_len + 1 - a  # positions left, EOS included
        if self.cfg.block is None:  # PJ: everything that is left
            width = remaining
        elif self.cfg.init == "tail":  # a block sliding with the verified prefix
            width = torch.full_like(a, self.cfg.block)
        else:  # PGJ: up to the end of the current aligned block
            width = self.cfg.block - a % self.cfg.block
        if self.cfg.max_parallel_len is not None:  # HGJ: sequential beyond L
            width = torch.where(a >= self.cfg.max_parallel_len, torch.ones_like(width), width)
        return torch.minimum(width, remaining).clamp(min=1)

    def _first_block(self, longest: int) -> int:
        """The widest first window, from host-known numbers (``_widths`` at ``a = 0``)."""
        if self.cfg.max_parallel_len == 0:
            return 1
        width = longest + 1 if self.cfg.block is None else min(self.cfg.block, longest + 1)
        return max(width, 1)

    def _plan(self, state: JacobiState, b: int) -> JacobiState:
        """The next iteration's feed for windows ``state.width`` (at most ``b`` wide, host)."""
        a = state.verified
        # The last verified token (BOS first), then the draft; positions past a row's window
        # are filler, which the causal mask keeps from the rest.
        last = F.pad(state.tokens, (1, 0), value=self.bos).gather(1, a.unsqueeze(1))
        draft = state.draft[:, : b - 1]
        if draft.size(1) < b - 1:
            draft = F.pad(draft, (0, b - 1 - draft.size(1)), value=self.pad)
        feed = torch.cat([last, draft], dim=1)
        if b > 1:
            feed = feed.masked_fill(torch.arange(b, device=feed.device) >= state.width.unsqueeze(1), self.pad)
        return replace(state, feed=feed)

    def with_guesses(self, state: JacobiState, guesses: Tensor, most: int) -> JacobiState:
        """``state`` whose next feed guesses ``guesses`` (S, ≥ most) instead of Jacobi's own,
        in windows of at most ``most + 1`` positions (speculative and lookahead decoding verify
        a :class:`~fairseq_stream.search.proposers.Proposer`'s tokens with this iteration, through
        :class:`~fairseq_stream.search.proposers.ProposeAndVerify`; the verification reads ``state.feed``)."""
        width = state.width.clamp(max=most + 1)  # (S,)
        b = min(state.feed.size(1), most + 1)
        feed = ngram_pool.reference_feed(state.feed[:, :b], guesses, width, pad=self.pad)  # as lookahead's C++ pool
        return replace(state, feed=feed.contiguous(), width=width.contiguous())

    def into_bucket(self, state: JacobiState) -> JacobiState:
        """``state`` whose feed and windows (a proposer's, made after the last iteration) are written into its
        bucket state's own columns, where the next iteration in a static step's region reads them."""
        whole, s, b = state.bucket.state, state.size, state.feed.size(1)  # type: ignore[union-attr]
        feed, width = whole.feed[:s, :b], whole.width[:s]
        if feed.data_ptr() != state.feed.data_ptr() or feed.stride() != state.feed.stride():
            feed.copy_(state.feed)
        if width.data_ptr() != state.width.data_ptr():
            width.copy_(state.width)
        return replace(state, feed=feed, width=width)

    # ---- one step, and the "region" hook (search/region.py: SearchInRegion) -------------------------
    def _tail(self, state: JacobiState) -> Any:
        b = state.feed.size(1)
        return self.scorer.tail(1, lambda: self._context(state, b))  # computed only where a step asks for it

    def _step_after(self, state: JacobiState, scores: Tensor, top: Optional[Tuple[Tensor, ...]]) -> StepOutcome:
        """Predictions for every fed position → verified prefix, new draft, finished sentences."""
        return self.iterate(state, *self.predictions(state, scores, top))

    # ---- the "ahead" hook: one sentence's iterations run ahead natively ------------------------------
    def native_search(self, state: JacobiState, most_calls: int) -> Optional[VerifySearch]:
        """The "ahead" hook: :meth:`native_verify` with Jacobi's own guesses (kept for :meth:`ran_ahead`)."""
        self._ahead = self.native_verify(state, most_calls)
        return self._ahead

    def ran_ahead(self, state: JacobiState, steps: int) -> JacobiState:
        """``state`` after the ``steps`` iterations the native loop did (:meth:`verified_ahead`)."""
        search, self._ahead = self._ahead, None
        return self.verified_ahead(state, search.ran) if search is not None and search.ran is not None else state

    def native_verify(self, state: JacobiState, most_calls: int) -> Optional[VerifySearch]:
        """What a native loop needs to do ``state``'s iterations itself, Jacobi's own guesses in its windows
        (:class:`~fairseq_stream.model.native_loops.VerifySearch`), at most ``most_calls`` calls; or None where it
        cannot give what :meth:`step` gives bit for bit: more than one sentence, PJ (no block), a bucket state, an
        output layer or score edit the loop does not run (:meth:`OutputScorer.native_output`), or a first call
        that may end the sentence. With ``--jacobi-parallel auto`` the gate (``search/parallel_gate.py``) chooses
        the run's side: its blocks, or windows of one position from this one."""
        if state.size != 1 or state.bucket is not None or most_calls < 2 or self.cfg.block is None:
            return None
        output = self.scorer.native_output(1, eos=self.eos, pad=self.pad)
        if output is None or state.token_scores.dtype not in (torch.float32, torch.float64):
            return None
        verified, max_len = state.high, state.shortest  # the one sentence's, known on the host
        if verified + state.feed.size(1) - 1 >= max_len:  # its first call's iteration may end it: a plain step
            return None
        _, config = self._config(state.feed.size(1))
        max_parallel = config["max_parallel"]
        self._parallel = None  # past HGJ's L the run is sequential whatever the gate would say
        if not 0 <= max_parallel <= verified:
            self._parallel = self.gate.parallel()
            if not self._parallel:  # sequential from here: HGJ's L = this position
                max_parallel = verified
        return VerifySearch(state.tokens, state.token_scores, verified, max_len, most_calls, output, self.cfg.block,
                            config["tail"], config["init_pad"], max_parallel, bos=self.bos)

    def verified_ahead(self, state: JacobiState, run: VerifyRun) -> JacobiState:
        """``state`` after the iterations a native loop did (its sentence did not end in them; its tokens and
        scores were written in place)."""
        if not run.accepted:
            return state
        if self._parallel is not None:
            self.gate.observe(self._parallel, run.seconds, run.accepted)
        self.stats.accepted_tokens += sum(run.accepted)
        return replace(state, verified=torch.full_like(state.verified, run.verified),
                       iterations=state.iterations + len(run.accepted),
                       width=torch.full_like(state.width, run.feed.size(1)), feed=run.feed, draft=run.jacobi_draft,
                       low=run.verified, high=run.verified)

    # ---- the iteration inside a static step's region -----------------------------------------
    def _config(self, b: int) -> Tuple[int, Dict[str, Any]]:
        """The widest window of an iteration fed ``b`` positions, and the operator's configuration."""
        widest = b if self.cfg.block is None else max(self.cfg.block, b)  # no window grows past it
        return widest, dict(eos=self.eos, pad=self.pad, bos=self.bos,
                            block=-1 if self.cfg.block is None else self.cfg.block,
                            init_pad=self.cfg.init == "pad" and self.cfg.block is not None,
                            tail=self.cfg.init == "tail",
                            max_parallel=-1 if self.cfg.max_parallel_len is None else self.cfg.max_parallel_len,
                            feed_width=widest)

    def _region_search(self, state: JacobiState) -> RegionSearch:
        """The iteration as a static step's region runs it (:mod:`fairseq_stream.search.region`): over
        a bucket state of as many sentences as the step's row bucket has rows (a sentence is its row), the live ones
        first, the rest inert (:data:`_RESETS`); the next draft and feed are written into the bucket state's own
        columns, the accepted counts and the order into its rows buffer. A group whose row bucket changes (a
        refill, a merge, sentences that end past a rung) is copied into a bucket state of its new size."""
        b = state.feed.size(1)
        widest, config = self._config(b)
        size, bucket = row_bucket(state.size), state.bucket
        if not in_bucket(state, bucket, size) or bucket.state.feed.size(1) < widest:  # type: ignore[union-attr]
            state.bucket = self.buckets.lend(state, size, self._inert(), rows_per_sentence=1,
                                            packet_size=packets.JACOBI_STEP.starts(size)[-1],
                                            columns=dict(feed=widest, draft=max(widest - 1, 1)))
            self.buckets.release(bucket)
            bucket = state.bucket
        whole = bucket.state  # type: ignore[union-attr]
        dtype = whole.token_scores.dtype

        def launch(full: JacobiState, outputs: Sequence[Tensor]) -> Tuple[Tensor, str]:
            score, token = outputs[0][:, 0].view(size, b).to(dtype), outputs[1][:, 0].view(size, b)
            fed = replace(full, feed=full.feed[:, :b].contiguous())
            tensors = [getattr(full, name) for name in fused.FIELDS]
            result, backend = self.runner.launch(
                JACOBI_STEP, tensors, (token, score, fed.feed), config,
                reference=lambda: self._reference_iteration(fed, token, score, widest),
                fits=fused.fits(tensors, score), s=size)
            full.draft[:, : b - 1].copy_(result.draft)
            full.feed[:, :widest].copy_(result.feed)
            bucket.rows[:2].copy_(result.aux)  # type: ignore[union-attr]
            return result.packet, backend

        def tail_inputs() -> Tuple[Tensor, ...]:  # _context over the whole bucket state (an inert row's: never read)
            steps = whole.verified.unsqueeze(1) + counting(whole.verified, b)[0]
            return steps.reshape(-1), whole.max_len.unsqueeze(1).expand(size, b).reshape(-1)

        finished_at = packets.JACOBI_STEP.starts(size)[packets.JACOBI_STEP.index["finished"]]
        return RegionSearch(bucket, launch, resets=_RESETS, finished_at=finished_at,  # type: ignore[arg-type]
                            config=("jacobi", b, widest, dtype) + tuple(sorted(config.items())),
                            fits=lambda rows: rows == size * b, tail_inputs=tail_inputs)

    def _inert(self) -> Dict[str, Any]:
        return dict(_RESETS, sentences=-1, tokens=self.pad, token_scores=0.0, draft=self.pad, feed=self.pad)

    def _searched(self, state: JacobiState) -> StepOutcome:
        """The outcome of an iteration that ran in the region: its packet read (the step's one read). The
        packet counts the inert sentences too — done, one token accepted each, after the live ones."""
        bucket: SentenceBucket = state.bucket  # type: ignore[assignment]
        size, s, b = bucket.size, state.size, state.feed.size(1)
        packet = self.runner.read(JACOBI_STEP, bucket.packet, bucket.backend, s=size)
        inert = size - s
        n_done, longest = packet.scalar("finished") - inert, packet.scalar("longest")
        going_on = s - n_done
        self.stats.accepted_tokens += packet.scalar("accepted") - inert
        full = bucket.state
        whole = replace(state, **dict(sentence_fields(full), draft=full.draft[:, : b - 1]), bucket=None)
        finished = self._finished(whole, packet, range(going_on, s)) if n_done else {}  # copies: the bucket state goes on
        new = whole.split(going_on, going_on, 1)[0]
        new = replace(new, feed=new.feed[:, : packet.scalar("next_width")],
                      low=packet.scalar("shortest") if going_on else 0, high=longest,
                      bucket=bucket if going_on else None)
        if not going_on:  # the group ended: its bucket state goes back to the pool
            self.buckets.release(bucket)
        parents = bucket.rows[1, :going_on].clone() if n_done else None  # the rows buffer is the next step's
        return StepOutcome(state=new, parents=parents, feed=new.feed, finished=finished, accept=bucket.rows[0, :s],
                           index=SentenceIndex.one_per_row(new.sentences), max_length=longest)

    def predictions(self, state: JacobiState, scores: Tensor,
                    top: Optional[Tuple[Tensor, Tensor]] = None) -> "tuple[Tensor, Tensor]":
        """(S, b) the arg-max after each fed position and its log-probability, with the score
        edits (min/max length, unk penalty) at each position's target index (``top``: these for
        every scored row, where the decoder step ran :meth:`output_tail`)."""
        s, b, v = scores.shape
        if top is None:
            # Arg-max with its log-probability: top-1 and the normaliser in one pass (Hoang2018).
            top = self.scorer.top(scores.reshape(s * b, v), 1, self._context(state, b))[:2]
        score, token = top
        return token[:, 0].view(s, b), score[:, 0].view(s, b)

    def _context(self, state: JacobiState, b: int) -> RowContext:
        """Each prediction's row context: its target index, its sentence's maximum length."""
        s = state.verified.size(0)
        pos = state.verified.unsqueeze(1) + counting(state.verified, b)[0]  # (S, b); the offsets a shared view
        # an expanded view's copy: the same values as repeat_interleave at a fraction of its cost (batch 1)
        return RowContext(steps=pos.reshape(-1), max_len=state.max_len.unsqueeze(1).expand(s, b).reshape(-1),
                          may_reach_max=state.high + b - 1 >= state.shortest, min_steps=state.low)

    def iterate(self, state: JacobiState, pred: Tensor, score: Tensor) -> StepOutcome:
        """The iteration after the output layer, from the block's predictions ``pred`` and their
        log-probabilities ``score`` (S, b), by the backend :mod:`fairseq_stream.ops.backends` picks."""
        s, b = pred.shape
        widest, config = self._config(b)
        score = score.to(state.token_scores.dtype)
        tensors = [getattr(state, name) for name in fused.FIELDS]
        ran = self.runner.run(JACOBI_STEP, tensors, (pred, score, state.feed), config,
                              reference=lambda: self._reference_iteration(state, pred, score, widest),
                              fits=fused.fits(tensors, score), s=s)
        return self._read(state, ran.result, ran.packet)

    # ---- the PyTorch reference of the iteration ------------------------------------------
    def _reference_iteration(self, state: JacobiState, pred: Tensor, score: Tensor, feed_width: int) -> IterationResult:
        """The iteration in PyTorch operations, on any device: the contract of
        :mod:`fairseq_stream.ops.jacobi_step` (state in place, not compacted)."""
        s, b = pred.shape
        width, feed = state.width, state.feed
        offsets = torch.arange(b, device=pred.device)
        # Verified: the first prediction, then each one whose inputs all matched.
        run = torch.cumprod((feed[:, 1:] == pred[:, :-1]).long(), dim=1).sum(dim=1) + 1 if b > 1 else torch.ones_like(width)
        accept = torch.minimum(run, width)
        # Stop at the first verified EOS.
        is_eos = (pred == self.eos) & (offsets < accept.unsqueeze(1))
        has_eos = is_eos.any(dim=1)
        accept = torch.where(has_eos, is_eos.long().argmax(dim=1) + 1, accept)
        draft = self._extend(state, pred, score, accept)
        done = has_eos | (state.verified > state.max_len)  # max_len tokens and the forced EOS
        next_feed = self._plan(replace(state, draft=draft), feed_width).feed
        totals = state.token_scores.cumsum(1).gather(1, (state.verified - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        perm = torch.argsort(done.to(torch.uint8), stable=True)  # the packet's order: the finished last
        packet = packets.JACOBI_STEP.pack(dict(
            finished=done.sum(), next_width=state.width.masked_fill(done, 1).max(), longest=state.verified.max(),
            accepted=accept.sum(), shortest=state.verified.masked_fill(done, 1 << 30).min(), done=done[perm],
            sentence=state.sentences[perm], verified=state.verified[perm], iterations=state.iterations[perm],
            total=totals[perm], position=perm))
        return IterationResult(packet, draft, next_feed, torch.stack([accept, perm]), False)

    def _extend(self, state: JacobiState, pred: Tensor, score: Tensor, accept: Tensor) -> Tensor:
        """The verified predictions into the state (in place); returns the next draft."""
        s, b = pred.shape
        offsets = torch.arange(b, device=pred.device)
        kept = offsets < accept.unsqueeze(1)  # (S, b)
        # Verified predictions go to their columns, the rest to the scratch column.
        cols = (state.verified.unsqueeze(1) + offsets).masked_fill(~kept, state.tokens.size(1) - 1)
        state.tokens.scatter_(1, cols, pred)
        state.token_scores.scatter_(1, cols, score.to(state.token_scores.dtype))
        # The unverified predictions, shifted, are the next draft (Jacobi's update); those past
        # a row's window came from filler inputs and are no draft.
        shift = offsets + accept.unsqueeze(1)  # (S, b)
        draft = pred.gather(1, shift.clamp(max=b - 1)).masked_fill(shift >= state.width.unsqueeze(1), self.pad)[:, : b - 1]
        state.verified.add_(accept)
        if self.cfg.init == "pad" and self.cfg.block is not None:
            # A fresh aligned block starts from PAD (the paper's initialisation).
            draft = draft.masked_fill((state.verified % self.cfg.block == 0).unsqueeze(1), self.pad)
        state.iterations.add_(1)
        state.width.copy_(self._widths(state.verified, state.max_len))
        return draft

    # ---- the iteration's one host read ---------------------------------------------------
    def _read(self, state: JacobiState, out: IterationResult, packet: PacketView) -> StepOutcome:
        """From the packet (read once, by the runner): the state is in the packet's order, so the
        finished sentences are its last ones and what goes on is a view."""
        s = state.size
        n_done, b_next, longest = packet.scalar("finished"), packet.scalar("next_width"), packet.scalar("longest")
        self.stats.accepted_tokens += packet.scalar("accepted")
        going_on = s - n_done
        finished: Dict[int, List[Hypothesis]] = {}
        parents = None
        new = replace(state, draft=out.draft, feed=out.feed)
        if n_done:
            finished = self._finished(new, packet, range(going_on, s))
            parents = out.aux[1, :going_on]
            new = new.split(going_on, going_on, 1)[0]
        new = replace(new, feed=new.feed[:, :b_next], low=packet.scalar("shortest") if n_done < s else 0, high=longest)
        return StepOutcome(state=new, parents=parents, feed=new.feed, finished=finished, accept=out.aux[0],
                           index=SentenceIndex.one_per_row(new.sentences), max_length=longest)

    def _finished(self, state: JacobiState, packet: PacketView, positions: range) -> Dict[int, List[Hypothesis]]:
        """Greedy's output of the finished sentences at ``positions`` of ``state`` (packet order).
        Token tensors stay on the device."""
        sentence, verified, iterations, total = (packet[name] for name in ("sentence", "verified", "iterations", "total"))
        out: Dict[int, List[Hypothesis]] = {}
        for i in positions:
            n = int(verified[i])
            out[int(sentence[i])] = [Hypothesis(state.tokens[i, :n].clone(), total[i] / (n ** self.lenpen),
                                                state.token_scores[i, :n].clone())]
            self.stats.autoregressive_steps += n
            self.stats.add_extra("sentence_iterations", iterations[i])
        return out


# ---- registration ---------------------------------------------------------------------------
WHY_NO_BEAM = (
    "Jacobi decoding iterates to the fixed point of greedy's equations y_i = argmax p(y_i | y_<i, x); "
    "a beam re-ranks k prefixes at every step, so there is no single prefix whose tokens could be "
    "guessed and verified in parallel (Santilli2023 Limitations). Use --beam 1"
)

SUMMARIES = {
    "jacobi": "PJ: parallel Jacobi over the whole target, output identical to greedy (Santilli2023 Alg. 1)",
    "gs-jacobi": "PGJ: Jacobi inside blocks of --jacobi-block b, Gauss-Seidel between blocks (Santilli2023 Alg. 2)",
    "hybrid-jacobi": "HGJ: PGJ up to --jacobi-max-parallel-len, then autoregressive (Santilli2023 Alg. 3)",
}
READS = {
    "jacobi": frozenset({"jacobi_init"}),
    "gs-jacobi": frozenset({"jacobi_init", "jacobi_block", "jacobi_parallel"}),
    "hybrid-jacobi": frozenset({"jacobi_init", "jacobi_block", "jacobi_max_parallel_len", "jacobi_parallel"}),
}

for _name, _summary in SUMMARIES.items():
    register_search(_name, summary=_summary, config=JacobiConfig, capabilities=Capabilities(
        streaming=True, default_epsilon=0.0, beam=False, why_no_beam=WHY_NO_BEAM, nbest=False, ngram_blocking=False,
        block_steps=True, selection="all",  # rows verify different numbers of tokens: lengths differ in a batch
        reads=READS[_name], hooks=frozenset({"region", "ahead"})))(JacobiDecoding)
