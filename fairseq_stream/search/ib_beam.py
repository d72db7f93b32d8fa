"""``--search ib-beam``: beam search with step-wise multi-word generation (Zhang2020 Algorithm 1).

Every hypothesis predicts ``z = h·c`` words at once (one block step of the decoder, fed the
previous step's ``z`` words). Per hypothesis (lines 10–14): the best ``B`` words of each of the
``z`` positions, combined by outer addition — one position at a time, re-pruned to ``B``
after each, so ``B^z`` is never enumerated (exact, since the sum is monotone in each term) —
give its ``B`` best continuations. A continuation ends (line 17) when any of its words is
EOS (IMDecoder: when every segment has ended, see :mod:`fairseq_stream.search.ib_order`); ended
ones go to the finished set, the others compete for the ``B`` places of the beam (line 24).
Which ended ones (``--ib-finalize``): ``top`` (default, our choice) takes only those that
rank among the sentence's ``B`` best continuations of the step, as fairseq's beam search
does; ``all`` takes every one (lines 17–18 read literally). With ``all`` a sentence's finished
set fills with improbable short endings after a few steps and search stops early: on the demo
corpus beam 4 then scores below greedy (docs/results.md, "IBDecoder").
A sentence is done with ``B`` finished hypotheses (line 7) or at the maximum length; the
finished ones are put back in the original word order (line 28), optionally deduplicated
(``--ib-dedup``, §5.1), and ranked by ``score / length^lenpen``. ``--beam 1`` is greedy.

The step after the output layer is the operator ``ib_step`` of :mod:`fairseq_stream.ops.backends`:
one C++ operator on the CPU (:mod:`fairseq_stream.ops.ib_step`), three Triton kernels on CUDA
(:mod:`fairseq_stream.ops.triton_ib_step`); the PyTorch code here is their reference and the
fallback on any device (device-resident tables, one host read per step), every selection a
stable sort so they all decide ties alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.search import ib_order
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.interface import Hypothesis, StepOutcome, StrategyContext, cat_padded
from fairseq_stream.search.ib_order import IBSpec
from fairseq_stream.ops import ib_step as fused
from fairseq_stream.ops import packets
from fairseq_stream.ops.backends import IB_STEP, KernelRunner
from fairseq_stream.ops.ib_step import IBStepResult
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.model.row_cache import SentenceIndex
from fairseq_stream.search.score_edits import RowContext
from fairseq_stream.search.registry import Capabilities, check_beam_and_nbest, lenpen_of, register_search
from fairseq_stream.search.state import PAD, StateOps, StrategyState, host, per_sentence, rows, transient
from fairseq_stream.search.beam import sorted_top
from fairseq_stream.search.region import BucketStatePool, RegionSearch, SearchInRegion, SentenceBucket


@dataclass(frozen=True)
class IBBeamConfig:
    spec: IBSpec  # h, c and the ablations of the checkpoints (shared by an ensemble)
    beam: int = 1  # B
    nbest: int = 1
    lenpen: float = 1.0
    dedup: bool = False  # --ib-dedup (Zhang2020 §5.1)
    finalize: str = "top"  # --ib-finalize: "top" or "all"

    def __post_init__(self) -> None:
        check_beam_and_nbest(self.beam, self.nbest)
        if self.finalize not in ("top", "all"):
            raise FairseqStreamError(f"--ib-finalize must be 'top' or 'all', got {self.finalize!r}")

    @property
    def rows_per_sentence(self) -> int:
        return self.beam

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "IBBeamConfig":
        return cls(spec=ib_spec_of(models, name), beam=int(gen_cfg.beam), nbest=int(gen_cfg.nbest),
                   lenpen=lenpen_of(gen_cfg), dedup=bool(opts.ib_dedup),
                   finalize=opts.ib_finalize)


def ib_spec_of(models: Sequence[Any], name: str) -> IBSpec:
    """The (common) layout of an ensemble of IBDecoder-family models, or a one-line error.

    That they are IBDecoder-family models at all is checked before, for every strategy, from
    ``Capabilities.models`` (:func:`fairseq_stream.engine.validation.check_combinations`)."""
    specs = {m.decoder.ib for m in models}
    if len(specs) != 1:
        raise FairseqStreamError("an ensemble of IBDecoder-family models must share h, c and the ablations")
    return specs.pop()


@dataclass
class IBState(StrategyState):
    """The beams of ``S`` sentences on the device; final hypotheses wait in the ``fin_*``
    buffers (decoder order, ``2B`` slots and a scratch slot) until the pool is read. The token
    history has a fixed width (that of the ``fin_*`` buffers): a slot's first ``steps`` words, PAD
    after, so a step's shapes follow the group's size only."""

    sentences: Tensor  # (S,)
    scores: Tensor  # (S, B) cumulative log-probability, -inf = empty
    tokens: Tensor = per_sentence(pad=PAD)  # (S, B, L) words of the slots so far (decoder order), PAD after
    token_scores: Tensor = per_sentence(pad=0.0)  # (S, B, L)
    seg_done: Tensor = per_sentence()  # (S, B, G) segments that reached their EOS
    max_len: Tensor = per_sentence()  # (S,)
    n_final: Tensor = per_sentence()  # (S,)
    steps: Tensor = per_sentence()  # (S,) words generated so far (groups merge at equal counts: all alike)
    fin_tokens: Tensor = per_sentence(pad=PAD)  # (S, 2B + 1, L)
    fin_scores: Tensor = per_sentence(pad=0.0)  # (S, 2B + 1, L)
    fin_len: Tensor = per_sentence()  # (S, 2B + 1)
    fin_total: Tensor = per_sentence()  # (S, 2B + 1)
    row_slot: Tensor = rows()  # (R,) flat s·B + j of every decoder row
    t: int = host(max)  # host: ``steps`` (one value in a group)
    shortest: int = host(min)  # host: a lower bound of max_len (the forced-EOS edit waits for it)
    bucket: Optional[SentenceBucket] = transient()  # the bucket state of a step in a static step's region


#: what makes a sentence of a bucket state inert again after it finished (no candidate: done at once, no hypothesis, no
#: row; its history empty, so that the step's bounds hold)
_RESETS: Dict[str, Any] = dict(scores=-math.inf, steps=0, n_final=0)
#: the fields a step makes anew (the operator's new tensors, then ``steps``, which the host advances by z)
_STEPPED = ("scores", "tokens", "token_scores", "seg_done", "n_final", "steps")


class IBCandidates(NamedTuple):
    """One step's continuations of a group: per sentence (S, B·Bc) and per row (R, Bc, ·)."""

    full: Tensor  # (S, B·Bc) cumulative score of every continuation of the sentence's hypotheses
    full_end: Tensor  # (S, B·Bc) the continuation ends the hypothesis
    words: Tensor  # (R, Bc, z) each row's continuations
    word_lp: Tensor  # (R, Bc, z) their words' log-probabilities
    seg_done: Tensor  # (R, Bc, G) segments ended after the continuation
    row_of: Tensor  # (S·B,) decoder row of each slot (-1: none)
    bc: int  # continuations per row


@dataclass
class FinishedIB:
    """Finished sentences of one step, on the device; word order restored when read."""

    sentences: Tensor
    tokens: Tensor
    scores: Tensor
    length: Tensor
    total: Tensor
    n_final: Tensor
    search: "IBBeamSearch"

    def __len__(self) -> int:
        return self.sentences.numel()  # sentences that finished (a shape: no host read)

    @staticmethod
    def merge(items: Sequence["FinishedIB"]) -> "FinishedIB":
        if len(items) == 1:
            return items[0]
        pad = items[0].search.pad
        return FinishedIB(cat_padded([x.sentences for x in items]), cat_padded([x.tokens for x in items], pad),
                          cat_padded([x.scores for x in items]), cat_padded([x.length for x in items]),
                          cat_padded([x.total for x in items]), cat_padded([x.n_final for x in items]), items[0].search)

    def to_hypotheses(self) -> Dict[int, List[Hypothesis]]:
        """One read for the whole pool: the word order is restored on the host (Algorithm 1, line 28)."""
        d, z, cols = self.tokens.shape
        packet = torch.cat([self.sentences.double(), self.n_final.double(), self.length.double().view(-1),
                            self.total.double().view(-1), self.tokens.double().view(-1),
                            self.scores.double().view(-1)]).tolist()
        at = 2 * d
        lengths, totals = packet[at: at + d * z], packet[at + d * z: at + 2 * d * z]
        tokens, scores = packet[at + 2 * d * z: at + 2 * d * z + d * z * cols], packet[at + 2 * d * z + d * z * cols:]
        out: Dict[int, List[Hypothesis]] = {}
        for i in range(d):
            hyps = []
            for j in range(min(int(packet[d + i]), z - 1)):
                length, start = int(lengths[i * z + j]), (i * z + j) * cols
                hyps.append(self.search._hypothesis([int(t) for t in tokens[start: start + length]],
                                                    scores[start: start + length], totals[i * z + j]))
            hyps = sorted(hyps, key=lambda h: h.score, reverse=True)
            out[int(packet[i])] = hyps[: max(self.search.nbest, 1)] if hyps else [self.search._empty()]
        return out


class IBBeamSearch(SearchInRegion, StateOps):

    def __init__(self, spec: IBSpec, scorer: OutputScorer, *, beam: int, nbest: int, lenpen: float,
                 eos: int, pad: int, bos: int, dedup: bool, dtype: torch.dtype, finalize: str = "top",
                 stats: Any = None, step_backend: str = "auto") -> None:
        self.spec, self.scorer = spec, scorer
        self.stats = stats
        self.runner = KernelRunner(step_backend, stats)
        self._device_tables: Dict[str, Tuple[Tensor, List[Tensor]]] = {}
        self._block_zeros: Dict[str, Tensor] = {}  # per device: the (z, z) block mask of M(h, c)
        self.beam = self.rows_per_sentence = beam
        self.nbest, self.lenpen = nbest, lenpen
        self.eos, self.pad, self.bos = eos, pad, bos
        self.dedup, self.dtype, self.finalize = dedup, dtype, finalize
        self.z = spec.z
        self.segments = ib_order.n_segments(spec.h)
        # Segment of each slot of a step: words come in (left, right) pairs per segment (Eq. 9).
        self.slot_segment = torch.tensor([(j % spec.h) // 2 for j in range(self.z)]) if spec.h > 2 else torch.zeros(self.z, dtype=torch.long)
        self.segment_slots = [torch.tensor([j for j in range(self.z) if int(self.slot_segment[j]) == g]) for g in range(self.segments)]
        self.buckets = BucketStatePool()  # the groups' bucket states of those steps

    @classmethod
    def from_config(cls, cfg: IBBeamConfig, ctx: StrategyContext) -> "IBBeamSearch":
        return cls(cfg.spec, ctx.scorer, beam=cfg.beam, nbest=cfg.nbest, lenpen=cfg.lenpen, eos=ctx.eos,
                   pad=ctx.pad, bos=ctx.bos, dedup=cfg.dedup, dtype=ctx.dtype, finalize=cfg.finalize, stats=ctx.stats,
                   step_backend=ctx.step_backend)

    # ---- the interface -------------------------------------------------------------------
    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *,
                   longest: Optional[int] = None, shortest: Optional[int] = None) -> StepOutcome:
        s, b = len(sentences), self.beam
        if longest is None:
            longest = int(max_len.max()) if s else 0
        # A hypothesis ends at the latest in the step that reaches max_len (IBDecoder); an IMDecoder's
        # first segment reaches it up to a step later than its last (slot k: segment (k mod h) // 2).
        width = longest + (self.z + 1 if self.segments == 1 else 2 * self.z)
        dev = sentences.device
        scores = torch.full((s, b), -math.inf, dtype=self.dtype, device=dev)
        scores[:, 0] = 0.0
        state = IBState(
            sentences=sentences, scores=scores,
            tokens=torch.full((s, b, width), self.pad, dtype=torch.long, device=dev),
            token_scores=torch.zeros(s, b, width, dtype=self.dtype, device=dev),
            seg_done=torch.zeros(s, b, self.segments, dtype=torch.bool, device=dev),
            max_len=max_len, n_final=torch.zeros_like(sentences), steps=torch.zeros_like(sentences),
            fin_tokens=torch.full((s, 2 * b + 1, width), self.pad, dtype=torch.long, device=dev),
            fin_scores=torch.zeros(s, 2 * b + 1, width, dtype=self.dtype, device=dev),
            fin_len=torch.zeros(s, 2 * b + 1, dtype=torch.long, device=dev),
            fin_total=torch.full((s, 2 * b + 1), -math.inf, dtype=self.dtype, device=dev),
            row_slot=torch.arange(s, device=dev) * b,
            shortest=int(max_len.min()) if shortest is None and s else (shortest or 0),
        )
        feed = torch.full((s, self.z), self.bos, dtype=torch.long, device=sentences.device)
        return StepOutcome(state=state, parents=None, feed=feed, block_mask=self.block_mask(0, sentences.device))

    def length(self, state: IBState) -> int:
        return state.t

    def concat(self, states: Sequence[IBState]) -> IBState:
        if len({st.t for st in states}) != 1:
            raise FairseqStreamError("ib-beam merges groups of equal length only (min-length selection)")
        return super().concat(states)  # SearchInRegion's: the parts' bucket states go back

    def block_mask(self, fed: int, device: Any):
        """Mask of the next step's ``z`` slots over the ``fed`` cached ones and themselves."""
        if not self.spec.independent_directions:
            # M(h, c): the cache and the whole step are visible (zeros, one tensor a device: a static step copies
            # a block mask it has seen no more); vanilla: causal.
            if self.spec.vanilla_mask:
                return None
            key = str(device)
            if key not in self._block_zeros:
                self._block_zeros[key] = torch.zeros(self.z, self.z, device=device)
            return self._block_zeros[key]
        i = torch.arange(fed, fed + self.z, device=device).unsqueeze(1)
        j = torch.arange(0, fed + self.z, device=device).unsqueeze(0)
        ok = ib_order.allowed(i, j, self.spec.h, self.spec.c, vanilla=self.spec.vanilla_mask,
                              independent=self.spec.independent_directions)
        return torch.zeros(ok.shape, dtype=torch.float32, device=device).masked_fill(~ok, float("-inf"))

    # ---- one step, and the "region" hook (search/region.py: SearchInRegion) -------------------------
    def _tail(self, state: IBState) -> Any:
        return self.scorer.tail(self.beam, lambda: self._context(state, state.row_slot.numel(), self.z))

    def _step_after(self, state: IBState, scores: Tensor, top: Optional[Tuple[Tensor, ...]]) -> StepOutcome:
        vals, toks = self._top(state, scores, top)
        return self.search_step(state, vals, toks)

    # ---- the step inside a static step's region ---------------------------------------------
    def _region_search(self, state: IBState) -> RegionSearch:
        """The step as a static step's region runs it (:mod:`fairseq_stream.search.region`), as a beam's:
        over the group's bucket state of sentences (the rest inert: :data:`_RESETS`), every row of the row bucket (a
        padding row's slot −1), the new state and the next rows written into the bucket state's buffers, the output
        layer's inputs (each row's target slots, its sentence's maximum length) made there from the bucket state. The
        operator does not compact: a step that finishes sentences leaves the host a new group (one copy)."""
        # a new group, a merge, finished sentences (the operator does not compact): a copy into a bucket state
        bucket, next_rows = self.buckets.hold(state, self._inert(), rows_per_sentence=self.beam,
                                             packet_size=lambda n: packets.IB_STEP.starts(n)[-1])
        size = bucket.size
        whole, z, b = bucket.state, self.z, self.beam  # type: ignore[union-attr]
        scratch = bucket.scratch  # type: ignore[union-attr]
        if "feed" not in scratch:  # the next rows' z words and each sentence's end: the operator's, kept
            scratch["feed"] = whole.sentences.new_zeros(size * b, z)
            scratch["done"] = torch.zeros(size, dtype=torch.bool, device=whole.sentences.device)
        slot_segment, _ = self._tables(whole.scores.device)
        config = dict(beam=b, eos=self.eos, pad=self.pad, finalize_top=self.finalize == "top")
        dtype = whole.scores.dtype

        def launch(full: IBState, outputs: Sequence[Tensor]) -> Tuple[Tensor, str]:
            r = outputs[0].size(0) // z
            vals, toks = outputs[0].view(r, z, -1).to(dtype), outputs[1].view(r, z, -1)
            row_slot = bucket.rows[4, :r]  # type: ignore[union-attr]
            stepped = replace(full, row_slot=row_slot)
            tensors = [getattr(full, name) for name in fused.FIELDS]
            out, backend = self.runner.launch(IB_STEP, tensors, (vals, toks, row_slot, slot_segment), config,
                                              reference=lambda: self._reference_step(stepped, vals, toks),
                                              fits=fused.fits(tensors, vals), s=size)
            for name in _STEPPED[:-1]:
                getattr(full, name).copy_(getattr(out, name))
            full.steps.add_(z)
            scratch["feed"].copy_(out.feed)
            scratch["done"].copy_(out.done)
            bucket.rows.copy_(torch.stack([out.parents, out.feed[:, 0], out.slot,  # type: ignore[union-attr]
                                           out.row_slot.clamp(min=0) // b, out.row_slot]))
            return out.packet, backend

        def tail_inputs() -> Tuple[Tensor, ...]:  # _context over every row of the bucket (a padding row's: unread)
            rows = bucket.rows.size(1)  # type: ignore[union-attr]
            sentence = bucket.rows[4].clamp(min=0) // b  # type: ignore[union-attr]
            steps = whole.steps.index_select(0, sentence).unsqueeze(1) + torch.arange(z, device=sentence.device)
            return steps.view(-1), whole.max_len.index_select(0, sentence).unsqueeze(1).expand(rows, z).reshape(-1)

        return RegionSearch(bucket, launch, resets=_RESETS,  # type: ignore[arg-type]
                            finished_at=packets.IB_STEP.starts(size)[packets.IB_STEP.index["finished"]],
                            config=("ib", b, z, self.finalize, dtype), fits=lambda q: q <= bucket.rows.size(1) * z,
                            extra=[scratch["feed"], scratch["done"], slot_segment], tail_inputs=tail_inputs,
                            next_rows=next_rows)

    def _inert(self) -> Dict[str, Any]:
        """Each per-sentence field of an inert sentence (no candidate: the padding contract of ops/ib_step.py)."""
        return dict(_RESETS, sentences=-1, tokens=self.pad, token_scores=0.0, seg_done=False, max_len=0,
                    fin_tokens=self.pad, fin_scores=0.0, fin_len=0, fin_total=-math.inf)

    def _searched(self, state: IBState) -> StepOutcome:
        """The outcome of a step that ran in the region: its packet read (the step's one read). The packet counts
        the inert sentences among the finished ones; the live ones come first in the bucket state."""
        bucket: SentenceBucket = state.bucket  # type: ignore[assignment]
        s, size = state.size, bucket.size
        packet = self.runner.read(IB_STEP, bucket.packet, bucket.backend, s=size)
        n_rows, widest = packet.scalar("rows"), packet.scalar("widest")
        n_done = packet.scalar("finished") - (size - s)
        whole, rows, feed = bucket.state, bucket.rows, bucket.scratch["feed"]
        new = replace(state, **{name: getattr(whole, name)[:s] for name in _STEPPED}, t=state.t + self.z,
                      bucket=bucket)
        parents, next_feed, slot, local, row_slot = (rows[0, :n_rows], feed[:n_rows], rows[2, :n_rows],
                                                     rows[3, :n_rows], rows[4, :n_rows])
        if n_done:  # a new group (the operator does not compact): the bucket state goes back, its rows copied out first
            parents, next_feed, slot, row_slot = parents.clone(), next_feed.clone(), slot.clone(), row_slot.clone()
            local = None  # numbered in the new group
        out = self._outcome(new, bucket.scratch["done"][:s], n_done, widest, parents, next_feed, slot, row_slot,
                            state.t, local)
        if n_done:
            self.buckets.release(bucket)
        return out

    def _context(self, state: IBState, r: int, z: int) -> RowContext:
        """Each scored row's context: the target slot it predicts, its sentence's maximum length."""
        fed = state.t
        slots = fed + torch.arange(z, device=state.tokens.device)
        row_max = state.max_len.index_select(0, state.row_slot // self.beam)
        # Host bounds skip the edits that cannot apply yet: no row is at its maximum length before
        # the group's shortest, and every row has generated at least ``fed`` tokens.
        return RowContext(steps=slots.repeat(r), max_len=row_max.repeat_interleave(z),
                          may_reach_max=fed + z - 1 >= state.shortest, min_steps=fed)

    def _top(self, state: IBState, scores: Tensor, top: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
        """Each row's best ``Bc`` words per slot and their log-probabilities (R, z, Bc), from the
        output layer (one pass for the top-k and the normaliser; ``top``: these for every scored row,
        where the decoder step ran :meth:`output_tail`)."""
        r, z, v = scores.shape
        bc = min(self.beam, v)
        if top is None:
            top = self.scorer.top(scores.reshape(r * z, v), bc, self._context(state, r, z))[:2]
        vals, toks = top
        return vals.view(r, z, bc).to(self.dtype), toks.view(r, z, bc)

    def search_step(self, state: IBState, vals: Tensor, toks: Tensor) -> StepOutcome:
        """The step after the output layer, from each row's slot candidates ``vals``/``toks``
        (R, z, Bc), by the backend :mod:`fairseq_stream.ops.backends` picks (the C++ operator on
        a CPU, the Triton kernels on CUDA), with the same results."""
        t, cols = state.t, state.fin_tokens.size(2)
        if t + self.z > cols:
            raise FairseqStreamError(f"ib-beam: hypothesis longer than its buffer ({t + self.z} > {cols})")
        tensors = [getattr(state, name) for name in fused.FIELDS]
        slot_segment, _ = self._tables(vals.device)
        config = dict(beam=self.beam, eos=self.eos, pad=self.pad, finalize_top=self.finalize == "top")
        ran = self.runner.run(IB_STEP, tensors, (vals, toks, state.row_slot, slot_segment), config,
                              reference=lambda: self._reference_step(state, vals, toks),
                              fits=fused.fits(tensors, vals), s=state.size)
        out, packet = ran.result, ran.packet
        n_rows, n_done, widest = packet.scalar("rows"), packet.scalar("finished"), packet.scalar("widest")
        new = replace(state, scores=out.scores, tokens=out.tokens, token_scores=out.token_scores,
                      seg_done=out.seg_done, n_final=out.n_final, steps=state.steps + self.z, t=t + self.z)
        return self._outcome(new, out.done, n_done, widest, out.parents[:n_rows], out.feed[:n_rows],
                             out.slot[:n_rows], out.row_slot[:n_rows], t)

    def _tables(self, device: torch.device) -> Tuple[Tensor, List[Tensor]]:
        """The segment of each slot and the slots of each segment, on ``device`` (copied once:
        no host→device copy in a step)."""
        key = str(device)
        if key not in self._device_tables:
            self._device_tables[key] = (self.slot_segment.to(device), [s.to(device) for s in self.segment_slots])
        return self._device_tables[key]

    def _reference_step(self, state: IBState, vals: Tensor, toks: Tensor) -> IBStepResult:
        """The step in PyTorch operations, on any device: the contract of :mod:`fairseq_stream.ops.ib_step`
        (the next rows' tensors are S·B long; the first ``rows`` of them count)."""
        s, b = state.scores.shape
        # a padding row (slot −1: a static step's) reads slot 0 and writes the scratch slot s·B
        row_slot = state.row_slot.clamp(min=0)  # (R,)
        into = torch.where(state.row_slot < 0, s * b, state.row_slot)
        words, word_lp, sums = self._continuations(state, vals, toks, row_slot)
        total = state.scores.view(-1).index_select(0, row_slot).unsqueeze(1) + sums  # (R, Bc)
        seg_done = self._segments_done(state, words, row_slot)  # (R, Bc, G)
        ended = seg_done.all(dim=2) & torch.isfinite(total)
        bc = total.size(1)
        # Per sentence: (S, B·Bc) candidates of all its hypotheses.
        full = total.new_full((s * b + 1, bc), -math.inf).index_copy_(0, into, total)[: s * b]
        full_end = torch.zeros(s * b + 1, bc, dtype=torch.bool, device=total.device).index_copy_(0, into, ended)[: s * b]
        full, full_end = full.view(s, b * bc), full_end.view(s, b * bc)
        row_of = torch.full((s * b + 1,), -1, dtype=torch.long, device=total.device)
        row_of[into] = torch.arange(len(row_slot), device=total.device)
        row_of = row_of[: s * b]
        cand = IBCandidates(full, full_end, words, word_lp, seg_done, row_of, bc)
        return self._advance(self._record(state, cand), cand)

    def _continuations(self, state: IBState, vals: Tensor, toks: Tensor, row_slot: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Each row's best ``Bc`` multi-word continuations: words/lps (R, Bc, z), sums (R, Bc)."""
        r, z, bc = vals.shape
        if self.segments > 1:  # slots of segments that ended are padding, for free
            done = state.seg_done.view(-1, self.segments).index_select(0, row_slot)  # (R, G)
            forced = done[:, self._tables(done.device)[0]]  # (R, z)
            vals = vals.masked_fill(forced.unsqueeze(2), -math.inf)
            vals[..., 0] = torch.where(forced, torch.zeros_like(vals[..., 0]), vals[..., 0])
            toks = toks.clone()
            toks[..., 0] = torch.where(forced, torch.full_like(toks[..., 0], self.pad), toks[..., 0])
        acc, words, lps = vals[:, 0], toks[:, 0].unsqueeze(2), vals[:, 0].unsqueeze(2)
        for j in range(1, z):  # outer addition, re-pruned to Bc after each position
            grid = acc.unsqueeze(2) + vals[:, j].unsqueeze(1)  # (R, Bc, Bc)
            acc, idx = sorted_top(grid.view(r, -1), bc)
            prev, new = torch.div(idx, bc, rounding_mode="floor"), idx % bc
            words = torch.cat([words.gather(1, prev.unsqueeze(2).expand(-1, -1, j)), toks[:, j].gather(1, new).unsqueeze(2)], dim=2)
            lps = torch.cat([lps.gather(1, prev.unsqueeze(2).expand(-1, -1, j)), vals[:, j].gather(1, new).unsqueeze(2)], dim=2)
        return words, lps, acc

    def _segments_done(self, state: IBState, words: Tensor, row_slot: Tensor) -> Tensor:
        prior = state.seg_done.view(-1, self.segments).index_select(0, row_slot)  # (R, G)
        is_eos = words == self.eos  # (R, Bc, z)
        if self.segments == 1:
            return prior.unsqueeze(1) | is_eos.any(dim=2, keepdim=True)
        # Slots of each segment as index lists (host-known), not boolean masks (no host read).
        hit = torch.stack([is_eos.index_select(2, slots).any(dim=2) for slots in self._tables(words.device)[1]], dim=2)
        return prior.unsqueeze(1) | hit

    def _record(self, state: IBState, cand: IBCandidates) -> IBState:
        """Finished continuations → the ``fin_*`` buffers (at most B per sentence and step, best first)."""
        full, full_end, words, word_lp, row_of, bc = cand.full, cand.full_end, cand.words, cand.word_lp, cand.row_of, cand.bc
        ended = torch.where(full_end, full, torch.full_like(full, -math.inf))
        if self.finalize == "top":  # only ended continuations among the sentence's B best count
            kth = sorted_top(full, min(self.beam, full.size(1)))[0][:, -1:]
            ended = torch.where(full >= kth, ended, torch.full_like(ended, -math.inf))
        best, idx = sorted_top(ended, min(self.beam, ended.size(1)))  # (S, W)
        s, w = best.shape
        ok = torch.isfinite(best)
        rank = state.n_final.unsqueeze(1) + torch.cumsum(ok.long(), dim=1) - 1
        dest = torch.where(ok, rank, state.fin_len.size(1) - 1)  # the scratch slot takes the rest
        slot, cont = torch.div(idx, bc, rounding_mode="floor"), idx % bc
        rows = row_of.view(s, self.beam).gather(1, slot).clamp(min=0)
        cols = state.fin_tokens.size(2)
        seq, lps = self._extended(state, slot, words[rows.view(-1), cont.view(-1)].view(s, w, self.z),
                                  word_lp[rows.view(-1), cont.view(-1)].view(s, w, self.z))
        state.fin_tokens.scatter_(1, dest.unsqueeze(2).expand(s, w, cols), seq)
        state.fin_scores.scatter_(1, dest.unsqueeze(2).expand(s, w, cols), lps)
        state.fin_len.scatter_(1, dest, (state.steps + self.z).unsqueeze(1).expand(s, w).contiguous())
        state.fin_total.scatter_(1, dest, best.to(state.fin_total.dtype))
        return replace(state, n_final=state.n_final + ok.sum(dim=1))

    def _extended(self, state: IBState, slot: Tensor, words: Tensor, lps: Tensor) -> Tuple[Tensor, Tensor]:
        """(S, W, L) the history of each sentence's slots ``slot`` (S, W) with ``words``/``lps`` (S, W, z) after
        its ``steps`` words: PAD (score 0) after them, as every history is."""
        s, w = slot.shape
        width = state.tokens.size(2)
        at = (state.steps.view(s, 1, 1) + torch.arange(self.z, device=slot.device)).expand(s, w, self.z)
        gather = slot.unsqueeze(2).expand(s, w, width)
        seq = state.tokens.gather(1, gather).scatter_(2, at, words)
        scores = state.token_scores.gather(1, gather).scatter_(2, at, lps.to(state.token_scores.dtype))
        return seq, scores

    def _hypothesis(self, seq: List[int], lps: List[float], total: float) -> Hypothesis:
        order = ib_order.restore_order(seq, self.spec.h, self.spec.c, self.eos, self.pad, self.spec.order)
        words = [seq[k] for k in order]
        if self.dedup:
            order = [order[k] for k in ib_order.dedup_indices(words)]
            words = [seq[k] for k in order]
        kept = [lps[k] for k in order]
        # EOS carries the log-probability of every other slot (EOS, discarded words), so the
        # positional scores still sum to the hypothesis' search score.
        kept.append(total - sum(kept))
        tokens = torch.tensor(words + [self.eos], dtype=torch.long)
        return Hypothesis(tokens, total / (len(tokens) ** self.lenpen), torch.tensor(kept, dtype=torch.float))

    def _advance(self, state: IBState, cand: IBCandidates) -> IBStepResult:
        full, full_end, words, word_lp, seg_done, row_of, bc = cand
        s, b = state.scores.shape
        open_ = torch.where(full_end, torch.full_like(full, -math.inf), full)
        val, idx = sorted_top(open_, min(b, open_.size(1)))
        val = F.pad(val, (0, b - val.size(1)), value=-math.inf)
        idx = F.pad(idx, (0, b - idx.size(1)))
        ok = torch.isfinite(val)
        done = (state.n_final >= self.beam) | ~ok.any(dim=1)
        parent_slot = torch.div(idx, bc, rounding_mode="floor")
        cont = idx % bc
        rows = row_of.view(s, b).gather(1, parent_slot).clamp(min=0)  # (S, B) rows of the parents
        w = words[rows.view(-1), cont.view(-1)].view(s, b, self.z)
        lp = word_lp[rows.view(-1), cont.view(-1)].view(s, b, self.z)
        tokens, token_scores = self._extended(state, parent_slot, w, lp)
        live = ok & ~done.unsqueeze(1)  # (S, B)
        per_sentence = live.sum(dim=1)
        live_flat = torch.argsort((~live).view(-1).to(torch.uint8), stable=True)  # (S·B,) the live ones first
        # Slots numbered without the finished sentences; −1 past the live rows (no row: a padding row's slot).
        renumber = torch.cumsum((~done).long(), dim=0) - 1
        is_row = torch.arange(s * b, device=live.device) < per_sentence.sum()
        return IBStepResult(
            packet=packets.IB_STEP.pack(dict(rows=per_sentence.sum(), finished=done.sum(), widest=per_sentence.max())),
            scores=val.masked_fill(~ok, -math.inf), tokens=tokens, token_scores=token_scores,
            seg_done=seg_done[rows.view(-1), cont.view(-1)].view(s, b, self.segments),
            n_final=state.n_final, done=done,
            parents=rows.view(-1).index_select(0, live_flat),
            feed=w.view(s * b, self.z).index_select(0, live_flat),
            slot=(torch.cumsum(live.long(), dim=1) - 1).view(-1).index_select(0, live_flat),
            row_slot=torch.where(is_row, renumber.index_select(0, live_flat // b) * b + live_flat % b, -1))

    def _outcome(self, new: IBState, done: Tensor, n_done: int, widest: int, parents: Tensor, feed: Tensor,
                 slot: Tensor, row_slot: Tensor, t: int, local: Optional[Tensor] = None) -> StepOutcome:
        """The finished sentences leave the state (their ``fin_*`` buffers wait for the pool's
        read); the next rows' index (``row_slot`` numbered without them; ``local``: their sentences, where
        already made)."""
        s, b = new.scores.shape
        finished: Any = {}
        if n_done:
            by_done = torch.argsort(done.to(torch.uint8), stable=True)
            goes_on, ended = by_done[: s - n_done], by_done[s - n_done:]
            pick = lambda x: x.index_select(0, ended)  # noqa: E731
            finished = FinishedIB(pick(new.sentences), pick(new.fin_tokens), pick(new.fin_scores),
                                  pick(new.fin_len), pick(new.fin_total), pick(new.n_final), self)
            new = new.select(goes_on)
        new.row_slot = row_slot
        index = SentenceIndex(new.sentences, row_slot // b if local is None else local, slot, widest)
        return StepOutcome(state=new, parents=parents, feed=feed, finished=finished,
                           block_mask=self.block_mask(t + self.z, new.scores.device), index=index)

    def _empty(self) -> Hypothesis:
        return Hypothesis(torch.tensor([self.eos]), -math.inf, torch.tensor([-math.inf]))



register_search("ib-beam", summary="multi-word beam search for IBDecoder/IMDecoder/+SA checkpoints (Zhang2020 Alg. 1)",
                config=IBBeamConfig, capabilities=Capabilities(
                    streaming=True, ngram_blocking=False, models="ib", block_steps=True,
                    reads=frozenset({"ib_dedup", "ib_finalize"}), hooks=frozenset({"region"})))(IBBeamSearch)
