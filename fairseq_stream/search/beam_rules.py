"""What survives a beam step: pruning rules and finalisation rules, small composable objects.

A beam step (:mod:`fairseq_stream.search.beam`) sorts each sentence's ``W`` best
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

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Protocol, Tuple

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError

# The pruning primitives (the step's view, the rule protocol, the built-in thresholds) live in ops:
# the fused beam-step operator (ops/beam_step.py) reads the built-in rules.
from fairseq_stream.ops.pruning import (
    DEFAULT_REFERENCE, AbsoluteThreshold, BeamCandidates, PruningRule, RelativeLocalThreshold, RelativeThreshold,
    SurprisalScaledThreshold,
)


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

    def split(self, cand: BeamCandidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
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

    def split(self, cand: BeamCandidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
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

    def split(self, cand: BeamCandidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
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

    def split(self, cand: BeamCandidates, k: int, eos: int, n_final: Tensor) -> Tuple[Tensor, Tensor]:
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
