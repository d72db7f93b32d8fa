"""The encoder with the CPU attention kernel: fairseq's encoder's numbers, and a sentence's
states the same bits in any block (model/encoder.py)."""
from __future__ import annotations

import pytest
import torch

from fairseq_stream.ops import decode_attention, packed_linear
from fairseq_stream.model import linear_kernels
from fairseq_stream.model.quantize import prepare_models
from fairseq_stream.model.encoder import encode, encoder_out, native_layers, unsupported

pytestmark = pytest.mark.skipif(decode_attention.cpu_kernel() is None, reason="needs the C++ attention kernel")


def _block(session, sentences, pad_to=None):
    dataset = session.encode(sentences)
    tokens = [dataset[i]["source"] for i in range(len(sentences))]
    width = max(len(t) for t in tokens) if pad_to is None else pad_to
    pad = session.task.source_dictionary.pad()
    block = torch.full((len(tokens), width), pad, dtype=torch.long)
    for i, t in enumerate(tokens):  # left-padded, as fairseq's translation task
        block[i, width - len(t):] = t
    return block


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_a_sentences_states_do_not_depend_on_its_block(demo_session, demo_sources, quantize):
    # as the engine decodes: int8 copies, or oneDNN's row-invariant float32 product (--cpu-matmul auto)
    (model,) = prepare_models(demo_session.models, quantize) if quantize == "int8" else \
        linear_kernels.prepare(demo_session.models, "onednn")
    sentences = demo_sources[:6]
    with torch.no_grad():
        together, padding = encode(model.encoder, _block(demo_session, sentences, pad_to=60))
        for i, s in enumerate(sentences):
            alone, _ = encode(model.encoder, _block(demo_session, [s]))
            visible = ~padding[i]
            assert torch.equal(together[visible.nonzero().squeeze(1), i], alone[:, 0]), i


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_the_native_layers_give_the_python_layers_bits(demo_session, demo_sources, quantize):
    """Where every product has a raw kernel (packed float32, our int8) the layers run as one C++ call
    (``encoder_layers``): the Python layers' states bit for bit, padded block or alone. oneDNN's product has none."""
    from fairseq_stream.model import native_decoder

    if native_decoder.kernel_available() is not None:
        pytest.skip(native_decoder.kernel_available())
    assert packed_linear.kernel() is not None  # loads the packed product's operators
    (model,) = prepare_models(demo_session.models, quantize) if quantize == "int8" else \
        linear_kernels.prepare(demo_session.models, "packed")
    assert native_layers(model.encoder) is not None
    (onednn,) = linear_kernels.prepare(demo_session.models, "onednn")
    assert native_layers(onednn.encoder) is None
    with torch.no_grad():
        for block in (_block(demo_session, demo_sources[:6], pad_to=60), _block(demo_session, demo_sources[6:7])):
            native, padding = encode(model.encoder, block)
            python, same_padding = encode(model.encoder, block, native=False)
            assert torch.equal(native, python) and torch.equal(padding, same_padding)


def test_equals_fairseqs_encoder(demo_session, demo_sources):
    model = demo_session.models[0]
    assert unsupported(model.encoder) is None
    block = _block(demo_session, demo_sources[:5])
    with torch.no_grad():
        ours = encoder_out(model.encoder, {"src_tokens": block, "src_lengths": block.ne(1).sum(1)})
        theirs = model.encoder.forward_torchscript({"src_tokens": block, "src_lengths": block.ne(1).sum(1)})
    visible = ~theirs["encoder_padding_mask"][0].t()  # (S, N)
    assert torch.equal(ours["encoder_padding_mask"][0], theirs["encoder_padding_mask"][0])
    torch.testing.assert_close(ours["encoder_out"][0][visible], theirs["encoder_out"][0][visible], rtol=1e-4, atol=1e-5)


def test_float64_and_other_encoders_take_fairseqs_forward(demo_session64, demo_sources):
    model = demo_session64.models[0]
    block = _block(demo_session64, demo_sources[:2])
    net_input = {"src_tokens": block, "src_lengths": block.ne(1).sum(1)}
    with torch.no_grad():
        assert torch.equal(encoder_out(model.encoder, net_input)["encoder_out"][0],
                           model.encoder.forward_torchscript(net_input)["encoder_out"][0])
    assert unsupported(torch.nn.Linear(2, 2)) == "not a fairseq TransformerEncoder"
