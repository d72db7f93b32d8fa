"""The packets the host reads once per step: one specification per fused step operator.

A step's control values (how many rows go on, which sentences finished, their final
hypotheses' lengths and scores, ...) travel to the host in **one** small float64 tensor, so a
step costs one device→host read. Its layout is declared here once, as named fields whose
lengths are ``const + per_sentence·S + per_final·S·Z`` (``S`` sentences in the step, ``Z``
final hypotheses each). Every backend follows it: the PyTorch references build the packet with
:meth:`PacketSpec.pack`, the C++ operators and the Triton kernels receive each field's start
from :meth:`PacketSpec.starts` (they hold no offsets of their own), and the strategies read it
with :meth:`PacketSpec.read`. ``tests/unit/test_step_backends.py`` checks the C++ sources name
the fields in this order.

Per-sentence fields are in the packet's order: the sentences that go on first, the finished
ones after, each part in its old order; ``position`` gives each one's place before that order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence, Tuple

import torch
from torch import Tensor


@dataclass(frozen=True)
class Field:
    name: str
    const: int = 0  # a scalar field: 1
    per_sentence: int = 0  # S entries
    per_final: int = 0  # S·Z entries (sentence-major)

    def length(self, s: int, z: int) -> int:
        return self.const + self.per_sentence * s + self.per_final * s * z


@dataclass(frozen=True)
class PacketView:
    """A packet read on the host: named fields as Python lists (scalars as numbers)."""

    spec: "PacketSpec"
    values: List[float]
    s: int
    z: int
    starts: List[int]  # each field's first index, then the size (computed once per read)

    def __getitem__(self, name: str) -> List[float]:
        i = self.spec.index[name]
        return self.values[self.starts[i]: self.starts[i + 1]]

    def scalar(self, name: str) -> int:
        return int(self.values[self.starts[self.spec.index[name]]])

    def ints(self, name: str) -> List[int]:
        return [int(x) for x in self[name]]


@dataclass(frozen=True)
class PacketSpec:
    """The named fields of one operator's packet, in order."""

    operator: str
    fields: Tuple[Field, ...]

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def index(self) -> Dict[str, int]:
        """Field name → its place (the reader looks fields up by name several times a step)."""
        return self._index  # type: ignore[attr-defined]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {f.name: i for i, f in enumerate(self.fields)})

    def starts(self, s: int, z: int = 0) -> List[int]:
        """Each field's first index, in order, then the packet's size (what the kernels receive)."""
        out, at = [], 0
        for f in self.fields:
            out.append(at)
            at += f.length(s, z)
        return out + [at]

    def size(self, s: int, z: int = 0) -> int:
        return self.starts(s, z)[-1]

    def span(self, name: str, s: int, z: int = 0) -> Tuple[int, int]:
        starts = self.starts(s, z)
        i = self.index[name]
        return starts[i], starts[i + 1] - starts[i]

    def pack(self, parts: Mapping[str, Tensor]) -> Tensor:
        """The packet from one tensor per field (any shape and dtype; the PyTorch references)."""
        missing = [n for n in self.names if n not in parts]
        if missing:
            raise KeyError(f"{self.operator} packet: missing {missing}")
        return torch.cat([parts[n].reshape(-1).to(torch.float64) for n in self.names])

    def read(self, packet: Tensor, s: int, z: int = 0) -> PacketView:
        """The step's one host read."""
        values = packet.tolist()
        starts = self.starts(s, z)
        if len(values) != starts[-1]:
            raise RuntimeError(f"{self.operator}: packet of {len(values)} values, its specification says {starts[-1]}")
        return PacketView(self, values, s, z, starts)


def _scalars(*names: str) -> Tuple[Field, ...]:
    return tuple(Field(n, const=1) for n in names)


def _per_sentence(*names: str) -> Tuple[Field, ...]:
    return tuple(Field(n, per_sentence=1) for n in names)


#: The beam step (Yang2020 Algorithm 1, lines 14-17): counts, then per sentence its next rows,
#: id, final count, the first Z final hypotheses' lengths and totals, its position before.
BEAM_STEP = PacketSpec("beam_step", _scalars("rows", "finished", "widest")
                       + _per_sentence("row_count", "sentence", "final_count")
                       + (Field("final_len", per_final=1), Field("final_total", per_final=1))
                       + _per_sentence("position"))

#: The Jacobi iteration (Santilli2023 Algorithms 1-3).
JACOBI_STEP = PacketSpec("jacobi_step", _scalars("finished", "next_width", "longest", "accepted", "shortest")
                         + _per_sentence("done", "sentence", "verified", "iterations", "total", "position"))

#: The IBDecoder's multi-word beam step (Zhang2020 Algorithm 1).
IB_STEP = PacketSpec("ib_step", _scalars("rows", "finished", "widest"))


def names_in(source: str, enum: str = "PacketField") -> Sequence[str]:
    """The field names of a C++ ``enum PacketField { kRows, kFinished, ... }`` (for the layout test)."""
    import re

    match = re.search(r"enum\s+(?:class\s+)?" + enum + r"\s*\{([^}]*)\}", source)
    if match is None:
        return ()
    out = []
    for item in match.group(1).split(","):
        item = item.split("=")[0].strip()
        if item and item != "kPacketFields":
            out.append(re.sub(r"(?<!^)([A-Z])", r"_\1", item[1:]).lower())
    return out
