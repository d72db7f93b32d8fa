"""``ops/packed_linear.py``: the packed float32 product — its arithmetic, its shapes, its one order of sums, its half panels."""
from __future__ import annotations

import os

import pytest
import torch
from helpers import outputs_of_builds

from fairseq_stream.ops import packed_linear as pl

pytestmark = pytest.mark.skipif(pl.kernel() is None, reason="the packed kernel cannot be built here")


def _layer(n: int, k: int, seed: int = 0, bias: bool = True):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) / k ** 0.5
    b = torch.randn(n, generator=g) if bias else None
    return w, b, pl.pack(w)


@pytest.mark.parametrize("n, k", [(1, 1), (16, 8), (17, 3), (96, 64), (250, 130), (1030, 256)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_product_is_x_w_plus_b(n, k, bias):
    w, b, packed = _layer(n, k, bias=bias)
    x = torch.randn(13, k, generator=torch.Generator().manual_seed(1))
    y = pl.linear(x, packed, b, n)
    assert y.shape == (13, n) and y.dtype == torch.float32
    torch.testing.assert_close(y.double(), pl.reference(x, w, b), rtol=1e-5, atol=1e-5)
    assert torch.equal(pl.linear(x, packed, b, n, relu=True), torch.relu(y))  # the fused ReLU: the same numbers


def test_a_row_never_depends_on_the_rows_beside_it():
    """One order of sums whatever the tile: a row alone, in any block and at any offset gives the same bits."""
    w, b, packed = _layer(200, 96)
    x = torch.randn(300, 96, generator=torch.Generator().manual_seed(2))
    whole = pl.linear(x, packed, b, 200)
    for lo, hi in ((0, 1), (7, 8), (1, 3), (5, 11), (13, 20), (30, 94), (0, 300)):
        assert torch.equal(pl.linear(x[lo:hi], packed, b, 200), whole[lo:hi]), (lo, hi)


def test_threads_do_not_change_a_bit():
    w, b, packed = _layer(300, 128)
    x = torch.randn(70, 128, generator=torch.Generator().manual_seed(3))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = pl.linear(x, packed, b, 300)
        torch.set_num_threads(2)
        assert torch.equal(pl.linear(x, packed, b, 300), one)
        assert torch.equal(pl.linear(x[:1], packed, b, 300), one[:1])
    finally:
        torch.set_num_threads(threads)


def test_shapes_views_and_empty_inputs():
    w, b, packed = _layer(40, 24)
    x = torch.randn(3, 5, 48)[..., ::2]  # (3, 5, 24), not contiguous
    y = pl.linear(x, packed, b, 40)
    assert y.shape == (3, 5, 40)
    assert torch.equal(y, pl.linear(x.contiguous(), packed, b, 40))
    assert pl.linear(torch.empty(0, 24), packed, b, 40).shape == (0, 40)
    # no input features: an empty sum, the bias alone (was a division by zero that killed the process)
    empty = pl.pack(torch.zeros(5, 0))
    bias = torch.tensor([-1.0, 0.0, 1.0, 2.0, -3.0])
    assert torch.equal(pl.linear(torch.zeros(3, 2, 0), empty, bias, 5), bias.expand(3, 2, 5))
    assert torch.equal(pl.linear(torch.zeros(3, 0), empty, bias, 5, relu=True), bias.clamp_min(0).expand(3, 5))


def test_bad_operands_are_one_clear_error():
    w, b, packed = _layer(40, 24)
    with pytest.raises(RuntimeError, match="input has 23 features, the weight 24"):
        pl.linear(torch.randn(2, 23), packed, b, 40)
    with pytest.raises(RuntimeError, match="out_features does not match"):
        pl.linear(torch.randn(2, 24), packed, b, 80)
    with pytest.raises(RuntimeError, match="float32 CPU input"):
        pl.linear(torch.randn(2, 24, dtype=torch.float64), packed, b, 40)


def test_nan_and_inf_stay_where_they_are():
    w, b, packed = _layer(20, 8)
    x = torch.randn(3, 8)
    x[1, 2] = float("nan")
    y = pl.linear(x, packed, b, 20)
    assert torch.isnan(y[1]).all() and not torch.isnan(y[[0, 2]]).any()


def _half_layer(n: int, k: int, seed: int = 0):
    """A layer whose weights are all float16 values (a checkpoint saved in float16), with a subnormal, a
    negative zero and the largest float16 among them."""
    w, b, _ = _layer(n, k, seed)
    w = w.half().float()
    w.view(-1)[: 3][...] = torch.tensor([3 * 2.0 ** -24, -0.0, 65504.0])[: w.numel()]
    return w, b


@pytest.mark.parametrize("n, k", [(1, 1), (17, 3), (96, 64), (250, 130), (1030, 256)])
def test_half_panels_give_the_bits_of_float32_panels(n, k, monkeypatch):
    """Weights that are all float16 values are packed as their float16 bits (half the bytes a step reads) and
    widened exactly in the kernel: every row count, bias or not, ReLU or not, the float32 panels' bits."""
    monkeypatch.delenv("FAIRSEQ_STREAM_NO_HALF_PANELS", raising=False)
    w, b = _half_layer(n, k)
    half = pl.pack(w)
    full = torch.ops.fairseq_stream.packed_linear_pack(w)
    assert half.dtype == torch.float16 and full.dtype == torch.float32 and half.shape == full.shape
    assert torch.equal(half.float(), full)
    x = torch.randn(47, k, generator=torch.Generator().manual_seed(4))
    for rows in (1, 2, 3, 4, 5, 6, 7, 13, 19, 20, 25, 47):  # from 20 rows the panels are widened once a call
        for bias in (b, None):
            for relu in (False, True):
                assert torch.equal(pl.linear(x[:rows], half, bias, n, relu), pl.linear(x[:rows], full, bias, n, relu))


def test_half_panels_only_where_they_lose_nothing(monkeypatch):
    monkeypatch.delenv("FAIRSEQ_STREAM_NO_HALF_PANELS", raising=False)
    w, _ = _half_layer(40, 24)
    assert pl.half_exact(w) and pl.pack(w).dtype == torch.float16
    w[5, 7] += 2.0 ** -20  # one weight float16 cannot hold: the whole layer stays float32
    assert not pl.half_exact(w) and pl.pack(w).dtype == torch.float32
    assert pl.pack(torch.full((3, 4), 1e5)).dtype == torch.float32  # beyond float16's range
    monkeypatch.setenv("FAIRSEQ_STREAM_NO_HALF_PANELS", "1")  # the A/B switch
    assert pl.pack(_half_layer(40, 24)[0]).dtype == torch.float32


_SAME_BITS = r"""
import sys, torch
from torch.utils.cpp_extension import load
load(name="packed_linear_isa_" + sys.argv[2], sources=[sys.argv[1]], extra_cflags=sys.argv[3].split(),
     build_directory=sys.argv[4], verbose=False)
g = torch.Generator().manual_seed(5)
w = torch.randn(70, 45, generator=g); b = torch.randn(70, generator=g); x = torch.randn(9, 45, generator=g)
p = torch.ops.fairseq_stream.packed_linear_pack(w)
h = w.half()  # half panels: float16 weights with a subnormal and a negative zero, widened by each build's code
h.view(-1)[:2] = torch.tensor([3 * 2.0 ** -24, -0.0])
ph = torch.ops.fairseq_stream.packed_linear_pack(h.float()).half()
torch.save([torch.ops.fairseq_stream.packed_linear(x, p, b, 70, False),
            torch.ops.fairseq_stream.packed_linear(x[:1], p, None, 70, True),
            torch.ops.fairseq_stream.packed_linear(x, ph, b, 70, False),
            torch.ops.fairseq_stream.packed_linear(x[:1], ph, None, 70, True),
            torch.ops.fairseq_stream.packed_linear(x.repeat(3, 1), ph, b, 70, True)], sys.argv[5])  # 27 rows: widened once
"""


@pytest.mark.slow
def test_avx2_and_scalar_builds_give_the_bits_of_this_cpus_build(tmp_path):
    """The same source built for AVX2 (+FMA, F16C) and for no SIMD at all computes the same bits, float32 and half
    panels (~1 min: two builds)."""
    source = os.path.join(os.path.dirname(pl.__file__), "csrc", pl._SOURCE)
    outs = outputs_of_builds(tmp_path, source, _SAME_BITS, (
        ("native", "-O3 -march=native"), ("avx2", "-O3 -mavx2 -mfma -mf16c -mno-avx512f"),
        ("scalar", "-O2 -mno-avx -mno-avx2 -mno-fma -mno-f16c -mno-avx512f")))
    for other in outs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(outs[0], other))
