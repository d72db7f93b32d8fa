"""The --prune-auto controller (search/prune_controller.py, issue 50), as pure logic: probes chosen
across source lengths within the budget, never a blank or one-token source; it relaxes on a loss over
the tolerance, tightens only on the trial's margin, holds off a rung that failed, reads no clock."""
import math

import pytest

from fairseq_stream.search.defaults import (
    PRUNE_AUTO_BUDGET, PRUNE_AUTO_HOLD, PRUNE_AUTO_MIN_RELAX, PRUNE_AUTO_MIN_TIGHTEN, PRUNE_AUTO_START,
    PRUNE_AUTO_START_ROWS, PRUNE_AUTO_UNSURE, PRUNE_AUTO_UNSURE_OUTPUTS, PRUNE_AUTO_WINDOW,
)
from fairseq_stream.search.prune_controller import OFF, Probe, PruneController, Setting, ladder, start, stratum

GOOD = Probe(fixed_score=-1.0, score=-1.0, changed=False)
BAD = Probe(fixed_score=-1.0, score=-1.1, changed=True)  # 10% of the fixed beam's score


def test_the_ladder_is_fastest_first_then_off_and_drops_rungs_equal_at_this_k():
    assert ladder(50)[0] == Setting(1.25, 5) and ladder(50)[-2] == Setting(3.0, 10) and ladder(50)[-1] == OFF
    assert ladder(5) == [Setting(1.25, 5), Setting(1.5, 5), Setting(2.0, 5), Setting(3.0, 5), OFF]  # M 10 = M 5 here
    assert OFF.label() == "off (the fixed beam's width)" and math.isinf(OFF.delta)
    assert PruneController(50).setting == Setting(*PRUNE_AUTO_START) and start(50) == PRUNE_AUTO_START
    assert PruneController(5).setting == Setting(*start(5))
    assert PruneController(5).at == PruneController(50).at == 0  # the run starts at the fastest rung, at any k
    assert PruneController(2).setting.delta == start(2)[0]  # M 5 = M 2 at k = 2: the same rung


def test_strata_are_powers_of_two_of_the_source_length():
    assert [stratum(n) for n in (2, 3, 4, 7, 8, 15, 16, 100)] == [1, 1, 2, 2, 3, 3, 4, 6]


def test_probes_skip_blank_and_one_token_sources_and_spread_over_lengths():
    ctl = PruneController(5)
    lengths = [0, 1, 3, 3, 3, 3, 20, 20, 20, 40]  # tokens without EOS
    rows = [row for row, _ in ctl.choose_probes(lengths, run_work=10 ** 9, run_per_token=1.0)]
    assert ctl.probes == 8 and ctl.strata == {1: 4, 4: 3, 5: 1}
    assert 0 not in rows and 1 not in rows and rows == sorted(rows)
    assert set(rows) == {2, 3, 4, 5, 6, 7, 8, 9}  # an unbounded budget takes every eligible row
    ctl = PruneController(5)
    few = ctl.choose_probes(lengths, run_work=int(3 * (3 + 20 + 40) / PRUNE_AUTO_BUDGET) + 1, run_per_token=1.0)
    assert {stratum(lengths[r]) for r, _ in few} == {1, 4, 5}  # three probes: one per stratum, not the three shortest
    ctl = PruneController(5)
    assert len(ctl.choose_probes(lengths, run_work=0, run_per_token=1.0, minimum=2)) == 2  # on credit


def test_the_budget_bounds_the_probes_and_shrinks_while_the_setting_holds():
    ctl = PruneController(5)
    assert ctl.choose_probes([10] * 64, run_work=0, run_per_token=1.0) == []
    assert ctl.budget_share() == PRUNE_AUTO_BUDGET
    rows = ctl.choose_probes([10] * 64, run_work=10_000, run_per_token=1.0)
    assert len(rows) == int(PRUNE_AUTO_BUDGET * 10_000 / (2 * 10))  # first estimate: 2x the run's cost per token
    assert ctl.choose_probes([10] * 64, run_work=10_000, run_per_token=1.0) == []  # chosen, not decoded: charged
    charged = sum(cost for _, cost in rows)
    ctl.count_work(2 * charged, charged, source_tokens=10 * len(rows))  # they cost twice the estimate
    assert ctl.pending_work == 0 and ctl.probe_work == 2 * charged and ctl.per_token == 2 * 2.0
    assert PruneController(50).first_estimate > ctl.first_estimate  # the fixed beam costs more at k = 50
    assert ctl.choose_probes([10] * 64, run_work=40_000, run_per_token=1.0) != []  # the run's work grew
    ctl.since_change = 2 * 2 * PRUNE_AUTO_WINDOW  # two windows of probes, each read twice (trial, current)
    assert ctl.budget_share() == PRUNE_AUTO_BUDGET / 3


def test_the_first_refills_credit_is_a_few_sentences_work_so_fewer_probes_at_wide_beams():
    # a fixed beam of 50 costs ~k / PRUNE_AUTO_START_ROWS of the run's sentences: four such probes on credit were
    # 38.7% of a 100-sentence demo run; at narrow beams the credit still covers what a relax needs
    narrow, wide = PruneController(5), PruneController(50)
    assert wide.first_estimate == pytest.approx(50 / PRUNE_AUTO_START_ROWS)
    assert narrow.credit() == 4 and PruneController(12).credit() == 4 > PRUNE_AUTO_MIN_RELAX
    assert PruneController(20).credit() == 2 and wide.credit() == 1 == PruneController(500).credit()


def test_it_relaxes_when_the_current_rung_loses_and_holds_off_the_failed_rung():
    ctl = PruneController(50)
    start = ctl.at
    for i in range(PRUNE_AUTO_MIN_RELAX):
        assert ctl.at == start
        ctl.observe(BAD, GOOD, sentences=i)
    assert ctl.at == start + 1 and ctl.changes[-1].why.startswith("δ 1.25, M 5 lost 10.00%")
    for i in range(PRUNE_AUTO_MIN_TIGHTEN):  # the trial (the rung that failed) is perfect now: held off a while
        ctl.observe(GOOD, GOOD, sentences=i)
    assert ctl.at == start + 1
    while ctl.observed < PRUNE_AUTO_MIN_RELAX + PRUNE_AUTO_HOLD:
        ctl.observe(GOOD, GOOD, sentences=0)
    assert ctl.at == start  # back once the hold is over


def test_it_tightens_only_on_the_trials_margin_and_never_past_the_fastest_rung():
    ctl = PruneController(50, tolerance=0.06)
    ctl._move(2, 0, "where this test starts")  # δ 2: two faster rungs below
    start = ctl.at
    slightly = Probe(-1.0, -1.05, False)  # 5%: within the tolerance (6%), not within half of it
    for _ in range(3 * PRUNE_AUTO_MIN_TIGHTEN):
        ctl.observe(GOOD, slightly, sentences=0)
    assert ctl.at == start
    for _ in range(10 * PRUNE_AUTO_MIN_TIGHTEN):
        ctl.observe(GOOD, GOOD if ctl.trial_setting is not None else None, sentences=0)
    assert ctl.at == 0 and ctl.trial_setting is None
    assert [c.setting for c in ctl.changes] == ["δ 1.25, M 5", "δ 2, M 5", "δ 1.5, M 5", "δ 1.25, M 5"]
    assert ctl.as_dict(1000)["changes"][2]["why"] == "δ 1.5, M 5 lost 2.92%, 0/12 changed"  # a sliding window: 7 at 5%, 5 at 0


def test_changed_hypotheses_without_a_score_loss_do_not_relax():
    # on a weak model a rung that keeps BLEU changes most best hypotheses (docs/history/results-2026-11.md, prune-auto round 5)
    ctl = PruneController(5)
    start = ctl.at
    for _ in range(4 * PRUNE_AUTO_MIN_RELAX):
        ctl.observe(Probe(-1.0, -1.0, True), None, sentences=0)
    assert ctl.at == start
    ctl.observe(Probe(-1.0, -1.0 - 100 * ctl.tolerance, True), None, sentences=0)  # one large loss in the window
    assert ctl.at == start + 1


def test_off_is_the_last_resort_and_the_statistics_name_every_move():
    ctl = PruneController(50)
    for _ in range(40):
        ctl.observe(BAD, None, sentences=0)
    assert ctl.setting == OFF
    info = ctl.as_dict(run_work=1000)
    assert info["setting"] == OFF.label() and info["steered"] and info["observed"] == 40 and info["probes"] == 0
    assert [c["setting"] for c in info["changes"]] == ["δ 1.25, M 5", "δ 1.5, M 5", "δ 2, M 5", "δ 3, M 5", "δ 3, M 10",
                                                        OFF.label()]
    assert "after 40 outcome(s) of 0 probe(s)" in ctl.line(1000) and "steered δ 1.25, M 5 → δ 1.5, M 5" in ctl.line(1000)


def test_the_same_outcomes_give_the_same_moves():
    def run():
        ctl = PruneController(5)
        for i in range(30):
            ctl.observe(BAD if i % 7 == 0 else GOOD, GOOD if i % 5 else BAD, sentences=i)
        return [c.as_dict() for c in ctl.changes]

    assert run() == run()


@pytest.mark.parametrize("beam, safest", [(5, "δ 3, M 5"), (50, "δ 3, M 10")])
def test_an_unsure_model_goes_to_the_safest_pruned_rung_for_good(beam, safest):
    ctl = PruneController(beam)
    unsure = PRUNE_AUTO_UNSURE - 0.3  # nats a token: a weak model's outputs
    ctl.observe_output(0.0, 2, sentences=0)  # a blank output (EOS and one token at most): no evidence
    ctl.observe_output(-math.inf, 5, sentences=0)  # nothing found: no evidence
    for i in range(PRUNE_AUTO_UNSURE_OUTPUTS - 1):
        ctl.observe_output(unsure, 10, sentences=i)
    assert not ctl.unsure and len(ctl.changes) == 1  # one output short of the evidence
    assert ctl.choose_probes([10] * 64, run_work=10 ** 9, run_per_token=1.0) != []
    ctl.observe_output(unsure, 10, sentences=20)
    assert ctl.unsure and ctl.setting.label() == safest
    assert ctl.choose_probes([10] * 64, run_work=10 ** 9, run_per_token=1.0) == []  # its rung is kept: no probes
    assert ctl.changes[-1].sentences == 20 and ctl.changes[-1].why.startswith(
        f"an unsure model: its first {PRUNE_AUTO_UNSURE_OUTPUTS} outputs average {unsure:.2f} a token")
    for _ in range(10 * PRUNE_AUTO_MIN_TIGHTEN):  # a trial that never loses does not tighten it again
        ctl.observe(GOOD, GOOD, sentences=30)
    assert ctl.setting.label() == safest
    for _ in range(PRUNE_AUTO_WINDOW):  # but losses still relax it to the fixed beam
        ctl.observe(BAD, None, sentences=40)
    assert ctl.setting == OFF
    info = ctl.as_dict(1000)
    assert info["unsure"] and info["outputs_mean"] == pytest.approx(unsure)


def test_a_sure_model_is_not_moved_by_its_outputs_and_later_outputs_are_not_read():
    ctl = PruneController(5)
    for i in range(PRUNE_AUTO_UNSURE_OUTPUTS):
        ctl.observe_output(PRUNE_AUTO_UNSURE + 0.1, 10, sentences=i)
    for i in range(100):  # after the first outputs the model's confidence is settled
        ctl.observe_output(PRUNE_AUTO_UNSURE - 5, 10, sentences=i)
    assert not ctl.unsure and len(ctl.changes) == 1 and ctl.as_dict(1)["outputs_mean"] == pytest.approx(PRUNE_AUTO_UNSURE + 0.1)
