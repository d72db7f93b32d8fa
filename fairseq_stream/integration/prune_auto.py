"""``--prune-auto``: the variable-width beam steers its own δ and M while the run goes.

The controller (:mod:`fairseq_stream.search.prune_controller`: Freitag2017 §3's ap and mc as
Yang2020 §4.1's δ and M, moved by the search error it measures) says which sentences of a refill to
probe and which rung to decode with; this module is its generator:

1. the run's stream decodes every sentence with the current rung, streamed as without it (no read
   ahead beyond the stream's own); that is every sentence's output;
2. when a refill admits sentences, before the stream decodes them, the probes the controller chose
   among them are decoded twice more: by the fixed beam (the run's strategy at the same k, no
   pruning) and by the next faster rung (none at the fastest), each copy pinned to its rung
   (``BeamSearch.use_rungs``: per-sentence rungs in the beam step). On a CPU they ride in the **run's
   own stream**: the refill's probes are planned before the input stream takes it
   (``InputStream.plan_copies``), the refill takes one sentence fewer per copy and the copies join it
   (``InputStream.add_copies``: decoded like its sentences, delivered to ``on_copy`` only), so they
   share the run's decoder steps, cost only their rows (metered per copy by the strategy) and keep the
   stream within its capacity. The run's first probes are taken on credit; where the run starts above
   the fastest rung they go to a helper generator of the run's own at once (silent, its work counted
   in the run's statistics: its two copies of each probe in one stream), so that the trial's outcome
   steers the first refill. A probe of the last refill would steer nothing: none is taken there. On
   a GPU (the Triton beam step lacks rungs) every group goes to the helper, in groups of
   :data:`~fairseq_stream.search.defaults.PRUNE_AUTO_GROUP`;
3. the controller reads a probe's outcomes once the fixed beam's is in — the helper's trial at once
   (a move onto the faster rung steers the refill the probes came in), the copies' as they leave the
   stream — and the current rung's when the stream finishes the probe (``InputStream.on_finish``);
   an outcome whose rung moved while it was in flight is dropped; when it moves, the stream prunes
   with the new rung from its next step on, the sentences in flight included.

fairseq-interactive steers the same way, chunk by chunk. The closing statistics (and
``--stream-stats``) carry the setting it ended on, every move with its reason, the probes per
length stratum and their share of the run's decoder work.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq.data import data_utils

from fairseq_stream.engine.input_stream import Admission
from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.model.static.modes import StepModeStats
from fairseq_stream.model.encoder_slots import SLOT_MODULUS
from fairseq_stream.search.beam import BeamConfig, Pruning, Rung
from fairseq_stream.search.defaults import PRUNE_AUTO_GROUP, PRUNE_AUTO_STEP_WORK, PRUNE_AUTO_TOLERANCE
from fairseq_stream.search.prune_controller import Probe, PruneController, Setting

Hypos = List[List[Dict[str, Any]]]  # fairseq's n-best lists, one per sentence
PREFIX = "fairseq-stream: --prune-auto: "
_COUNTS = ("timesteps", "expansions", "active_sentences", "refills")


def pruning_of(setting: Setting, base: Pruning) -> Pruning:
    """``base`` (the run's reference, ``--prune-ended``, …) with ``setting``'s δ and M: a fixed δ, so no
    surprisal scale (var-*'s default has one; a rung takes δ as it is)."""
    return dataclasses.replace(base, abs_threshold=None if math.isinf(setting.delta) else setting.delta,
                               abs_scale=None, max_cands_per_node=setting.max_cands)


def _score(nbest: List[Dict[str, Any]]) -> float:
    return float(nbest[0]["score"]) if nbest else -math.inf


def _probe(fixed: List[Dict[str, Any]], got: List[Dict[str, Any]]) -> Optional[Probe]:
    """A rung's outcome on one probe; None when either search ended with nothing to compare."""
    ref, score = _score(fixed), _score(got)
    if not (math.isfinite(ref) and math.isfinite(score)):
        return None
    return Probe(ref, score, not torch.equal(fixed[0]["tokens"].cpu(), got[0]["tokens"].cpu()))


class _Helper:
    """The silent generator of the run's that decodes the probes, each twice in one stream — the fixed beam's
    copy and the trial rung's, pinned to their rungs (``BeamSearch.use_rungs``) — and what it has added to the
    run's counts."""

    def __init__(self, generator: StreamGenerator) -> None:
        self.generator = generator
        self.counted = {name: 0 for name in _COUNTS}
        self.counted_steps = StepModeStats()
        self.copies = 0  # the probes of the group being decoded: ids below it are the fixed beam's copies

    def decode(self, models: Any, part: Dict[str, Any], copies: int, trial: Optional[Setting],
               bos_token: Optional[int]) -> Hypos:
        """``part``: the probes, then (``trial`` not None) the same again; the first ``copies`` decoded by the
        fixed beam, the rest by the trial rung, in one stream. Their n-best lists in ``part``'s order."""
        rungs = [Rung(math.inf, None)] + ([Rung(trial.delta, trial.max_cands)] if trial is not None else [])
        self.copies = copies
        self.generator.strategy.use_rungs(rungs, self._pin)
        return self.generator.generate(models, part, bos_token=bos_token)

    def _pin(self, handles: Tensor) -> Tensor:
        """A refill's rungs: 1 (the fixed beam) for a probe's first copy, 2 (the trial) for its second."""
        ids = torch.tensor([self.generator.input.sentence_id(int(h) // SLOT_MODULUS) for h in handles.tolist()])
        return torch.where(ids < self.copies, 1, 2)

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


@dataclass(eq=False)
class Pending:
    """A probe: its source, what each search made of it (filled in as they finish), the work charged for it."""

    serial: int  # the stream's serial of the sentence
    sentence_id: int
    source: torch.Tensor  # (n,) its source tokens, EOS included, no padding
    charged: float  # the work the controller charged for it
    moves: int = -1  # the controller's move count when the stream began decoding it (set as its refill is admitted)
    fixed: Optional[List[Dict[str, Any]]] = None  # the fixed beam's n-best, once decoded
    stream: Optional[List[Dict[str, Any]]] = None  # the stream's, once it finished
    # decoded in the run's own steps (its copies at the fixed beam and the trial rung ride in the stream)
    in_stream: bool = False
    trial: Optional[List[Dict[str, Any]]] = None  # the trial copy's n-best, once it finished
    copies: int = 0  # its copies still in flight
    work: int = 0  # its copies' decoder rows so far
    read: int = 0  # its outcomes read (bits: 1 the trial's, 2 the current rung's)


class AutoPruneGenerator(StreamGenerator):
    """The run's generator under ``--prune-auto``: the stream at the controller's rung, the probes beside it."""

    controller: PruneController
    spawn: Callable[[BeamConfig], StreamGenerator]
    helper: Optional[_Helper] = None
    probe_timesteps: int = 0  # the probes' steps and expansions, in the run's statistics too
    probe_expansions: int = 0
    admitted_tokens: int = 0  # source tokens of the sentences admitted so far (EOS excluded): the budget's base
    probed_ids: List[int]  # fairseq's ids of the probes decoded
    waiting: List[Pending]  # probes chosen, not decoded yet
    in_flight: Dict[int, Pending]  # serial → a probe the stream has not finished
    decoding: Any = None  # the models and BOS of the batch being generated (a refill decodes probes with them)
    in_stream: bool = False  # later probes ride in the run's own stream (the strategy's rungs: CPU beam steps)
    copy_of: Dict[int, Tuple[Pending, str, int]]  # serial of a copy in flight → its probe, "fixed" or "trial", its rung
    in_stream_probes: int = 0  # probes decoded in the run's own steps
    dropped_copies: int = 0  # copies still in flight when the input ended, dropped unfinished (_drop_copies)
    dropped_probes: int = 0  # the probes they were copies of (counted as not decoded)
    planned: List[Tuple[int, float]]  # the probes of the refill being taken (rows, the work charged)

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
        generator.probed_ids, generator.waiting, generator.in_flight = [], [], {}
        generator.copy_of, generator.planned = {}, []
        generator.input.on_admit = generator._admitted
        generator.input.on_finish = generator._finished
        # the probes after the first group ride in the run's stream, each copy pinned to its rung of the ladder
        # (rung i + 1 = the controller's rung i), where the beam step takes per-sentence rungs (the C++ operator;
        # Triton's lacks them: on a GPU every group goes to the helper)
        generator.in_stream = generator.model.device.type == "cpu" and "rungs" in generator.hooks
        if generator.in_stream:
            generator.strategy.use_rungs([Rung(r.delta, r.max_cands) for r in controller.rungs], generator._pin_copies,
                                         meter=True)
            generator.input.on_copy = generator._copy_finished
            generator.input.plan_copies = generator._plan_copies
            generator.input.on_copies = generator._add_copies
        generator.stats.prune_auto = generator.controller.as_dict(0)
        return generator

    @property
    def own_work(self) -> float:
        """The run's stream's own decoder work (the probes' excluded: the helper's steps, the copies' rows)."""
        copies = self.strategy.pinned_rows_total if self.in_stream else 0
        return work(self.stats.expansions - self.probe_expansions - copies, self.stats.timesteps - self.probe_timesteps)

    def generate(self, models: Any, sample: Dict[str, Any], prefix_tokens: Any = None, constraints: Any = None,
                 bos_token: Optional[int] = None, **kwargs: Any) -> Hypos:
        self.decoding = (models, bos_token)
        hypos = super().generate(models, sample, prefix_tokens, constraints, bos_token, **kwargs)
        if self.copy_of and self.input.only_copies_left():
            self._drop_copies()
        in_flight = {id(probe) for probe, _, _ in self.copy_of.values()}
        self.stats.prune_auto = dict(self.controller.as_dict(self.own_work), probed_ids=list(self.probed_ids),
                                     not_decoded=len(self.waiting) + len(in_flight) + self.dropped_probes,
                                     in_stream=self.in_stream_probes, dropped_copies=self.dropped_copies)
        return hypos

    def _drop_copies(self) -> None:
        """The input has ended and only probe copies are in flight: their outcomes would steer nothing, so the
        stream drops them unfinished (and hands back its buffers) rather than decode them for no one."""
        assert self._scheduler is not None
        self.dropped_probes += len({id(probe) for probe, _, _ in self.copy_of.values()})
        self.dropped_copies += self._scheduler.abandon()
        self.input.drop_copies()
        self.strategy.unpin_all()
        self.copy_of.clear()
        self.in_flight.clear()

    def _run_per_token(self) -> float:
        """The run's decoder work per admitted source token so far (low while most of it is in flight: the
        budget errs on the safe side); before the stream has worked, the probes' measured cost over the
        controller's first estimate of their multiple; 1 before either (the budget's units cancel)."""
        ctl = self.controller
        if self.own_work > 0:
            return self.own_work / max(self.admitted_tokens, 1)
        return ctl.per_token / ctl.first_estimate if ctl.per_token is not None else 1.0

    def _first(self) -> bool:
        """No probe chosen yet: the run's first group is taken on credit."""
        return not (self.probed_ids or self.waiting or self.in_flight or self.copy_of)

    def _admitted(self, admission: Admission) -> None:
        """A refill's sentences, before the stream decodes them: the helper's probes among them chosen, and
        decoded once a group waits (at once at the run's start and at its last refill); where probes ride in
        the stream, after the first group, the refill's copies were planned before it was taken
        (:meth:`_plan_copies`)."""
        lengths = (admission.src_lengths - 1).tolist()  # EOS excluded
        self.admitted_tokens += sum(max(n, 0) for n in lengths)
        ctl, per_token = self.controller, self._run_per_token()
        first = self._first()
        if self.in_stream and (not first or self.planned):  # (the first group rides in the stream too)
            return
        last = self.input.exhausted()
        # the first group on credit (not a one-refill input; nor a sentence that is all the stream can see — a line
        # typed at fairseq-interactive under --stream-per-batch, a batch of one: it would be decoded twice)
        alone = admission.count == 1 and self.run.source() is None
        minimum = PRUNE_AUTO_GROUP if first and not last and not alone else 0
        for row, charged in ctl.choose_probes(lengths, per_token * self.admitted_tokens, per_token, minimum=minimum):
            tokens = admission.src_tokens[row]
            serial = admission.first + row
            self.waiting.append(Pending(serial, self.input.sentence_id(serial), tokens[tokens.ne(self.pad)].cpu(), charged))
        if self.waiting and (len(self.waiting) >= PRUNE_AUTO_GROUP or first or last):
            self._decode_probes()
        moves = len(ctl.changes)  # the rung the stream decodes this refill's probes at (from its next step)
        for probe in self.waiting + list(self.in_flight.values()):
            if probe.serial >= admission.first:
                probe.moves = moves

    def _copy_rungs(self) -> List[Tuple[int, str]]:
        """The rungs a probe's copies are pinned to: the fixed beam's, and the trial's where there is one."""
        ctl = self.controller
        return [(len(ctl.rungs), "fixed")] + ([(ctl.at, "trial")] if ctl.trial_setting is not None else [])

    def _plan_copies(self, lengths: List[int], last: bool) -> List[int]:
        """The probes among a refill's rows (source lengths, EOS included) before the stream takes it, once per
        copy: the refill then takes one sentence fewer per copy, so that sentences and copies stay within the
        stream's capacity (and --stream-max-candidates). At most PRUNE_AUTO_GROUP probes, none among the rows
        the copies displace, none at the input's last refill (their outcomes would steer nothing). The run's first
        refill's too (some on credit: ``PruneController.credit``), where it starts at the fastest rung (only the
        fixed beam's copy to decode: nothing to learn before the stream decodes the refill); from a slower start
        the helper decodes a first group (its trial's outcome can steer the first refill)."""
        self.planned = []
        first = self._first()
        if not self.in_stream or last or (first and self.controller.trial_setting is not None):
            return []  # (a trial rung at the start: the helper measures it before the stream decodes this refill)
        tokens = [max(n - 1, 0) for n in lengths]
        copies = len(self._copy_rungs())
        limit = min(PRUNE_AUTO_GROUP, len(tokens) // (2 * copies))
        if not limit:
            return []
        kept = tokens[: len(tokens) - limit * copies] + [0] * (limit * copies)  # 0: not eligible (rows given up)
        per_token = self._run_per_token()
        credit = self.controller.credit() if first else 0  # the first refill's, past the budget (choose_probes stops at limit)
        self.planned = self.controller.choose_probes(kept, per_token * (self.admitted_tokens + sum(kept)), per_token,
                                                     limit=limit, minimum=credit)
        return [row for row, _ in self.planned] * copies

    def _add_copies(self, admission: Admission, rows: List[int], serials: List[int]) -> None:
        """The planned probes' copies joined ``admission`` under ``serials`` (``InputStream.add_copies``): each
        probe decoded in the run's stream twice more, by the fixed beam and by the trial rung."""
        chosen, rungs = self.planned, self._copy_rungs()
        if not chosen:
            return
        probes = []
        for row, charged in chosen:
            tokens = admission.src_tokens[row]
            serial = admission.first + row
            probe = Pending(serial, self.input.sentence_id(serial), tokens[tokens.ne(self.pad)].cpu(), charged,
                            moves=len(self.controller.changes), in_stream=True, copies=len(rungs))
            self.in_flight[serial] = probe
            probes.append(probe)
        self.in_stream_probes += len(probes)
        for i, serial in enumerate(serials):
            rung, role = rungs[i // len(chosen)]
            self.copy_of[serial] = (probes[i % len(chosen)], role, rung)

    def _pin_copies(self, handles: Tensor) -> Optional[Tensor]:
        """A refill's rungs in the run's strategy: a copy's, 0 (the run's pruning) for every other sentence."""
        if not self.copy_of:
            return None
        copies = self.copy_of
        return torch.tensor([copies[serial][2] if serial in copies else 0
                             for serial in (int(h) // SLOT_MODULUS for h in handles.tolist())])

    def _copy_finished(self, handle: int, hypos: List[Dict[str, Any]]) -> None:
        """A probe's copy left the stream: its outcome kept, its rows counted; read once the fixed beam's is in."""
        serial = handle // SLOT_MODULUS
        probe, role, _ = self.copy_of.pop(serial)
        probe.work += self.strategy.take_rows(handle)
        setattr(probe, role, hypos)
        probe.copies -= 1
        if not probe.copies:  # both copies decoded: their work replaces the estimate
            self.controller.count_work(float(probe.work), probe.charged, len(probe.source) - 1)
            self.probed_ids.append(probe.sentence_id)
        self._settle(probe)

    def _settle(self, probe: Pending) -> None:
        """An in-stream probe's outcomes, each read once when it and the fixed beam's are in, unless the rung
        moved since its refill was admitted (its trial is then no longer the trial, its current rung not current)."""
        if probe.fixed is None:
            return
        ctl, moves = self.controller, len(self.controller.changes)
        if probe.trial is not None and not probe.read & 1:
            probe.read |= 1
            if probe.moves == len(ctl.changes):
                ctl.observe(None, _probe(probe.fixed, probe.trial), sentences=self.input.done)
        if probe.stream is not None and not probe.read & 2:
            probe.read |= 2
            self._observe_current(probe)
        self._apply(moves)

    def _finished(self, serial: int, hypos: List[Dict[str, Any]]) -> None:
        moves = len(self.controller.changes)
        self.controller.observe_output(_score(hypos), len(hypos[0]["tokens"]) if hypos else 0, sentences=self.input.done)
        self._apply(moves)  # an unsure model: the stream's next step prunes at the safest rung
        probe = self.in_flight.get(serial)
        if probe is None:
            probe = next((p for p in self.waiting if p.serial == serial), None)
            if probe is None:
                return
        probe.stream = hypos
        self.in_flight.pop(serial, None)
        if probe.in_stream:
            self._settle(probe)
        elif probe.fixed is not None:
            self._observe_current(probe)

    def _observe_current(self, probe: Pending) -> None:
        """The current rung's outcome on ``probe``, unless the rung moved while the stream decoded it."""
        ctl = self.controller
        if probe.moves == len(ctl.changes):
            ctl.observe(_probe(probe.fixed, probe.stream), None, sentences=self.input.done)  # type: ignore[arg-type]
            self._apply(probe.moves)  # a move from a refill's inside: the stream's next step prunes so

    def _decode_probes(self) -> None:
        """The waiting probes, decoded by the fixed beam and the trial rung as one batch; the trial's
        outcomes read at once, the current rung's as the stream finishes them (some may have)."""
        models, bos_token = self.decoding
        ctl, group, self.waiting = self.controller, self.waiting, []
        helper, n, trial_setting = self._helper(), len(group), ctl.trial_setting
        both = helper.decode(models, self._collate(group if trial_setting is None else group + group), n,
                             trial_setting, bos_token)
        fixed, trial = both[:n], (both[n:] if trial_setting is not None else None)
        new = helper.add_new_work(self.stats, self.model.step_stats)
        expansions, timesteps = new["expansions"], new["timesteps"]
        self.probe_expansions += expansions
        self.probe_timesteps += timesteps
        ctl.count_work(work(expansions, timesteps), sum(p.charged for p in group), sum(len(p.source) - 1 for p in group))
        moves = len(ctl.changes)
        for i, probe in enumerate(group):
            probe.fixed = fixed[i]
            if len(ctl.changes) == moves and trial is not None:  # after a move in the group: of the rungs before
                ctl.observe(None, _probe(fixed[i], trial[i]), sentences=self.input.done)
            if probe.stream is not None:
                self._observe_current(probe)
            else:
                self.in_flight[probe.serial] = probe
        self.probed_ids += [p.sentence_id for p in group]
        if self.in_stream:  # the helper paid decoder steps of its own, the copies after it pay rows: estimate afresh
            ctl.per_token = None
        self._apply(moves)

    def _apply(self, moves: int) -> None:
        """The controller's rung to the stream, if it moved since ``moves``."""
        if len(self.controller.changes) != moves:
            self.config = dataclasses.replace(self.config, pruning=pruning_of(self.controller.setting, self.config.pruning))
            self.strategy.set_pruning(self.config.pruning)

    def _collate(self, group: List[Pending]) -> Dict[str, Any]:
        """The probes as one fairseq batch (their sources padded on the stream's side)."""
        src = data_utils.collate_tokens([p.source for p in group], self.pad, left_pad=self.input.left_pad)
        return {"id": torch.arange(len(group)), "nsentences": len(group),
                "net_input": {"src_tokens": src.to(self.model.device),
                              "src_lengths": torch.tensor([len(p.source) for p in group], device=self.model.device)}}

    def _helper(self) -> _Helper:
        """The probes' generator: the run's configuration, every sentence at a pinned rung."""
        if self.helper is None:
            self.helper = _Helper(self.spawn(self.config))
        return self.helper

    def report(self) -> None:
        print(PREFIX + self.controller.line(self.own_work), file=sys.stderr, flush=True)
        super().report()
