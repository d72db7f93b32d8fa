"""Per-step score edits as composable callables (fairseq's rules, applied in fairseq's order).

Each processor takes the log-probabilities of the rows just decoded, ``(R, V)``, and a
:class:`RowContext`, and returns the edited scores. :func:`build_processors` turns fairseq's
generation options into the list, so ``--unkpen``, ``--min-len``, ``--max-len-a/b`` and
``--no-repeat-ngram-size`` mean for our strategies what they mean for fairseq's beam search.
One deliberate difference: the maximum length ``a·|x| + b`` uses each sentence's own source
length |x| (fairseq uses the padded width of the batch), so a sentence's output does not
depend on which sentences share its batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from torch import Tensor


@dataclass
class RowContext:
    steps: Tensor  # (R,) tokens generated so far by each row (fairseq's ``step``)
    max_len: Tensor  # (R,) maximum generated tokens before EOS is forced
    history: Optional[Tensor] = None  # (R, 1 + steps) fed tokens, BOS first (n-gram blocking)


ScoreProcessor = Callable[[Tensor, RowContext], Tensor]


def never_pad(pad: int) -> ScoreProcessor:
    def apply(lprobs: Tensor, ctx: RowContext) -> Tensor:
        lprobs[:, pad] = -math.inf
        return lprobs

    return apply


def unk_penalty(unk: int, penalty: float) -> ScoreProcessor:
    def apply(lprobs: Tensor, ctx: RowContext) -> Tensor:
        lprobs[:, unk] -= penalty
        return lprobs

    return apply


def force_eos_at_max_len(eos: int) -> ScoreProcessor:
    def apply(lprobs: Tensor, ctx: RowContext) -> Tensor:
        at_max = ctx.steps >= ctx.max_len
        if bool(at_max.any()):
            eos_scores = lprobs[at_max, eos].clone()
            lprobs[at_max] = -math.inf
            lprobs[at_max, eos] = eos_scores
        return lprobs

    return apply


def min_length(eos: int, min_len: int) -> ScoreProcessor:
    def apply(lprobs: Tensor, ctx: RowContext) -> Tensor:
        lprobs[ctx.steps < min_len, eos] = -math.inf
        return lprobs

    return apply


def no_repeat_ngram(n: int) -> ScoreProcessor:
    """Ban tokens that would repeat an n-gram of the row's history (fairseq's NGramRepeatBlock)."""

    def apply(lprobs: Tensor, ctx: RowContext) -> Tensor:
        assert ctx.history is not None, "n-gram blocking needs the token history"
        for r, tokens in enumerate(ctx.history.tolist()):
            if len(tokens) + 1 < n:
                continue
            prefix = tuple(tokens[len(tokens) - n + 1:]) if n > 1 else ()
            banned = [
                tokens[i + n - 1]
                for i in range(len(tokens) - n + 1)
                if tuple(tokens[i: i + n - 1]) == prefix
            ]
            if banned:
                lprobs[r, banned] = -math.inf
        return lprobs

    return apply


def build_processors(gen_cfg: Any, tgt_dict: Any) -> Tuple[List[ScoreProcessor], bool]:
    """fairseq's generation options → (processors in fairseq's order, whether history is needed)."""
    procs: List[ScoreProcessor] = [never_pad(tgt_dict.pad())]
    if gen_cfg.unkpen:
        procs.append(unk_penalty(tgt_dict.unk(), float(gen_cfg.unkpen)))
    procs.append(force_eos_at_max_len(tgt_dict.eos()))
    if gen_cfg.min_len and gen_cfg.min_len > 0:
        procs.append(min_length(tgt_dict.eos(), int(gen_cfg.min_len)))
    needs_history = bool(gen_cfg.no_repeat_ngram_size and gen_cfg.no_repeat_ngram_size > 0)
    if needs_history:
        procs.append(no_repeat_ngram(int(gen_cfg.no_repeat_ngram_size)))
    return procs, needs_history


def max_lengths(src_lengths: Tensor, gen_cfg: Any, max_positions: int) -> Tensor:
    """Per-sentence maximum target length ``min(a·|x| + b, max_positions − 1)`` (fairseq's rule)."""
    limit = (float(gen_cfg.max_len_a) * src_lengths.double() + float(gen_cfg.max_len_b)).long()
    return limit.clamp(max=max_positions - 1)


def apply_all(procs: List[ScoreProcessor], lprobs: Tensor, ctx: RowContext) -> Tensor:
    for proc in procs:
        lprobs = proc(lprobs, ctx)
    return lprobs

