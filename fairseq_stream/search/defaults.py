"""Default pruning settings of the variable-width beams, shared by the options and the strategies.

Kept apart so that :mod:`fairseq_stream.engine.options` declares the flags without importing a strategy;
what δ is measured from (``DEFAULT_REFERENCE``) is defined with the pruning primitives (ops/pruning.py).
"""
import math

#: δ, the absolute threshold of Yang2020 §4.1 (Freitag2017's ap), at --beam ≤ 5; above, the default δ grows by
#: DEFAULT_ABS_THRESHOLD_PER_DECADE for every tenfold k (:func:`default_abs_threshold`): a wider beam keeps its gain
#: by finding hypotheses further behind the best. Chosen on the tuning models (issue 81, docs/results.md "Pruning
#: decided by each sentence alone"): the demo and the zoo's en-es-3x3-sep6k4k-u800 keep BLEU within 0.1 of fixed-ours
#: at δ 1.5 at k = 5 (δ 1.25 loses 0.2 on the demo's 986 sentences) and at δ 1.75 at k = 50 (δ 1.5 loses 0.28 there).
DEFAULT_ABS_THRESHOLD = 1.5
DEFAULT_ABS_THRESHOLD_PER_DECADE = 0.25
#: α of the surprisal-scaled δ (beam_rules.SurprisalScaledThreshold): δ = max(δ, α · the best candidate's mean
#: per-token surprisal), per sentence and step, on every device; used when --prune-abs-threshold is not given (an
#: explicit δ is a fixed δ, as in Yang2020). Chosen on the tuning half (issue 81, round 3; docs/results.md "Pruning
#: decided by each sentence alone"): where the model is unsure of a sentence its beam stays wider, and the pruned
#: outputs stay near the fixed beam's length (−2.3…+0.2% on four models, k = 5 and 50), losing at most 0.12 BLEU
#: against fixed-ours on any; the per-token final margin β of rounds 1–2 (0.1, the CPU's default then) shifted length
#: by each model's own amount and lost 0.27–0.43 BLEU on three of the zoo's models (whole test sets).
DEFAULT_ABS_SCALE = 2.0
#: M, the maximum candidates per node of Yang2020 §4.1 (Freitag2017's mc).
DEFAULT_MAX_CANDS_PER_NODE = 5
#: The finalisation rule of the beams: Yang2020 App. A.1 ("ours"); "fairseq" and "shrink"
#: (Freitag2017's baseline) are the others (--beam-finalize).
DEFAULT_FINALIZE = "ours"
#: how much each sentence was pruned (search/beam.py, the statistics): a finished sentence's decoder rows a step
#: (after its first) as a share of k, counted in this many equal bins under the extra statistics' keys KEY0 …
PRUNED_WIDTH_KEY, PRUNED_WIDTH_BINS = "pruned_width_", 10
#: the beam steps whose search (output layer and beam operator) ran as one C++ call (search/beam.py), an extra statistic
NATIVE_SEARCH_KEY = "native_search_steps"
#: --prune-preset: a paper's whole pruning rule under one name, as option values by field name.
#: Freitag2017 Table 1 (De-En): the combined row "rp=0.6,ap=2.5,rpl=0.02,mc=3" at beam 5 and
#: "rp=0.3,ap=2.5,rpl=0.3,mc=3" at beam 14; thresholds measured from the best *active*
#: candidate (their Eqs. 1-3) and their baseline's ending rule (an EOS ends its hypothesis at
#: once, the beam shrinks by one).
PRESETS = {
    "freitag2017": ("Freitag2017 Table 1, beam 5", (
        ("prune_rel_threshold", 0.6), ("prune_abs_threshold", 2.5), ("prune_rel_local_threshold", 0.02),
        ("prune_max_cands_per_node", 3), ("prune_reference", "active"), ("beam_finalize", "shrink"))),
    "freitag2017-k14": ("Freitag2017 Table 1, beam 14", (
        ("prune_rel_threshold", 0.3), ("prune_abs_threshold", 2.5), ("prune_rel_local_threshold", 0.3),
        ("prune_max_cands_per_node", 3), ("prune_reference", "active"), ("beam_finalize", "shrink"))),
}

#: --prune-auto's values: "on" (also a bare --prune-auto, or True through the API), "off"; not given, it is off
#: (opt-in since issue 81: it was var-stream's default on a CPU from issue 50, but its choices follow the batching,
#: the shard and the neighbours of a sentence, and on models it was not tuned on it neither kept BLEU nor saved
#: time; the default is now a rule each sentence decides alone: default_abs_threshold and DEFAULT_ABS_SCALE).
PRUNE_AUTO_MODES = ("on", "off")
#: the pruning options --prune-auto chooses itself (δ, M) or that would change what it measures: given with
#: --prune-auto on, refused; given without it, they set the pruning as usual.
PRUNE_AUTO_EXCLUDES = ("prune_preset", "prune_abs_threshold", "prune_max_cands_per_node", "prune_abs_scale",
                       "prune_rel_threshold", "prune_rel_local_threshold", "prune_rules", "prune_final_per_token")


def default_abs_threshold(beam: "int | None") -> float:
    """The var-* default δ at ``--beam beam``: DEFAULT_ABS_THRESHOLD up to k = 5, then + DEFAULT_ABS_THRESHOLD_PER_DECADE
    · log10(k / 5) (1.75 at k = 50). A function of k alone: each sentence's pruning still reads only its own search."""
    if beam is None or beam <= 5:
        return DEFAULT_ABS_THRESHOLD
    return DEFAULT_ABS_THRESHOLD + DEFAULT_ABS_THRESHOLD_PER_DECADE * math.log10(beam / 5)


def prune_auto_mode(value: object) -> "str | None":
    """--prune-auto as given: "on", "off" or None (not given); True/False (the API, bench specs) as on/off."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    text = str(value).lower()
    if text in ("true", "1", "yes"):
        return "on"
    if text in ("false", "0", "no"):
        return "off"
    return text  # checked by the validation (engine/validation.py): one of PRUNE_AUTO_MODES


def prune_auto_problem(value: object) -> "str | None":
    """What is wrong with --prune-auto's ``value`` (one phrase, shared by the command line's check and the
    validation's), or None where it is on, off or not given."""
    mode = prune_auto_mode(value)
    if mode is None or mode in PRUNE_AUTO_MODES:
        return None
    return f"must be 'on' or 'off' (or given alone, meaning on), got {str(value)!r}"


def prune_auto_arg(text: str) -> str:
    """--prune-auto's value as the command line gives it, checked while the line is parsed: a bare
    ``--prune-auto`` right before DATA takes DATA as its value, and fairseq would then say only that DATA
    is missing. Raises ``argparse.ArgumentTypeError`` (one line naming the value) for anything but on/off."""
    problem = prune_auto_problem(text)
    if problem is not None:
        import argparse  # only where a command line is parsed

        raise argparse.ArgumentTypeError(
            f"{problem} (a bare --prune-auto reads the word after it: write --prune-auto on, or put the flag after DATA)")
    return str(prune_auto_mode(text))


def pruning_fixed_by(opts: object) -> "list[str]":
    """The options of PRUNE_AUTO_EXCLUDES that ``opts`` gives: each fixes the pruning."""
    return [option for option in PRUNE_AUTO_EXCLUDES if getattr(opts, option, None) not in (None, "")]


def models_on_cuda(models: "list | tuple") -> bool:
    """Whether the models are on a GPU (their first parameter's device)."""
    return any(p.is_cuda for m in models if hasattr(m, "parameters") for p in list(m.parameters())[:1])


def prune_auto_on(opts: object) -> bool:
    """Whether the run steers its own pruning: only where ``--prune-auto`` (on) is given (issue 81: opt-in)."""
    return prune_auto_mode(getattr(opts, "prune_auto", None)) == "on"


#: --prune-auto (search/prune_controller.py). The ladder of (δ, M) the controller moves on, from the
#: fastest to the widest (then off): δ 1.25 … 3 at Yang2020's M 5, then δ 3 with M 10 for wide beams.
#: Chosen on the demo model and its 500- and 800-update checkpoints at k = 5 and 50 by every sentence's
#: outcome at every rung (scripts/experiments/rung_outcomes.py; docs/history/results-2026-11.md, round 5):
#: δ 1.25 keeps BLEU within 0.15 of the fixed beam on all six (δ 1 loses 0.20 to 0.40 on three), so it is
#: the fastest rung, and where a run starts at any k.
PRUNE_AUTO_LADDER = ((1.25, 5), (1.5, 5), (2.0, 5), (3.0, 5), (3.0, 10))
PRUNE_AUTO_START = (1.25, 5)
#: the run's decoder work per sentence and step at the start rung, the step's fixed cost included: ~3.7 at
#: k = 5 and ~6 at k = 50 on the demo model (fan-out 3.2 and 5.7 rows a sentence and step); a probe's fixed
#: beam takes k rows, so the budget's first estimate of a probe against the run, before one was measured, is
#: k over this, at least 2 (a probe is often longer than the run's mean sentence): 8.3 at k = 50, where 11 was
#: measured (the old flat 3.5 let a 100-sentence k = 50 run spend 39% of its work on probes)
PRUNE_AUTO_START_ROWS = 6
#: the run's first refill takes probes past the budget (on credit: later refills pay it back) up to about this
#: many of the run's sentences' work by the first estimate, at least one: four at k ≤ 12 (as many as the
#: controller needs to relax, plus one), one at k = 50, where a fixed beam's copy costs ~11 of the run's
#: sentences (four, whatever k, put 13.8% of a 300-sentence k = 50 demo run and 38.7% of a 100-sentence one
#: into the fixed beam's copies: docs/history/results-2026-11.md, "Round 7: the probes' credit")
PRUNE_AUTO_CREDIT = 8
#: the largest loss of the best hypothesis's length-normalised model score (fairseq's score) against
#: the fixed beam's that the current rung may have over its recent probes, as a fraction of the fixed
#: beam's mean |score| there; a faster rung must be within half. The same runs: the loss at δ 1.25 is
#: 0.4–1.9% at k = 5 and 2.6–5.6% at k = 50 where BLEU holds, and losses above it do not say BLEU drops
#: (on the weak checkpoints δ 1.5 loses 3.9% at k = 50 and gains 0.3–0.7 BLEU), so the tolerance is set over the
#: losses that held: the controller relaxes only on a model whose losses are far from those.
PRUNE_AUTO_TOLERANCE = 0.06
#: the probes' decoder work (the fixed beam and the trial rung) as a share of the run's own, right
#: after a move; it halves, thirds, … with every PRUNE_AUTO_WINDOW probes without a move. Work is
#: expansions plus PRUNE_AUTO_STEP_WORK per decoder step: a step's fixed cost (its launches and
#: dispatches), which a small group of probes pays nearly in full.
PRUNE_AUTO_BUDGET, PRUNE_AUTO_STEP_WORK = 0.08, 16
#: at most this many probes a refill; a helper stream (a slower start, a GPU) decodes them in groups of this
#: many (from one refill or several), their fixed-beam and trial copies in one stream: the decoder steps are
#: shared. The helper's first group (taken on credit, this many) and that of the last refill go at once.
PRUNE_AUTO_GROUP = 4
#: the probes a rung is judged on (its most recent), the fewest that may relax it or (the trial's)
#: tighten onto a faster one, and the outcomes (two a probe) after a rung failed before the controller
#: tries it again.
PRUNE_AUTO_WINDOW, PRUNE_AUTO_MIN_RELAX, PRUNE_AUTO_MIN_TIGHTEN, PRUNE_AUTO_HOLD = 12, 3, 4, 24
#: an unsure model: where the run's first PRUNE_AUTO_UNSURE_OUTPUTS outputs (of two tokens or more) average
#: a best hypothesis's length-normalised score (nats a token at --lenpen 1) below PRUNE_AUTO_UNSURE, the
#: controller moves to the safest pruned rung and stays there. On such models pruning's search error shows
#: as a shift of output length, not as a loss of score that the probes could see, and loses 0.5–0.9 BLEU at
#: every faster rung (docs/history/results-2026-11.md, round 7); only δ 3 keeps it. Chosen on the tuning
#: checkpoints of seed 14 (their outputs at δ 1.25 average −1.55, −1.20 and −0.95 at 300, 500 and 800
#: updates, every one losing BLEU at k = 50 at δ 1.25; the demo, which keeps it, −0.43; the first 16 a run
#: finishes, short ones, read lower: −0.52 on the demo, −0.99 at 800 updates); judged on seed 15 ("round 8").
PRUNE_AUTO_UNSURE, PRUNE_AUTO_UNSURE_OUTPUTS = -0.7, 16
