"""GNMT's length penalty over an n-best list (Zhang2020 decodes with it, α = 0.6)."""
import math

import pytest
import torch

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.rescore import gnmt_length_penalty, rerank_all, rerank_gnmt


def hypo(scores):
    return {"tokens": torch.arange(len(scores)), "positional_scores": torch.tensor(scores)}


def test_gnmt_penalty_by_hand():
    assert gnmt_length_penalty(1, 0.6) == pytest.approx(1.0)
    assert gnmt_length_penalty(4, 0.6) == pytest.approx(1.5 ** 0.6)  # (5 + 4) / 6 = 1.5
    assert gnmt_length_penalty(7, 0.0) == 1.0


def test_gnmt_and_fairseq_penalties_pick_different_hypotheses():
    short, long = hypo([-1.0, -1.0]), hypo([-0.65] * 4)  # sums -2.0 and -2.6
    # fairseq's score / |Y|^0.6: -2.0 / 2^0.6 = -1.32 < -2.6 / 4^0.6 = -1.13, so fairseq keeps the long one;
    # GNMT: -2.0 / (7/6)^0.6 = -1.82 > -2.6 / 1.5^0.6 = -2.04, so GNMT keeps the short one.
    assert -2.0 / 2 ** 0.6 < -2.6 / 4 ** 0.6
    assert rerank_gnmt([long, short], 0.6) is short
    assert rerank_gnmt([short, long], 3.0) is long  # a strong penalty favours length again
    assert rerank_all([[long, short], [long]], 0.6) == [short, long]
    assert math.isclose(-2.6 / 1.5 ** 0.6, -2.0386, abs_tol=1e-4)


def test_empty_nbest_is_refused():
    with pytest.raises(FairseqStreamError):
        rerank_gnmt([], 0.6)
