#!/usr/bin/env python
"""A Transformer-base-sized model (6+6 layers, 512 dims, 8 heads, FFN 2048) with random weights
on the demo dictionaries: for speed-only benchmark rows (the GPU engine issue), where output
quality does not matter. Decode it with ``--min-len`` = ``--max-len-b`` (and ``--max-len-a 0``)
so every strategy does the same number of steps per sentence.

    python scripts/make_base_model.py --out work/base/checkpoint.pt

The checkpoint is the demo checkpoint's (its task and dictionaries) with the architecture
replaced; nothing is downloaded or trained.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEMO = REPO / "user_dir_examples" / "demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from fairseq_stream.fairseq_compat import register_safe_globals
    from fairseq import checkpoint_utils, tasks

    register_safe_globals()
    state = torch.load(DEMO / "checkpoint.pt", map_location="cpu", weights_only=True)
    cfg = copy.deepcopy(state["cfg"])  # a plain dict, as fairseq stores it
    cfg["task"].update(data=str(DEMO), source_lang="es", target_lang="en")
    sizes = {"decoder_output_dim": args.dim, "decoder_input_dim": args.dim}
    for side in ("encoder", "decoder"):
        sizes.update({f"{side}_layers": args.layers, f"{side}_embed_dim": args.dim,
                      f"{side}_ffn_embed_dim": 4 * args.dim, f"{side}_attention_heads": args.dim // 64})
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
    print(f"wrote {args.out}: {args.layers}+{args.layers} layers x {args.dim}, {params / 1e6:.1f}M parameters, "
          f"random weights (speed rows only)")


if __name__ == "__main__":
    main()
