"""``--prune-auto``: the variable-width beam steers its own δ and M while the run goes.

The controller (:mod:`fairseq_stream.search.prune_controller`: Freitag2017 §3's ap and mc as
Yang2020 §4.1's δ and M, moved by the search error it measures) says which sentences of a batch to
probe and which rung to decode with; this module is its generator:

1. the run's stream decodes every sentence with the current rung, streamed as without it (no read
   ahead beyond the stream's own); that is every sentence's output;
2. when a batch is complete, the probes the controller chose among it wait (their source tokens
   and the stream's hypotheses) until a group of them is ready
   (:data:`~fairseq_stream.search.defaults.PRUNE_AUTO_GROUP`, from one batch or several: the
   helpers' decoder steps, whose fixed cost dominates a small batch, are shared); the group is
   decoded by the fixed beam (``fixed-ours`` at the same k) and by the next faster rung, two
   helper generators of the run's own (silent, their work counted in the run's statistics);
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
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import torch

from fairseq.data import data_utils

from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.model.static_step import StepModeStats
from fairseq_stream.search.beam import BeamConfig, Pruning
from fairseq_stream.search.defaults import PRUNE_AUTO_GROUP, PRUNE_AUTO_STEP_WORK, PRUNE_AUTO_TOLERANCE
from fairseq_stream.search.prune_controller import Probe, PruneController, Setting

Hypos = List[List[Dict[str, Any]]]  # fairseq's n-best lists, one per sentence
PREFIX = "fairseq-stream: --prune-auto: "
_COUNTS = ("timesteps", "expansions", "active_sentences", "refills")


def pruning_of(setting: Setting, base: Pruning) -> Pruning:
    """``base`` (the run's reference, ``--prune-ended``, …) with ``setting``'s δ and M."""
    return dataclasses.replace(base, abs_threshold=None if math.isinf(setting.delta) else setting.delta,
                               max_cands_per_node=setting.max_cands)


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

    def add_new_work(self, stats: DecodeStats, steps: StepModeStats) -> Dict[str, int]:
        """Its counts since the last call, added to the run's ``stats`` and ``steps``; returns them."""
        own = self.generator.stats
        new = {name: getattr(own, name) - self.counted[name] for name in _COUNTS}
        for name, value in new.items():
            setattr(stats, name, getattr(stats, name) + value)
        self.counted = {name: getattr(own, name) for name in _COUNTS}
        now = self.generator.model.step_stats
        steps.add(now.since(self.counted_steps))
        self.counted_steps = copy.deepcopy(now)
        return new


def work(expansions: int, timesteps: int) -> float:
    """Decoder work as the budget counts it: expansions and a fixed cost per step."""
    return expansions + PRUNE_AUTO_STEP_WORK * timesteps


@dataclass
class Pending:
    """A probe chosen and not decoded yet: its source, the stream's hypotheses and the rung they are of."""

    sentence_id: int
    source: torch.Tensor  # (n,) its source tokens, EOS included, no padding
    hypos: List[Dict[str, Any]]
    rung: int
    charged: float  # the work the controller charged for it


class AutoPruneGenerator(StreamGenerator):
    """The run's generator under ``--prune-auto``: the stream at the controller's rung, the probes beside it."""

    controller: PruneController
    spawn: Callable[[BeamConfig], StreamGenerator]
    fixed: Optional[_Helper] = None
    trial: Optional[_Helper] = None
    probe_timesteps: int = 0  # the helpers' steps and expansions, in the run's statistics too
    probe_expansions: int = 0
    source_tokens: int = 0  # the run's source tokens so far (the first probe's cost estimate)
    probed_ids: List[int]  # fairseq's ids of the probes decoded
    pending: List[Pending]
    dropped: int = 0  # probes of the input's last batch, not decoded

    @classmethod
    def build(cls, make: Callable[..., StreamGenerator], config: BeamConfig, opts: Any) -> "AutoPruneGenerator":
        """``make(config, cls=..., stats_path=..., report=...)`` builds a generator of the run's strategy
        (integration/build.py); the run's starts at the controller's first rung (search/beam.py)."""
        tolerance = opts.prune_auto_tolerance
        controller = PruneController(config.beam, tolerance=PRUNE_AUTO_TOLERANCE if tolerance is None else float(tolerance))
        config = dataclasses.replace(config, pruning=pruning_of(controller.setting, config.pruning))
        generator = make(config, cls=cls)
        assert isinstance(generator, AutoPruneGenerator)
        generator.controller = controller
        generator.spawn = lambda cfg: make(cfg, stats_path=None, report=False)
        generator.probed_ids, generator.pending = [], []
        generator.stats.prune_auto = generator.controller.as_dict(0)
        return generator

    @property
    def own_work(self) -> float:
        """The run's stream's own decoder work (the probes' excluded)."""
        return work(self.stats.expansions - self.probe_expansions, self.stats.timesteps - self.probe_timesteps)

    def generate(self, models: Any, sample: Dict[str, Any], prefix_tokens: Any = None, constraints: Any = None,
                 bos_token: Optional[int] = None, **kwargs: Any) -> Hypos:
        hypos = super().generate(models, sample, prefix_tokens, constraints, bos_token, **kwargs)
        start = time.perf_counter()
        self._choose(sample, hypos)
        if len(self.pending) >= PRUNE_AUTO_GROUP:
            if self._input_left(sample):
                self._decode_probes(models, bos_token)
            else:  # the input's last batch: a move would steer nothing, the probes would only cost
                self.dropped += len(self.pending)
                self.pending = []
        self.stats.prune_auto = dict(self.controller.as_dict(self.own_work), probed_ids=list(self.probed_ids),
                                     dropped_at_the_end=self.dropped)
        self.stats.wall_seconds += time.perf_counter() - start
        return hypos

    def _input_left(self, sample: Dict[str, Any]) -> bool:
        """Whether a batch follows ``sample`` (one batch peeked at, as a refill would; True when unknown:
        fairseq-interactive, a caller's own loop)."""
        source = self.run.source()
        ticket = source.ticket_of(sample) if source is not None else None
        return ticket is None or source.peek(ticket + 1) is not None

    def _choose(self, sample: Dict[str, Any], hypos: Hypos) -> None:
        """The controller's probes among the batch, queued with the stream's hypotheses."""
        tokens = sample["net_input"]["src_tokens"]
        lengths = (tokens.ne(self.pad).sum(dim=1) - 1).tolist()  # EOS excluded
        self.source_tokens += sum(max(n, 0) for n in lengths)
        ids = sample["id"].tolist() if "id" in sample else list(range(len(lengths)))
        for row, charged in self.controller.choose_probes(lengths, self.own_work, self.own_work / max(self.source_tokens, 1)):
            source = tokens[row][tokens[row].ne(self.pad)].cpu()
            self.pending.append(Pending(ids[row], source, hypos[row], self.controller.at, charged))

    def _decode_probes(self, models: Any, bos_token: Optional[int]) -> None:
        """The waiting probes, decoded by the fixed beam and the trial rung as one batch; the controller told."""
        ctl, group, self.pending = self.controller, self.pending, []
        part = self._collate(group)
        fixed = self._fixed().generator.generate(models, part, bos_token=bos_token)
        trial_setting = ctl.trial_setting
        trial = self._trial(trial_setting).generator.generate(models, part, bos_token=bos_token) \
            if trial_setting is not None else None
        new = [helper.add_new_work(self.stats, self.model.step_stats)
               for helper in (self.fixed, self.trial) if helper is not None]
        expansions, timesteps = sum(n["expansions"] for n in new), sum(n["timesteps"] for n in new)
        self.probe_expansions += expansions
        self.probe_timesteps += timesteps
        ctl.count_work(work(expansions, timesteps), sum(p.charged for p in group), sum(len(p.source) - 1 for p in group))
        at = ctl.at
        for i, probe in enumerate(group):
            if ctl.at != at:  # moved: the group's other outcomes are of the rungs before
                break
            ctl.observe(_probe(fixed[i], probe.hypos) if probe.rung == at else None,
                        _probe(fixed[i], trial[i]) if trial is not None else None, sentences=self.input.done)
        self.probed_ids += [p.sentence_id for p in group]
        if ctl.at != at:
            self.config = dataclasses.replace(self.config, pruning=pruning_of(ctl.setting, self.config.pruning))
            self.strategy.set_pruning(self.config.pruning)

    def _collate(self, group: List[Pending]) -> Dict[str, Any]:
        """The probes as one fairseq batch (their sources padded on the stream's side)."""
        src = data_utils.collate_tokens([p.source for p in group], self.pad, left_pad=self.input.left_pad)
        return {"id": torch.arange(len(group)), "nsentences": len(group),
                "net_input": {"src_tokens": src.to(self.model.device),
                              "src_lengths": torch.tensor([len(p.source) for p in group], device=self.model.device)}}

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
        print(PREFIX + self.controller.line(self.own_work), file=sys.stderr, flush=True)
        super().report()
