"""``--quantize int8``: int8 weights for every ``nn.Linear`` of an ensemble, for CPU decoding.

One entry point, :func:`prepare_models`, called by :func:`fairseq_stream.integration.engine.build_generator`
for every ``--search`` (fairseq's own ``beam`` included): it returns the models the generator
decodes with. Under ``int8`` each model is replaced by a copy whose ``nn.Linear`` layers —
attention projections, feed-forward layers and the output projection of the encoder and the
decoder — are PyTorch's dynamically quantised ``Linear`` (``torch.ao.quantization.quantize_dynamic``):
weights stored as int8 with one scale per output row, activations quantised per call, and
the matrix product run by fbgemm's int8 kernels (x86). Embeddings and layer norms stay float32;
the logits come back as float32, so the fused top-k output layer runs on them unchanged.

Why PyTorch's dynamic quantisation and not ``torchao`` (measured on the demo model's layers,
1 thread, ``scripts/experiments/int8_kernels.py``; README, "Against CTranslate2"): fbgemm's eager int8
Linear beats float32 at the row counts of a decoder step (5-50 hypotheses: about 2x on a
feed-forward layer, 3-13x on the 6024-word output projection; about even at 320 rows), while
torchao 0.18's ``Int8DynamicActivationInt8WeightConfig`` runs 10-30x *slower* than float32 in
eager mode on a CPU (its int8 tensors are designed for ``torch.compile``, not tried here:
our decoder step's shapes change at every call) and its weight-only int8 is no faster than
float32. PyTorch marks ``torch.ao.quantization`` as deprecated in favour of torchao; it still
ships (and is how fbgemm's kernels are reached) in the pinned torch 2.13, and the deprecation
warning is silenced here. Scales are per output channel (not per tensor): the query/key/value
rows then stack into one product exactly (:func:`stacked_linear`, used by
:mod:`fairseq_stream.ops.transformer_step`).

The quantised copy is made once per float model and reused by every generator built from it
(a session builds one per ``translate`` call); the float model itself is never changed, so
float32 and int8 runs can share one process.
"""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from fairseq_stream.ops.linear_kernels import DerivedCopies, OneDnnLinear
from fairseq_stream.errors import FairseqStreamError

#: The values of ``--quantize``.
CHOICES: Tuple[str, ...] = ("none", "int8")

_copies = DerivedCopies()


def check_choice(value: str) -> None:
    if value not in CHOICES:
        raise FairseqStreamError(f"--quantize must be one of {', '.join(CHOICES)}, got {value!r}")


def prepare_models(models: Sequence[Any], quantize: Optional[str]) -> List[Any]:
    """The models to decode with under ``--quantize quantize`` (the same list for ``none``)."""
    quantize = quantize or "none"
    check_choice(quantize)
    if quantize == "none":
        return list(models)
    _refuse_unsupported(models)
    return [_int8_copy(model) for model in models]


def _refuse_unsupported(models: Sequence[Any]) -> None:
    for model in models:
        for param in model.parameters():
            if param.is_cuda or param.device.type != "cpu":
                raise FairseqStreamError("--quantize int8 runs on the CPU only; drop it on a GPU or add --cpu")
            if param.dtype != torch.float32:
                raise FairseqStreamError(f"--quantize int8 needs float32 models (got {param.dtype}); drop --fp16/--bf16")


def _int8_copy(model: nn.Module) -> nn.Module:
    if torch.backends.quantized.engine not in ("fbgemm", "x86"):
        raise FairseqStreamError(
            f"--quantize int8 needs PyTorch's x86 int8 kernels (fbgemm); this CPU's engine is "
            f"{torch.backends.quantized.engine!r}"
        )
    return _copies.get(model, _quantized)


def _quantized(model: nn.Module) -> nn.Module:
    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notice (module docstring)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions", category=UserWarning)
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        return quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=False)


def is_quantized_linear(module: Any) -> bool:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    return isinstance(module, DynamicLinear)


def count_linears(model: nn.Module) -> Tuple[int, int]:
    """(float ``nn.Linear`` layers, int8 dynamic ``Linear`` layers) in ``model``."""
    modules = list(model.modules())
    return (sum(type(m) is nn.Linear for m in modules), sum(is_quantized_linear(m) for m in modules))


def weight_key(linear: Any) -> Tuple[Any, ...]:
    """Identifies a Linear's current weights (float or int8), to know when derived copies are stale."""
    if is_quantized_linear(linear):
        packed = linear._packed_params._packed_params
        return ("int8", id(packed))
    weight = linear.weight
    return (weight.data_ptr(), weight.dtype, weight.device, type(linear).__name__)


def stacked_linear(linears: Sequence[Any]) -> Any:
    """One module computing ``cat([l(x) for l in linears], -1)`` in one product (q, k, v)."""
    if all(is_quantized_linear(l) for l in linears):
        return _stacked_int8(linears)
    weight = torch.cat([l.weight for l in linears], dim=0).detach()
    biases = [l.bias for l in linears]
    bias = None if any(b is None for b in biases) else torch.cat(biases).detach()
    if all(isinstance(l, OneDnnLinear) for l in linears):  # --cpu-matmul onednn: stay on oneDNN
        return OneDnnLinear(weight, bias)
    return _FloatLinear(weight, bias)


class _FloatLinear:
    def __init__(self, weight: Tensor, bias: Optional[Tensor]) -> None:
        self.weight, self.bias = weight, bias

    def __call__(self, x: Tensor) -> Tensor:
        return torch.nn.functional.linear(x, self.weight, self.bias)


def _stacked_int8(linears: Sequence[Any]) -> Any:
    """The rows of per-channel int8 weights stacked: each row keeps its own scale, so the
    product equals the separate ones (the input is quantised once, the same for all)."""
    weights, biases = zip(*(l._weight_bias() for l in linears))
    if any(w.qscheme() != torch.per_channel_affine for w in weights):
        raise FairseqStreamError("stacking int8 projections needs per-channel weights (quantize with fairseq_stream.ops.quantize)")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions", category=UserWarning)
        return _stacked_int8_module(weights, biases)


def _stacked_int8_module(weights: Sequence[Tensor], biases: Sequence[Optional[Tensor]]) -> Any:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    qweight = torch._make_per_channel_quantized_tensor(
        torch.cat([w.int_repr() for w in weights]),
        torch.cat([w.q_per_channel_scales() for w in weights]).double(),
        torch.cat([w.q_per_channel_zero_points() for w in weights]).long(),
        0,
    )
    bias = None if any(b is None for b in biases) else torch.cat([b.detach() for b in biases])
    out = DynamicLinear(qweight.size(1), qweight.size(0), dtype=torch.qint8)
    out.set_weight_bias(qweight, bias)
    return out
