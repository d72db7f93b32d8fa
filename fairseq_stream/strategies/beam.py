"""Fixed- and variable-width beam search (paper 000 §2–3 and App. A.1; paper 001 §3).

One strategy covers FIXED-OURS / FIXED-STREAM (fixed width), VAR-BATCH / VAR-STREAM /
VAR-STR-FIFO (variable width: the pruning heuristics ``H`` of Freitag & Al-Onaizan) and a
fairseq-compatible fixed beam. The scheduler decides which sentences share a step; this
module decides, per sentence, what survives a step.

Per sentence, a step (Algorithm 1, lines 14–17) is:

1. every live candidate is expanded by its ``c`` best next tokens (``c = M``, the
   *max candidates per node* ``mc``, when that heuristic is on; else ``k``, or ``2k`` for the
   fairseq rule); candidates that already ended stay on the beam with an unchanged score
   (a "no-op expansion", App. A.1);
2. the best ``k`` of these are sorted by cumulative log-probability;
3. **finalisation** — rule ``ours`` (App. A.1): the ended candidates *at the top* of the
   beam are final, one after another; an ended candidate lower down stays on the beam and
   becomes final only if it reaches the top later (it may also fall off). Rule ``fairseq``:
   every ended candidate among the top ``k`` of ``2k`` is final at once, and the beam is the
   best ``k`` unfinished ones (fairseq's ``SequenceGenerator``);
4. the beam shrinks by one per final hypothesis, then the heuristics prune it (paper 001
   §3, with paper 000 App. A.3's detail that the best score may be a final one):
   absolute threshold ``ap`` (δ): drop ``score ≤ best − δ``; relative threshold ``rp``: drop
   ``p ≤ rp · p_best``; relative local threshold ``rpl``: drop when the last word's
   probability ``≤ rpl ·`` the best last-word probability of the step;
5. a sentence ends with ``Z`` final hypotheses (``--beam-final-count``, as the reference
   code's ``find_top_z``; default ``k``; ``k`` for the fairseq rule) or an empty beam; its
   n-best list is the best ``nbest`` of them by ``score / length^lenpen`` (length counts EOS).
   Z = 1 is the strictest reading of App. A.1 (the first hypothesis to reach the top ends the
   sentence); it favours short outputs (−1.0 BLEU at k = 50 on the demo model, README Results),
   while Z = k matches fairseq's BLEU at the same speed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.interface import Hypothesis, StepOutcome
from fairseq_stream.ops.fused_output import OutputScorer
from fairseq_stream.processors import RowContext


@dataclass(frozen=True)
class Pruning:
    """The heuristics ``H`` (``None`` = off). Names follow paper 001; δ = ``abs_threshold``."""

    abs_threshold: Optional[float] = None  # ap / δ, in log-probability
    rel_threshold: Optional[float] = None  # rp in (0, 1], on probabilities
    rel_local_threshold: Optional[float] = None  # rpl in (0, 1], on the last word's probability
    max_cands_per_node: Optional[int] = None  # mc / M

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.abs_threshold, self.rel_threshold,
                                             self.rel_local_threshold, self.max_cands_per_node))


@dataclass(frozen=True)
class BeamConfig:
    beam: int
    nbest: int = 1
    final_count: int = 0  # Z: final hypotheses that end a sentence (0 = beam; the reference code's find_top_z)
    lenpen: float = 1.0
    finalize: str = "ours"  # "ours" (paper 000 App. A.1) or "fairseq"
    pruning: Pruning = Pruning()

    def validate(self) -> None:
        if self.beam < 1:
            raise FairseqStreamError(f"--beam must be >= 1, got {self.beam}")
        if not 1 <= self.nbest <= self.beam:
            raise FairseqStreamError(f"--nbest must be between 1 and --beam ({self.beam}), got {self.nbest}")
        if self.final_count and not self.nbest <= self.final_count <= self.beam:
            raise FairseqStreamError(
                f"--beam-final-count must be between --nbest ({self.nbest}) and --beam ({self.beam}), got {self.final_count}"
            )
        if self.finalize not in ("ours", "fairseq"):
            raise FairseqStreamError(f"--beam-finalize must be 'ours' or 'fairseq', got {self.finalize!r}")


@dataclass
class BeamState:
    """The beams of a group of ``S`` sentences, ``k`` slots each.

    Empty slots have score ``-inf``. ``tokens``/``token_scores`` are right-aligned: sentence
    ``s`` uses the last ``steps[s]`` columns. ``ended`` slots hold candidates that produced
    EOS ``ended_len`` tokens in and wait on the beam (rule ``ours``).
    """

    sentences: Tensor  # (S,) pool indices
    scores: Tensor  # (S, k) cumulative log-probability
    ended: Tensor  # (S, k) bool
    ended_len: Tensor  # (S, k) generated tokens of an ended candidate, EOS included
    tokens: Tensor  # (S, k, T) generated tokens (pad-filled on the left and after EOS)
    token_scores: Tensor  # (S, k, T)
    steps: Tensor  # (S,) tokens generated so far
    max_len: Tensor  # (S,)
    n_final: Tensor  # (S,) final hypotheses so far
    best_final: Tensor  # (S,) best cumulative log-probability of a final hypothesis
    src_lengths: Tensor  # (S,)

    @property
    def live(self) -> Tensor:
        """(S, k) slots that need a decoder row."""
        return torch.isfinite(self.scores) & ~self.ended

    def select(self, idx: Tensor) -> "BeamState":
        """Sentences ``idx`` (local indices) of the group."""
        return BeamState(*(getattr(self, f).index_select(0, idx) for f in _FIELDS))


_FIELDS = ("sentences", "scores", "ended", "ended_len", "tokens", "token_scores", "steps",
           "max_len", "n_final", "best_final", "src_lengths")


class BeamSearch:
    """The strategy object the scheduler drives (see :mod:`fairseq_stream.interface`)."""

    uniform_length = True

    def __init__(self, cfg: BeamConfig, scorer: OutputScorer, *, eos: int, pad: int,
                 bos: int, needs_history: bool = False, dtype: torch.dtype = torch.float32) -> None:
        cfg.validate()
        self.cfg = cfg
        self.dtype = dtype
        self._final: Dict[int, List[Hypothesis]] = {}  # final hypotheses of unfinished sentences
        self.scorer = scorer
        self.eos, self.pad, self.bos = eos, pad, bos
        self.needs_history = needs_history
        self.k = cfg.beam
        per_row = self.k * (2 if cfg.finalize == "fairseq" else 1)
        mc = cfg.pruning.max_cands_per_node
        self.per_row = min(per_row, mc) if mc else per_row
        self.final_width = 2 * self.k if cfg.finalize == "fairseq" else self.k
        self.done_at = self.k if cfg.finalize == "fairseq" else (cfg.final_count or cfg.beam)

    # ---- the interface -------------------------------------------------------------------
    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor) -> StepOutcome:
        s, k = len(sentences), self.k
        scores = torch.full((s, k), -math.inf, dtype=self.dtype, device=sentences.device)
        scores[:, 0] = 0.0
        state = BeamState(
            sentences=sentences,
            scores=scores,
            ended=torch.zeros(s, k, dtype=torch.bool, device=sentences.device),
            ended_len=torch.zeros(s, k, dtype=torch.long, device=sentences.device),
            tokens=sentences.new_zeros(s, k, 0),
            token_scores=scores.new_zeros(s, k, 0),
            steps=torch.zeros_like(sentences),
            max_len=max_len,
            n_final=torch.zeros_like(sentences),
            best_final=torch.full((s,), -math.inf, dtype=self.dtype, device=sentences.device),
            src_lengths=src_lengths,
        )
        feed = torch.full((s, 1), self.bos, dtype=torch.long, device=sentences.device)
        return StepOutcome(state=state, parents=None, feed=feed)

    def sentences(self, state: BeamState) -> int:
        return len(state.sentences)

    def rows(self, state: BeamState) -> int:
        return int(state.live.sum())

    def length(self, state: BeamState) -> int:
        return int(state.steps.max()) + 1 if len(state.steps) else 0

    def concat(self, states: Sequence[BeamState]) -> BeamState:
        if len(states) == 1:
            return states[0]
        width = max(st.tokens.size(2) for st in states)
        padded = [
            replace(
                st,
                tokens=F.pad(st.tokens, (width - st.tokens.size(2), 0), value=self.pad),
                token_scores=F.pad(st.token_scores, (width - st.tokens.size(2), 0)),
            )
            for st in states
        ]
        return BeamState(*(torch.cat([getattr(st, f) for st in padded]) for f in _FIELDS))

    def step(self, state: BeamState, scores: Tensor) -> StepOutcome:
        """One step of every sentence of the group from the rows' next-token scores ``(R, 1, V)``."""
        live = state.live
        row_slot = live.view(-1).nonzero().squeeze(1)  # (R,) flat s * k + j of each row
        c = min(self.per_row, scores.size(-1))
        top_lp, top_tok, _ = self.scorer.top(scores[:, -1], c, self._row_context(state, row_slot))
        val, parent, tok, tok_lp = self._candidates(state, top_lp, top_tok, row_slot)
        finals, keep = self._finalize(state, val, tok)
        state = self._record_finals(state, val, parent, tok_lp, finals)
        keep = self._prune(state, val, tok_lp, keep)
        return self._advance(state, val, parent, tok, tok_lp, keep, row_slot)

    # ---- the steps -------------------------------------------------------------------------
    def _row_context(self, state: BeamState, row_slot: Tensor) -> RowContext:
        row_s = row_slot // self.k
        history = None
        if self.needs_history:
            t = state.tokens.size(2)
            flat = state.tokens.view(-1, t).index_select(0, row_slot)
            steps = int(state.steps.max()) if len(state.steps) else 0
            bos = flat.new_full((flat.size(0), 1), self.bos)
            # Rows of one group share their step count under min-length selection; FIFO groups
            # can mix them, so cut each row's history to its own length.
            history = torch.cat([bos, flat[:, t - steps:]], dim=1)
            row_steps = state.steps.index_select(0, row_s)
            if bool((row_steps != steps).any()):
                history = [torch.cat([bos[i], flat[i, t - int(n):]]) for i, n in enumerate(row_steps)]
                history = _RaggedHistory(history)
        return RowContext(state.steps.index_select(0, row_s), state.max_len.index_select(0, row_s), history)

    def _candidates(self, state: BeamState, top_lp: Tensor, top_tok: Tensor, row_slot: Tensor) -> Tuple[Tensor, ...]:
        """Best ``final_width`` candidates per sentence, sorted: (score, parent slot, token, token lp).

        ``top_lp``/``top_tok`` (R, c): each row's best ``c`` next tokens (per-row top-k first).
        """
        s, k = state.scores.shape
        c = top_lp.size(1)
        lprobs = top_lp
        cand = lprobs.new_full((s * k, c), -math.inf)
        cand[row_slot] = state.scores.view(-1).index_select(0, row_slot).unsqueeze(1).to(lprobs) + top_lp
        toks = top_tok.new_full((s * k, c), self.pad)
        toks[row_slot] = top_tok
        lps = lprobs.new_zeros(s * k, c)
        lps[row_slot] = top_lp
        # (S, k·c + k): expansions of every slot, then the ended candidates carried over.
        carry = torch.where(state.ended, state.scores, torch.full_like(state.scores, -math.inf)).to(lprobs)
        pool = torch.cat([cand.view(s, k * c), carry], dim=1)
        width = min(self.final_width, pool.size(1))
        val, idx = pool.topk(width, dim=1)
        is_carry = idx >= k * c
        flat = idx.clamp(max=k * c - 1)
        parent = torch.where(is_carry, idx - k * c, flat // c)
        tok = torch.where(is_carry, torch.full_like(idx, self.eos), toks.view(s, k * c).gather(1, flat))
        tok_lp = torch.where(is_carry, torch.zeros_like(val), lps.view(s, k * c).gather(1, flat))
        return val, parent, tok, tok_lp

    def _finalize(self, state: BeamState, val: Tensor, tok: Tensor) -> Tuple[Tensor, Tensor]:
        """(which candidates become final, which may stay on the beam), both (S, W)."""
        valid = torch.isfinite(val)
        is_eos = valid & (tok == self.eos)
        if self.cfg.finalize == "fairseq":
            finals = is_eos.clone()
            finals[:, self.k:] = False
            keep = valid & ~is_eos
        else:
            finals = torch.cumprod(is_eos.long(), dim=1).bool()  # the ended run at the top
            keep = valid & ~finals
        return finals, keep

    def _record_finals(self, state: BeamState, val: Tensor, parent: Tensor, tok_lp: Tensor,
                       finals: Tensor) -> BeamState:
        """Turn final candidates into fairseq hypothesis dicts (kept until the sentence ends)."""
        n_final = state.n_final.clone()
        best_final = state.best_final.clone()
        for s, w in finals.nonzero().tolist():
            if n_final[s] >= self.done_at:
                continue
            n_final[s] += 1
            best_final[s] = max(float(best_final[s]), float(val[s, w]))
            self._final.setdefault(int(state.sentences[s]), []).append(
                self._hypothesis(state, s, int(parent[s, w]), bool(state.ended[s, parent[s, w]]),
                                 float(val[s, w]), float(tok_lp[s, w]))
            )
        return replace(state, n_final=n_final, best_final=best_final)

    def _hypothesis(self, state: BeamState, s: int, slot: int, carried: bool, score: float, eos_lp: float) -> Hypothesis:
        steps = int(state.steps[s])
        t = state.tokens.size(2)
        toks = state.tokens[s, slot, t - steps:]
        lps = state.token_scores[s, slot, t - steps:]
        if carried:
            length = int(state.ended_len[s, slot])
            toks, lps = toks[:length], lps[:length]
        else:
            toks = torch.cat([toks, toks.new_tensor([self.eos])])
            lps = torch.cat([lps, lps.new_tensor([eos_lp])])
        norm = score / (len(toks) ** self.cfg.lenpen)
        return {"tokens": toks, "score": norm, "positional_scores": lps, "attention": None, "alignment": None}

    def _prune(self, state: BeamState, val: Tensor, tok_lp: Tensor, keep: Tensor) -> Tensor:
        """Beam shrink by the final count, then the heuristics ``H``; returns the kept mask."""
        width = (self.k - state.n_final).clamp(min=0) if self.cfg.finalize == "ours" else torch.full_like(state.n_final, self.k)
        rank = torch.cumsum(keep.long(), dim=1)
        keep = keep & (rank <= width.unsqueeze(1))
        p = self.cfg.pruning
        if not p.active:
            return keep
        masked = torch.where(keep, val, torch.full_like(val, -math.inf))
        best = torch.maximum(masked.max(dim=1).values, state.best_final.to(val))  # App. A.3
        if p.abs_threshold is not None:
            keep = keep & (val > (best - p.abs_threshold).unsqueeze(1))
        if p.rel_threshold is not None:
            keep = keep & (val > (best + math.log(p.rel_threshold)).unsqueeze(1))
        if p.rel_local_threshold is not None:
            local = torch.where(keep, tok_lp, torch.full_like(tok_lp, -math.inf)).max(dim=1).values
            keep = keep & (tok_lp > (local + math.log(p.rel_local_threshold)).unsqueeze(1))
        return keep

    def _advance(self, state: BeamState, val: Tensor, parent: Tensor, tok: Tensor, tok_lp: Tensor,
                 keep: Tensor, row_slot: Tensor) -> StepOutcome:
        s, k = state.scores.shape
        done = (state.n_final >= self.done_at) | ~keep.any(dim=1)
        # Compact the kept candidates into k slots, best first.
        order = torch.argsort((~keep).long(), dim=1, stable=True)[:, :k]  # (S, k) positions in W
        slot_ok = keep.gather(1, order)
        new_parent = parent.gather(1, order)
        new_tok = tok.gather(1, order)
        new_lp = tok_lp.gather(1, order)
        scores = torch.where(slot_ok, val.gather(1, order), torch.full_like(new_lp, -math.inf))
        was_ended = state.ended.gather(1, new_parent)
        ended = slot_ok & (was_ended | (new_tok == self.eos))
        ended_len = torch.where(was_ended, state.ended_len.gather(1, new_parent),
                                torch.where(ended, state.steps.unsqueeze(1) + 1, torch.zeros_like(new_parent)))
        t = state.tokens.size(2)
        gather = new_parent.unsqueeze(2).expand(s, k, t)
        appended = torch.where(was_ended, torch.full_like(new_tok, self.pad), new_tok)
        tokens = torch.cat([state.tokens.gather(1, gather), appended.unsqueeze(2)], dim=2)
        token_scores = torch.cat([state.token_scores.gather(1, gather),
                                  torch.where(was_ended, torch.zeros_like(new_lp), new_lp).unsqueeze(2)], dim=2)
        new = replace(state, scores=scores, ended=ended, ended_len=ended_len, tokens=tokens,
                      token_scores=token_scores, steps=state.steps + 1)
        # Decoder rows: one per live slot of a sentence that goes on, parent rows in old order.
        row_of = torch.full((s * k,), -1, dtype=torch.long, device=row_slot.device)
        row_of[row_slot] = torch.arange(len(row_slot), device=row_slot.device)
        goes_on = ~done
        live = (slot_ok & ~ended) & goes_on.unsqueeze(1)
        flat_parent = (torch.arange(s, device=row_slot.device).unsqueeze(1) * k + new_parent)[live]
        parents = row_of.index_select(0, flat_parent)
        feed = new_tok[live].unsqueeze(1)
        finished: Dict[int, List[Hypothesis]] = {}
        for i in done.nonzero().squeeze(1).tolist():
            sid = int(state.sentences[i])
            hyps = self._final.pop(sid, [])
            finished[sid] = sorted(hyps, key=lambda h: h["score"], reverse=True)[: self.cfg.nbest if self.cfg.finalize == "ours" else None]
        if bool(done.any()):
            new = new.select(goes_on.nonzero().squeeze(1))
        return StepOutcome(state=new, parents=parents, feed=feed, finished=finished)


class _RaggedHistory(list):
    """Histories of different lengths (rows of a FIFO group); ``tolist`` like a tensor."""

    def tolist(self) -> List[List[int]]:
        return [h.tolist() for h in self]
