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
``tests/unit/test_block_decoder.py`` checks the result against fairseq's own forward. The same layers run
over fixed buffers in the static step (``--step-mode static|graph``, :mod:`fairseq_stream.model.static`)
and as one C++ call in the native one (``--step-mode native``, :mod:`fairseq_stream.model.native_decoder`).
"""
from __future__ import annotations

import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.linear_kernels import OneDnnLinear, PackedLinear
from fairseq_stream.model.native_loops import BeamLoopRun, BeamLoopSearch, VerifyRun
from fairseq_stream.model.quantize import is_quantized_linear, stacked_linear, weight_key
from fairseq_stream.ops import decode_attention
from fairseq_stream.model.row_arena import FIRST_SLOTS, RowsReached, kernel_loaded, untouched
from fairseq_stream.model.row_cache import SLACK, EncoderMemory, RowCache, SentenceIndex


#: decoder_jacobi's two-token table where lookahead has no prior (Jacobi's own guesses, a pool alone)
_NO_PRIOR = torch.empty(0, dtype=torch.long)

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


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(R, b, d) → (R, H, b, hd)."""
    r, b, d = x.shape
    return x.view(r, b, heads, d // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(R, H, b, hd) → (R, b, d)."""
    r, h, b, hd = x.shape
    return x.transpose(1, 2).reshape(r, b, h * hd)


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float) -> Tensor:
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
        out = attend(q, keys, values, visible, attn.scaling)  # (R, H, b, hd)
        return attn.out_proj(out.transpose(1, 2).reshape(r, b, d))
    n, w = len(index.sentences), index.width
    qp = q.new_zeros(n, heads, w, b, hd)
    qp[index.local, :, index.slot] = q
    out = attend(qp.view(n, heads, w * b, hd), keys, values, visible, attn.scaling)  # (n, H, W·b, hd)
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
    q = split_heads(q, heads)  # (R, H, b, hd)
    start = cache.width
    if write is None:
        cache.keys[i][:, :, start: start + b] = split_heads(k_new, heads)
        cache.values[i][:, :, start: start + b] = split_heads(v_new, heads)
    else:
        cache.keys[i].scatter_(2, write, split_heads(k_new, heads))
        cache.values[i].scatter_(2, write, split_heads(v_new, heads))
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
    return attn.out_proj(merge_heads(attend(q, k, v, mask, attn.scaling)))


def _stacked_qkv(attn: Any) -> Callable[[Tensor], Tensor]:
    return stacked_linear([attn.q_proj, attn.k_proj, attn.v_proj])


def _stacked_equal(stacked: Any, attn: Any) -> bool:
    """Whether float stacked q/k/v copies still hold ``attn``'s weights and biases, bit for bit (int8 ones are
    made from an int8 copy of the model, made again when its weights change: True)."""
    weight = getattr(stacked, "weight", None)
    if not isinstance(weight, Tensor):
        return True
    parts = (attn.q_proj, attn.k_proj, attn.v_proj)
    row = 0
    for linear in parts:
        w = linear.weight
        if not torch.equal(weight[row: row + w.size(0)], w.detach()):
            return False
        row += w.size(0)
    if stacked.bias is None:
        return all(l.bias is None for l in parts)
    if any(l.bias is None for l in parts):
        return False
    return torch.equal(stacked.bias, torch.cat([l.bias.detach() for l in parts]))


class BlockDecoder:
    """Runs one fairseq ``TransformerDecoder`` block-incrementally (see the module docstring): the eager
    step (:meth:`forward`, :meth:`logits`) and the native one (:meth:`forward_native`); the static step
    (:class:`fairseq_stream.model.static.region.StaticStep`, one per decoder) runs its layers over buffers it keeps."""

    def __init__(self, decoder: Any) -> None:
        problem = check_supported(decoder)
        if problem is not None:
            raise FairseqStreamError(f"this strategy needs a transformer decoder: {problem}")
        # a weak reference: block decoders are kept per decoder while it lives (model/model_step._BLOCK_DECODERS)
        self._decoder = weakref.ref(decoder)
        self.rows_reached = RowsReached()  # the buffer rows its CPU arenas grew to (empty_cache)
        first = decoder.layers[0].self_attn
        self.heads = first.num_heads
        self.head_dim = first.head_dim
        self.qkv: List[Callable[[Tensor], Tensor]] = []
        self._qkv_of: Any = None  # the parameters the stacked copies were made from
        self._storage: Tuple[int, ...] = ()  # where every decoder parameter lived then (check_weights)
        self.qkv_version = 0  # a step graph reads the stacked copies of one version
        # --step-mode native: the weights collected for the C++ step (model/native_decoder.py), or why not
        self._native: Any = None
        self._native_version = -1  # the qkv_version it was built from

    @property
    def decoder(self) -> Any:
        return self._decoder()

    def check_weights(self) -> None:
        """Stack q/k/v again (and so build the native step again) where the decoder's weights changed since they
        were stacked: in place (a session that fine-tunes or averages them between runs, under ``--cpu-matmul
        torch``, where the decoder is the loaded one), or a parameter given new storage. Once per generator (it
        reads the q/k/v weights once): the step itself checks only where the first layer's weights live."""
        if self._qkv_of is None:
            return
        decoder = self.decoder
        storage = tuple(p.data_ptr() for p in decoder.parameters())
        if storage != self._storage or any(not _stacked_equal(stacked, layer.self_attn)
                                           for stacked, layer in zip(self.qkv, decoder.layers)):
            self._qkv_of = None

    def refresh_stacked(self) -> None:
        # Rebuilt when the model's parameters change (dtype/device moves, new weights, int8; in place: check_weights).
        key = weight_key(self.decoder.layers[0].self_attn.q_proj)
        if self._qkv_of != key:
            self._storage = tuple(p.data_ptr() for p in self.decoder.parameters())
            self.qkv = [_stacked_qkv(layer.self_attn) for layer in self.decoder.layers]
            self._qkv_of = key
            self.qkv_version += 1

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

    def empty_cache(self, rows: int, like: Tensor, *, fixed: bool = False) -> RowCache:
        """A cache of ``rows`` rows with nothing fed: buffers of a cache that never moves (``fixed``,
        model/row_arena.py), or buffers of its own (a static step's: ``StaticStep.empty_cache``)."""
        n = len(self.decoder.layers)
        lens = torch.zeros(rows, dtype=torch.long, device=like.device)
        if fixed:  # buffers not zeroed: a slot is read only after its step wrote it (row_arena.FIRST_SLOTS: why so many)
            # on a CPU as many buffer rows as this decoder's arenas grew to (untouched rows cost no memory: RowsReached)
            reached = max(rows, self.rows_reached.rows) if like.device.type == "cpu" else rows
            for buffer_rows, slots in dict.fromkeys(((reached, FIRST_SLOTS), (rows, FIRST_SLOTS), (rows, SLACK))):
                shape = (buffer_rows, self.heads, slots, self.head_dim)
                try:
                    keys, values = [untouched(like, shape) for _ in range(n)], [untouched(like, shape) for _ in range(n)]
                    break
                except RuntimeError:  # the address space refused (strict overcommit): small buffers, grown as needed
                    if slots == SLACK:
                        raise
            return RowCache.fixed(keys, values, lens, 0, slots=SLACK, reached=self.rows_reached)
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
        self.refresh_stacked()
        causal = block_mask is None
        for i, layer in enumerate(self.decoder.layers):
            x = self.run_layer(
                layer, x,
                lambda h, i=i, attn=layer.self_attn: _self_attention(attn, self.qkv[i], h, cache, i, mask, write,
                                                                     causal),
                lambda h, i=i, attn=layer.encoder_attn: _encoder_attention(attn, h, memory, i, index))
        return self.project_out(x), cache.advanced(b)

    def logits(self, features: Tensor) -> Tensor:
        return self.decoder.output_layer(features)

    # ---- the native step (--step-mode native; model/native_decoder.py) --------------------------
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

    def greedy_search_native(self, cache: RowCache, first: Tensor, positions: Tensor, memory: EncoderMemory,
                             index: SentenceIndex, max_position: int, search: Any) -> Union[Tuple[Tensor, RowCache, int], str]:
        """Up to ``search.calls`` calls of :meth:`forward_native`, the first fed ``first`` (R, 1) at ``positions`` (R, 1)
        (at most ``max_position``), each next one the row's best candidate of the greedy beam's step, found and
        taken into ``search`` (a :class:`~fairseq_stream.model.native_loops.GreedySearch`) in place while no row may
        end, as one C++ call (``decoder_greedy_search``): the logits (R, 1, V) of the last call, unsearched, the
        cache extended by the calls made, and their number; or why the operator cannot run them."""
        if first.size(0) == 0:
            return "a step with no rows"
        steps = search.calls
        operands = self._native_operands(cache, steps, max_position + steps - 1, memory, index)
        if isinstance(operands, str):
            return operands
        native, table, rest = operands
        logits, calls = torch.ops.fairseq_stream.decoder_greedy_search(
            native, first, steps, positions, table, *rest, search.scores, search.tokens, search.token_scores,
            search.steps, search.max_len, *search.output.operands())
        return logits, cache.advanced(calls), calls

    def beam_search_native(self, cache: RowCache, first: Tensor, positions: Tensor, memory: EncoderMemory,
                           index: SentenceIndex, max_position: int,
                           search: BeamLoopSearch) -> Union[Tuple[Optional[Tensor], RowCache, int], str]:
        """Up to ``search.calls`` calls of :meth:`forward_native` for a group's beams over a row arena, rows of one
        length, the first fed ``first`` (R, 1) at ``positions``, each step searched and its rows reordered as the Python
        step and :meth:`RowCache.select` do while no sentence finishes (``decoder_beam_search``; ``search.ran`` filled):
        the last call's logits (R', 1, V), unsearched, or None where the loop searched its step too; the cache after the
        calls (before that step's reorder; R' rows, a pruned beam's width at the last call); the calls made. Or why
        the operator cannot run them."""
        if cache.arena is None or not cache.uniform or first.size(0) == 0:
            return "not rows of one length over a row arena"
        if not kernel_loaded():
            return "the row arena's C++ reorder is unavailable"
        steps = search.calls
        operands = self._native_operands(cache, steps, max_position + steps - 1, memory, index)
        if isinstance(operands, str):
            return operands
        native, table, (keys, values, width, _, enc_keys, enc_values, enc_padding, kv_row, row_table, home) = operands
        arena = cache.arena
        readers = [c for c in list(arena.caches) if c is not cache]
        *_, window, eos, pad, unk, unk_penalty, min_len = search.output.operands()
        (out, rows, row_table, home, row_slot, lineage, rows_of_calls, step_packets,
         searched) = torch.ops.fairseq_stream.decoder_beam_search(
            native, first, steps, positions, table, keys, values, width, enc_keys, enc_values, enc_padding, kv_row,
            row_table, home, search.output.candidates, window, eos, pad, unk, unk_penalty, min_len, search.t_min,
            search.k, search.row_slot, search.state, search.len_pow, search.config, search.params, search.packet_at,
            [c.table for c in readers], [c.width for c in readers], [c.home for c in readers], arena.rows)
        search.ran = BeamLoopRun(row_slot, lineage, rows_of_calls, step_packets, (out, rows) if searched else None)
        calls = len(rows_of_calls)
        width += calls
        lens = torch.full((row_table.size(0),), width, dtype=cache.lens.dtype, device=cache.lens.device)
        after = RowCache.on_arena(arena, row_table, home, lens, width, True)
        return (None if searched else out), after, calls

    def verify_native(self, cache: RowCache, feed: Tensor, memory: EncoderMemory, index: SentenceIndex, search: Any,
                      draft: Optional["BlockDecoder"]) -> Union[Tuple[Tensor, RowCache, int, Optional[RowCache]], str]:
        """One sentence's Jacobi iterations, the block ``feed`` (1, b) first, as one C++ call while no iteration may
        end the sentence (``search``: a :class:`~fairseq_stream.model.native_loops.VerifySearch`, its ``ran`` filled
        here): ``decoder_jacobi`` (Jacobi's own guesses or lookahead's n-gram pool) or, with the ``draft``'s block
        decoder, ``decoder_speculate`` (the draft's catch-up and proposals between the calls). Returns the last
        call's logits (1, b', V), unsearched, this model's cache extended by that call, the calls made and the
        draft's cache (None without one); or why the operator cannot run them."""
        if cache.rows != 1 or not cache.uniform:
            return "not one row"
        # the slots the calls may fill past each cache's width: blocks of at most `block` past the verified tokens,
        # which stay below the maximum length but for the last block (a draft's slots end γ − 1 past them)
        fed = min(search.calls * search.block, search.max_len + search.block - search.verified)
        operands = self._native_operands(cache, fed, cache.width + fed - 1, memory, index)
        if isinstance(operands, str):
            return operands
        native, table, (keys, values, width, _, enc_keys, enc_values, enc_padding, kv_row, row_table, home) = operands
        *_, window, eos, pad, unk, unk_penalty, min_len = search.output.operands()
        if draft is None:
            bigram_keys, bigram, vocab = search.bigrams if search.bigrams is not None else (_NO_PRIOR, _NO_PRIOR, 0)
            started = time.perf_counter()  # the loop's time: --jacobi-parallel auto compares its calls' costs
            logits, accepted, last, jacobi_draft, calls, verified, width = torch.ops.fairseq_stream.decoder_jacobi(
                native, feed, table, keys, values, width, enc_keys, enc_values, enc_padding, kv_row, row_table, home,
                search.tokens, search.token_scores, search.verified, search.max_len, search.calls, search.block,
                search.tail, search.init_pad, search.max_parallel, search.pool, bigram_keys, bigram, vocab, search.bos,
                window, eos, pad, unk, unk_penalty, min_len)
            search.ran = VerifyRun(accepted.tolist(), last, jacobi_draft, verified, None, time.perf_counter() - started)
            return logits, cache.at_width(width + last.size(1)), calls, None
        dstate = search.draft.state
        dcache = dstate.caches[0]
        if dcache.rows != 1 or not dcache.uniform:
            return "the draft: not one row"
        draft_operands = draft._native_operands(dcache, fed, dcache.width + fed - 1, search.draft.memory.per_model[0],
                                                dstate.sentence_index())
        if isinstance(draft_operands, str):
            return f"the draft: {draft_operands}"
        draft_native, draft_table, (dkeys, dvalues, dwidth, _, denc_keys, denc_values, denc_padding, dkv_row,
                                    drow_table, dhome) = draft_operands
        logits, accepted, last, jacobi_draft, calls, verified, width, dwidth, seconds, drafting = (
            torch.ops.fairseq_stream.decoder_speculate(
                native, feed, table, keys, values, width, enc_keys, enc_values, enc_padding, kv_row, row_table, home,
                draft_native, draft_table, dkeys, dvalues, dwidth, denc_keys, denc_values, denc_padding, dkv_row,
                drow_table, dhome, search.tokens, search.token_scores, search.verified, search.max_len, search.calls,
                search.draft.gamma, window, eos, pad, unk, unk_penalty, min_len))
        search.ran = VerifyRun(accepted.tolist(), last, jacobi_draft, verified, None, seconds, drafting)  # state: ModelStep.verify
        return logits, cache.at_width(width + last.size(1)), calls, dcache.at_width(dwidth)

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
        grown = self.prepare_positions(max_position, cache.lens.device)
        table = None if grown is None else self.decoder.embed_positions.weights
        return native, table, (cache.keys, cache.values, cache.width, None if cache.uniform else cache.lens,
                               memory.keys, memory.values, memory.padding, index.memory_rows(memory.modulus),
                               cache.table, cache.home)

    def native_decoder(self) -> Any:
        """The decoder's NativeDecoder, built again when its stacked q/k/v copies are; or why there is none."""
        self.refresh_stacked()
        if self._native_version != self.qkv_version:
            from fairseq_stream.model import native_decoder

            self._native = native_decoder.build(self.decoder, self.qkv)
            self._native_version = self.qkv_version
        return self._native

    def prepare_positions(self, max_position: int, device: torch.device) -> Optional[int]:
        """Grow a sinusoidal position table to ``max_position`` now, outside any capture (a graph
        reads the table it was captured with) or the native call (which reads it as given); its
        address, which step graphs are keyed by (None: no sinusoidal table)."""
        from fairseq.modules import SinusoidalPositionalEmbedding

        module = self.decoder.embed_positions
        if getattr(self.decoder, "embed_block", None) is None and isinstance(module, SinusoidalPositionalEmbedding):
            _grow_sinusoidal(module, max_position)
            return module.weights.data_ptr()
        return None

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

    def run_layer(self, layer: Any, x: Tensor, self_attention: Callable[[Tensor], Tensor],
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

    def project_out(self, x: Tensor) -> Tensor:
        """Final layer norm and projection out of the last layer's output."""
        dec = self.decoder
        if dec.layer_norm is not None:
            x = dec.layer_norm(x)
        if dec.project_out_dim is not None:
            x = dec.project_out_dim(x)
        return x


def fc1_activation(layer: Any, x: Tensor) -> Tensor:
    """``activation_fn(fc1(x))``; a ReLU is computed inside the product where the kernel can (oneDNN's
    post-op, the packed and int8 row operators'): the same numbers without a pass over the hidden layer."""
    fc1 = layer.fc1
    if layer.activation_fn is F.relu and x.device.type == "cpu":
        if isinstance(fc1, OneDnnLinear) and x.dtype == torch.float32:
            return torch.ops.mkldnn._linear_pointwise(x, fc1.packed, fc1.bias, "relu", [], "")
        if isinstance(fc1, PackedLinear) and x.dtype == torch.float32:
            return fc1(x, relu=True)
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
