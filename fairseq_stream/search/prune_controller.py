"""The pruning controller of ``--prune-auto``: δ and M steered by the search error measured as the run goes.

The heuristics are Freitag2017's (Freitag & Al-Onaizan 2017, §3: ap, mc) as Yang2020 uses them
(§4.1: δ, M). No single (δ, M) suits every model (docs/results.md, the frontier), and a setting's
search error can be measured without references: the loss of the best hypothesis's
length-normalised model score against the fixed beam's (Freitag2017's comparison, its
reference-free half). So the run measures it on its own input, all along:

* a **probe** is a sentence the run also decodes, when the stream admits it and before the stream
  decodes it, with the fixed beam and with the next faster rung of the ladder (the *trial*); the
  stream's own hypothesis, its output, is the current rung's. So each probe gives two outcomes: the
  trial's at once (a move onto a faster rung steers the very refill the probe came in) and the
  current rung's when the stream finishes it;
* probes are chosen per refill, **stratified by source length** (the stratum with the fewest probes
  so far first, :func:`stratum`), never a blank or one-token source (nothing to measure there),
  within a **budget** of decoder work: the probes' work (expansions, and a fixed cost per decoder
  step) stays under a share of the work of the sentences admitted so far,
  :data:`~fairseq_stream.search.defaults.PRUNE_AUTO_BUDGET`, that shrinks while the setting stays put
  (a long, steady input pays less and less); the run's first refill may take a few on credit
  (the evidence is worth most before the stream has decoded anything): :meth:`PruneController.credit`,
  a few sentences' work, so fewer at wide beams, where the fixed beam's copy costs most;
* the controller **relaxes** (one rung safer) as soon as the current rung's recent probes lose
  more than the tolerance (relative to the fixed beam's mean |score|), and **tightens** (one rung
  faster) only when the trial rung's recent probes are within half the tolerance (hysteresis), and not onto a rung that failed in the last
  :data:`~fairseq_stream.search.defaults.PRUNE_AUTO_HOLD` probes.
* an **unsure model** is not pruned fast: when the run's first outputs
  (:data:`~fairseq_stream.search.defaults.PRUNE_AUTO_UNSURE_OUTPUTS`, free: the run decodes them anyway)
  average a normalised score below :data:`~fairseq_stream.search.defaults.PRUNE_AUTO_UNSURE`, the
  controller moves to the safest pruned rung and stays, probing no more (:meth:`PruneController.observe_output`):
  there pruning changes the outputs' length, which loses BLEU, more than it loses score, which the probes see.

It reads model scores and counts of expansions, never a clock: for a given input (and batch
size) its choices, and so the output, are deterministic. Pure logic, no model here:
:mod:`fairseq_stream.integration.prune_auto` decodes the probes and applies the setting.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from fairseq_stream.search.defaults import (
    PRUNE_AUTO_BUDGET, PRUNE_AUTO_CREDIT, PRUNE_AUTO_HOLD, PRUNE_AUTO_LADDER, PRUNE_AUTO_MIN_RELAX,
    PRUNE_AUTO_MIN_TIGHTEN, PRUNE_AUTO_START, PRUNE_AUTO_START_ROWS, PRUNE_AUTO_TOLERANCE, PRUNE_AUTO_UNSURE,
    PRUNE_AUTO_UNSURE_OUTPUTS, PRUNE_AUTO_WINDOW,
)


@dataclass(frozen=True)
class Setting:
    """One rung of the ladder: δ (``inf`` = off) and M (``None`` = no limit)."""

    delta: float
    max_cands: Optional[int]

    @property
    def off(self) -> bool:
        return math.isinf(self.delta) and self.max_cands is None

    def label(self) -> str:
        if self.off:
            return "off (the fixed beam's width)"
        return f"δ {self.delta:g}, M {self.max_cands if self.max_cands is not None else '∞'}"


OFF = Setting(math.inf, None)


def ladder(beam: int, rungs: Sequence[Tuple[float, int]] = PRUNE_AUTO_LADDER) -> List[Setting]:
    """The rungs for ``--beam beam``, fastest first, then off; an M ≥ k limits nothing, so rungs equal at this k
    are kept once."""
    out: List[Setting] = []
    seen = set()
    for delta, m in rungs:
        if (float(delta), min(int(m), beam)) not in seen:
            seen.add((float(delta), min(int(m), beam)))
            out.append(Setting(float(delta), int(m)))
    return out + [OFF]


def start(beam: int) -> Tuple[float, int]:
    """The rung a run of ``--beam beam`` starts at (search/defaults.py says why)."""
    return PRUNE_AUTO_START


def stratum(source_tokens: int) -> int:
    """The length stratum of a source of ``source_tokens`` tokens (EOS excluded): 2–3, 4–7, 8–15, … (log2)."""
    return max(int(math.log2(max(source_tokens, 1))), 1)


@dataclass(frozen=True)
class Probe:
    """One probe's outcome: the fixed beam's best normalised score and a rung's best hypothesis against it."""

    fixed_score: float
    score: float  # the rung's best normalised score
    changed: bool  # its best hypothesis is another one than the fixed beam's

    @property
    def loss(self) -> float:
        return self.fixed_score - self.score


@dataclass
class Window:
    """The last ``size`` probes of one rung."""

    size: int = PRUNE_AUTO_WINDOW
    probes: Deque[Probe] = field(default_factory=deque)

    def add(self, probe: Probe) -> None:
        self.probes.append(probe)
        while len(self.probes) > self.size:
            self.probes.popleft()

    def __len__(self) -> int:
        return len(self.probes)

    @property
    def relative_loss(self) -> float:
        """The window's mean loss as a share of the fixed beam's mean |score| (weak models' scores are larger)."""
        scale = sum(abs(p.fixed_score) for p in self.probes)
        return sum(p.loss for p in self.probes) / max(scale, 1e-9)

    @property
    def changed(self) -> int:
        return sum(p.changed for p in self.probes)

    def within(self, tolerance: float) -> bool:
        # by the score alone: how many best hypotheses changed says nothing of BLEU on a weak model, where a
        # rung that keeps BLEU changes 60–90% of them (docs/history/results-2026-11.md, --prune-auto round 5)
        return self.relative_loss <= tolerance


@dataclass
class Change:
    """One move of the controller, for the statistics and the frontier's trajectory."""

    sentences: int  # sentences the run had finished when it moved
    probes: int  # probe outcomes read by then
    setting: str
    why: str

    def as_dict(self) -> Dict[str, Any]:
        return {"sentences": self.sentences, "probes": self.probes, "setting": self.setting, "why": self.why}


class PruneController:
    """Which rung the run decodes with, and which sentences to probe (the module docstring)."""

    def __init__(self, beam: int, *, tolerance: float = PRUNE_AUTO_TOLERANCE) -> None:
        self.rungs = ladder(beam)
        self.tolerance = tolerance
        # a probe's work before any was measured, per source token, as a multiple of the run's (the fixed beam's
        # k rows a step against the start rung's; the trial rung costs a little less than one sentence)
        self.first_estimate = max(2.0, beam / PRUNE_AUTO_START_ROWS)
        delta, m = start(beam)
        first = (float(delta), min(int(m), beam))
        self.at = next(i for i, s in enumerate(self.rungs) if (s.delta, min(s.max_cands or beam, beam)) == first)
        self.current, self.trial = Window(), Window()
        self.held_until: Dict[int, int] = {}  # rung → probe count before which the controller does not tighten onto it
        self.probes = 0  # sentences probed
        self.observed = 0  # outcomes read as evidence (two a probe: the trial's, the current rung's; not stale ones)
        self.since_change = 0  # outcomes since the last move
        self.probe_work = 0.0  # the decoded probes' work (expansions + a step's fixed cost per step)
        self.pending_work = 0.0  # the estimated work of the probes chosen and not decoded yet
        self.per_token: Optional[float] = None  # probe work per source token, measured
        self.strata: Dict[int, int] = {}  # probes per length stratum
        self.changes: List[Change] = [Change(0, 0, self.setting.label(), "start")]
        self.outputs: List[float] = []  # the run's first outputs' normalised scores (observe_output)

    # ---- what the run's outputs say ----------------------------------------------------------
    @property
    def outputs_mean(self) -> Optional[float]:
        """The mean normalised score of the run's first outputs read so far (None before the first)."""
        return sum(self.outputs) / len(self.outputs) if self.outputs else None

    @property
    def unsure(self) -> bool:
        """The model was found unsure (its first outputs score low): the safest pruned rung, for good, unprobed."""
        mean = self.outputs_mean
        return len(self.outputs) >= PRUNE_AUTO_UNSURE_OUTPUTS and mean is not None and mean < PRUNE_AUTO_UNSURE

    # ---- what to decode with -------------------------------------------------------------
    @property
    def setting(self) -> Setting:
        return self.rungs[self.at]

    @property
    def trial_setting(self) -> Optional[Setting]:
        """The next faster rung, measured on the probes; None at the fastest."""
        return self.rungs[self.at - 1] if self.at > 0 else None

    # ---- which sentences to probe ----------------------------------------------------------
    def credit(self) -> int:
        """Probes the run's first refill takes past the budget: PRUNE_AUTO_CREDIT sentences' work by the first
        estimate, at least one."""
        return max(1, int(PRUNE_AUTO_CREDIT // self.first_estimate))

    def budget_share(self) -> float:
        """The share of the run's expansions the probes may take now: the full budget after a move, less
        and less while the setting stays put (a steady input measures less: a window's worth of probes, each
        read twice, the trial and the current rung)."""
        return PRUNE_AUTO_BUDGET / (1 + self.since_change // (2 * PRUNE_AUTO_WINDOW))

    def choose_probes(self, source_tokens: Sequence[int], run_work: float, run_per_token: float,
                      *, minimum: int = 0, limit: Optional[int] = None) -> List[Tuple[int, float]]:
        """Rows of a refill (their source lengths, EOS excluded) to probe, within the budget, in row order,
        each with the work it was charged (:meth:`count_work` takes it back when the probe is decoded).

        ``run_work``: the run's decoder work for the sentences admitted so far (this refill's included), the
        budget's base; ``run_per_token``: the run's work per source token, the first estimate of a probe's
        cost; ``minimum``: probes taken even past the budget (on credit: later refills pay it back); ``limit``: at
        most this many. None once the model is unsure (its rung is kept for good: new probes would pay for nothing)."""
        if self.unsure:
            return []
        eligible = [row for row, n in enumerate(source_tokens) if n >= 2]  # blank and one-token: no evidence
        allowed = self.budget_share() * run_work - self.probe_work - self.pending_work
        per_token = self.per_token if self.per_token is not None else self.first_estimate * run_per_token
        chosen: List[Tuple[int, float]] = []
        while eligible and (limit is None or len(chosen) < limit):
            by_stratum: Dict[int, List[int]] = {}
            for row in eligible:
                by_stratum.setdefault(stratum(source_tokens[row]), []).append(row)
            least = min(by_stratum, key=lambda s: (self.strata.get(s, 0), s))
            rows = by_stratum[least]
            row = rows[len(rows) // 2]  # the middle of the stratum's rows: no bias to its short or long end
            cost = per_token * source_tokens[row]
            if cost > allowed and len(chosen) >= minimum:
                break
            allowed -= cost
            self.pending_work += cost
            self.probes += 1
            self.strata[least] = self.strata.get(least, 0) + 1
            chosen.append((row, cost))
            eligible.remove(row)
        return sorted(chosen)

    # ---- what the probes measured ----------------------------------------------------------
    def observe(self, current: Optional[Probe], trial: Optional[Probe], *, sentences: int) -> None:
        """A probe's outcomes: at the current rung (None: not known yet, or the stream decoded it at another)
        and at :attr:`trial_setting` (None: read already, or at the fastest rung); may move the rung."""
        if current is None and trial is None:
            return
        self.observed += 1
        self.since_change += 1
        if current is not None:
            self.current.add(current)
        if trial is not None:
            self.trial.add(trial)
        if len(self.current) >= PRUNE_AUTO_MIN_RELAX and not self.current.within(self.tolerance) and self.at + 1 < len(self.rungs):
            loss = self.current.relative_loss
            self.held_until[self.at] = self.observed + PRUNE_AUTO_HOLD
            self._move(self.at + 1, sentences, f"{self.setting.label()} lost {100 * loss:.2f}% of the fixed beam's "
                       f"score, {self.current.changed}/{len(self.current)} best hypotheses changed")
        elif (not self.unsure and self.at > 0 and len(self.trial) >= PRUNE_AUTO_MIN_TIGHTEN
              and self.trial.within(self.tolerance / 2)
              and self.observed >= self.held_until.get(self.at - 1, 0)):
            loss = self.trial.relative_loss
            self._move(self.at - 1, sentences, f"{self.rungs[self.at - 1].label()} lost {100 * loss:.2f}%, "
                       f"{self.trial.changed}/{len(self.trial)} changed")

    def observe_output(self, score: float, tokens: int, *, sentences: int) -> None:
        """One of the run's outputs: its best hypothesis's normalised score and its tokens (EOS included). The
        first PRUNE_AUTO_UNSURE_OUTPUTS of two tokens or more say whether the model is unsure (module docstring);
        then it moves to the safest pruned rung, if it is faster now. Blank outputs say nothing."""
        if len(self.outputs) >= PRUNE_AUTO_UNSURE_OUTPUTS or tokens < 3 or not math.isfinite(score):
            return
        self.outputs.append(score)
        if not self.unsure:
            return
        safest = len(self.rungs) - 2  # the last pruned rung (the last of all is the fixed beam)
        if self.at < safest:
            self._move(safest, sentences, f"an unsure model: its first {len(self.outputs)} outputs average "
                       f"{self.outputs_mean:.2f} a token (below {PRUNE_AUTO_UNSURE:g})")

    def count_work(self, work: float, estimated: float, source_tokens: int) -> None:
        """A group of probes decoded: its work (fixed beam and trial) replaces its estimate, and gives the next."""
        self.probe_work += work
        self.pending_work = max(self.pending_work - estimated, 0.0)
        if source_tokens:
            measured = work / source_tokens
            self.per_token = measured if self.per_token is None else 0.5 * (self.per_token + measured)

    def _move(self, to: int, sentences: int, why: str) -> None:
        self.at = to
        self.current, self.trial = Window(), Window()
        self.since_change = 0
        self.changes.append(Change(sentences, self.observed, self.setting.label(), why))

    # ---- what the run reports ------------------------------------------------------------------
    def as_dict(self, run_work: float) -> Dict[str, Any]:
        s = self.setting
        return {"setting": s.label(), "delta": s.delta, "max_cands": s.max_cands, "steered": True,
                "tolerance": self.tolerance, "probes": self.probes, "observed": self.observed,
                "probe_work": round(self.probe_work, 1),
                "probe_share": round(self.probe_work / run_work, 4) if run_work else None,
                "strata": {str(2 ** k): n for k, n in sorted(self.strata.items())},
                "unsure": self.unsure,
                "outputs_mean": None if self.outputs_mean is None else round(self.outputs_mean, 4),
                "changes": [c.as_dict() for c in self.changes]}

    def line(self, run_work: float) -> str:
        """The closing line of the run: where it ended, how it got there, what the probes cost."""
        share = self.probe_work / run_work if run_work else 0.0
        moves = " → ".join(c.setting for c in self.changes)
        return (f"{self.setting.label()} after {self.observed} outcome(s) of {self.probes} probe(s) ({100 * share:.1f}% "
                f"of the run's decoder work); steered {moves}")
