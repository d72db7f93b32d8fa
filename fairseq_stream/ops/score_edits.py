"""What a per-step score edit works on: the rows' context and their best candidates.

The edits themselves (min length, unk penalty, ...) are in :mod:`fairseq_stream.core.processors`;
these declarations are here, at the bottom layer, because the fused output layer
(:mod:`fairseq_stream.ops.fused_output`) applies the edits and ops imports nothing above it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

from torch import Tensor


@dataclass
class RowContext:
    steps: Tensor  # (R,) tokens generated so far by each row (fairseq's ``step``)
    max_len: Tensor  # (R,) maximum generated tokens before EOS is forced
    history: Optional[Any] = None  # (R, 1 + steps) fed tokens, BOS first (n-gram blocking)
    may_reach_max: bool = True  # host: False when no row can be at its maximum length yet
    min_steps: int = 0  # host: a lower bound of ``steps`` (edits that cannot apply are skipped)


@dataclass
class Candidates:
    """A row's best candidates: scores ``(R, c)`` with token ids, plus the row's raw scores.

    ``scores`` are log-probabilities when ``lse`` is given (``scores = logit − lse``) and raw
    logits otherwise (ranking is the same); ``logits`` (R, V) lets an edit read any token.
    """

    scores: Tensor
    tokens: Tensor
    logits: Tensor
    lse: Optional[Tensor]

    def score_of(self, token: int, rows: Tensor) -> Tensor:
        value = self.logits[rows, token]
        return value - self.lse[rows] if self.lse is not None else value


def apply_full(procs: List[Any], lprobs: Tensor, ctx: RowContext) -> Tensor:
    for proc in procs:
        lprobs = proc.full(lprobs, ctx)
    return lprobs
