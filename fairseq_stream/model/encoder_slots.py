"""The encodings ``E`` of Yang2020 Algorithm 1: the sentences in flight, one slot each.

Algorithm 1 encodes sentences when a refill admits them (line 9) and drops a sentence's
encoding once its beam terminates (line 18), so memory holds the sentences in flight, never
the input. Here a refill writes its sentences' encoder states into *free slots* of buffers
preallocated for the sentences in flight; a slot is free again as soon as no decoder row
refers to its sentence. A stream of any length therefore needs ``slots × longest source``
encoder positions, the capacity's worth, and no step reallocates anything.

A sentence admitted to a stream is named by a *handle* ``serial·SLOT_MODULUS + slot``:
unique over the run (strategies key finished n-best lists by it; ``serial`` is its place in
the input) while its slot is one modulo away on the device, so neither the strategies nor
the decoder step read anything to find a sentence's encoder states.

Nothing here calls a model (:mod:`fairseq_stream.model.model_step` does): these are the buffers.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.row_cache import EncoderMemory

#: Slots a stream may ever hold; handles are ``serial·SLOT_MODULUS + slot``. Strategies pass
#: handles through float64 packets, exact below 2**53: inputs of up to 2**33 sentences.
SLOT_MODULUS = 1 << 20
_WIDTH_STEP = 8  # source positions are allocated in steps of this many (fewer regrowths)


class LiveBytes:
    """Bytes of encoder states alive at once (weakref-tracked), and their peak.

    The instrument of the memory bound: every tensor of encoder states the stream creates is
    registered here and counted until it is freed, so anything that kept encodings of
    finished sentences alive would show up as growth.
    """

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0
        self._alive: Dict[int, "weakref.ref[Tensor]"] = {}  # id → the tensor, counted once

    def track(self, tensors: Iterable[Tensor]) -> None:
        for t in tensors:
            seen = self._alive.get(id(t))
            if seen is not None and seen() is t:
                continue  # a buffer kept from an earlier refill
            self._alive[id(t)] = weakref.ref(t)
            size = t.numel() * t.element_size()
            self.current += size
            weakref.finalize(t, self._free, id(t), size)
        self.peak = max(self.peak, self.current)

    def _free(self, key: int, size: int) -> None:
        self.current -= size
        ref = self._alive.get(key)
        if ref is not None and ref() is None:
            del self._alive[key]


def tensors_in(obj: Any) -> List[Tensor]:
    """The tensors of a fairseq encoder output (dicts, lists and tuples of tensors)."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in tensors_in(item)]
    return []


@dataclass
class EncoderSlots:
    """``E``: each model's slot memory (``None`` before the first refill) and the slots allocated."""

    per_model: List[Any]
    size: int = 0
    modulus: int = SLOT_MODULUS
    meter: LiveBytes = field(default_factory=LiveBytes)

    def free_slots(self, live_rows: Sequence[Tensor], count: int, in_flight: int, device: torch.device) -> Tensor:
        """``count`` slots no decoder row refers to (device-side, no host read).

        ``live_rows``: the handles of every decoder row in flight; ``in_flight``: the host's
        count of their sentences. Grows ``size`` when the refill rule puts more sentences in
        flight than there are slots (the new slots are allocated by the next admission).
        """
        needed = in_flight + count
        if needed > self.modulus:
            raise FairseqStreamError(f"a stream holds at most {self.modulus} sentences in flight, asked for {needed}; "
                                     "lower --stream-capacity or --stream-max-candidates")
        self.size = max(self.size, needed)
        taken = torch.zeros(self.size, dtype=torch.bool, device=device)
        for rows in live_rows:
            taken[rows % self.modulus] = True
        # Free slots first; a stable sort keeps this a fixed-shape device op.
        return torch.argsort(taken.to(torch.uint8), stable=True)[:count]


#: makes a buffer: (name, shape, like, fill) → a tensor of that shape filled with ``fill``
Allocator = Callable[[str, Tuple[int, ...], Tensor, Any], Tensor]


def _new_full(name: str, shape: Tuple[int, ...], like: Tensor, fill: Any) -> Tensor:
    return like.new_full(shape, fill)


def _room(buf: Optional[Tensor], like: Tensor, rows: int, width: int, dim: int, fill: Any, name: str = "",
          alloc: Allocator = _new_full) -> Tensor:
    """``buf`` grown to at least ``rows`` rows and ``width`` positions along ``dim`` (new room: ``fill``)."""
    if buf is not None and buf.size(0) >= rows and buf.size(dim) >= width:
        return buf
    shape = list(like.shape if buf is None else buf.shape)
    shape[0] = rows if buf is None else max(rows, buf.size(0))
    shape[dim] = width if buf is None else max(width, buf.size(dim))
    out = alloc(name, tuple(shape), like, fill)
    if buf is not None:
        out[tuple(slice(0, n) for n in buf.shape)] = buf
    return out


def _rounded(width: int) -> int:
    return -(-width // _WIDTH_STEP) * _WIDTH_STEP


def write_memory(slots: Optional[EncoderMemory], block: EncoderMemory, free: Tensor, size: int,
                 meter: LiveBytes, *, width_of: Callable[[int], int] = _rounded,
                 alloc: Allocator = _new_full) -> EncoderMemory:
    """Write ``block`` (the keys/values of ``m`` newly encoded sentences) into slots ``free`` (m,).

    Buffers are ``(size, H, W, hd)`` per layer and a padding mask ``(size, W)``; a block
    narrower than ``W`` is padded (masked positions weigh exactly 0 in encoder attention).
    ``width_of`` rounds a block's width up to the buffers' (the static step: doubling widths,
    so that the few buffers its graphs bind to recur); ``alloc`` makes new buffers.
    """
    m, _, w, _ = block.keys[0].shape
    width = max(width_of(w), 0 if slots is None else slots.keys[0].size(2))
    pad = block.padding if block.padding is not None else torch.zeros(m, w, dtype=torch.bool, device=free.device)
    old_k = [None] * len(block.keys) if slots is None else slots.keys
    old_v = [None] * len(block.keys) if slots is None else slots.values
    keys = [_room(o, b, size, width, 2, 0.0, f"k{i}", alloc) for i, (o, b) in enumerate(zip(old_k, block.keys))]
    values = [_room(o, b, size, width, 2, 0.0, f"v{i}", alloc) for i, (o, b) in enumerate(zip(old_v, block.values))]
    padding = _room(None if slots is None else slots.padding, pad, size, width, 1, True, "padding", alloc)
    for buf, part in zip(keys + values, block.keys + block.values):  # (m, H, w, hd) → slots
        # in place, no padded copy of the block: its positions, then zeros past them
        buf[:, :, :w].index_copy_(0, free, part)
        buf[:, :, w:].index_fill_(0, free, 0.0)
    padding.index_copy_(0, free, F.pad(pad, (0, width - w), value=True))
    meter.track(keys + values + [padding])
    return EncoderMemory(keys, values, padding, modulus=SLOT_MODULUS)


@dataclass
class SourceTable:
    """Slot memory of a generic fairseq encoder: the sources in flight and their encoding.

    fairseq's encoder outputs have no common layout to write rows into (dicts of
    ``T × B × C`` tensors, the LSTM's tuple, ...), so a refill writes the new sources into a
    token table of one row per slot and encodes the table again (one encoder call). Rows of
    sentences still in flight are encoded again with them: identical values up to the last
    bits of batched products. Free slots keep a stale or a one-token (EOS) source.
    """

    tokens: Tensor  # (size, T) padded on the side the input batches use
    lengths: Tensor  # (size,)
    left_pad: bool
    encoder_out: Any = None

    def trimmed(self) -> Tensor:
        """The token table without the columns no row needs (a host read, once per refill):
        encoders such as the LSTM's expect the longest row to fill the table."""
        width = int(self.lengths.max())
        return self.tokens[:, -width:] if self.left_pad else self.tokens[:, :width]

    @staticmethod
    def write(table: Optional["SourceTable"], src_tokens: Tensor, src_lengths: Tensor, free: Tensor, size: int,
              *, pad: int, eos: int, left_pad: bool) -> "SourceTable":
        """The table with sources ``src_tokens`` (m, w) in slots ``free``; ``encoder_out`` is left to the caller."""
        w = src_tokens.size(1)
        if table is None:
            empty = src_tokens.new_full((size, 1), eos)
            table = SourceTable(empty, src_lengths.new_ones(size), left_pad)
        width = max(w, table.tokens.size(1))
        side = (width - table.tokens.size(1), 0) if left_pad else (0, width - table.tokens.size(1))
        tokens = F.pad(table.tokens, side, value=pad)
        if size > tokens.size(0):  # new slots: the one-token source EOS
            extra = tokens.new_full((size - tokens.size(0), width), pad)
            extra[:, -1 if left_pad else 0] = eos
            tokens = torch.cat([tokens, extra])
        lengths = torch.cat([table.lengths, table.lengths.new_ones(size - table.lengths.numel())])
        block = F.pad(src_tokens, (width - w, 0) if left_pad else (0, width - w), value=pad)
        tokens.index_copy_(0, free, block)
        lengths.index_copy_(0, free, src_lengths)
        return SourceTable(tokens, lengths, left_pad)
