#!/usr/bin/env python
"""A Transformer-base-sized model (6+6 layers, 512 dims, 8 heads, FFN 2048) with random weights
(``--ib``: an IBDecoder of that size)
on the demo dictionaries: for speed-only benchmark rows (the GPU check), where output
quality does not matter. Decode it with ``--min-len`` = ``--max-len-b`` (and ``--max-len-a 0``)
so every strategy does the same number of steps per sentence.

    python scripts/models/make_base_model.py --out work/base/checkpoint.pt
    python scripts/models/make_base_model.py --out work/base32k/checkpoint.pt --vocab 32000

The checkpoint is the demo checkpoint's (its task and dictionaries) with the architecture
replaced; nothing is downloaded or trained. ``--vocab V`` gives it a WMT-sized vocabulary: a
synthetic joined dictionary of V entries (the demo's words first, so the demo's BPE'd text
still maps onto it, then made-up ``<w123>`` words) is written as ``dict.es.txt``/``dict.en.txt``
beside the checkpoint; decode it with ``--data`` set to that folder.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import List

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DEMO = REPO / "user_dir_examples" / "demo"


def write_dictionary(folder: Path, size: int) -> Path:
    """A joined dictionary of ``size`` entries (fairseq's 4 specials included) in ``folder``."""
    words: List[str] = []
    for lang in ("es", "en"):  # the demo's words first (its model shares one vocabulary)
        for line in (DEMO / f"dict.{lang}.txt").read_text(encoding="utf-8").splitlines():
            words.append(line.split(" ", 1)[0])
    words = list(dict.fromkeys(words))[: max(size - 4, 0)]
    words += [f"<w{i}>" for i in range(size - 4 - len(words))]
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{w} {len(words) - i}\n" for i, w in enumerate(words))  # counts only order the file
    for lang in ("es", "en"):
        (folder / f"dict.{lang}.txt").write_text(text, encoding="utf-8")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ib", action="store_true",
                        help="an IBDecoder of the same size (--task translation_ib --arch transformer_ib, h = 2, c = 1) "
                             "for the ib-beam rows")
    parser.add_argument("--vocab", type=int, default=0,
                        help="a synthetic dictionary of this many entries beside the checkpoint (0: the demo's)")
    args = parser.parse_args()
    if args.layers < 1 or args.dim < 64 or args.dim % 64:
        parser.error("--layers must be >= 1 and --dim a multiple of 64 (8 heads of 64 at 512)")

    from fairseq_stream.integration.checkpoints import register_safe_globals
    from fairseq import checkpoint_utils, tasks

    register_safe_globals()
    state = torch.load(DEMO / "checkpoint.pt", map_location="cpu", weights_only=True)
    cfg = copy.deepcopy(state["cfg"])  # a plain dict, as fairseq stores it
    data = write_dictionary(args.out.parent, args.vocab) if args.vocab else DEMO
    cfg["task"].update(data=str(data), source_lang="es", target_lang="en")
    sizes = {"decoder_output_dim": args.dim, "decoder_input_dim": args.dim}
    for side in ("encoder", "decoder"):
        sizes.update({f"{side}_layers": args.layers, f"{side}_embed_dim": args.dim,
                      f"{side}_ffn_embed_dim": 4 * args.dim, f"{side}_attention_heads": args.dim // 64})
    if args.ib:  # the IB task's options at their defaults (h = 2, c = 1), as fairseq-train would store them
        from dataclasses import asdict

        from fairseq_stream.integration.ib_task import TranslationIBConfig

        defaults = asdict(TranslationIBConfig())
        cfg["task"].update({k: v for k, v in defaults.items() if k.startswith("ib_")}, _name="translation_ib")
        sizes.update(arch="transformer_ib", _name="transformer_ib")
    m = cfg["model"]  # an argparse Namespace in fairseq's checkpoints, or a dict
    for key, value in sizes.items():
        if isinstance(m, dict):
            m[key] = value
        else:
            setattr(m, key, value)
    state = dict(state, cfg=cfg)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, args.out)
    # fairseq's loader turns the stored config into the one build_model takes.
    conf = checkpoint_utils.load_checkpoint_to_cpu(str(args.out))["cfg"]
    torch.manual_seed(args.seed)
    model = tasks.setup_task(conf.task).build_model(conf.model)
    torch.save(dict(state, model=model.state_dict()), args.out)
    params = sum(p.numel() for p in model.parameters())
    vocab = f"vocabulary {len(tasks.setup_task(conf.task).target_dictionary)} ({data})"
    kind = "IBDecoder (h = 2, c = 1)" if args.ib else "Transformer"
    print(f"wrote {args.out}: {kind}, {args.layers}+{args.layers} layers x {args.dim}, {vocab}, {params / 1e6:.1f}M "
          "parameters, random weights (speed rows only)")


if __name__ == "__main__":
    main()
