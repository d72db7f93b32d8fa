"""Beam search on hand-written probability tables: the finalisation rule and the heuristics."""
import math

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.beam import REFERENCES
from fairseq_stream.integration.build import build_generator
from helpers import TableModel, fake_task, gen_cfg, make_dictionary, sample_for, stream_opts

D = make_dictionary()
EOS, A, B, C = D.eos(), D.index("a"), D.index("b"), D.index("c")
SRC = D.index("d")  # the one source word the tables key on

# App. A.1's case, built so the two finalisation rules disagree (k = 2, max length 3, no
# length normalisation; fairseq's --min-len 1 forbids EOS first, so "b" opens every output).
# Step 1: a .7, EOS .2, c .1 — fairseq makes "b EOS" final at once (log .2 = -1.61); Yang2020
# keeps it on the beam below "b a". Step 2: b a→c (-1.05) and b a→b (-1.16) both beat it, so it
# falls off our beam. At the maximum length EOS is forced: "b a c EOS" = log(.7·.5·.3) = -2.25
# is our answer, while fairseq returns "b EOS".
A1_TABLE = {
    (SRC, ()): {B: 1.0},
    (SRC, (B,)): {A: 0.7, EOS: 0.2, C: 0.1},
    (SRC, (B, A)): {C: 0.5, B: 0.45, EOS: 0.05},
    (SRC, (B, C)): {C: 0.5, EOS: 0.5},
    (SRC, (B, A, C)): {EOS: 0.3, C: 0.7},
    (SRC, (B, A, B)): {EOS: 0.3, C: 0.7},
    (SRC, (B, C, C)): {EOS: 0.3, C: 0.7},
}


def ours(table, name="fixed-ours", gen=None, opts=None, sources=(SRC,)):
    model = TableModel(D, table).eval()
    g = build_generator(name, fake_task(D), [model], gen_cfg(**(gen or {})), stream_opts(**(opts or {})))
    return g.generate([model], sample_for(D, list(sources))), g


def fairseq(table, beam, max_len_b, normalize=False, sources=(SRC,)):
    model = TableModel(D, table).eval()
    g = SequenceGenerator([model], D, beam_size=beam, max_len_b=max_len_b, normalize_scores=normalize)
    return g.generate([model], sample_for(D, list(sources)))


def test_a1_rule_differs_from_fairseq_on_the_hand_built_case():
    gen = {"beam": 2, "max_len_b": 3, "unnormalized": True}
    fs = fairseq(A1_TABLE, beam=2, max_len_b=3)
    (hyps,), _ = ours(A1_TABLE, gen=gen)
    assert fs[0][0]["tokens"].tolist() == [B, EOS]
    assert fs[0][0]["score"] == pytest.approx(math.log(0.2), abs=1e-4)
    assert hyps[0]["tokens"].tolist() == [B, A, C, EOS]
    assert hyps[0]["score"] == pytest.approx(math.log(0.7 * 0.5 * 0.3), abs=1e-4)


def test_fairseq_rule_reproduces_fairseq_on_the_hand_built_case():
    gen = {"beam": 2, "max_len_b": 3, "unnormalized": True, "nbest": 2}
    fs = fairseq(A1_TABLE, beam=2, max_len_b=3)
    (hyps,), _ = ours(A1_TABLE, gen=gen, opts={"beam_finalize": "fairseq"})
    assert [h["tokens"].tolist() for h in hyps] == [h["tokens"].tolist() for h in fs[0][:2]]
    assert [h["score"] for h in hyps] == pytest.approx([float(h["score"]) for h in fs[0][:2]], abs=1e-4)


def test_shrink_rule_ends_hypotheses_at_once_within_the_shrinking_beam():
    """Freitag2017's baseline (k = 2): "b EOS" is among the top 2 after step 1, so it is final at
    once and the beam shrinks to one; at step 2 "b a EOS" (log .27) is second, outside the
    beam's one place, so it is no final hypothesis (the fairseq rule, top k of 2k, takes it)."""
    table = {(SRC, ()): {B: 1.0}, (SRC, (B,)): {A: 0.6, EOS: 0.4}, (SRC, (B, A)): {C: 0.5, EOS: 0.45, B: 0.05},
             (SRC, (B, A, C)): {EOS: 1.0}}
    gen = {"beam": 2, "nbest": 2, "max_len_b": 5, "unnormalized": True}
    (shrink,), g = ours(table, gen=gen, opts={"beam_finalize": "shrink"})
    (fs_rule,), g_fs = ours(table, gen=gen, opts={"beam_finalize": "fairseq"})
    assert [h["tokens"].tolist() for h in shrink] == [[B, EOS], [B, A, C, EOS]]
    assert [h["score"] for h in shrink] == pytest.approx([math.log(0.4), math.log(0.3)], abs=1e-4)
    assert [h["tokens"].tolist() for h in fs_rule] == [[B, EOS], [B, A, EOS]]
    # BOS; "b" and a 1e-6 word (the table's floor); then one row a step: the beam shrank
    assert g.stats.expansions == 5 and g.stats.active_sentences == 4
    assert g.stats.fanout_per_step == 1.25 and g.stats.fanout_per_sentence == 5.0
    assert g_fs.stats.fanout_per_step > g.stats.fanout_per_step  # the fairseq rule keeps k rows a step


def test_shrink_rule_on_the_a1_case_returns_the_early_final():
    # "b EOS" is second after step 1: final at once (rule ours keeps it waiting and loses it)
    gen = {"beam": 2, "max_len_b": 3, "unnormalized": True}
    (hyps,), g = ours(A1_TABLE, gen=gen, opts={"beam_finalize": "shrink"})
    assert hyps[0]["tokens"].tolist() == [B, EOS]
    assert g.stats.expansions == 5  # BOS, 2 rows (one the table's 1e-6 floor), then 1 and 1


def test_ended_candidate_that_reaches_the_top_becomes_final():
    # "b EOS" sits second after step 1, then "b a"'s children all score below it: it rises to
    # the top and becomes final.
    table = {(SRC, ()): {B: 1.0}, (SRC, (B,)): {A: 0.6, EOS: 0.4}, (SRC, (B, A)): {B: 0.3, C: 0.3, EOS: 0.1}}
    (hyps,), g = ours(table, gen={"beam": 2, "max_len_b": 5, "unnormalized": True}, opts={"beam_final_count": 1})
    assert hyps[0]["tokens"].tolist() == [B, EOS]
    assert hyps[0]["score"] == pytest.approx(math.log(0.4), abs=1e-4)
    assert hyps[0]["positional_scores"].tolist() == pytest.approx([0.0, math.log(0.4)], abs=1e-4)


def test_nbest_lists_are_sorted_by_normalised_score():
    gen = {"beam": 3, "nbest": 3, "max_len_b": 4, "lenpen": 1.0}
    (hyps,), _ = ours(A1_TABLE, gen=gen)
    assert len(hyps) == 3
    scores = [h["score"] for h in hyps]
    assert scores == sorted(scores, reverse=True)
    for h in hyps:
        assert h["tokens"][-1] == EOS
        assert h["score"] == pytest.approx(float(h["positional_scores"].sum()) / len(h["tokens"]), abs=1e-4)


def test_final_count_keeps_searching_and_returns_the_best_of_z():
    # "b EOS" (log .4) reaches the top first: Z = 1 returns it. With Z = 2 the search goes on
    # until "b a b EOS" (log .3) is final too, and it wins on normalised score (-.30 > -.46);
    # with --nbest 1 only it is returned, the head of the --nbest 2 list. The default is Z = k.
    table = {(SRC, ()): {B: 1.0}, (SRC, (B,)): {A: 0.6, EOS: 0.4}, (SRC, (B, A)): {B: 0.5, C: 0.3, EOS: 0.2},
             (SRC, (B, A, B)): {EOS: 1.0}, (SRC, (B, A, C)): {EOS: 1.0}}
    gen = {"beam": 3, "max_len_b": 5, "lenpen": 1.0}
    (first,), _ = ours(table, gen=gen, opts={"beam_final_count": 1})
    (one,), _ = ours(table, gen=gen, opts={"beam_final_count": 2})
    (default,), _ = ours(table, gen=gen)
    (two,), _ = ours(table, gen=dict(gen, nbest=2), opts={"beam_final_count": 2})
    assert first[0]["tokens"].tolist() == [B, EOS]
    assert len(one) == 1 and one[0]["tokens"].tolist() == [B, A, B, EOS]
    assert one[0]["score"] == pytest.approx(math.log(0.6 * 0.5) / 4, abs=1e-4)
    assert [h["tokens"].tolist() for h in two] == [[B, A, B, EOS], [B, EOS]]
    assert default[0]["tokens"].tolist() == [B, A, B, EOS] and len(default) == 1


def test_absolute_threshold_prunes_and_counts_finished_best():
    # δ = 1: after step 0 only "a" (log .7) survives: "b" (log .1) is 1.9 below it.
    table = {(SRC, ()): {A: 0.7, B: 0.1, C: 0.2}, (SRC, (A,)): {EOS: 0.9, B: 0.1}}
    (hyps,), g = ours(table, name="var-batch", gen={"beam": 3, "max_len_b": 4},
                      opts={"prune_abs_threshold": 1.0, "prune_max_cands_per_node": 3})
    assert hyps[0]["tokens"].tolist() == [A, EOS]
    # "c" (log .2) is 1.25 below "a" (log .7), "b" further: only "a" is expanded at step 1.
    assert g.stats.expansions == 2  # BOS, then "a" alone


def test_max_candidates_per_node_limits_expansions_of_one_hypothesis():
    table = {(SRC, ()): {A: 0.4, B: 0.35, C: 0.25}}
    (hyps,), g = ours(table, name="var-batch", gen={"beam": 3, "max_len_b": 3},
                      opts={"prune_abs_threshold": float("inf"), "prune_max_cands_per_node": 1})
    # M = 1: one child of BOS, so step 1 expands a single row.
    assert g.stats.expansions == 2


def test_relative_thresholds():
    table = {(SRC, ()): {A: 0.5, B: 0.3, C: 0.2}}
    gen = {"beam": 3, "max_len_b": 3}
    # Z = 1: the counts are of the first two steps, the sentence ends at its first final
    base = {"prune_abs_threshold": float("inf"), "prune_max_cands_per_node": 3, "beam_final_count": 1}
    _, g_all = ours(table, name="var-batch", gen=gen, opts=base)
    _, g_rp = ours(table, name="var-batch", gen=gen, opts=dict(base, prune_rel_threshold=0.5))
    _, g_rpl = ours(table, name="var-batch", gen=gen, opts=dict(base, prune_rel_local_threshold=0.7))
    assert g_all.stats.expansions == 4  # BOS + a, b, c
    assert g_rp.stats.expansions == 3  # c: .2 ≤ .5 · .5 is pruned
    assert g_rpl.stats.expansions == 2  # b: .3 ≤ .7 · .5 and c are pruned


def test_batch_and_stream_agree_on_tables():
    sources = [SRC] * 7
    gen = {"beam": 3, "nbest": 2, "max_len_b": 4}
    ref, _ = ours(A1_TABLE, name="var-batch", gen=gen, sources=sources)
    for name, opts in [("var-stream", {"stream_capacity": 3}), ("var-stream", {"stream_capacity": 2, "stream_epsilon": 0.5})]:
        out, _ = ours(A1_TABLE, name=name, gen=gen, opts=opts, sources=sources)
        for a, b in zip(ref, out):
            assert [h["tokens"].tolist() for h in a] == [h["tokens"].tolist() for h in b]
            assert [h["score"] for h in a] == [h["score"] for h in b]


@pytest.mark.parametrize(
    "name,opts,gen,message",
    [
        ("var-stream", {"stream_epsilon": 1.5}, {}, "--stream-epsilon must be in [0, 1)"),
        ("var-stream", {"prune_max_cands_per_node": 0}, {}, "--prune-max-cands-per-node must be >= 1"),
        ("var-stream", {"prune_abs_threshold": -1.0}, {}, "--prune-abs-threshold must be >= 0"),
        ("var-stream", {"prune_rel_threshold": 0.0}, {}, "--prune-rel-threshold must be in (0, 1]"),
        ("var-stream", {}, {"sampling": True}, "cannot be combined with --sampling"),
        ("var-stream", {}, {"diverse_beam_groups": 2}, "cannot be combined with --diverse-beam-groups"),
        ("var-stream", {"stream_max_candidates": 3}, {"beam": 5}, "smaller than one beam"),
        ("var-batch", {"stream_epsilon": 0.2}, {}, "decodes plain batches"),
        ("fixed-ours", {"prune_abs_threshold": 1.0}, {}, "does not read --prune-abs-threshold"),
        ("fixed-ours", {}, {"beam": 2, "nbest": 3}, "--nbest must be between 1 and --beam"),
        ("var-stream", {"beam_final_count": 6}, {"beam": 5}, "--beam-final-count must be between"),
        ("var-stream", {"beam_final_count": -1}, {}, "--beam-final-count must be >= 0"),
        ("fixed-ours", {"beam_final_count": 2, "beam_finalize": "fairseq"}, {"beam": 5},
         "--beam-final-count 2 has no effect under --beam-finalize fairseq"),
        ("var-stream", {"beam_final_count": 1, "prune_preset": "freitag2017"}, {}, "has no effect under --beam-finalize shrink"),
        ("var-stream", {"ib_finalize": "all"}, {}, "does not read --ib-finalize (it is an option of ib-beam)"),
        ("var-stream", {"jacobi_block": 0}, {}, "does not read --jacobi-block"),
        ("gs-jacobi", {"jacobi_block": 0}, {"beam": 1}, "--jacobi-block must be >= 1"),
        ("var-stream", {"stream_capacity": 0}, {}, "--stream-capacity must be >= 1"),
        ("var-stream", {"stream_oversubscribe": True}, {}, "--stream-oversubscribe needs --stream-max-candidates"),
        ("gs-jacobi", {"stream_oversubscribe": True, "stream_max_candidates": 4}, {"beam": 1},
         "--search gs-jacobi has no such beams"),
        ("fixed-ours", {"beam_finalize": "bogus"}, {}, "--beam-finalize must be one of ours, fairseq, shrink"),
        ("var-stream", {"prune_preset": "bogus"}, {}, "--prune-preset must be one of freitag2017, freitag2017-k14"),
        ("var-stream", {"prune_preset": "freitag2017", "prune_rel_threshold": 0.3}, {},
         "--prune-preset freitag2017 sets --prune-rel-threshold 0.6 (Freitag2017 Table 1, beam 5); "
         "--prune-rel-threshold 0.3 contradicts it"),
        ("var-stream", {"prune_preset": "freitag2017", "beam_finalize": "ours"}, {},
         "sets --beam-finalize shrink"),
        ("var-stream", {"prune_preset": "freitag2017-k14", "prune_reference": "final"}, {},
         "sets --prune-reference active"),
        ("fixed-ours", {"prune_preset": "freitag2017"}, {}, "does not read --prune-preset"),
        ("var-stream", {"stream_input_order": "shuffled"}, {}, "--stream-input-order must be one of sorted, as-given"),
    ],
)
def test_bad_options_are_one_line_errors(name, opts, gen, message):
    from fairseq_stream.engine.validation import check_options as validate

    with pytest.raises(FairseqStreamError) as err:
        o = stream_opts(search=name, **opts)
        validate(o)
        model = TableModel(D, A1_TABLE)
        build_generator(name, fake_task(D), [model], gen_cfg(**gen), o)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_prune_preset_is_the_papers_rule_and_agrees_with_the_same_flags():
    from fairseq_stream.engine.validation import check_options as validate

    flags = {"prune_rel_threshold": 0.6, "prune_abs_threshold": 2.5, "prune_rel_local_threshold": 0.02,
             "prune_max_cands_per_node": 3, "prune_reference": "active", "beam_finalize": "shrink"}
    model = TableModel(D, A1_TABLE)
    built = {}
    for label, opts in [("preset", {"prune_preset": "freitag2017"}), ("flags", flags),
                        ("both", dict(flags, prune_preset="freitag2017"))]:  # the same values given twice: fine
        o = stream_opts(search="var-stream", **opts)
        validate(o)
        built[label] = build_generator("var-stream", fake_task(D), [model], gen_cfg(beam=5), o)
    for g in built.values():
        assert g.config.pruning == built["flags"].config.pruning and g.config.finalize == "shrink"
    p = built["preset"].config.pruning
    assert (p.rel_threshold, p.abs_threshold, p.rel_local_threshold, p.max_cands_per_node, p.reference) == \
        (0.6, 2.5, 0.02, 3, "active")
    k14 = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=5),  # the table has 8 symbols
                          stream_opts(search="var-batch", prune_preset="freitag2017-k14", prune_ended="keep"))
    assert (k14.config.pruning.rel_threshold, k14.config.pruning.rel_local_threshold) == (0.3, 0.3)
    assert k14.config.pruning.ended == "keep"  # an option the preset does not set stays the user's
    plain = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=5), stream_opts(search="var-batch"))
    assert plain.config.pruning.reference == "normalized" and plain.config.finalize == "ours"  # defaults unchanged


# A short finished hypothesis against a longer, better-per-token one: k = 2, δ = 1.
# Step 1: "b a" (log .7) tops "b EOS" (log .3), which waits. Step 2: "b a"'s children (.28,
# .245) fall below it, so "b EOS" becomes final: log-prob -1.20, normalised -0.60 per token.
# Step 3: "b a c c" = log .098 = -2.32 is more than δ below -1.20 (reference 'final',
# Yang2020 App. A.3: pruned, the beam empties, "b EOS" is the answer) but within δ of the best
# candidate on the beam (itself, 'active') and of the final's -0.60 per token scaled to its
# 4 tokens, -2.41 ('normalized'). It then ends at -2.37 / 5 = -0.47 per token and wins.
SHORT_FINAL_TABLE = {
    (SRC, ()): {B: 1.0},
    (SRC, (B,)): {A: 0.7, EOS: 0.3},
    (SRC, (B, A)): {C: 0.4, B: 0.35, EOS: 0.25},
    (SRC, (B, A, C)): {C: 0.35, A: 0.3, B: 0.25, EOS: 0.1},
    (SRC, (B, A, C, C)): {EOS: 0.95, A: 0.05},
}


@pytest.mark.parametrize("reference, rule, expected", [
    ("final", {"prune_abs_threshold": 1.0}, [B, EOS]),
    ("active", {"prune_abs_threshold": 1.0}, [B, A, C, C, EOS]),
    ("normalized", {"prune_abs_threshold": 1.0}, [B, A, C, C, EOS]),
    # rp = e^-1 is δ = 1 on probabilities (Freitag2017 Eq. 1), so the same references apply
    ("final", {"prune_rel_threshold": math.exp(-1.0)}, [B, EOS]),
    ("active", {"prune_rel_threshold": math.exp(-1.0)}, [B, A, C, C, EOS]),
    ("normalized", {"prune_rel_threshold": math.exp(-1.0)}, [B, A, C, C, EOS]),
])
def test_prune_reference_of_ap_and_rp(reference, rule, expected):
    opts = {"prune_abs_threshold": float("inf"), "prune_max_cands_per_node": 2, "prune_reference": reference, **rule}
    (hyps,), _ = ours(SHORT_FINAL_TABLE, name="var-batch", gen={"beam": 2, "max_len_b": 6, "lenpen": 1.0}, opts=opts)
    assert hyps[0]["tokens"].tolist() == expected


def test_reference_active_ignores_finals_and_normalized_still_ends_the_search():
    # k = 3, δ = 1. Step 1: "b a" (log .55) tops "b EOS" (.45), which waits. Step 2: "b a c"
    # (.275, -1.29) and "b a b" (.22, -1.51) fall below it: "b EOS" is final, -0.40 per token.
    # Step 3: the best two children, "b a c c" (-2.68) and "b a b c" (-2.72), are within δ of
    # each other ('active' keeps both and searches on) but not of the final's -0.40 per token
    # scaled to 4 tokens, -1.60 ('normalized' prunes both and stops, as 'final' does).
    table = {
        (SRC, ()): {B: 1.0},
        (SRC, (B,)): {A: 0.55, EOS: 0.45},
        (SRC, (B, A)): {C: 0.5, B: 0.4, EOS: 0.1},
        (SRC, (B, A, C)): {C: 0.25, A: 0.21, B: 0.19, SRC: 0.15, EOS: 0.1, D.unk(): 0.1},
        (SRC, (B, A, B)): {C: 0.3, A: 0.2, B: 0.18, SRC: 0.12, EOS: 0.1, D.unk(): 0.1},
    }
    gen = {"beam": 3, "max_len_b": 6, "lenpen": 1.0}
    opts = {"prune_abs_threshold": 1.0, "prune_max_cands_per_node": 2}
    runs = {ref: ours(table, name="var-batch", gen=gen, opts=dict(opts, prune_reference=ref)) for ref in REFERENCES}
    expansions = {ref: g.stats.expansions for ref, (_, g) in runs.items()}
    assert expansions["final"] == expansions["normalized"] == 5  # BOS, b, b a, b a c, b a b
    assert expansions["active"] > 5
    assert runs["normalized"][0][0][0]["tokens"].tolist() == [B, EOS]


def test_rel_local_threshold_ignores_ended_candidates_waiting_on_the_beam():
    # Freitag2017 Eq. 3 compares this step's expansions by their last word; rpl = 0.5, k = 5.
    # Step 1: "b a" (.4), "b c" (.35) and "b EOS" (.25, above .5 · .4: kept), which waits.
    # Step 2: "b a a" (.26, last word .65) keeps "b EOS" off the top; "b c a" (.45) and
    # "b c b" (.40) are above .5 · .65 = .325 and stay, "b a b" (.30) is pruned: 3 rows at
    # step 3, the last (EOS forced), where "b a a EOS" (.26) ends the sentence (Z = 1). Read as
    # p = 1, the waiting candidate's stored last word made the threshold .5: only "b a a" stayed.
    table = {
        (SRC, ()): {B: 1.0},
        (SRC, (B,)): {A: 0.4, C: 0.35, EOS: 0.25},
        (SRC, (B, A)): {A: 0.65, B: 0.3, EOS: 0.05},
        (SRC, (B, C)): {A: 0.45, B: 0.4, EOS: 0.15},
    }
    opts = {"prune_abs_threshold": float("inf"), "prune_max_cands_per_node": 3, "beam_final_count": 1,
            "prune_rel_local_threshold": 0.5}
    (hyps,), g = ours(table, name="var-batch", gen={"beam": 5, "max_len_b": 5, "unnormalized": True}, opts=opts)
    assert g.stats.expansions == 1 + 1 + 2 + 3  # BOS, b, {b a, b c}, {b a a, b c a, b c b}
    assert hyps[0]["tokens"].tolist() == [B, A, A, EOS]


# --prune-ended: k = 2, δ = 1, reference 'active', Z = 1. Step 1: "b EOS" (log .2 =
# -1.61) is more than δ below "b a" (-0.22). Yang2020 prunes it; the search goes on to the
# maximum length and returns "b a c EOS" (.173). Kept (it needs no decoder row), it waits on
# the beam; at step 2 "b a"'s children (.192, .184) fall below it and it becomes final, the
# fixed-width beam's answer.
ENDED_TABLE = {
    (SRC, ()): {B: 1.0},
    (SRC, (B,)): {A: 0.8, EOS: 0.2},
    (SRC, (B, A)): {C: 0.24, B: 0.23, A: 0.22, SRC: 0.21, EOS: 0.10},
    (SRC, (B, A, C)): {EOS: 0.9, C: 0.1},
    (SRC, (B, A, B)): {EOS: 0.9, C: 0.1},
}


@pytest.mark.parametrize("ended, expected", [("prune", [B, A, C, EOS]), ("keep", [B, EOS])])
def test_prune_ended_spares_candidates_that_end(ended, expected):
    gen = {"beam": 2, "max_len_b": 3, "unnormalized": True}
    opts = {"prune_abs_threshold": 1.0, "prune_max_cands_per_node": 2, "prune_reference": "active",
            "beam_final_count": 1, "prune_ended": ended}
    (hyps,), _ = ours(ENDED_TABLE, name="var-batch", gen=gen, opts=opts)
    assert hyps[0]["tokens"].tolist() == expected
    (fixed,), _ = ours(ENDED_TABLE, name="fixed-ours", gen=gen, opts={"beam_final_count": 1})
    assert fixed[0]["tokens"].tolist() == [B, EOS]
