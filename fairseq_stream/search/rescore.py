"""GNMT's length penalty (Wu et al. 2016, Eq. 14), applied to the finished hypotheses of a beam.

fairseq ranks finished hypotheses by ``score / |Y|^lenpen``; GNMT, and the IBDecoder paper
(Zhang2020: "beam size 4, length penalty 0.6", trained and decoded with the ``zero`` toolkit), by
``score / ((5 + |Y|) / 6)^α``. Neither fairseq's beam nor ``ib-beam`` lets the penalty decide
which hypotheses finish (a sentence ends with ``--beam`` finished ones or at the maximum
length), so decoding with ``--nbest`` = ``--beam`` and re-ranking the n-best list by GNMT's
penalty gives exactly the hypothesis a GNMT-penalised beam would return.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from fairseq_stream.errors import FairseqStreamError


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """``((5 + length) / 6) ** alpha``; ``length`` counts the target tokens, EOS included."""
    return ((5.0 + length) / 6.0) ** alpha


def gnmt_score(hypo: Dict[str, Any], alpha: float) -> float:
    """Sum of the token log-probabilities divided by GNMT's length penalty."""
    scores = hypo["positional_scores"]
    return float(scores.sum()) / gnmt_length_penalty(int(scores.numel()), alpha)


def rerank_gnmt(nbest: Sequence[Dict[str, Any]], alpha: float) -> Dict[str, Any]:
    """The hypothesis of ``nbest`` (fairseq's hypothesis dicts) that GNMT's penalty ranks first."""
    if not nbest:
        raise FairseqStreamError("an empty n-best list cannot be re-ranked")
    return max(nbest, key=lambda h: gnmt_score(h, alpha))


def rerank_all(hypos: List[List[Dict[str, Any]]], alpha: float) -> List[Dict[str, Any]]:
    """:func:`rerank_gnmt` for every sentence."""
    return [rerank_gnmt(nbest, alpha) for nbest in hypos]
