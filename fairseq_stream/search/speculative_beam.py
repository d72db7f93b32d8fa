"""Exact speculative beam search: a draft proposes, one block step scores, the beam's own steps are replayed.

Speculative decoding (Leviathan et al. 2023, Algorithm 1; Xia et al. 2023 §3.2) is exact for greedy:
the target verifies a draft's ``γ`` tokens in one block step and keeps the longest prefix equal to its
own arg-max. A beam keeps ``k`` prefixes and re-ranks them at every step, so published speculative
beams approximate it (Xia et al.'s top-β verification). This strategy keeps the beam exact:

1. for every live hypothesis ``h`` (a decoder row) the draft proposes its greedy continuation
   ``d_1..d_γ``; the row is fed the block ``[y_h, d_1, .., d_γ]`` (``y_h`` its newest token), so one
   decoder call scores ``γ + 1`` positions of every row — position ``j`` is what a one-token step of
   the prefix ``y_h d_1..d_j`` would score, bit for bit (row-invariant products, the attention
   kernel's query at its position: tests/equivalence/test_bit_exact_float32_int8.py);
2. the beam's own step (:class:`~fairseq_stream.search.beam.BeamSearch`, FIXED-OURS' finalisation
   or fairseq's with ``--beam-finalize fairseq``) is **replayed** on position 0 of every row, then on
   position ``j`` of the row each kept hypothesis descends from, as long as every hypothesis the beam
   keeps extends its row's path by the draft's next token (``d_j``): each replayed step sees exactly
   the scores a plain step would have seen, so it keeps, ranks and finishes what the plain beam does;
3. the replay stops at the first step where a kept hypothesis leaves its path (or after ``γ + 1``
   steps); each new row keeps the first ``J`` block positions of the row it descends from (``J`` the
   steps replayed) and its newest token starts the next block.

At least one beam step per call, so the output — tokens and scores — **is** the beam's whatever the
draft proposes. A group of sentences replays together (``J`` is one per call: one decoder call
scores all its rows in one block, so a per-sentence ``J`` would not change its cost).

The draft keeps its own caches, one row per hypothesis, rolled back to the replayed prefix after a
call and selected with the beam's rows; ``γ − 1`` of its proposals were fed, so it catches up with
one token (or two when all ``γ`` were on the path). Statistics: beam steps per verification, rows
scored, the draft's share of the time (``verify_*`` extras). The study of how far a verification can
advance on which models (one path per hypothesis against a draft tree) is
``scripts/experiments/speculative_beam_study.py``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.model_step import ModelStep
from fairseq_stream.model.row_cache import SentenceIndex
from fairseq_stream.search.beam import BeamConfig, BeamSearch, Pruning, option_value
from fairseq_stream.search.interface import Hypothesis, StepOutcome, StepScores, StrategyContext
from fairseq_stream.search.score_edits import RowContext
from fairseq_stream.search.registry import Capabilities, lenpen_of, register_search
from fairseq_stream.search.speculative import DraftCaches, DraftProposer, SpeculativeConfig, parse_draft_tokens
from fairseq_stream.search.state import StateOps, StrategyState, part
from fairseq_stream.search.streaming_beam import BEAM_OPTIONS


#: ``--draft-tokens`` not given: at k = 5 and batch 1 on a CPU, γ = 1 took 1.20× fixed-ours' time on the demo model,
#: γ = 2 1.70×, γ = 3 1.77× (every hypothesis is a row, so each proposed token costs every row a position;
#: docs/results.md, "Exact speculative beam search")
DEFAULT_DRAFT_TOKENS = "1"


@dataclass(frozen=True)
class SpeculativeBeamConfig(BeamConfig):
    """A fixed beam (FIXED-OURS' options) with a draft: ``--draft-path``, ``--draft-tokens`` γ, ``--draft-quantize``."""

    draft_path: str = ""
    draft_tokens: int = int(DEFAULT_DRAFT_TOKENS)
    draft_quantize: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.draft_path:
            raise FairseqStreamError("--search speculative-beam needs --draft-path DRAFT.pt, a small model with the "
                                     "same dictionaries (scripts/train_draft.sh makes one)")
        self.draft  # building it runs the draft's own checks (the file, γ in range, the quantisation)

    @property
    def draft(self) -> SpeculativeConfig:
        return SpeculativeConfig(draft_path=self.draft_path, draft_tokens=self.draft_tokens, lenpen=self.lenpen,
                                 draft_quantize=self.draft_quantize)

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "SpeculativeBeamConfig":
        gamma = parse_draft_tokens(getattr(opts, "draft_tokens", None), DEFAULT_DRAFT_TOKENS)
        if gamma is None:
            raise FairseqStreamError(f"--search {name} takes an integer --draft-tokens (the tokens the draft proposes "
                                     "per hypothesis); 'auto' tunes γ for greedy acceptance only")
        return cls(beam=int(gen_cfg.beam), nbest=int(gen_cfg.nbest), final_count=int(opts.beam_final_count),
                   lenpen=lenpen_of(gen_cfg), finalize=option_value(opts, "beam_finalize"), pruning=Pruning(),
                   draft_path=opts.draft_path or "", draft_tokens=gamma,
                   draft_quantize=str(getattr(opts, "draft_quantize", "auto")))


@dataclass
class RowTokens:
    """A part of a state (:func:`~fairseq_stream.search.state.part`): one row of tokens per decoder row."""

    tokens: Tensor  # (R, γ)

    def select(self, idx: Tensor) -> "RowTokens":
        return RowTokens(self.tokens.index_select(0, idx))

    def split(self, sentences: int, rows: int, rows_per_sentence: int) -> Tuple["RowTokens", "RowTokens"]:
        return RowTokens(self.tokens[:rows]), RowTokens(self.tokens[rows:])

    @classmethod
    def concat(cls, parts: Sequence["RowTokens"], *, pad: int, rows_per_sentence: int) -> "RowTokens":
        return cls(torch.cat([p.tokens for p in parts]))


@dataclass
class SpeculativeBeamState(StrategyState):
    """The beams, the draft's caches (a row per live hypothesis) and its proposals, in the beams' row order."""

    beam: Any = part()  # BeamState
    draft: DraftCaches = part()
    proposals: RowTokens = part()  # (R, γ) d_1..d_γ of each row, fed after its newest token

    @property
    def sentences(self) -> Tensor:
        return self.beam.sentences


class SpeculativeBeamSearch(StateOps):
    """The strategy object the scheduler drives (see :mod:`fairseq_stream.search.interface`)."""

    def __init__(self, cfg: SpeculativeBeamConfig, beam: BeamSearch, proposer: DraftProposer, *, pad: int,
                 stats: Any) -> None:
        self.beam = beam
        self.proposer = proposer  # the draft, its encoder slots and its greedy calls (search/speculative.py)
        self.gamma = cfg.draft_tokens
        self.pad = pad
        self.rows_per_sentence = cfg.beam
        self.stats = stats
        self._left_step: Optional[float] = None

    @classmethod
    def from_config(cls, cfg: SpeculativeBeamConfig, ctx: StrategyContext) -> "SpeculativeBeamSearch":
        if ctx.load_models is None or ctx.task is None:
            raise FairseqStreamError("--search speculative-beam needs the engine's model loader (integration/build.py)")
        draft = ModelStep(ctx.load_models(cfg.draft_path, quantize=cfg.draft_quantize), step_mode=ctx.step_mode)
        draft.require_block_steps("a speculative draft (--draft-path)")
        beam = BeamSearch.from_config(cfg, ctx)
        proposer = DraftProposer(cfg.draft, draft, pad=ctx.pad, bos=ctx.bos, stats=ctx.stats)
        return cls(cfg, beam, proposer, pad=ctx.pad, stats=ctx.stats)

    # ---- hooks ------------------------------------------------------------------------------
    def admit(self, src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int, *, pad: int, eos: int,
              left_pad: bool) -> None:
        """The scheduler's refill: the draft encodes the admitted sentences into the same slots."""
        self.proposer.admit(src_tokens, src_lengths, free, size, pad=pad, eos=eos, left_pad=left_pad)

    # ---- the interface ----------------------------------------------------------------------
    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *,
                   longest: Optional[int] = None, shortest: Optional[int] = None) -> StepOutcome:
        out = self.beam.init_state(sentences, max_len, src_lengths, longest=longest, shortest=shortest)
        draft = self.proposer.draft
        start = time.perf_counter()
        proposals, dec = self.proposer.greedy(draft.initial_state(self.proposer.memory, sentences, self.proposer.bos),
                                              out.feed[:, 0], self.gamma)
        self._count_proposals(start)
        state = SpeculativeBeamState(beam=out.state, draft=DraftCaches(draft, dec), proposals=RowTokens(proposals))
        self._left_step = time.perf_counter()
        return replace(out, state=state, feed=torch.cat([out.feed, proposals], 1))

    def length(self, state: SpeculativeBeamState) -> int:
        return self.beam.length(state.beam)

    # ---- the "region" hook: the output layer of every scored position inside a static step's region --------------
    def output_tail(self, state: SpeculativeBeamState) -> Any:
        """The fused output layer (top-k, normaliser, score edits) of every row's ``γ + 1`` positions, run in the
        static step's region; the replay's beam steps then run after it on its candidates (each needs the one
        before: not in the region)."""
        return self.beam.scorer.tail(self.beam.row_width(state.beam), lambda: self._context(state.beam))

    def share_pools(self, pool: Any) -> None:
        """No buffers of its own to keep across runs (the beam's steps run outside the region)."""

    def _context(self, beam: Any) -> RowContext:
        """Each scored position's row context: position ``j`` of a row is the beam's step ``t + j`` of its sentence."""
        b = self.gamma + 1
        row_s = beam.row_slot // self.beam.k
        steps = beam.steps.index_select(0, row_s)
        pos = steps.unsqueeze(1) + torch.arange(b, device=steps.device)
        max_len = beam.max_len.index_select(0, row_s).unsqueeze(1).expand(-1, b)
        return RowContext(steps=pos.reshape(-1), max_len=max_len.reshape(-1),
                          may_reach_max=beam.t + b - 1 >= beam.min_max_len, min_steps=beam.t_min)

    def step(self, state: SpeculativeBeamState, scores: "Tensor | StepScores") -> StepOutcome:
        """The model's scores of every row's block ``(R, γ + 1, ·)`` → the beam's steps replayed on them, as long as
        each kept hypothesis lies on its row's path; the rows that go on, what each keeps of its block, the next
        blocks."""
        entered = time.perf_counter()
        if self._left_step is not None:
            self.stats.add_extra("verify_seconds", entered - self._left_step)
        given = StepScores.of(scores)
        scores, top = given.scores, given.top  # top: every (row, position)'s candidates, where the region ran them
        gamma, beam_state = self.gamma, state.beam
        proposals = state.proposals.tokens
        blocks, b = scores.size(0), scores.size(1)
        roots: Optional[Tensor] = None  # the block row of each row of the replay (None: the block's own rows)
        finished: Dict[int, List[Hypothesis]] = {}
        replayed = 0
        while True:
            if top is None:
                at = scores[:, replayed: replayed + 1] if roots is None else \
                    scores[:, replayed].index_select(0, roots).unsqueeze(1)
                out = self.beam.step(beam_state, at)  # the beam's own step (its one host read)
            else:
                rows = torch.arange(blocks, device=scores.device) if roots is None else roots
                at = rows * b + replayed
                out = self.beam.search_step(beam_state, top[0].index_select(0, at).to(beam_state.scores.dtype),
                                            top[1].index_select(0, at))
            finished.update(out.finished)
            parents = out.parents
            if parents is None:  # greedy with nobody finished: the rows go on in place
                parents = torch.arange(out.state.size, device=scores.device)
            roots = parents if roots is None else roots.index_select(0, parents)
            replayed += 1
            if not out.state.size or replayed > gamma:
                break
            on_path = out.feed[:, 0] == proposals.index_select(0, roots)[:, replayed - 1]
            if not bool(on_path.all()):
                break
            beam_state = out.state
        self.stats.add_extra("verify_steps")
        self.stats.add_extra("verify_rows", blocks)
        self.stats.add_extra("block_positions", b)
        self.stats.add_extra("beam_steps_replayed", replayed)
        self.stats.add_extra(f"accepted_{replayed}")
        accept = torch.full((blocks,), replayed, dtype=torch.long, device=scores.device)
        max_length = state.beam.t + replayed  # the rows' tokens fed, once each keeps ``replayed`` of its block
        new = out.state
        if not new.size:
            self._left_step = time.perf_counter()
            return replace(out, state=replace(state, beam=new), parents=None, finished=finished, accept=accept,
                           max_length=max_length)
        feed, drafted = self._propose(state, roots, out.feed[:, 0], out.index, replayed)
        self.stats.add_extra("speculative_step_seconds", time.perf_counter() - entered)
        self._left_step = time.perf_counter()
        return StepOutcome(state=replace(drafted, beam=new), parents=roots, feed=feed, finished=finished, accept=accept,
                           index=out.index, max_length=max_length, row_counts=out.row_counts)

    def _count_proposals(self, start: float) -> None:
        """The draft's time since ``start`` and its γ, for the closing statistics (as speculative counts them)."""
        self.proposer.count_draft(start)
        self.stats.add_extra("draft_tokens_proposed", self.gamma)
        self.stats.add_extra("draft_proposals")

    def _propose(self, state: SpeculativeBeamState, roots: Tensor, newest: Tensor, index: Optional[SentenceIndex],
                 replayed: int) -> Tuple[Tensor, SpeculativeBeamState]:
        """The draft's caches rolled back to the replayed prefix and taken by the new rows (``roots``: the old row of
        each), fed what it has not seen (``newest``, after ``d_γ`` when every proposal was on the path), then its
        next ``γ`` proposals; the next blocks ``[newest, d_1..d_γ]``."""
        gamma, draft = self.gamma, self.proposer.draft
        start = time.perf_counter()
        dec = state.draft.state
        kept = min(replayed - 1, gamma - 1)  # of the γ − 1 proposals the draft was fed
        if gamma > 1 and kept < gamma - 1:
            keep = torch.full((dec.rows,), kept, dtype=torch.long, device=newest.device)
            dec = draft.accept(dec, keep, gamma - 1, dec.max_length - (gamma - 1) + kept)
        own = None if index is None else SentenceIndex(index.sentences, index.local, index.slot, index.width)
        caches = DraftCaches(draft, dec).select(roots, own)
        feed = newest.unsqueeze(1)
        if replayed == gamma + 1:  # d_γ was never fed
            feed = torch.cat([state.proposals.tokens.index_select(0, roots)[:, gamma - 1:], feed], 1)
        proposals, dec = self.proposer.greedy(caches.state, feed, gamma)
        self._count_proposals(start)
        drafted = replace(state, draft=DraftCaches(draft, dec), proposals=RowTokens(proposals))
        return torch.cat([newest.unsqueeze(1), proposals], 1), drafted


register_search(
    "speculative-beam",
    summary="a draft (--draft-path) proposes --draft-tokens γ tokens per hypothesis, one block step scores them, the "
            "beam's steps are replayed on them; output identical to fixed-ours (and to fairseq's beam with "
            "--beam-finalize fairseq)",
    config=SpeculativeBeamConfig,
    capabilities=Capabilities(streaming=True, default_epsilon=0.0, ngram_blocking=False, block_steps=True,
                              reads=BEAM_OPTIONS | frozenset({"draft_path", "draft_tokens", "draft_quantize"}),
                              hooks=frozenset({"admit", "region"})),
)(SpeculativeBeamSearch)
