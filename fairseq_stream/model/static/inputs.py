"""A static step's input and output buffers of a row bucket (:class:`StaticIO`) and what is written into them
between steps: the rows' inputs (tokens, cache length, query column, parent, encoder slot), the padding rows',
a block mask; and the last step (:class:`Chain`) whose buffers the next region gathers what travels with a
row from (:mod:`fairseq_stream.model.static.region` runs the step).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq_stream.model.row_cache import EncoderMemory, RowCache, SentenceIndex
from fairseq_stream.model.static.tail import RegionTail

#: the columns of a static step's input buffer (``StaticIO.ints``) after the ``b`` tokens: the row's cache length
#: (its next position), its query column among its sentence's rows, its parent in the reorder source, its encoder
#: slot — last, so that the columns written before a step whose encoder slots the region gathers are one block
LENS_COL, SLOT_COL, PARENT_COL, KV_COL = 0, 1, 2, 3
INPUT_COLS = 4


@dataclass
class StaticIO:
    """A row bucket's input and output buffers: what a static step reads besides the caches."""

    ints: Tensor  # (R, b + INPUT_COLS): tokens (b), cache length, query column, parent row, encoder slot
    mask: Optional[Tensor]  # (1, 1, b, slots) additive block mask, or None (causal)
    out: Tensor  # (R, b, V) logits
    tail_in: List[Tensor] = field(default_factory=list)  # (R·b, ...) a RegionTail's inputs
    tail_out: List[Tensor] = field(default_factory=list)  # (R·b, ...) what it returns
    steps: int = 0  # steps run on these buffers: a Chain is good while no other step has run on them
    padded: Tuple[Any, ...] = ()  # (columns key, r) of the last fill: rows [r, R) hold that key's padding row
    block: Optional[Tensor] = None  # (b, b) a block mask inside the block, which the region places itself
    block_of: Tuple[Any, ...] = ()  # (tensor, version) it was copied from: copied again only when it changes
    block_in_region: bool = False  # this step's mask is made in the region from ``block`` (else ``mask`` is filled)


@dataclass(frozen=True)
class Chain:
    """The static step a cache's rows came out of (``RowCache.last_step``; after a reorder ``RowCache.chain_from``):
    its input buffers, which hold each row's encoder slot and tail inputs while no other step ran on them
    (``io.steps == steps``), its block width and its tail's key."""

    io: StaticIO
    steps: int
    b: int
    tail_key: Optional[Tuple[Any, ...]]


def search_of(tail: Optional[RegionTail], rows: int) -> Any:
    """``tail``'s search step where the region can run it: the tail has one (a beam's, a Jacobi iteration's) and
    it takes a bucket of ``rows`` rows (``search.fits``)."""
    search = None if tail is None else getattr(tail, "search", None)
    return search if search is not None and search.fits(rows) else None


def chain_of(cache: RowCache, source: Optional[Tensor], b: int) -> "Optional[Chain]":
    """The step whose buffers the region may gather the rows' inputs from: the one the rows came out of — before
    the reorder the region does (``source``), or the last step itself where the rows stay as they were (a greedy
    row, Jacobi's accepted blocks) — with the same block width, and no other step run on its buffers since
    (another group stepping the same bucket overwrote them)."""
    chain = cache.chain_from if source is not None else cache.last_step
    if chain is None or chain.b != b or chain.io.steps != chain.steps:
        return None
    return chain


#: per (columns, b, wq, device): the input columns of a padding row — token 0 at position 0, the spare query
#: column ``wq``, parent 0 and encoder slot 0 (valid indices: their results are never read back)
_PADDING_ROWS: Dict[Tuple[Any, ...], Tensor] = {}


def write_inputs(io: StaticIO, cache: RowCache, tokens: Tensor, index: SentenceIndex, wq: int,
                 parents: Optional[Tensor], chain: "Optional[Chain]", search: Any, memory: EncoderMemory) -> bool:
    """The rows' inputs into ``io`` before a static step's region; whether the region reads them itself instead:
    the rows are the last search step's next rows in its bucket state (a beam's chain of one-token steps,
    ``search.gives_inputs``), so nothing is written between the steps (the region writes the padding rows too)."""
    r, b = tokens.shape
    if chain is not None and cache.uniform and search is not None and search.gives_inputs(tokens, index.slot, parents):
        io.padded = (_columns_key(io.ints, b + INPUT_COLS - 1, b, wq), r)
        return True
    # every input written here, or (a chain) those that do not travel with the rows: the encoder slots and the
    # tail's inputs are gathered in the region
    fill_inputs(io, tokens, cache.lens, index.slot, wq, parents,
                 None if chain is not None else index.memory_rows(memory.modulus))
    return False


def _columns_key(ints: Tensor, f: int, b: int, wq: int) -> Tuple[Any, ...]:
    """The key of an input layout of ``f`` columns (:data:`_PADDING_ROWS`, ``StaticIO.padded``)."""
    return (f, b, wq, ints.device)


def inputs_from_rows(ints: Tensor, rows: Tuple[Tensor, Tensor, Tensor, Tensor], src_ints: Tensor, b: int,
                     wq: int) -> None:
    """Every row's inputs in ``ints`` from a search step's next rows over the row bucket (feed (R, b), place among
    the sentence's rows, parent row, live: ``SentenceBucket.next_inputs``), in device operations (the region's):
    a live row's cache length is its parent's in the last step's buffer ``src_ints`` plus the ``b`` tokens fed
    there (rows of one length), a padding row is the padding row of :data:`_PADDING_ROWS` — what
    :func:`fill_inputs` writes from the same rows on the host."""
    feed, slot, parents, live = rows
    dead = ~live
    parents = parents.masked_fill(dead, 0)
    lens = src_ints[:, LENS_COL + b].index_select(0, parents) + b
    cols = torch.stack([lens.masked_fill(dead, 0), slot.masked_fill(dead, wq), parents], dim=1)
    ints[:, : b + INPUT_COLS - 1].copy_(torch.cat([feed.masked_fill(dead.unsqueeze(1), 0), cols], dim=1))


def fill_inputs(io: StaticIO, tokens: Tensor, lens: Tensor, slot: Tensor, wq: int,
                parents: Optional[Tensor] = None, kv_row: Optional[Tensor] = None) -> None:
    """Write the live rows' inputs into ``io.ints`` (R, F) between steps, and the padding rows' (:data:`_PADDING_ROWS`).
    Without ``parents`` (no reorder due) the parent column holds the query column (the region does not read it);
    without ``kv_row`` the encoder-slot column is left as it is (the region gathers it from the last step's).
    Padding rows written by an earlier fill of the same columns stay as they are (``io.padded``): only the rows
    that were live then and are padding now are written (none while the live rows do not shrink)."""
    ints, b = io.ints, tokens.size(1)
    cols = [tokens, lens.unsqueeze(1), slot.unsqueeze(1), (slot if parents is None else parents).unsqueeze(1)]
    live = torch.cat(cols if kv_row is None else cols + [kv_row.unsqueeze(1)], dim=1)  # (r, f)
    r, f = live.shape
    key = _columns_key(ints, f, b, wq)
    # rows [clean, R) hold the padding row of ``key`` (the region writes only valid encoder slots into them)
    clean = io.padded[1] if io.padded and io.padded[0] == key else ints.size(0)
    if r < clean:
        pad = _PADDING_ROWS.get(key)
        if pad is None:
            pad = torch.zeros(1, f, dtype=ints.dtype, device=ints.device)
            pad[0, b + SLOT_COL] = wq
            _PADDING_ROWS[key] = pad
        ints[r:clean, :f].copy_(pad.expand(clean - r, f))
    io.padded = (key, r)
    ints[:r, :f].copy_(live)


def set_block_mask(io: StaticIO, block_mask: Tensor, width: int, b: int) -> None:
    """A step's block mask: a (b, b) one inside the block into ``io.block`` (copied only when it is another tensor or
    was written since), which the region places after the rows' cached slots itself (:func:`region_block_mask`);
    one over cache and block (b, width + b) into ``io.mask`` here."""
    io.block_in_region = block_mask.size(-1) == b
    if not io.block_in_region:
        fill_block_mask(io.mask, block_mask, width, b)  # type: ignore[arg-type]
        return
    if io.block is None:
        io.block = io.mask.new_empty(b, b)  # type: ignore[union-attr]
    version = _version_of(block_mask)
    if version is None or len(io.block_of) != 2 or io.block_of[0] is not block_mask or io.block_of[1] != version:
        io.block.copy_(block_mask)
        io.block_of = (block_mask, version)


def _version_of(t: Tensor) -> Optional[int]:
    """``t``'s version counter (it counts in-place writes), or None where it keeps none (an inference tensor)."""
    try:
        return t._version
    except RuntimeError:
        return None


def region_block_mask(block: Tensor, lens: Tensor, slots: int, b: int) -> Tensor:
    """(1, 1, b, slots) the additive mask of a step whose rows have one length (``lens[0]``: row 0 is live) — its
    cached slots visible, the block at ``[width, width + b)`` under ``block`` (b, b), −inf after — in device
    operations (the region's): what :func:`fill_block_mask` writes on the host."""
    rel = torch.arange(slots, device=lens.device) - lens[:1]  # (slots,) each slot's place after the cached ones
    inside = (rel >= 0) & (rel < b)
    placed = block.index_select(1, rel.clamp(0, b - 1))  # (b, slots)
    outside = torch.full_like(placed, float("-inf")).masked_fill(rel < 0, 0.0)
    return torch.where(inside, placed, outside).view(1, 1, b, slots)


def fill_block_mask(mask: Tensor, block_mask: Tensor, width: int, b: int) -> None:
    """``mask`` (1, 1, b, slots) from a (b, b) mask inside the block or a (b, width + b) one over
    cache and block (rows of one length: the block sits at ``[width, width + b)``)."""
    bm = block_mask.to(mask.dtype)
    mask.fill_(float("-inf"))
    if bm.size(-1) == b:
        mask[0, 0, :, :width] = 0.0
        mask[0, 0, :, width: width + b] = bm
    else:
        mask[0, 0, :, : width + b] = bm
