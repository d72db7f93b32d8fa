"""The fused Jacobi iteration: verification, draft update and the next feed as one operator.

:class:`~fairseq_stream.search.jacobi.JacobiDecoding` describes an iteration (Santilli2023,
Algorithms 1–3) in ~70 PyTorch operations; ``torch.ops.fairseq_stream.jacobi_step``
(``csrc/jacobi_step.cpp``) runs it as one, with the same arithmetic, so its outputs are
bit-identical to the PyTorch reference (``tests/unit/test_step_backends.py``).

Contract (every backend; :mod:`fairseq_stream.ops.backends` runs them): the state's tensors
(``JACOBI_STEP.fields``, contiguous) are updated in place; the C++ operator compacts them (the
sentences that go on first, the finished ones after), the runner does it after the others. The
result: the packet the host reads once (:data:`fairseq_stream.ops.packets.JACOBI_STEP`), the
new draft ``(S, b − 1)`` and the next feed ``(S, B)`` (both in the state's order), and ``aux``
(2, S): the tokens accepted per row in the order before compaction (the decoder cache keeps
them), then that order. On CUDA two Triton kernels do the same
(:mod:`fairseq_stream.ops.triton_jacobi_step`).

Inert sentences (a static step's region runs the iteration over a bucket state of a row bucket's size,
``search/jacobi.py``): a sentence with ``max_len`` −2 and window 1 is done at once in every backend,
with one accepted token and no effect on the next width or the shortest row; the compaction puts it
after the live sentences that finished (a stable order), and the host subtracts the inert ones.
"""
from __future__ import annotations

from typing import List, NamedTuple, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import backends, packets

FIELDS: Tuple[str, ...] = backends.JACOBI_STEP.fields


class IterationResult(NamedTuple):
    packet: Tensor  # float64, packets.JACOBI_STEP
    draft: Tensor  # (S, b - 1)
    feed: Tensor  # (S, B)
    aux: Tensor  # (2, S): accepted tokens per row (old order), old position of each compacted sentence
    compacted: bool = True  # the state is in the packet's order (the CPU operator)


def fits(state_tensors: Sequence[Tensor], score: Tensor) -> bool:
    """Whether the fused backends take this state (contiguous, float scores)."""
    return score.dtype in (torch.float32, torch.float64) and all(t.is_contiguous() for t in state_tensors)


def cpp_iteration(state_tensors: List[Tensor], pred: Tensor, score: Tensor, feed: Tensor, *, eos: int, pad: int,
                  bos: int, block: int, init_pad: bool, tail: bool, max_parallel: int, feed_width: int) -> IterationResult:
    """One iteration by the C++ operator (``block``/``max_parallel`` −1: none)."""
    config = [eos, pad, bos, block, int(init_pad), int(tail), max_parallel, feed_width]
    out = torch.ops.fairseq_stream.jacobi_step(pred.contiguous(), score.contiguous(), feed.contiguous(),
                                               state_tensors, config, packets.JACOBI_STEP.starts(pred.size(0)))
    return IterationResult(*out)
