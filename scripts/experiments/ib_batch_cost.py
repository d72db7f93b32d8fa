#!/usr/bin/env python
"""One-off experiment: host time per training batch of the IBDecoder path (Zhang2020) vs fairseq's transformer (docs/history/results-2026-11.md, "IBDecoder", 2026-11-23).

Times, in microseconds per batch (the best of ``--repeats`` timed loops: on a shared machine the
other loops measure the neighbours), what the two training
paths do to every batch besides the layers themselves:

    target rewrite   TranslationIBTask.reorder_sample (Eqs. 6/9 order, shift by z = h·c);
                     the standard task has none (fairseq's collater already built the batch)
    positions        the decoder's word-position encodings (Eq. 7 / Eq. 10 vs fairseq's
                     SinusoidalPositionalEmbedding)
    mask             the self-attention mask (M(h, c) of Eq. 4 vs fairseq's buffered causal mask)
    decoder inputs   a 0-layer decoder's extract_features: token embeddings + positions + mask

    python scripts/experiments/ib_batch_cost.py --sentences 128 --length 32 --h 2 --c 1

The script only calls APIs present before and after the vectorised rewrite, so "before"
numbers come from running it against an older checkout (``git stash`` or a copy).
"""
from __future__ import annotations

import argparse
import sys
import time
from argparse import Namespace
from pathlib import Path
from typing import Any, Callable, Dict

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fairseq.data import Dictionary  # noqa: E402
from fairseq.models.transformer import TransformerModel, base_architecture  # noqa: E402

from fairseq_stream.integration.ib_model import TransformerIBModel  # noqa: E402
from fairseq_stream.integration.ib_task import TranslationIBConfig, TranslationIBTask  # noqa: E402


def batch(sentences: int, length: int, vocab: int, seed: int) -> Dict[str, Any]:
    """A collated batch as fairseq's collater makes it: right-padded targets ending in EOS,
    lengths spread over [length/2, length] with one sentence of the full length."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(max(1, length // 2), length + 1, (sentences,), generator=g)
    lens[0] = length
    target = torch.full((sentences, length), 1, dtype=torch.long)  # pad = 1
    for i, n in enumerate(lens.tolist()):
        target[i, : n - 1] = torch.randint(4, vocab, (n - 1,), generator=g)
        target[i, n - 1] = 2  # eos
    prev = torch.cat([torch.full((sentences, 1), 2), target[:, :-1]], dim=1).masked_fill(target.eq(1), 1)
    return {"target": target, "net_input": {"src_tokens": target, "prev_output_tokens": prev},
            "ntokens": int(target.ne(1).sum())}


def models(args: argparse.Namespace, dictionary: Dictionary):
    """A 0-layer standard decoder and a 0-layer IB decoder of ``--dim`` (only the inputs differ)."""
    task = Namespace(source_dictionary=dictionary, target_dictionary=dictionary)
    ns = Namespace(encoder_embed_dim=args.dim, decoder_embed_dim=args.dim, encoder_layers=0, decoder_layers=0,
                   share_all_embeddings=True, dropout=0.0, max_source_positions=1024, max_target_positions=1024,
                   ib_h=args.h, ib_c=args.c)
    base_architecture(ns)
    torch.manual_seed(0)
    std = TransformerModel.build_model(ns, task).decoder.eval()
    return std, TransformerIBModel.build_model(ns, task).decoder.eval()


def cost(fn: Callable[[], Any], repeats: int, number: int) -> float:
    """Microseconds per call, the best of ``repeats`` loops of ``number`` calls (after a warm-up)."""
    fn()
    loops = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        loops.append((time.perf_counter() - start) / number * 1e6)
    return min(loops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=128, help="sentences per batch")
    parser.add_argument("--length", type=int, default=32, help="longest target (tokens with EOS)")
    parser.add_argument("--h", type=int, default=2, help="--ib-h")
    parser.add_argument("--c", type=int, default=1, help="--ib-c")
    parser.add_argument("--dim", type=int, default=256, help="decoder embedding size")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=20, help="calls per timed loop")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dictionary = Dictionary()
    for i in range(1000):
        dictionary.add_symbol(f"w{i}")
    std, ib = models(args, dictionary)
    task = TranslationIBTask(TranslationIBConfig(ib_h=args.h, ib_c=args.c), dictionary, dictionary)
    sample = batch(args.sentences, args.length, len(dictionary), seed=1)
    prev = sample["net_input"]["prev_output_tokens"]
    ib_prev = task.reorder_sample(sample)["net_input"]["prev_output_tokens"]
    like = torch.zeros(ib_prev.size(1), 1, args.dim)
    slots = torch.arange(ib_prev.size(1)).unsqueeze(0).expand_as(ib_prev)  # as extract_features builds them
    cached = getattr(ib, "target_slot_embeddings", None)  # the cached path, where it exists
    ib_positions = (lambda: cached(ib_prev.size(1), like)) if cached else (lambda: ib.slot_embeddings(slots, like.dtype))
    rows = [
        ("target rewrite", None, lambda: task.reorder_sample(sample)),
        ("positions", lambda: std.embed_positions(prev), ib_positions),
        ("mask", lambda: std.buffered_future_mask(like), lambda: ib.ib_mask(ib_prev.size(1), like)),
        ("decoder inputs", lambda: std.extract_features(prev, None), lambda: ib.extract_features(ib_prev, None)),
    ]
    print(f"{args.sentences} sentences, target length {args.length}, h = {args.h}, c = {args.c}, "
          f"dim {args.dim}, {args.threads} thread(s); µs per batch\n")
    print("| part | transformer | IB | IB / transformer |\n|---|---:|---:|---:|")
    with torch.no_grad():
        for name, std_fn, ib_fn in rows:
            t_std = cost(std_fn, args.repeats, args.number) if std_fn else 0.0
            t_ib = cost(ib_fn, args.repeats, args.number)
            ratio = f"{t_ib / t_std:.1f}" if t_std else "—"
            print(f"| {name} | {t_std:,.0f} | {t_ib:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
