"""What survives a beam step: pruning rules and finalisation rules, small composable objects.

A beam step (:mod:`fairseq_stream.strategies.beam`) sorts each sentence's ``W`` best
candidates, asks its **finalisation rule** which become final hypotheses and which may stay on
the beam, shrinks the beam, then passes the keep mask through its **pruning rules** in order.

* Pruning rules (Freitag2017 §3; Yang2020 App. A.3) are registered by name, as the logits
  processors are composed: ``ap`` (δ, Eq. 2), ``rp`` (Eq. 1), ``rpl`` (Eq. 3), and ``aps`` (ap with δ scaled per
  sentence by the model's surprisal, ours). The flags
  ``--prune-abs-threshold`` / ``--prune-rel-threshold`` / ``--prune-rel-local-threshold`` build
  these three; ``--prune-rules NAME[:ARG],...`` adds any registered rule, a user's included
  (``user_dir_examples/prune_rule`` registers one from a ``--user-dir``).
* Finalisation rules are ``ours`` (Yang2020 App. A.1), ``fairseq`` (fairseq's
  ``SequenceGenerator``) and ``shrink`` (Freitag2017's baseline: an EOS among the beam's
  candidates ends that hypothesis at once and the beam shrinks by one), chosen with
  ``--beam-finalize``.

A rule sees one :class:`StepView` of the group and returns a new ``(S, W)`` keep mask; it must
not read the device (no ``.item()``): the step's one host read comes after every rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol, Tuple

import torch
from torch import Tensor

from fairseq_stream.core.defaults import DEFAULT_REFERENCE
from fairseq_stream.errors import FairseqStreamError

REFERENCES = ("final", "active", "normalized")


class Candidates(NamedTuple):
    """The best ``W`` candidates of every sentence after a step, sorted, all (S, W)."""

    val: Tensor  # cumulative log-probability
    parent: Tensor  # slot of the candidate it extends (or that it is, when carried)
    tok: Tensor  # its last token (EOS when carried)
    tok_lp: Tensor  # that token's log-probability (0 when carried)
    carried: Tensor  # an ended candidate that waited on the beam: not an expansion of this step


@dataclass
class StepView:
    """One step of a group as the rules see it: the candidates and the beams' state."""

    cand: Candidates
    ended: Tensor  # (S, W) candidates that end in EOS (this step's or carried): they need no decoder row
    lengths: Tensor  # (S, W) tokens of each candidate, its last included (an ended one's EOS)
    best_final: Tensor  # (S,) best cumulative log-probability of a final hypothesis
    best_final_norm: Tensor  # (S,) best length-normalised score of a final hypothesis
    lenpen: float
    length_scale: Optional[Tensor] = None  # (S, W) lengths ** lenpen, when the step has them already
    _references: Dict[str, Tensor] = field(default_factory=dict)

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
                scale = self.lengths.to(val).pow(self.lenpen) if self.length_scale is None else self.length_scale.to(val)
                best = torch.maximum(best, self.best_final_norm.to(val).unsqueeze(1) * scale)
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

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        return _within(view, keep, self.delta, self.reference, self.ended)


def _within(view: StepView, keep: Tensor, margin: "float | Tensor", reference: str, ended: str) -> Tensor:
    """``keep`` & score > the reference − ``margin``; candidates ending in EOS are spared under ``ended="keep"``."""
    ok = view.cand.val > view.reference(reference, keep) - margin
    return keep & (ok | view.ended) if ended == "keep" else keep & ok


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
    """

    alpha: float
    floor: float
    reference: str = DEFAULT_REFERENCE
    ended: str = "prune"

    def margins(self, view: StepView, keep: Tensor) -> Tensor:
        """(S, 1) each sentence's δ."""
        val = view.cand.val
        best, slot = torch.where(keep, val, torch.full_like(val, -math.inf)).max(dim=1, keepdim=True)  # (S, 1)
        length = view.lengths.gather(1, slot).to(val).clamp(min=1)
        surprisal = torch.where(torch.isfinite(best), -best / length, torch.zeros_like(best))
        return torch.clamp(self.alpha * surprisal, min=self.floor)

    def prune(self, view: StepView, keep: Tensor) -> Tensor:
        return _within(view, keep, self.margins(view, keep), self.reference, self.ended)


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


class RuleDefaults(NamedTuple):
    """What a rule built from ``--prune-rules`` inherits from the other pruning options."""

    reference: str = DEFAULT_REFERENCE  # --prune-reference
    ended: str = "prune"  # --prune-ended


#: name → factory(argument after ':' or None, RuleDefaults) of a pruning rule
_PRUNING_RULES: Dict[str, Callable[[Optional[str], RuleDefaults], PruningRule]] = {}


def register_pruning_rule(name: str) -> Callable[[Callable[..., PruningRule]], Callable[..., PruningRule]]:
    """Decorator: ``factory(arg, defaults)`` builds the rule ``--prune-rules name[:arg]`` asks for
    (``defaults``: :class:`RuleDefaults`, the reference and ended handling of the other options)."""

    def wrap(factory: Callable[..., PruningRule]) -> Callable[..., PruningRule]:
        if name in _PRUNING_RULES:
            raise ValueError(f"pruning rule {name!r} is already registered")
        _PRUNING_RULES[name] = factory
        return factory

    return wrap


def pruning_rule_names() -> List[str]:
    return sorted(_PRUNING_RULES)


def _number(name: str, arg: Optional[str]) -> float:
    try:
        return float(arg)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FairseqStreamError(f"--prune-rules {name}:X needs a number X, got {arg!r}") from None


register_pruning_rule("ap")(lambda arg, d: AbsoluteThreshold(_number("ap", arg), d.reference, d.ended))
register_pruning_rule("rp")(lambda arg, d: RelativeThreshold(_number("rp", arg), d.reference, d.ended))
register_pruning_rule("rpl")(lambda arg, d: RelativeLocalThreshold(_number("rpl", arg)))
register_pruning_rule("aps")(lambda arg, d: SurprisalScaledThreshold(_number("aps", arg), 0.0, d.reference, d.ended))


def parse_pruning_rules(spec: Optional[str], defaults: RuleDefaults = RuleDefaults()) -> Tuple[PruningRule, ...]:
    """``--prune-rules "name[:arg],..."`` → the rules, in order; unknown names are one-line errors."""
    rules: List[PruningRule] = []
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        name, _, arg = item.partition(":")
        if name not in _PRUNING_RULES:
            raise FairseqStreamError(
                f"unknown --prune-rules {name!r}; registered rules: {', '.join(pruning_rule_names())} "
                "(a --user-dir may register more)"
            )
        rules.append(_PRUNING_RULES[name](arg or None, defaults))
    return tuple(rules)


# ---- finalisation --------------------------------------------------------------------------
class FinalizationRule(Protocol):
    name: str

    def expansions(self, k: int) -> int:
        """Expansions per live candidate (before M caps them)."""
        ...

    def width(self, k: int) -> int:
        """Candidates ``W`` kept per sentence after a step."""
        ...

    def ends_at(self, k: int, final_count: int) -> int:
        """Final hypotheses that end a sentence (``Z``)."""
        ...

    def split(self, cand: Candidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
        """(which candidates become final, which may stay on the beam), both (S, W);
        ``n_final`` (S,): each sentence's final hypotheses before this step."""
        ...

    def beam_width(self, n_final: Tensor, k: int) -> Tensor:
        """(S,) the beam's width after this step's finals."""
        ...


@dataclass(frozen=True)
class FinalizeOurs:
    """Yang2020 App. A.1: the ended candidates *at the top* of the beam are final, one after
    another; one lower down waits on the beam and is final only if it reaches the top. The
    beam shrinks by one per final hypothesis; Z final ones end the sentence (find_top_z)."""

    name: str = "ours"
    cut_nbest: bool = True  # the n-best list is the best ``nbest`` of the Z

    def expansions(self, k: int) -> int:
        return k

    def width(self, k: int) -> int:
        return k

    def ends_at(self, k: int, final_count: int) -> int:
        return final_count or k

    def split(self, cand: Candidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
        valid = torch.isfinite(cand.val)
        finals = torch.cumprod((valid & (cand.tok == eos)).long(), dim=1).bool()  # the ended run at the top
        return finals, valid & ~finals

    def beam_width(self, n_final: Tensor, k: int) -> Tensor:
        return (k - n_final).clamp(min=0)


@dataclass(frozen=True)
class FinalizeFairseq:
    """fairseq's ``SequenceGenerator``: ``2k`` candidates, every ended one among the top ``k``
    is final at once, the beam is the best ``k`` unfinished ones; ``k`` finals end it."""

    name: str = "fairseq"
    cut_nbest: bool = False

    def expansions(self, k: int) -> int:
        return 2 * k

    def width(self, k: int) -> int:
        return 2 * k

    def ends_at(self, k: int, final_count: int) -> int:
        return k

    def split(self, cand: Candidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
        valid = torch.isfinite(cand.val)
        is_eos = valid & (cand.tok == eos)
        finals = is_eos.clone()
        finals[:, k:] = False
        return finals, valid & ~is_eos

    def beam_width(self, n_final: Tensor, k: int) -> Tensor:
        return torch.full_like(n_final, k)


@dataclass(frozen=True)
class FinalizeShrink:
    """Freitag2017 §2 (their "original beam search", the baseline of their Tables 1–2): the
    beam holds ``k − finals`` candidates; every EOS among that step's best ``k − finals``
    candidates is final at once and the beam shrinks by one for each; the search stops when the
    beam is empty (``k`` finals) and returns the best by normalised score.

    It differs from ``ours`` in that an ended candidate below the top is final at once instead
    of waiting on the beam, and from ``fairseq`` in that the beam shrinks (``k`` candidates, not
    ``2k``, so finals crowd unfinished ones out, and the fan-out falls as hypotheses end)."""

    name: str = "shrink"
    cut_nbest: bool = True

    def expansions(self, k: int) -> int:
        return k

    def width(self, k: int) -> int:
        return k

    def ends_at(self, k: int, final_count: int) -> int:
        return k

    def split(self, cand: Candidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
        valid = torch.isfinite(cand.val)
        is_eos = valid & (cand.tok == eos)
        # (S, W): only the beam's current width, k minus the finals so far, may end this step
        within = torch.arange(cand.val.size(1), device=cand.val.device).unsqueeze(0) < (k - n_final).unsqueeze(1)
        # The unfinished ones stay; the beam width (k − finals after this step) then keeps the
        # same candidates as the top k − finals before it minus this step's finals.
        return is_eos & within, valid & ~is_eos

    def beam_width(self, n_final: Tensor, k: int) -> Tensor:
        return (k - n_final).clamp(min=0)


FINALIZATION_RULES: Dict[str, Any] = {"ours": FinalizeOurs(), "fairseq": FinalizeFairseq(), "shrink": FinalizeShrink()}
#: the fused operators' code of each rule (ops/csrc/beam_step.cpp, ops/triton_beam_step.py)
FINALIZATION_CODES: Dict[str, int] = {"ours": 0, "fairseq": 1, "shrink": 2}
