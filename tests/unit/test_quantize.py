"""``--quantize int8``: every Linear is int8, every strategy decodes with it, close to float32."""
from __future__ import annotations

import copy
import warnings

import pytest
import sacrebleu
import torch

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.engine.validation import check_options as validate
from fairseq_stream.model.quantize import count_linears, is_quantized_linear, prepare_models, stacked_linear
from fairseq_stream.ops import decode_attention, int8_rows
from helpers import (fake_task, gen_cfg, make_dictionary, outputs_of_builds, sample_for, stream_opts, tiny_ib_model,
                     tiny_transformer)

#: Both activation widths: 8 (every CPU's) and 7 forced.
WIDTHS = ["8", "7 forced"]

needs_int8_kernel = pytest.mark.skipif(int8_rows.kernel() is None, reason="the C++ int8 operator is not built here: "
                                       "its PyTorch arithmetic would be compared with itself")


@pytest.fixture(params=WIDTHS)
def bits(request, monkeypatch) -> int:
    """The activation width of the int8 layers a test builds (the environment variable set or cleared)."""
    if request.param == "7 forced":
        monkeypatch.setenv(int8_rows.BITS_ENV, "7")
    else:
        monkeypatch.delenv(int8_rows.BITS_ENV, raising=False)
    return int8_rows.activation_bits()


def test_every_linear_is_int8_and_the_float_model_is_kept(demo_session):
    model = demo_session.models[0]
    floats, _ = count_linears(model)
    (int8,) = prepare_models([model], "int8")
    assert floats > 0 and count_linears(int8) == (0, floats)
    assert is_quantized_linear(int8.decoder.output_projection)
    assert all(is_quantized_linear(getattr(layer.self_attn, p)) for layer in int8.encoder.layers
               for p in ("q_proj", "k_proj", "v_proj", "out_proj"))
    assert count_linears(model) == (floats, 0)  # the float model is untouched
    assert prepare_models([model], "int8")[0] is int8  # quantised once, reused by every generator
    assert prepare_models([model], "none")[0] is model


def test_stacked_int8_projection_equals_the_separate_ones(demo_session):
    (int8,) = prepare_models(demo_session.models, "int8")
    attn = int8.decoder.layers[0].self_attn
    x = torch.randn(7, 3, attn.embed_dim)
    separate = torch.cat([attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)], dim=-1)
    torch.testing.assert_close(stacked_linear([attn.q_proj, attn.k_proj, attn.v_proj])(x), separate)


# (search, generation options, sentences): fairseq's own beam, ours with both finalisation rules, Jacobi.
CASES = [
    ("beam", {"beam": 5}, {}),
    ("var-stream", {"beam": 5}, {}),
    ("fixed-ours", {"beam": 5}, {"beam_finalize": "fairseq"}),
    ("gs-jacobi", {"beam": 1}, {}),
]


@pytest.mark.parametrize("search,gen,opts", CASES, ids=[c[0] for c in CASES])
def test_int8_decodes_like_float32(demo_session, demo_sources, search, gen, opts):
    dataset = demo_session.encode(demo_sources[:12])
    ref = demo_session.translate(dataset, search=search, gen=gen, opts=opts)
    int8 = demo_session.translate(dataset, search=search, gen=gen, opts=dict(opts, quantize="int8"))
    same = sum(a == b for a, b in zip(ref.strings, int8.strings))
    assert same >= len(ref.strings) // 2, list(zip(ref.strings, int8.strings))
    assert all(int8.strings)


def test_int8_bleu_is_within_1_5_of_float32(demo_session, demo_sources, demo_references):
    sources, refs = demo_sources[:40], demo_references[:40]
    dataset = demo_session.encode(sources)
    bleu = {}
    for quantize in ("none", "int8"):
        out = demo_session.translate(dataset, search="var-stream", gen={"beam": 5}, opts={"quantize": quantize})
        bleu[quantize] = sacrebleu.corpus_bleu(out.strings, [refs]).score
    assert abs(bleu["int8"] - bleu["none"]) < 1.5, bleu


def test_int8_ensemble_of_one_model_twice_decodes_as_the_model(demo_session, demo_sources):
    from fairseq_stream.tools.session import TranslationSession

    twice = TranslationSession(demo_session.cfg, demo_session.task, demo_session.models * 2, bpe_codes=None)
    twice._bpe = demo_session._bpe
    dataset = demo_session.encode(demo_sources[:8])
    one = demo_session.translate(dataset, search="var-stream", gen={"beam": 5}, opts={"quantize": "int8"})
    two = twice.translate(dataset, search="var-stream", gen={"beam": 5}, opts={"quantize": "int8"})
    assert sum(a == b for a, b in zip(one.strings, two.strings)) >= 6


def test_int8_ib_beam_runs_on_an_ib_model():
    from fairseq_stream.integration.build import build_generator

    D = make_dictionary()
    model = tiny_ib_model(D, dtype=torch.float32)
    generator = build_generator("ib-beam", fake_task(D), [model], gen_cfg(beam=2, max_len_b=6),
                                stream_opts(search="ib-beam", quantize="int8"))
    assert count_linears(generator.model.models[0]) == (0, count_linears(model)[0])
    with torch.no_grad():
        hypos = generator.generate([model], sample_for(D, [4, 5, 6]))
    assert len(hypos) == 3 and all(h[0]["tokens"].numel() > 0 for h in hypos)


def test_int8_is_refused_for_half_precision_and_unknown_values(demo_session):
    half = copy.deepcopy(demo_session.models[0]).half()
    with pytest.raises(FairseqStreamError, match="needs float32 models") as err:
        prepare_models([half], "int8")
    assert "\n" not in str(err.value)
    with pytest.raises(FairseqStreamError, match="--quantize must be one of none, int8"):
        validate(stream_opts(quantize="int4"))


def _int8_layer(seed: int = 0, inputs: int = 64, outputs: int = 48):
    from fairseq_stream.model.quantize import RowInt8Linear

    torch.manual_seed(seed)
    linear = torch.nn.Linear(inputs, outputs)
    return linear, RowInt8Linear.of(linear)


def test_an_int8_row_does_not_depend_on_its_batch():
    # What keeps stream = batch and Jacobi = greedy exact under int8: one activation scale per row.
    _, layer = _int8_layer()
    x = torch.randn(70, 64) * torch.rand(70, 1) * 4
    for relu in (False, True):
        whole = layer(x, relu=relu)
        for lo, hi in ((0, 1), (5, 6), (3, 11), (20, 70)):
            assert torch.equal(layer(x[lo:hi], relu=relu), whole[lo:hi]), (lo, hi, relu)
    assert torch.equal(layer(x, relu=True), torch.relu(layer(x)))
    assert torch.equal(layer(x.view(7, 10, 64)).view(70, -1), layer(x))


def test_int8_rows_keep_their_own_precision():
    # A per-tensor activation scale (PyTorch's dynamic Linear) spends the 8 bits on the largest
    # row; per row, a small row keeps its precision.
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    linear, layer = _int8_layer(1)
    x = torch.randn(8, 64)
    x[0] *= 100.0  # one loud row
    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices
        warnings.simplefilter("ignore")
        dynamic = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear: per_channel_dynamic_qconfig},
                                   dtype=torch.qint8)[0]
    exact = linear(x).detach()
    ours = (layer(x) - exact)[1:].abs().max()
    theirs = (dynamic(x) - exact)[1:].abs().max()
    assert ours < theirs / 5, (ours, theirs)



@needs_int8_kernel
@pytest.mark.parametrize("rows", [1, 70, 256, 257, 300, 513])
def test_the_cpp_operator_equals_its_pytorch_arithmetic_row_by_row(bits, rows):
    # One row takes the kernel's one-row path, more rows its tiles of rows (csrc/int8_rows.cpp): no bit may move.
    _, layer = _int8_layer(2, inputs=96, outputs=80)
    assert layer.bits == bits
    torch.manual_seed(rows)
    x = torch.randn(rows, 96) * torch.rand(rows, 1) * 4
    x[rows // 2] = 0.0  # an all-zero row stays zero
    for relu in (False, True):
        ours, reference = layer(x, relu=relu), layer.reference(x, relu)
        for r in range(rows):
            assert torch.equal(ours[r], reference[r]), (r, relu)
        assert torch.equal(layer(x[-1:], relu=relu)[0], ours[-1])  # the last chunk's row, alone


@needs_int8_kernel
@pytest.mark.parametrize("rows", [1, 5, 9])
def test_weights_of_minus_128_times_negative_activations_are_exact(rows):
    # -128 is the one int8 value without a positive twin: the AVX2 build multiplies |W| by q carrying W's sign
    # (vpsignb, which cannot negate -128: csrc/int8_rows.cpp). Every column here has such weights, half the
    # activations are negative; one row, a tile of four and a last row alone, both widths.
    g = torch.Generator().manual_seed(rows)
    weight = torch.randint(-128, 128, (40, 72), generator=g, dtype=torch.int8)
    weight[torch.rand(40, 72, generator=g) < 0.2] = -128
    weight[3] = -128  # a column of nothing else
    wscale, bias = torch.rand(40, generator=g) / 100, torch.randn(40, generator=g)
    packed, offsets = int8_rows.pack(weight)
    x = torch.randn(rows, 72, generator=g) * 3
    x[0, :8] = -x[0, :8].abs()
    for levels in (127, 63):
        ours = torch.ops.fairseq_stream.int8_row_linear(x, packed, offsets, wscale, bias, 40, False, levels)
        assert torch.equal(ours, int8_rows.reference_row_linear(x, weight, wscale, bias, False, levels)), levels


def test_the_narrow_width_is_forced_by_the_environment_and_nothing_else(monkeypatch):
    from fairseq_stream.model.quantize import RowInt8Linear

    monkeypatch.delenv(int8_rows.BITS_ENV, raising=False)
    assert int8_rows.activation_bits() == 8 and _int8_layer()[1].levels == 127
    monkeypatch.setenv(int8_rows.BITS_ENV, "7")
    assert int8_rows.activation_bits() == 7 and _int8_layer()[1].levels == 63
    monkeypatch.setenv(int8_rows.BITS_ENV, "8")
    assert int8_rows.activation_bits() == 8
    monkeypatch.setenv(int8_rows.BITS_ENV, "6")
    with pytest.raises(FairseqStreamError, match="FAIRSEQ_STREAM_INT8_ACTIVATION_BITS may only be 7 or 8"):
        RowInt8Linear.of(torch.nn.Linear(4, 4))


@pytest.mark.skipif(decode_attention.cpu_kernel() is None,
                    reason="bit-exactness across batches rests on the C++ attention kernel")
def test_a_small_int8_decode_is_exact_and_names_its_width(bits):
    # One sentence alone decodes to the bits it gets among eight, under either width; the
    # closing statistics say which width the layers were made with.
    from fairseq_stream.integration.build import build_generator

    D = make_dictionary(tuple("abcdefgh"))
    model = tiny_transformer(D, dtype=torch.float32, seed=3)

    def decode(sources):
        generator = build_generator("var-stream", fake_task(D), [model], gen_cfg(beam=2, max_len_b=6),
                                    stream_opts(search="var-stream", quantize="int8"))
        with torch.no_grad():
            return generator, generator.generate([model], sample_for(D, sources))

    sources = list(range(4, 12))
    generator, together = decode(sources)
    assert {m.bits for m in generator.model.models[0].modules() if is_quantized_linear(m)} == {bits}
    assert f"per-row {bits}-bit activations" in generator.stats.settings["quantize"]
    assert f"per-row {bits}-bit activations" in generator.stats.summary()
    for i, s in enumerate(sources):
        (alone,) = decode([s])[1]
        assert alone[0]["tokens"].tolist() == together[i][0]["tokens"].tolist(), s
        assert torch.equal(alone[0]["positional_scores"], together[i][0]["positional_scores"]), s


_SAME_BITS = r"""
import sys, torch
from torch.utils.cpp_extension import load
load(name="int8_rows_isa_" + sys.argv[2], sources=[sys.argv[1]], extra_cflags=sys.argv[3].split(),
     build_directory=sys.argv[4], verbose=False)
g = torch.Generator().manual_seed(5)
w = torch.randint(-128, 128, (70, 45), generator=g, dtype=torch.int8); s = torch.rand(70, generator=g) / 100
w[torch.rand(70, 45, generator=g) < 0.1] = -128  # the one value without a positive twin (vpsignb's blind spot)
b = torch.randn(70, generator=g); x = torch.randn(9, 45, generator=g) * 3; x[4, 7] = float("nan"); x[6] = 0.0
p, o = torch.ops.fairseq_stream.int8_rows_pack(w)
torch.save([torch.ops.fairseq_stream.int8_row_linear(x, p, o, s, b, 70, False, 127),
            torch.ops.fairseq_stream.int8_row_linear(x[:1], p, o, s, None, 70, True, 127),
            torch.ops.fairseq_stream.int8_row_linear(x[2:5], p, o, s, b, 70, True, 63),
            torch.ops.fairseq_stream.int8_row_linear(-x[:5].abs(), p, o, s, b, 70, False, 127)], sys.argv[5])
"""


@pytest.mark.slow
@pytest.mark.skipif(not torch.backends.cpu.get_cpu_capability().startswith("AVX"),
                    reason="the AVX2 build needs an x86 CPU with AVX2")
def test_vnni_avx2_and_scalar_builds_give_the_same_bits(tmp_path):
    """The int8 product's source built for this CPU (AVX-512 VNNI where it has it), for AVX2 and for no SIMD
    computes the same bits: an integer sum, then one order of float operations (~1 min: three builds)."""
    import os

    source = os.path.join(os.path.dirname(int8_rows.__file__), "csrc", int8_rows.KERNEL_SOURCE)
    outs = outputs_of_builds(tmp_path, source, _SAME_BITS, (
        ("native", " ".join(int8_rows.KERNEL_FLAGS)),
        ("avx2", "-O3 -fopenmp -mavx2 -mfma -mno-avx512f -ffp-contract=off"),
        ("scalar", "-O2 -fopenmp -mno-avx -mno-avx2 -mno-fma -mno-avx512f -ffp-contract=off")))
    assert torch.isnan(outs[0][0][4]).all() and not torch.isnan(outs[0][0][[0, 1, 2, 3, 5, 6, 7, 8]]).any()
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)

