"""The surprisal-scaled δ (beam_rules.SurprisalScaledThreshold) on hand-made steps, and when it is on."""
import math
from types import SimpleNamespace

import pytest
import torch

from fairseq_stream.search import defaults
from fairseq_stream.search.beam import VariableBeamConfig
from fairseq_stream.ops.pruning import DEFAULT_REFERENCE, AbsoluteThreshold, BeamCandidates, StepView, SurprisalScaledThreshold
from fairseq_stream.search.beam_rules import parse_pruning_rules

INF = math.inf


def view(val, lengths):
    """A step of two sentences, three candidates each, no finished hypotheses, no EOS."""
    val = torch.tensor(val, dtype=torch.float64)
    zeros = torch.zeros_like(val, dtype=torch.long)
    cand = BeamCandidates(val, zeros, zeros + 4, torch.zeros_like(val), torch.zeros_like(val, dtype=torch.bool))
    return StepView(cand, torch.zeros_like(val, dtype=torch.bool), torch.tensor(lengths), torch.full((2,), -INF),
                    torch.full((2,), -INF), lenpen=1.0)


def test_delta_grows_with_the_best_candidates_surprisal_and_never_falls_below_the_floor():
    # Sentence 0 is sure (best -0.6 over 3 tokens: 0.2 nats a token; 3 · 0.2 < the floor 1, so
    # δ = 1); sentence 1 is not (-6 over 3 tokens: 2 nats; δ = 3 · 2 = 6).
    step = view([[-0.6, -1.5, -2.0], [-6.0, -9.0, -13.0]], [[3, 3, 3], [3, 3, 3]])
    keep = torch.ones(2, 3, dtype=torch.bool)
    rule = SurprisalScaledThreshold(alpha=3.0, floor=1.0, reference="active")
    assert rule.margins(step, keep).flatten().tolist() == pytest.approx([1.0, 6.0])
    assert rule.prune(step, keep).tolist() == [[True, True, False], [True, True, False]]
    # a fixed δ = 1 keeps only sentence 1's best
    assert AbsoluteThreshold(1.0, "active").prune(step, keep).tolist() == [[True, True, False], [True, False, False]]


def test_surprisal_is_that_of_the_best_kept_candidate_by_its_own_length():
    # The best kept candidate of sentence 0 is the second one (the first is not kept): -2 over
    # 4 tokens, δ = 2 · 0.5 = 1, so -3.5 goes.
    step = view([[-0.1, -2.0, -3.5], [-1.0, -1.5, -2.0]], [[1, 4, 4], [2, 2, 2]])
    keep = torch.tensor([[False, True, True], [True, True, True]])
    rule = SurprisalScaledThreshold(alpha=2.0, floor=0.0, reference="active")
    assert rule.margins(step, keep).flatten().tolist() == pytest.approx([1.0, 1.0])
    assert rule.prune(step, keep).tolist() == [[False, True, False], [True, True, False]]


def test_a_sentence_with_nothing_kept_gets_the_floor():
    step = view([[-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0]], [[2, 2, 2], [2, 2, 2]])
    keep = torch.tensor([[False, False, False], [True, True, True]])
    margins = SurprisalScaledThreshold(alpha=2.0, floor=0.5, reference="active").margins(step, keep)
    assert margins.flatten().tolist() == pytest.approx([0.5, 1.0])


def options(**given):
    opts = dict(prune_abs_threshold=None, prune_abs_scale=None, prune_max_cands_per_node=None,
                prune_rel_threshold=None, prune_rel_local_threshold=None, prune_reference=None, prune_ended="prune",
                prune_rules=None, prune_preset=None)
    return SimpleNamespace(**dict(opts, **given))


def test_an_explicit_delta_is_a_fixed_delta_so_the_papers_rule_is_unchanged():
    pruning = VariableBeamConfig.pruning_from_options(
        options(prune_reference="final", prune_abs_threshold=1.5, prune_max_cands_per_node=5))
    assert pruning.rules() == (AbsoluteThreshold(1.5, "final"),)


def test_prune_abs_scale_scales_the_delta_and_zero_turns_it_off():
    scaled = VariableBeamConfig.pruning_from_options(options(prune_abs_threshold=2.0, prune_abs_scale=3.0))
    assert scaled.rules() == (SurprisalScaledThreshold(3.0, 2.0, DEFAULT_REFERENCE),)
    fixed = VariableBeamConfig.pruning_from_options(options(prune_abs_scale=0.0))
    assert fixed.rules() == (AbsoluteThreshold(defaults.DEFAULT_ABS_THRESHOLD, DEFAULT_REFERENCE),)  # no default β either


def test_the_default_rule_follows_the_defaults():
    rules = VariableBeamConfig.pruning_from_options(options()).rules()
    if defaults.DEFAULT_ABS_SCALE is None:
        assert rules == (AbsoluteThreshold(defaults.DEFAULT_ABS_THRESHOLD, DEFAULT_REFERENCE),)
    else:
        assert rules == (SurprisalScaledThreshold(defaults.DEFAULT_ABS_SCALE, defaults.DEFAULT_ABS_THRESHOLD,
                                                  DEFAULT_REFERENCE),)
    # at k = 50 its wider floor (the device is no input: round 3 dropped the CPU-only default β)
    wide = VariableBeamConfig.pruning_from_options(options(), beam=50).rules()
    assert [getattr(r, "floor", getattr(r, "delta", None)) for r in wide] == [defaults.default_abs_threshold(50)]


def test_prune_rules_aps_builds_the_rule_without_a_floor():
    assert parse_pruning_rules("aps:2.5") == (SurprisalScaledThreshold(2.5, 0.0, DEFAULT_REFERENCE),)


def long_candidates_after_a_finished_one(best_final: float, best_final_norm: float):
    """One sentence, two candidates of 10 tokens at -5.5 and -6.5, and its best finished hypothesis's score and
    normalised score: the step and an all-kept mask."""
    val = torch.tensor([[-5.5, -6.5]], dtype=torch.float64)
    zeros = torch.zeros_like(val, dtype=torch.long)
    cand = BeamCandidates(val, zeros, zeros + 4, torch.zeros_like(val), torch.zeros_like(val, dtype=torch.bool))
    step = StepView(cand, torch.zeros_like(val, dtype=torch.bool), torch.tensor([[10, 10]]), torch.tensor([best_final]),
                    torch.tensor([best_final_norm], dtype=torch.float64), lenpen=1.0)
    return step, torch.ones(1, 2, dtype=torch.bool)


def test_the_final_margin_grows_with_length_so_a_long_candidate_is_judged_per_token():
    # One sentence, a finished hypothesis of -2.0 over 4 tokens (-0.5 a token); two candidates of 10 tokens at -5.5
    # (-0.55 a token) and -6.5 (-0.65), the best on the beam -5.5. δ = 0.5 alone (the normalised reference) measures
    # the finished one's -0.5 · 10 = -5.0 less δ: both go (-5.5 and -6.5 ≤ -5.5). With β = 0.1 a token the margin
    # against it is max(0.5, 0.1 · 10) = 1: -5.5 > -6.0 stays, -6.5 (0.15 a token worse) goes.
    step, keep = long_candidates_after_a_finished_one(-2.0, -0.5)
    assert AbsoluteThreshold(0.5, "normalized").prune(step, keep).tolist() == [[False, False]]
    assert AbsoluteThreshold(0.5, "normalized", final_per_token=0.1).prune(step, keep).tolist() == [[True, False]]
    # against the beam's best (the same length) δ stays: at δ 0.5 the -6.5 candidate is cut by -5.5 in any case
    far, _ = long_candidates_after_a_finished_one(-INF, -INF)
    assert AbsoluteThreshold(0.5, "normalized", final_per_token=5.0).prune(far, keep).tolist() == [[True, False]]


def test_the_final_margin_needs_the_normalised_reference_and_is_not_negative():
    from fairseq_stream.errors import FairseqStreamError
    from fairseq_stream.search.beam import Pruning

    with pytest.raises(FairseqStreamError, match="needs --prune-reference normalized"):
        Pruning(abs_threshold=1.0, final_per_token=0.1, reference="final")
    with pytest.raises(FairseqStreamError, match="--prune-final-per-token must be >= 0"):
        Pruning(abs_threshold=1.0, final_per_token=-0.1)
    # no default β (round 3): only a given one
    assert VariableBeamConfig.pruning_from_options(options(prune_reference="final")).final_per_token is None
    assert VariableBeamConfig.pruning_from_options(options(prune_preset="freitag2017")).final_per_token is None
    assert VariableBeamConfig.pruning_from_options(options(prune_final_per_token=0.3)).final_per_token == 0.3


def test_the_surprisal_scaled_delta_takes_the_final_margin_too():
    # --prune-abs-scale with --prune-final-per-token: each sentence's δ = max(floor, α · ū), then β against the best
    # finished hypothesis as for a fixed δ (it was ignored before issue 81's round 2). One sentence, a finished
    # hypothesis of -0.5 a token; candidates of 10 tokens at -5.5 (the best: ū 0.55, δ = max(0.3, 0.5 · 0.55) = 0.3) and
    # -6.5. Without β the finished one's -5.0 less 0.3 cuts both; with β 0.1 the margin against it is 1: -5.5 stays.
    step, keep = long_candidates_after_a_finished_one(-2.0, -0.5)
    assert SurprisalScaledThreshold(0.5, 0.3, "normalized").prune(step, keep).tolist() == [[False, False]]
    assert SurprisalScaledThreshold(0.5, 0.3, "normalized", final_per_token=0.1).prune(step, keep).tolist() == \
        [[True, False]]
    built = VariableBeamConfig.pruning_from_options(options(prune_abs_threshold=0.5, prune_abs_scale=1.0,
                                                            prune_final_per_token=0.1)).rules()
    assert built == (SurprisalScaledThreshold(1.0, 0.5, DEFAULT_REFERENCE, final_per_token=0.1),)
    # the fused C++ step has no form of it: the reference step runs it (encode_rules answers None)
    from fairseq_stream.ops.beam_step import encode_rules
    assert encode_rules(built) is None
    assert encode_rules((SurprisalScaledThreshold(1.0, 0.5, DEFAULT_REFERENCE),)) is not None
