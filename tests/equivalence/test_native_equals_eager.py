"""``--step-mode native`` (the eager decoder step as one C++ call) gives the eager step's bits.

``csrc/decoder_step.cpp`` makes the eager step's aten calls in its order (model/native_decoder.py), so
on the trained demo model every strategy's tokens are identical and its scores EXACTLY equal (``==``),
in float32 and in int8; the statistics count native steps. Its caches never move
(model/row_arena.py: a reorder copies a table, the attention reads through it) where the eager
step's are copied at every reorder. What the operator does not run falls back to the eager step,
named in the statistics.
"""
import os
from typing import Any

import pytest

from conftest import DEMO
from fairseq_stream.model import native_decoder, row_arena

N = 16
CASES = {  # name → (search, gen, opts); all with refills (capacity < N)
    "var-stream": ("var-stream", {"beam": 5, "nbest": 2}, {"stream_capacity": 8}),
    "fixed-ours": ("fixed-ours", {"beam": 5}, {"stream_capacity": 8}),
    "greedy": ("fixed-ours", {"beam": 1}, {"stream_capacity": 8}),
    "gs-jacobi": ("gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 8}),  # causal blocks, own lengths
    "var-fifo": ("var-fifo", {"beam": 5}, {"stream_capacity": 8}),  # rows of different lengths in one step
    "lookahead": ("lookahead", {"beam": 1}, {"stream_capacity": 8}),  # ragged verification blocks
    # the draft steps native too, its caches rolled back by the verifier
    "speculative": ("speculative", {"beam": 1}, {"draft_path": os.path.join(DEMO, "draft.pt"), "stream_capacity": 8}),
}
SLOW = ("var-fifo", "lookahead", "speculative")

pytestmark = pytest.mark.skipif(native_decoder.kernel_available() is not None,
                                reason="the native-step kernel cannot be built here")


def _params():
    return [pytest.param(n, marks=pytest.mark.slow if n in SLOW else ()) for n in CASES]


@pytest.fixture(scope="module")
def data(demo_session, demo_sources):
    return demo_session.encode(demo_sources[:N])


def _run(session: Any, data: Any, case: str, mode: str, **extra: Any) -> Any:
    search, gen, opts = CASES[case]
    return session.translate(data, search=search, gen=gen, opts=dict(opts, step_mode=mode, **extra))


def assert_identical(a: Any, b: Any) -> None:
    assert len(a.hypos) == len(b.hypos)
    for i, (x, y) in enumerate(zip(a.hypos, b.hypos)):
        assert [h["tokens"].tolist() for h in x] == [h["tokens"].tolist() for h in y], f"sentence {i}"
        assert [h["score"] for h in x] == [h["score"] for h in y], f"sentence {i}"  # exactly, not approx
        assert all(bool((h["positional_scores"] == g["positional_scores"]).all()) for h, g in zip(x, y)), f"sentence {i}"


def _check(eager: Any, native: Any) -> None:
    assert_identical(eager, native)
    modes = native.stats.step_mode
    assert modes["mode"] == "native" and modes["steps_eager"] == 0 and modes["fallbacks"] == {}, modes
    assert modes["steps_native"] == native.stats.timesteps > 10
    assert eager.stats.step_mode["steps_eager"] == eager.stats.timesteps
    assert f"step mode native: {native.stats.timesteps} native, 0 eager" in native.stats.summary()


@pytest.mark.parametrize("case", _params())
def test_native_equals_eager_bit_for_bit_in_float32(demo_session, data, case, monkeypatch):
    reorders = []
    select = row_arena.select
    monkeypatch.setattr(row_arena, "select", lambda *a, **k: reorders.append(1) or select(*a, **k))
    eager = _run(demo_session, data, case, "eager")
    assert not reorders and not eager.stats.step_mode["reorders_by_table"]  # the eager step's caches are copied
    native = _run(demo_session, data, case, "native")
    _check(eager, native)
    assert reorders  # the native step's reorders copied tables, and the statistics say how many
    assert native.stats.step_mode["reorders_by_table"] > 0
    assert f"({native.stats.step_mode['reorders_by_table']} reorders as table copies)" in native.stats.summary()


@pytest.mark.parametrize("case", _params())
def test_native_equals_eager_bit_for_bit_in_int8(demo_session, data, case):
    eager = _run(demo_session, data, case, "eager", quantize="int8")
    _check(eager, _run(demo_session, data, case, "native", quantize="int8"))


@pytest.mark.parametrize("matmul", ["torch", "onednn", "packed"])
def test_native_equals_eager_with_each_float_product(demo_session, data, matmul):
    """--cpu-matmul torch runs F.linear (and a separate ReLU) in both steps; onednn and packed their packed products."""
    _check(_run(demo_session, data, "fixed-ours", "eager", cpu_matmul=matmul),
           _run(demo_session, data, "fixed-ours", "native", cpu_matmul=matmul))


def test_auto_takes_native_on_a_cpu(demo_session, data):
    auto = _run(demo_session, data, "greedy", "auto")
    assert auto.stats.step_mode["mode"] == "native" and auto.stats.step_mode["steps_eager"] == 0
    assert_identical(_run(demo_session, data, "greedy", "eager"), auto)


def test_what_native_does_not_run_falls_back_to_eager_and_is_named(demo_session64, demo_sources):
    """A float64 model: every step runs eager under native, with the reason in the statistics; auto takes eager."""
    data = demo_session64.encode(demo_sources[:4])
    out = demo_session64.translate(data, search="fixed-ours", gen={"beam": 5}, opts={"step_mode": "native"})
    modes = out.stats.step_mode
    assert modes["steps_native"] == 0 and modes["steps_eager"] == out.stats.timesteps
    assert modes["fallbacks"] == {"the decoder is not float32 on the CPU": out.stats.timesteps}
    assert "not native: the decoder is not float32 on the CPU" in out.stats.summary()
    auto = demo_session64.translate(data, search="fixed-ours", gen={"beam": 5})
    assert auto.stats.step_mode["mode"] == "eager" and not auto.stats.step_mode["fallbacks"]


@pytest.mark.slow
def test_native_equals_eager_on_an_ensemble(demo_sources):
    """Two models, each with caches that never move over an arena of its own, average their probabilities."""
    import os

    from fairseq_stream.tools.session import TranslationSession

    ckpt = os.path.join(DEMO, "checkpoint.pt")
    session = TranslationSession.load(DEMO, f"{ckpt}:{ckpt}", bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    data = session.encode(demo_sources[:12])
    for case in ("var-stream", "gs-jacobi"):
        _check(_run(session, data, case, "eager"), _run(session, data, case, "native"))
