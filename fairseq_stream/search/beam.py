"""Fixed- and variable-width beam search (Yang2020 §2–3 and App. A.1; Freitag2017 §3).

One strategy covers FIXED-OURS / FIXED-STREAM (fixed width), VAR-BATCH / VAR-STREAM /
VAR-STR-FIFO (variable width: the pruning heuristics ``H`` of Freitag2017) and a
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
   best ``k`` unfinished ones (fairseq's ``SequenceGenerator``). Rule ``shrink`` (Freitag2017's
   baseline): every ended candidate among the beam's current ``k − finals`` best is final at
   once, and the beam shrinks by one for each;
4. the beam shrinks by one per final hypothesis, then the heuristics prune it (Freitag2017
   §3, with Yang2020 App. A.3's detail that the best score may be a final one):
   absolute threshold ``ap`` (δ): drop ``score ≤ best − δ``; relative threshold ``rp``: drop
   ``p ≤ rp · p_best``; relative local threshold ``rpl``: drop when the last word's
   probability ``≤ rpl ·`` the best last-word probability of the step;
5. a sentence ends with ``Z`` final hypotheses (``--beam-final-count``, as the reference
   code's ``find_top_z``; default ``k``; ``k`` for the fairseq and shrink rules) or an empty beam; its
   n-best list is the best ``nbest`` of them by ``score / length^lenpen`` (length counts EOS).
   Z = 1 is the strictest reading of App. A.1 (the first hypothesis to reach the top ends the
   sentence); it favours short outputs (−1.0 BLEU at k = 50 on the demo model, docs/results.md, "Variable-width streaming beam search"),
   while Z = k matches fairseq's BLEU at the same speed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.search.defaults import (
    NATIVE_SEARCH_KEY, PRUNED_WIDTH_BINS, PRUNED_WIDTH_KEY,
    DEFAULT_ABS_SCALE, default_abs_threshold, DEFAULT_FINALIZE, DEFAULT_MAX_CANDS_PER_NODE, PRESETS,
    PRUNE_AUTO_START, prune_auto_on,
)
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.interface import Hypothesis, StepOutcome, StrategyContext
from fairseq_stream.ops import beam_step as fused
from fairseq_stream.ops import native_step, packets
from fairseq_stream.ops.backends import BEAM_STEP, RUNGS_FEATURE, KernelRunner
from fairseq_stream.ops.beam_step import StepResult
from fairseq_stream.ops.packets import PacketView
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.model.native_loops import BeamLoopSearch, GreedySearch, NativeOutput
from fairseq_stream.model.row_cache import SentenceIndex
from fairseq_stream.search.score_edits import RowContext
from fairseq_stream.search.registry import check_beam_and_nbest, lenpen_of
from fairseq_stream.ops.pruning import (
    DEFAULT_REFERENCE, ENDED, REFERENCES, AbsoluteThreshold, BeamCandidates, PruningRule, RelativeLocalThreshold,
    RelativeThreshold, RungThreshold, StepView, SurprisalScaledThreshold,
)
from fairseq_stream.search.beam_rules import FINALIZATION_CODES, FINALIZATION_RULES, RuleDefaults, parse_pruning_rules
from fairseq_stream.search.region import BucketStatePool, RegionSearch, SearchInRegion, SentenceBucket
from fairseq_stream.search.state import PAD, StateOps, StrategyState, host, per_sentence, rows, transient


class Rung(NamedTuple):
    """A sentence's own pruning under per-sentence rungs (:meth:`BeamSearch.use_rungs`): δ (``inf`` = no
    threshold) and M (``None`` = no limit)."""

    delta: float
    max_cands: Optional[int]


@dataclass(frozen=True)
class Pruning:
    """The heuristics ``H`` (``None`` = off). Names follow Freitag2017; δ = ``abs_threshold``.

    ``reference`` is the best score that ap and rp measure from:

    * ``active`` — the best candidate on the beam (Freitag2017 Eqs. 1–2);
    * ``final`` — the best of those and of the finished hypotheses, by cumulative
      log-probability (Yang2020 App. A.3): a short finished hypothesis scores high, so it
      prunes every longer candidate and the outputs come out short;
    * ``normalized`` — the best candidate on the beam, or the best finished hypothesis's
      length-normalised score ``s/|y|^lenpen`` (the score the n-best list ranks by) scaled to
      each candidate's length ``|c|^lenpen``: a finished hypothesis prunes a candidate only
      when it is better per token, and still ends the search once it is.
    """

    abs_threshold: Optional[float] = None  # ap / δ, in log-probability
    abs_scale: Optional[float] = None  # α: δ becomes max(δ, α · ū) per sentence (SurprisalScaledThreshold)
    rel_threshold: Optional[float] = None  # rp in (0, 1], on probabilities
    rel_local_threshold: Optional[float] = None  # rpl in (0, 1], on the last word's probability
    max_cands_per_node: Optional[int] = None  # mc / M
    reference: str = DEFAULT_REFERENCE  # what ap and rp measure from: "final", "active" or "normalized"
    ended: str = "prune"  # ap and rp on ended candidates waiting on the beam: "prune" (Yang2020) or "keep"
    final_per_token: Optional[float] = None  # β: a finished hypothesis prunes only by β a token (ops/pruning._within)
    extra: Tuple[PruningRule, ...] = ()  # --prune-rules, after the three above

    def __post_init__(self) -> None:
        if self.abs_threshold is not None and not self.abs_threshold >= 0:
            raise FairseqStreamError(f"--prune-abs-threshold must be >= 0 (inf = off), got {self.abs_threshold}")
        if self.abs_scale is not None and not self.abs_scale >= 0:
            raise FairseqStreamError(f"--prune-abs-scale must be >= 0, got {self.abs_scale}")
        if self.final_per_token is not None and not self.final_per_token >= 0:
            raise FairseqStreamError(f"--prune-final-per-token must be >= 0 (nats a token), got {self.final_per_token}")
        if self.max_cands_per_node is not None and self.max_cands_per_node < 1:
            raise FairseqStreamError(f"--prune-max-cands-per-node must be >= 1, got {self.max_cands_per_node}")
        for flag, value in (("--prune-rel-threshold", self.rel_threshold),
                            ("--prune-rel-local-threshold", self.rel_local_threshold)):
            if value is not None and not 0.0 < value <= 1.0:
                raise FairseqStreamError(f"{flag} must be in (0, 1], got {value}")
        if self.reference not in REFERENCES:
            raise FairseqStreamError(f"--prune-reference must be one of {', '.join(REFERENCES)}, got {self.reference!r}")
        if self.final_per_token and self.reference != "normalized":
            raise FairseqStreamError(f"--prune-final-per-token compares with the best finished hypothesis's normalised score: "
                                     f"it needs --prune-reference normalized (the default), got {self.reference!r}")
        if self.ended not in ENDED:
            raise FairseqStreamError(f"--prune-ended must be one of {', '.join(ENDED)}, got {self.ended!r}")

    def rules(self) -> Tuple[PruningRule, ...]:
        """The keep-mask rules in order: ap, rp, rpl (Freitag2017 §3), then ``extra``."""
        built: Tuple[PruningRule, ...] = ()
        if self.abs_threshold is not None and self.abs_scale:
            built += (SurprisalScaledThreshold(self.abs_scale, self.abs_threshold, self.reference, self.ended,
                                                self.final_per_token or 0.0),)
        elif self.abs_threshold is not None:
            built += (AbsoluteThreshold(self.abs_threshold, self.reference, self.ended, self.final_per_token or 0.0),)
        if self.rel_threshold is not None:
            built += (RelativeThreshold(self.rel_threshold, self.reference, self.ended),)
        if self.rel_local_threshold is not None:
            built += (RelativeLocalThreshold(self.rel_local_threshold),)
        return built + self.extra


#: what makes a sentence of a sentence bucket inert again after it finished (no candidate; steps bounded)
#: (an ended flag is read only with a finite score)
_RESETS: Dict[str, Any] = dict(scores=-math.inf, steps=0)

#: what an option means when it is left unset (None) and no preset sets it
_UNSET = {"prune_reference": DEFAULT_REFERENCE, "beam_finalize": DEFAULT_FINALIZE}


def option_value(opts: Any, option: str) -> Any:
    """``option``'s value after ``--prune-preset`` (checked by :mod:`fairseq_stream.engine.validation`):
    as given, else the preset's, else its default (``None`` for the thresholds: the strategy's own)."""
    given = getattr(opts, option, None)
    if given is not None:
        return given
    preset = PRESETS.get(getattr(opts, "prune_preset", None) or "")
    values = dict(preset[1]) if preset is not None else {}
    if option in values:
        return values[option]
    return _UNSET.get(option)


@dataclass(frozen=True)
class BeamConfig:
    """A fixed-width beam (FIXED-OURS, FIXED-STREAM, top-up); validated when built."""

    beam: int
    nbest: int = 1
    final_count: int = 0  # Z: final hypotheses that end a sentence (0 = beam; the reference code's find_top_z)
    lenpen: float = 1.0
    finalize: str = DEFAULT_FINALIZE  # "ours" (Yang2020 App. A.1), "fairseq" or "shrink" (Freitag2017)
    pruning: Pruning = Pruning()

    def __post_init__(self) -> None:
        check_beam_and_nbest(self.beam, self.nbest)
        if self.final_count < 0:
            raise FairseqStreamError(f"--beam-final-count must be >= 0, got {self.final_count}")
        if self.final_count and not self.nbest <= self.final_count <= self.beam:
            raise FairseqStreamError(
                f"--beam-final-count must be between --nbest ({self.nbest}) and --beam ({self.beam}), got {self.final_count}"
            )
        if self.finalize not in FINALIZATION_RULES:
            raise FairseqStreamError(f"--beam-finalize must be one of {', '.join(FINALIZATION_RULES)}, got {self.finalize!r}")
        if self.final_count not in (0, self.beam) and self.finalize != "ours":
            # only rule 'ours' counts final hypotheses (its ends_at); the others end at --beam
            raise FairseqStreamError(
                f"--beam-final-count {self.final_count} has no effect under --beam-finalize {self.finalize} (a sentence "
                f"ends after --beam final hypotheses there); drop it or use --beam-finalize ours")

    @property
    def rows_per_sentence(self) -> int:
        return self.beam

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "BeamConfig":
        return cls(beam=int(gen_cfg.beam), nbest=int(gen_cfg.nbest), final_count=int(opts.beam_final_count),
                   lenpen=lenpen_of(gen_cfg), finalize=option_value(opts, "beam_finalize"),
                   pruning=cls.pruning_from_options(opts, name, int(gen_cfg.beam)))

    @staticmethod
    def pruning_from_options(opts: Any, name: str = "", beam: Optional[int] = None) -> Pruning:
        return Pruning()


@dataclass(frozen=True)
class VariableBeamConfig(BeamConfig):
    """A variable-width beam (VAR-BATCH, VAR-STREAM, VAR-STR-FIFO): the heuristics ``H`` on,
    by default Yang2020's δ = 1.5 and M = 5 (§4.1), δ growing with k above 5 (``default_abs_threshold``: 1.75 at
    k = 50) and widened per sentence and step by its best candidate's surprisal (``DEFAULT_ABS_SCALE``). Each
    sentence's pruning reads only its own candidates (issue 81), so every var-* search, batching, stream and shard
    gives it the same output."""

    @staticmethod
    def pruning_from_options(opts: Any, name: str = "", beam: Optional[int] = None) -> Pruning:
        ap, mc = option_value(opts, "prune_abs_threshold"), option_value(opts, "prune_max_cands_per_node")
        if prune_auto_on(opts):  # the controller sets where it starts (integration/prune_auto.py)
            ap, mc = PRUNE_AUTO_START
        scale = option_value(opts, "prune_abs_scale")
        if scale is None and ap is None:  # an explicit δ (Yang2020's rule, the presets) stays fixed
            scale = DEFAULT_ABS_SCALE
        ap = default_abs_threshold(beam) if ap is None else ap
        mc = DEFAULT_MAX_CANDS_PER_NODE if mc is None else mc
        reference = option_value(opts, "prune_reference")
        return Pruning(abs_threshold=None if math.isinf(ap) else float(ap), abs_scale=scale,
                       rel_threshold=option_value(opts, "prune_rel_threshold"),
                       rel_local_threshold=option_value(opts, "prune_rel_local_threshold"), max_cands_per_node=int(mc),
                       reference=reference, ended=opts.prune_ended,
                       final_per_token=_final_per_token(opts),
                       extra=parse_pruning_rules(opts.prune_rules, RuleDefaults(reference, opts.prune_ended)))


def _final_per_token(opts: Any) -> Optional[float]:
    """β of --prune-final-per-token: only where given (issue 81, round 3: the default widens δ per sentence instead,
    DEFAULT_ABS_SCALE; β lengthened outputs by each model's own amount). The Triton step lacks β: on a GPU a given β
    runs the reference beam step."""
    given = getattr(opts, "prune_final_per_token", None)
    return None if given is None else float(given)


def _union(parts: Sequence[int]) -> int:
    out = 0
    for bits in parts:
        out |= bits
    return out


@dataclass
class BeamState(StrategyState):
    """The beams of a group of ``S`` sentences, ``k`` slots each, all on the device.

    Empty slots have score ``-inf``. ``tokens``/``token_scores`` are left-aligned buffers of
    ``L`` columns (the longest maximum length + 2, allocated once): sentence ``s`` uses the
    first ``steps[s]`` columns. ``ended`` slots hold candidates that produced EOS
    ``ended_len`` tokens in and wait on the beam (rule ``ours``). Final hypotheses go to the
    ``fin_*`` buffers (``Z`` slots and one scratch slot); the step that finishes a sentence
    reads their lengths and scores with its control values. ``row_slot`` (R,) is the flat slot ``s·k + j`` of every decoder
    row, in row order. ``t``/``min_max_len`` are host-known bounds (steps, maximum length).
    """

    sentences: Tensor  # (S,) pool indices
    scores: Tensor  # (S, k) cumulative log-probability
    ended: Tensor  # (S, k) bool
    ended_len: Tensor  # (S, k) generated tokens of an ended candidate, EOS included
    tokens: Tensor = per_sentence(pad=PAD)  # (S, k, L) generated tokens
    token_scores: Tensor = per_sentence(pad=0.0)  # (S, k, L)
    steps: Tensor = per_sentence()  # (S,) tokens generated so far
    max_len: Tensor = per_sentence()  # (S,)
    n_final: Tensor = per_sentence()  # (S,) final hypotheses so far
    best_final: Tensor = per_sentence()  # (S,) best cumulative log-probability of a final hypothesis
    best_final_norm: Tensor = per_sentence()  # (S,) best length-normalised score of a final hypothesis
    src_lengths: Tensor = per_sentence()  # (S,)
    fin_tokens: Tensor = per_sentence(pad=PAD)  # (S, Z + 1, L) final hypotheses, EOS included
    fin_scores: Tensor = per_sentence(pad=0.0)  # (S, Z + 1, L) their positional scores
    fin_len: Tensor = per_sentence()  # (S, Z + 1)
    fin_total: Tensor = per_sentence()  # (S, Z + 1) cumulative log-probability
    rung: Tensor = per_sentence()  # (S,) its per-sentence rung (:meth:`BeamSearch.use_rungs`); 0 = the run's pruning
    row_slot: Tensor = rows()  # (R,)
    t: int = host(max)  # host: max(steps)
    min_max_len: int = host(min)  # host: min(max_len)
    t_min: int = host(min)  # host: min(steps)
    rungs_in: int = host(_union)  # host: the pinned rungs (≥ 1) among the sentences, as bits; 0 = none
    bucket: Optional[SentenceBucket] = transient()  # the bucket state of a step of fixed shapes (search/region.py)

    @property
    def live(self) -> Tensor:
        """(S, k) slots that need a decoder row."""
        return torch.isfinite(self.scores) & ~self.ended


class BeamSearch(SearchInRegion, StateOps):
    """The strategy object the scheduler drives (see :mod:`fairseq_stream.search.interface`).

    A step is the output layer's candidates, then the search step proper, the operator
    ``beam_step`` of :mod:`fairseq_stream.ops.backends` (the C++ kernel on a CPU, two Triton
    kernels on CUDA, the PyTorch reference below for a user's pruning rule or on request); every
    backend updates the state in place and prepares the step's one host read (:meth:`_outcome`).
    """

    def __init__(self, cfg: BeamConfig, scorer: OutputScorer, *, eos: int, pad: int,
                 bos: int, needs_history: bool = False, dtype: torch.dtype = torch.float32, stats: Any = None,
                 step_backend: str = "auto") -> None:
        self.cfg = cfg
        self.stats = stats
        self.runner = KernelRunner(step_backend, stats)
        self.dtype = dtype
        self.scorer = scorer
        self.eos, self.pad, self.bos = eos, pad, bos
        self.needs_history = needs_history
        self.k = self.rows_per_sentence = cfg.beam
        self.finalizer = FINALIZATION_RULES[cfg.finalize]
        self.final_width = self.finalizer.width(self.k)
        self.done_at = self.finalizer.ends_at(self.k, cfg.final_count)
        self.rungs: Optional[List[Rung]] = None  # per-sentence rungs (use_rungs); None: one pruning for all
        self.pin: Optional[Callable[[Tensor], Optional[Tensor]]] = None
        self.pinned: Dict[int, int] = {}  # handle → rung (≥ 1) of the pinned sentences in flight
        # metered rungs (use_rungs(meter=True)): handle → decoder rows a pinned sentence took so far, kept until
        # take_rows; and their sum over the run
        self.pinned_rows: Optional[Dict[int, int]] = None
        self.pinned_rows_total = 0
        self._use_rules(cfg.pruning)
        self._len_pow: Dict[Tuple[Any, ...], Tensor] = {}  # (dtype, device, lenpen) → the table
        self.buckets = BucketStatePool()  # the groups' bucket states of those steps

    def set_pruning(self, pruning: Pruning) -> None:
        """Prune with ``pruning`` from the next step on, every sentence in flight included (``--prune-auto``'s
        controller moves between batches; sentences that started under no rule have no best final score to
        measure from yet, so they prune a little less until one is final)."""
        self.cfg = replace(self.cfg, pruning=pruning)
        self._use_rules(pruning)

    def use_rungs(self, rungs: Sequence[Rung], pin: Callable[[Tensor], Optional[Tensor]], *,
                  meter: bool = False) -> None:
        """Prune each sentence at its own rung from now on: rung 0 is the run's pruning (``set_pruning``
        moves it), rung ``i`` ≥ 1 is ``rungs[i - 1]`` (δ, M), pinned for the sentence's lifetime;
        ``pin(handles)`` says which rung the sentences of a refill take (None: 0). ``--prune-auto``'s
        probes (the fixed beam and the faster rung) so share the steps of the run's sentences.

        A group's output layer gives each row as many candidates as the widest rung *among its sentences*
        needs (a group with none pinned: the run's own), so sentences at rung 0 pay nothing for a table of wide
        rungs. ``meter``: count each pinned sentence's decoder rows (:meth:`take_rows`)."""
        if self.cfg.pruning.abs_scale:
            raise FairseqStreamError("per-sentence rungs take δ as it is: not with --prune-abs-scale")
        self.rungs, self.pin = list(rungs), pin
        if meter and self.pinned_rows is None:
            self.pinned_rows = {}
        self._use_rules(self.cfg.pruning)

    def unpin_all(self) -> None:
        """Forget every pinned sentence in flight (dropped unfinished); their rows so far stay in the total."""
        self.pinned.clear()
        if self.pinned_rows is not None:
            self.pinned_rows.clear()

    def take_rows(self, handle: int) -> int:
        """The decoder rows (expansions) the pinned sentence ``handle`` took, once it finished (metered rungs)."""
        return 0 if self.pinned_rows is None else self.pinned_rows.pop(handle, 0)

    def row_width(self, state: BeamState) -> int:
        """Candidates per row the output layer gives ``state``'s rows: the widest of its sentences' rungs."""
        if not state.rungs_in:
            return self.per_row
        widths = self.rung_widths
        return max([self.per_row] + [widths[i] for i in range(1, len(widths)) if state.rungs_in >> i & 1])

    def rung_table(self) -> List[Rung]:
        """(δ, M) of every rung, the run's first (inf = no threshold, None = no limit)."""
        run = self.cfg.pruning
        own = Rung(math.inf if run.abs_threshold is None else float(run.abs_threshold), run.max_cands_per_node)
        return [own] + list(self.rungs or ())

    def _use_rules(self, pruning: Pruning) -> None:
        self.rules = pruning.rules()
        per_row = self.finalizer.expansions(self.k)
        mc = pruning.max_cands_per_node
        self.per_row = min(per_row, mc) if mc else per_row
        self.rung_deltas: List[float] = []  # each rung's δ and M as the step reads them (inf = none): they change only here
        self.rung_caps: List[float] = []
        if self.rungs is not None:
            # ap by each sentence's own δ, first as ap is; M by each sentence's own, from the widest rung's expansions
            self.rules = (RungThreshold(pruning.reference, pruning.ended),) + tuple(
                r for r in self.rules if type(r) is not AbsoluteThreshold)
            table = self.rung_table()
            self.rung_widths = [min(per_row, m) if m else per_row for _, m in table]  # candidates per row of each
            self.rung_deltas = [d for d, _ in table]
            self.rung_caps = [math.inf if m is None else float(m) for _, m in table]
        self.kernel_rules = fused.encode_rules(self.rules)  # None: a rule the operator does not know
        # how much each sentence is pruned (the closing line, --stream-stats): metered where something prunes
        # (not under --prune-auto's rungs: its probes are sentences too, and its closing words say what it chose)
        metered = (self.rules or self.per_row < per_row) and self.k > 1 and self.rungs is None
        self.widths: Optional[Dict[int, List[int]]] = (getattr(self, "widths", None) or {}) if metered else None
        if self.rungs is not None:  # the rungs' table travels with the rules (ops/beam_step.py)
            self.kernel_rules = fused.with_rungs(self.kernel_rules, list(zip(self.rung_deltas, self.rung_caps)))
        # what some fused backends lack (ops/backends.py, BEAM_STEP.lacks): those run the reference
        self.step_features: Tuple[str, ...] = (
            ("--prune-abs-scale",) if any(type(rule) is SurprisalScaledThreshold for rule in self.rules) else ()) + (
            ("--prune-final-per-token",) if any(getattr(rule, "final_per_token", 0) for rule in self.rules) else ()) + (
            (RUNGS_FEATURE,) if self.rungs is not None else ())

    @classmethod
    def from_config(cls, cfg: BeamConfig, ctx: StrategyContext) -> "BeamSearch":
        return cls(cfg, ctx.scorer, eos=ctx.eos, pad=ctx.pad, bos=ctx.bos, needs_history=ctx.needs_history,
                   dtype=ctx.dtype, stats=ctx.stats, step_backend=ctx.step_backend)

    # ---- the interface -------------------------------------------------------------------
    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, *,
                   longest: Optional[int] = None, shortest: Optional[int] = None) -> StepOutcome:
        s, k, z = len(sentences), self.k, self.done_at
        dev = sentences.device
        if longest is None or shortest is None:  # callers outside the scheduler
            longest, shortest = (int(max_len.max()), int(max_len.min())) if s else (0, 0)
        width = longest + 2  # max_len tokens, the forced EOS, one spare column
        scores = torch.full((s, k), -math.inf, dtype=self.dtype, device=dev)
        scores[:, 0] = 0.0
        rung, rungs_in = self._pinned(sentences)
        state = BeamState(
            # Own copies: a step updates the state in place (the caller's tensors live on elsewhere).
            sentences=sentences.clone(),
            scores=scores,
            ended=torch.zeros(s, k, dtype=torch.bool, device=dev),
            ended_len=torch.zeros(s, k, dtype=torch.long, device=dev),
            tokens=torch.full((s, k, width), self.pad, dtype=torch.long, device=dev),
            token_scores=torch.zeros(s, k, width, dtype=self.dtype, device=dev),
            steps=torch.zeros_like(sentences),
            max_len=max_len.clone(),
            n_final=torch.zeros_like(sentences),
            best_final=torch.full((s,), -math.inf, dtype=self.dtype, device=dev),
            best_final_norm=torch.full((s,), -math.inf, dtype=self.dtype, device=dev),
            src_lengths=src_lengths.clone(),
            fin_tokens=torch.full((s, z + 1, width), self.pad, dtype=torch.long, device=dev),
            fin_scores=torch.zeros(s, z + 1, width, dtype=self.dtype, device=dev),
            fin_len=torch.zeros(s, z + 1, dtype=torch.long, device=dev),
            fin_total=torch.full((s, z + 1), -math.inf, dtype=self.dtype, device=dev),
            rung=rung,
            row_slot=torch.arange(s, device=dev) * k,
            t=0,
            min_max_len=shortest,
            rungs_in=rungs_in,
        )
        feed = torch.full((s, 1), self.bos, dtype=torch.long, device=dev)
        return StepOutcome(state=state, parents=None, feed=feed, row_counts=[1] * s)

    def _pinned(self, handles: Tensor) -> Tuple[Tensor, int]:
        """(S,) the rungs of a refill's sentences (0: the run's pruning), and those present as bits."""
        pinned = self.pin(handles) if self.pin is not None else None
        if pinned is None:
            return torch.zeros_like(handles), 0
        rungs_in = 0
        for handle, rung in zip(handles.tolist(), pinned.tolist()):  # the host knows its refills
            if rung:
                self.pinned[handle] = rung
                rungs_in |= 1 << rung
                if self.pinned_rows is not None:
                    self.pinned_rows[handle] = 1  # its first step's one row
                    self.pinned_rows_total += 1
        return pinned.to(device=handles.device, dtype=torch.long).clone(), rungs_in

    def length(self, state: BeamState) -> int:
        return state.t + 1 if state.size else 0

    # ---- the "region" hook (search/region.py: SearchInRegion) ----------------------------------
    def _tail(self, state: BeamState) -> Any:
        # the rows' context only where the step asks for it: a step whose rows are the last step's reordered
        # gathers it from their parents' (one token on, the same maximum length)
        return self.scorer.tail(self.row_width(state), lambda: self._row_context(state, state.row_slot),
                                follow=one_token_on)

    def _region_search(self, state: BeamState) -> RegionSearch:
        """The search step as the static step's region runs it, over the group's bucket state of sentences (made here
        where the group has none that fits: :mod:`fairseq_stream.search.region`)."""
        bucket, next_rows = self.buckets.hold(state, self._inert, rows_per_sentence=self.k,
                                             packet_size=lambda n: packets.BEAM_STEP.starts(n, self.done_at)[-1])
        len_pow = self._length_penalties(bucket.state)
        config = (self.k, self.final_width, self.done_at, self.finalizer.name, str(self.kernel_rules), tuple(self.rung_table()))

        dtype = state.scores.dtype

        def launch(whole: BeamState, outputs: Sequence[Tensor]) -> Tuple[Tensor, str]:
            top_lp, top_tok = outputs[0].to(dtype), outputs[1]
            # every row of the row bucket: the live ones' slots, then padding rows' (−1)
            full = replace(whole, row_slot=bucket.rows[4, : top_lp.size(0)])
            result, backend = self._launch_step(full, top_lp, top_tok, len_pow)
            bucket.rows.copy_(result.rows)
            return result.packet, backend

        return RegionSearch(bucket, launch, resets=_RESETS, finished_at=self._finished_at(bucket.size), config=config,
                            fits=lambda rows: rows <= bucket.rows.size(1), extra=[len_pow], next_rows=next_rows)

    def _searched(self, state: BeamState) -> StepOutcome:
        """The outcome of a step whose search ran in the region: its packet read (the step's one read)."""
        bucket = state.bucket
        packet = self.runner.read(BEAM_STEP, bucket.packet, bucket.backend, s=bucket.size, z=self.done_at)
        out = self._outcome(state, StepResult(bucket.packet, bucket.rows, True), packet, bucket_size=bucket.size,
                            own_finals=True)
        if out.state.size:
            out.state.bucket = bucket
        else:  # the group ended: its bucket state goes back to the pool (its hypotheses were copied out)
            self.buckets.release(bucket)
        return out

    def share_pools(self, pool: Callable[[type, Callable[[], Any]], Any]) -> None:
        super().share_pools(pool)
        self._len_pow = pool(type(self), dict)  # the length penalties, read by those graphs too

    # ---- the "ahead" hook: the beams' steps run ahead natively -------------------------------------
    def native_search(self, state: BeamState, most_calls: int) -> "Optional[GreedySearch | BeamLoopSearch]":
        """What a native loop needs to search ``state``'s steps itself, at most ``most_calls`` decoder calls and no more
        than reach a sentence's maximum length: the greedy loop's (:class:`GreedySearch`), a wider beam's
        (:meth:`_native_beam`); or None where it cannot give what :meth:`step` gives bit for bit: (k = 1) Z > 1,
        pruning rules or rungs, an output layer other than the fused one on the C++ operator, a score edit other than
        fairseq's own (pad, ``--unkpen`` >= 0, the maximum and minimum lengths), n-gram blocking, a bucket state."""
        self._loop = None
        if self.k != 1:
            self._loop = self._native_beam(state, most_calls)
            return self._loop
        if (self.done_at != 1 or self.rules or self.rungs is not None or state.rungs_in
                or self.needs_history or state.bucket is not None or not state.size):
            return None
        fields = (state.scores, state.tokens, state.token_scores, state.steps, state.max_len)
        if (state.scores.dtype not in (torch.float32, torch.float64) or state.scores.device.type != "cpu"
                or not all(t.is_contiguous() for t in fields)):
            return None
        calls = min(most_calls, state.min_max_len - state.t + 1)  # the call after which a row is at its maximum
        if calls < 2:  # one call is a plain step
            return None
        output = self.scorer.native_output(self.row_width(state), eos=self.eos, pad=self.pad)
        if output is None:
            return None
        return GreedySearch(state.scores, state.tokens, state.token_scores, state.steps, state.max_len, calls, output)

    def _native_beam(self, state: BeamState, most_calls: int) -> Optional[BeamLoopSearch]:
        """What the native beam loop needs to search the steps of ``state``'s beams (k > 1) itself
        (:class:`BeamLoopSearch`: ``decoder_beam_search`` runs :meth:`_search_natively`'s call after each decoder call),
        at most ``most_calls`` calls and no more than reach a sentence's maximum length; or None where that call could
        not search them (:meth:`_search_natively`'s conditions). Pruned widths are metered after the loop
        (:meth:`ran_ahead`)."""
        calls = min(most_calls, state.min_max_len - state.t + 1)  # the call after which a row is at its maximum
        if state.bucket is not None or calls < 2:
            return None
        native = self._native_operator(state, self.row_width(state))
        if native is None:
            return None
        output, tensors, config, params, packet_at = native
        return BeamLoopSearch(tensors, state.row_slot, self._length_penalties(state), config, params, packet_at, self.k,
                              state.t_min, calls, output)

    def ran_ahead(self, state: BeamState, steps: int) -> BeamState:
        """``state`` after ``steps`` steps the native loop searched in place (no sentence ended in them); a beam's
        rows are those of its last call (whose step the loop may have searched too: :meth:`ahead_outcome`)."""
        new = replace(state, t=state.t + steps, t_min=state.t_min + steps)
        loop, self._loop = getattr(self, "_loop", None), None
        self._ahead_step = None
        if loop is not None and loop.ran is not None:
            new.row_slot = loop.ran.row_slot
            self._ahead_step = loop.ran.searched
            if self.widths is not None and self.stats is not None:  # each step's sentences' rows, as _outcome reads them
                for packet in loop.ran.step_packets[:steps]:
                    view = packets.BEAM_STEP.read(packet, state.size, self.done_at)
                    self._meter_widths(view.ints("sentence"), view.ints("row_count"), {})
        return new

    def ahead_outcome(self, state: BeamState) -> StepOutcome:
        """The outcome of the native beam loop's last call, whose step it searched itself (a sentence finished, or the
        rows changed or need the arena grown): :meth:`_search_natively`'s from that step's packet."""
        packet, rows = self._ahead_step
        self._ahead_step = None
        return self._natively_searched(state, packet, rows)

    def _step_after(self, state: BeamState, scores: Tensor, top: Optional[Tuple[Tensor, ...]]) -> StepOutcome:
        """One step of every sentence of the group from the rows' next-token scores ``(R, 1, V)``
        (``top``: each row's best candidates, where the decoder step ran :meth:`output_tail`)."""
        if top is None:
            c = min(self.row_width(state), scores.size(-1))
            searched = self._search_natively(state, scores, c)
            if searched is not None:
                return searched
            top = self.scorer.top(scores[:, -1], c, self._row_context(state, state.row_slot))[:2]
        top_lp, top_tok = top
        return self.search_step(state, top_lp.to(state.scores.dtype), top_tok)

    def _search_natively(self, state: BeamState, scores: Tensor, c: int) -> Optional[StepOutcome]:
        """The step's search as one C++ call (``searched_beam_step``, ``ops/csrc/decoder_step.cpp``): the fused output
        layer's ``c`` best candidates a row with fairseq's edits, then the beam operator — what :meth:`OutputScorer.top`
        and :meth:`search_step` give, bit for bit, without the interpreter between them (at k = 5 and batch 1 they were a
        fifth of a step). None where that call cannot give it (the caller runs them): float32 scores on the CPU, the
        fused layer on the C++ top-k (:meth:`~OutputScorer.native_output`), no row at its maximum length, the C++ beam
        operator chosen for this step, no rungs and no n-gram history."""
        if (scores.dtype != torch.float32 or scores.device.type != "cpu" or scores.dim() != 3 or scores.size(1) != 1
                or state.t >= state.min_max_len):
            return None
        native = self._native_operator(state, c)
        if native is None:
            return None
        output, tensors, config, params, packet_at = native
        below_min = None  # MinLength: the rows whose sentence is short of --min-len (none once every one is past it)
        if output.min_len > 0 and state.t_min < output.min_len:
            below_min = state.steps.index_select(0, state.row_slot // self.k) < output.min_len
        _, window, eos, pad, unk, unk_penalty, _ = output.operands()
        packet, rows = torch.ops.fairseq_stream.searched_beam_step(
            scores[:, -1], c, window, eos, pad, unk, unk_penalty, below_min, state.row_slot, tensors,
            self._length_penalties(state), config, params, packet_at)
        return self._natively_searched(state, packet, rows)

    def _natively_searched(self, state: BeamState, packet: Tensor, rows: Tensor) -> StepOutcome:
        """The outcome of a step the C++ operator searched from C++ (``searched_beam_step``): recorded, its packet read
        once, as :meth:`search_step`'s."""
        tensors = [getattr(state, name) for name in fused.FIELDS]
        ran = self.runner.ran(BEAM_STEP, tensors, StepResult(packet, rows, True), "cpp", s=state.size, z=self.done_at)
        if self.stats is not None:
            self.stats.add_extra(NATIVE_SEARCH_KEY)
        return self._outcome(state, ran.result, ran.packet)

    def _native_operator(self, state: BeamState, c: int) -> Optional[Tuple[NativeOutput, List[Tensor], List[int],
                                                                           List[float], List[int]]]:
        """What a native search of ``state``'s steps passes the C++ calls: the fused output layer's constants for ``c``
        candidates a row, the beam operator's state tensors (updated in place), ``config``, ``params`` and packet
        offsets; or None where those calls would not give :meth:`step`'s bits: float32 state on the CPU, the fused
        layer on the C++ top-k (:meth:`~OutputScorer.native_output`), the C++ operator chosen for this step, no rungs,
        no n-gram history."""
        if (state.scores.dtype != torch.float32 or state.scores.device.type != "cpu" or self.rungs is not None
                or state.rungs_in or self.needs_history or self.kernel_rules is None or native_step.kernel() is None):
            return None
        output = self.scorer.native_output(c, eos=self.eos, pad=self.pad)
        tensors = [getattr(state, name) for name in fused.FIELDS]
        if (output is None or not fused.fits(tensors, state.scores)
                or self.runner.choose(BEAM_STEP, tensors, True, self.step_features) != "cpp"):
            return None
        config, params, packet_at = fused.cpp_operands(
            tensors, k=self.k, width=self.final_width, final_count=self.done_at, eos=self.eos, pad=self.pad,
            finalize=FINALIZATION_CODES[self.finalizer.name], track_best=bool(self.rules), rules=self.kernel_rules)
        return output, tensors, config, params, packet_at

    def search_step(self, state: BeamState, top_lp: Tensor, top_tok: Tensor) -> StepOutcome:
        """The step after the output layer, from each row's best ``c`` candidates ``(R, c)``, by
        the backend :mod:`fairseq_stream.ops.backends` picks (the reference for a user's rule)."""
        ran = self._run_step(state, top_lp, top_tok)
        return self._outcome(state, ran.result, ran.packet)

    def _finished_at(self, size: int) -> int:
        return packets.BEAM_STEP.starts(size, self.done_at)[packets.BEAM_STEP.index["finished"]]

    def _run_step(self, state: BeamState, top_lp: Tensor, top_tok: Tensor) -> Any:
        """The operator over ``state`` (updated in place), its packet read once."""
        args, options = self._operands(state, top_lp, top_tok, self._length_penalties(state))
        return self.runner.run(BEAM_STEP, *args, **options)

    def _launch_step(self, state: BeamState, top_lp: Tensor, top_tok: Tensor, len_pow: Tensor) -> Tuple[StepResult, str]:
        """:meth:`_run_step` in device operations only (the region's: no read)."""
        args, options = self._operands(state, top_lp, top_tok, len_pow)
        return self.runner.launch(BEAM_STEP, *args, **options)

    def _operands(self, state: BeamState, top_lp: Tensor, top_tok: Tensor,
                  len_pow: Tensor) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        """What the runner takes after the operator: the state's tensors, the inputs, the configuration and the
        reference, backend and packet options."""
        tensors = [getattr(state, name) for name in fused.FIELDS]
        if self.rungs is not None:  # the rungs travel with the operator's state (their table is in kernel_rules)
            tensors.append(state.rung)
        config = dict(k=self.k, width=self.final_width, final_count=self.done_at, eos=self.eos, pad=self.pad,
                      finalize=FINALIZATION_CODES[self.finalizer.name], track_best=bool(self.rules), rules=self.kernel_rules)
        options = dict(reference=lambda: self._reference_step(state, top_lp, top_tok, len_pow),
                       fits=self.kernel_rules is not None and fused.fits(tensors, top_lp), features=self.step_features,
                       s=state.size, z=self.done_at)
        return (tensors, (top_lp, top_tok, state.row_slot, len_pow), config), options

    @property
    def _inert(self) -> Dict[str, Any]:
        """Each per-sentence field of an inert sentence (no candidate; the padding contract of ops/beam_step.py)."""
        return dict(_RESETS, sentences=-1, ended=False, ended_len=0, tokens=self.pad, token_scores=0.0, max_len=0, n_final=0,
                    best_final=-math.inf, best_final_norm=-math.inf, src_lengths=0, fin_tokens=self.pad,
                    fin_scores=0.0, fin_len=0, fin_total=-math.inf, rung=0)

    def _length_penalties(self, state: BeamState) -> Tensor:
        """(L + 1,) ``n^lenpen`` for every length ``n`` a candidate can have (one table for the
        kernel and the reference, so both divide by the same numbers)."""
        need = state.tokens.size(2) + 1
        key = (state.scores.dtype, state.scores.device, self.cfg.lenpen)
        table = self._len_pow.get(key)
        if table is None or table.numel() < need:
            # generous from the start: a table that grows is another address for the step graphs that read it
            size = max(need, 512, 2 * (0 if table is None else table.numel()))
            table = self._len_pow[key] = torch.arange(size, device=key[1]).to(key[0]).pow(self.cfg.lenpen)
        return table

    # ---- the PyTorch reference of the search step -------------------------------------------
    def _reference_step(self, state: BeamState, top_lp: Tensor, top_tok: Tensor, len_pow: Tensor) -> StepResult:
        """The step in PyTorch operations, on any device; the contract of :mod:`fairseq_stream.ops.beam_step`."""
        cand = self._candidates(state, top_lp, top_tok, state.row_slot)
        lengths = self._lengths(state, cand)
        finals, keep = self.finalizer.split(cand, self.k, self.eos, state.n_final)
        self._record_finals(state, cand, finals, lengths, len_pow)
        keep = self._prune(state, cand, keep, lengths, len_pow)
        return self._advance(state, cand, keep, state.row_slot)

    def _row_context(self, state: BeamState, row_slot: Tensor) -> RowContext:
        row_s = row_slot // self.k
        history = None
        if self.needs_history:  # n-gram blocking works on the host anyway
            flat = state.tokens.view(-1, state.tokens.size(2)).index_select(0, row_slot)
            row_steps = state.steps.index_select(0, row_s).tolist()
            bos = flat.new_full((1,), self.bos)
            history = _RaggedHistory([torch.cat([bos, flat[i, :n]]) for i, n in enumerate(row_steps)])
        may_reach_max = state.t >= state.min_max_len
        return RowContext(state.steps.index_select(0, row_s), state.max_len.index_select(0, row_s), history,
                          may_reach_max=may_reach_max, min_steps=state.t_min)

    def _candidates(self, state: BeamState, top_lp: Tensor, top_tok: Tensor, row_slot: Tensor) -> BeamCandidates:
        """Best ``final_width`` candidates per sentence, sorted.

        ``top_lp``/``top_tok`` (R, c): each row's best ``c`` next tokens (per-row top-k first).
        """
        s, k = state.scores.shape
        c = top_lp.size(1)
        # (S·k, c): expansions of every slot; empty and ended slots stay -inf. A padding row (slot -1) writes
        # a scratch row past the slots, dropped here.
        row_slot = torch.where(row_slot >= 0, row_slot, s * k)
        scores = torch.cat([state.scores.view(-1), state.scores.new_full((1,), -math.inf)])
        cand = top_lp.new_full((s * k + 1, c), -math.inf)
        cand.index_copy_(0, row_slot, scores.index_select(0, row_slot).unsqueeze(1).to(top_lp) + top_lp)
        cand = cand[: s * k]
        if self.rungs is not None:  # a sentence's expansions past its rung's M per row are no candidates
            caps = torch.tensor(self.rung_caps, device=cand.device)
            cap = caps.index_select(0, state.rung).repeat_interleave(k).unsqueeze(1)  # (S·k, 1)
            cand.masked_fill_(torch.arange(c, device=cand.device) >= cap, -math.inf)
        toks = top_tok.new_full((s * k + 1, c), self.pad).index_copy_(0, row_slot, top_tok)[: s * k]
        lps = top_lp.new_zeros(s * k + 1, c).index_copy_(0, row_slot, top_lp)[: s * k]
        # (S, k·c + k): expansions of every slot, then the ended candidates carried over.
        carry = state.scores.masked_fill(~state.ended, -math.inf).to(top_lp)
        pool = torch.cat([cand.view(s, k * c), carry], dim=1)
        pool = pool.masked_fill(torch.isnan(pool), -math.inf)  # NaN (fp16 overflow) is no candidate
        width = min(self.final_width, pool.size(1))
        val, idx = sorted_top(pool, width)
        is_carry = idx >= k * c
        flat = idx.clamp(max=k * c - 1)
        parent = torch.where(is_carry, idx - k * c, flat // c)
        tok = torch.where(is_carry, self.eos, toks.view(s, k * c).gather(1, flat))
        tok_lp = lps.view(s, k * c).gather(1, flat).masked_fill(is_carry, 0.0)
        return BeamCandidates(val, parent, tok, tok_lp, is_carry)

    def _record_finals(self, state: BeamState, cand: BeamCandidates, finals: Tensor, length: Tensor, len_pow: Tensor) -> None:
        """Write final candidates into the ``fin_*`` buffers (the first ``Z`` of a sentence), in place."""
        val, parent, tok_lp = cand.val, cand.parent, cand.tok_lp
        s, w = val.shape
        z = self.done_at
        rank = state.n_final.unsqueeze(1) + torch.cumsum(finals.long(), dim=1) - 1  # (S, W)
        ok = finals & (rank < z)
        dest = torch.where(ok, rank, z)  # the scratch slot takes the rest
        cols = state.tokens.size(2)
        gather = parent.unsqueeze(2).expand(s, w, cols)
        at = state.steps.view(s, 1, 1).expand(s, w, 1)  # the EOS column of a new final
        toks = state.tokens.gather(1, gather).scatter_(2, at, tok_lp.new_full((s, w, 1), self.eos, dtype=torch.long))
        lps = state.token_scores.gather(1, gather).scatter_(2, at, tok_lp.unsqueeze(2).to(state.token_scores.dtype))
        state.fin_tokens.scatter_(1, dest.unsqueeze(2).expand(s, w, cols), toks)
        state.fin_scores.scatter_(1, dest.unsqueeze(2).expand(s, w, cols), lps)
        state.fin_len.scatter_(1, dest, length)
        state.fin_total.scatter_(1, dest, val.to(state.fin_total.dtype))
        state.n_final.add_(ok.sum(dim=1))
        if not self.rules:  # only the pruning rules' references read the best finals
            return
        final_val = val.masked_fill(~ok, -math.inf).to(state.best_final)
        state.best_final.copy_(torch.maximum(state.best_final, final_val.max(dim=1).values))
        norm = final_val / len_pow[length]
        state.best_final_norm.copy_(torch.maximum(state.best_final_norm, norm.max(dim=1).values))

    def _lengths(self, state: BeamState, cand: BeamCandidates) -> Tensor:
        """(S, W) tokens of each candidate, its last included (an ended one's EOS)."""
        return torch.where(cand.carried, state.ended_len.gather(1, cand.parent), state.steps.unsqueeze(1) + 1)

    def _prune(self, state: BeamState, cand: BeamCandidates, keep: Tensor, lengths: Tensor, len_pow: Tensor) -> Tensor:
        """Beam shrink by the final count, then the pruning rules ``H``; returns the kept mask."""
        rank = torch.cumsum(keep.long(), dim=1)
        keep = keep & (rank <= self.finalizer.beam_width(state.n_final, self.k).unsqueeze(1))
        if not self.rules:
            return keep
        rung_delta = None
        if self.rungs is not None:
            deltas = torch.tensor(self.rung_deltas, dtype=torch.float64, device=keep.device)
            rung_delta = deltas.index_select(0, state.rung).unsqueeze(1)
        view = StepView(cand, cand.tok == self.eos, lengths, state.best_final, state.best_final_norm, self.cfg.lenpen,
                        length_scale=len_pow[lengths], rung_delta=rung_delta)
        before = keep
        for rule in self.rules:
            keep = rule.prune(view, keep)
        # The rules never leave a sentence without any hypothesis (δ = 0, rp = 1 or a rounding
        # threshold prune even the best): with no final one yet, its best candidate stays.
        stranded = (state.n_final == 0) & ~keep.any(dim=1)  # (S,)
        best = before & (torch.cumsum(before.long(), dim=1) == 1)
        return keep | (best & stranded.unsqueeze(1))

    def _advance(self, state: BeamState, cand: BeamCandidates, keep: Tensor, row_slot: Tensor) -> StepResult:
        """The new beams (in place) and the next rows, the finished sentences last."""
        val, parent, tok, tok_lp = cand.val, cand.parent, cand.tok, cand.tok_lp
        s, k = state.scores.shape
        done = (state.n_final >= self.done_at) | ~keep.any(dim=1)  # (S,)
        # Compact the kept candidates into k slots, best first.
        order = torch.argsort((~keep).to(torch.uint8), dim=1, stable=True)[:, :k]  # (S, k) positions in W
        slot_ok = keep.gather(1, order)
        new_parent = parent.gather(1, order)
        new_tok = tok.gather(1, order)
        new_lp = tok_lp.gather(1, order)
        was_ended = cand.carried.gather(1, order)  # carried = an ended candidate waiting on the beam
        ended = slot_ok & (was_ended | (new_tok == self.eos))
        state.ended_len.copy_(torch.where(was_ended, state.ended_len.gather(1, new_parent),
                                          (state.steps.unsqueeze(1) + 1).masked_fill(~ended, 0)))
        state.scores.copy_(val.gather(1, order).masked_fill(~slot_ok, -math.inf))
        state.ended.copy_(ended)
        cols = state.tokens.size(2)
        gather = new_parent.unsqueeze(2).expand(s, k, cols)
        at = state.steps.view(s, 1, 1).expand(s, k, 1)  # each sentence's next column
        state.tokens.copy_(state.tokens.gather(1, gather).scatter_(2, at, new_tok.masked_fill(was_ended, self.pad).unsqueeze(2)))
        state.token_scores.copy_(state.token_scores.gather(1, gather).scatter_(
            2, at, new_lp.masked_fill(was_ended, 0.0).unsqueeze(2).to(state.token_scores.dtype)))
        state.steps.add_(1)
        live = slot_ok & ~ended & ~done.unsqueeze(1)  # (S, k) slots that need a decoder row
        per_sentence = live.sum(dim=1)
        perm = torch.argsort(done.to(torch.uint8), stable=True)  # the sentences that go on first
        live = live.index_select(0, perm)
        # Rows in sentence-major order (a stable sort instead of a data-dependent nonzero).
        live_flat = torch.argsort((~live).view(-1).to(torch.uint8), stable=True)  # (S·k,) flat s·k + j
        row_of = torch.full((s * k + 1,), -1, dtype=torch.long, device=row_slot.device)  # + a padding rows' scratch
        row_of[torch.where(row_slot >= 0, row_slot, s * k)] = torch.arange(len(row_slot), device=row_slot.device)
        flat_parent = torch.arange(s, device=row_slot.device).unsqueeze(1) * k + new_parent
        parents = row_of[flat_parent].index_select(0, perm).view(-1).index_select(0, live_flat)
        feed = new_tok.index_select(0, perm).view(-1).index_select(0, live_flat)
        slot = (torch.cumsum(live.long(), dim=1) - 1).view(-1).index_select(0, live_flat)
        new_slot = torch.where(torch.arange(s * k, device=row_slot.device) < per_sentence.sum(), live_flat, -1)
        rows = torch.stack([parents, feed, slot, live_flat // k, new_slot])
        z = self.done_at
        by = perm
        packet = packets.BEAM_STEP.pack(dict(
            rows=per_sentence.sum(), finished=done.sum(), widest=per_sentence.max(), row_count=per_sentence[by],
            sentence=state.sentences[by], final_count=state.n_final[by], final_len=state.fin_len[by, :z],
            final_total=state.fin_total[by, :z], position=perm))
        return StepResult(packet, rows, False)

    # ---- the step's one host read ---------------------------------------------------------
    def _outcome(self, state: BeamState, result: StepResult, packet: PacketView, bucket_size: int = 0,
                 own_finals: bool = False) -> StepOutcome:
        """From the step's packet (read once, by the runner): the next rows are views of
        ``result.rows``; the state is in the packet's order, so the finished sentences are its
        last ones and what goes on is a view; their n-best lists come from the final buffers.
        ``bucket_size``: the step ran over a bucket state of that many sentences (the inert ones after
        ``state``'s, finished as far as the packet says); ``own_finals``: the hypotheses get tensors of
        their own (the bucket state is lent again once its group ends)."""
        s = state.size
        n_rows, widest = packet.scalar("rows"), packet.scalar("widest")
        going_on = (bucket_size or s) - packet.scalar("finished")
        n_done = s - going_on
        counts = packet.ints("row_count")[:going_on]
        rows = result.rows[:, :n_rows]
        new = replace(state, t=state.t + 1, t_min=state.t_min + 1)
        finished: Dict[int, List[Hypothesis]] = {}
        if n_done:
            finished = self._finished(state, packet, range(going_on, s), own=own_finals)
            new = new.split(going_on, n_rows, self.k)[0]
        if state.rungs_in:
            new.rungs_in = self._count_pinned(packet.ints("sentence"), counts, finished)
        if self.widths is not None and self.stats is not None:
            self._meter_widths(packet.ints("sentence"), counts, finished)
        new.row_slot = rows[4]
        index = SentenceIndex(new.sentences, rows[3], rows[2], widest)
        # Greedy with nobody finished: each sentence's one row goes on in place (the packet's order is the
        # old one), so the decoder rows need no reorder (at batch 1 it was ~5% of a step: tables, a sort).
        same_rows = self.k == 1 and not n_done and n_rows == s
        return StepOutcome(state=new, parents=None if same_rows else rows[0], feed=rows[1].unsqueeze(1),
                           finished=finished, index=index, row_counts=counts)

    def _meter_widths(self, sentences: Sequence[int], counts: Sequence[int], finished: Dict[int, Any]) -> None:
        """Each sentence's decoder rows and steps after its first (one row), from the step's packet; a finished
        one's mean width as a share of k goes to the statistics' histogram (``PRUNED_WIDTH_BINS`` bins)."""
        widths = self.widths
        for handle, rows in zip(sentences, counts):  # the sentences that go on, first in the packet
            seen = widths.get(handle)
            if seen is None:
                widths[handle] = [rows, 1]
            else:
                seen[0] += rows
                seen[1] += 1
        for handle in finished:
            rows, steps = widths.pop(handle, (0, 0))
            if steps:
                share = rows / (steps * self.k)
                self.stats.add_extra(f"{PRUNED_WIDTH_KEY}{min(int(share * PRUNED_WIDTH_BINS), PRUNED_WIDTH_BINS - 1)}")

    def _count_pinned(self, sentences: Sequence[int], counts: Sequence[int], finished: Dict[int, Any]) -> int:
        """The pinned sentences' rows of the next step metered, the finished ones forgotten; the pinned rungs
        still present, as bits (a group's output layer narrows when its wide probes leave)."""
        for handle in finished:
            self.pinned.pop(handle, None)
        rungs_in = 0
        for handle, rows in zip(sentences, counts):  # the sentences that go on, first in the packet
            rung = self.pinned.get(handle)
            if rung:
                rungs_in |= 1 << rung
                if self.pinned_rows is not None:
                    self.pinned_rows[handle] = self.pinned_rows.get(handle, 0) + rows
                    self.pinned_rows_total += rows
        return rungs_in

    def _finished(self, state: BeamState, packet: PacketView, positions: range,
                  own: bool = False) -> Dict[int, List[Hypothesis]]:
        """n-best lists of the finished sentences at ``positions`` of ``state`` (packet order):
        what the host knows of their final hypotheses was read with the step's packet. Token
        tensors stay on the device (views of the final-hypothesis buffers, or with ``own`` of one
        copy of the finished sentences' buffers)."""
        nbest = self.cfg.nbest if self.finalizer.cut_nbest else None
        z = self.done_at
        fin_tokens, fin_scores, first = state.fin_tokens, state.fin_scores, 0
        if own:
            first = positions.start
            fin_tokens, fin_scores = fin_tokens[first: positions.stop].clone(), fin_scores[first: positions.stop].clone()
        sentence, count = packet.ints("sentence"), packet.ints("final_count")
        lengths, totals = packet.ints("final_len"), packet["final_total"]
        out: Dict[int, List[Hypothesis]] = {}
        for i in positions:
            hyps = []
            for j in range(min(count[i], z)):
                length, total = lengths[i * z + j], totals[i * z + j]
                hyps.append(Hypothesis(fin_tokens[i - first, j, :length], total / (length ** self.cfg.lenpen),
                                       fin_scores[i - first, j, :length]))
            out[sentence[i]] = sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest]
            if self.stats is not None:  # how sentences end (short outputs), from what was read
                self._count_ending(count[i], hyps, out[sentence[i]][0] if hyps else None)
        return out

    def _count_ending(self, finals: int, hyps: List[Hypothesis], best: Optional[Hypothesis]) -> None:
        self.stats.add_extra("beam_finals", min(finals, self.done_at))
        if finals < self.done_at:  # the beam emptied (pruned away or all final) before Z finals
            self.stats.add_extra("beam_ended_short_of_z")
        if best is not None and best is hyps[0]:  # the first hypothesis to become final won
            self.stats.add_extra("beam_first_final_won")


def one_token_on(steps: Tensor, max_len: Tensor) -> Tuple[Tensor, Tensor]:
    """A beam row's output-layer context (tokens generated, maximum length) from its parent's at the last step:
    every sentence of a stepped group gained one token (``BeamState.steps`` + 1), its maximum stays."""
    return steps + 1, max_len


def sorted_top(pool: Tensor, width: int) -> Tuple[Tensor, Tensor]:
    """The ``width`` best of each row, best first, ties by the lower index (as the C++ operators)."""
    order = torch.sort(pool, dim=1, descending=True, stable=True).indices[:, :width]
    return pool.gather(1, order), order


class _RaggedHistory(list):
    """Histories of different lengths (rows of a FIFO group); ``tolist`` like a tensor."""

    def tolist(self) -> List[List[int]]:
        return [h.tolist() for h in self]
