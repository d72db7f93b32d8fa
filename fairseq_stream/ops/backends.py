"""One registry of the fused step operators and the backends that run them.

A *step operator* is the part of a strategy's step after the output layer: the beam step
(Yang2020 Algorithm 1, lines 14-17), the Jacobi iteration (Santilli2023 Algorithms 1-3), the
IBDecoder's multi-word beam step (Zhang2020 Algorithm 1). Each is declared once, below, as a
:class:`StepOperator`: the state tensors it updates in place (in order), its packet
(:mod:`fairseq_stream.ops.packets`), and its backends:

* ``reference`` — the strategy's own PyTorch code (any device; the only one that runs a
  user's ``--prune-rules`` rule), which defines the results;
* ``cpp`` — one C++ dispatcher operator on the CPU (``ops/csrc``), bit-identical;
* ``triton`` — Triton kernels on CUDA (on a CPU only under ``TRITON_INTERPRET=1``, as the
  tests run them), bit-identical in float64.

:meth:`KernelRunner.run` is the one function that runs an operator. It picks the backend
(``--step-backend``: ``auto`` = the fastest available for the tensors' device), falls back to
the reference with **one warning line** naming the operator, the backend it wanted and why,
records which backend ran (the run's statistics print it; the harness JSON has it), reads the
packet (the step's one host read) and keeps the one compaction contract: after ``run`` the
state's sentences are in the packet's order, the ones that go on first, the finished ones
after. The C++ operators compact in place themselves; after the reference or Triton the runner
does it, in the steps where a sentence finished (it knows their positions from the packet).

Implementations are named by ``module:function`` and imported on first use: this module
imports none of them (no import circles; Triton only where it runs).
"""
from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import packets
from fairseq_stream.ops.packets import PacketSpec, PacketView

logger = logging.getLogger("fairseq_stream")

BACKENDS: Tuple[str, ...] = ("reference", "cpp", "triton")
CHOICES: Tuple[str, ...] = ("auto",) + BACKENDS

#: What runs where: every device choice of a run, by what is chosen and the device type, when the
#: user leaves it to ``auto``. An entry is the implementation tried first; where it cannot run (a
#: kernel that did not build, another dtype) the module named falls back to its PyTorch reference.
#: ``reference``: the PyTorch code itself.
DEVICE_TABLE: Dict[str, Dict[str, str]] = {
    # the fused step operators (this module): --step-backend
    "beam_step": {"cpu": "cpp", "cuda": "triton"},
    "jacobi_step": {"cpu": "cpp", "cuda": "triton"},
    # the Triton kernels (--step-backend triton) are exact under Triton's interpreter but have not yet
    # run on a GPU: the reference (torch ops on device-resident tables) stays the default until they have
    "ib_step": {"cpu": "cpp", "cuda": "reference"},
    # top-k + normaliser after the output projection (ops/fused_output.py); on CUDA the faster of
    # the Triton kernels and PyTorch's, measured once per shape class
    "output_layer": {"cpu": "cpp", "cuda": "fastest"},
    # lookahead decoding's n-gram pool: learn and guess, once per verification (ops/ngram_pool.py)
    "ngram_pool": {"cpu": "cpp", "cuda": "reference"},
    # attention of one query per row in the decoder step (ops/decode_attention.py, float32)
    "attention": {"cpu": "cpp", "cuda": "reference"},
    # the product of --quantize int8's layers (ops/int8_rows.py, float32 activations)
    "int8_linear": {"cpu": "cpp"},
    # float32 Linear layers, --cpu-matmul auto (model/linear_kernels.py)
    "linear": {"cpu": "packed", "cuda": "torch"},
    # --step-mode auto (model/static/modes.py): on a CPU the eager step as one C++ call (the same bits,
    # 0.66x the eager step's time at greedy batch 1, 0.85x at k = 5: docs/results.md, "The native step
    # on a CPU"; eager where it does not run every model); the static step without capture is slower
    # than the eager one on a CPU (it computes the padding rows and slots)
    "step_mode": {"cpu": "native", "cuda": "graph"},
}


def device_choice(what: str, device: str) -> str:
    """:data:`DEVICE_TABLE`'s entry for ``what`` on a device of type ``device`` (``reference`` where none)."""
    return DEVICE_TABLE[what].get(device, "reference")


@dataclass(frozen=True)
class StepOperator:
    """One fused step operator: what it touches, what the host reads, who implements it."""

    name: str
    fields: Tuple[str, ...]  # the state tensors it reads and updates in place, in its order
    packet: PacketSpec
    implementations: Dict[str, str]  # backend → "module:function" (the reference is the strategy's)
    compacts: Tuple[str, ...] = ()  # backends that leave the state compacted themselves
    runner_compacts: bool = True  # after the other backends, the runner compacts the state
    outputs_per_sentence: Tuple[str, ...] = ()  # result fields ordered like the state (compacted with it)
    #: backend → the step features (``KernelRunner.run``'s ``features``) it does not implement: such steps run the reference
    lacks: Dict[str, Tuple[str, ...]] = field(default_factory=dict)

    def implementation(self, backend: str) -> Optional[Callable[..., Any]]:
        path = self.implementations.get(backend)
        if path is None:
            return None
        module, _, function = path.partition(":")
        return getattr(importlib.import_module(module), function)


#: a beam step whose sentences prune at their own rungs (search/beam.py, ``BeamSearch.use_rungs``)
RUNGS_FEATURE = "per-sentence rungs"
BEAM_STEP = StepOperator(
    name="beam_step",
    fields=("sentences", "scores", "ended", "ended_len", "tokens", "token_scores", "steps", "max_len", "n_final",
            "best_final", "best_final_norm", "src_lengths", "fin_tokens", "fin_scores", "fin_len", "fin_total"),
    packet=packets.BEAM_STEP,
    implementations={"cpp": "fairseq_stream.ops.beam_step:cpp_step",
                     "triton": "fairseq_stream.ops.triton_beam_step:triton_step"},
    compacts=("cpp",),
    # the final margin a token and the per-sentence rungs are in the C++ operator only (the surprisal-scaled δ,
    # var-*'s default, is in both)
    lacks={"triton": ("--prune-final-per-token", RUNGS_FEATURE)},
)
JACOBI_STEP = StepOperator(
    name="jacobi_step",
    fields=("sentences", "tokens", "token_scores", "verified", "max_len", "iterations", "width"),
    packet=packets.JACOBI_STEP,
    implementations={"cpp": "fairseq_stream.ops.jacobi_step:cpp_iteration",
                     "triton": "fairseq_stream.ops.triton_jacobi_step:triton_iteration"},
    compacts=("cpp",),
    outputs_per_sentence=("draft", "feed"),
)
IB_STEP = StepOperator(
    name="ib_step",
    fields=("scores", "tokens", "token_scores", "seg_done", "n_final", "fin_tokens", "fin_scores", "fin_len",
            "fin_total", "steps"),
    packet=packets.IB_STEP,
    implementations={"cpp": "fairseq_stream.ops.ib_step:cpp_step",
                     "triton": "fairseq_stream.ops.triton_ib_step:triton_step"},
    # Neither backend compacts: the step returns a new state (a history of fixed width, z words longer),
    # and the strategy drops the finished sentences from it.
    runner_compacts=False,
)
OPERATORS: Dict[str, StepOperator] = {op.name: op for op in (BEAM_STEP, JACOBI_STEP, IB_STEP)}


def _cpp_failure(op: StepOperator) -> Optional[str]:
    """Why the C++ operator cannot be loaded (None: it can)."""
    from fairseq_stream.ops import extension

    return None if extension.load_operator(op.name) is not None else extension.operator_failure(op.name)


def _triton_runs(device: torch.device) -> bool:
    """Triton compiles for CUDA; on a CPU only its interpreter runs the kernels."""
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def lacking(op: StepOperator, backend: str, features: Sequence[str]) -> List[str]:
    """The step ``features`` that ``backend``'s implementation of ``op`` does not have."""
    return [f for f in features if f in op.lacks.get(backend, ())]


def why_not(op: StepOperator, backend: str, tensors: Sequence[Tensor], fits: bool,
            features: Sequence[str] = ()) -> Optional[str]:
    """Why ``backend`` cannot run this step (None: it can)."""
    if backend == "reference":
        return None
    if backend not in op.implementations:
        return f"{op.name} has no {backend} implementation"
    if not fits:
        return "the step needs the reference (a rule of --prune-rules, or state of another dtype or layout)"
    missing = lacking(op, backend, features)
    if missing:
        return f"the {backend} {op.name} does not implement {', '.join(missing)} (the reference runs those steps)"
    device = tensors[0].device
    if backend == "cpp":
        if device.type != "cpu":
            return f"the C++ operator runs on the CPU, the state is on {device.type}"
        failure = _cpp_failure(op)
        if failure is not None:
            return f"the C++ operator could not be built: {failure}"
    if backend == "triton" and not _triton_runs(device):
        return ("Triton is not installed" if device.type == "cuda"
                else "Triton kernels run on CUDA (on a CPU only under TRITON_INTERPRET=1)")
    return None


@dataclass
class Ran:
    """What :meth:`KernelRunner.run` returns: the backend's result, its packet read, the backend."""

    result: Any
    packet: PacketView
    backend: str


@dataclass
class KernelRunner:
    """Runs the step operators of one strategy object (one decoding run)."""

    preference: str = "auto"
    stats: Any = None
    failed: Dict[Tuple[str, str], str] = field(default_factory=dict)  # (operator, backend) → why
    warned: Set[Tuple[str, str]] = field(default_factory=set)
    chosen: Dict[Tuple[str, str, bool], str] = field(default_factory=dict)  # (operator, device, fits) → backend
    impls: Dict[Tuple[str, str], Callable[..., Any]] = field(default_factory=dict)  # imported once

    def __post_init__(self) -> None:
        if self.preference not in CHOICES:
            raise ValueError(f"--step-backend must be one of {', '.join(CHOICES)}, got {self.preference!r}")

    def choose(self, op: StepOperator, tensors: Sequence[Tensor], fits: bool, features: Sequence[str] = ()) -> str:
        """The backend for this step. A backend that cannot run is warned about once (``auto``
        stays quiet where the reference is simply the right one: a user's pruning rule)."""
        if self.preference == "reference":
            return "reference"
        key = (op.name, tensors[0].device.type, fits, tuple(features))
        if key not in self.chosen:  # once per operator, device and kind of step (a host-side lookup)
            self.chosen[key] = self._choose(op, tensors, fits, features)
        return self.chosen[key]

    def _choose(self, op: StepOperator, tensors: Sequence[Tensor], fits: bool, features: Sequence[str]) -> str:
        auto = self.preference == "auto"
        wanted = device_choice(op.name, tensors[0].device.type) if auto else self.preference
        if wanted == "reference" or (op.name, wanted) in self.failed:
            return "reference"
        reason = why_not(op, wanted, tensors, fits, features)
        if reason is None:
            return wanted
        if fits and not lacking(op, wanted, features):  # the device, a build, a missing implementation: the whole run
            self._fail(op, wanted, reason)
        elif not auto and (op.name, wanted) not in self.warned:
            self.warned.add((op.name, wanted))
            self._warn(op, wanted, reason)
        return "reference"

    def run(self, op: StepOperator, tensors: Sequence[Tensor], args: Sequence[Any], config: Dict[str, Any], *,
            reference: Callable[[], Any], fits: bool = True, features: Sequence[str] = (), s: int, z: int = 0) -> Ran:
        """Run ``op`` on the state ``tensors`` (updated in place) and read its packet once.

        ``args``/``config``: the implementation's inputs after the state and its keyword
        options; ``reference()`` runs the strategy's PyTorch step; ``fits``: whether the fused
        backends may take this step; ``features``: what the step needs beyond the operator's
        common contract (a backend whose ``op.lacks`` names one runs the reference instead);
        ``s``/``z``: the packet's sentence and final counts.
        """
        result, backend = self._execute(op, tensors, args, config, reference, fits, features)
        return self.ran(op, tensors, result, backend, s=s, z=z)

    def ran(self, op: StepOperator, tensors: Sequence[Tensor], result: Any, backend: str, *, s: int, z: int = 0) -> Ran:
        """:meth:`run` after its step: the step ``backend`` ran (``result``) recorded, its packet read once, the state
        compacted where that backend leaves it to the runner. For a step a caller ran itself, as :meth:`choose` chose."""
        self._record(op, backend)
        view = op.packet.read(result.packet, s, z)
        if op.runner_compacts and backend not in op.compacts:  # the compaction contract
            result = self._compact(op, tensors, result, view)
        return Ran(result, view, backend)

    def launch(self, op: StepOperator, tensors: Sequence[Tensor], args: Sequence[Any], config: Dict[str, Any], *,
               reference: Callable[[], Any], fits: bool = True, features: Sequence[str] = (), s: int, z: int = 0,
               ) -> Tuple[Any, str]:
        """:meth:`run`'s device part, as a static step's region runs it: the step and its compaction in device
        operations only, the same ones whatever finished (no packet read, nothing recorded: :meth:`read`); the
        result and the backend that ran."""
        result, backend = self._execute(op, tensors, args, config, reference, fits, features)
        if op.runner_compacts and backend not in op.compacts:
            self._permute(op, tensors, result, op.packet.starts(s, z))  # the identity where nobody finished
        return result, backend

    def read(self, op: StepOperator, packet: Tensor, backend: str, *, s: int, z: int = 0) -> PacketView:
        """The packet of a step :meth:`launch` ran (by ``backend``), read once; the backend recorded."""
        self._record(op, backend)
        return op.packet.read(packet, s, z)

    def _execute(self, op: StepOperator, tensors: Sequence[Tensor], args: Sequence[Any], config: Dict[str, Any],
                 reference: Callable[[], Any], fits: bool, features: Sequence[str]) -> Tuple[Any, str]:
        backend = self.choose(op, tensors, fits, features)
        if backend != "reference":
            try:
                impl = self.impls.get((op.name, backend))
                if impl is None:
                    impl = self.impls[(op.name, backend)] = op.implementation(backend)
                return impl(list(tensors), *args, **config), backend
            except Exception as exc:  # a compile failure: the kernels wrote nothing (see triton_launch)
                self._fail(op, backend, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return reference(), "reference"

    def _compact(self, op: StepOperator, tensors: Sequence[Tensor], result: Any, view: PacketView) -> Any:
        """Put the state (and the per-sentence outputs) in the packet's order, in place."""
        if not view.scalar("finished"):
            return result  # nobody finished: the packet's order is the state's
        self._permute(op, tensors, result, view.starts)
        return result

    @staticmethod
    def _permute(op: StepOperator, tensors: Sequence[Tensor], result: Any, starts: Sequence[int]) -> None:
        """Every state tensor and per-sentence output put in the packet's ``position`` order, in place (the
        order read on the device: no host→device copy)."""
        i = op.packet.index["position"]
        order = result.packet[starts[i]: starts[i + 1]].long()
        for t in list(tensors) + [getattr(result, name) for name in op.outputs_per_sentence]:
            t.copy_(t.index_select(0, order))

    def _fail(self, op: StepOperator, backend: str, why: str) -> None:
        self.failed[(op.name, backend)] = why
        self.chosen = {k: v for k, v in self.chosen.items() if k[0] != op.name}  # choose again without it
        self._warn(op, backend, why)

    @staticmethod
    def _warn(op: StepOperator, backend: str, why: str) -> None:
        # WARNING, not INFO: a run that silently used the reference must not pass for ours.
        logger.warning(f"fairseq-stream: {op.name}: the {backend} backend cannot run ({why}); using the reference")

    def _record(self, op: StepOperator, backend: str) -> None:
        if self.stats is not None:
            self.stats.note_backend(op.name, backend)
