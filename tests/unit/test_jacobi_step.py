"""The fused Jacobi iteration (C++) equals the PyTorch reference, bit for bit, iteration after iteration.

Random groups run both implementations of :meth:`JacobiDecoding.iterate` from the same state,
with predictions that often confirm the draft (so blocks are accepted in part or whole) and
sometimes end in EOS: accepted tokens, the next feed, finished outputs and the new state must be
identical for PJ, PGJ (both initialisations) and HGJ, in both float dtypes.
"""
import os
import shutil

import pytest
import torch

from fairseq_stream.ops import jacobi_step as fused
from fairseq_stream.stats import DecodeStats
from fairseq_stream.strategies.jacobi import JacobiConfig, JacobiDecoding
from helpers import clone_state

# Where a C++ compiler is, the operator must build (a silent fallback would hide a broken kernel).
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")


def test_the_operator_builds():
    assert fused.kernel() is not None

EOS, PAD, BOS, V = 2, 1, 0, 9


def _predictions(g, state, eos_rate):
    """Each position repeats the next fed token (the draft is confirmed) with probability 0.7."""
    feed = state.feed
    s, b = feed.shape
    guess = torch.cat([feed[:, 1:], feed.new_full((s, 1), PAD)], dim=1)
    fresh = torch.randint(4, V, (s, b), generator=g)
    pred = torch.where((torch.rand(s, b, generator=g) < 0.7) & (guess > PAD), guess, fresh)
    pred = pred.masked_fill(torch.rand(s, b, generator=g) < eos_rate, EOS)
    return pred


def _assert_same(a, b):
    assert torch.equal(a.accept, b.accept) and a.max_length == b.max_length
    assert (a.parents is None) == (b.parents is None) and (a.parents is None or torch.equal(a.parents, b.parents))
    assert torch.equal(a.feed, b.feed)
    assert sorted(a.finished) == sorted(b.finished)
    for sid, (h,) in a.finished.items():
        (o,) = b.finished[sid]
        assert h.score == o.score and torch.equal(h.tokens, o.tokens)
        assert torch.equal(h.positional_scores, o.positional_scores)
    x, y = a.state, b.state
    for name in ("sentences", "verified", "max_len", "iterations", "width", "draft", "feed"):
        assert torch.equal(getattr(x, name), getattr(y, name)), name
    assert (x.low, x.high, x.shortest) == (y.low, y.high, y.shortest)
    # the last column is scratch for rejected predictions (the reference writes it, the operator does not)
    assert torch.equal(x.tokens[:, :-1], y.tokens[:, :-1]) and torch.equal(x.token_scores[:, :-1], y.token_scores[:, :-1])


def _run(search, seed, dtype, sentences=5):  # noqa: D103
    g = torch.Generator().manual_seed(seed)
    max_len = torch.randint(3, 12, (sentences,), generator=g)
    out = search.init_state(torch.arange(sentences) * 5 + 1, max_len, max_len + 2)
    state, finished, iterations = out.state, {}, 0
    while state.size:
        pred = _predictions(g, state, eos_rate=0.04)
        score = torch.log(torch.rand(pred.shape, generator=g, dtype=torch.float64)).to(dtype)
        ref = search.iterate(clone_state(state), pred, score, kernel=False)
        got = search.iterate(state, pred, score, kernel=True)
        _assert_same(got, ref)
        finished.update(got.finished)
        state, iterations = got.state, iterations + 1
    assert sorted(finished) == [s * 5 + 1 for s in range(sentences)]
    return iterations


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cfg", [
    JacobiConfig(block=None),
    JacobiConfig(block=3),
    JacobiConfig(block=4, init="tail"),
    JacobiConfig(block=3, max_parallel_len=4),
    JacobiConfig(block=1),
])
def test_the_operator_equals_the_reference_over_whole_runs(cfg, dtype):
    search = JacobiDecoding(cfg, None, eos=EOS, pad=PAD, bos=BOS, stats=DecodeStats(), dtype=dtype)
    assert max(_run(search, seed, dtype) for seed in range(5)) > 3


# ---- the GPU kernels (Triton): under the interpreter on the CPU, and on CUDA where there is one ----
TRITON_CHECK = """
import sys
import torch
sys.path.insert(0, {here!r})
import test_jacobi_step as T
from fairseq_stream.ops import jacobi_step as fused
from fairseq_stream.ops.triton_jacobi_step import triton_iteration
from fairseq_stream.stats import DecodeStats
from fairseq_stream.strategies.jacobi import JacobiConfig, JacobiDecoding

fused.fused_iteration = triton_iteration  # the CPU's operator slot runs the GPU kernels (uncompacted)
for i, cfg in enumerate(T.TRITON_CASES):
    dtype = torch.float64 if i % 2 else torch.float32
    search = JacobiDecoding(cfg, None, eos=T.EOS, pad=T.PAD, bos=T.BOS, stats=DecodeStats(), dtype=dtype)
    for seed in range(2):
        T._run(search, seed, dtype, sentences=4)
print("ok")
"""
TRITON_CASES = [JacobiConfig(block=None), JacobiConfig(block=3), JacobiConfig(block=4, init="tail"),
                JacobiConfig(block=3, max_parallel_len=4), JacobiConfig(block=1)]


def test_the_triton_kernels_equal_the_reference_under_the_interpreter():
    pytest.importorskip("triton")
    from helpers import run_under_triton_interpreter

    proc = run_under_triton_interpreter(TRITON_CHECK.format(here=os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", TRITON_CASES)
def test_the_triton_kernels_equal_the_reference_on_cuda(cfg):
    search = JacobiDecoding(cfg, None, eos=EOS, pad=PAD, bos=BOS, stats=DecodeStats(), dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    max_len = torch.randint(3, 12, (5,), generator=g)
    state = search.init_state((torch.arange(5) * 5 + 1).cuda(), max_len.cuda(), (max_len + 2).cuda()).state
    while state.size:
        pred = _predictions(g, _on_cpu(state), eos_rate=0.04).cuda()
        score = torch.log(torch.rand(pred.shape, generator=g)).cuda()
        ref = search.iterate(clone_state(state), pred, score, kernel=False)
        got = search.iterate(state, pred, score, kernel=True)
        assert not fused._gpu_failed, fused._gpu_failed  # the Triton kernels ran, not the reference
        for sid, (h,) in got.finished.items():  # a GPU scan may round the summed score differently
            assert abs(h.score - ref.finished[sid][0].score) < 1e-4
            ref.finished[sid][0].score = h.score
        _assert_same(got, ref)
        state = got.state


def _on_cpu(state):
    return type(state)(**{f: (v.cpu() if torch.is_tensor(v) else v) for f, v in vars(state).items()})
