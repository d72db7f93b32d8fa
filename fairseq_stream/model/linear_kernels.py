"""``--cpu-matmul``: which library multiplies the float32 ``nn.Linear`` layers on a CPU.

PyTorch's x86 wheels send a float32 ``Linear`` to Intel MKL's ``sgemm``. MKL picks its code
path by CPU *vendor*: on AMD processors it runs its AVX2 kernels even where the CPU has
AVX-512, and it switches kernels for one or two rows, so a row's result depends on its batch.

``packed`` (:mod:`fairseq_stream.ops.packed_linear`, issue 78): this package's own product over
weights packed once. At the few rows of a batch-1 or k = 5 step it costs a few microseconds where
oneDNN's call through PyTorch costs ~25-30 (0.24-0.5x oneDNN's time at 1-4 rows, 0.9-1.0x at
hundreds: ``scripts/bench/packed_linear_time.py``), and its arithmetic is one fused multiply-add per
input in a fixed order: a row's result does not depend on the rows that share the call, the
thread count or the instruction set (AVX-512, AVX2 and scalar builds give the same bits).

``onednn``: oneDNN's packed-weight product (inside every x86 wheel: ``torch.backends.mkldnn``),
which dispatches on the instruction set rather than the vendor and is batch-invariant too (checked
bit for bit at 1-400 rows, 1 and 2 threads); the default before ``packed``.

A variable-width beam regroups rows at every step, so batch invariance is what keeps ``var-stream``
≡ ``var-batch`` exact whichever rows meet in a call.

``auto`` (the default) uses ``packed`` for this package's strategies on a CPU with float32 weights
(``onednn`` where the packed kernel cannot be built) and leaves fairseq's own ``--search beam`` on
stock PyTorch, so that baseline stays bit-identical to ``fairseq-generate`` without ``--user-dir``;
``packed``, ``onednn`` and ``torch`` force one library for every search. The swap is made on a copy
of each model's modules (the loaded model is never changed; the copy shares its tensors and adds
the packed weights), once per model, as :mod:`fairseq_stream.model.quantize` makes its int8 copy.
"""
from __future__ import annotations

import copy
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops import packed_linear
from fairseq_stream.ops.backends import device_choice

#: The values of ``--cpu-matmul``.
CHOICES: Tuple[str, ...] = ("auto", "torch", "onednn", "packed")


#: Every registry of derived copies (``model_step.release_cached_memory`` finds a model's copies there).
REGISTRIES: "weakref.WeakSet[DerivedCopies]" = weakref.WeakSet()


class DerivedCopies:
    """Copies derived from models (oneDNN here, int8 in :mod:`fairseq_stream.model.quantize`), made
    once per model and made again when its weights move or change: a parameter's storage or version
    counter (an in-place change under ``torch.no_grad()``, ``copy_``, an optimizer's step), or its sum
    (``p.data.mul_(…)`` changes no version counter: a copy's packed weights would be stale). Checked once
    per generator: a read of every weight, as one decoder step makes."""

    def __init__(self) -> None:
        self._copies: "weakref.WeakKeyDictionary[nn.Module, Tuple[Any, nn.Module]]" = weakref.WeakKeyDictionary()
        REGISTRIES.add(self)

    def copies_of(self, model: nn.Module) -> List[nn.Module]:
        """The copy made of ``model`` (none or one)."""
        cached = self._copies.get(model)
        return [] if cached is None else [cached[1]]

    def get(self, model: nn.Module, make: Callable[[nn.Module], nn.Module]) -> nn.Module:
        params = list(model.parameters())
        floats = [p.detach().sum(dtype=torch.float64) for p in params if p.is_floating_point()]
        sums = tuple(torch.stack(floats).tolist()) if floats else ()  # one read of the device
        version = (tuple((p.data_ptr(), p._version) for p in params), sums)
        cached = self._copies.get(model)
        if cached is None or cached[0] != version:
            derived = make(model)
            for module in derived.modules():
                # fairseq's attention hands q/k/v_proj.weight to PyTorch's own attention when it
                # has no incremental state (the encoder), bypassing the modules: take fairseq's
                # path through them instead (its switch for pruned projections).
                if hasattr(module, "_set_skip_embed_dim_check"):
                    module._set_skip_embed_dim_check()
            derived.eval()
            cached = self._copies[model] = (version, derived)
        return cached[1]


_copies = DerivedCopies()
_packed_copies = DerivedCopies()  # a registry per derivation: a model has one copy of each kind


def check_choice(value: str) -> None:
    if value not in CHOICES:
        raise FairseqStreamError(f"--cpu-matmul must be one of {', '.join(CHOICES)}, got {value!r}")


def onednn_available() -> bool:
    """True where this torch build carries oneDNN's packed float32 product."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _cpu_float32(models: Sequence[Any]) -> bool:
    params = [p for m in models for p in m.parameters()]
    return bool(params) and all(p.device.type == "cpu" and p.dtype == torch.float32 for p in params)


def packed_available() -> bool:
    """True where the packed kernel (``ops/csrc/packed_linear.cpp``) is built or can be."""
    return packed_linear.kernel() is not None


def resolve(choice: Optional[str], models: Sequence[Any], *, fairseq_search: bool) -> str:
    """The library a run uses: ``"packed"``, ``"onednn"`` or ``"torch"`` (see the module docstring)."""
    choice = choice or "auto"
    check_choice(choice)
    if choice == "torch":
        return "torch"
    if choice in ("onednn", "packed"):
        if not _cpu_float32(models):
            raise FairseqStreamError(f"--cpu-matmul {choice} needs float32 models on the CPU; drop --fp16/--bf16 or "
                                     "use --cpu-matmul torch")
        if choice == "onednn" and not onednn_available():
            raise FairseqStreamError("--cpu-matmul onednn: this PyTorch build has no oneDNN (torch.backends.mkldnn); "
                                     "use --cpu-matmul packed or torch")
        if choice == "packed" and not packed_available():
            raise FairseqStreamError(f"--cpu-matmul packed: its kernel cannot be built here ({packed_linear.failure()}); "
                                     "use --cpu-matmul onednn or torch")
        return choice
    if fairseq_search or not _cpu_float32(models):
        return "torch"
    wanted = device_choice("linear", "cpu")
    if wanted == "packed" and packed_available():
        return "packed"
    return "onednn" if wanted in ("packed", "onednn") and onednn_available() else "torch"


def prepare(models: Sequence[Any], library: str) -> List[Any]:
    """The models with their ``nn.Linear`` layers on ``library`` (the same list for ``torch``)."""
    if library == "torch":
        return list(models)
    if library == "packed":
        return [_packed_copies.get(model, lambda m: swap_linears(m, PackedLinear.of)) for model in models]
    return [_onednn_copy(model) for model in models]


class OneDnnLinear(nn.Module):
    """``nn.Linear`` computed by oneDNN with its weight packed once (inference only).

    ``weight``/``bias`` stay the float tensors (shared with the source layer), so code that
    reads them (the stacked q/k/v product, weight tying) sees the usual attributes.
    """

    def __init__(self, weight: Tensor, bias: Optional[Tensor]) -> None:
        super().__init__()
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        self.weight = weight.detach()
        self.bias = None if bias is None else bias.detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, None)

    @staticmethod
    def of(linear: nn.Linear) -> "OneDnnLinear":
        return OneDnnLinear(linear.weight, linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_grad_enabled() and x.requires_grad:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class PackedLinear(nn.Module):
    """``nn.Linear`` computed by :mod:`fairseq_stream.ops.packed_linear` (inference only): weights packed
    once, one fused multiply-add per input in a fixed order, whatever the rows.

    ``weight``/``bias`` stay the float tensors (shared with the source layer), as :class:`OneDnnLinear`'s."""

    def __init__(self, weight: Tensor, bias: Optional[Tensor]) -> None:
        super().__init__()
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        self.weight = weight.detach()
        self.bias = None if bias is None else bias.detach().float().contiguous()
        self.packed = packed_linear.pack(self.weight)

    @staticmethod
    def of(linear: nn.Linear) -> "PackedLinear":
        return PackedLinear(linear.weight, linear.bias)

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_grad_enabled() and x.requires_grad:
            y = torch.nn.functional.linear(x, self.weight, self.bias)
            return torch.relu(y) if relu else y
        return packed_linear.linear(x, self.packed, self.bias, self.out_features, relu)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _onednn_copy(model: nn.Module) -> nn.Module:
    return _copies.get(model, lambda m: swap_linears(m, OneDnnLinear.of))


def swap_linears(model: nn.Module, make: Callable[[nn.Linear], nn.Module]) -> nn.Module:
    """A copy of ``model`` whose every ``nn.Linear`` is ``make(linear)`` (oneDNN's, int8's).

    The copy shares every parameter and buffer with the model (only the modules are new): what
    it adds is the new layers' own weights (packed, quantised)."""
    memo = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    out = copy.deepcopy(model, memo)
    for parent in list(out.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, make(child))
    return out
