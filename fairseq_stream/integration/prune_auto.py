"""``--prune-auto``: the variable-width beam steers its own δ and M while the run goes.

The controller (:mod:`fairseq_stream.search.prune_controller`: Freitag2017 §3's ap and mc as
Yang2020 §4.1's δ and M, moved by the search error it measures) says which sentences of a batch to
probe and which rung to decode with; this module is its generator:

1. the run's stream decodes every sentence with the current rung, streamed as without it (no read
   ahead beyond the stream's own);
2. when a batch is complete, its probes are decoded again by the fixed beam (``fixed-ours`` at the
   same k: their output, so no sentence is decoded worse for being a probe) and by the next faster
   rung, two helper generators of the run's own (silent, their work counted in the run's statistics);
3. the controller reads their best hypotheses' model scores; when it moves, the stream prunes with
   the new rung from its next step on, the sentences in flight included.

fairseq-interactive steers the same way, chunk by chunk. The closing statistics (and
``--stream-stats``) carry the setting it ended on, every move with its reason, the probes per
length stratum and their share of the run's expansions.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch

from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.model.static_step import StepModeStats
from fairseq_stream.search.beam import BeamConfig, Pruning
from fairseq_stream.search.defaults import PRUNE_AUTO_TOLERANCE
from fairseq_stream.search.prune_controller import OFF, Probe, PruneController, Setting, ladder  # noqa: F401 (re-exported)

Hypos = List[List[Dict[str, Any]]]  # fairseq's n-best lists, one per sentence
PREFIX = "fairseq-stream: --prune-auto: "
_COUNTS = ("timesteps", "expansions", "active_sentences", "refills")


def pruning_of(setting: Setting, base: Pruning) -> Pruning:
    """``base`` (the run's reference, ``--prune-ended``, …) with ``setting``'s δ and M."""
    return dataclasses.replace(base, abs_threshold=None if math.isinf(setting.delta) else setting.delta,
                               max_cands_per_node=setting.max_cands)


def select_rows(sample: Dict[str, Any], rows: List[int]) -> Dict[str, Any]:
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


def _score(nbest: List[Dict[str, Any]]) -> float:
    return float(nbest[0]["score"]) if nbest else -math.inf


def _probe(fixed: List[Dict[str, Any]], got: List[Dict[str, Any]]) -> Optional[Probe]:
    """A rung's outcome on one probe; None when either search ended with nothing to compare."""
    ref, score = _score(fixed), _score(got)
    if not (math.isfinite(ref) and math.isfinite(score)):
        return None
    return Probe(ref, score, not torch.equal(fixed[0]["tokens"].cpu(), got[0]["tokens"].cpu()))


class _Helper:
    """A silent generator of the run's (the fixed beam, or the trial rung) and what it has added to the run's counts."""

    def __init__(self, generator: StreamGenerator) -> None:
        self.generator = generator
        self.counted = {name: 0 for name in _COUNTS}
        self.counted_steps = StepModeStats()

    def add_new_work(self, stats: DecodeStats, steps: StepModeStats) -> int:
        """Its work since the last call, added to the run's ``stats`` and ``steps``; returns its new expansions."""
        own = self.generator.stats
        new = {name: getattr(own, name) - self.counted[name] for name in _COUNTS}
        for name, value in new.items():
            setattr(stats, name, getattr(stats, name) + value)
        self.counted = {name: getattr(own, name) for name in _COUNTS}
        now = self.generator.model.step_stats
        steps.add(_difference(now, self.counted_steps))
        self.counted_steps = copy.deepcopy(now)
        return new["expansions"]


def _difference(now: StepModeStats, before: StepModeStats) -> StepModeStats:
    out = StepModeStats()
    for name in ("replayed", "static", "native", "eager", "captured", "capture_seconds", "graph_bytes", "evicted"):
        setattr(out, name, getattr(now, name) - getattr(before, name))
    out.fallbacks = {why: n - before.fallbacks.get(why, 0) for why, n in now.fallbacks.items()
                     if n != before.fallbacks.get(why, 0)}
    return out


class AutoPruneGenerator(StreamGenerator):
    """The run's generator under ``--prune-auto``: the stream at the controller's rung, the probes beside it."""

    controller: PruneController
    spawn: Callable[[BeamConfig], StreamGenerator]
    fixed: Optional[_Helper] = None
    trial: Optional[_Helper] = None
    probe_expansions: int = 0  # the helpers' expansions, in the run's statistics too
    source_tokens: int = 0  # the run's source tokens so far (the first probe's cost estimate)
    probed_ids: List[int]  # fairseq's ids of the probes: their output is the fixed beam's

    @classmethod
    def build(cls, make: Callable[..., StreamGenerator], config: BeamConfig, opts: Any) -> "AutoPruneGenerator":
        """``make(config, cls=..., stats_path=..., report=...)`` builds a generator of the run's strategy
        (integration/build.py); the run's starts at the controller's first rung (search/beam.py)."""
        generator = make(config, cls=cls)
        assert isinstance(generator, AutoPruneGenerator)
        tolerance = opts.prune_auto_tolerance
        generator.controller = PruneController(
            config.beam, tolerance=PRUNE_AUTO_TOLERANCE if tolerance is None else float(tolerance))
        generator.spawn = lambda cfg: make(cfg, stats_path=None, report=False)
        generator.probed_ids = []
        generator.stats.prune_auto = generator.controller.as_dict(0)
        return generator

    def generate(self, models: Any, sample: Dict[str, Any], prefix_tokens: Any = None, constraints: Any = None,
                 bos_token: Optional[int] = None, **kwargs: Any) -> Hypos:
        hypos = super().generate(models, sample, prefix_tokens, constraints, bos_token, **kwargs)
        start = time.perf_counter()
        self._probe(models, sample, hypos, bos_token)
        self.stats.wall_seconds += time.perf_counter() - start
        return hypos

    def _probe(self, models: Any, sample: Dict[str, Any], hypos: Hypos, bos_token: Optional[int]) -> None:
        """The batch's probes decoded by the fixed beam (their output) and the trial rung; the controller told."""
        ctl = self.controller
        lengths = (sample["net_input"]["src_tokens"].ne(self.pad).sum(dim=1) - 1).tolist()  # EOS excluded
        self.source_tokens += sum(max(n, 0) for n in lengths)
        own = self.stats.expansions - self.probe_expansions
        rows = ctl.choose_probes(lengths, own, own / max(self.source_tokens, 1))
        if not rows:
            return
        part = select_rows(sample, rows)
        fixed = self._fixed().generator.generate(models, part, bos_token=bos_token)
        trial_setting = ctl.trial_setting
        trial = self._trial(trial_setting).generator.generate(models, part, bos_token=bos_token) \
            if trial_setting is not None else None
        spent = sum(helper.add_new_work(self.stats, self.model.step_stats)
                    for helper in (self.fixed, self.trial) if helper is not None)
        self.probe_expansions += spent
        ctl.count_expansions(spent, sum(lengths[row] for row in rows))
        at = ctl.at
        for i, row in enumerate(rows):
            current = _probe(fixed[i], hypos[row])
            if ctl.at == at and current is not None:  # after a move, the batch's other outcomes are of the old rungs
                ctl.observe(current, _probe(fixed[i], trial[i]) if trial is not None else None,
                            sentences=self.input.done)
            hypos[row] = fixed[i]
        if "id" in sample:
            self.probed_ids += [int(sample["id"][row]) for row in rows]
        if ctl.at != at:
            self.config = dataclasses.replace(self.config, pruning=pruning_of(ctl.setting, self.config.pruning))
            self.strategy.set_pruning(self.config.pruning)
        self.stats.prune_auto = dict(ctl.as_dict(own), probed_ids=list(self.probed_ids))

    def _fixed(self) -> _Helper:
        if self.fixed is None:
            config = BeamConfig(beam=self.config.beam, nbest=self.config.nbest, final_count=self.config.final_count,
                                lenpen=self.config.lenpen, finalize=self.config.finalize, pruning=Pruning())
            self.fixed = _Helper(self.spawn(config))
        return self.fixed

    def _trial(self, setting: Setting) -> _Helper:
        pruning = pruning_of(setting, self.config.pruning)
        if self.trial is None:
            self.trial = _Helper(self.spawn(dataclasses.replace(self.config, pruning=pruning)))
        else:
            self.trial.generator.strategy.set_pruning(pruning)
        return self.trial

    def report(self) -> None:
        own = self.stats.expansions - self.probe_expansions
        print(PREFIX + self.controller.line(own), file=sys.stderr, flush=True)
        super().report()
