"""Per-step score edits, composable, in fairseq's order (fairseq's rules for every strategy).

Each edit works on two representations of a step's scores:

* ``full(lprobs, ctx)`` — the whole ``(R, V)`` log-probability rows (fairseq's way);
* ``candidates(cand, ctx)`` — a row's best few candidates only (the fused output layer of
  Hoang2018 §3.1, :mod:`fairseq_stream.search.output`). ``extra`` says how many candidates
  the edit may knock out of a row's top, so the fused path fetches that many more. An edit
  whose ``candidates`` is ``None`` needs the full row (n-gram blocking); the fused path then
  falls back to the full one.

Every edit also declares which tokens it can *raise* (``raises``): the fused path takes each row's
top candidates on the raw scores, so a token an edit raises (a negative ``--unkpen`` is a bonus for
``<unk>``) could be missing from that window. ``raises = ()``: the edit only lowers scores (or
puts in the tokens it needs itself); a tuple of token ids: those tokens join every row's window;
``None``: any token may rise, and the run uses the full output layer. :class:`ScoreEdit` is the
protocol every edit follows.

:func:`build_processors` turns fairseq's generation options into the list, so ``--unkpen``,
``--min-len``, ``--max-len-a/b`` and ``--no-repeat-ngram-size`` mean for our strategies what
they mean for fairseq's beam search. One deliberate difference: the maximum length
``a·|x| + b`` uses each sentence's own source length |x| (fairseq uses the padded width of
the batch), so a sentence's output does not depend on which sentences share its batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

import torch
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


@runtime_checkable
class ScoreEdit(Protocol):
    """What every score edit declares (module docstring): the two representations it edits and
    what the fused path must know of it. ``candidates`` is ``None`` for an edit that needs full rows."""

    #: how many candidates the edit may knock out of a row's top (the fused path fetches that many more)
    extra: int
    #: the tokens it may raise: ``()`` none, a tuple of ids, ``None`` any (the full layer is used then)
    raises: Optional[Tuple[int, ...]]
    candidates: Optional[Callable[[Candidates, RowContext], Candidates]]

    def full(self, lprobs: Tensor, ctx: RowContext) -> Tensor:
        """``(R, V)`` log-probabilities → the same, edited."""
        ...


def apply_full(procs: Sequence[ScoreEdit], lprobs: Tensor, ctx: RowContext) -> Tensor:
    for proc in procs:
        lprobs = proc.full(lprobs, ctx)
    return lprobs


class NeverPad:
    extra = 1
    raises: Optional[tuple] = ()

    def __init__(self, pad: int) -> None:
        self.pad = pad

    def full(self, lprobs: Tensor, ctx: RowContext) -> Tensor:
        lprobs[:, self.pad] = -math.inf
        return lprobs

    def candidates(self, cand: Candidates, ctx: RowContext) -> Candidates:
        cand.scores.masked_fill_(cand.tokens == self.pad, -math.inf)
        return cand


class UnkPenalty:
    """``--unkpen``: subtracted from ``<unk>``'s score; ``inf`` bans ``<unk>``, as in fairseq."""

    extra = 1
    raises: Optional[tuple]

    def __init__(self, unk: int, penalty: float) -> None:
        self.unk, self.penalty = unk, penalty
        self.raises: Optional[tuple] = (unk,) if penalty < 0 else ()  # a negative penalty is a bonus

    def full(self, lprobs: Tensor, ctx: RowContext) -> Tensor:
        lprobs[:, self.unk] -= self.penalty
        return lprobs

    def candidates(self, cand: Candidates, ctx: RowContext) -> Candidates:
        # Filled, not multiplied: (tokens == unk) * inf would be 0 * inf = NaN for every other token.
        penalty = torch.zeros_like(cand.scores).masked_fill_(cand.tokens == self.unk, self.penalty)  # (R, c)
        cand.scores.sub_(penalty)
        return cand


class ForceEosAtMaxLen:
    """At the maximum length only EOS may follow, with the probability the model gives it."""

    extra = 0
    raises: Optional[tuple] = ()  # EOS is put in from the raw scores, not looked for in the window

    def __init__(self, eos: int) -> None:
        self.eos = eos

    def full(self, lprobs: Tensor, ctx: RowContext) -> Tensor:
        if not ctx.may_reach_max:
            return lprobs
        at_max = ctx.steps >= ctx.max_len  # (R,)
        eos_scores = lprobs[:, self.eos].clone()
        lprobs = lprobs.masked_fill(at_max.unsqueeze(1), -math.inf)
        lprobs[:, self.eos] = torch.where(at_max, eos_scores, lprobs[:, self.eos])
        return lprobs

    def candidates(self, cand: Candidates, ctx: RowContext) -> Candidates:
        if not ctx.may_reach_max:
            return cand
        # Branch-free (no host read): rows at the maximum keep one candidate, EOS.
        at_max = (ctx.steps >= ctx.max_len).unsqueeze(1)  # (R, 1)
        first = torch.arange(cand.scores.size(1), device=cand.scores.device) == 0  # (c,)
        eos = cand.logits[:, self.eos] if cand.lse is None else cand.logits[:, self.eos] - cand.lse
        scores = cand.scores.masked_fill(at_max, -math.inf)
        cand.scores = torch.where(at_max & first, eos.to(scores.dtype).unsqueeze(1), scores)
        cand.tokens = cand.tokens.masked_fill(at_max & first, self.eos)
        return cand


class MinLength:
    extra = 1
    raises: Optional[tuple] = ()

    def __init__(self, eos: int, min_len: int) -> None:
        self.eos, self.min_len = eos, min_len

    def full(self, lprobs: Tensor, ctx: RowContext) -> Tensor:
        if ctx.min_steps >= self.min_len:
            return lprobs
        lprobs[:, self.eos] = lprobs[:, self.eos].masked_fill(ctx.steps < self.min_len, -math.inf)
        return lprobs

    def candidates(self, cand: Candidates, ctx: RowContext) -> Candidates:
        if ctx.min_steps >= self.min_len:
            return cand
        banned = (cand.tokens == self.eos) & (ctx.steps < self.min_len).unsqueeze(1)
        cand.scores.masked_fill_(banned, -math.inf)
        return cand


class NoRepeatNgram:
    """Ban tokens that would repeat an n-gram of the row's history (fairseq's NGramRepeatBlock).

    The history starts with BOS, which is EOS: a blocker can ban EOS itself (``n = 1`` always
    does). At its maximum length a row may only end, so there the forced EOS is not banned: the
    sentence ends with its best hypothesis instead of none (fairseq's blocker leaves the row no
    candidate at all). Each such row is counted (``eos_forced_despite_blocking``)."""

    extra = 0
    raises: Optional[tuple] = ()
    candidates = None  # the banned set is arbitrary: needs the full row
    STAT = "eos_forced_despite_blocking"  # hypothesis rows

    def __init__(self, n: int, eos: Optional[int] = None) -> None:
        self.n, self.eos = n, eos
        self.stats: Any = None  # the run's DecodeStats, bound by the engine

    def bind_stats(self, stats: Any) -> None:
        self.stats = stats

    def full(self, lprobs: Tensor, ctx: RowContext) -> Tensor:
        n = self.n
        at_max = (ctx.steps >= ctx.max_len).tolist() if ctx.may_reach_max and self.eos is not None else None
        for r, tokens in enumerate(ctx.history.tolist()):
            if len(tokens) + 1 < n:
                continue
            prefix = tuple(tokens[len(tokens) - n + 1:]) if n > 1 else ()
            banned = [tokens[i + n - 1] for i in range(len(tokens) - n + 1) if tuple(tokens[i: i + n - 1]) == prefix]
            if at_max is not None and at_max[r] and self.eos in banned:
                banned = [t for t in banned if t != self.eos]  # the forced end stays possible
                if self.stats is not None:
                    self.stats.add_extra(self.STAT)
            if banned:
                lprobs[r, banned] = -math.inf
        return lprobs


def build_processors(gen_cfg: Any, tgt_dict: Any) -> List[ScoreEdit]:
    """fairseq's generation options → the edits, in fairseq's order."""
    procs: List[ScoreEdit] = [NeverPad(tgt_dict.pad())]
    if gen_cfg.unkpen:
        procs.append(UnkPenalty(tgt_dict.unk(), float(gen_cfg.unkpen)))
    procs.append(ForceEosAtMaxLen(tgt_dict.eos()))
    if gen_cfg.min_len and gen_cfg.min_len > 0:
        procs.append(MinLength(tgt_dict.eos(), int(gen_cfg.min_len)))
    if gen_cfg.no_repeat_ngram_size and gen_cfg.no_repeat_ngram_size > 0:
        procs.append(NoRepeatNgram(int(gen_cfg.no_repeat_ngram_size), tgt_dict.eos()))
    return procs


def needs_history(procs: Sequence[ScoreEdit]) -> bool:
    return any(isinstance(p, NoRepeatNgram) for p in procs)


def max_lengths(src_lengths: Tensor, gen_cfg: Any, max_positions: int) -> Tensor:
    """Per-sentence maximum target length ``min(a·|x| + b, max_positions − 1)`` (fairseq's rule).

    The minimum is taken in float64, before the cast: ``--max-len-a 1e19`` or ``--max-len-b``
    near 2**63 would overflow int64 and wrap to a negative length."""
    limit = float(gen_cfg.max_len_a) * src_lengths.double() + float(gen_cfg.max_len_b)
    return limit.clamp(max=max_positions - 1).long()
