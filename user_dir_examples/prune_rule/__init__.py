"""A user-defined pruning rule for the var-* beams, loaded with ``--user-dir``.

``max-width:N`` keeps at most ``N`` candidates of each sentence on the beam after a step (a
hard cap under the variable width that ap/rp/rpl leave), applied after the built-in rules::

    fairseq-generate DATA --user-dir user_dir_examples/prune_rule --path ckpt.pt \\
        --search var-stream --beam 10 --prune-rules max-width:3

fairseq takes one ``--user-dir``; this one imports fairseq-stream itself, so every
``--search`` name and option of the package is there too. A rule is an object with
``prune(view, keep) -> keep``: ``view`` (:class:`fairseq_stream.ops.pruning.StepView`)
holds the step's sorted candidates ``(S, W)``; ``keep`` is the mask of those still on the
beam. Work on tensors only: a rule that reads the device (``.item()``) stalls every step.
"""
from dataclasses import dataclass

import torch

import fairseq_stream  # noqa: F401  (registers the package's strategies, task and options)
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops.pruning import StepView
from fairseq_stream.search.beam_rules import register_pruning_rule


@dataclass(frozen=True)
class MaxWidth:
    width: int

    def prune(self, view: StepView, keep: torch.Tensor) -> torch.Tensor:
        # Candidates are sorted best first: keep the first ``width`` that are still kept.
        return keep & (torch.cumsum(keep.long(), dim=1) <= self.width)


@register_pruning_rule("max-width")
def max_width(arg, defaults):
    if arg is None or not arg.isdigit() or int(arg) < 1:
        raise FairseqStreamError(f"--prune-rules max-width:N needs a whole number N >= 1, got {arg!r}")
    return MaxWidth(int(arg))
