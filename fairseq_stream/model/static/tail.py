"""What a strategy runs inside a static step's region (:class:`RegionTail`), what it returned (:class:`RegionOutput`)
and what the strategy's step is given (:class:`StepScores`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, NamedTuple, Optional, Protocol, Tuple

import torch
from torch import Tensor


class RegionTail(Protocol):
    """What a strategy runs inside a static step's region after the decoder, so that a CUDA graph
    replays it with the step: a function of the step's ``(N, V)`` scores (N = row bucket × block
    width; the model's logits, half precision read in float32) and of per-row inputs, whose
    operations follow the shapes only (no host read, no branch on a value). The output layer after
    the product is one (``search/output.TopTail``).
    """

    #: what fixes its operations besides the shapes: the step's buffers and graphs are keyed by it
    key: Tuple[Any, ...]
    #: the live rows' inputs, each ``(n, ...)`` with n = live rows × block width; the step copies them
    #: into buffers of N rows (the padding rows keep stale, finite values: they are never read back)
    inputs: Tuple[Tensor, ...]

    def outputs(self, vocab: int, dtype: torch.dtype) -> List[Tuple[Tuple[int, ...], torch.dtype]]:
        """Each returned tensor's shape past the row dimension and dtype, for scores of ``dtype``."""
        ...

    def __call__(self, scores: Tensor, *inputs: Tensor) -> Tuple[Tensor, ...]:
        ...

    #: optional (None: the inputs are given at every step): ``follow(*parents_inputs)`` → the inputs of rows that
    #: are the last step's rows reordered, from their parents' inputs at that step, in tensor operations only;
    #: the static step then gathers them inside its region (``inputs`` is not read)
    follow: "Optional[Callable[..., Tuple[Tensor, ...]]]"

    #: optional (None: the strategy runs its search step after the region): ``search(outputs)``, run in the region
    #: after this tail with its outputs over every row of the row bucket, in tensor operations on buffers its
    #: ``search.key`` names by address and ``search.tensors`` holds; ``search.fits(rows)`` says whether it can take
    #: a bucket of ``rows`` rows (``search/region.RegionSearch``); the step's ``RegionOutput.searched`` says
    #: it ran
    search: Any


class RegionOutput(NamedTuple):
    """What a step's region tail returned for the live rows (views of its outputs over the row bucket, whose
    padding rows' values are stale), and whether the tail's search step ran in the region too."""

    top: Tuple[Tensor, ...]
    searched: bool


@dataclass
class StepScores:
    """What a decoder step computed for a strategy's step (a strategy with the ``"region"`` hook is given this).

    ``scores`` (R, b, V): the rows' next-token scores (log-probabilities, or the raw logits the fused output
    layer normalises). ``top``: what the strategy's region tail returned for the live rows (views of its outputs
    over the row bucket), or None where the step did not run the tail (the strategy runs its output layer
    itself). ``searched``: the tail's search step ran in the region too (its packet waits in the strategy's
    bucket buffers; ``top`` holds the output layer's results it searched)."""

    scores: Tensor
    top: Optional[Tuple[Tensor, ...]] = None
    searched: bool = False

    @staticmethod
    def of(scores: "Tensor | StepScores") -> "StepScores":
        """``scores`` as a :class:`StepScores` (a tensor: the scores alone, as a direct caller gives them)."""
        return scores if isinstance(scores, StepScores) else StepScores(scores)
