"""The pruning primitives of the variable-width beams: a step's view, the rule protocol, the built-in thresholds.

The rules' registry, ``--prune-rules`` parsing and the finalisation rules are in
:mod:`fairseq_stream.search.beam_rules` (which re-exports these under their old names); the
primitives are here, at the bottom layer, because the fused beam-step operator
(:mod:`fairseq_stream.ops.beam_step`) recognises the built-in thresholds and runs them in one
operator, and ops imports nothing above it. See beam_rules for what each rule means.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, NamedTuple, Optional, Protocol

import torch
from torch import Tensor

#: What δ is measured from. Yang2020 measures from the best candidate or finished hypothesis by
#: log-probability ("final"); on weak models that loses up to 1.6 BLEU, so the default compares
#: length-normalised scores ("normalized"). See docs/reproduction.md for the paper's rule.
#: (Here, not in search/defaults.py: the fused beam step reads it.)
DEFAULT_REFERENCE = "normalized"
REFERENCES = ("final", "active", "normalized")


class BeamCandidates(NamedTuple):
    """The best ``W`` candidates of every sentence after a step, sorted, all (S, W)."""

    val: Tensor  # cumulative log-probability
    parent: Tensor  # slot of the candidate it extends (or that it is, when carried)
    tok: Tensor  # its last token (EOS when carried)
    tok_lp: Tensor  # that token's log-probability (0 when carried)
    carried: Tensor  # an ended candidate that waited on the beam: not an expansion of this step


@dataclass
class StepView:
    """One step of a group as the rules see it: the candidates and the beams' state."""

    cand: BeamCandidates
    ended: Tensor  # (S, W) candidates that end in EOS (this step's or carried): they need no decoder row
    lengths: Tensor  # (S, W) tokens of each candidate, its last included (an ended one's EOS)
    best_final: Tensor  # (S,) best cumulative log-probability of a final hypothesis
    best_final_norm: Tensor  # (S,) best length-normalised score of a final hypothesis
    lenpen: float
    length_scale: Optional[Tensor] = None  # (S, W) lengths ** lenpen, when the step has them already
    rung_delta: Optional[Tensor] = None  # (S, 1) each sentence's own δ under per-sentence rungs (inf = none)
    _references: Dict[str, Tensor] = field(default_factory=dict)

    def scaled_lengths(self, like: Tensor) -> Tensor:
        """(S, W) each candidate's ``|c| ** lenpen`` in ``like``'s dtype: what a length-normalised score is scaled by."""
        return self.lengths.to(like).pow(self.lenpen) if self.length_scale is None else self.length_scale.to(like)

    def reference(self, kind: str, keep: Tensor) -> Tensor:
        """The best score ap and rp measure from, (S, 1) or (S, W); computed once per step.

        * ``active`` — the best candidate on the beam (Freitag2017 Eqs. 1–2);
        * ``final`` — the best of those and of the finished hypotheses, by cumulative
          log-probability (Yang2020 App. A.3): a short finished hypothesis scores high, so it
          prunes every longer candidate and outputs come out short;
        * ``normalized`` — the best candidate on the beam, or the best finished hypothesis's
          length-normalised score ``s/|y|^lenpen`` scaled to each candidate's length: a finished
          hypothesis prunes a candidate only when it is better per token.
        """
        if kind not in self._references:
            val = self.cand.val
            best = torch.where(keep, val, torch.full_like(val, -math.inf)).max(dim=1, keepdim=True).values
            if kind == "final":  # Yang2020 App. A.3
                best = torch.maximum(best, self.best_final.to(val).unsqueeze(1))
            elif kind == "normalized":
                best = torch.maximum(best, self.best_final_norm.to(val).unsqueeze(1) * self.scaled_lengths(val))
            self._references[kind] = best
        return self._references[kind]


class PruningRule(Protocol):
    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        """The (S, W) candidates that stay, a subset of ``keep``."""
        ...


ENDED = ("prune", "keep")


@dataclass(frozen=True)
class AbsoluteThreshold:
    """ap (Freitag2017 Eq. 2): drop ``score ≤ best − δ`` (log-probability).

    ``ended="keep"`` spares candidates that end in EOS: they cost no decoder row, and pruning
    them sends the search on to the maximum length where the fixed beam would have waited for
    them to reach the top (Yang2020 prunes them: ``"prune"``).
    """

    delta: float
    reference: str = DEFAULT_REFERENCE
    ended: str = "prune"
    final_per_token: float = 0.0  # β of _within: a finished hypothesis prunes only what is β a token worse

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        return _within(view, keep, self.delta, self.reference, self.ended, self.final_per_token)


def _within(view: StepView, keep: Tensor, margin: "float | Tensor", reference: str, ended: str,
            final_per_token: float = 0.0) -> Tensor:
    """``keep`` & score > the reference − ``margin``; candidates ending in EOS are spared under ``ended="keep"``.

    ``final_per_token`` β (reference ``normalized`` only): against the best finished hypothesis (its normalised
    score scaled to the candidate's length) the margin is ``max(margin, β · |c|)``, β log-probability a token of
    the candidate, however long it is; against the best candidate on the beam (the same length) it stays
    ``margin``. A raw margin δ is δ / |c| a token: at β = 0 a long candidate a little worse a token than a short
    finished one is pruned, and pruned outputs come out short. (β · |c|^lenpen instead over-protected at
    --lenpen 2: issue 81.)"""
    val = view.cand.val
    if reference == "normalized" and final_per_token:
        final_margin = torch.clamp(final_per_token * view.lengths.to(val), min=margin)
        ok = (val > view.reference("active", keep) - margin) & \
            (val > view.best_final_norm.to(val).unsqueeze(1) * view.scaled_lengths(val) - final_margin)
    else:
        ok = val > view.reference(reference, keep) - margin
    return keep & (ok | view.ended) if ended == "keep" else keep & ok


@dataclass(frozen=True)
class RungThreshold:
    """ap (Freitag2017 Eq. 2) with each sentence's own δ, ``view.rung_delta`` (S, 1): the per-sentence
    rungs of ``--prune-auto`` (its probes share a step with the run's sentences, each at its rung);
    a sentence whose δ is ``inf`` is not pruned by it (the fixed beam)."""

    reference: str = DEFAULT_REFERENCE
    ended: str = "prune"

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        delta = view.rung_delta
        if delta is None:
            return keep
        delta = delta.to(view.cand.val.dtype)
        pruned = _within(view, keep, delta, self.reference, self.ended)
        return torch.where(torch.isinf(delta), keep, pruned)


@dataclass(frozen=True)
class SurprisalScaledThreshold:
    """ap with a per-sentence δ: ``max(floor, α · ū)``, where ū = −score/|c| is the mean
    per-token surprisal (nats) of the sentence's best candidate on the beam.

    One δ prunes at a different place for every model: the gap between the best candidate and
    the eventual output grows with how unsure the model is, so a δ that is safe for a strong
    model (ū ≈ 0.3) cuts the output's prefix off on a weak one (ū ≈ 1.5), which loses BLEU and
    leaves short outputs (issue 28's measurements). Scaling δ by ū widens the beam exactly
    where the model is unsure; ``floor`` keeps Yang2020's δ where it is sure. Per sentence and
    step, from that sentence's own candidates only: var-stream ≡ var-batch still holds.
    ``final_per_token`` is β of :func:`_within`, as for a fixed δ (no fused kernel has this pair:
    ``beam_step.encode_rules`` leaves it to the reference step).
    """

    alpha: float
    floor: float
    reference: str = DEFAULT_REFERENCE
    ended: str = "prune"
    final_per_token: float = 0.0  # β of _within

    def margins(self, view: StepView, keep: Tensor) -> Tensor:
        """(S, 1) each sentence's δ."""
        val = view.cand.val
        best, slot = torch.where(keep, val, torch.full_like(val, -math.inf)).max(dim=1, keepdim=True)  # (S, 1)
        length = view.lengths.gather(1, slot).to(val).clamp(min=1)
        surprisal = torch.where(torch.isfinite(best), -best / length, torch.zeros_like(best))
        return torch.clamp(self.alpha * surprisal, min=self.floor)

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        return _within(view, keep, self.margins(view, keep), self.reference, self.ended, self.final_per_token)


@dataclass(frozen=True)
class RelativeThreshold:
    """rp (Freitag2017 Eq. 1): drop ``p ≤ rp · p_best``, in log space (``ended`` as for ap)."""

    rp: float
    reference: str = DEFAULT_REFERENCE
    ended: str = "prune"

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        return _within(view, keep, -math.log(self.rp), self.reference, self.ended)  # rp is δ = −ln rp


@dataclass(frozen=True)
class RelativeLocalThreshold:
    """rpl (Freitag2017 Eq. 3): drop an expansion whose last word's probability is ``≤ rpl ·``
    the best last-word probability of the step's expansions."""

    rpl: float

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        cand = view.cand
        # A carried ended candidate expanded nothing (its stored tok_lp 0 would read as p = 1).
        fresh = keep & ~cand.carried
        local = torch.where(fresh, cand.tok_lp, torch.full_like(cand.tok_lp, -math.inf)).max(dim=1, keepdim=True).values
        return keep & (cand.carried | (cand.tok_lp > local + math.log(self.rpl)))
