"""The fused step of the IBDecoder family's multi-word beam search, as one operator.

:class:`~fairseq_stream.search.ib_beam.IBBeamSearch` describes a step (Zhang2020,
Algorithm 1, lines 8–27) in ~130 PyTorch operations; ``torch.ops.fairseq_stream.ib_step``
(``csrc/ib_step.cpp``) runs it as one, with the same arithmetic, so its outputs are
bit-identical to the PyTorch reference (``tests/unit/test_step_backends.py``).

Contract: the final hypotheses go into the state's ``fin_*`` buffers in place (as the
reference's); the rest of the new state is new tensors of the same shapes (a slot's history has a
fixed width: its sentence's ``steps`` words, then PAD with score 0; the step writes the ``z`` new
words after them; the host adds ``z`` to ``steps``). The operator returns, in order: the packet
the host reads once (:data:`fairseq_stream.ops.packets.IB_STEP`), the new ``scores``, ``tokens``,
``token_scores``, ``seg_done`` and ``n_final``, ``done`` (S,), and the next rows, ``S·B`` of them:
parent row, the ``z`` words to feed, place among the sentence's rows, flat slot numbered without
the finished sentences (−1 past the live rows). A row whose slot is −1 is a padding row (a static
step's): no row of any sentence. So a step's shapes follow the group's size only. The state is not
compacted: the host drops the finished sentences after its read, in the rare steps that have any.
"""
from __future__ import annotations

from typing import List, NamedTuple, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import backends, packets

FIELDS: Tuple[str, ...] = backends.IB_STEP.fields


class IBStepResult(NamedTuple):
    packet: Tensor  # float64, packets.IB_STEP: rows, finished sentences, widest beam
    scores: Tensor  # (S, B)
    tokens: Tensor  # (S, B, L)
    token_scores: Tensor  # (S, B, L)
    seg_done: Tensor  # (S, B, G)
    n_final: Tensor  # (S,)
    done: Tensor  # (S,) bool
    parents: Tensor  # (S·B,) parent row of each next row (the first ``rows`` count)
    feed: Tensor  # (S·B, z)
    slot: Tensor  # (S·B,) place among the sentence's rows
    row_slot: Tensor  # (S·B,) flat slot s·B + j, s counted without the finished sentences; −1 past the rows


def fits(state_tensors: Sequence[Tensor], vals: Tensor) -> bool:
    """Whether the fused backend takes this step: contiguous, float32/float64 scores of the
    candidates' dtype (else the reference runs)."""
    return (vals.dtype in (torch.float32, torch.float64) and vals.dtype == state_tensors[0].dtype
            and all(t.is_contiguous() for t in state_tensors))


def cpp_step(state_tensors: List[Tensor], vals: Tensor, toks: Tensor, row_slot: Tensor, slot_segment: Tensor, *,
             beam: int, eos: int, pad: int, finalize_top: bool) -> IBStepResult:
    """One step by the operator from each row's slot candidates ``vals``/``toks`` (R, z, Bc)."""
    out = torch.ops.fairseq_stream.ib_step(vals.contiguous(), toks.contiguous(), row_slot.contiguous(), state_tensors,
                                           slot_segment, [beam, eos, pad, int(finalize_top)],
                                           packets.IB_STEP.starts(state_tensors[0].size(0)))
    return IBStepResult(*out)
