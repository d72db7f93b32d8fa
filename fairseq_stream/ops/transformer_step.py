"""Block-incremental decoder step for fairseq's ``TransformerDecoder``.

fairseq's incremental decoding feeds one token per step, with one position for every row and
an encoder-attention cache that is kept per *row* (or per fixed-size beam). Every strategy
of this package needs more (``../shared/docs/DESIGN.md``, "ops"):

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
``tests/unit/test_transformer_step.py`` checks the result against fairseq's own forward.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError


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


@dataclass
class EncoderMemory:
    """Per-sentence encoder keys/values of one model, for every decoder layer.

    ``keys[l]`` and ``values[l]`` are ``(N, H, S, hd)`` for the ``N`` pool sentences;
    ``padding`` is ``(N, S)`` with True at padded source positions.
    """

    keys: List[Tensor]
    values: List[Tensor]
    padding: Optional[Tensor]


_SLACK = 8  # spare slots allocated with a cache, so most steps append without reallocating


@dataclass
class RowCache:
    """Self-attention keys/values of one model for ``R`` rows.

    ``keys[l]``/``values[l]`` are buffers ``(R, H, capacity, hd)`` whose first ``length`` slots
    are in use; a step writes its block into the spare slots in place (a cache passed to a
    step is consumed), and the beam reorder copies once. ``padding`` is ``(R, length)``, True
    where a slot holds no token (left padding of shorter rows, rejected block tokens), or
    ``None`` when every slot is valid. Row lengths live in the caller's state.
    """

    keys: List[Tensor]
    values: List[Tensor]
    padding: Optional[Tensor]
    length: int

    @staticmethod
    def from_used(keys: List[Tensor], values: List[Tensor], padding: Optional[Tensor]) -> "RowCache":
        """A cache holding exactly these slots, with spare capacity."""
        length = keys[0].size(2)
        return RowCache([F.pad(k, (0, 0, 0, _SLACK)) for k in keys], [F.pad(v, (0, 0, 0, _SLACK)) for v in values],
                        padding, length)

    @property
    def rows(self) -> int:
        return self.keys[0].size(0)

    @property
    def slots(self) -> int:
        return self.length

    def used_keys(self, i: int) -> Tensor:
        return self.keys[i][:, :, : self.length]

    def used_values(self, i: int) -> Tensor:
        return self.values[i][:, :, : self.length]

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more slots (in place)."""
        capacity = self.keys[0].size(2)
        if self.length + extra <= capacity:
            return
        grow = max(capacity // 2, extra + _SLACK)
        self.keys = [F.pad(k[:, :, : self.length], (0, 0, 0, grow + capacity - self.length)) for k in self.keys]
        self.values = [F.pad(v[:, :, : self.length], (0, 0, 0, grow + capacity - self.length)) for v in self.values]

    def select(self, rows: Tensor) -> "RowCache":
        """Rows ``rows`` (with repetition, in that order): the beam reorder, one copy (none for the identity)."""
        if rows.numel() == self.rows and bool((rows == torch.arange(self.rows, device=rows.device)).all()):
            return self
        pad = None if self.padding is None else self.padding.index_select(0, rows)
        return RowCache([k.index_select(0, rows) for k in self.keys], [v.index_select(0, rows) for v in self.values],
                        pad, self.length)

    def left_pad_to(self, slots: int) -> "RowCache":
        """Pad on the left to ``slots`` slots (the new slots are masked)."""
        extra = slots - self.slots
        if extra <= 0:
            return self
        keys = [F.pad(self.used_keys(i), (0, 0, extra, 0)) for i in range(len(self.keys))]
        values = [F.pad(self.used_values(i), (0, 0, extra, 0)) for i in range(len(self.values))]
        pad = self.padding
        if pad is None:
            pad = torch.zeros(self.rows, self.slots, dtype=torch.bool, device=keys[0].device)
        return RowCache.from_used(keys, values, F.pad(pad, (extra, 0), value=True))

    @staticmethod
    def concat(caches: Sequence["RowCache"]) -> "RowCache":
        """Stack rows of several caches; shorter ones are left-padded."""
        if len(caches) == 1:
            return caches[0]
        slots = max(c.slots for c in caches)
        caches = [c.left_pad_to(slots) for c in caches]
        n = len(caches[0].keys)
        keys = [torch.cat([c.used_keys(i) for c in caches]) for i in range(n)]
        values = [torch.cat([c.used_values(i) for c in caches]) for i in range(n)]
        pad = None
        if any(c.padding is not None for c in caches):
            pad = torch.cat(
                [
                    c.padding if c.padding is not None
                    else torch.zeros(c.rows, c.slots, dtype=torch.bool, device=keys[0].device)
                    for c in caches
                ]
            )
        return RowCache.from_used(keys, values, pad)

    def mask_tail(self, keep: Tensor, block: int) -> "RowCache":
        """Drop the last ``block`` slots beyond ``keep[r]`` accepted ones of each row.

        After a block step, row ``r`` keeps only its first ``keep[r]`` new tokens. The slots
        every row rejects are cut off (free); the rest are masked, and dropped by
        :meth:`compact` once every row has them masked.
        """
        cut = int(block - keep.max())
        out = self.truncate(self.length - cut) if cut > 0 else self
        block -= cut
        if bool((keep >= block).all()):
            return out
        pad = out.padding
        if pad is None:
            pad = torch.zeros(out.rows, out.slots, dtype=torch.bool, device=out.keys[0].device)
        new = torch.arange(block, device=pad.device).unsqueeze(0) >= keep.unsqueeze(1)  # (R, block)
        pad = torch.cat([pad[:, : out.slots - block], new], dim=1)
        return RowCache(out.keys, out.values, pad, out.length).compact()

    def truncate(self, slots: int) -> "RowCache":
        """Keep the first ``slots`` slots of every row (drop the last block)."""
        pad = None if self.padding is None else self.padding[:, :slots]
        return RowCache(self.keys, self.values, pad, slots)

    def compact(self) -> "RowCache":
        """Drop slots that are padding in every row; forget an all-False mask.

        When more than half the slots are padding (rows that rejected different numbers of
        block tokens leave holes, sentences that joined a longer batch), the valid slots of
        every row are packed to the right.
        """
        if self.padding is None:
            return self
        valid = ~self.padding
        n = len(self.keys)
        if float(self.padding.float().mean()) > 0.5:
            width = int(valid.sum(dim=1).max())
            order = torch.argsort(valid.long(), dim=1, stable=True)[:, self.slots - width:]  # (R, W)
            idx = order[:, None, :, None].expand(-1, self.keys[0].size(1), -1, self.keys[0].size(3))
            out = RowCache.from_used([self.used_keys(i).gather(2, idx) for i in range(n)],
                                     [self.used_values(i).gather(2, idx) for i in range(n)], self.padding.gather(1, order))
        else:
            used = valid.any(dim=0)
            if bool(used.all()):
                out = self
            else:
                idx = used.nonzero().squeeze(1)
                out = RowCache.from_used([self.used_keys(i).index_select(2, idx) for i in range(n)],
                                         [self.used_values(i).index_select(2, idx) for i in range(n)],
                                         self.padding.index_select(1, idx))
        if not bool(out.padding.any()):
            out = RowCache(out.keys, out.values, None, out.length)
        return out


@dataclass
class SentenceIndex:
    """Where each row's queries go in the per-sentence padded layout of encoder attention."""

    sentences: Tensor  # (n,) pool indices of the distinct sentences, in row order
    local: Tensor  # (R,) index into ``sentences`` of each row
    slot: Tensor  # (R,) position of the row among its sentence's rows
    width: int  # max rows of one sentence

    @staticmethod
    def build(row_sentence: Tensor) -> "SentenceIndex":
        """``row_sentence`` (R,) must list each sentence's rows consecutively."""
        sentences, counts = torch.unique_consecutive(row_sentence, return_counts=True)
        local = torch.repeat_interleave(torch.arange(len(sentences), device=row_sentence.device), counts)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(len(row_sentence), device=row_sentence.device) - starts.index_select(0, local)
        return SentenceIndex(sentences, local, slot, int(counts.max()) if len(counts) else 0)


def _split_heads(x: Tensor, heads: int) -> Tensor:
    """(R, b, d) → (R, H, b, hd)."""
    r, b, d = x.shape
    return x.view(r, b, heads, d // heads).transpose(1, 2)


def _merge_heads(x: Tensor) -> Tensor:
    """(R, H, b, hd) → (R, b, d)."""
    r, h, b, hd = x.shape
    return x.transpose(1, 2).reshape(r, b, h * hd)


def _softmax(scores: Tensor) -> Tensor:
    # As fairseq's utils.softmax, half precision is computed in float32; unlike it, float64
    # stays float64 (fairseq casts to float32), so float64 runs are exact end to end.
    if scores.dtype in (torch.float16, torch.bfloat16):
        return F.softmax(scores.float(), dim=-1).type_as(scores)
    return F.softmax(scores, dim=-1)


def _encoder_attention(attn: Any, query: Tensor, memory_k: Tensor, memory_v: Tensor,
                       memory_pad: Optional[Tensor], index: SentenceIndex) -> Tensor:
    """Encoder attention of ``query`` (R, b, d) with keys shared per sentence.

    Rows are scattered into a ``(n, width, b, ...)`` layout so that one batched product per
    sentence serves all its rows: the keys are never copied per row, which is what makes
    variable-width beams affordable (fairseq shares them only for a fixed beam width).
    """
    heads = attn.num_heads
    q = attn.q_proj(query) * attn.scaling  # (R, b, d)
    r, b, d = q.shape
    hd = d // heads
    keys = memory_k.index_select(0, index.sentences)  # (n, H, S, hd)
    values = memory_v.index_select(0, index.sentences)
    pad = None if memory_pad is None else memory_pad.index_select(0, index.sentences)  # (n, S)
    if index.width == 1:  # one row per sentence (greedy, Jacobi): no scatter needed
        scores = torch.matmul(q.view(r, b, heads, hd).transpose(1, 2), keys.transpose(2, 3))  # (R, H, b, S)
        if pad is not None:
            scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
        out = torch.matmul(_softmax(scores), values).transpose(1, 2).reshape(r, b, d)
        return attn.out_proj(out)
    qp = q.new_zeros(len(index.sentences), index.width, b, heads, hd)
    qp[index.local, index.slot] = q.view(r, b, heads, hd)
    scores = torch.einsum("nwbhd,nhsd->nhwbs", qp, keys)  # (n, H, W, b, S)
    if pad is not None:
        scores = scores.masked_fill(pad[:, None, None, None, :], float("-inf"))
    probs = _softmax(scores)
    out = torch.einsum("nhwbs,nhsd->nwbhd", probs, values)  # (n, W, b, H, hd)
    out = out[index.local, index.slot].reshape(r, b, d)
    return attn.out_proj(out)


def _self_attention(attn: Any, qkv: Tuple[Tensor, Optional[Tensor]], x: Tensor, cache: RowCache, i: int,
                    mask: Optional[Tensor]) -> Tensor:
    """Self-attention of a block ``x`` (R, b, d) over layer ``i``'s cache plus the block itself.

    The block's keys and values are written into the cache's spare slots (no copy of the
    past); ``qkv`` are the query/key/value projections stacked into one matrix. ``mask`` is
    additive, broadcastable to (R, H, b, L + b).
    """
    heads = attn.num_heads
    b = x.size(1)
    q, k_new, v_new = F.linear(x, *qkv).chunk(3, dim=-1)
    q = _split_heads(q * attn.scaling, heads)  # (R, H, b, hd)
    start = cache.length
    cache.keys[i][:, :, start: start + b] = _split_heads(k_new, heads)
    cache.values[i][:, :, start: start + b] = _split_heads(v_new, heads)
    k = cache.keys[i][:, :, : start + b]  # (R, H, L+b, hd)
    v = cache.values[i][:, :, : start + b]
    scores = torch.matmul(q, k.transpose(2, 3))  # (R, H, b, L+b)
    if mask is not None:
        scores = scores + mask
    out = torch.matmul(_softmax(scores), v)
    return attn.out_proj(_merge_heads(out))


def _stacked_qkv(attn: Any) -> Tuple[Tensor, Optional[Tensor]]:
    weight = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], dim=0).detach()
    biases = [attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias]
    bias = None if any(b is None for b in biases) else torch.cat(biases).detach()
    return weight, bias


class TransformerStepper:
    """Runs one fairseq ``TransformerDecoder`` block-incrementally (see the module docstring)."""

    def __init__(self, decoder: Any) -> None:
        problem = check_supported(decoder)
        if problem is not None:
            raise FairseqStreamError(f"this strategy needs a transformer decoder: {problem}")
        self.decoder = decoder
        first = decoder.layers[0].self_attn
        self.heads = first.num_heads
        self.head_dim = first.head_dim
        self._qkv: List[Tuple[Tensor, Optional[Tensor]]] = []
        self._qkv_of: Any = None  # the parameters the stacked copies were made from

    def _refresh_stacked(self) -> None:
        # Rebuilt when the model's parameters change (dtype/device moves, new weights).
        weight = self.decoder.layers[0].self_attn.q_proj.weight
        key = (weight.data_ptr(), weight.dtype, weight.device)
        if self._qkv_of != key:
            self._qkv = [_stacked_qkv(layer.self_attn) for layer in self.decoder.layers]
            self._qkv_of = key

    # ---- encoder side -------------------------------------------------------------------
    def encoder_memory(self, encoder_out: Dict[str, List[Tensor]]) -> EncoderMemory:
        """Encoder keys/values of every layer, once per sentence."""
        enc = encoder_out["encoder_out"][0]  # (S, N, d)
        pads = encoder_out.get("encoder_padding_mask") or []
        pad = pads[0] if len(pads) > 0 and pads[0] is not None and bool(pads[0].any()) else None
        keys, values = [], []
        for layer in self.decoder.layers:
            attn = layer.encoder_attn
            s, n, _ = enc.shape
            keys.append(attn.k_proj(enc).view(s, n, self.heads, self.head_dim).permute(1, 2, 0, 3).contiguous())
            values.append(attn.v_proj(enc).view(s, n, self.heads, self.head_dim).permute(1, 2, 0, 3).contiguous())
        return EncoderMemory(keys, values, pad)

    def empty_cache(self, rows: int, like: Tensor) -> RowCache:
        shape = (rows, self.heads, 0, self.head_dim)
        n = len(self.decoder.layers)
        return RowCache.from_used([like.new_zeros(shape) for _ in range(n)], [like.new_zeros(shape) for _ in range(n)], None)

    # ---- decoder side -------------------------------------------------------------------
    def embed(self, tokens: Tensor, positions: Tensor) -> Tensor:
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
            x = x + position_embeddings(dec.embed_positions, positions)
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
    ) -> Tuple[Tensor, RowCache]:
        """Decoder features of a block and the cache extended by it.

        ``tokens``/``positions``: (R, b). ``block_mask``: additive (b, b) or (R, b, b) mask
        inside the block; ``None`` means causal. Returns features (R, b, d_out) after the final
        layer norm and output projection-in, ready for :meth:`logits`, and the new cache.
        """
        b = tokens.size(1)
        x = self.embed(tokens, positions)
        mask = self._attention_mask(cache, b, block_mask, x)
        cache.reserve(b)
        self._refresh_stacked()
        for i, layer in enumerate(self.decoder.layers):
            x = self._layer(layer, x, cache, mask, memory, i, index)
        dec = self.decoder
        if dec.layer_norm is not None:
            x = dec.layer_norm(x)
        if dec.project_out_dim is not None:
            x = dec.project_out_dim(x)
        pad = None
        if cache.padding is not None:
            pad = torch.cat([cache.padding, cache.padding.new_zeros(cache.rows, b)], dim=1)
        return x, RowCache(cache.keys, cache.values, pad, cache.length + b)

    def logits(self, features: Tensor) -> Tensor:
        return self.decoder.output_layer(features)

    def _attention_mask(self, cache: RowCache, b: int, block_mask: Optional[Tensor], like: Tensor) -> Optional[Tensor]:
        """Additive mask (R or 1, 1, b, L + b) for the block's self-attention.

        ``block_mask`` is (b, b) or (R, b, b) inside the block (the cache is fully visible), or
        (b, L + b) / (R, b, L + b) over cache and block (e.g. the IBDecoder's independent
        directions); ``None`` is causal.
        """
        if block_mask is None and b > 1:
            block_mask = torch.triu(like.new_full((b, b), float("-inf")), 1)
        parts = []
        if block_mask is not None:
            bm = block_mask.to(like.dtype)
            bm = bm.unsqueeze(0) if bm.dim() == 2 else bm  # (1 or R, b, b or L + b)
            if bm.size(-1) == b:
                bm = torch.cat([like.new_zeros(bm.size(0), b, cache.slots), bm], dim=2)
            parts.append(bm.unsqueeze(1))
        if cache.padding is not None:
            pad = like.new_zeros(cache.rows, cache.slots + b).masked_fill(
                F.pad(cache.padding, (0, b), value=False), float("-inf")
            )
            parts.append(pad[:, None, None, :])
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    def _layer(self, layer: Any, x: Tensor, cache: RowCache, mask: Optional[Tensor],
               memory: EncoderMemory, i: int, index: SentenceIndex) -> Tensor:
        # TransformerDecoderLayerBase.forward in eval mode (dropout is the identity).
        residual = x
        if layer.normalize_before:
            x = layer.self_attn_layer_norm(x)
        x = _self_attention(layer.self_attn, self._qkv[i], x, cache, i, mask)
        if layer.c_attn is not None:
            r, b, _ = x.shape
            x = torch.einsum("rbhd,h->rbhd", x.view(r, b, layer.nh, layer.head_dim), layer.c_attn).reshape(r, b, -1)
        if layer.attn_ln is not None:
            x = layer.attn_ln(x)
        x = residual + x
        if not layer.normalize_before:
            x = layer.self_attn_layer_norm(x)
        residual = x
        if layer.normalize_before:
            x = layer.encoder_attn_layer_norm(x)
        x = _encoder_attention(layer.encoder_attn, x, memory.keys[i], memory.values[i], memory.padding, index)
        x = residual + x
        if not layer.normalize_before:
            x = layer.encoder_attn_layer_norm(x)
        residual = x
        if layer.normalize_before:
            x = layer.final_layer_norm(x)
        x = layer.activation_fn(layer.fc1(x))
        if layer.ffn_layernorm is not None:
            x = layer.ffn_layernorm(x)
        x = layer.fc2(x)
        if layer.w_resid is not None:
            residual = torch.mul(layer.w_resid, residual)
        x = residual + x
        if not layer.normalize_before:
            x = layer.final_layer_norm(x)
        return x


def position_embeddings(module: Any, positions: Tensor) -> Tensor:
    """fairseq's positional embedding of 0-based target positions (R, b) → (R, b, d).

    fairseq numbers positions from ``padding_idx + 1`` (``utils.make_positions``).
    """
    from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding

    ids = positions + module.padding_idx + 1
    if isinstance(module, SinusoidalPositionalEmbedding):
        needed = int(ids.max()) + 1 if ids.numel() else 0
        if needed > module.weights.size(0):
            module.weights = SinusoidalPositionalEmbedding.get_embedding(
                needed, module.embedding_dim, module.padding_idx
            ).to(module.weights)
        return module.weights.index_select(0, ids.reshape(-1)).view(*ids.shape, -1).detach()
    if isinstance(module, LearnedPositionalEmbedding):
        return F.embedding(ids, module.weight, module.padding_idx)
    raise FairseqStreamError(f"unsupported positional embedding {type(module).__name__}")
