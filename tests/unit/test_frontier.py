"""The frontier tool's parts that need no model: the Pareto marks, the grid, the argument checks."""
import pytest

from fairseq_stream.tools import frontier
from fairseq_stream.tools.frontier import Grid, Point, pareto_front


def test_pareto_front_keeps_only_points_nothing_beats_on_both_axes():
    points = [Point(1.0, 30.0),   # fixed beam: slowest, best
              Point(0.5, 29.0),   # faster, a little worse: on the frontier
              Point(0.6, 28.0),   # slower and worse than the one above: off
              Point(0.2, 25.0),   # fastest: on
              Point(0.5, 29.0),   # a tie in both with the second: both stay
              Point(1.2, 30.0)]   # as good as the first but slower: off
    assert pareto_front(points) == [True, True, False, True, True, False]


def test_pareto_front_of_one_point_and_of_none():
    assert pareto_front([Point(3.0, 1.0)]) == [True]
    assert pareto_front([]) == []


def test_grid_puts_the_baselines_first_and_sweeps_every_combination():
    grid = Grid("var-batch", deltas=[1.5, 3], max_cands=[5], references=["normalized", "final"], scales=[0, 2],
                max_candidates=[40], runs=["var-stream:beam={k},label=mine"])
    specs = grid.specs(50)
    assert specs[:3] == ["beam:beam=50,label=fairseq beam", "fixed-ours:beam=50,label=fixed-ours",
                         "var-batch:beam=50,label=default"]
    assert specs[3] == "var-batch:beam=50,prune_auto=true,label=auto"  # issue 41: the --prune-auto point
    assert len(specs) == 4 + 2 * 2 * 2 + 2 + 1
    assert "var-batch:beam=50,prune_abs_threshold=3,prune_max_cands_per_node=5,prune_reference=final," \
           "prune_abs_scale=2,label=δ=3 M=5 final α=2" in specs
    assert any("stream_max_candidates=40,stream_oversubscribe=true" in s for s in specs)
    assert specs[-1] == "var-stream:beam=50,label=mine"
    assert grid.specs(5, fairseq_beam=False)[0].startswith("fixed-ours:beam=5")
    no_auto = Grid("var-batch", deltas=[], max_cands=[], references=[], scales=[], max_candidates=[], runs=[], auto=False)
    assert not any("prune_auto" in spec for spec in no_auto.specs(5))
    # var-stream's default is each sentence's own pruning (issue 81), as var-batch's: the row "default"
    stream = Grid("var-stream", deltas=[], max_cands=[], references=[], scales=[], max_candidates=[40], runs=[])
    assert stream.specs(5, fairseq_beam=False)[1:4] == [
        "var-stream:beam=5,label=default", "var-stream:beam=5,prune_auto=true,label=auto",
        "var-stream:beam=5,stream_max_candidates=40,label=default C=40"]


def test_the_auto_point_is_labelled_with_its_trajectory():
    from fairseq_stream.tools.frontier import auto_label

    row = {"label": "auto", "stats": {"prune_auto": {
        "setting": "δ 1.5, M 5", "probes": 9, "probe_share": 0.071,
        "changes": [{"setting": "δ 2, M 5", "why": "start"}, {"setting": "δ 1.5, M 5", "why": "δ 1.5, M 5 lost 0.1%"}]}}}
    assert auto_label(row) == "auto: δ 2, M 5 → δ 1.5, M 5 (9 probes, 7.1% of the work)"
    assert auto_label({"label": "default", "stats": {}}) == "default"


def test_the_auto_points_trajectory_runs_through_the_settings_it_moved_through():
    from fairseq_stream.tools.frontier import setting_of, trajectory

    def row(label, search="var-stream", opts=None, x=0.0, y=0.0):
        return {"label": label, "search": search, "opts": opts or {}, "time_vs_fixed": x, "bleu": y}

    from fairseq_stream.search.defaults import DEFAULT_ABS_SCALE

    default = dict(row("default", x=0.2, y=39.9), gen={"beam": 5})  # its δ is scaled per sentence: no fixed setting
    assert setting_of(default) == (None if DEFAULT_ABS_SCALE else "δ 1.5, M 5")
    at_k = [row("fixed-ours", "fixed-ours", x=1.0, y=40.0),
            row("δ=1.5 M=5", opts={"prune_abs_threshold": 1.5, "prune_max_cands_per_node": 5}, x=0.2, y=39.9),
            row("δ=2 M=5 normalized", opts={"prune_abs_threshold": 2.0, "prune_max_cands_per_node": 5,
                                            "prune_reference": "normalized", "prune_abs_scale": 0.0}, x=0.4, y=40.1),
            row("δ=2 M=5 final", opts={"prune_abs_threshold": 2.0, "prune_max_cands_per_node": 5,
                                       "prune_reference": "final"}, x=0.3, y=39.0)]
    assert [setting_of(r) for r in at_k] == ["off (the fixed beam's width)", "δ 1.5, M 5", "δ 2, M 5", None]
    auto = dict(row("auto", opts={"prune_auto": True}, x=0.25, y=40.0), stats={"prune_auto": {"changes": [
        {"setting": "δ 2, M 5"}, {"setting": "δ 3, M 5"}, {"setting": "δ 1.5, M 5"}]}})
    assert setting_of(auto) is None
    assert trajectory(auto, at_k + [auto]) == [(0.4, 40.1), (0.2, 39.9), (0.25, 40.0)]  # δ 3 is not in the grid


@pytest.mark.parametrize("argv, needle", [
    (["--limit", "0"], "--limit must be >= 1"),
    (["--beam", "0"], "--beam must be >= 1"),
    (["--src", "/nonexistent.es"], "--src '/nonexistent.es': no such file"),
    (["--path", "/nonexistent.pt"], "--path '/nonexistent.pt': no such file"),
    # issue 38 item 9: these were refused only after the baselines had decoded
    (["--deltas", "-1"], "--deltas: each value (as --prune-abs-threshold) must be >= 0 (inf = off), got -1.0"),
    (["--max-cands", "0"], "--max-cands: each value (as --prune-max-cands-per-node) must be >= 1, got 0"),
    (["--scales", "nan"], "--scales: each value (as --prune-abs-scale) must be >= 0 and finite, got nan"),
    (["--max-candidates", "0"], "--max-candidates: each value (as --stream-max-candidates) must be >= 1"),
])
def test_frontier_refuses_bad_arguments_in_one_line(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        frontier.main(argv + ["--out", str(tmp_path / "f")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_frontier_refuses_an_out_directory_that_does_not_exist(capsys):
    with pytest.raises(SystemExit):
        frontier.main(["--out", "/nonexistent-dir/f"])
    assert "does not exist" in capsys.readouterr().err
