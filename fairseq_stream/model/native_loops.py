"""What the native loops of the scheduler's "ahead" hook take and give (``ops/csrc/decoder_step.cpp``): a strategy
describes the steps a loop may run for it (:class:`GreedySearch`: the greedy beam's; :class:`BeamLoopSearch`: a wider
beam's, of a lone group; :class:`VerifySearch`: one sentence's Jacobi iterations, with lookahead's pool or speculative
decoding's draft), :class:`ModelStep`
(``model/model_step.py``) runs them through its decoder (``model/block_decoder.py``), and :class:`VerifyRun` says
what a verification loop did. The model does not look inside beyond passing them on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from torch import Tensor


@dataclass(frozen=True)
class NativeOutput:
    """The output layer's constants of a native loop that searches its steps itself (``best_of_window`` of
    ``ops/csrc/decoder_step.cpp``, as :meth:`~fairseq_stream.search.output.OutputScorer.top` runs the fused layer):
    ``candidates`` c of a ``window`` of the fused top-k; fairseq's edits: ``unk`` < 0 for no ``--unkpen``,
    ``min_len`` 0 for no ``--min-len`` (:meth:`~fairseq_stream.search.output.OutputScorer.native_output`)."""

    candidates: int
    window: int
    eos: int
    pad: int
    unk: int = -1
    unk_penalty: float = 0.0
    min_len: int = 0

    def operands(self) -> Tuple[int, int, int, int, int, float, int]:
        """As the native operators take them."""
        return self.candidates, self.window, self.eos, self.pad, self.unk, self.unk_penalty, self.min_len


@dataclass
class GreedySearch:
    """What the native greedy loop (``ModelStep.beam_search``) needs of the greedy beam (k = 1) to search its
    steps itself: the state it updates in place — ``scores`` (R, 1), ``tokens``/``token_scores`` (R, 1, L),
    ``steps`` (R,), row r being sentence r's one slot — each row's ``max_len``, and the output layer's constants.
    Built by the strategy (``BeamSearch.native_search``); the model does not look inside beyond passing it on."""

    scores: Tensor
    tokens: Tensor
    token_scores: Tensor
    steps: Tensor
    max_len: Tensor
    calls: int  # the most decoder calls of one loop
    output: NativeOutput


@dataclass
class BeamLoopRun:
    """What a native beam loop did: the rows' slots at its last call, each of those rows' ancestor among its first
    call's rows (``lineage``), the rows of each call (a pruned beam's width changes from step to step), each
    reordered step's packet (``step_packets``: ``ops/packets.py``'s BEAM_STEP) and, where it searched the last
    call's step too, the step's ``(packet, rows)`` as the beam operator returned them (a sentence finished, or the
    arena must grow for the reorder, which is then left to the caller)."""

    row_slot: Tensor
    lineage: Tensor
    rows: List[int]
    step_packets: List[Tensor]
    searched: Optional[Tuple[Tensor, Tensor]] = None


@dataclass
class BeamLoopSearch:
    """What the native beam loop (``ModelStep.beam_search``: ``decoder_beam_search``) needs of the beams (k > 1) of a
    group to search their steps itself: the beam operator's state tensors it updates in place (``state``, in
    ``BEAM_STEP.fields`` order), the rows' slots, the length penalties and the operator's constants (``config``,
    ``params``, ``packet_at``: ``ops/beam_step.py``'s ``cpp_operands``), k, the group's fewest steps (``--min-len``),
    the output layer's constants and the most calls (none reaching a maximum length). Built by the strategy
    (``BeamSearch.native_search``); the model fills :attr:`ran`."""

    state: List[Tensor]
    row_slot: Tensor
    len_pow: Tensor
    config: List[int]
    params: List[float]
    packet_at: List[int]
    k: int
    t_min: int
    calls: int
    output: NativeOutput
    ran: Optional[BeamLoopRun] = None


@dataclass
class DraftSearch:
    """Speculative decoding's draft in a native verification loop: its :class:`ModelStep` (native too), encoder
    slots and :class:`DecoderState` (the verified prefix and the ``gamma − 1`` proposals fed), and γ."""

    model: Any  # ModelStep (this module sits below model_step.py)
    memory: Any  # EncoderSlots
    state: Any  # DecoderState
    gamma: int


@dataclass
class VerifySearch:
    """What a native verification loop (``ModelStep.verify``) needs to do one sentence's Jacobi iterations
    itself (Santilli2023 Proposition 1): the verifier's tokens and their scores (1, T), updated in place from column
    ``verified``; the sentence's ``max_len``; the windows (``block`` > 0, sliding with the prefix when ``tail``,
    else aligned with PAD guesses at a fresh block when ``init_pad``; sequential from ``max_parallel``, -1 never);
    the output layer's constants (one candidate); and whose guesses it verifies: Jacobi's own, lookahead's n-gram
    ``pool`` (with a prior's ``bigrams``), or speculative decoding's ``draft``. Built by the strategy
    (``native_search``); the model fills :attr:`ran` with what the loop did."""

    tokens: Tensor
    token_scores: Tensor
    verified: int
    max_len: int
    calls: int  # the most decoder calls of one loop
    output: NativeOutput
    block: int
    tail: bool
    init_pad: bool
    max_parallel: int = -1
    pool: Optional[Tensor] = None
    bigrams: Optional[Tuple[Tensor, Tensor, int]] = None
    bos: int = 0
    draft: Optional[DraftSearch] = None
    ran: Optional["VerifyRun"] = None


@dataclass
class VerifyRun:
    """What a native verification loop did before its last call (whose scores it returns unsearched): the tokens
    each iteration accepted, the last call's feed (1, b), the Jacobi draft after the last iteration it did, the
    verified tokens now; the seconds of the loop; with a draft, its state and the seconds of the draft's calls."""

    accepted: List[int]
    feed: Tensor
    jacobi_draft: Tensor
    verified: int
    draft_state: Optional[Any] = None  # DecoderState
    seconds: float = 0.0
    draft_seconds: float = 0.0
