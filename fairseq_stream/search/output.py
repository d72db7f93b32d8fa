"""The output scorer: a step's raw scores → each row's best candidates after fairseq's score edits.

Hoang2018 §3.1: the fused output layer (:func:`fairseq_stream.ops.fused_output.topk_with_normaliser`)
finds each row's best tokens on the raw scores and normalises only those; fairseq's score edits
(pad, unknown-word penalty, min/max length: :mod:`fairseq_stream.search.score_edits`) then act on
the candidates. An edit that needs the whole row (n-gram blocking), one that may raise any
token, or an ensemble (whose average of probabilities needs every row in full) falls back to the
full log-softmax, logged once.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from fairseq_stream.ops.extension import log_once
from fairseq_stream.model.native_loops import NativeOutput
from fairseq_stream.ops import fused_output
from fairseq_stream.ops.fused_output import topk_with_normaliser
from fairseq_stream.search.score_edits import (
    Candidates, ForceEosAtMaxLen, MinLength, NeverPad, RowContext, ScoreEdit, UnkPenalty, apply_full,
)

#: the edits a static step runs inside its region: fairseq's own, whose constants are plain numbers
REGION_EDITS = (NeverPad, UnkPenalty, ForceEosAtMaxLen, MinLength)


class OutputScorer:
    """A step's raw scores → each row's best candidates after fairseq's score edits."""

    def __init__(self, processors: List[ScoreEdit], *, fused: bool, normalized_input: bool) -> None:
        self.processors = processors
        self.normalized_input = normalized_input
        blockers = [type(p).__name__ for p in processors if p.candidates is None]
        # An edit that may raise any token (or does not say: not a ScoreEdit) cannot be honoured on a window of candidates.
        raisers = [type(p).__name__ for p in processors if not isinstance(p, ScoreEdit) or p.raises is None]
        self.fused = fused and not blockers and not raisers and not normalized_input
        #: how the output layer runs, for the run's statistics (``None``: the plain fused or full layer)
        self.note: Optional[str] = None
        if fused and not self.fused:
            reason = (f"{', '.join(blockers)} needs full rows" if blockers else
                      f"{', '.join(raisers)} may raise any token's score" if raisers else "an ensemble averages full rows")
            log_once(f"fairseq-stream: fused output layer off ({reason}); using the full log-softmax")
            if raisers and not blockers and not normalized_input:
                self.note = "full:raising-edit"  # the full layer, for an edit that may raise any token
        self.extra = sum(p.extra for p in processors)
        self._signature: Optional[Tuple[Any, ...]] = None
        #: tokens an edit may raise (a negative --unkpen: <unk>): they join every row's window
        self.raised = sorted({t for p in processors if isinstance(p, ScoreEdit) for t in (p.raises or ())})
        if self.fused and self.raised:
            self.note = "fused+raised:" + "/".join(map(str, self.raised))  # the window holds the raised token(s)

    def signature(self) -> Tuple[Any, ...]:
        """What fixes this scorer's operations: its path and every edit's constants (equal signatures,
        the same operations: a step graph captured with one scorer serves the next run's)."""
        if self._signature is None:  # once: a static step asks at every step
            def constants(edit: Any) -> Tuple[Any, ...]:
                return tuple(sorted((k, v) for k, v in vars(edit).items() if isinstance(v, (int, float, str, tuple))))

            self._signature = (self.fused, self.normalized_input, tuple(self.raised),
                               tuple((type(p).__name__, constants(p)) for p in self.processors))
        return self._signature

    def tail(self, k: int, ctx: "Union[RowContext, Callable[[], RowContext]]", *,
             follow: "Optional[Callable[..., Tuple[Tensor, ...]]]" = None) -> "Optional[TopTail]":
        """This layer after the product for ``k`` candidates a row, as a static step runs it inside its
        region (:class:`TopTail`); None where it does not run there: the full layer (an edit that needs
        whole rows reads them on the host), or an edit other than fairseq's own (its constants are not
        known to :meth:`signature`, so a step graph captured with it could not be told from another's).
        ``ctx`` may be given as a function, called only where the step needs the rows' context (a step
        whose rows ``follow`` their parents gathers it in its region instead: :attr:`TopTail.follow`)."""
        if not self.fused or any(type(p) not in REGION_EDITS for p in self.processors):
            return None
        return TopTail(self, k, ctx, follow)

    def native_output(self, k: int, *, eos: int, pad: int) -> Optional[NativeOutput]:
        """The constants a native loop needs to run this layer itself for ``k`` candidates with the same bits (the
        C++ ``best_of_window`` of ``ops/csrc/decoder_step.cpp``); or None where it cannot — an output layer other
        than the fused one on the C++ top-k operator, a score edit other than fairseq's own (``pad``, ``--unkpen``
        >= 0, the maximum and minimum lengths)."""
        if not self.fused or self.raised or self.normalized_input or not fused_output.cpu_topk_native():
            return None
        edits = {type(p): p for p in self.processors}
        if len(edits) != len(self.processors) or not set(edits) <= {NeverPad, UnkPenalty, ForceEosAtMaxLen, MinLength}:
            return None
        pad_edit = edits.get(NeverPad)
        if pad_edit is None or pad_edit.pad != pad or ForceEosAtMaxLen not in edits:
            return None
        unk, min_len = edits.get(UnkPenalty), edits.get(MinLength)
        return NativeOutput(k, k + self.extra, eos, pad, unk=-1 if unk is None else unk.unk,
                            unk_penalty=0.0 if unk is None else unk.penalty, min_len=0 if min_len is None else min_len.min_len)

    def top(self, scores: Tensor, k: int, ctx: RowContext, *, normalize: bool = True) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """(values, tokens, lse) of each row's ``k`` best candidates, best first.

        Values are log-probabilities, or raw logits (same ranking) when ``normalize`` is False
        on the fused path; then ``lse`` is None and :meth:`normaliser` gives it on demand.
        """
        if scores.dtype in (torch.float16, torch.bfloat16) and not (self.fused and scores.is_cuda):
            scores = scores.float()  # on CUDA the fused kernels read half precision as it is (no full copy)
        k = min(k, scores.size(-1))
        if not self.fused:
            lprobs = scores.clone() if self.normalized_input else torch.log_softmax(scores, dim=-1)
            lprobs = apply_full(self.processors, lprobs, ctx)
            values, tokens = lprobs.topk(k, dim=-1)
            return values, tokens, torch.zeros_like(values[:, 0])
        width = min(k + self.extra, scores.size(-1))
        if normalize:
            raw, tokens, lse = topk_with_normaliser(scores, width)
            values = raw - lse.unsqueeze(1)
        else:
            values, tokens = scores.topk(width, dim=-1)
            values, lse = values.float() if values.dtype in (torch.float16, torch.bfloat16) else values, None
        if self.raised and width < scores.size(-1):
            values, tokens = self._with_raised(values, tokens, scores, lse)
        cand = Candidates(values, tokens, scores, lse)
        for proc in self.processors:
            cand = proc.candidates(cand, ctx)
        values, order = cand.scores.topk(k, dim=-1)
        return values, cand.tokens.gather(1, order), (lse if lse is not None else None)

    def _with_raised(self, values: Tensor, tokens: Tensor, scores: Tensor,
                     lse: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """The window plus the tokens an edit may raise (a token already in it: once, the copy at −inf)."""
        key = (tuple(self.raised), scores.device)
        ids = _RAISED_IDS.get(key)
        if ids is None:  # kept for the process: a step graph that read them reads them again
            ids = _RAISED_IDS[key] = torch.tensor(self.raised, device=scores.device)
        raw = scores.index_select(1, ids)
        extra = (raw - lse.unsqueeze(1) if lse is not None else raw).to(values.dtype)
        present = (tokens.unsqueeze(2) == ids.view(1, 1, -1)).any(1)  # (R, m)
        extra = extra.masked_fill(present, float("-inf"))
        return torch.cat([values, extra], 1), torch.cat([tokens, ids.unsqueeze(0).expand(tokens.size(0), -1)], 1)

    def normaliser(self, scores: Tensor) -> Tensor:
        """``logsumexp`` of rows (zero for already-normalised input and on the full path)."""
        if not self.fused:
            return scores.new_zeros(scores.shape[:-1], dtype=torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype)
        return torch.logsumexp(scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores, dim=-1)


#: the raised tokens' ids per (tokens, device), never freed: a captured step reads them by address
_RAISED_IDS: Dict[Tuple[Tuple[int, ...], Any], Tensor] = {}


class TopTail:
    """The output layer after the product — the fused top-k and normaliser (Hoang2018 §3.1), the score
    edits, each row's best ``k`` — as a static step's :class:`~fairseq_stream.model.static.tail.RegionTail`:
    the step runs it inside its region (one CUDA graph replay with the decoder) on every row of its
    bucket and returns the live rows' ``(values, tokens)``, what :meth:`OutputScorer.top` returns.

    The per-row context (tokens generated, maximum length) comes in as the step's inputs; the host's
    bounds that let :meth:`OutputScorer.top` skip an edit that cannot apply yet are left out, so the
    edits always run: they then change nothing (masks with no row set), the same values as skipped.
    """

    def __init__(self, scorer: OutputScorer, k: int, ctx: "Union[RowContext, Callable[[], RowContext]]",
                 follow: "Optional[Callable[..., Tuple[Tensor, ...]]]" = None) -> None:
        self.scorer, self.k = scorer, k
        self.key = ("output-layer", k) + scorer.signature()
        self._ctx = ctx
        self._inputs: Optional[Tuple[Tensor, ...]] = None
        #: ``follow(steps, max_len)`` of a row's parent at the last step → the row's now, in tensor operations
        #: (a beam: one token more, the same maximum), so that a static step whose rows are the last step's
        #: reordered gathers them inside its region; None: the inputs are given at every step
        self.follow = follow
        #: the strategy's search step, run in the region after this layer (RegionTail.search), or None
        self.search: Any = None

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        """The live rows' (tokens generated, maximum length), computed on first use."""
        if self._inputs is None:
            ctx = self._ctx() if callable(self._ctx) else self._ctx
            self._inputs = (ctx.steps, ctx.max_len)
        return self._inputs

    def outputs(self, vocab: int, dtype: torch.dtype) -> List[Tuple[Tuple[int, ...], torch.dtype]]:
        width = min(self.k, vocab)
        return [((width,), dtype), ((width,), torch.long)]

    def __call__(self, scores: Tensor, steps: Tensor, max_len: Tensor) -> Tuple[Tensor, ...]:
        values, tokens, _ = self.scorer.top(scores, self.k, RowContext(steps, max_len))
        return values, tokens
