"""Decoding statistics: the columns of Yang2020 Tables 4–7, Freitag2017's fan-out and Santilli2023's Iters.

Fan-out (Freitag2017 Tables 1–2) is per sentence: ``fanout_per_step`` the candidates one
sentence expands at a step, ``fanout_per_sentence`` those it expands in all.

Every generator of the package fills one :class:`DecodeStats` per run. ``timesteps`` counts
sequential decoder calls (a Jacobi iteration or an IBDecoder multi-word step is one);
``expansions`` counts the hypotheses fed through the decoder over all steps (Yang2020's
"candidate expansions").
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from fairseq_stream.search.defaults import PRUNED_WIDTH_BINS, PRUNED_WIDTH_KEY
from fairseq_stream.search.parallel_gate import seconds_per_token


@dataclass
class DecodeStats:
    sentences: int = 0
    target_tokens: int = 0
    wall_seconds: float = 0.0
    timesteps: int = 0
    expansions: int = 0
    active_sentences: int = 0  # summed over steps: sentences that took part in a step
    refills: int = 0
    autoregressive_steps: int = 0  # Jacobi: the steps greedy decoding would have taken
    accepted_tokens: int = 0  # Jacobi: tokens fixed by all iterations
    # The stream's encoder memory (E of Yang2020 Alg. 1): slots allocated, the peak bytes of
    # encoder states alive at once, the most sentences in flight. Bounded by the capacity,
    # whatever the input's size.
    encoder_slots: int = 0
    peak_encoder_bytes: int = 0
    peak_in_flight: int = 0
    peak_step_rows: int = 0  # the most hypotheses one decoder call fed (bounded by C when over-subscribed)
    step_backends: Dict[str, List[str]] = field(default_factory=dict)  # fused operator → the backends that ran it
    # --step-mode: the mode run and how many decoder steps were replayed graphs, static or eager
    # (model/static/modes.StepModeStats.as_dict)
    step_mode: Dict[str, Any] = field(default_factory=dict)
    draft_step_mode: Dict[str, Any] = field(default_factory=dict)  # the same for a speculative draft's steps
    trace: Optional[List[Dict[str, Any]]] = None  # per-step active batch, when requested
    # Settings that change what or how the run decodes, set away from their defaults and in
    # effect ({"quantize": "int8", "input order": "as-given"}): the closing line confirms them.
    settings: Dict[str, str] = field(default_factory=dict)
    # Paths that ran instead of ours and what they cost, named once ({"encoder": "fairseq's forward
    # (layer X changes fairseq's forward): batch-size bit-exactness not promised"})
    fallbacks: Dict[str, str] = field(default_factory=dict)
    extra: Dict[str, float] = field(default_factory=dict)
    # --prune-auto: the setting the controller ended on, its moves and the probes' cost
    # (search/prune_controller.PruneController.as_dict)
    prune_auto: Dict[str, Any] = field(default_factory=dict)

    def add_step(self, *, sentences: int, rows: int, length: Optional[int] = None,
                 seconds: Optional[float] = None) -> None:
        """Record one decoder call over ``rows`` hypotheses of ``sentences`` sentences."""
        self.timesteps += 1
        self.expansions += rows
        self.active_sentences += sentences
        self.peak_step_rows = max(self.peak_step_rows, rows)
        if self.trace is not None:
            entry: Dict[str, Any] = {"step": self.timesteps, "sentences": sentences, "rows": rows}
            if length is not None:
                entry["length"] = length
            if seconds is not None:
                entry["ms"] = round(1000 * seconds, 3)
            self.trace.append(entry)

    def note_encoder_memory(self, *, slots: int, live_bytes: int, in_flight: int) -> None:
        """Record the stream's encoder memory after a refill (the peaks are kept)."""
        self.encoder_slots = max(self.encoder_slots, slots)
        self.peak_encoder_bytes = max(self.peak_encoder_bytes, live_bytes)
        self.peak_in_flight = max(self.peak_in_flight, in_flight)

    def note_backend(self, operator: str, backend: str) -> None:
        """Record that ``backend`` ran a step of the fused ``operator`` (ops/backends.py)."""
        ran = self.step_backends.setdefault(operator, [])
        if backend not in ran:
            ran.append(backend)

    def merge(self, other: "DecodeStats") -> None:
        for name in ("sentences", "target_tokens", "wall_seconds", "timesteps", "expansions",
                     "active_sentences", "refills", "autoregressive_steps", "accepted_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("encoder_slots", "peak_encoder_bytes", "peak_in_flight", "peak_step_rows"):
            setattr(self, name, max(getattr(self, name), getattr(other, name)))
        if other.trace is not None:
            offset = len(self.trace or [])
            self.trace = (self.trace or []) + [dict(e, step=e["step"] + offset) for e in other.trace]
        for k, v in other.extra.items():
            self.add_extra(k, v)
        for op, names in other.step_backends.items():
            for name in names:
                self.note_backend(op, name)
        for mine, theirs in ((self.step_mode, other.step_mode), (self.draft_step_mode, other.draft_step_mode)):
            for key, value in theirs.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    mine[key] = mine.get(key, 0) + value
                elif key not in mine:
                    mine[key] = value
        self.settings.update(other.settings)
        self.fallbacks.update(other.fallbacks)
        if other.prune_auto and not self.prune_auto:
            self.prune_auto = dict(other.prune_auto)

    def add_extra(self, name: str, value: float = 1.0) -> None:
        """Add to a strategy's own counter in ``extra`` (summed over a run, like the others)."""
        self.extra[name] = self.extra.get(name, 0.0) + value

    @property
    def expansions_per_step(self) -> float:
        return self.expansions / self.timesteps if self.timesteps else 0.0

    @property
    def fanout_per_step(self) -> float:
        """Freitag2017's "avg fan out per sent": the candidates a sentence expands at a step
        (decoder rows per sentence and step), over every step of every sentence."""
        return self.expansions / self.active_sentences if self.active_sentences else 0.0

    @property
    def fanout_per_sentence(self) -> float:
        """Freitag2017's "tot fan out per sent": the candidates a sentence expands in all."""
        return self.expansions / self.sentences if self.sentences else 0.0

    def pruned_widths(self) -> Dict[str, float]:
        """How much the variable-width beams pruned each sentence: the sentences metered and the 10th, 50th and
        90th percentile of a sentence's decoder rows a step (after its first) as a share of k, each the upper
        edge of its histogram bin (search/beam.py meters them); empty where nothing pruned."""
        counts = [self.extra.get(f"{PRUNED_WIDTH_KEY}{b}", 0.0) for b in range(PRUNED_WIDTH_BINS)]
        total = sum(counts)
        if not total:
            return {}
        out: Dict[str, float] = {"sentences": total}
        for q in (10, 50, 90):
            seen = 0.0
            for b, n in enumerate(counts):
                seen += n
                if seen >= total * q / 100:
                    out[f"p{q}"] = (b + 1) / PRUNED_WIDTH_BINS
                    break
        return out

    @property
    def mean_active_sentences(self) -> float:
        return self.active_sentences / self.timesteps if self.timesteps else 0.0

    @property
    def sentences_per_second(self) -> float:
        return self.sentences / self.wall_seconds if self.wall_seconds else 0.0

    def to_dict(self, with_trace: bool = False) -> Dict[str, Any]:
        out = asdict(self)
        if not with_trace:
            out.pop("trace")
        out.update(
            expansions_per_step=self.expansions_per_step,
            fanout_per_step=self.fanout_per_step,
            fanout_per_sentence=self.fanout_per_sentence,
            mean_active_sentences=self.mean_active_sentences,
            sentences_per_second=self.sentences_per_second,
        )
        if self.autoregressive_steps:
            out["iteration_speedup"] = self.iteration_speedup
        widths = self.pruned_widths()
        if widths:
            out["pruned_width"] = widths
        return out

    def to_json(self, search: str, indent: Optional[int] = 1) -> str:
        """The ``--stream-stats`` file: every statistic and the per-step trace, with the search's name
        (``scripts/papers/plot_occupancy.py`` labels its curves with it)."""
        return json.dumps(dict(self.to_dict(with_trace=True), search=search), indent=indent)

    @property
    def iteration_speedup(self) -> float:
        """Santilli2023's "Iters": greedy's steps over the iterations each sentence took part in."""
        iterations = self.extra.get("sentence_iterations") or self.timesteps
        return self.autoregressive_steps / iterations if iterations else 0.0

    def summary(self) -> str:
        """One log line, printed at the end of a fairseq-generate run."""
        line = (
            f"{self.sentences} sentences, {self.timesteps} timesteps, {self.expansions} expansions "
            f"({self.expansions_per_step:.1f}/step), mean active sentences {self.mean_active_sentences:.1f}"
        )
        if self.active_sentences:
            line += (f", fan-out per sentence {self.fanout_per_step:.2f}/step"
                     + (f", {self.fanout_per_sentence:.1f} in all" if self.sentences else ""))
        if self.extra.get("oversubscribed_steps"):
            line += (f", {int(self.extra['oversubscribed_steps'])} steps over the candidate budget "
                     f"({int(self.extra.get('waiting_candidates', 0))} candidates waited a step)")
        if self.wall_seconds:
            line += f", {self.sentences_per_second:.1f} sentences/s"
        if self.step_backends:
            line += ", step operators: " + describe_backends(self.step_backends, sep=", ")
        if self.step_mode and (self.step_mode.get("mode") != "eager" or self.step_mode.get("fallbacks")):
            line += ", " + describe_step_mode(self.step_mode)
        widths = self.pruned_widths()
        if widths:  # the variable-width beams: how much each sentence was pruned
            line += (", a pruned sentence's rows a step ≤ " + " / ".join(f"{100 * widths[q]:.0f}%" for q in ("p10", "p50", "p90"))
                     + " of k at its 10th / 50th / 90th percentile")
        if self.extra.get("native_loop_steps"):  # --native-loop: steps searched without returning to Python
            line += f", {int(self.extra['native_loop_steps'])} steps searched in the native loop"
        draft = self.draft_step_mode
        if draft and (draft.get("mode") != "eager" or draft.get("fallbacks")):
            line += ", draft's " + describe_step_mode(draft)
        if draft.get("weights"):  # --draft-quantize
            line += f", draft's weights {draft['weights']}"
        if self.prune_auto:
            auto = self.prune_auto
            line += (f", --prune-auto {auto['setting']} ({auto.get('probes', 0)} probes, "
                     f"{100 * (auto.get('probe_share') or 0):.1f}% of the decoder work, "
                     f"{max(len(auto.get('changes', [])) - 1, 0)} move(s))")
        if self.settings:
            line += ", " + ", ".join(f"{name}={value}" for name, value in self.settings.items())
        if self.fallbacks:
            line += ", fallbacks: " + "; ".join(f"{name}: {why}" for name, why in sorted(self.fallbacks.items()))
        if self.autoregressive_steps:
            iterations = int(self.extra.get("sentence_iterations") or self.timesteps)
            line += (
                f", per-sentence iterations {iterations} vs greedy steps {self.autoregressive_steps}"
                f" ({self.iteration_speedup:.2f}x), {self.accepted_tokens / max(iterations, 1):.2f} tokens"
                " accepted per iteration"
            )
        gate = jacobi_parallel_summary(self.extra)
        if gate:
            line += ", " + gate
        if self.extra.get("verify_steps"):
            line += ", " + speculative_summary(self.extra, self.wall_seconds)
        return line


def speculative_summary(extra: Dict[str, float], wall_seconds: float) -> str:
    """Speculative decoding's figures (search/speculative.py): tokens accepted per row and
    verification, their histogram, the mean γ, and the draft's and the verification's time shares."""
    rows = extra.get("verify_rows", 0.0)
    hist = " ".join(f"{k}:{n}" for k, n in sorted((int(k.split("_")[1]), int(v)) for k, v in extra.items()
                                                if k.startswith("accepted_") and v))
    gamma = extra.get("draft_tokens_proposed", 0.0) / max(extra.get("draft_proposals", 1.0), 1)
    if extra.get("beam_steps_replayed"):  # search/speculative_beam.py: one group's steps per verification
        calls = max(extra.get("verify_steps", 1.0), 1.0)
        line = (f"speculative beam: {extra['beam_steps_replayed'] / calls:.2f} beam steps per verification ({hist}), "
                f"{rows / calls:.1f} rows of {extra.get('block_positions', 0.0) / calls:.1f} positions scored a "
                f"verification, γ {gamma:.0f}")
    else:
        line = (f"speculative: {extra.get('verify_accepted', 0.0) / max(rows, 1):.2f} tokens accepted per verification "
                f"({hist}), mean γ {gamma:.2f}")
    if wall_seconds:
        line += (f", draft {100 * extra.get('draft_seconds', 0.0) / wall_seconds:.0f}% and verification "
                 f"{100 * extra.get('verify_seconds', 0.0) / wall_seconds:.0f}% of the time")
    return line


def jacobi_parallel_summary(extra: Dict[str, float]) -> str:
    """``--jacobi-parallel auto``'s runs (search/parallel_gate.py): how many sentence runs took each side and what a
    verified token cost on each (a call's seconds over the tokens an iteration verified); empty without a run."""
    sides = ("parallel", "sequential")
    runs = [int(extra.get(f"jacobi_parallel_{side}_runs", 0)) for side in sides]
    if not any(runs):
        return ""
    line = f"--jacobi-parallel auto: {runs[0]} sentence runs in blocks, {runs[1]} one position a call"
    costs = [1e6 * seconds_per_token(*(extra.get(f"jacobi_parallel_{side}_{what}", 0.0)
                                       for what in ("seconds", "calls", "tokens", "iterations"))) for side in sides]
    if all(math.isfinite(c) for c in costs):
        line += f" ({costs[0]:.0f} vs {costs[1]:.0f} µs a verified token)"
    return line


def describe_backends(backends: Dict[str, Any], sep: str = " ") -> str:
    """``{"beam_step": ["cpp"]}`` → ``beam_step=cpp`` (several backends of one operator joined by
    ``+``; ``—`` when the run ran no fused step operator)."""
    def names(value: Any) -> str:
        return value if isinstance(value, str) else "+".join(value)

    return sep.join(f"{op}={names(v)}" for op, v in sorted(backends.items())) or "—"


def describe_step_mode(modes: Dict[str, Any]) -> str:
    """``step mode graph: 410 replayed, 35 static, 0 eager, output layer in 445, reorder in 401 (12 graphs captured
    in 0.31 s, 40 MiB graph pool)`` (``, 3 evicted`` inside the parentheses when the LRU bound of the model's graphs
    dropped some; "output layer in N": steps whose top-k and normaliser ran inside the step's region; "reorder in
    N": steps that copied the last step's cache reorder inside it; "inputs gathered in N": steps whose rows took
    their encoder slots (and output-layer inputs) from their parents inside it; "search in N": steps whose search
    step — a beam's — ran inside it too, over the group's bucket state);
    ``step mode native: 410 native, 2 eager (395 reorders as table copies); not native: a block with its
    own mask (2)`` under native (its caches never move: model/row_arena.py)."""
    mode = modes.get("mode", "?")
    if mode == "native" or modes.get("steps_native"):  # --step-mode native: the C++ step's count
        line = f"step mode {mode}: {int(modes.get('steps_native', 0))} native, {int(modes.get('steps_eager', 0))} eager"
        if modes.get("reorders_by_table"):
            line += f" ({int(modes['reorders_by_table'])} reorders as table copies)"
    else:
        line = (f"step mode {mode}: {int(modes.get('steps_replayed', 0))} replayed, "
                f"{int(modes.get('steps_static', 0))} static, {int(modes.get('steps_eager', 0))} eager")
        if modes.get("output_layer_in_step"):
            line += f", output layer in {int(modes['output_layer_in_step'])}"
        if modes.get("reorders_in_step"):
            line += f", reorder in {int(modes['reorders_in_step'])}"
        if modes.get("inputs_in_step"):
            line += f", inputs gathered in {int(modes['inputs_in_step'])}"
        if modes.get("search_in_step"):
            line += f", search in {int(modes['search_in_step'])}"
    if modes.get("graphs_captured"):
        line += (f" ({int(modes['graphs_captured'])} graphs captured in {modes.get('graph_capture_s', 0):.2f} s, "
                 f"{modes.get('graph_pool_mib', 0):.0f} MiB graph pool"
                 + (f", {int(modes['graphs_evicted'])} evicted" if modes.get("graphs_evicted") else "") + ")")
    fallbacks = modes.get("fallbacks") or {}
    if fallbacks:
        line += f"; not {'native' if mode == 'native' else 'static'}: " + ", ".join(f"{why} ({n})" for why, n in sorted(fallbacks.items()))
    return line
