"""``--cpu-matmul``: packed and oneDNN float32 Linear layers — the rule, the copy, the arithmetic."""
from __future__ import annotations

import pytest
import torch

from fairseq_stream.model import linear_kernels as lk
from fairseq_stream.model.quantize import stacked_linear
from fairseq_stream.errors import FairseqStreamError
from helpers import make_dictionary, tiny_transformer

needs_onednn = pytest.mark.skipif(not lk.onednn_available(), reason="this torch has no oneDNN")
needs_packed = pytest.mark.skipif(not lk.packed_available(), reason="the packed kernel cannot be built here")
D = make_dictionary([f"w{i}" for i in range(30)])


@needs_onednn
@needs_packed
def test_auto_is_packed_for_ours_and_stock_for_fairseq_beam(monkeypatch):
    model = tiny_transformer(D, dtype=torch.float32)
    assert lk.resolve("auto", [model], fairseq_search=False) == "packed"
    assert lk.resolve("auto", [model], fairseq_search=True) == "torch"
    assert lk.resolve("onednn", [model], fairseq_search=True) == "onednn"
    assert lk.resolve("packed", [model], fairseq_search=True) == "packed"
    monkeypatch.setattr(lk, "packed_available", lambda: False)  # no compiler: oneDNN, as before
    assert lk.resolve("auto", [model], fairseq_search=False) == "onednn"
    with pytest.raises(FairseqStreamError, match="--cpu-matmul packed: its kernel cannot be built"):
        lk.resolve("packed", [model], fairseq_search=False)
    monkeypatch.undo()
    assert lk.resolve("torch", [model], fairseq_search=False) == "torch"
    half = tiny_transformer(D, dtype=torch.float16)
    assert lk.resolve("auto", [half], fairseq_search=False) == "torch"  # float32 only
    for choice in ("onednn", "packed"):
        with pytest.raises(FairseqStreamError, match="float32 models"):
            lk.resolve(choice, [half], fairseq_search=False)
    with pytest.raises(FairseqStreamError, match="--cpu-matmul must be one of"):
        lk.check_choice("mkl")


@needs_onednn
@needs_packed
@pytest.mark.parametrize("library, cls", [("onednn", "OneDnnLinear"), ("packed", "PackedLinear")])
def test_the_copy_swaps_every_linear_and_keeps_the_model(library, cls):
    model = tiny_transformer(D, dtype=torch.float32).eval()
    (copy,) = lk.prepare([model], library)
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert linears and not any(type(m) is torch.nn.Linear for m in copy.modules())
    assert sum(isinstance(m, getattr(lk, cls)) for m in copy.modules()) == len(linears)
    assert all(type(m) is torch.nn.Linear for m in linears)  # the loaded model is untouched
    assert lk.prepare([model], library)[0] is copy  # made once
    other = "packed" if library == "onednn" else "onednn"
    assert lk.prepare([model], other)[0] is not copy  # one copy per library, never the other's
    assert lk.prepare([model], "torch")[0] is model
    src = torch.randint(4, len(D), (3, 6))
    lengths = torch.full((3,), 6)
    prev = torch.randint(4, len(D), (3, 5))
    with torch.no_grad():
        torch.testing.assert_close(copy(src, lengths, prev)[0], model(src, lengths, prev)[0], rtol=1e-5, atol=1e-5)


@needs_onednn
@needs_packed
@pytest.mark.parametrize("cls", ["OneDnnLinear", "PackedLinear"])
def test_rows_do_not_depend_on_the_batch(cls):
    make = getattr(lk, cls)
    g = torch.Generator().manual_seed(0)
    layer = make(torch.randn(96, 64, generator=g), torch.randn(96, generator=g))
    x = torch.randn(50, 64, generator=g)
    whole = layer(x)
    torch.testing.assert_close(whole, torch.nn.functional.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
    for lo, hi in ((0, 1), (2, 4), (5, 50)):
        assert torch.equal(layer(x[lo:hi]), whole[lo:hi])
    q, k, v = (make(torch.randn(64, 64, generator=g), torch.randn(64, generator=g)) for _ in range(3))
    stacked = stacked_linear([q, k, v])
    assert isinstance(stacked, make)
    torch.testing.assert_close(stacked(x), torch.cat([q(x), k(x), v(x)], dim=-1), rtol=1e-5, atol=1e-5)


@needs_onednn
@needs_packed
@pytest.mark.parametrize("quantize", ["none", "int8", "packed"])
def test_fused_relu_equals_relu_after_the_product(quantize):
    from types import SimpleNamespace

    from fairseq_stream.model.quantize import prepare_models
    from fairseq_stream.model.block_decoder import fc1_activation

    model = tiny_transformer(D, dtype=torch.float32)
    (model,) = prepare_models([model], "int8" if quantize == "int8" else "none")
    (model,) = lk.prepare([model], quantize if quantize == "packed" else "onednn") if quantize != "int8" else (model,)
    layer = model.decoder.layers[0]
    x = torch.randn(9, 1, layer.fc1.in_features)
    fused = fc1_activation(layer, x)
    assert torch.equal(fused, torch.relu(layer.fc1(x)))
    gelu = SimpleNamespace(fc1=layer.fc1, activation_fn=torch.nn.functional.gelu)  # not fused: as the layer says
    assert torch.equal(fc1_activation(gelu, x), torch.nn.functional.gelu(layer.fc1(x)))
