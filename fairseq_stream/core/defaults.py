"""Default pruning settings of the variable-width beams, shared by the options and the strategies.

Kept apart so that :mod:`fairseq_stream.core.options` declares the flags without importing a strategy.
"""

#: δ, the absolute threshold of Yang2020 §4.1 (Freitag2017's ap).
DEFAULT_ABS_THRESHOLD = 1.5
#: M, the maximum candidates per node of Yang2020 §4.1 (Freitag2017's mc).
DEFAULT_MAX_CANDS_PER_NODE = 5
#: What δ is measured from. Yang2020 measures from the best candidate or finished hypothesis by
#: log-probability ("final"); on weak models that loses up to 1.6 BLEU, so the default compares
#: length-normalised scores ("normalized"). See docs/reproduction.md for the paper's rule.
DEFAULT_REFERENCE = "normalized"
