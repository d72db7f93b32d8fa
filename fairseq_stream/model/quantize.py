"""``--quantize int8``: int8 weights for every ``nn.Linear`` of an ensemble, for CPU decoding,
with one activation scale per row, so that a row's result never depends on its batch.

One entry point, :func:`prepare_models`, called by :func:`fairseq_stream.integration.build.build_generator`
for every ``--search`` (fairseq's own ``beam`` included): it returns the models the generator
decodes with. Under ``int8`` each model is replaced by a copy whose ``nn.Linear`` layers —
attention projections, feed-forward layers and the output projection of the encoder and the
decoder — are :class:`RowInt8Linear`: weights stored as int8 with one scale per output channel
(symmetric), activations quantised per call with **one scale per row**, the product run in
integers by our own kernel (:mod:`fairseq_stream.ops.int8_rows`: AVX-512 VNNI, AVX2 or scalar, the
same bits on every CPU kind). Embeddings and layer norms stay float32; the logits come back as
float32, so the fused top-k output layer runs on them unchanged.

Why per row (issue 40): PyTorch's dynamic int8 ``Linear`` scales the activations by the
minimum and maximum of the whole input, so a hypothesis's scores changed with the rows that
shared its call: ``--stream-per-batch`` gave other translations at ``--batch-size 1`` and 8, and
Jacobi decoding stopped equalling greedy. Here each row is divided by its own largest magnitude
``m_r`` (every row then spans [-1, 1]), quantised with one fixed scale, multiplied in integers
(exact) and multiplied back by ``m_r`` before the bias: every step is per element or per row, so
a row's numbers are the same in any batch, and every exactness promise (stream ≡ batch,
Jacobi ≡ greedy, batch size 1 ≡ 8) holds under int8 as in float32. It is also closer to
float32 (a row's 8 bits span its own range, not the batch's). The C++ operator ``int8_row_linear``
(``ops/csrc/int8_rows.cpp``) quantises the rows and multiplies in one call; where it cannot be
built, the same arithmetic runs as PyTorch operations (identical numbers).

Activation bits: 8 on every CPU; ``FAIRSEQ_STREAM_INT8_ACTIVATION_BITS=7`` asks for 7 (a copy is
made per width). Until 2026-12-05 fbgemm's u8s8 product multiplied (through PyTorch's packed
parameters), 7-bit on CPUs without AVX-512 VNNI (its AVX2 pair sums saturate at 8 bits); our own
kernel costs less per call at the few rows of a decoder step (``scripts/experiments/int8_kernels.py``:
at one row 0.35-0.5x fbgemm's time, at 320 rows ~0.7x) and needs no per-CPU width. torchao's eager
int8 ran 10-30x slower than float32, ``torch._int_mm`` repacks its weight at every call. Scales are
per output channel: the query/key/value rows stack into one product exactly (:func:`stacked_linear`,
used by :mod:`fairseq_stream.model.block_decoder`).

The quantised copy is made once per float model and reused by every generator built from it
(a session builds one per ``translate`` call); the float model itself is never changed, so
float32 and int8 runs can share one process.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from fairseq_stream.model.linear_kernels import DerivedCopies, OneDnnLinear, PackedLinear, swap_linears
from fairseq_stream.ops import int8_rows
from fairseq_stream.errors import FairseqStreamError

#: The values of ``--quantize``.
CHOICES: Tuple[str, ...] = ("none", "int8")

_copies: Dict[int, DerivedCopies] = {}  # activation bits → the int8 copies made with them


def check_choice(value: str) -> None:
    if value not in CHOICES:
        raise FairseqStreamError(f"--quantize must be one of {', '.join(CHOICES)}, got {value!r}")


def prepare_models(models: Sequence[Any], quantize: Optional[str]) -> List[Any]:
    """The models to decode with under ``--quantize quantize`` (the same list for ``none``)."""
    quantize = quantize or "none"
    check_choice(quantize)
    if quantize == "none":
        return list(models)
    why = why_no_int8(models)
    if why is not None:
        raise FairseqStreamError(why)
    return [_int8_copy(model) for model in models]


def why_no_int8(models: Sequence[Any]) -> Optional[str]:
    """Why :func:`prepare_models` cannot make int8 copies of ``models`` (one line for the user), or None
    where it can: float32 weights on the CPU."""
    for model in models:
        for param in model.parameters():
            if param.device.type != "cpu":
                return "--quantize int8 runs on the CPU only; drop it on a GPU or add --cpu"
            if param.dtype != torch.float32:
                return f"--quantize int8 needs float32 models (got {param.dtype}); drop --fp16/--bf16"
    return None


def int8_weights(models: Sequence[Any]) -> Optional[str]:
    """``int8 (<kernel>)`` where ``models`` carry int8 layers (the closing statistics line), else None."""
    bits = sorted({b for model in models for b in activation_bits_of(model)})
    if not bits:
        return None  # the width the layers were made with (7 and 8 give different hypotheses)
    return "int8 (" + "; ".join(int8_rows.kernel_name(b) for b in bits) + ")"


def _int8_copy(model: nn.Module) -> nn.Module:
    copies = _copies.setdefault(int8_rows.activation_bits(), DerivedCopies())
    return copies.get(model, lambda m: swap_linears(m, RowInt8Linear.of))


class RowInt8Linear(nn.Module):
    """``nn.Linear`` with int8 per-channel weights and per-row activation scales (inference only).

    ``y_r = m_r · (Q(x_r / m_r) · W_q) · s_w + b`` with ``m_r = max |x_r|`` and ``Q`` one fixed
    scale mapping [-1, 1] onto the activation bits: the result of a row never depends on the
    other rows of the call (module docstring).
    """

    def __init__(self, weight_int: Tensor, wscale: Tensor, bias: Optional[Tensor], bits: Optional[int] = None) -> None:
        """``weight_int`` (N, K) int8 and ``wscale`` (N,) its scale per output channel; ``bits``: the activation
        width (default :func:`fairseq_stream.ops.int8_rows.activation_bits`)."""
        super().__init__()
        self.out_features, self.in_features = weight_int.shape
        self.weight_int = weight_int.contiguous()
        self.wscale = wscale.float().contiguous()  # s_w
        self.bias = None if bias is None else bias.detach().float().contiguous()
        self.packed: Optional[Tensor] = None
        self.offset: Optional[Tensor] = None
        if int8_rows.kernel() is not None:
            self.packed, self.offset = int8_rows.pack(self.weight_int)
        self.bits = int8_rows.activation_bits() if bits is None else bits
        self.levels = 2 ** (self.bits - 1) - 1  # L: 127 or 63

    @staticmethod
    def of(linear: nn.Linear) -> "RowInt8Linear":
        qweight = quantize_weight(linear.weight.detach().float())
        return RowInt8Linear(qweight.int_repr(), qweight.q_per_channel_scales(), linear.bias)

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        """``self(x)``; ``relu=True`` gives ``relu(self(x))`` in the same pass."""
        return int8_rows.row_linear(x, self, relu)

    def reference(self, x: Tensor, relu: bool = False) -> Tensor:
        """:meth:`forward` through PyTorch operations only (the operator's arithmetic, the same numbers)."""
        return int8_rows.reference_row_linear(x, self.weight_int, self.wscale, self.bias, relu, self.levels)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"activation_bits={self.bits}")


def quantize_weight(weight: Tensor) -> Tensor:
    """int8 weights with one symmetric scale per output channel (PyTorch's per-channel weight observer)."""
    from torch.ao.quantization.observer import PerChannelMinMaxObserver

    observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    observer(weight)
    scale, zero_point = observer.calculate_qparams()
    with _quiet():
        return torch.quantize_per_channel(weight, scale.double(), zero_point.long(), 0, torch.qint8)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Without PyTorch's deprecation notices of its quantised tensors (module docstring)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions", category=UserWarning)
        yield


def is_quantized_linear(module: Any) -> bool:
    return isinstance(module, RowInt8Linear)


def activation_bits_of(model: nn.Module) -> List[int]:
    """The activation widths of ``model``'s int8 layers (one, for a copy of :func:`prepare_models`)."""
    return sorted({m.bits for m in model.modules() if is_quantized_linear(m)})


def count_linears(model: nn.Module) -> Tuple[int, int]:
    """(float ``nn.Linear`` layers, int8 ``Linear`` layers) in ``model``."""
    modules = list(model.modules())
    return (sum(type(m) is nn.Linear for m in modules), sum(is_quantized_linear(m) for m in modules))


def weight_key(linear: Any) -> Tuple[Any, ...]:
    """Identifies a Linear's current weights (float or int8), to know when derived copies are stale."""
    if is_quantized_linear(linear):
        return ("int8", id(linear.weight_int))
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
    if all(isinstance(l, PackedLinear) for l in linears):  # --cpu-matmul packed: stay on the packed kernel
        return PackedLinear(weight, bias)
    return _FloatLinear(weight, bias)


class _FloatLinear:
    def __init__(self, weight: Tensor, bias: Optional[Tensor]) -> None:
        self.weight, self.bias = weight, bias

    def __call__(self, x: Tensor) -> Tensor:
        return torch.nn.functional.linear(x, self.weight, self.bias)


def _stacked_int8(linears: Sequence[RowInt8Linear]) -> RowInt8Linear:
    """The rows of per-channel int8 weights stacked: each row keeps its own scale, so the
    product equals the separate ones (every input row is scaled once, the same for all)."""
    biases = [l.bias for l in linears]
    bias = None if any(b is None for b in biases) else torch.cat(biases)
    return RowInt8Linear(torch.cat([l.weight_int for l in linears]), torch.cat([l.wscale for l in linears]), bias,
                         bits=linears[0].bits)
