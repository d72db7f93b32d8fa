"""Exact speculative beam search (issue 83): ``--search speculative-beam`` returns ``fixed-ours``' output — every
hypothesis of the n-best list, its tokens, its positional scores and its score, **equal** in float32 and under
``--quantize int8`` — whatever the draft proposes (the shipped draft, which the demo model accepts often, and
random weights, which it almost never does), at batch 1, batched and streamed with refill, under either
finalisation rule; and fairseq's own beam (``SequenceGenerator``) with ``--beam-finalize fairseq`` (float64)."""
from __future__ import annotations

import os

import pytest
import torch

from conftest import DEMO
from helpers import random_weights, write_checkpoint_variant
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops import decode_attention

N = 24
GEN = {"beam": 5, "max_len_a": 1.2, "max_len_b": 10}
SHIPPED_DRAFT = os.path.join(DEMO, "draft.pt")
PRECISIONS = ["none", "int8"]

bit_exact = pytest.mark.skipif(decode_attention.cpu_kernel() is None,
                               reason="bit-exactness in float32 rests on the C++ attention kernel")


@pytest.fixture(scope="module")
def random_draft(tmp_path_factory):
    folder = tmp_path_factory.mktemp("drafts")
    return write_checkpoint_variant(os.path.join(DEMO, "checkpoint.pt"), str(folder / "random.pt"), random_weights)


@pytest.fixture(scope="module")
def data(demo_session, demo_sources):
    return demo_session.encode(demo_sources[:N])


@pytest.fixture(scope="module")
def beams(demo_session, data):
    """``fixed-ours`` k = 5 at batch 1, per precision and finalisation rule."""
    return {(q, rule): demo_session.translate(data, search="fixed-ours", gen=GEN,
                                              opts={"stream_capacity": 1, "quantize": q, "beam_finalize": rule})
            for q in PRECISIONS for rule in ("ours", "fairseq")}


def _assert_identical(expected, got) -> None:
    for i, (a, b) in enumerate(zip(expected.hypos, got.hypos, strict=True)):
        assert len(b) == len(a), f"sentence {i}"
        for x, y in zip(a, b):
            assert y["tokens"].tolist() == x["tokens"].tolist(), f"sentence {i}"
            assert torch.equal(y["positional_scores"], x["positional_scores"]), f"sentence {i}"
            assert float(y["score"]) == float(x["score"]), f"sentence {i}"


def _steps_per_verification(out) -> float:
    extra = out.stats.extra
    return extra["beam_steps_replayed"] / extra["verify_steps"]


@bit_exact
@pytest.mark.quick_every_case
@pytest.mark.parametrize("quantize", PRECISIONS)
def test_identical_to_fixed_ours_at_batch_one(demo_session, data, beams, quantize):
    out = demo_session.translate(data, search="speculative-beam", gen=GEN,
                                 opts={"stream_capacity": 1, "quantize": quantize, "draft_path": SHIPPED_DRAFT,
                                       "draft_tokens": "2"})
    _assert_identical(beams[quantize, "ours"], out)
    # the draft helps: more than one beam step per verification; every step was replayed, none skipped
    assert _steps_per_verification(out) > 1.15
    assert out.stats.extra["beam_steps_replayed"] == beams[quantize, "ours"].stats.timesteps
    assert out.stats.timesteps == out.stats.extra["verify_steps"] < beams[quantize, "ours"].stats.timesteps
    line = out.stats.summary()
    assert f"speculative beam: {_steps_per_verification(out):.2f} beam steps per verification" in line
    assert "γ 2" in line and "% of the time" in line


@bit_exact
@pytest.mark.parametrize("quantize", PRECISIONS)
@pytest.mark.parametrize("opts", [
    {"stream_capacity": 4, "draft_tokens": "3"},  # a group replays together
    {"stream_capacity": 5, "stream_epsilon": 0.5, "draft_tokens": "1"},  # streamed: refill, groups merge
    {"stream_capacity": 1, "draft_tokens": "3", "beam_finalize": "fairseq"},
], ids=["batched", "streamed", "fairseq-rule"])
def test_identical_to_fixed_ours_batched_and_streamed(demo_session, data, beams, quantize, opts):
    out = demo_session.translate(data, search="speculative-beam", gen=GEN,
                                 opts=dict(opts, quantize=quantize, draft_path=SHIPPED_DRAFT))
    _assert_identical(beams[quantize, opts.get("beam_finalize", "ours")], out)


@bit_exact
def test_identical_with_a_draft_the_model_rejects(demo_session, data, beams, random_draft):
    out = demo_session.translate(data, search="speculative-beam", gen=GEN,
                                 opts={"stream_capacity": 2, "draft_path": random_draft, "draft_tokens": "3"})
    _assert_identical(beams["none", "ours"], out)
    assert _steps_per_verification(out) < 1.05  # acceptance near zero: one beam step per call


@bit_exact
def test_nbest_lists_and_a_length_limit(demo_session, data):
    gen = dict(GEN, nbest=3, max_len_a=0.0, max_len_b=6)  # many hypotheses end at the limit, inside a block
    plain = demo_session.translate(data, search="fixed-ours", gen=gen, opts={"stream_capacity": 3})
    out = demo_session.translate(data, search="speculative-beam", gen=gen,
                                 opts={"stream_capacity": 3, "draft_path": SHIPPED_DRAFT, "draft_tokens": "4"})
    _assert_identical(plain, out)


def test_fairseqs_beam_with_its_rule(demo_session64, demo_sources):
    """fairseq's ``SequenceGenerator`` (float64 models; fairseq keeps its beam scores in float32)."""
    data = demo_session64.encode(demo_sources[:12])
    theirs = demo_session64.translate(data, search="beam", gen=GEN)
    out = demo_session64.translate(data, search="speculative-beam", gen=GEN,
                                   opts={"beam_finalize": "fairseq", "draft_path": SHIPPED_DRAFT, "draft_tokens": "2"})
    for i, (a, b) in enumerate(zip(theirs.hypos, out.hypos, strict=True)):
        assert b[0]["tokens"].tolist() == a[0]["tokens"].tolist(), f"sentence {i}"
        assert float(b[0]["score"]) == pytest.approx(float(a[0]["score"]), abs=1e-5)  # float32 sums, f"sentence {i}"


@pytest.mark.parametrize("opts,message", [
    ({}, "--search speculative-beam needs --draft-path"),
    ({"draft_path": SHIPPED_DRAFT, "draft_tokens": "auto"}, "takes an integer --draft-tokens"),
    ({"draft_path": SHIPPED_DRAFT, "draft_tokens": "0"}, r"--draft-tokens must be .* \[1, 64\]"),
    ({"draft_path": "/nonexistent/draft.pt"}, "no such file"),
])
def test_bad_options_are_one_line(demo_session, opts, message):
    with pytest.raises(FairseqStreamError, match=message):
        demo_session.build_generator("speculative-beam", GEN, opts)


@bit_exact
def test_the_output_layer_in_the_static_steps_region(demo_session, data, beams):
    """``--step-mode static`` (a CUDA graph's region, uncaptured on a CPU): every position's output layer runs inside
    the block step's region, the replay after it on its candidates; the same output."""
    out = demo_session.translate(data, search="speculative-beam", gen=GEN,
                                 opts={"stream_capacity": 3, "step_mode": "static", "draft_path": SHIPPED_DRAFT})
    _assert_identical(beams["none", "ours"], out)
    modes = out.stats.step_mode
    assert modes["mode"] == "static" and modes["steps_eager"] == 0
    assert modes["output_layer_in_step"] == out.stats.timesteps > 0 and modes["search_in_step"] == 0
