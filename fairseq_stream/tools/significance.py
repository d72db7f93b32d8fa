"""Paired bootstrap resampling of corpus BLEU (Koehn 2004), for "is this loss real?"."""
from __future__ import annotations

from typing import List


def paired_bootstrap_p(baseline: List[str], system: List[str], refs: List[str], samples: int = 1000,
                       seed: int = 12345) -> float:
    """One-sided paired bootstrap resampling (Koehn 2004): the share of resampled test sets (the
    same sentences for both) on which ``system``'s BLEU is at least ``baseline``'s. Small (< 0.05)
    = ``system``'s loss is not explained by the choice of sentences; 1 for identical outputs."""
    import numpy as np
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    base = np.array(bleu._extract_corpus_statistics(baseline, [refs]))
    other = np.array(bleu._extract_corpus_statistics(system, [refs]))
    picks = np.random.default_rng(seed).integers(0, len(refs), size=(samples, len(refs)))
    wins = sum(bleu._compute_score_from_stats(other[p].sum(0)).score >= bleu._compute_score_from_stats(base[p].sum(0)).score
               for p in picks)
    return wins / samples
