"""Parallel Jacobi decoding returns greedy's output (Santilli2023 Proposition 1), on the trained demo model."""
import pytest

from fairseq_stream.errors import FairseqStreamError

N = 40  # held-out sentences; greedy and each Jacobi variant decode them at batch 1
GEN = {"beam": 1, "max_len_a": 1.2, "max_len_b": 10}


@pytest.fixture(scope="module")
def greedy64(demo_session64, demo_sources):
    data = demo_session64.encode(demo_sources[:N])
    return data, demo_session64.translate(data, search="fixed-ours", gen=GEN, opts={"stream_capacity": 1})


@pytest.mark.parametrize("name,opts", [
    # plain Jacobi iterates over the whole target (~40 s): the slow tier; the fast tier has it across batches
    pytest.param("jacobi", {}, marks=pytest.mark.slow),
    ("gs-jacobi", {"jacobi_block": 3}),
    pytest.param("gs-jacobi", {"jacobi_block": 5, "jacobi_init": "tail"}, marks=pytest.mark.slow),
    ("hybrid-jacobi", {"jacobi_block": 3, "jacobi_max_parallel_len": 8}),
    ("gs-jacobi", {"jacobi_block": 3, "jacobi_parallel": "never"}),  # one position a call: greedy's steps
    ("gs-jacobi", {"jacobi_block": 4, "stream_capacity": 7, "stream_epsilon": 0.5}),  # batched, streaming
])
def test_identical_to_greedy_in_float64(demo_session64, greedy64, name, opts):
    data, greedy = greedy64
    out = demo_session64.translate(data, search=name, gen=GEN, opts=dict({"stream_capacity": 1}, **opts))
    for i, (g, j) in enumerate(zip(greedy.hypos, out.hypos)):
        assert j[0]["tokens"].tolist() == g[0]["tokens"].tolist(), f"sentence {i}"
        assert j[0]["score"] == pytest.approx(g[0]["score"], abs=1e-9)
    # Never more iterations than greedy's steps, and the statistics say how many fewer.
    assert out.stats.autoregressive_steps == sum(len(h[0]["tokens"]) for h in greedy.hypos)
    assert out.stats.extra["sentence_iterations"] <= out.stats.autoregressive_steps
    assert out.stats.accepted_tokens == out.stats.autoregressive_steps
    if opts.get("jacobi_parallel") == "never":
        assert out.stats.extra["sentence_iterations"] == out.stats.autoregressive_steps


def test_every_sentence_takes_at_most_greedys_steps(demo_session64, greedy64, demo_sources):
    _, greedy = greedy64
    # One sentence per run: the run's decoder calls are that sentence's iterations.
    for i in range(8):
        for name in ("jacobi", "gs-jacobi", "hybrid-jacobi"):
            out = demo_session64.translate(demo_session64.encode([demo_sources[i]]), search=name, gen=GEN,
                                      opts={"stream_capacity": 1})
            assert out.stats.timesteps <= len(greedy.hypos[i][0]["tokens"])


@pytest.mark.slow  # an agreement rate over 150 sentences, not an exactness check
def test_float32_agreement_with_fairseq_greedy(demo_session, demo_sources, record_property):
    data = demo_session.encode(demo_sources[:150])
    fs = demo_session.translate(data, search="beam", gen=GEN)
    out = demo_session.translate(data, search="gs-jacobi", gen=GEN, opts={"stream_capacity": 32})
    same = sum(a[0]["tokens"].tolist() == b[0]["tokens"].tolist() for a, b in zip(fs.hypos, out.hypos))
    rate = same / len(fs.hypos)
    record_property("float32_agreement_with_fairseq_greedy", rate)
    print(f"float32 gs-jacobi vs fairseq greedy: {same}/{len(fs.hypos)} = {rate:.3f}")
    assert rate >= 0.97


@pytest.mark.parametrize("gen,opts,message", [
    ({"beam": 5}, {}, "--beam 5"),
    ({"beam": 1}, {"jacobi_block": 0}, "--jacobi-block must be >= 1"),
    ({"beam": 1}, {"jacobi_parallel": "sometimes"}, "--jacobi-parallel must be one of auto, always, never"),
    ({"beam": 1, "nbest": 2}, {}, "--nbest"),
    ({"beam": 1, "no_repeat_ngram_size": 3}, {}, "--no-repeat-ngram-size"),
])
def test_bad_jacobi_options(demo_session, gen, opts, message):
    with pytest.raises(FairseqStreamError, match=message):
        demo_session.build_generator("gs-jacobi", gen, opts)
