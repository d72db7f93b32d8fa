"""``--jacobi-parallel auto`` (search/parallel_gate.py): a native run's blocks only where they cost less per verified
token, measured in the run; the closing statistics say how the runs went. Timings are given, not measured, here."""
import pytest

from fairseq_stream.engine.stats import DecodeStats, jacobi_parallel_summary
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.jacobi import JacobiConfig
from fairseq_stream.search.lookahead import LookaheadConfig
from fairseq_stream.search.parallel_gate import WARMUP, ParallelGate, explore_interval

pytestmark = pytest.mark.quick


def _run(gate: ParallelGate, block_call: float, block_tokens: int, step_call: float, n: int) -> list:
    """``n`` native runs of 4 iterations each: a block call costs ``block_call`` s and verifies ``block_tokens``,
    a one-position call ``step_call`` s and one token. Returns the sides chosen."""
    sides = []
    for _ in range(n):
        parallel = gate.parallel()
        call, tokens = (block_call, block_tokens) if parallel else (step_call, 1)
        gate.observe(parallel, 5 * call, [tokens] * 4)  # 4 iterations and the last call's
        sides.append(parallel)
    return sides


def test_fixed_modes_do_not_measure():
    for mode, side in (("always", True), ("never", False)):
        stats = DecodeStats()
        gate = ParallelGate(mode, stats)
        assert _run(gate, 1.0, 1, 0.5, 10) == [side] * 10
        assert not stats.extra and jacobi_parallel_summary(stats.extra) == ""


def test_blocks_that_cost_more_a_token_give_way_to_single_steps():
    """A block call 1.2× a step's verifying 1.05 tokens a call (the 3+3 models on Zen 4): single steps, blocks
    tried again every explore_interval(gap) runs."""
    stats = DecodeStats()
    gate = ParallelGate("auto", stats)
    sides = _run(gate, 1.2, 1, 1.0, 200)
    first = 2 * (WARMUP + 1)  # each side measured, blocks first, after a run that is not
    assert sides[:first] == [True] * (WARMUP + 1) + [False] * (WARMUP + 1)
    later = sides[first:]
    tries = sum(later)
    assert 0 < tries <= len(later) // explore_interval(0.2) + 1
    assert explore_interval(0.0) == 16 and explore_interval(0.2) == 48 and explore_interval(5.0) == 176
    line = jacobi_parallel_summary(stats.extra)
    assert line == f"--jacobi-parallel auto: {WARMUP + 1 + tries} sentence runs in blocks, " \
                   f"{len(sides) - WARMUP - 1 - tries} one position a call (1200000 vs 1000000 µs a verified token)"


def test_blocks_that_verify_enough_stay():
    """A block call 1.5× a step's that verifies 2 tokens: blocks (0.75 of a step a token), single steps retried."""
    gate = ParallelGate("auto")
    sides = _run(gate, 1.5, 2, 1.0, 120)
    later = sides[2 * WARMUP + 2:]
    assert sum(later) >= len(later) - len(later) // explore_interval(1 / 0.75 - 1) - 1 and not all(later)


def test_the_gate_follows_a_change_of_cost():
    """Blocks get cheaper mid-run (a pool that learns): the decayed estimates move the gate back to them."""
    gate = ParallelGate("auto")
    assert sum(_run(gate, 1.3, 1, 1.0, 100)[2 * WARMUP + 2:]) < 10
    assert sum(_run(gate, 1.3, 3, 1.0, 200)[-50:]) >= 45


def test_the_summary_sums_across_shards():
    """The statistics are sums (shards merge them): the cost of a token from the merged totals."""
    a, b = DecodeStats(), DecodeStats()
    for stats in (a, b):
        _run(ParallelGate("auto", stats), 2.0, 1, 1.0, 2 * (WARMUP + 1))
    a.merge(b)
    n = 2 * (WARMUP + 1)
    assert a.extra["jacobi_parallel_parallel_runs"] == n and a.extra["jacobi_parallel_parallel_iterations"] == 4 * 2 * WARMUP
    assert "(2000000 vs 1000000 µs a verified token)" in jacobi_parallel_summary(a.extra)
    assert f"--jacobi-parallel auto: {n} sentence runs in blocks, {n} one position a call" in a.summary()


def test_configs_check_the_mode():
    assert JacobiConfig(block=3, parallel="never").max_parallel_len == 0  # HGJ with L = 0
    assert JacobiConfig(block=3, parallel="auto").max_parallel_len is None
    for make in (lambda: JacobiConfig(block=3, parallel="often"), lambda: LookaheadConfig(ngram=3, parallel="often")):
        with pytest.raises(FairseqStreamError, match="--jacobi-parallel must be one of auto, always, never, got 'often'"):
            make()
