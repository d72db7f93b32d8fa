"""The fused beam step: a whole beam-search step of a group as one operator (one host read per step: docs/architecture.md).

:class:`~fairseq_stream.search.beam.BeamSearch` describes a step (Yang2020 Algorithm 1,
lines 14–17; App. A.1; Freitag2017 §3) in PyTorch operations: ~150 of them per step, each a
kernel launch on a GPU and a dispatch on a CPU, for a few hundred numbers. This module runs
the same step as **one** operator, ``torch.ops.fairseq_stream.beam_step`` (C++,
``csrc/beam_step.cpp``), with the same arithmetic in the same dtype, so its outputs are
bit-identical to the PyTorch reference (``tests/unit/test_step_backends.py`` checks every field
after random and hand-built steps, and the equivalence suite runs on it).

The contract, shared by every backend (:mod:`fairseq_stream.ops.backends` runs them):

* the state's tensors (``BEAM_STEP.fields``, each ``(S, ...)`` and contiguous) are updated in
  place; the C++ operator also **compacts** them (the sentences that go on first, in order, the
  finished ones after; ``compacted=True``), the runner does it after the other backends;
* ``packet`` (float64) is what the host reads, once, laid out by
  :data:`fairseq_stream.ops.packets.BEAM_STEP`;
* ``rows`` (5, S·k) int64: per new decoder row (the first ``rows`` columns) its parent row,
  the token to feed, its place among its sentence's rows, its sentence (compacted index) and
  its flat slot ``s·k + j`` (−1 in the columns past the new rows);
* **padding**, for a step whose shapes are fixed per bucket (``BeamSearch``'s sentence buckets): a row
  whose ``row_slot`` is −1 is no row (its candidates are not read); a sentence with no candidate (every
  score −inf, none ended) ends with no hypothesis and no row, its final buffers untouched.

The operator covers the built-in rules (ap, rp, rpl under any reference and ``--prune-ended``),
per-sentence rungs (each sentence's own δ and M: ``--prune-auto``'s probes, :func:`with_rungs`)
and both finalisation rules on contiguous tensors of one float dtype; on CUDA the same step
runs as two Triton kernels (:mod:`fairseq_stream.ops.triton_beam_step`); anything else (a rule
from ``--prune-rules`` of a user's) runs the reference.
"""
from __future__ import annotations

import math
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops import backends, packets
from fairseq_stream.ops.pruning import (
    AbsoluteThreshold, RelativeLocalThreshold, RelativeThreshold, RungThreshold, SurprisalScaledThreshold,
)

FIELDS: Tuple[str, ...] = backends.BEAM_STEP.fields
_FLOAT_FIELDS = ("scores", "token_scores", "best_final", "best_final_norm", "fin_scores", "fin_total")
_REFERENCES = {"final": 0, "active": 1, "normalized": 2}


class StepResult(NamedTuple):
    packet: Tensor  # float64, packets.BEAM_STEP: what the host reads
    rows: Tensor  # (5, S·k) int64: parents, feed, slot, local, row_slot of the new rows
    compacted: bool  # the state's sentences are already in the packet's order


def encode_rules(rules: Sequence[Any]) -> Optional[Tuple[List[int], List[float]]]:
    """The kernels' form of the pruning rules, or None when one of them is not built in."""
    ints: List[int] = []
    params: List[float] = []
    for rule in rules:
        if type(rule) is AbsoluteThreshold and rule.final_per_token and rule.reference == "normalized":
            # the C++ operator only (backends.BEAM_STEP.lacks): ap with β a token against the best final
            ints += [4, _REFERENCES[rule.reference], int(rule.ended == "keep")]
            params += [rule.delta, rule.final_per_token]
        elif type(rule) in (AbsoluteThreshold, RelativeThreshold):
            margin = rule.delta if type(rule) is AbsoluteThreshold else -math.log(rule.rp)  # rp is δ = −ln rp
            ints += [0, _REFERENCES[rule.reference], int(rule.ended == "keep")]
            params.append(margin)
        elif type(rule) is SurprisalScaledThreshold and rule.final_per_token:
            return None  # α with β: no kernel has it, the reference step runs it
        elif type(rule) is SurprisalScaledThreshold:  # the C++ operator only (backends.BEAM_STEP.lacks)
            ints += [2, _REFERENCES[rule.reference], int(rule.ended == "keep")]
            params += [rule.alpha, rule.floor]
        elif type(rule) is RungThreshold:  # the C++ operator only: its δ is each sentence's rung's (with_rungs)
            ints += [3, _REFERENCES[rule.reference], int(rule.ended == "keep")]
            params.append(0.0)
        elif type(rule) is RelativeLocalThreshold:
            ints += [1, 0, 0]
            params.append(math.log(rule.rpl))
        else:
            return None
    return ints, params


def with_rungs(rules: Optional[Tuple[List[int], List[float]]], table: Sequence[Tuple[float, float]]) -> Optional[Tuple[Any, ...]]:
    """``rules`` with the per-sentence rungs' table, (δ, M) per rung (inf = none): the operator reads each
    sentence's rung from a last state tensor (``BeamState.rung``) and its δ and M from the table."""
    if rules is None:
        return None
    return rules[0], rules[1], [float(v) for pair in table for v in pair]


def fits(state_tensors: Sequence[Tensor], top_lp: Tensor) -> bool:
    """Whether the state is one the fused backends take: contiguous, one float dtype."""
    if top_lp.dtype not in (torch.float32, torch.float64):
        return False
    for name, t in zip(FIELDS, state_tensors):
        if not t.is_contiguous() or (name in _FLOAT_FIELDS and t.dtype != top_lp.dtype):
            return False
    return True


def cpp_step(state_tensors: List[Tensor], top_lp: Tensor, top_tok: Tensor, row_slot: Tensor, len_pow: Tensor,
             *, k: int, width: int, final_count: int, eos: int, pad: int, finalize: int, track_best: bool,
             rules: Tuple[Any, ...]) -> StepResult:
    """One step by the C++ operator (``csrc/beam_step.cpp``; the contract above)."""
    config, params, packet_at = cpp_operands(state_tensors, k=k, width=width, final_count=final_count, eos=eos, pad=pad,
                                             finalize=finalize, track_best=track_best, rules=rules)
    packet, rows = torch.ops.fairseq_stream.beam_step(
        top_lp.contiguous(), top_tok.contiguous(), row_slot.contiguous(), state_tensors, len_pow, config, params,
        packet_at)
    return StepResult(packet, rows, True)


def cpp_operands(state_tensors: List[Tensor], *, k: int, width: int, final_count: int, eos: int, pad: int, finalize: int,
                 track_best: bool, rules: Tuple[Any, ...]) -> Tuple[List[int], List[float], List[int]]:
    """The C++ operator's ``config``, ``params`` and ``packet_at`` (its packet's field offsets) for
    :func:`cpp_step`'s options (also the native search's, ``searched_beam_step`` in ``csrc/decoder_step.cpp``)."""
    ints, params = rules[0], list(rules[1])
    config = [k, width, final_count, eos, pad, finalize, int(track_best), len(ints) // 3] + list(ints)
    if len(rules) > 2:  # per-sentence rungs: the table's size after the rules, its pairs after their params
        config, params = config + [len(rules[2]) // 2], params + list(rules[2])
    return config, params, packets.BEAM_STEP.starts(state_tensors[0].numel(), final_count)
