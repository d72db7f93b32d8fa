"""Block-incremental decoder step for fairseq's ``TransformerDecoder``.

fairseq's incremental decoding feeds one token per step, with one position for every row and
an encoder-attention cache that is kept per *row* (or per fixed-size beam). Every strategy
of this package needs more (``docs/architecture.md``, "How a decoder step runs"):

* **blocks** — feed ``b`` tokens per row at once against the key/value cache with a
  within-block mask (causal for Jacobi verification, M(h, c) for the IBDecoder), then
  :meth:`RowCache.truncate` the cache back to the accepted prefix;
* **per-row positions** — rows of different lengths share a call (VAR-STR-FIFO, top-up),
  with padded cache slots masked out;
* **per-sentence encoder keys** — the encoder-attention keys and values are computed once per
  source sentence and shared by all its rows, however many rows (variable-width beams) it
  has; queries are padded per sentence instead (see :func:`_encoder_attention`).

The layer arithmetic follows ``TransformerDecoderLayerBase.forward`` of fairseq 0.12 in
evaluation mode (pre- or post-norm, NormFormer's ``attn_ln``/``c_attn``/``ffn_layernorm``,
``w_resid``). :func:`check_supported` rejects what it does not cover, and
``tests/unit/test_decoder_step.py`` checks the result against fairseq's own forward.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.linear_kernels import OneDnnLinear
from fairseq_stream.model.quantize import is_quantized_linear, stacked_linear, weight_key
from fairseq_stream.ops import decode_attention
from fairseq_stream.model.ensemble import search_dtype, search_scores
from fairseq_stream.model.row_arena import FIRST_SLOTS, untouched
from fairseq_stream.model.row_cache import SLACK, EncoderMemory, RowCache, SentenceIndex
from fairseq_stream.model.static_step import (
    LiveRows, StaticCachePool, StepGraphs, StepModeStats, StepTail, StreamBufferSets, StreamBuffers, next_pow2, length_bucket, row_bucket,
)


def is_transformer_decoder(decoder: Any) -> bool:
    """True for fairseq's ``TransformerDecoderBase`` family (the only decoders this op runs)."""
    from fairseq.models.transformer import TransformerDecoderBase

    return isinstance(decoder, TransformerDecoderBase)


def check_supported(decoder: Any) -> Optional[str]:
    """``None`` when the op covers ``decoder``; otherwise why not (one line)."""
    if not is_transformer_decoder(decoder):
        return f"{type(decoder).__name__} is not a fairseq TransformerDecoder"
    if getattr(decoder, "cross_self_attention", False):
        return "cross-self-attention decoders are not supported"
    if getattr(decoder, "adaptive_softmax", None) is not None:
        return "adaptive-softmax output layers are not supported"
    for layer in decoder.layers:
        attn = layer.self_attn
        if attn.bias_k is not None or attn.add_zero_attn:
            return "attention with bias_kv or add_zero_attn is not supported"
        if getattr(layer, "encoder_attn", None) is None:
            return "decoders without encoder attention are not supported"
    return None


def _split_heads(x: Tensor, heads: int) -> Tensor:
    """(R, b, d) → (R, H, b, hd)."""
    r, b, d = x.shape
    return x.view(r, b, heads, d // heads).transpose(1, 2)


def _merge_heads(x: Tensor) -> Tensor:
    """(R, H, b, hd) → (R, b, d)."""
    r, h, b, hd = x.shape
    return x.transpose(1, 2).reshape(r, b, h * hd)


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float) -> Tensor:
    """``softmax(q·kᵀ·scale + mask)·v`` as one fused attention operator (one kernel on a GPU:
    flash or memory-efficient attention; one operation on a CPU). ``mask``: additive float or
    boolean (True = visible), broadcastable to (..., queries, keys)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def _encoder_attention(attn: Any, query: Tensor, memory: EncoderMemory, layer: int, index: SentenceIndex) -> Tensor:
    """Encoder attention of ``query`` (R, b, d) with keys shared per sentence.

    Rows are scattered into a ``(n, H, width, b, hd)`` layout so that one batched product per
    sentence serves all its rows: the keys are never copied per row, which is what makes
    variable-width beams affordable (fairseq shares them only for a fixed beam width).
    """
    heads = attn.num_heads
    q = attn.q_proj(query)  # (R, b, d)
    r, b, d = q.shape
    hd = d // heads
    if decode_attention.usable(q):  # the kernel reads each query's sentence (a block: b queries per row)
        kv_row = index.memory_rows(memory.modulus)
        out = decode_attention.attend(q.reshape(r * b, heads, hd), memory.keys[layer], memory.values[layer],
                                      attn.scaling, kv_row=kv_row if b == 1 else kv_row.repeat_interleave(b),
                                      key_padding=memory.padding)
        return attn.out_proj(out.view(r, b, d))
    keys = index.gather(memory.keys[layer], memory.modulus)  # (n, H, S, hd)
    values = index.gather(memory.values[layer], memory.modulus)
    visible = None if memory.padding is None else index.visible(memory.padding, memory.modulus)  # (n, 1, 1, S)
    q = q.view(r, b, heads, hd).transpose(1, 2)  # (R, H, b, hd)
    if index.width == 1 and r == index.sentences.numel():  # one row per sentence (greedy, Jacobi): no scatter
        out = _attend(q, keys, values, visible, attn.scaling)  # (R, H, b, hd)
        return attn.out_proj(out.transpose(1, 2).reshape(r, b, d))
    n, w = len(index.sentences), index.width
    qp = q.new_zeros(n, heads, w, b, hd)
    qp[index.local, :, index.slot] = q
    out = _attend(qp.view(n, heads, w * b, hd), keys, values, visible, attn.scaling)  # (n, H, W·b, hd)
    out = out.view(n, heads, w, b, hd)[index.local, :, index.slot]  # (R, H, b, hd)
    return attn.out_proj(out.transpose(1, 2).reshape(r, b, d))


def _self_attention(attn: Any, qkv: Callable[[Tensor], Tensor], x: Tensor, cache: RowCache, i: int,
                    mask: Optional[Tensor], write: Optional[Tensor], causal: bool = False) -> Tensor:
    """Self-attention of a block ``x`` (R, b, d) over layer ``i``'s cache plus the block itself.

    The block's keys and values are written into the cache in place (no copy of the past):
    at slots ``[width, width + b)`` when every row has ``width`` tokens, else at each row's own
    ``lens[r] + j`` (``write``: (R, H, b, hd) slot indices). ``qkv`` is the query/key/value
    projections stacked into one product (float or int8, :func:`fairseq_stream.model.quantize.stacked_linear`). ``mask`` is additive, broadcastable to (R, H, b, width + b).
    ``causal``: ``mask`` is the causal one (query ``j`` sees the slots up to its own), which the CPU
    kernel then computes as ``b`` queries of one row each: a block's query gets the bits of the
    single-query step at its position (Jacobi and speculative decoding ≡ greedy, in float32 and int8).
    """
    heads = attn.num_heads
    b = x.size(1)
    q, k_new, v_new = qkv(x).chunk(3, dim=-1)
    q = _split_heads(q, heads)  # (R, H, b, hd)
    start = cache.width
    if write is None:
        cache.keys[i][:, :, start: start + b] = _split_heads(k_new, heads)
        cache.values[i][:, :, start: start + b] = _split_heads(v_new, heads)
    else:
        cache.keys[i].scatter_(2, write, _split_heads(k_new, heads))
        cache.values[i].scatter_(2, write, _split_heads(v_new, heads))
    k = cache.keys[i][:, :, : start + b]  # (R, H, L+b, hd)
    v = cache.values[i][:, :, : start + b]
    if b == 1 and decode_attention.usable(q) and (mask is None or write is not None):
        # one query per row: the kernel streams the cache; rows of different lengths see
        # their own slots up to where this step wrote (the mask of _attention_mask)
        last = None if write is None else cache.lens
        r, _, _, hd = q.shape  # explicit sizes: a step may have no rows
        out = decode_attention.attend(q.view(r, heads, hd), k, v, attn.scaling, last=last)
        return attn.out_proj(out.view(r, 1, heads * hd))
    if causal and decode_attention.usable(q):
        r, _, _, hd = q.shape
        base = cache.lens if write is not None else torch.full((r,), start, dtype=torch.long, device=q.device)
        last = (base.unsqueeze(1) + torch.arange(b, device=q.device)).reshape(r * b)  # (R·b,) each query's slot
        out = decode_attention.attend(q.transpose(1, 2).reshape(r * b, heads, hd), k, v, attn.scaling,
                                      kv_row=torch.arange(r, device=q.device).repeat_interleave(b), last=last)
        return attn.out_proj(out.view(r, b, heads * hd))
    return attn.out_proj(_merge_heads(_attend(q, k, v, mask, attn.scaling)))


def _stacked_qkv(attn: Any) -> Callable[[Tensor], Tensor]:
    return stacked_linear([attn.q_proj, attn.k_proj, attn.v_proj])


class TransformerStepper:
    """Runs one fairseq ``TransformerDecoder`` block-incrementally (see the module docstring)."""

    def __init__(self, decoder: Any) -> None:
        problem = check_supported(decoder)
        if problem is not None:
            raise FairseqStreamError(f"this strategy needs a transformer decoder: {problem}")
        # a weak reference: steppers are kept per decoder while it lives (model/model_step._STEPPERS)
        self._decoder = weakref.ref(decoder)
        first = decoder.layers[0].self_attn
        self.heads = first.num_heads
        self.head_dim = first.head_dim
        self._qkv: List[Callable[[Tensor], Tensor]] = []
        self._qkv_of: Any = None  # the parameters the stacked copies were made from
        self._qkv_version = 0  # a step graph reads the stacked copies of one version
        # --step-mode static|graph, kept across runs (a benchmark's repeats, a session's calls replay them):
        # the slot caches, lent one lease at a time; a buffer it drops takes its step graphs with it
        self.pool = StaticCachePool(on_evict=_forget_graphs_of(weakref.ref(self)))
        # the encoder slots and input/output buffers no stream holds now (a shared output buffer that
        # grows takes the graphs bound to it along)
        self.streams = StreamBufferSets(on_evict=_forget_graphs_of(weakref.ref(self)))
        self.graphs: Optional[StepGraphs] = None  # --step-mode graph: built by step_graphs()
        # what a strategy's steps inside the region keep across runs (its sentence arenas: search/sentence_buckets.py),
        # by name; the model does not look inside
        self.strategy_pools: Dict[str, Any] = {}
        # --step-mode native: the weights collected for the C++ step (model/native_step.py), or why not
        self._native: Any = None
        self._native_version = -1  # the _qkv_version it was built from

    def step_graphs(self) -> StepGraphs:
        """The model's step graphs (one memory pool), shared by every stream of it."""
        if self.graphs is None:
            self.graphs = StepGraphs()
        return self.graphs

    @property
    def decoder(self) -> Any:
        return self._decoder()

    def _refresh_stacked(self) -> None:
        # Rebuilt when the model's parameters change (dtype/device moves, new weights, int8).
        key = weight_key(self.decoder.layers[0].self_attn.q_proj)
        if self._qkv_of != key:
            self._qkv = [_stacked_qkv(layer.self_attn) for layer in self.decoder.layers]
            self._qkv_of = key
            self._qkv_version += 1

    # ---- encoder side -------------------------------------------------------------------
    def encoder_memory(self, encoder_out: Dict[str, List[Tensor]], *, keep_padding: bool = False) -> EncoderMemory:
        """Encoder keys/values of every layer, once per sentence.

        The padding mask is dropped when nothing is padded (a host read), unless
        ``keep_padding``: a stream's slots keep a mask anyway, and encode at every refill.
        """
        enc = encoder_out["encoder_out"][0]  # (S, N, d)
        pads = encoder_out.get("encoder_padding_mask") or []
        pad = pads[0] if len(pads) > 0 and pads[0] is not None else None
        if pad is not None and not keep_padding and not bool(pad.any()):
            pad = None
        keys, values = [], []
        for layer in self.decoder.layers:
            attn = layer.encoder_attn
            s, n, _ = enc.shape
            keys.append(attn.k_proj(enc).view(s, n, self.heads, self.head_dim).permute(1, 2, 0, 3).contiguous())
            values.append(attn.v_proj(enc).view(s, n, self.heads, self.head_dim).permute(1, 2, 0, 3).contiguous())
        return EncoderMemory(keys, values, pad)

    def empty_cache(self, rows: int, like: Tensor, *, static: bool = False, fixed: bool = False) -> RowCache:
        """A cache of ``rows`` rows with nothing fed: slot buffers of the static pool (``static``), or
        buffers of a cache that never moves (``fixed``, model/row_arena.py), or buffers of its own."""
        n = len(self.decoder.layers)
        lens = torch.zeros(rows, dtype=torch.long, device=like.device)
        if static:
            lease = self.pool.acquire(row_bucket(rows), length_bucket(SLACK), like, n, self.heads, self.head_dim)
            return RowCache.static(self.pool, lease, lens, 0)
        if fixed:  # buffers not zeroed: a slot is read only after its step wrote it (row_arena.FIRST_SLOTS: why so many)
            for slots in (FIRST_SLOTS, SLACK):
                shape = (rows, self.heads, slots, self.head_dim)
                try:
                    keys, values = [untouched(like, shape) for _ in range(n)], [untouched(like, shape) for _ in range(n)]
                    break
                except RuntimeError:  # the address space refused (strict overcommit): small buffers, grown as needed
                    if slots == SLACK:
                        raise
            return RowCache.fixed(keys, values, lens, 0, slots=SLACK)
        shape = (rows, self.heads, SLACK, self.head_dim)
        return RowCache.of([like.new_zeros(shape) for _ in range(n)], [like.new_zeros(shape) for _ in range(n)], lens, 0)

    # ---- decoder side -------------------------------------------------------------------
    def embed(self, tokens: Tensor, positions: Tensor, max_position: Optional[int] = None) -> Tensor:
        """Token + position embeddings of ``tokens`` (R, b) at 0-based target ``positions`` (R, b)."""
        dec = self.decoder
        custom = getattr(dec, "embed_block", None)
        if custom is not None:  # models with their own position scheme (the IBDecoder family)
            return custom(tokens, positions)
        x = dec.embed_scale * dec.embed_tokens(tokens)
        if dec.quant_noise is not None:
            x = dec.quant_noise(x)
        if dec.project_in_dim is not None:
            x = dec.project_in_dim(x)
        if dec.embed_positions is not None:
            x = x + position_embeddings(dec.embed_positions, positions, max_position)
        if dec.layernorm_embedding is not None:
            x = dec.layernorm_embedding(x)
        return x

    def forward(
        self,
        cache: RowCache,
        tokens: Tensor,
        positions: Tensor,
        memory: EncoderMemory,
        index: SentenceIndex,
        block_mask: Optional[Tensor] = None,
        max_position: Optional[int] = None,
    ) -> Tuple[Tensor, RowCache]:
        """Decoder features of a block and the cache extended by it.

        ``tokens``/``positions``: (R, b). ``block_mask``: additive (b, b) or (R, b, b) mask
        inside the block, or (b, L + b) / (R, b, L + b) over cache and block; ``None`` means
        causal. Returns features (R, b, d_out) after the final layer norm and output
        projection-in, ready for :meth:`logits`, and the new cache.
        """
        b = tokens.size(1)
        x = self.embed(tokens, positions, max_position)
        cache = cache.gathered()  # a cache that never moves (a native stream's step the operator declined)
        cache.reserve(b)
        mask, write = self._attention_mask(cache, b, block_mask, x)
        self._refresh_stacked()
        causal = block_mask is None
        for i, layer in enumerate(self.decoder.layers):
            x = self._layer(
                layer, x,
                lambda h, i=i, attn=layer.self_attn: _self_attention(attn, self._qkv[i], h, cache, i, mask, write,
                                                                     causal),
                lambda h, i=i, attn=layer.encoder_attn: _encoder_attention(attn, h, memory, i, index))
        return self._output(x), cache.advanced(b)

    def logits(self, features: Tensor) -> Tensor:
        return self.decoder.output_layer(features)

    # ---- the native step (--step-mode native; model/native_step.py) --------------------------
    def forward_native(self, cache: RowCache, tokens: Tensor, positions: Tensor, memory: EncoderMemory,
                       index: SentenceIndex, block_mask: Optional[Tensor],
                       max_position: Optional[int] = None) -> Union[Tuple[Tensor, RowCache], str]:
        """:meth:`forward` and :meth:`logits` as one C++ call: the same logits (R, b, V) bit for bit,
        and the cache extended by the block; or, where the operator does not run this step, why not
        (the caller runs the eager step)."""
        r, b = tokens.shape
        if block_mask is not None:
            return "a block with its own mask"
        if r == 0:
            return "a step with no rows"
        operands = self._native_operands(cache, b, int(positions.max()) if max_position is None else max_position,
                                         memory, index)
        if isinstance(operands, str):
            return operands
        native, table, rest = operands
        logits = torch.ops.fairseq_stream.decoder_step(native, tokens, positions, table, *rest)  # (R, b, V)
        return logits, cache.advanced(b)

    def greedy_native(self, cache: RowCache, first: Tensor, steps: int, positions: Tensor, memory: EncoderMemory,
                      index: SentenceIndex, max_position: int) -> Union[Tuple[Tensor, RowCache], str]:
        """``steps`` calls of :meth:`forward_native`, the first fed the block ``first`` (R, f) at
        ``positions`` (R, f) (at most ``max_position``), each next one the arg-max of the last one's
        last logits, as one C++ call: the arg-maxes (R, steps) and the cache extended by the
        ``f + steps − 1`` tokens fed; or why the operator cannot run them."""
        if first.size(0) == 0:
            return "a step with no rows"
        fed = first.size(1) + steps - 1
        operands = self._native_operands(cache, fed, max_position + steps - 1, memory, index)
        if isinstance(operands, str):
            return operands
        native, table, rest = operands
        tokens = torch.ops.fairseq_stream.decoder_greedy(native, first, steps, positions, table, *rest)  # (R, steps)
        return tokens, cache.advanced(fed)

    def _native_operands(self, cache: RowCache, fed: int, max_position: int, memory: EncoderMemory,
                         index: SentenceIndex) -> Union[Tuple[Any, Optional[Tensor], Tuple[Any, ...]], str]:
        """What both native operators take after their tokens and positions, with the cache made ready
        for ``fed`` more tokens (positions up to ``max_position``): the NativeDecoder, the sinusoidal
        position table (None for learned positions) and the cache and memory operands; or why not."""
        native = self.native_decoder()
        if isinstance(native, str):
            return native
        cache.reserve(fed)
        cache.write_slots(fed)  # a cache that never moves: each row's home at every slot the calls fill
        # a sinusoidal table grows here, as the eager step's embed() grows it; a learned one is the NativeDecoder's
        grown = self._prepare_positions(max_position, cache.lens.device)
        table = None if grown is None else self.decoder.embed_positions.weights
        return native, table, (cache.keys, cache.values, cache.width, None if cache.uniform else cache.lens,
                               memory.keys, memory.values, memory.padding, index.memory_rows(memory.modulus),
                               cache.table, cache.home)

    def native_decoder(self) -> Any:
        """The decoder's NativeDecoder, built again when its stacked q/k/v copies are; or why there is none."""
        self._refresh_stacked()
        if self._native_version != self._qkv_version:
            from fairseq_stream.model import native_step

            self._native = native_step.build(self.decoder, self._qkv)
            self._native_version = self._qkv_version
        return self._native

    # ---- the static step (--step-mode static|graph; model/static_step.py) -------------------
    def forward_static(self, cache: RowCache, tokens: Tensor, memory: EncoderMemory,
                       index: SentenceIndex, block_mask: Optional[Tensor], *, buffers: StreamBuffers,
                       graphs: Optional[StepGraphs], stats: Optional[StepModeStats],
                       tail: Optional[StepTail] = None) -> Optional[Tuple[Tensor, RowCache, str, Any]]:
        """:meth:`forward` and :meth:`logits` over the whole buffer of a static ``cache``.

        The step computes every row of the cache's row bucket and attends over every slot of
        its slot bucket (padding rows and slots masked), reading and writing only buffers fixed
        for that bucket, so it is one CUDA graph replay under ``graphs``. What changes between
        steps (tokens, lengths, which encoder slot and query column each row uses) is written into
        the bucket's input buffer first (of the stream's ``buffers``: a stream of its own's, so that
        streams stepping alternately do not see each other's inputs); the positions are the rows'
        cache lengths, computed in the region. Where the rows are the last step's reordered
        (:class:`_Chain`), what travels with a row — its encoder slot, the inputs of a ``tail`` that
        says how they follow (``StepTail.follow``) — is gathered by the parents inside the region.
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
        self._refresh_stacked()
        table = self._prepare_positions(slots - 1, buf.device)
        wq = next_pow2(max(1, index.width))  # query columns per sentence in encoder attention
        chain, follows, tail, io = self._chained_io(cache, source, buffers, r, b, tail, block_mask is not None)
        search = _search_of(tail, buf.size(0) * b)
        from_rows = _write_inputs(io, cache, tokens, index, wq, parents, chain, search, memory)
        given = tail is None or follows or (search is not None and search.tail_inputs is not None)
        for into, live in zip(io.tail_in, () if given else tail.inputs):  # type: ignore[union-attr]
            into[: r * b].copy_(live)
        if block_mask is not None:
            _set_block_mask(io, block_mask, cache.width, b)
        gather = None if chain is None else (chain.io.ints, chain.io.tail_in if follows else None)
        how = self._run_region(buf, io, memory, b, wq, table, tail, source, gather, graphs, stats, search, from_rows)
        io.steps += 1
        if stats is not None:
            stats.inputs_in_step += chain is not None
        if source is not None:
            cache.pending = cache.chain_from = None  # done: the source goes back to the pool when nothing else holds it
            if stats is not None:
                stats.reorders_in_step += 1
        made = None if tail is None else LiveRows(tuple(t[: r * b] for t in io.tail_out), searched=search is not None)
        out = cache.advanced(b)
        out.last_step = _Chain(io, io.steps, b, None if tail is None else tail.key)
        return io.out[:r], out, how, made

    def _chained_io(self, cache: RowCache, source: Optional[Tensor], buffers: StreamBuffers, r: int, b: int,
                    tail: Optional[StepTail], custom: bool,
                    ) -> "Tuple[Optional[_Chain], bool, Optional[StepTail], _StaticIO]":
        """The step the rows' inputs are gathered from (:func:`_chain_of`; rows that stay in place only from the
        last step's own buffers), whether the tail's inputs follow too, the tail and the bucket's buffers."""
        chain = _chain_of(cache, source, b)
        follows, tail, io = self._bucket_io(cache, buffers, r, b, tail, custom, chain)
        if chain is not None and source is None and chain.io is not io:  # in place, but on other buffers
            chain = None
            follows, tail, io = self._bucket_io(cache, buffers, r, b, tail, custom, None)
        return chain, follows, tail, io

    def _bucket_io(self, cache: RowCache, buffers: StreamBuffers, r: int, b: int, tail: Optional[StepTail],
                   custom: bool, chain: "Optional[_Chain]") -> "Tuple[bool, Optional[StepTail], _StaticIO]":
        """Whether ``tail``'s inputs follow the rows' parents from ``chain``'s step, the tail (None where its inputs
        are not one per scored row: the strategy runs its layer itself) and the bucket's buffers for it."""
        follows = (chain is not None and tail is not None and chain.tail_key == tail.key
                   and getattr(tail, "follow", None) is not None)
        regional = getattr(getattr(tail, "search", None), "tail_inputs", None) is not None  # made in the region
        if tail is not None and not follows and not regional and any(t.size(0) != r * b for t in tail.inputs):
            tail = None
        buf = cache.lease.buffer  # type: ignore[union-attr]
        io = self._static_io(buffers, buf.size(0), b, buf.size(3), buf, custom=custom, tail=tail,
                             tail_like=chain.io.tail_in if follows else None)  # type: ignore[union-attr]
        return follows, tail, io

    def _run_region(self, buf: Tensor, io: "_StaticIO", memory: EncoderMemory, b: int, wq: int, table: Optional[int],
                    tail: Optional[StepTail], source: Optional[Tensor],
                    gather: "Optional[Tuple[Tensor, Optional[List[Tensor]]]]", graphs: Optional[StepGraphs],
                    stats: Optional[StepModeStats], search: Any = None, from_rows: bool = False) -> str:
        """The region run (``static``), or under ``graphs`` replayed or captured by its key; how it ran."""
        def body() -> None:
            self._static_body(buf, io, memory, b, wq, tail, source, gather, search, from_rows)

        if graphs is None:
            body()
            return "static"
        key, keep = self._region_key(buf, source, io, memory, b, wq, table, tail, gather)
        if search is not None:
            key, keep = key + (search.key, from_rows), keep + list(search.tensors)
        return graphs.run(key, body, keep, StepModeStats() if stats is None else stats)

    def _region_key(self, buf: Tensor, source: Optional[Tensor], io: "_StaticIO", memory: EncoderMemory, b: int,
                    wq: int, table: Optional[int], tail: Optional[StepTail],
                    gather: "Optional[Tuple[Tensor, Optional[List[Tensor]]]]" = None,
                    ) -> Tuple[Tuple[Any, ...], List[Tensor]]:
        """A step graph's key — every tensor the region reads or writes by address: the cache (and its reorder's
        source), the stream's buffers (and the last step's, where the rows' inputs are gathered from them), the
        position table; then the shapes — and the tensors the graph keeps."""
        # a cache buffer is a view of a pool arena (the same address for every bucket): its rows and slots, and
        # its reorder source's rows, are part of the key
        src_ints, src_tail = (None, None) if gather is None else gather
        key = (buf.data_ptr(), None if source is None else source.data_ptr(), io.ints.data_ptr(), io.out.data_ptr(),
               _memory_key(memory), buf.size(0), buf.size(3), None if source is None else source.size(0), b, wq,
               io.mask is not None, io.block_in_region, table, self._qkv_version, None if tail is None else tail.key,
               None if src_ints is None else (src_ints.data_ptr(), src_ints.size(0)),
               None if src_tail is None else tuple(t.data_ptr() for t in src_tail))
        keep = ([buf, io.ints, io.out] + ([] if source is None else [source]) + ([] if io.mask is None else [io.mask])
                + ([] if io.block is None else [io.block])
                + io.tail_in + io.tail_out + _memory_tensors(memory)
                + ([] if src_ints is None else [src_ints]) + list(src_tail or ()))
        return key, keep

    def _static_io(self, buffers: StreamBuffers, rows: int, b: int, slots: int, like: Tensor, *,
                   custom: bool, tail: Optional[StepTail] = None,
                   tail_like: Optional[List[Tensor]] = None) -> "_StaticIO":
        """The stream's buffers of a row bucket (made the first time: a tail's inputs like ``tail_like``, the last
        step's, where they are gathered from there, else like ``tail.inputs``)."""
        vocab = self.decoder.output_projection.out_features

        def make() -> _StaticIO:
            ints = torch.zeros(rows, b + INPUT_COLS, dtype=torch.long, device=like.device)
            mask = like.new_zeros(1, 1, b, slots) if custom else None
            io = _StaticIO(ints, mask, like.new_zeros(0, b, vocab))
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

    def _prepare_positions(self, max_position: int, device: torch.device) -> Optional[int]:
        """Grow a sinusoidal position table to ``max_position`` now, outside any capture (a graph
        reads the table it was captured with) or the native call (which reads it as given); its
        address, which step graphs are keyed by (None: no sinusoidal table)."""
        from fairseq.modules import SinusoidalPositionalEmbedding

        module = self.decoder.embed_positions
        if getattr(self.decoder, "embed_block", None) is None and isinstance(module, SinusoidalPositionalEmbedding):
            _grow_sinusoidal(module, max_position)
            return module.weights.data_ptr()
        return None

    def _static_body(self, buf: Tensor, io: "_StaticIO", memory: EncoderMemory, b: int, wq: int,
                     tail: Optional[StepTail] = None, source: Optional[Tensor] = None,
                     gather: "Optional[Tuple[Tensor, Optional[List[Tensor]]]]" = None, search: Any = None,
                     from_rows: bool = False) -> None:
        """The step proper: every tensor it makes has a shape fixed by the bucket (rows, slots, b); first, with
        ``from_rows``, the rows' inputs from the last search step's next rows (``search.bucket``); then the
        last step's cache reorder from ``source`` (the parents in ``io.ints``), where one is due, and with it
        what travels with the rows from the last step's buffers (``gather``: its input buffer, whose encoder
        slots each row takes from its parent, and its tail inputs, which ``tail.follow`` turns into this
        step's); then ``tail`` (the strategy's output layer) over its logits, into ``io.tail_out``, and the
        strategy's ``search`` step from those (``StepTail.search``)."""
        ints = io.ints
        rows, slots, layers = ints.size(0), buf.size(3), buf.size(1) // 2
        if from_rows:
            _inputs_from_rows(ints, search.bucket.next_inputs(rows), gather[0], b, wq)  # type: ignore[index]
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
        x = self.embed(tokens, ends, slots - 1)  # (R, b, d)
        write = ends.view(rows, 1, b, 1).expand(rows, self.heads, b, self.head_dim)
        # a CPU's float32 causal step (one query or a causal block per row): the C++ kernel, as the eager step
        kernel = decode_attention.usable(x) and io.mask is None
        if kernel:
            mask = None
        elif io.block_in_region:  # (1, 1, b, slots) additive, rows of one length: placed here
            mask = _region_block_mask(io.block, lens, slots, b)  # type: ignore[arg-type]
        elif io.mask is not None:
            mask = io.mask  # (1, 1, b, slots) additive, rows of one length
        else:  # causal, per row: query j of row r sees slots <= lens[r] + j
            mask = (torch.arange(slots, device=ints.device) <= ends.unsqueeze(2)).unsqueeze(1)  # (R, 1, b, slots)
        layout = None if kernel else _slot_layout(kv_row, slot, wq, b, memory)
        for i, layer in enumerate(self.decoder.layers):
            keys, values = buf[:, i], buf[:, layers + i]  # (R, H, slots, hd) views of the stacked buffer
            x = self._layer(
                layer, x,
                lambda h, i=i, attn=layer.self_attn, k=keys, v=values: _static_self_attention(
                    attn, self._qkv[i], h, k, v, write, mask, ends if kernel else None),
                lambda h, i=i, attn=layer.encoder_attn: _static_encoder_attention(attn, h, memory, i, kv_row, layout))
        io.out.copy_(self.logits(self._output(x)))
        if tail is not None:  # the strategy's output layer, in the region too (no launch after a replay)
            if search is not None and search.tail_inputs is not None:  # its inputs from the search step's arena
                for into, value in zip(io.tail_in, search.tail_inputs()):  # (the arena's rows may be more)
                    into.copy_(value[: into.size(0)])
            scores = io.out.view(rows * b, -1)
            made = tail(search_scores(scores), *io.tail_in)
            for into, out in zip(io.tail_out, made):
                into.copy_(out)
            if search is not None:
                search(io.tail_out)

    def _attention_mask(self, cache: RowCache, b: int, block_mask: Optional[Tensor],
                        like: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        """Additive mask (R or 1, 1, b, L + b) of the block's self-attention, and where to write.

        Rows of one length (beam groups) see their ``width`` cached slots and the block at
        ``[width, width + b)`` under ``block_mask`` ((b, b) or (R, b, b) inside the block, or
        (b, L + b) / (R, b, L + b) over cache and block; ``None`` is causal). Rows of
        different lengths (Jacobi, FIFO) write their block at their own ``lens[r]`` and query
        ``j`` sees slots ``< lens[r] + j + 1``: causal, built on the device.
        """
        width = cache.width
        if not cache.uniform:
            if block_mask is not None:
                raise FairseqStreamError("a custom block mask needs rows of one length")
            offsets = torch.arange(b, device=like.device)
            ends = cache.lens.unsqueeze(1) + offsets  # (R, b) last visible slot per query
            slots = torch.arange(width + b, device=like.device)
            mask = like.new_zeros(cache.rows, 1, b, width + b).masked_fill(
                (slots > ends.unsqueeze(2)).unsqueeze(1), float("-inf"))
            write = ends.view(cache.rows, 1, b, 1).expand(cache.rows, self.heads, b, self.head_dim)
            return mask, write
        if block_mask is None:
            if b == 1:
                return None, None
            block_mask = torch.triu(like.new_full((b, b), float("-inf")), 1)
        bm = block_mask.to(like.dtype)
        bm = bm.unsqueeze(0) if bm.dim() == 2 else bm  # (1 or R, b, b or L + b)
        if bm.size(-1) == b:
            bm = torch.cat([like.new_zeros(bm.size(0), b, width), bm], dim=2)
        return bm.unsqueeze(1), None

    def _layer(self, layer: Any, x: Tensor, self_attention: Callable[[Tensor], Tensor],
               encoder_attention: Callable[[Tensor], Tensor]) -> Tensor:
        # TransformerDecoderLayerBase.forward in eval mode (dropout is the identity). Each of the
        # three sublayers normalises its input (pre-norm) or its residual sum (post-norm). The
        # attentions are the eager step's or the static step's (same arithmetic, other layouts).
        pre = layer.normalize_before
        h = self_attention(layer.self_attn_layer_norm(x) if pre else x)
        if layer.c_attn is not None:
            r, b, _ = h.shape
            h = torch.einsum("rbhd,h->rbhd", h.view(r, b, layer.nh, layer.head_dim), layer.c_attn).reshape(r, b, -1)
        if layer.attn_ln is not None:
            h = layer.attn_ln(h)
        x = x + h if pre else layer.self_attn_layer_norm(x + h)
        h = encoder_attention(layer.encoder_attn_layer_norm(x) if pre else x)
        x = x + h if pre else layer.encoder_attn_layer_norm(x + h)
        h = fc1_activation(layer, layer.final_layer_norm(x) if pre else x)
        if layer.ffn_layernorm is not None:
            h = layer.ffn_layernorm(h)
        h = layer.fc2(h)
        residual = x if layer.w_resid is None else torch.mul(layer.w_resid, x)
        return residual + h if pre else layer.final_layer_norm(residual + h)

    def _output(self, x: Tensor) -> Tensor:
        """Final layer norm and projection out of the last layer's output."""
        dec = self.decoder
        if dec.layer_norm is not None:
            x = dec.layer_norm(x)
        if dec.project_out_dim is not None:
            x = dec.project_out_dim(x)
        return x


def _forget_graphs_of(stepper: "weakref.ref[TransformerStepper]") -> Callable[[Tensor], None]:
    """The eviction hook of the pool and of the stream buffer sets: the graphs bound to a dropped buffer
    go too (a weak reference: both belong to the stepper)."""
    def forget(buffer: Tensor) -> None:
        owner = stepper()
        if owner is not None and owner.graphs is not None:
            owner.graphs.forget(buffer.data_ptr())

    return forget


#: the columns of a static step's input buffer (``_StaticIO.ints``) after the ``b`` tokens: the row's cache length
#: (its next position), its query column among its sentence's rows, its parent in the reorder source, its encoder
#: slot — last, so that the columns written before a step whose encoder slots the region gathers are one block
LENS_COL, SLOT_COL, PARENT_COL, KV_COL = 0, 1, 2, 3
INPUT_COLS = 4


@dataclass
class _StaticIO:
    """A row bucket's input and output buffers: what a static step reads besides the caches."""

    ints: Tensor  # (R, b + INPUT_COLS): tokens (b), cache length, query column, parent row, encoder slot
    mask: Optional[Tensor]  # (1, 1, b, slots) additive block mask, or None (causal)
    out: Tensor  # (R, b, V) logits
    tail_in: List[Tensor] = field(default_factory=list)  # (R·b, ...) a StepTail's inputs
    tail_out: List[Tensor] = field(default_factory=list)  # (R·b, ...) what it returns
    steps: int = 0  # steps run on these buffers: a _Chain is good while no other step has run on them
    padded: Tuple[Any, ...] = ()  # (columns key, r) of the last fill: rows [r, R) hold that key's padding row
    block: Optional[Tensor] = None  # (b, b) a block mask inside the block, which the region places itself
    block_of: Tuple[Any, ...] = ()  # (tensor, version) it was copied from: copied again only when it changes
    block_in_region: bool = False  # this step's mask is made in the region from ``block`` (else ``mask`` is filled)


@dataclass(frozen=True)
class _Chain:
    """The static step a cache's rows came out of (``RowCache.last_step``; after a reorder ``RowCache.chain_from``):
    its input buffers, which hold each row's encoder slot and tail inputs while no other step ran on them
    (``io.steps == steps``), its block width and its tail's key."""

    io: _StaticIO
    steps: int
    b: int
    tail_key: Optional[Tuple[Any, ...]]


def _search_of(tail: Optional[StepTail], rows: int) -> Any:
    """``tail``'s search step where the region can run it: the tail has one (a beam's, a Jacobi iteration's) and
    it takes a bucket of ``rows`` rows (``search.fits``)."""
    search = None if tail is None else getattr(tail, "search", None)
    return search if search is not None and search.fits(rows) else None


def _chain_of(cache: RowCache, source: Optional[Tensor], b: int) -> "Optional[_Chain]":
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


def _write_inputs(io: "_StaticIO", cache: RowCache, tokens: Tensor, index: SentenceIndex, wq: int,
                  parents: Optional[Tensor], chain: "Optional[_Chain]", search: Any, memory: EncoderMemory) -> bool:
    """The rows' inputs into ``io`` before a static step's region; whether the region reads them itself instead:
    the rows are the last search step's next rows in its arena (a beam's chain of one-token steps,
    ``search.gives_inputs``), so nothing is written between the steps (the region writes the padding rows too)."""
    r, b = tokens.shape
    if chain is not None and cache.uniform and search is not None and search.gives_inputs(tokens, index.slot, parents):
        io.padded = (_columns_key(io.ints, b + INPUT_COLS - 1, b, wq), r)
        return True
    # every input written here, or (a chain) those that do not travel with the rows: the encoder slots and the
    # tail's inputs are gathered in the region
    _fill_inputs(io, tokens, cache.lens, index.slot, wq, parents,
                 None if chain is not None else index.memory_rows(memory.modulus))
    return False


def _columns_key(ints: Tensor, f: int, b: int, wq: int) -> Tuple[Any, ...]:
    """The key of an input layout of ``f`` columns (:data:`_PADDING_ROWS`, ``_StaticIO.padded``)."""
    return (f, b, wq, ints.device)


def _inputs_from_rows(ints: Tensor, rows: Tuple[Tensor, Tensor, Tensor, Tensor], src_ints: Tensor, b: int,
                      wq: int) -> None:
    """Every row's inputs in ``ints`` from a search step's next rows over the row bucket (feed (R, b), place among
    the sentence's rows, parent row, live: ``SentenceBucket.next_inputs``), in device operations (the region's):
    a live row's cache length is its parent's in the last step's buffer ``src_ints`` plus the ``b`` tokens fed
    there (rows of one length), a padding row is the padding row of :data:`_PADDING_ROWS` — what
    :func:`_fill_inputs` writes from the same rows on the host."""
    feed, slot, parents, live = rows
    dead = ~live
    parents = parents.masked_fill(dead, 0)
    lens = src_ints[:, LENS_COL + b].index_select(0, parents) + b
    cols = torch.stack([lens.masked_fill(dead, 0), slot.masked_fill(dead, wq), parents], dim=1)
    ints[:, : b + INPUT_COLS - 1].copy_(torch.cat([feed.masked_fill(dead.unsqueeze(1), 0), cols], dim=1))


def _fill_inputs(io: "_StaticIO", tokens: Tensor, lens: Tensor, slot: Tensor, wq: int,
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


def _set_block_mask(io: "_StaticIO", block_mask: Tensor, width: int, b: int) -> None:
    """A step's block mask: a (b, b) one inside the block into ``io.block`` (copied only when it is another tensor or
    was written since), which the region places after the rows' cached slots itself (:func:`_region_block_mask`);
    one over cache and block (b, width + b) into ``io.mask`` here."""
    io.block_in_region = block_mask.size(-1) == b
    if not io.block_in_region:
        _fill_block_mask(io.mask, block_mask, width, b)  # type: ignore[arg-type]
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


def _region_block_mask(block: Tensor, lens: Tensor, slots: int, b: int) -> Tensor:
    """(1, 1, b, slots) the additive mask of a step whose rows have one length (``lens[0]``: row 0 is live) — its
    cached slots visible, the block at ``[width, width + b)`` under ``block`` (b, b), −inf after — in device
    operations (the region's): what :func:`_fill_block_mask` writes on the host."""
    rel = torch.arange(slots, device=lens.device) - lens[:1]  # (slots,) each slot's place after the cached ones
    inside = (rel >= 0) & (rel < b)
    placed = block.index_select(1, rel.clamp(0, b - 1))  # (b, slots)
    outside = torch.full_like(placed, float("-inf")).masked_fill(rel < 0, 0.0)
    return torch.where(inside, placed, outside).view(1, 1, b, slots)


def _fill_block_mask(mask: Tensor, block_mask: Tensor, width: int, b: int) -> None:
    """``mask`` (1, 1, b, slots) from a (b, b) mask inside the block or a (b, width + b) one over
    cache and block (rows of one length: the block sits at ``[width, width + b)``)."""
    bm = block_mask.to(mask.dtype)
    mask.fill_(float("-inf"))
    if bm.size(-1) == b:
        mask[0, 0, :, :width] = 0.0
        mask[0, 0, :, width: width + b] = bm
    else:
        mask[0, 0, :, : width + b] = bm


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
    q = _split_heads(q, heads)  # (R, H, b, hd)
    keys.scatter_(2, write, _split_heads(k_new, heads))
    values.scatter_(2, write, _split_heads(v_new, heads))
    if last is not None:  # (R, b): each query's last slot; a block runs as one query per row
        hd, b = q.size(-1), q.size(2)
        qrow = None if b == 1 else torch.arange(rows, device=q.device).repeat_interleave(b)
        out = decode_attention.attend(q.transpose(1, 2).reshape(rows * b, heads, hd), keys, values, attn.scaling,
                                      kv_row=qrow, last=last.reshape(rows * b))
        return attn.out_proj(out.view(rows, b, heads * hd))
    return attn.out_proj(_merge_heads(_attend(q, keys, values, mask, attn.scaling)))


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
    out = _attend(qp.view(n, width, heads, hd).transpose(1, 2), memory.keys[layer], memory.values[layer], visible,
                  attn.scaling)  # (n, H, width, hd)
    out = out.transpose(1, 2).reshape(n * width, d).index_select(0, flat)
    return attn.out_proj(out.view(rows, b, d))


def fc1_activation(layer: Any, x: Tensor) -> Tensor:
    """``activation_fn(fc1(x))``; a ReLU is computed inside the product where the kernel can (oneDNN's
    post-op, the int8 row operator's): the same numbers without a pass over the hidden layer."""
    fc1 = layer.fc1
    if layer.activation_fn is F.relu and x.device.type == "cpu":
        if isinstance(fc1, OneDnnLinear) and x.dtype == torch.float32:
            return torch.ops.mkldnn._linear_pointwise(x, fc1.packed, fc1.bias, "relu", [], "")
        if is_quantized_linear(fc1):
            return fc1(x, relu=True)
    return layer.activation_fn(fc1(x))


def position_embeddings(module: Any, positions: Tensor, max_position: Optional[int] = None) -> Tensor:
    """fairseq's positional embedding of 0-based target positions (R, b) → (R, b, d).

    fairseq numbers positions from ``padding_idx + 1`` (``utils.make_positions``).
    ``max_position`` is a host-known bound of ``positions`` (read from them otherwise).
    """
    from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding

    ids = positions + module.padding_idx + 1
    if isinstance(module, SinusoidalPositionalEmbedding):
        if max_position is None:
            max_position = int(positions.max()) if positions.numel() else 0
        _grow_sinusoidal(module, max_position)
        return F.embedding(ids, module.weights.detach())
    if isinstance(module, LearnedPositionalEmbedding):
        return F.embedding(ids, module.weight, module.padding_idx)
    raise FairseqStreamError(f"unsupported positional embedding {type(module).__name__}")


def _grow_sinusoidal(module: Any, max_position: int) -> None:
    """fairseq's sinusoidal table covering 0-based position ``max_position``, grown geometrically
    (a long run regrows it a few times at most)."""
    from fairseq.modules import SinusoidalPositionalEmbedding

    needed = max_position + module.padding_idx + 2
    if needed > module.weights.size(0):
        module.weights = SinusoidalPositionalEmbedding.get_embedding(
            max(needed, 2 * module.weights.size(0)), module.embedding_dim, module.padding_idx
        ).to(module.weights)
