"""How much each sentence was pruned (issue 81): the beam's per-sentence width meter and its statistics."""
from types import SimpleNamespace

from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.search.beam import BeamSearch
from fairseq_stream.search.defaults import PRUNED_WIDTH_BINS, PRUNED_WIDTH_KEY


def meter(k: int) -> SimpleNamespace:
    """Just what BeamSearch._meter_widths reads: k, the open widths and the statistics."""
    return SimpleNamespace(k=k, widths={}, stats=DecodeStats())


def test_a_finished_sentence_counts_its_rows_a_step_as_a_share_of_k():
    m = meter(5)
    BeamSearch._meter_widths(m, [7, 8], [5, 1], {})  # both go on: 7 fed 5 rows, 8 one
    BeamSearch._meter_widths(m, [7, 8], [3, 1], {})
    BeamSearch._meter_widths(m, [8], [1], {7: []})  # 7 finished: 8 rows over 2 steps = 0.8 of k
    assert m.widths == {8: [3, 3]}
    assert m.stats.extra == {f"{PRUNED_WIDTH_KEY}8": 1.0}
    BeamSearch._meter_widths(m, [], [], {8: [], 9: []})  # 8: 3 rows over 3 steps = 0.2 of k; 9 never went on
    assert m.widths == {}
    assert m.stats.extra == {f"{PRUNED_WIDTH_KEY}8": 1.0, f"{PRUNED_WIDTH_KEY}2": 1.0}


def test_a_full_beam_lands_in_the_last_bin():
    m = meter(4)
    BeamSearch._meter_widths(m, [1], [4], {})
    BeamSearch._meter_widths(m, [], [], {1: []})
    assert m.stats.extra == {f"{PRUNED_WIDTH_KEY}{PRUNED_WIDTH_BINS - 1}": 1.0}


def test_percentiles_are_bin_edges_and_survive_a_merge_of_shards():
    one, two = DecodeStats(), DecodeStats()
    for b in range(10):  # bins 0..9, one sentence each in one shard, bin 4 twice in the other
        one.add_extra(f"{PRUNED_WIDTH_KEY}{b}")
    two.add_extra(f"{PRUNED_WIDTH_KEY}4", 2)
    assert one.pruned_widths() == {"sentences": 10, "p10": 0.1, "p50": 0.5, "p90": 0.9}
    one.merge(two)
    assert one.pruned_widths() == {"sentences": 12, "p10": 0.2, "p50": 0.5, "p90": 0.9}
    assert "a pruned sentence's rows a step ≤ 20% / 50% / 90% of k" in one.summary()
    assert one.to_dict()["pruned_width"]["p50"] == 0.5
    assert DecodeStats().pruned_widths() == {} and "pruned" not in DecodeStats().summary()
