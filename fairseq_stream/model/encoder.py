"""fairseq's transformer encoder on a CPU, with self-attention that reads each sentence's own positions.

fairseq's encoder attends over the padded block (masked keys weigh 0), and the padding still
changes the last bits of every sum (the products' blocking and the softmax's vector lanes move
with it): a sentence's encoding then depends on the sentences it was batched with, in float32
and, amplified by the activation quantisation, under ``--quantize int8``. Here the same layers
(:class:`fairseq.modules.TransformerEncoderLayerBase` in eval mode: pre- or post-norm, any
activation) run with the CPU attention kernel of :mod:`fairseq_stream.ops.decode_attention`,
one query per source position, which reads only the sentence's visible span from its first
key. Every other operation is per position (the row-invariant products of
:mod:`fairseq_stream.model.linear_kernels` and :mod:`fairseq_stream.model.quantize`, layer norms,
residuals), so a sentence's encoder states are the same bits in any block, with any padding:
what keeps ``var-stream`` ≡ ``var-batch`` and batch size 1 ≡ 8 exact in float32 and int8
(tests/equivalence/test_bit_exact_float32_int8.py).

:func:`encoder_out` is the one entry point: fairseq's own ``forward_torchscript`` wherever this
does not apply (a GPU, float64 or half precision, an encoder that changes fairseq's forward).
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import decode_attention


def unsupported(encoder: Any) -> Optional[str]:
    """Why :func:`encode` cannot run ``encoder`` (None when it can)."""
    from fairseq.models.transformer import TransformerEncoderBase
    from fairseq.modules import MultiheadAttention
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    if not isinstance(encoder, TransformerEncoderBase):
        return "not a fairseq TransformerEncoder"
    if type(encoder).forward_scriptable is not TransformerEncoderBase.forward_scriptable or \
            type(encoder).forward_embedding is not TransformerEncoderBase.forward_embedding:
        return "the encoder changes fairseq's forward"
    if encoder.quant_noise is not None:
        return "quant-noise"
    for layer in encoder.layers:
        if not isinstance(layer, TransformerEncoderLayerBase) or type(layer).forward is not TransformerEncoderLayerBase.forward:
            return f"layer {type(layer).__name__} changes fairseq's forward"
        attn = layer.self_attn
        if not isinstance(attn, MultiheadAttention) or attn.bias_k is not None or attn.add_zero_attn:
            return "self-attention with extra keys"
    return None


_SUPPORT: "weakref.WeakKeyDictionary[Any, Optional[str]]" = weakref.WeakKeyDictionary()


def _why_not_encode(encoder: Any) -> Optional[str]:
    """Why :func:`encode` cannot run ``encoder`` on a CPU in float32 (None: it can); the layer check
    is made once per encoder."""
    if encoder not in _SUPPORT:
        _SUPPORT[encoder] = unsupported(encoder)
    if _SUPPORT[encoder] is None and decode_attention.cpu_kernel() is None:
        return "the C++ attention kernel is unavailable"
    return _SUPPORT[encoder]


def cpu_fallback(encoder: Any) -> Optional[str]:
    """Why a CPU float32 run encodes ``encoder`` with fairseq's forward, whose padding changes a
    sentence's states, so batch size 1 ≡ 8 and stream ≡ batch no longer hold bit for bit (None
    where :func:`encode` runs, and off the CPU float32 path, where nothing is promised bit for bit).
    Named in the closing statistics (:class:`fairseq_stream.model.model_step.ModelStep`)."""
    param = next(encoder.parameters(), None)
    if param is None or param.device.type != "cpu" or param.dtype != torch.float32:
        return None
    return _why_not_encode(encoder)


def encoder_out(encoder: Any, net_input: Dict[str, Tensor]) -> Dict[str, List[Tensor]]:
    """The encoder's output for ``net_input``: :func:`encode` where it applies, else fairseq's."""
    tokens = net_input["src_tokens"]
    param = encoder.embed_tokens.weight
    if tokens.device.type == "cpu" and param.dtype == torch.float32 and not encoder.training and \
            _why_not_encode(encoder) is None:
        states, padding = encode(encoder, tokens)
        return {"encoder_out": [states], "encoder_padding_mask": [padding]}
    return encoder.forward_torchscript(net_input)


_NATIVE: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def native_layers(encoder: Any) -> Optional[Any]:
    """The encoder's layers as one C++ call on raw buffers (``encoder_layers``, built once per encoder by
    :func:`fairseq_stream.model.native_decoder.build_encoder`: the same bits), or None where they run here."""
    if encoder not in _NATIVE:
        from fairseq_stream.model.native_decoder import build_encoder

        built = build_encoder(encoder)
        _NATIVE[encoder] = None if isinstance(built, str) else built
    return _NATIVE[encoder]


def encode(encoder: Any, src_tokens: Tensor, native: bool = True) -> Tuple[Tensor, Tensor]:
    """(encoder states (S, N, d), padding (N, S)) of ``src_tokens`` (N, S): fairseq's
    ``TransformerEncoderBase.forward_scriptable`` in eval mode, attention by the CPU kernel.

    Only the source tokens are computed (issue 40: refill blocks were 27-46% padding): the
    positions are packed into ``T`` rows for every per-position operation, and the keys and
    values scattered into the padded ``(N, H, S, hd)`` layout the kernel reads. Padded
    positions of the output are zeros (fairseq computes them; nothing reads them). With ``native`` the layers
    run as one C++ call where :func:`native_layers` takes the encoder (the same bits).
    """
    from fairseq_stream.model.block_decoder import fc1_activation

    padding = src_tokens.eq(encoder.padding_idx)
    n, s = src_tokens.shape
    x = encoder.embed_scale * encoder.embed_tokens(src_tokens)
    if encoder.embed_positions is not None:
        x = x + encoder.embed_positions(src_tokens)
    d = x.size(-1)
    keep = (~padding).view(-1).nonzero().squeeze(1)  # (T,) the source positions, sentence by sentence
    x = x.view(n * s, d).index_select(0, keep)  # (T, d)
    if encoder.layernorm_embedding is not None:
        x = encoder.layernorm_embedding(x)
    kv_row = torch.arange(n, device=x.device).repeat_interleave(s).index_select(0, keep)  # each position's sentence
    # (with gradients on, the Python layers' products are torch's: the native call is for inference)
    layers = native_layers(encoder) if native and not torch.is_grad_enabled() else None
    if layers is not None:
        x = torch.ops.fairseq_stream.encoder_layers(layers, x, keep, kv_row, padding)
    else:
        packed = (keep, kv_row, padding)
        for layer in encoder.layers:
            pre = layer.normalize_before
            residual = x
            h = _self_attention(layer.self_attn, layer.self_attn_layer_norm(x) if pre else x, packed)
            x = residual + h if pre else layer.self_attn_layer_norm(residual + h)
            residual = x
            h = layer.fc2(fc1_activation(layer, layer.final_layer_norm(x) if pre else x))
            x = residual + h if pre else layer.final_layer_norm(residual + h)
        if encoder.layer_norm is not None:
            x = encoder.layer_norm(x)
    out = x.new_zeros(n * s, d).index_copy_(0, keep, x)
    return out.view(n, s, d).transpose(0, 1), padding


def _self_attention(attn: Any, x: Tensor, packed: Tuple[Tensor, Tensor, Tensor]) -> Tensor:
    """Self-attention of the packed positions ``x`` (T, d) within their sentences."""
    keep, kv_row, padding = packed
    n, s = padding.shape
    t, d = x.shape
    heads = attn.num_heads
    hd = d // heads

    def padded(y: Tensor) -> Tensor:  # (T, d) → (N, H, S, hd), zeros at padded positions
        full = y.new_zeros(n * s, d).index_copy_(0, keep, y)
        return full.view(n, s, heads, hd).transpose(1, 2).contiguous()

    q = attn.q_proj(x).view(t, heads, hd)
    out = decode_attention.attend(q, padded(attn.k_proj(x)), padded(attn.v_proj(x)), attn.scaling, kv_row=kv_row,
                                  key_padding=padding)
    return attn.out_proj(out.view(t, d))
