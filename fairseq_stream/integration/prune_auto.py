"""``--prune-auto``: the variable-width beam calibrates its own δ and M on its first sentences.

The pruning heuristics are Freitag2017's (Freitag & Al-Onaizan 2017, "Beam Search Strategies for
Neural Machine Translation", §3: ap, mc) as Yang2020 uses them (Yang et al. 2020, "A Streaming
Approach for Efficient Batched Beam Search", §4.1: δ, M); the
frontier (docs/results.md) shows that no single (δ, M) suits every model: the same δ gains BLEU
on one checkpoint and loses it on another. The search error of a setting can be measured without
references, as the loss of model score of its best hypothesis against the fixed beam's (Freitag2017
report "fan out" and BLEU; the score loss is the reference-free half of their comparison). So a run
measures it on its own input:

1. the first ``N`` sentences the engine sees (``N`` = 32 or 2% of the input, whichever is larger,
   at most 256: :data:`~fairseq_stream.search.defaults.PRUNE_AUTO_SAMPLE`) are decoded by the fixed
   beam (``fixed-ours`` at the same ``--beam``), and that is their output: no sentence is decoded
   worse for being in the sample;
2. the ladder of (δ, M) (:data:`~fairseq_stream.search.defaults.PRUNE_AUTO_LADDER`) is tried on the
   same sentences from the fastest setting on; the first that passes is kept: its mean loss is at
   most ``--prune-auto-tolerance`` of the fixed beam's mean |score| on the sample (a relative loss:
   a weak model's per-token scores, and the losses of the same pruning, are several times a strong
   one's), and it changes at most half of the sample's best hypotheses (the rungs are ordered by
   the expansions they cost; the choice reads model scores, never a clock: it is deterministic);
   if none passes, pruning is off (the fixed beam's width, with the variable beam's finalisation);
3. the rest of the input is decoded by the run's strategy with that setting; streamed from the
   first sentence after the sample on, so ``var-stream`` ≡ ``var-batch`` holds for it.

An input shorter than twice the sample, and fairseq-interactive (it reads its input in chunks), are
not calibrated: they decode with :data:`~fairseq_stream.search.defaults.PRUNE_AUTO_CONSERVATIVE`,
and the statistics say so.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from fairseq_stream.search.defaults import (
    PRUNE_AUTO_CONSERVATIVE, PRUNE_AUTO_LADDER, PRUNE_AUTO_MAX_CHANGED, PRUNE_AUTO_MAX_SAMPLE, PRUNE_AUTO_SAMPLE,
    PRUNE_AUTO_SHARE, PRUNE_AUTO_TOLERANCE,
)
from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.integration.cli import fairseq_cli_name
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.search.beam import BeamConfig, Pruning

Hypos = List[List[Dict[str, Any]]]  # fairseq's n-best lists, one per sentence
PREFIX = "fairseq-stream: --prune-auto: "


@dataclass(frozen=True)
class Setting:
    """One rung of the ladder: δ (``inf`` = off) and M (``None`` = no limit)."""

    delta: float
    max_cands: Optional[int]

    def label(self) -> str:
        if math.isinf(self.delta) and self.max_cands is None:
            return "off (the fixed beam's width)"
        return f"δ {self.delta:g}, M {self.max_cands if self.max_cands is not None else '∞'}"

    def pruning(self, base: Pruning) -> Pruning:
        return dataclasses.replace(base, abs_threshold=None if math.isinf(self.delta) else self.delta,
                                   max_cands_per_node=self.max_cands)


OFF = Setting(math.inf, None)


def ladder(beam: int, rungs: Sequence[Tuple[float, int]] = PRUNE_AUTO_LADDER) -> List[Setting]:
    """The rungs for ``--beam beam``, fastest first; an M ≥ k limits nothing, so rungs equal at this k are tried once."""
    out: List[Setting] = []
    seen = set()
    for delta, m in rungs:
        if (float(delta), min(int(m), beam)) not in seen:
            seen.add((float(delta), min(int(m), beam)))
            out.append(Setting(float(delta), int(m)))
    return out


@dataclass
class Measured:
    """One setting's search error on the calibration sample, against the fixed beam."""

    setting: Setting
    sentences: int = 0
    expansions: int = 0
    score_loss: float = 0.0  # summed: the fixed beam's best normalised score minus this setting's
    changed: int = 0  # sentences whose best hypothesis is another one

    @property
    def mean_loss(self) -> float:
        return self.score_loss / self.sentences if self.sentences else 0.0

    def passes(self, tolerance: float, fixed_mean_score: float) -> bool:
        """Within the tolerance, relative to the scale of the fixed beam's scores, and changing at most
        PRUNE_AUTO_MAX_CHANGED of the best hypotheses."""
        return (self.mean_loss <= tolerance * max(abs(fixed_mean_score), 1e-9)
                and self.changed <= PRUNE_AUTO_MAX_CHANGED * self.sentences)

    def relative_loss(self, fixed_mean_score: Optional[float]) -> Optional[float]:
        return self.mean_loss / abs(fixed_mean_score) if fixed_mean_score else None

    def add(self, fixed: Hypos, hypos: Hypos) -> None:
        for ref, got in zip(fixed, hypos):
            self.sentences += 1
            self.score_loss += _score(ref) - _score(got)
            self.changed += not torch.equal(ref[0]["tokens"].cpu(), got[0]["tokens"].cpu())

    def as_dict(self, fixed_expansions: int, fixed_mean_score: Optional[float] = None) -> Dict[str, Any]:
        relative = self.relative_loss(fixed_mean_score)
        return {"setting": self.setting.label(), "delta": self.setting.delta, "max_cands": self.setting.max_cands,
                "mean_score_loss": round(self.mean_loss, 6), "changed": self.changed, "sentences": self.sentences,
                "relative_loss": None if relative is None else round(relative, 6),
                "expansions": self.expansions,
                "expansions_vs_fixed": round(self.expansions / fixed_expansions, 4) if fixed_expansions else None}


def _score(nbest: List[Dict[str, Any]]) -> float:
    return float(nbest[0]["score"])


@dataclass
class Choice:
    """What the run decodes its input after the sample with, and why."""

    setting: Setting
    calibrated: bool
    why: str  # a fallback's reason; empty when calibrated
    sample: int = 0
    tolerance: float = PRUNE_AUTO_TOLERANCE
    fixed_expansions: int = 0
    fixed_mean_score: Optional[float] = None  # the fixed beam's mean best normalised score on the sample (its scale)
    measured: List[Measured] = field(default_factory=list)

    @property
    def kept(self) -> Optional[Measured]:
        return next((m for m in self.measured if m.setting == self.setting), None)

    def line(self) -> str:
        """The one stderr line that says what the run chose."""
        if not self.calibrated:
            return f"{PREFIX}{self.setting.label()}, not calibrated: {self.why}"
        kept = self.kept
        if kept is None:
            tried = "; ".join(f"{m.setting.label()}: {100 * (m.relative_loss(self.fixed_mean_score) or 0):.2f}%, "
                              f"{m.changed} changed" for m in self.measured)
            return (f"{PREFIX}{self.setting.label()}: no setting was within --prune-auto-tolerance {self.tolerance:g} "
                    f"on {self.sample} sentences (mean score loss {tried})")
        return (f"{PREFIX}{self.setting.label()}, calibrated on {self.sample} sentences: mean score loss "
                f"{kept.mean_loss:.4f} nats/token = {100 * (kept.relative_loss(self.fixed_mean_score) or 0):.2f}% of "
                f"the fixed beam's (tolerance {100 * self.tolerance:g}%), {kept.changed}/{kept.sentences} "
                f"best hypotheses changed, {kept.expansions / max(self.fixed_expansions, 1):.2f}x the fixed beam's "
                "expansions")

    def as_dict(self) -> Dict[str, Any]:
        kept = self.kept
        return {"setting": self.setting.label(), "delta": self.setting.delta, "max_cands": self.setting.max_cands,
                "calibrated": self.calibrated, "fallback": self.why or None, "sample": self.sample,
                "tolerance": self.tolerance, "fixed_expansions": self.fixed_expansions,
                "fixed_mean_score": None if self.fixed_mean_score is None else round(self.fixed_mean_score, 6),
                "mean_score_loss": round(kept.mean_loss, 6) if kept else None,
                "relative_loss": kept.as_dict(0, self.fixed_mean_score)["relative_loss"] if kept else None,
                "changed": kept.changed if kept else None,
                "tried": [m.as_dict(self.fixed_expansions, self.fixed_mean_score) for m in self.measured]}


def sample_size(total: int) -> int:
    """The calibration sample of an input of ``total`` sentences."""
    return min(PRUNE_AUTO_MAX_SAMPLE, max(PRUNE_AUTO_SAMPLE, math.ceil(PRUNE_AUTO_SHARE * total)))


def select_rows(sample: Dict[str, Any], rows: Sequence[int]) -> Dict[str, Any]:
    """Rows ``rows`` of a collated fairseq sample (every per-sentence tensor cut the same way)."""
    bsz = sample["net_input"]["src_tokens"].size(0)
    idx = torch.as_tensor(list(rows), dtype=torch.long)

    def pick(value: Any) -> Any:
        if torch.is_tensor(value) and value.dim() and value.size(0) == bsz:
            return value.index_select(0, idx.to(value.device))
        return value

    out = {key: pick(value) for key, value in sample.items() if key != "net_input"}
    out["net_input"] = {key: pick(value) for key, value in sample["net_input"].items()}
    out["nsentences"] = len(idx)
    return out


def _batch_size(sample: Dict[str, Any]) -> int:
    return int(sample["net_input"]["src_tokens"].size(0))


class Calibration:
    """The sample's sentences as they come (decoded by the fixed beam), then the ladder over them."""

    def __init__(self, *, config: BeamConfig, tolerance: float, spawn: Callable[[BeamConfig], StreamGenerator]) -> None:
        self.config = config
        self.tolerance = tolerance
        self.spawn = spawn  # a generator of the run's strategy with another configuration (silent: no statistics
        # file, no closing line or warnings of its own)
        fixed = BeamConfig(beam=config.beam, nbest=config.nbest, final_count=config.final_count, lenpen=config.lenpen,
                           finalize=config.finalize, pruning=Pruning())  # fixed-ours at the same k
        self.fixed = spawn(fixed)
        self.size: Optional[int] = None  # sentences in the sample (0: not calibrated)
        self.parts: List[Tuple[Dict[str, Any], Hypos]] = []  # (sentences, the fixed beam's hypotheses)
        self.taken = 0
        self.helpers: List[StreamGenerator] = [self.fixed]

    def decode(self, models: Any, part: Dict[str, Any], bos_token: Optional[int]) -> Hypos:
        hypos = self.fixed.generate(models, part, bos_token=bos_token)
        self.parts.append((part, hypos))
        self.taken += _batch_size(part)
        return hypos

    def choose(self, models: Any, bos_token: Optional[int]) -> Choice:
        """The fastest rung within the tolerance (rungs are tried fastest first; the first that passes stops the walk)."""
        scores = [_score(nbest) for _, fixed in self.parts for nbest in fixed]
        choice = Choice(OFF, True, "", sample=self.taken, tolerance=self.tolerance,
                        fixed_expansions=self.fixed.stats.expansions, fixed_mean_score=sum(scores) / len(scores))
        for setting in ladder(self.config.beam):
            generator = self.spawn(dataclasses.replace(self.config, pruning=setting.pruning(self.config.pruning)))
            self.helpers.append(generator)
            measured = Measured(setting)
            for part, fixed in self.parts:
                measured.add(fixed, generator.generate(models, part, bos_token=bos_token))
            measured.expansions = generator.stats.expansions
            choice.measured.append(measured)
            if measured.passes(self.tolerance, choice.fixed_mean_score or 0.0):
                choice.setting = setting
                break
        return choice


class AutoPruneGenerator(StreamGenerator):
    """The run's generator under ``--prune-auto``: the calibration first, then the chosen setting, streamed."""

    calibration: Calibration
    choice: Optional[Choice] = None

    @classmethod
    def build(cls, make: Callable[..., StreamGenerator], config: BeamConfig, opts: Any) -> "AutoPruneGenerator":
        """``make(config, cls=..., stats_path=...)`` builds a generator of the run's strategy (integration/build.py)."""
        generator = make(config, cls=cls)  # starts with the conservative setting (search/beam.py)
        assert isinstance(generator, AutoPruneGenerator)
        tolerance = opts.prune_auto_tolerance
        generator.calibration = Calibration(
            config=config, tolerance=PRUNE_AUTO_TOLERANCE if tolerance is None else float(tolerance),
            spawn=lambda cfg: make(cfg, stats_path=None, report=False))
        return generator

    def generate(self, models: Any, sample: Dict[str, Any], prefix_tokens: Any = None, constraints: Any = None,
                 bos_token: Optional[int] = None, **kwargs: Any) -> Hypos:
        cal = self.calibration
        if self.choice is not None or prefix_tokens is not None or constraints is not None:
            return super().generate(models, sample, prefix_tokens, constraints, bos_token, **kwargs)
        if cal.size is None:
            cal.size, why = self._sample_size(sample)
            if not cal.size:
                self._use(Choice(Setting(*PRUNE_AUTO_CONSERVATIVE), False, why, tolerance=cal.tolerance))
                return super().generate(models, sample, bos_token=bos_token, **kwargs)
        start = time.perf_counter()
        rows = _batch_size(sample)
        take = min(cal.size - cal.taken, rows)
        hypos = list(cal.decode(models, sample if take == rows else select_rows(sample, range(take)), bos_token))
        self._count(hypos, time.perf_counter() - start)
        if cal.taken >= cal.size:
            start = time.perf_counter()
            self._use(cal.choose(models, bos_token))
            self.stats.wall_seconds += time.perf_counter() - start
        if take < rows:
            self._continue_after(sample)
            hypos += super().generate(models, select_rows(sample, range(take, rows)), bos_token=bos_token, **kwargs)
        return hypos

    def _sample_size(self, sample: Dict[str, Any]) -> Tuple[int, str]:
        """(sentences in the sample, or 0 and why the run is not calibrated)."""
        if fairseq_cli_name() == "interactive":
            return 0, "fairseq-interactive reads its input in chunks"
        total = self._input_size(sample)
        size = sample_size(total)
        if total < 2 * size:
            return 0, f"the input has {total} sentences, fewer than twice the calibration sample ({size})"
        return size, ""

    def _input_size(self, sample: Dict[str, Any]) -> int:
        """Sentences of this batch and of every batch after it (read ahead: source tokens only)."""
        source = self.run.source()
        ticket = source.ticket_of(sample) if source is not None else None
        total = _batch_size(sample)
        if ticket is None:
            return total
        while True:
            ticket += 1
            batch = source.peek(ticket)
            if batch is None:
                return total
            if "net_input" in batch:
                total += _batch_size(batch)

    def _count(self, hypos: Hypos, seconds: float) -> None:
        """The sample's sentences in the run's statistics (their expansions are added once chosen)."""
        self.stats.sentences += len(hypos)
        self.stats.target_tokens += sum(int(h[0]["tokens"].numel()) for h in hypos if h)
        self.stats.wall_seconds += seconds
        self.input.done += len(hypos)  # the progress bar counts them too
        if self.progress is not None:
            self.progress.advance_to(self.input.done)

    def _continue_after(self, sample: Dict[str, Any]) -> None:
        """The stream goes on after the batch the sample ended in (its rest is the stream's first sentences)."""
        source = self.run.source()
        ticket = source.ticket_of(sample) if source is not None else None
        if ticket is not None:
            self.input.continue_after(source, ticket)

    def _use(self, choice: Choice) -> None:
        """Decode from now on with ``choice``; say it once and record it in the statistics."""
        self.choice = choice
        self.config = dataclasses.replace(self.config, pruning=choice.setting.pruning(self.config.pruning))
        self.strategy = self.make_strategy(self.stats, self.config)
        for helper in self.calibration.helpers:
            _add_counts(self.stats, helper.stats)
            self.model.step_stats.add(helper.model.step_stats)  # how their steps ran (the closing step_mode)
        self.calibration.parts, self.calibration.helpers = [], []  # their caches and sentences are not needed again
        self.stats.prune_auto = choice.as_dict()
        print(choice.line(), file=sys.stderr, flush=True)


def _add_counts(stats: DecodeStats, other: DecodeStats) -> None:
    """The calibration's decoder work, added to the run's (its sentences are counted once, elsewhere)."""
    for name in ("timesteps", "expansions", "active_sentences", "refills"):
        setattr(stats, name, getattr(stats, name) + getattr(other, name))
    stats.extra["prune_auto_expansions"] = stats.extra.get("prune_auto_expansions", 0.0) + other.expansions
