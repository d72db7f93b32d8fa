"""The native step on raw buffers (``raw_layers`` in ops/csrc/decoder_step.cpp) gives the operator-per-call step's bits.

Where every product of the decoder is packed float32 or our int8 and its activation a ReLU, ``decoder_step``
runs the layers on buffers it allocates once a call: the products and the decode attention through their
kernels' raw entries (ops/csrc/raw_kernels.h), layer norm through aten's kernel, the residual sums and cache
writes as loops. The same kernels in the same order, so on the trained demo model every strategy's tokens,
scores and positional scores are EXACTLY those of the same step with ``set_raw(False)`` (every product an
operator call, as before the raw path) — one row, causal blocks, rows of their own lengths, caches that never
move, the draft's steps; float32 and int8. The native loops' search on raw buffers (``first_of_window``: the
fused top-k kernel's raw entry, fairseq's edits as loops; the aten calls where the window's best ties) is in it
too. The steps and searches it ran are counted (a raw path that silently declined would pass the comparison),
and what it does not cover (oneDNN's or torch's product) runs the aten calls.
"""
import os
from typing import Any, Dict, List, Tuple

import pytest

from conftest import DEMO, _load_demo
from test_native_equals_eager import assert_identical

from fairseq_stream.model import native_decoder

N = 12
CASES: Dict[str, Tuple[str, Dict[str, Any], Dict[str, Any]]] = {  # name → (search, gen, opts)
    "greedy-batch1": ("fixed-ours", {"beam": 1}, {"stream_capacity": 1}),  # the native greedy loop
    "fixed-k5": ("fixed-ours", {"beam": 5}, {"stream_capacity": 4}),  # caches that never move: reorders by table
    "var-fifo": ("var-fifo", {"beam": 5}, {"stream_capacity": 4}),  # rows of their own lengths in one step
    "gs-jacobi": ("gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 4}),  # causal blocks
    # the draft's steps too, and the native verification loop at batch 1
    # the draft for every sentence (--jacobi-parallel auto's choices follow the measured times, and so the loops' steps)
    "speculative": ("speculative", {"beam": 1}, {"draft_path": os.path.join(DEMO, "draft.pt"), "stream_capacity": 1,
                                                 "jacobi_parallel": "always"}),
    # --min-len past where the sentences would end: the loops' raw search must forbid EOS as the aten calls do, or
    # it hands those steps back to Python (the same output, fewer steps searched in the loop: counted below)
    "greedy-min-len": ("fixed-ours", {"beam": 1, "min_len": 40, "unkpen": 2.5}, {"stream_capacity": 1}),
    "speculative-min-len": ("speculative", {"beam": 1, "min_len": 40},
                            {"draft_path": os.path.join(DEMO, "draft.pt"), "stream_capacity": 1,
                             "jacobi_parallel": "always"}),
}

pytestmark = pytest.mark.skipif(native_decoder.kernel_available() is not None,
                                reason="the native-step kernel cannot be built here")


@pytest.fixture(scope="module")
def session_and_decoders():
    """A demo session of its own whose NativeDecoders are collected as they are built."""
    built: List[Any] = []
    build = native_decoder.build

    def collect(*args: Any, **kwargs: Any) -> Any:
        out = build(*args, **kwargs)
        if not isinstance(out, str):
            built.append(out)
        return out

    native_decoder.build = collect
    try:
        session = _load_demo()
        yield session, built
    finally:
        native_decoder.build = build


def _run(session: Any, sources: List[str], built: List[Any], case: str, raw: bool,
         **extra: Any) -> Tuple[Any, int, int]:
    search, gen, opts = CASES[case]
    opts = dict(opts, step_mode="native", **extra)
    session.translate(session.encode(sources[:1]), search=search, gen=gen, opts=opts)  # builds this case's decoders
    data = session.encode(sources)
    for decoder in built:
        decoder.set_raw(raw)
    before = sum(d.raw_steps() for d in built), sum(d.raw_searches() for d in built)
    out = session.translate(data, search=search, gen=gen, opts=opts)
    return out, sum(d.raw_steps() for d in built) - before[0], sum(d.raw_searches() for d in built) - before[1]


@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("case", list(CASES))
def test_raw_step_equals_the_operator_calls_bit_for_bit(session_and_decoders, demo_sources, case, quantize):
    session, built = session_and_decoders
    raw, raw_steps, raw_searches = _run(session, demo_sources[:N], built, case, True, quantize=quantize)
    calls, none, no_searches = _run(session, demo_sources[:N], built, case, False, quantize=quantize)
    assert_identical(calls, raw)
    assert none == 0 and no_searches == 0
    assert raw_steps >= raw.stats.step_mode["steps_native"] > 10  # the draft's steps count too
    if case in ("greedy-batch1", "speculative", "greedy-min-len", "speculative-min-len"):  # the native loops search
        assert raw_searches > 10
        assert raw.stats.extra["native_loop_steps"] == calls.stats.extra["native_loop_steps"]  # they stop alike


def test_products_without_a_raw_kernel_run_the_operator_calls(session_and_decoders, demo_sources):
    """oneDNN's product has no raw entry: every step makes the aten calls (still native)."""
    session, built = session_and_decoders
    onednn, steps, _ = _run(session, demo_sources[:4], built, "fixed-k5", True, cpu_matmul="onednn")
    assert steps == 0 and onednn.stats.step_mode["steps_native"] > 0
    _, raw_steps, _ = _run(session, demo_sources[:4], built, "fixed-k5", True, cpu_matmul="packed")
    assert raw_steps > 0


def test_the_variable_turns_the_raw_step_off(monkeypatch):
    """FAIRSEQ_STREAM_NO_RAW_STEP=1 (for A/B timings): a decoder built under it never takes the raw path."""
    monkeypatch.setenv("FAIRSEQ_STREAM_NO_RAW_STEP", "1")
    session = _load_demo()
    data = session.encode(["En el principio creó Dios los cielos y la tierra."])
    built: List[Any] = []
    build = native_decoder.build
    monkeypatch.setattr(native_decoder, "build", lambda *a, **k: built.append(build(*a, **k)) or built[-1])
    out = session.translate(data, search="fixed-ours", gen={"beam": 1}, opts={"step_mode": "native"})
    assert built and out.stats.step_mode["steps_native"] > 0
    assert sum(d.raw_steps() for d in built if not isinstance(d, str)) == 0


@pytest.mark.parametrize("case", ["greedy-batch1", "fixed-k5", "speculative"])
def test_half_panels_decode_as_float32_panels(monkeypatch, demo_sources, case):
    """The demo's checkpoint holds float16 weights, so the packed product keeps them as float16 panels (half the
    bytes a step reads: ops/packed_linear.py): tokens, scores and positional scores are exactly those of float32
    panels (FAIRSEQ_STREAM_NO_HALF_PANELS=1), through the raw step, the native loops and the draft's steps."""
    import torch

    from fairseq_stream.model import linear_kernels

    search, gen, opts = CASES[case]
    opts = dict(opts, step_mode="native", cpu_matmul="packed")
    outs, dtypes = [], []
    for flag in ("0", "1"):
        monkeypatch.setenv("FAIRSEQ_STREAM_NO_HALF_PANELS", flag)
        session = _load_demo()  # a model of its own: its packed copy is made under this flag
        outs.append(session.translate(session.encode(demo_sources[:N]), search=search, gen=gen, opts=opts))
        copies = linear_kernels.prepare(session.models, "packed")  # the copies it decoded with (made once a model)
        dtypes.append({m.packed.dtype for c in copies for m in c.modules()
                       if isinstance(m, linear_kernels.PackedLinear)})
    assert dtypes == [{torch.float16}, {torch.float32}]
    assert_identical(outs[1], outs[0])
    assert outs[0].stats.step_mode["steps_native"] > 10
