"""``--arch transformer_ib``: fairseq's transformer with the IBDecoder family's decoder (Zhang2020 §4).

The encoder and every decoder layer are fairseq's, unchanged (no extra parameters except
IMDecoder's direction embeddings). What changes is only what the decoder is fed:

* word positions from :func:`fairseq_stream.search.ib_order.slot_positions` (Eq. 7, negative for
  right-to-left words, through fairseq's sinusoidal formula; Eq. 10 and trainable direction
  embeddings for IMDecoder);
* the self-attention mask M(h, c) of Eq. 4 (Eqs. 8, 11, 12) instead of the causal one;
* inputs shifted by ``z = h·c`` (done by the task, :mod:`fairseq_stream.integration.ib_task`).

``h``, ``c`` and the ablations come from the task's options and are saved in the checkpoint
with the model's arguments. Decoding uses ``--search ib-beam``, which feeds ``z`` tokens per
step through :mod:`fairseq_stream.model.block_decoder` with :meth:`TransformerIBDecoder.embed_block`.
"""
from typing import Dict, List, Optional

import torch
from torch import Tensor, nn
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerDecoderBase, TransformerModel, base_architecture

from fairseq_stream.search import ib_order
from fairseq_stream.search.ib_order import IBSpec
from fairseq_stream.errors import FairseqStreamError


class TransformerIBDecoder(TransformerDecoderBase):
    """A fairseq transformer decoder fed in the IBDecoder family's order (see module doc)."""

    stream_model_family = "ib"  # search/registry.MODEL_FAMILY: what --search ib-beam decodes (engine/validation.py)
    ib: IBSpec
    direction_embed: Optional[nn.Embedding]

    def slot_embeddings(self, slots: Tensor, dtype: torch.dtype) -> Tensor:
        """Position (+ direction) encodings of 0-based target slots, (..., d)."""
        mode = "vanilla" if self.ib.vanilla_positions else "bidirectional"
        pos = ib_order.slot_positions(slots, self.ib.h, mode)
        emb = ib_order.sinusoid(pos, self.embed_dim).to(dtype)
        if self.direction_embed is not None:
            emb = emb + self.direction_embed(ib_order.slot_directions(slots, self.ib.h))
        return emb

    def target_slot_embeddings(self, n: int, like: Tensor) -> Tensor:
        """Position encodings of slots 0 … n−1, (n, d): :meth:`slot_embeddings` without the
        direction part, from a cache, since a training batch always fills slots 0 … n−1."""
        mode = "vanilla" if self.ib.vanilla_positions else "bidirectional"
        return ib_order.cached_slot_encodings(n, self.ib.h, mode, self.embed_dim, dtype=like.dtype, device=like.device)

    def _token_embeddings(self, tokens: Tensor) -> Tensor:
        x = self.embed_scale * self.embed_tokens(tokens)
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
        return x

    def _finish_embeddings(self, x: Tensor) -> Tensor:
        return self.layernorm_embedding(x) if self.layernorm_embedding is not None else x

    def embed_block(self, tokens: Tensor, slots: Tensor) -> Tensor:
        """Input embeddings of ``tokens`` fed at target slots ``slots`` (both (R, b))."""
        x = self._token_embeddings(tokens)
        return self._finish_embeddings(x + self.slot_embeddings(slots, x.dtype))

    def embed_target(self, tokens: Tensor) -> Tensor:
        """Input embeddings of a whole shifted target (b, n) at slots 0 … n−1: the same values as
        :meth:`embed_block` with those slots, with the position part read from a cache."""
        bsz, n = tokens.shape
        x = self._token_embeddings(tokens)  # (b, n, d)
        emb = self.target_slot_embeddings(n, x)  # (n, d), broadcast over the batch
        if self.direction_embed is not None:
            # Looked up per (row, slot) as embed_block does, so the embedding's gradient sums
            # in the same order as before the cache.
            directions = ib_order.slot_directions(torch.arange(n, device=tokens.device), self.ib.h)
            emb = emb + self.direction_embed(directions.unsqueeze(0).expand(bsz, n))
        return self._finish_embeddings(x + emb)

    def ib_mask(self, n: int, like: Tensor) -> Tensor:
        """M(h, c) (n, n) for ``like``'s dtype and device, a view of a cached mask."""
        return ib_order.cached_mask(n, self.ib.h, self.ib.c, vanilla=self.ib.vanilla_mask,
                                    independent=self.ib.independent_directions, dtype=like.dtype, device=like.device)

    def extract_features_scriptable(self, prev_output_tokens, encoder_out: Optional[Dict[str, List[Tensor]]],
                                    incremental_state=None, full_context_alignment: bool = False,
                                    alignment_layer: Optional[int] = None, alignment_heads: Optional[int] = None):
        if incremental_state is not None:
            raise FairseqStreamError(
                f"{self.ib.describe()} checkpoints decode with --search ib-beam (fairseq's incremental "
                "decoding feeds one token per step)"
            )
        n = prev_output_tokens.size(1)
        alignment_layer = self.num_layers - 1 if alignment_layer is None else alignment_layer
        enc = encoder_out["encoder_out"][0] if encoder_out and len(encoder_out["encoder_out"]) > 0 else None
        pad_mask = (encoder_out["encoder_padding_mask"][0]
                    if encoder_out and len(encoder_out["encoder_padding_mask"]) > 0 else None)
        x = self.dropout_module(self.embed_target(prev_output_tokens)).transpose(0, 1)
        pads = prev_output_tokens.eq(self.padding_idx)
        self_pad = pads if pads.any() else None
        mask = self.ib_mask(n, x)
        attn: Optional[Tensor] = None
        inner_states: List[Optional[Tensor]] = [x]
        for idx, layer in enumerate(self.layers):
            x, layer_attn, _ = layer(x, enc, pad_mask, None, self_attn_mask=mask, self_attn_padding_mask=self_pad,
                                     need_attn=idx == alignment_layer, need_head_weights=idx == alignment_layer)
            inner_states.append(x)
            if layer_attn is not None and idx == alignment_layer:
                attn = layer_attn.float().to(x)
        if attn is not None:
            attn = (attn[:alignment_heads] if alignment_heads is not None else attn).mean(dim=0)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = x.transpose(0, 1)
        if self.project_out_dim is not None:
            x = self.project_out_dim(x)
        return x, {"attn": [attn], "inner_states": inner_states}


@register_model("transformer_ib")
class TransformerIBModel(TransformerModel):
    """fairseq's ``transformer`` with :class:`TransformerIBDecoder` (train with ``--task translation_ib``)."""

    @classmethod
    def build_model(cls, args, task):
        spec = IBSpec.from_args(args)
        model = super().build_model(args, task)
        decoder = model.decoder
        # Same modules and weights as fairseq's decoder; only the forward changes, so the
        # built decoder takes the subclass rather than being constructed a second time.
        decoder.__class__ = TransformerIBDecoder
        decoder.ib = spec
        decoder.direction_embed = None
        if spec.h > 2:  # IMDecoder's trainable direction embeddings (Eq. 10)
            decoder.direction_embed = nn.Embedding(spec.h, decoder.embed_dim)
            nn.init.normal_(decoder.direction_embed.weight, mean=0, std=decoder.embed_dim ** -0.5)
        return model


@register_model_architecture("transformer_ib", "transformer_ib")
def transformer_ib_base(args):
    base_architecture(args)
