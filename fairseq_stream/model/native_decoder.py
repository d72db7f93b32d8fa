"""``--step-mode native``: the eager decoder step of a fairseq transformer as one C++ call (CPU).

On a CPU the eager step (:class:`~fairseq_stream.model.block_decoder.BlockDecoder`) is a few
dozen aten operations per layer issued from Python, and on a small model the interpreter between
them costs about as much as their arithmetic. ``csrc/decoder_step.cpp`` makes the same aten calls
in the same order with the same shapes (oneDNN's packed product, the int8 row product and the
attention kernel through the dispatcher, as the Python step calls them), so a native step's logits
are the eager step's bit for bit, in float32 and int8 (``tests/equivalence/test_native_equals_eager.py``).

:func:`build` collects a decoder's weights once into a ``NativeDecoder`` (the block decoder keeps it
and builds it again when its stacked q/k/v copies are, see ``BlockDecoder.refresh_stacked``).
What the operator does not cover runs the eager step, counted as a fallback in the step
statistics with the reason: a decoder :func:`why_not` refuses (NormFormer parts, an activation
other than ReLU/GELU, another Linear or LayerNorm class, the IBDecoder's own positions, a model
that is not float32 on the CPU), a block with its own mask (the IBDecoder), a step with no rows,
and every step where the C++ kernels cannot be built.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from fairseq_stream.model.linear_kernels import OneDnnLinear, PackedLinear
from fairseq_stream.model.quantize import _FloatLinear, is_quantized_linear
from fairseq_stream.ops import decode_attention, native_step
from fairseq_stream.ops.backends import device_choice
from fairseq_stream.ops.env_flags import env_flag

#: Activation codes of the operator: fairseq's ``activation_fn`` → code.
RELU, GELU = 0, 1


def kernel_available() -> Optional[str]:
    """None when the operator and the kernels it calls are loaded; otherwise why not."""
    if device_choice("attention", "cpu") != "cpp" or native_step.kernel() is None:
        return f"the native-step kernel is unavailable ({native_step.failure()})"
    return None


def _activation(fn: Any) -> Optional[int]:
    from fairseq import utils

    if fn is torch.nn.functional.relu:
        return RELU
    if fn is utils.get_activation_fn("gelu"):  # F.gelu of x.float(), a no-op in float32
        return GELU
    return None


def why_not(decoder: Any, qkv: List[Any]) -> Optional[str]:
    """None when the operator runs ``decoder`` (with its stacked q/k/v products ``qkv``); else why not."""
    params = list(decoder.parameters())
    if not params or any(p.device.type != "cpu" or p.dtype != torch.float32 for p in params):
        return "the decoder is not float32 on the CPU"
    if getattr(decoder, "embed_block", None) is not None:
        return f"{type(decoder).__name__} has its own positions"
    from fairseq.models.transformer import TransformerDecoderBase
    from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding

    if type(decoder).output_layer is not TransformerDecoderBase.output_layer:
        return f"{type(decoder).__name__} has its own output layer"
    if decoder.quant_noise is not None or type(decoder.embed_tokens) is not nn.Embedding \
            or decoder.embed_tokens.max_norm is not None:
        return "quant-noise or a custom token embedding"
    positions = decoder.embed_positions
    if positions is not None and not isinstance(positions, (LearnedPositionalEmbedding, SinusoidalPositionalEmbedding)):
        return f"unsupported positional embedding {type(positions).__name__}"
    layers = list(decoder.layers)
    why = _layers_problem(layers, [(layer.self_attn, layer.encoder_attn) for layer in layers])
    if why is not None:
        return why
    if any(_activation(layer.activation_fn) is None for layer in layers):
        return "an activation other than ReLU or GELU"
    linears = [decoder.project_in_dim, decoder.project_out_dim, decoder.output_projection] + qkv + [
        m for layer in decoder.layers
        for m in (layer.self_attn.out_proj, layer.encoder_attn.q_proj, layer.encoder_attn.out_proj, layer.fc1, layer.fc2)]
    for linear in linears:
        if linear is not None and _linear_kind(linear) is None:
            return f"a Linear layer of type {type(linear).__name__}"
    norms = [decoder.layernorm_embedding, decoder.layer_norm] + [
        m for layer in decoder.layers for m in (layer.self_attn_layer_norm, layer.encoder_attn_layer_norm,
                                                layer.final_layer_norm)]
    return _norms_problem(norms)


_NORMFORMER = ("c_attn", "attn_ln", "ffn_layernorm", "w_resid")


def _layers_problem(layers: List[Any], attentions: List[Tuple[Any, ...]]) -> Optional[str]:
    """Why the C++ layers cannot run ``layers`` as one kind (each layer's ``attentions``): NormFormer parts,
    head counts or norm placements that differ between layers; else None."""
    heads = attentions[0][0].num_heads
    for layer, attns in zip(layers, attentions):
        if any(getattr(layer, name, None) is not None for name in _NORMFORMER):
            return "NormFormer layers (c_attn, attn_ln, ffn_layernorm, w_resid)"
        if any(attn.num_heads != heads for attn in attns):
            return "layers with different numbers of heads"
        if layer.normalize_before != layers[0].normalize_before:
            return "layers mixing pre- and post-norm"
    return None


def _norms_problem(norms: List[Any]) -> Optional[str]:
    """None when every norm given is absent or torch's LayerNorm over the last dimension (what the kernels run)."""
    if any(m is not None and (type(m) is not nn.LayerNorm or len(m.normalized_shape) != 1) for m in norms):
        return "a layer norm other than torch's LayerNorm"
    return None


def covers(decoder: Any) -> bool:
    """Whether the operator runs every step of ``decoder`` (a transformer ``check_supported`` accepts):
    ``--step-mode auto`` takes native on a CPU only then, so no run under ``auto`` counts a fallback of
    every step."""
    return kernel_available() is None and uncovered(decoder) is None


def uncovered(decoder: Any) -> Optional[str]:
    """Why the operator cannot run ``decoder`` itself (a transformer ``check_supported`` accepts), the
    kernel aside; None where it can. ``--step-mode auto`` names it among the run's fallbacks."""
    projections = [p for layer in decoder.layers
                   for p in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj)]
    return why_not(decoder, projections)


def _linear_kind(linear: Any) -> Optional[str]:
    if type(linear) is nn.Linear or isinstance(linear, _FloatLinear):
        return "torch"
    if isinstance(linear, OneDnnLinear):
        return "onednn"
    if isinstance(linear, PackedLinear):  # its packed weights exist: the kernel is loaded
        return "packed"
    if is_quantized_linear(linear):  # the operator calls the int8 kernel; its PyTorch path it cannot
        ok = device_choice("int8_linear", "cpu") == "cpp" and linear.packed is not None
        return "int8" if ok else None
    return None


def build(decoder: Any, qkv: List[Any]) -> Union[Any, str]:
    """The decoder's ``NativeDecoder`` (its weights collected once), or why the operator cannot run it."""
    why = kernel_available() or why_not(decoder, qkv)
    if why is not None:
        return why
    first = decoder.layers[0]
    native = torch.classes.fairseq_stream.NativeDecoder(first.self_attn.num_heads, first.self_attn.head_dim,
                                                        bool(first.normalize_before), _activation(first.activation_fn))
    linear = _adder(native, "linear")
    norm = _adder(native, "norm")
    positions = decoder.embed_positions
    kind, pad, learned = _positions(positions)
    tokens = decoder.embed_tokens
    native.set_embedding(tokens.weight.detach(), -1 if tokens.padding_idx is None else tokens.padding_idx,
                         float(decoder.embed_scale), linear(decoder.project_in_dim), kind, pad, learned,
                         norm(decoder.layernorm_embedding))
    for layer, stacked in zip(decoder.layers, qkv):
        native.add_layer([norm(layer.self_attn_layer_norm), linear(stacked), linear(layer.self_attn.out_proj),
                          norm(layer.encoder_attn_layer_norm), linear(layer.encoder_attn.q_proj),
                          linear(layer.encoder_attn.out_proj), norm(layer.final_layer_norm), linear(layer.fc1),
                          linear(layer.fc2)], float(layer.self_attn.scaling), float(layer.encoder_attn.scaling))
    native.set_output(norm(decoder.layer_norm), linear(decoder.project_out_dim), linear(decoder.output_projection))
    # the raw step (decoder_step.cpp's raw_layers: the same bits without an operator call per product); the
    # variable turns it off, for A/B timings
    native.set_raw(not env_flag("FAIRSEQ_STREAM_NO_RAW_STEP"))
    return native


def _adder(native: Any, what: str) -> Any:
    """``add(module)`` → its index in the ``NativeDecoder`` (-1 for None)."""
    def detached(t: Optional[Tensor]) -> Optional[Tensor]:
        return None if t is None else t.detach()

    def add(module: Any) -> int:
        if module is None:
            return -1
        if what == "norm":
            return native.add_norm(detached(module.weight), detached(module.bias), float(module.eps),
                                   int(module.normalized_shape[0]))
        kind = _linear_kind(module)
        if kind == "onednn":
            return native.add_onednn_linear(module.packed, detached(module.bias))
        if kind == "packed":
            return native.add_packed_linear(module.packed, module.bias, int(module.out_features))
        if kind == "int8":
            return native.add_int8_linear(module.packed, module.offset, module.wscale, module.bias,
                                          int(module.out_features), int(module.levels))
        return native.add_torch_linear(module.weight.detach(), detached(module.bias))

    return add


def _positions(module: Any) -> Tuple[int, int, Optional[Tensor]]:
    """(kind: 0 none, 1 sinusoidal, 2 learned; padding index; the learned table)."""
    from fairseq.modules import LearnedPositionalEmbedding

    if module is None:
        return 0, -1, None
    if isinstance(module, LearnedPositionalEmbedding):
        return 2, int(module.padding_idx), module.weight.detach()
    return 1, int(module.padding_idx), None  # the sinusoidal table grows: passed at every step


def build_encoder(encoder: Any) -> Union[Any, str]:
    """The layers of a transformer encoder that :func:`fairseq_stream.model.encoder.encode` runs, collected into a
    ``NativeDecoder`` for ``encoder_layers`` (``csrc/decoder_step.cpp``: the same kernels on raw buffers, the same
    bits); or why not: every product packed float32 or our int8, a ReLU, torch's LayerNorm, one head count and norm
    placement, the kernels loaded, ``FAIRSEQ_STREAM_NO_RAW_STEP`` unset."""
    if env_flag("FAIRSEQ_STREAM_NO_RAW_STEP"):
        return "FAIRSEQ_STREAM_NO_RAW_STEP is set"
    why = kernel_available()
    if why is not None:
        return why
    layers = list(encoder.layers)
    if not layers:
        return "an encoder without layers"
    first = layers[0]
    why = _layers_problem(layers, [(layer.self_attn,) for layer in layers]) or _norms_problem(
        [encoder.layer_norm] + [m for layer in layers for m in (layer.self_attn_layer_norm, layer.final_layer_norm)])
    if why is not None:
        return why
    for layer in layers:
        attn = layer.self_attn
        if _activation(layer.activation_fn) != RELU:
            return "an activation other than ReLU"
        for linear in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj, layer.fc1, layer.fc2):
            if _linear_kind(linear) not in ("packed", "int8"):
                return f"a product without a raw kernel ({type(linear).__name__})"
    native = torch.classes.fairseq_stream.NativeDecoder(first.self_attn.num_heads, first.self_attn.head_dim,
                                                        bool(first.normalize_before), RELU)
    linear = _adder(native, "linear")
    norm = _adder(native, "norm")
    for layer in layers:
        attn = layer.self_attn
        native.add_encoder_layer([norm(layer.self_attn_layer_norm), linear(attn.q_proj), linear(attn.k_proj),
                                  linear(attn.v_proj), linear(attn.out_proj), norm(layer.final_layer_norm),
                                  linear(layer.fc1), linear(layer.fc2)], float(attn.scaling))
    native.set_encoder_norm(norm(encoder.layer_norm))
    if not native.raw_ready():
        return "a product's weights are not contiguous float32"
    return native
