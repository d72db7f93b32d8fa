"""The fused Jacobi iteration: verification, draft update and the next feed as one operator.

:class:`~fairseq_stream.strategies.jacobi.JacobiDecoding` describes an iteration (paper 004,
Algorithms 1–3) in ~70 PyTorch operations; ``torch.ops.fairseq_stream.jacobi_step``
(``csrc/jacobi_step.cpp``) runs it as one, with the same arithmetic, so its outputs are
bit-identical to the PyTorch reference (``tests/unit/test_jacobi_step.py``).

Contract: the state's tensors (:data:`FIELDS`, contiguous) are updated in place and compacted
(the sentences that go on first, the finished ones after); the operator returns the packet the
host reads once (``[finished, next width, longest, accepted, shortest]`` + per sentence in the
compacted order: done, id, verified length, iterations, summed score, position before
compaction), the new draft
``(S, b − 1)`` and the next feed ``(S, B)`` (both compacted), and ``aux`` (2, S): the tokens
accepted per row in the order before compaction (the decoder cache keeps them), then that
order. On CUDA two Triton kernels do the same without compacting the state
(:mod:`fairseq_stream.ops.triton_jacobi_step`): the host drops the finished sentences after
its read.
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import extension

#: The state tensors the operator updates in place, in its order (``csrc/jacobi_step.cpp``'s ``Field``).
FIELDS: Tuple[str, ...] = ("sentences", "tokens", "token_scores", "verified", "max_len", "iterations", "width")
_SOURCE = "jacobi_step.cpp"
FLAGS: Tuple[str, ...] = ("-O2", "-ffp-contract=off")


class IterationResult(NamedTuple):
    packet: Tensor  # (5 + 6S,) float64
    draft: Tensor  # (S, b - 1)
    feed: Tensor  # (S, B)
    aux: Tensor  # (2, S): accepted tokens per row (old order), old position of each compacted sentence
    compacted: bool = True  # the state is in the packet's order (the CPU operator); else the host drops


def kernel() -> Any:
    """The built operator's module, or None where it cannot be built (the reference runs)."""
    return extension.load(_SOURCE, FLAGS, "Jacobi-step")


def fits(state_tensors: Sequence[Tensor], score: Tensor) -> bool:
    """Whether the operators take this state (contiguous, float scores; else the reference runs)."""
    return score.dtype in (torch.float32, torch.float64) and all(t.is_contiguous() for t in state_tensors)


_gpu_failed: List[str] = []


def gpu_iteration(*args: Any, **kwargs: Any) -> Optional[IterationResult]:
    """One iteration by the Triton kernels (:mod:`fairseq_stream.ops.triton_jacobi_step`), or None
    where they cannot run (no Triton, a compile failure: logged once, the reference runs after)."""
    if _gpu_failed:
        return None
    try:
        from fairseq_stream.ops.triton_jacobi_step import triton_iteration

        return triton_iteration(*args, **kwargs)
    except Exception as exc:  # a compile failure happens before any launch: the state is untouched
        _gpu_failed.append(type(exc).__name__)
        extension.log_once(f"fairseq-stream: GPU Jacobi kernels unavailable ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}); using PyTorch ops")
        return None


def fused_iteration(state_tensors: List[Tensor], pred: Tensor, score: Tensor, feed: Tensor, *, eos: int, pad: int,
                    bos: int, block: int, init_pad: bool, tail: bool, max_parallel: int, feed_width: int) -> IterationResult:
    """One iteration by the operator (``block``/``max_parallel`` −1: none)."""
    config = [eos, pad, bos, block, int(init_pad), int(tail), max_parallel, feed_width]
    out = torch.ops.fairseq_stream.jacobi_step(pred.contiguous(), score.contiguous(), feed.contiguous(),
                                               state_tensors, config)
    return IterationResult(*out)
