"""Test helpers: a hand-written probability-table model (fairseq's tests/utils.py idea) and builders."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Dict, Tuple

import torch
from fairseq.data import Dictionary
from fairseq.dataclass.configs import GenerationConfig
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder
from omegaconf import OmegaConf

from fairseq_stream.engine.options import StreamDecodingConfig

Table = Dict[Tuple[int, Tuple[int, ...]], Dict[int, float]]


def make_dictionary(words=("a", "b", "c", "d")) -> Dictionary:
    d = Dictionary()
    for w in words:
        d.add_symbol(w)
    return d  # <s>=0 <pad>=1 </s>=2 <unk>=3, then the words from 4


class _TableEncoder(FairseqEncoder):
    def forward(self, src_tokens, src_lengths=None, **kwargs):
        return {"src_tokens": [src_tokens]}

    def reorder_encoder_out(self, encoder_out, new_order):
        return {"src_tokens": [encoder_out["src_tokens"][0].index_select(0, new_order)]}


class _TableDecoder(FairseqIncrementalDecoder):
    """p(next | source's first token, generated prefix) read from a table; unknown keys → EOS."""

    def __init__(self, dictionary: Dictionary, table: Table) -> None:
        super().__init__(dictionary)
        self.table = table
        self.calls = 0

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        self.calls += 1
        src = encoder_out["src_tokens"][0]
        bsz, tlen = prev_output_tokens.shape
        vocab = len(self.dictionary)
        out = torch.full((bsz, tlen, vocab), math.log(1e-6))
        for b in range(bsz):
            key = (int(src[b, -2]), tuple(prev_output_tokens[b, 1:].tolist()))
            dist = self.table.get(key, {self.dictionary.eos(): 1.0})
            probs = torch.full((vocab,), 1e-6)
            for tok, p in dist.items():
                probs[tok] = p
            out[b, -1] = torch.log(probs / probs.sum())
        return out, {"attn": [None]}

    def reorder_incremental_state(self, incremental_state, new_order):
        pass

    def max_positions(self):
        return 1024


class TableModel(FairseqEncoderDecoderModel):
    def __init__(self, dictionary: Dictionary, table: Table) -> None:
        super().__init__(_TableEncoder(dictionary), _TableDecoder(dictionary, table))

    def max_decoder_positions(self):
        return 1024


def sample_for(dictionary: Dictionary, sources) -> dict:
    """A fairseq batch whose source i is ``[sources[i], EOS]`` (the table keys on sources[i])."""
    src = torch.tensor([[s, dictionary.eos()] for s in sources])
    return {"id": torch.arange(len(sources)), "net_input": {"src_tokens": src, "src_lengths": torch.full((len(sources),), 2)}}


def gen_cfg(**overrides):
    cfg = OmegaConf.structured(GenerationConfig())
    for k, v in overrides.items():
        cfg[k] = v
    return cfg


def stream_opts(**overrides):
    cfg = OmegaConf.structured(StreamDecodingConfig())
    for k, v in overrides.items():
        cfg[k] = v
    return cfg


def fake_task(dictionary: Dictionary):
    return SimpleNamespace(target_dictionary=dictionary, source_dictionary=dictionary)


def tiny_transformer(dictionary: Dictionary, *, normalize_before: bool = False, learned_pos: bool = False,
                     seed: int = 0, layers: int = 2, dim: int = 32, dtype=torch.float64):
    """A random fairseq transformer (eval mode) for exactness tests of our decoder step."""
    from argparse import Namespace

    from fairseq.models.transformer import TransformerModel, base_architecture

    torch.manual_seed(seed)
    args = Namespace(
        encoder_embed_dim=dim, decoder_embed_dim=dim, encoder_ffn_embed_dim=2 * dim, decoder_ffn_embed_dim=2 * dim,
        encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_normalize_before=normalize_before, decoder_normalize_before=normalize_before,
        encoder_learned_pos=learned_pos, decoder_learned_pos=learned_pos, share_all_embeddings=True,
        dropout=0.0, max_source_positions=256, max_target_positions=256,
    )
    base_architecture(args)
    model = TransformerModel.build_model(args, fake_task(dictionary))
    return model.to(dtype).eval()


def tiny_ib_model(dictionary: Dictionary, *, h: int = 2, c: int = 1, mask: str = "relaxed", positions: str = "bidirectional",
                  independent: bool = False, seed: int = 0, dim: int = 32, dtype=torch.float64):
    """A random ``transformer_ib`` model (eval mode)."""
    from argparse import Namespace

    from fairseq.models.transformer import base_architecture

    from fairseq_stream.integration.ib_model import TransformerIBModel

    torch.manual_seed(seed)
    args = Namespace(
        encoder_embed_dim=dim, decoder_embed_dim=dim, encoder_ffn_embed_dim=2 * dim, decoder_ffn_embed_dim=2 * dim,
        encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        share_all_embeddings=True, dropout=0.0, max_source_positions=256, max_target_positions=256,
        ib_h=h, ib_c=c, ib_mask=mask, ib_positions=positions, ib_independent_directions=independent,
    )
    base_architecture(args)
    return TransformerIBModel.build_model(args, fake_task(dictionary)).to(dtype).eval()


def run_under_triton_interpreter(script: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``python -c script`` with Triton's CPU interpreter (``TRITON_INTERPRET=1`` must be set
    before Triton is imported, hence a process of its own), this checkout and these helpers on the path."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]))
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)


def outputs_of_builds(tmp_path, source: str, script: str, builds) -> list:
    """What ``script`` saves (``torch.save`` to ``argv[5]``) after building ``source`` with each of ``builds``
    ((name, compiler flags) pairs) in a child process: ``argv`` = source, name, flags, build folder, output.
    The SIMD-width tests compare these bit for bit (each build ~20 s)."""
    outs = []
    for name, flags in builds:
        folder = tmp_path / name
        folder.mkdir()
        out = tmp_path / f"{name}.pt"
        subprocess.run([sys.executable, "-c", script, source, name, flags, str(folder), str(out)], check=True,
                       capture_output=True)
        outs.append(torch.load(out))
    return outs



def write_checkpoint_variant(src: str, dst: str, edit) -> str:
    """``src``'s checkpoint with every weight replaced by ``edit(name, weight, generator)`` (seeded), saved as
    ``dst``: drafts of known quality (random weights: acceptance near zero) for the speculative strategies."""
    from fairseq_stream.integration.checkpoints import register_safe_globals

    register_safe_globals()
    state = torch.load(src, map_location="cpu", weights_only=True)
    gen = torch.Generator().manual_seed(0)
    state["model"] = {name: edit(name, t.float(), gen) for name, t in state["model"].items()}
    torch.save(state, dst)
    return dst


def random_weights(name: str, t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """An ``edit`` of :func:`write_checkpoint_variant`: random matrices, the rest (biases, norms) kept."""
    return torch.randn(t.shape, generator=gen) * 0.5 if t.is_floating_point() and t.dim() > 1 else t


def required_opts(search: str) -> dict:
    """What ``--search search`` cannot run without on the demo model: a draft where it reads ``--draft-path``
    (speculative, speculative-beam)."""
    from fairseq_stream.search.registry import get_search

    reads = get_search(search).capabilities.reads
    demo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "user_dir_examples", "demo")
    return {"draft_path": os.path.join(demo, "draft.pt")} if "draft_path" in reads else {}
