"""The static step itself (:class:`StaticStep`): a block decoder's layers over the whole buffer of a static
cache — every row of its row bucket, every slot of its slot bucket (padding rows and slots masked) — reading
and writing only buffers fixed for that bucket, so that the *region* (the step, the last step's cache
reorder, the rows' inputs gathered from the last step's buffers, the strategy's tail and search step) is
one CUDA graph replay under :class:`~fairseq_stream.model.static.graphs.StepGraphs`.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.block_decoder import BlockDecoder, attend, merge_heads, split_heads
from fairseq_stream.model.ensemble import search_dtype, search_scores
from fairseq_stream.model.row_cache import SLACK, EncoderMemory, RowCache, SentenceIndex
from fairseq_stream.model.static.buckets import length_bucket, next_pow2, row_bucket
from fairseq_stream.model.static.graphs import StepGraphs
from fairseq_stream.model.static.inputs import (
    INPUT_COLS, KV_COL, LENS_COL, PARENT_COL, SLOT_COL, Chain, StaticIO, chain_of, inputs_from_rows,
    region_block_mask, search_of, set_block_mask, write_inputs,
)
from fairseq_stream.model.static.modes import StepModeStats
from fairseq_stream.model.static.slabs import StaticCachePool
from fairseq_stream.model.static.streams import StreamBuffers, StreamBufferSets
from fairseq_stream.model.static.tail import RegionOutput, RegionTail
from fairseq_stream.ops import decode_attention


class StaticStep:
    """``--step-mode static|graph``: a :class:`~fairseq_stream.model.block_decoder.BlockDecoder`'s step over the
    whole buffer of a static cache, with what the region around it runs (see the package docstring), and what
    it keeps across runs of the decoder (a benchmark's repeats, a session's calls replay them): one per decoder
    (``model_step``), holding its slab pool, its idle stream buffer sets, its graphs and the strategies' pools."""

    def __init__(self, block_decoder: BlockDecoder) -> None:
        self.block_decoder = block_decoder
        # the slot caches, lent one lease at a time; a buffer it drops takes its step graphs with it
        self.pool = StaticCachePool(on_evict=_forget_graphs_of(weakref.ref(self)))
        # the encoder slots and input/output buffers no stream holds now (a shared output buffer that
        # grows takes the graphs bound to it along)
        self.streams = StreamBufferSets(on_evict=_forget_graphs_of(weakref.ref(self)))
        self.graphs: Optional[StepGraphs] = None  # --step-mode graph: built by step_graphs()
        # what a strategy's steps inside the region keep across runs (its bucket states: search/region.py),
        # by (strategy class, kind: ModelStep.strategy_pool); the model does not look inside
        self.strategy_pools: Dict[Tuple[type, Any], Any] = {}

    def release(self) -> int:
        """Give back what this step keeps for later runs and no run holds now — free cache slabs, idle stream buffer
        sets (their logits buffers), the strategies' free bucket states — and every step graph (they keep the
        buffers they bind alive; later runs capture them again); the bytes given back by the pools' accounting."""
        if self.graphs is not None:
            self.graphs.clear()
        freed = self.pool.release_free() + self.streams.release_idle()
        for pool in self.strategy_pools.values():
            release = getattr(pool, "release_free", None)
            if release is not None:
                freed += release()
        return freed

    def step_graphs(self) -> StepGraphs:
        """The decoder's step graphs (one memory pool), shared by every stream of it."""
        if self.graphs is None:
            self.graphs = StepGraphs()
        return self.graphs

    def empty_cache(self, rows: int, like: Tensor) -> RowCache:
        """A static cache of ``rows`` rows with nothing fed: slot buffers of the pool's slabs."""
        block = self.block_decoder
        lease = self.pool.acquire(row_bucket(rows), length_bucket(SLACK), like, len(block.decoder.layers),
                                  block.heads, block.head_dim)
        return RowCache.static(self.pool, lease, torch.zeros(rows, dtype=torch.long, device=like.device), 0)

    def forward(self, cache: RowCache, tokens: Tensor, memory: EncoderMemory,
                index: SentenceIndex, block_mask: Optional[Tensor], *, buffers: StreamBuffers,
                graphs: Optional[StepGraphs], stats: Optional[StepModeStats],
                tail: Optional[RegionTail] = None) -> Optional[Tuple[Tensor, RowCache, str, Any]]:
        """``BlockDecoder.forward`` and ``logits`` over the whole buffer of a static ``cache``.

        The step computes every row of the cache's row bucket and attends over every slot of
        its slot bucket (padding rows and slots masked), reading and writing only buffers fixed
        for that bucket, so it is one CUDA graph replay under ``graphs``. What changes between
        steps (tokens, lengths, which encoder slot and query column each row uses) is written into
        the bucket's input buffer first (of the stream's ``buffers``: a stream of its own's, so that
        streams stepping alternately do not see each other's inputs); the positions are the rows'
        cache lengths, computed in the region. Where the rows are the last step's reordered
        (:class:`Chain`), what travels with a row — its encoder slot, the inputs of a ``tail`` that
        says how they follow (``RegionTail.follow``) — is gathered by the parents inside the region.
        ``stats``: the generator's, where a graph's capture is counted. Returns the live rows' logits
        (a view of the bucket's output buffer, valid until the next step), the cache and how the step
        ran (``replayed`` or ``static``), and what ``tail`` returned for the live rows (it runs in the
        same region, after the logits: the strategy's output layer; views of the bucket's buffers,
        valid as the logits; None without a tail, or where its inputs are not one per scored row);
        None when this step needs the eager path (no rows, a per-row block mask).
        """
        r, b = tokens.shape
        if r == 0 or cache.lease is None or (block_mask is not None and block_mask.dim() != 2):
            return None
        if block_mask is not None and not cache.uniform:
            raise FairseqStreamError("a custom block mask needs rows of one length")
        cache.reserve(b)  # (a deferred reorder is done first where the slots grow)
        buf = cache.lease.buffer  # type: ignore[union-attr]
        slots = buf.size(3)
        source, parents = cache.reorder_source()  # the last step's reorder, copied in this region
        self.block_decoder.refresh_stacked()
        table = self.block_decoder.prepare_positions(slots - 1, buf.device)
        wq = next_pow2(max(1, index.width))  # query columns per sentence in encoder attention
        chain, follows, tail, io = self._chained_io(cache, source, buffers, r, b, tail, block_mask is not None)
        search = search_of(tail, buf.size(0) * b)
        from_rows = write_inputs(io, cache, tokens, index, wq, parents, chain, search, memory)
        given = tail is None or follows or (search is not None and search.tail_inputs is not None)
        for into, live in zip(io.tail_in, () if given else tail.inputs):  # type: ignore[union-attr]
            into[: r * b].copy_(live)
        if block_mask is not None:
            set_block_mask(io, block_mask, cache.width, b)
        gather = None if chain is None else (chain.io.ints, chain.io.tail_in if follows else None)
        how = self._run_region(buf, io, memory, b, wq, table, tail, source, gather, graphs, stats, search, from_rows)
        io.steps += 1
        if stats is not None:
            stats.inputs_in_step += chain is not None
        if source is not None:
            cache.pending = cache.chain_from = None  # done: the source goes back to the pool when nothing else holds it
            if stats is not None:
                stats.reorders_in_step += 1
        made = None if tail is None else RegionOutput(tuple(t[: r * b] for t in io.tail_out), searched=search is not None)
        out = cache.advanced(b)
        out.last_step = Chain(io, io.steps, b, None if tail is None else tail.key)
        return io.out[:r], out, how, made

    def _chained_io(self, cache: RowCache, source: Optional[Tensor], buffers: StreamBuffers, r: int, b: int,
                    tail: Optional[RegionTail], custom: bool,
                    ) -> "Tuple[Optional[Chain], bool, Optional[RegionTail], StaticIO]":
        """The step the rows' inputs are gathered from (:func:`chain_of`; rows that stay in place only from the
        last step's own buffers), whether the tail's inputs follow too, the tail and the bucket's buffers."""
        chain = chain_of(cache, source, b)
        follows, tail, io = self._bucket_io(cache, buffers, r, b, tail, custom, chain)
        if chain is not None and source is None and chain.io is not io:  # in place, but on other buffers
            chain = None
            follows, tail, io = self._bucket_io(cache, buffers, r, b, tail, custom, None)
        return chain, follows, tail, io

    def _bucket_io(self, cache: RowCache, buffers: StreamBuffers, r: int, b: int, tail: Optional[RegionTail],
                   custom: bool, chain: "Optional[Chain]") -> "Tuple[bool, Optional[RegionTail], StaticIO]":
        """Whether ``tail``'s inputs follow the rows' parents from ``chain``'s step, the tail (None where its inputs
        are not one per scored row: the strategy runs its layer itself) and the bucket's buffers for it."""
        follows = (chain is not None and tail is not None and chain.tail_key == tail.key
                   and getattr(tail, "follow", None) is not None)
        regional = getattr(getattr(tail, "search", None), "tail_inputs", None) is not None  # made in the region
        if tail is not None and not follows and not regional and any(t.size(0) != r * b for t in tail.inputs):
            tail = None
        buf = cache.lease.buffer  # type: ignore[union-attr]
        io = self._io(buffers, buf.size(0), b, buf.size(3), buf, custom=custom, tail=tail,
                      tail_like=chain.io.tail_in if follows else None)  # type: ignore[union-attr]
        return follows, tail, io

    def _run_region(self, buf: Tensor, io: StaticIO, memory: EncoderMemory, b: int, wq: int, table: Optional[int],
                    tail: Optional[RegionTail], source: Optional[Tensor],
                    gather: "Optional[Tuple[Tensor, Optional[List[Tensor]]]]", graphs: Optional[StepGraphs],
                    stats: Optional[StepModeStats], search: Any = None, from_rows: bool = False) -> str:
        """The region run (``static``), or under ``graphs`` replayed or captured by its key; how it ran."""
        def body() -> None:
            self._body(buf, io, memory, b, wq, tail, source, gather, search, from_rows)

        if graphs is None:
            body()
            return "static"
        key, keep = self._region_key(buf, source, io, memory, b, wq, table, tail, gather)
        if search is not None:
            key, keep = key + (search.key, from_rows), keep + list(search.tensors)
        return graphs.run(key, body, keep, StepModeStats() if stats is None else stats)

    def _region_key(self, buf: Tensor, source: Optional[Tensor], io: StaticIO, memory: EncoderMemory, b: int,
                    wq: int, table: Optional[int], tail: Optional[RegionTail],
                    gather: "Optional[Tuple[Tensor, Optional[List[Tensor]]]]" = None,
                    ) -> Tuple[Tuple[Any, ...], List[Tensor]]:
        """A step graph's key — every tensor the region reads or writes by address: the cache (and its reorder's
        source), the stream's buffers (and the last step's, where the rows' inputs are gathered from them), the
        position table; then the shapes — and the tensors the graph keeps."""
        # a cache buffer is a view of a pool slab (the same address for every bucket): its rows and slots, and
        # its reorder source's rows, are part of the key
        src_ints, src_tail = (None, None) if gather is None else gather
        key = (buf.data_ptr(), None if source is None else source.data_ptr(), io.ints.data_ptr(), io.out.data_ptr(),
               _memory_key(memory), buf.size(0), buf.size(3), None if source is None else source.size(0), b, wq,
               io.mask is not None, io.block_in_region, table, self.block_decoder.qkv_version,
               None if tail is None else tail.key,
               None if src_ints is None else (src_ints.data_ptr(), src_ints.size(0)),
               None if src_tail is None else tuple(t.data_ptr() for t in src_tail))
        keep = ([buf, io.ints, io.out] + ([] if source is None else [source]) + ([] if io.mask is None else [io.mask])
                + ([] if io.block is None else [io.block])
                + io.tail_in + io.tail_out + _memory_tensors(memory)
                + ([] if src_ints is None else [src_ints]) + list(src_tail or ()))
        return key, keep

    def _io(self, buffers: StreamBuffers, rows: int, b: int, slots: int, like: Tensor, *,
            custom: bool, tail: Optional[RegionTail] = None,
            tail_like: Optional[List[Tensor]] = None) -> StaticIO:
        """The stream's buffers of a row bucket (made the first time: a tail's inputs like ``tail_like``, the last
        step's, where they are gathered from there, else like ``tail.inputs``)."""
        vocab = self.block_decoder.decoder.output_projection.out_features

        def make() -> StaticIO:
            ints = torch.zeros(rows, b + INPUT_COLS, dtype=torch.long, device=like.device)
            mask = like.new_zeros(1, 1, b, slots) if custom else None
            io = StaticIO(ints, mask, like.new_zeros(0, b, vocab))
            if tail is not None:  # zeros: a padding row's inputs are finite from the start
                n = rows * b
                io.tail_in = [torch.zeros((n,) + t.shape[1:], dtype=t.dtype, device=t.device)
                              for t in (tail.inputs if tail_like is None else tail_like)]
                io.tail_out = [torch.zeros((n,) + shape, dtype=dtype, device=like.device)
                               for shape, dtype in tail.outputs(vocab, search_dtype(like.dtype))]
            return io

        # one set for every slot bucket of a row bucket (only a block mask spans the slots), and one logits
        # buffer (rows, b, V), the large one, for every row bucket: a stream steps one group at a time
        io = buffers.io_for((rows, b, slots if custom else None, None if tail is None else tail.key, like.dtype,
                             like.device), make)
        logits = buffers.rows_of_shared(("logits", b, vocab, like.dtype, like.device), rows,
                                        lambda n: like.new_zeros(n, b, vocab))
        if io.out.size(0) != rows or io.out.data_ptr() != logits.data_ptr():  # a new set, or the buffer grew
            io.out = logits[:rows]
        return io

    def _body(self, buf: Tensor, io: StaticIO, memory: EncoderMemory, b: int, wq: int,
              tail: Optional[RegionTail] = None, source: Optional[Tensor] = None,
              gather: "Optional[Tuple[Tensor, Optional[List[Tensor]]]]" = None, search: Any = None,
              from_rows: bool = False) -> None:
        """The step proper: every tensor it makes has a shape fixed by the bucket (rows, slots, b); first, with
        ``from_rows``, the rows' inputs from the last search step's next rows (``search.bucket``); then the
        last step's cache reorder from ``source`` (the parents in ``io.ints``), where one is due, and with it
        what travels with the rows from the last step's buffers (``gather``: its input buffer, whose encoder
        slots each row takes from its parent, and its tail inputs, which ``tail.follow`` turns into this
        step's); then ``tail`` (the strategy's output layer) over its logits, into ``io.tail_out``, and the
        strategy's ``search`` step from those (``RegionTail.search``)."""
        ints = io.ints
        rows, slots, layers = ints.size(0), buf.size(3), buf.size(1) // 2
        if from_rows:
            inputs_from_rows(ints, search.bucket.next_inputs(rows), gather[0], b, wq)  # type: ignore[index]
        if source is not None:  # every slot: the shape is the bucket's, whatever the rows' lengths
            torch.index_select(source, 0, ints[:, PARENT_COL + b], out=buf)
        if gather is not None:  # reordered rows: from their parents; rows in place: from themselves (same buffers)
            src_ints, src_tail = gather
            parents = ints[:, PARENT_COL + b] if source is not None else None
            if parents is not None:  # (in place the encoder slots are already there)
                ints[:, KV_COL + b].copy_(src_ints[:, KV_COL + b].index_select(0, parents))
            if src_tail is not None:  # the tail's inputs of each row's parent, one step on
                last = src_tail if parents is None else [t.index_select(0, parents) for t in src_tail]
                for into, value in zip(io.tail_in, tail.follow(*last)):  # type: ignore[union-attr]
                    into.copy_(value)
        tokens, lens, kv_row, slot = ints[:, :b], ints[:, LENS_COL + b], ints[:, KV_COL + b], ints[:, SLOT_COL + b]
        ends = lens.unsqueeze(1) + torch.arange(b, device=ints.device)  # (R, b): each query's position and own slot
        x = self.block_decoder.embed(tokens, ends, slots - 1)  # (R, b, d)
        write = ends.view(rows, 1, b, 1).expand(rows, self.block_decoder.heads, b, self.block_decoder.head_dim)
        # a CPU's float32 causal step (one query or a causal block per row): the C++ kernel, as the eager step
        kernel = decode_attention.usable(x) and io.mask is None
        if kernel:
            mask = None
        elif io.block_in_region:  # (1, 1, b, slots) additive, rows of one length: placed here
            mask = region_block_mask(io.block, lens, slots, b)  # type: ignore[arg-type]
        elif io.mask is not None:
            mask = io.mask  # (1, 1, b, slots) additive, rows of one length
        else:  # causal, per row: query j of row r sees slots <= lens[r] + j
            mask = (torch.arange(slots, device=ints.device) <= ends.unsqueeze(2)).unsqueeze(1)  # (R, 1, b, slots)
        layout = None if kernel else _slot_layout(kv_row, slot, wq, b, memory)
        for i, layer in enumerate(self.block_decoder.decoder.layers):
            keys, values = buf[:, i], buf[:, layers + i]  # (R, H, slots, hd) views of the stacked buffer
            x = self.block_decoder.run_layer(
                layer, x,
                lambda h, i=i, attn=layer.self_attn, k=keys, v=values: _static_self_attention(
                    attn, self.block_decoder.qkv[i], h, k, v, write, mask, ends if kernel else None),
                lambda h, i=i, attn=layer.encoder_attn: _static_encoder_attention(attn, h, memory, i, kv_row, layout))
        io.out.copy_(self.block_decoder.logits(self.block_decoder.project_out(x)))
        if tail is not None:  # the strategy's output layer, in the region too (no launch after a replay)
            if search is not None and search.tail_inputs is not None:  # its inputs from the search step's bucket state
                for into, value in zip(io.tail_in, search.tail_inputs()):  # (its rows may be more)
                    into.copy_(value[: into.size(0)])
            scores = io.out.view(rows * b, -1)
            made = tail(search_scores(scores), *io.tail_in)
            for into, out in zip(io.tail_out, made):
                into.copy_(out)
            if search is not None:
                search(io.tail_out)

def _memory_key(memory: EncoderMemory) -> Tuple[Any, ...]:
    keys = memory.keys[0]
    return (keys.data_ptr(), tuple(keys.shape), None if memory.padding is None else memory.padding.data_ptr())


def _memory_tensors(memory: EncoderMemory) -> List[Tensor]:
    return memory.keys + memory.values + ([] if memory.padding is None else [memory.padding])


def _slot_layout(kv_row: Tensor, slot: Tensor, wq: int, b: int, memory: EncoderMemory) -> Tuple[Tensor, int, Optional[Tensor]]:
    """Encoder attention by encoder slot: row ``r``'s queries go to slot ``kv_row[r]``, columns
    ``slot[r]·b …`` of a ``(slots, (wq + 1)·b)`` query layout (the last ``b`` columns take the
    padding rows), so that every slot's keys serve its rows in one batched product, without a
    gathered copy. Returns the flat query index (R·b,), the columns per slot and the visible
    keys (slots, 1, 1, S); a slot with no sentence sees its first key, so nothing divides by zero."""
    width = (wq + 1) * b
    flat = ((kv_row * (wq + 1) + slot).unsqueeze(1) * b + torch.arange(b, device=kv_row.device)).view(-1)
    visible = None
    if memory.padding is not None:
        length = memory.keys[0].size(2)
        vis = ~memory.padding[:, :length]
        first = torch.arange(length, device=vis.device) == 0
        visible = (vis | (~vis.any(dim=1, keepdim=True) & first))[:, None, None, :]
    return flat, width, visible


def _static_self_attention(attn: Any, qkv: Callable[[Tensor], Tensor], x: Tensor, keys: Tensor, values: Tensor,
                           write: Tensor, mask: Optional[Tensor], last: Optional[Tensor]) -> Tensor:
    """Self-attention of a block ``x`` (R, b, d) over a whole slot bucket: the block's keys and values
    are written at each row's own slots (``write``), then every slot is read under ``mask``
    (or, ``last`` (R, b) given, by the CPU kernel up to each query's last slot)."""
    heads = attn.num_heads
    rows = x.size(0)
    q, k_new, v_new = qkv(x).chunk(3, dim=-1)
    q = split_heads(q, heads)  # (R, H, b, hd)
    keys.scatter_(2, write, split_heads(k_new, heads))
    values.scatter_(2, write, split_heads(v_new, heads))
    if last is not None:  # (R, b): each query's last slot; a block runs as one query per row
        hd, b = q.size(-1), q.size(2)
        qrow = None if b == 1 else torch.arange(rows, device=q.device).repeat_interleave(b)
        out = decode_attention.attend(q.transpose(1, 2).reshape(rows * b, heads, hd), keys, values, attn.scaling,
                                      kv_row=qrow, last=last.reshape(rows * b))
        return attn.out_proj(out.view(rows, b, heads * hd))
    return attn.out_proj(merge_heads(attend(q, keys, values, mask, attn.scaling)))


def _static_encoder_attention(attn: Any, query: Tensor, memory: EncoderMemory, layer: int, kv_row: Tensor,
                              layout: Optional[Tuple[Tensor, int, Optional[Tensor]]]) -> Tensor:
    """Encoder attention of ``query`` (R, b, d) in the slot layout of :func:`_slot_layout` (or, with
    no layout, each query through the CPU kernel, as the eager step)."""
    heads = attn.num_heads
    q = attn.q_proj(query)  # (R, b, d)
    rows, b, d = q.shape
    hd = d // heads
    if layout is None:
        out = decode_attention.attend(q.reshape(rows * b, heads, hd), memory.keys[layer], memory.values[layer],
                                      attn.scaling, kv_row=kv_row if b == 1 else kv_row.repeat_interleave(b),
                                      key_padding=memory.padding)
        return attn.out_proj(out.view(rows, b, d))
    flat, width, visible = layout
    n = memory.keys[layer].size(0)
    qp = q.new_zeros(n * width, heads, hd).index_copy_(0, flat, q.reshape(rows * b, heads, hd))
    out = attend(qp.view(n, width, heads, hd).transpose(1, 2), memory.keys[layer], memory.values[layer], visible,
                  attn.scaling)  # (n, H, width, hd)
    out = out.transpose(1, 2).reshape(n * width, d).index_select(0, flat)
    return attn.out_proj(out.view(rows, b, d))


def _forget_graphs_of(owner_ref: "weakref.ref[StaticStep]") -> Callable[[Tensor], None]:
    """The eviction hook of the pool and of the stream buffer sets: the graphs bound to a dropped buffer
    go too (a weak reference: both belong to the static step)."""
    def forget(buffer: Tensor) -> None:
        owner = owner_ref()
        if owner is not None and owner.graphs is not None:
            owner.graphs.forget(buffer.data_ptr())

    return forget
