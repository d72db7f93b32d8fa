"""Default pruning settings of the variable-width beams, shared by the options and the strategies.

Kept apart so that :mod:`fairseq_stream.core.options` declares the flags without importing a strategy.
"""

#: δ, the absolute threshold of Yang2020 §4.1 (Freitag2017's ap).
DEFAULT_ABS_THRESHOLD = 1.5
#: α of the surprisal-scaled δ (beam_rules.SurprisalScaledThreshold): δ = max(δ, α · the best
#: candidate's mean per-token surprisal), per sentence and step; used when --prune-abs-threshold
#: is not given (an explicit δ is a fixed δ, as in Yang2020). None = a fixed δ by default.
DEFAULT_ABS_SCALE = None
#: M, the maximum candidates per node of Yang2020 §4.1 (Freitag2017's mc).
DEFAULT_MAX_CANDS_PER_NODE = 5
#: What δ is measured from ("normalized"): defined with the pruning primitives (ops/pruning.py).
from fairseq_stream.ops.pruning import DEFAULT_REFERENCE  # noqa: E402,F401
#: The finalisation rule of the beams: Yang2020 App. A.1 ("ours"); "fairseq" and "shrink"
#: (Freitag2017's baseline) are the others (--beam-finalize).
DEFAULT_FINALIZE = "ours"
#: --stream-input-order: fairseq's length-sorted order, or the input's own (Hoang2018 measures
#: top-up batching without maxi-batch sorting).
INPUT_ORDERS = ("sorted", "as-given")

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
