"""fairseq_stream.tools.frontier end to end on the demo model: a three-point sweep at k = 2."""
import json
import os

from fairseq_stream.tools import frontier
from fairseq_stream.tools.frontier import Point, pareto_front


def test_frontier_sweep_writes_table_json_and_plot(tmp_path, capsys):
    out = str(tmp_path / "front")
    frontier.main(["--limit", "3", "--beam", "2", "--deltas", "1.5", "--scales", "0", "3", "--out", out])
    with open(out + ".json", encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    labels = [r["label"] for r in rows]
    # "default" is each sentence's own pruning (issue 81); "auto" the opt-in --prune-auto point
    assert labels == ["fairseq beam", "fixed-ours", "default", "auto", "δ=1.5 M=5 normalized",
                      "δ=1.5 M=5 normalized α=3"]
    auto = rows[3]["stats"]["prune_auto"]  # 3 short sentences: too little work to buy a probe; it stays where it started
    assert auto["steered"] and auto["setting"] == "δ 1.25, M 5" and rows[3]["label"] == "auto"
    assert "prune_auto" not in (rows[2]["stats"] or {}) or not rows[2]["stats"]["prune_auto"]  # the default steers nothing
    fixed = rows[1]
    assert fixed["delta_bleu"] == 0 and fixed["time_vs_fixed"] == 1 and fixed["p_vs_fixed"] is None
    assert all(0 <= r["p_vs_fixed"] <= 1 for r in rows if r is not fixed)
    assert [r["frontier"] for r in rows] == pareto_front([Point(r["wall_median"], r["bleu"]) for r in rows])
    assert any(r["frontier"] for r in rows)
    with open(out + ".md", encoding="utf-8") as f:
        table = f.read()
    assert table.count("\n| ") == 1 + len(rows)  # the header and one line per point
    assert "★" in table
    with open(out + ".png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out + ".png") > 10_000
