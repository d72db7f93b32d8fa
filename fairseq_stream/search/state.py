"""Typed strategy state: one dataclass per strategy, with ``select`` and ``concat`` written once.

A strategy keeps the hypotheses of a group of sentences in a dataclass whose fields say how
they travel when the scheduler drops finished sentences (``select``) or merges groups
(``concat``, VAR-STREAM's merge of equal-length groups, Yang2020 Algorithm 1 line 12):

* :func:`per_sentence` — a device tensor whose dim 0 is the sentence; ``pad`` (``PAD`` = the
  dictionary's pad index) makes ``concat`` widen its last dim to the widest part first;
* :func:`host` — a host-known int bound (``min`` or ``max`` of the parts on ``concat``);
* :func:`rows` — the flat slot ``s·k + j`` of every decoder row: ``concat`` offsets each part
  by the sentences before it, ``select`` leaves it to the caller (the rows change too),
  ``split`` cuts it where the first part's rows end;
* :func:`part` — a value that travels itself (a nested state, a model's decoder caches), or None;
* :func:`transient` — what a step leaves for the next step of the same sentences (the buffers its
  tensors are views of): ``select``, ``split`` and ``concat`` drop it (None).

A state without a :func:`rows` field has one decoder row per sentence.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Sequence, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor

PAD = "pad"  # the dictionary's pad index, known to the strategy, not to the dataclass
S = TypeVar("S", bound="StrategyState")


def per_sentence(pad: Any = None, *, scratch_last: bool = False) -> Any:
    """A (S, ...) device tensor. ``scratch_last``: its last column is scratch, kept last when widened."""
    return dataclasses.field(metadata={"kind": "sentence", "pad": pad, "scratch_last": scratch_last})


def host(merge: Callable[..., int]) -> Any:
    """A host-known int, merged with ``merge`` (``min``/``max``) over the groups on ``concat``."""
    return dataclasses.field(default=0, metadata={"kind": "host", "merge": merge})


def rows() -> Any:
    """(R,) flat slot ``s·k + j`` of every decoder row, in row order."""
    return dataclasses.field(metadata={"kind": "rows"})


def part() -> Any:
    """A value with ``select(idx)``, ``split(sentences, rows, rows_per_sentence)`` and the class method
    ``concat(parts, pad=, rows_per_sentence=)`` of a :class:`StrategyState` (a nested state), or None."""
    return dataclasses.field(metadata={"kind": "part"})


def transient() -> Any:
    """A value for the next step of exactly these sentences, or None; dropped where they change."""
    return dataclasses.field(default=None, metadata={"kind": "transient"})


@dataclasses.dataclass
class StrategyState:
    """Base of the strategies' state dataclasses; subclasses declare a ``sentences`` field first (or
    a ``sentences`` property: a state of parts)."""

    @property
    def size(self) -> int:
        """Sentences in the group (a shape: no host read)."""
        return len(self.sentences)  # type: ignore[attr-defined]

    def select(self: S, idx: Tensor) -> S:
        """Sentences ``idx`` (local indices) of the group; host bounds and rows stay as they are."""
        values = {}
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), _kind(f)
            if kind == "sentence":
                value = value.index_select(0, idx)
            elif kind == "part" and value is not None:
                value = value.select(idx)
            elif kind == "transient":
                value = None
            values[f.name] = value
        return type(self)(**values)

    def split(self: S, sentences: int, rows: int, rows_per_sentence: int) -> "tuple[S, S]":
        """The first ``sentences`` sentences (their first ``rows`` rows) and the rest, as views.

        The parts are disjoint slices, so a strategy's in-place writes to one never reach the other.
        """
        head: Dict[str, Any] = {}
        tail: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), _kind(f)
            if kind == "sentence":
                head[f.name], tail[f.name] = value[:sentences], value[sentences:]
            elif kind == "rows":
                head[f.name], tail[f.name] = value[:rows], value[rows:] - sentences * rows_per_sentence
            elif kind == "part":
                head[f.name], tail[f.name] = (None, None) if value is None else value.split(sentences, rows,
                                                                                           rows_per_sentence)
            elif kind == "transient":
                head[f.name] = tail[f.name] = None
            else:  # host bounds stay valid bounds of each part
                head[f.name] = tail[f.name] = value
        return type(self)(**head), type(self)(**tail)

    def row_counts(self, rows_per_sentence: int) -> Tensor:
        """(S,) decoder rows of each sentence, on the device."""
        for f in dataclasses.fields(self):
            if _kind(f) == "rows":
                slots = getattr(self, f.name)
                return torch.bincount(slots // rows_per_sentence, minlength=self.size)
        return torch.ones(self.size, dtype=torch.long, device=self.sentences.device)  # type: ignore[attr-defined]

    @classmethod
    def concat(cls: type, states: Sequence[S], *, pad: int, rows_per_sentence: int) -> S:
        """One state for the sentences of ``states``, in order."""
        if len(states) == 1:
            return states[0]
        values: Dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            parts = [getattr(st, f.name) for st in states]
            kind = _kind(f)
            if kind == "host":
                values[f.name] = f.metadata["merge"](parts)
            elif kind == "rows":
                offsets = [0]
                for st in states[:-1]:
                    offsets.append(offsets[-1] + st.size * rows_per_sentence)
                values[f.name] = torch.cat([p + o for p, o in zip(parts, offsets)])
            elif kind == "part":
                values[f.name] = None if parts[0] is None else type(parts[0]).concat(
                    parts, pad=pad, rows_per_sentence=rows_per_sentence)
            elif kind == "transient":
                values[f.name] = None
            else:
                values[f.name] = torch.cat(_widened(parts, f.metadata.get("pad"), pad, f.metadata.get("scratch_last")))
        return cls(**values)


def _kind(f: dataclasses.Field) -> str:
    return f.metadata.get("kind", "sentence")


def _widened(parts: Sequence[Tensor], fill: Any, pad: int, scratch_last: Optional[bool]) -> Sequence[Tensor]:
    if fill is None:
        return parts
    value = pad if fill == PAD else fill
    width = max(p.size(-1) for p in parts)
    out = []
    for p in parts:
        if p.size(-1) < width:
            wide = F.pad(p, (0, width - p.size(-1)), value=value)
            if scratch_last and p.size(-1):  # the old scratch column becomes an ordinary one
                wide[..., p.size(-1) - 1] = value
            p = wide
        out.append(p)
    return out


class StateOps:
    """``sentences``, ``concat``, ``split`` and ``row_counts`` of :class:`~fairseq_stream.search.interface.SearchStrategy` for a
    strategy whose state is a :class:`StrategyState` (it sets ``pad`` and ``rows_per_sentence``)."""

    pad: int
    rows_per_sentence: int

    def sentences(self, state: StrategyState) -> int:
        return state.size

    def concat(self, states: Sequence[StrategyState]) -> StrategyState:
        return type(states[0]).concat(states, pad=self.pad, rows_per_sentence=self.rows_per_sentence)

    def split(self, state: StrategyState, sentences: int, rows: int) -> "tuple[StrategyState, StrategyState]":
        return state.split(sentences, rows, self.rows_per_sentence)

    def row_counts(self, state: StrategyState) -> Tensor:
        return state.row_counts(self.rows_per_sentence)
