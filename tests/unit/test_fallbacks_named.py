"""A path that runs instead of ours, and so drops a promise, is named once in the closing
statistics with its reason (issue 52, round 5): the summary line and the ``--stream-stats`` JSON."""
from __future__ import annotations

import json

import torch
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from fairseq_stream.integration.build import build_generator
from fairseq_stream.ops import extension
from helpers import fake_task, gen_cfg, make_dictionary, sample_for, stream_opts, tiny_transformer


class _CustomLayer(TransformerEncoderLayerBase):
    """An encoder layer that changes fairseq's forward (here only in name: the same numbers)."""

    def forward(self, *args, **kwargs):
        return super().forward(*args, **kwargs)


def _decode(model, tmp_path, dictionary):
    path = tmp_path / "stats.json"
    generator = build_generator("var-stream", fake_task(dictionary), [model], gen_cfg(beam=2, max_len_b=5),
                                stream_opts(search="var-stream", stream_stats=str(path)))
    with torch.no_grad():
        generator.generate([model], sample_for(dictionary, [4, 5, 6]))
    generator.report()
    return generator.stats, json.loads(path.read_text())


def test_an_unsupported_encoder_is_named_in_the_closing_statistics(tmp_path, monkeypatch):
    monkeypatch.delenv("FAIRSEQ_STREAM_NO_KERNEL", raising=False)
    monkeypatch.setattr(extension, "failures", {})  # only the encoder's own fallback here
    D = make_dictionary()
    model = tiny_transformer(D, dtype=torch.float32)
    model.encoder.layers[1].__class__ = _CustomLayer
    stats, written = _decode(model, tmp_path, D)
    why = "fairseq's forward (layer _CustomLayer changes fairseq's forward): batch-size bit-exactness not promised"
    assert stats.fallbacks == {"encoder": why}
    assert stats.summary().count(f"encoder: {why}") == 1
    assert written["fallbacks"] == {"encoder": why}


def test_a_supported_encoder_names_no_fallback_and_a_missing_kernel_is_named(tmp_path, monkeypatch):
    from fairseq_stream.ops import decode_attention

    monkeypatch.delenv("FAIRSEQ_STREAM_NO_KERNEL", raising=False)
    monkeypatch.setattr(extension, "failures", {})
    D = make_dictionary()
    model = tiny_transformer(D, dtype=torch.float32)
    if decode_attention.cpu_kernel() is not None:
        assert _decode(model, tmp_path, D)[0].fallbacks == {}
    monkeypatch.setattr(extension, "failures", {"fused_topk.cpp": "OSError: no compiler"})
    stats, written = _decode(model, tmp_path, D)
    assert stats.fallbacks["kernel fused_topk.cpp"] == "PyTorch ops (OSError: no compiler)"
    assert "kernel fused_topk.cpp: PyTorch ops (OSError: no compiler)" in stats.summary()
    assert written["fallbacks"]["kernel fused_topk.cpp"] == "PyTorch ops (OSError: no compiler)"
