"""``--cpu-matmul``: which library multiplies the float32 ``nn.Linear`` layers on a CPU.

PyTorch's x86 wheels send a float32 ``Linear`` to Intel MKL's ``sgemm``. MKL picks its code
path by CPU *vendor*: on AMD processors it runs its AVX2 kernels even where the CPU has
AVX-512, while oneDNN (also inside every x86 wheel: ``torch.backends.mkldnn``) dispatches on
the instruction set. On this project's AMD EPYC (Zen 5, AVX-512) oneDNN's packed-weight
product is 2.2-2.5x faster at every shape a decoder step has (5 to 3,500 rows of 256-1,024
inputs; ``scripts/experiments/int8_kernels.py``), and it is what CTranslate2 uses on such CPUs.

oneDNN's product is also *batch-invariant*: a row's result does not depend on how many rows
share the call (checked bit for bit at 1-400 rows, 1 and 2 threads), where MKL switches
kernels for one or two rows. A variable-width beam regroups rows at every step, so this is
what keeps ``var-stream`` ≡ ``var-batch`` exact whichever rows meet in a call.

``auto`` (the default) uses oneDNN for this package's strategies on a CPU with float32
weights and leaves fairseq's own ``--search beam`` on stock PyTorch, so that baseline stays
bit-identical to ``fairseq-generate`` without ``--user-dir``; ``onednn`` and ``torch`` force
one library for every search. The swap is made on a copy of each model's modules (the loaded
model is never changed; the copy shares its tensors and adds the packed weights), once per
model, as :mod:`fairseq_stream.model.quantize` makes its int8 copy.
"""
from __future__ import annotations

import copy
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops.backends import device_choice

#: The values of ``--cpu-matmul``.
CHOICES: Tuple[str, ...] = ("auto", "torch", "onednn")


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


def check_choice(value: str) -> None:
    if value not in CHOICES:
        raise FairseqStreamError(f"--cpu-matmul must be one of {', '.join(CHOICES)}, got {value!r}")


def onednn_available() -> bool:
    """True where this torch build carries oneDNN's packed float32 product."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _cpu_float32(models: Sequence[Any]) -> bool:
    params = [p for m in models for p in m.parameters()]
    return bool(params) and all(p.device.type == "cpu" and p.dtype == torch.float32 for p in params)


def resolve(choice: Optional[str], models: Sequence[Any], *, fairseq_search: bool) -> str:
    """The library a run uses: ``"onednn"`` or ``"torch"`` (see the module docstring)."""
    choice = choice or "auto"
    check_choice(choice)
    if choice == "torch":
        return "torch"
    usable = onednn_available() and _cpu_float32(models)
    if choice == "onednn":
        if not onednn_available():
            raise FairseqStreamError("--cpu-matmul onednn: this PyTorch build has no oneDNN (torch.backends.mkldnn); "
                                     "use --cpu-matmul torch")
        if not usable:
            raise FairseqStreamError("--cpu-matmul onednn needs float32 models on the CPU; drop --fp16/--bf16 or "
                                     "use --cpu-matmul torch")
        return "onednn"
    return "onednn" if usable and not fairseq_search and device_choice("linear", "cpu") == "onednn" else "torch"


def prepare(models: Sequence[Any], library: str) -> List[Any]:
    """The models with their ``nn.Linear`` layers on ``library`` (the same list for ``torch``)."""
    if library == "torch":
        return list(models)
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
