"""Decoding-only copies of fairseq checkpoints, read with ``weights_only=True``.

torch ≥ 2.6 refuses to unpickle any global that is not on its allow-list, and fairseq
checkpoints hold a few plain-data classes besides tensors (https://github.com/facebookresearch/fairseq/issues/5610); the
allow-list of exactly those classes is :func:`fairseq_stream.integration.checkpoints.register_safe_globals`.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import torch

from fairseq_stream.integration.checkpoints import register_safe_globals


def record_languages(state: Dict[str, Any], source_lang: str, target_lang: str) -> None:
    """Write the language pair into a checkpoint's configuration (the model's and the task's), so the
    direction check (``integration.task.check_direction``) can refuse a run of the other direction."""
    cfg = state["cfg"]
    for part in (cfg["model"], cfg.get("task")):
        if part is None:
            continue
        if isinstance(part, dict):
            part["source_lang"], part["target_lang"] = source_lang, target_lang
        else:  # a legacy argparse Namespace
            part.source_lang, part.target_lang = source_lang, target_lang


def export_inference_checkpoint(src: str, dst: str, half: bool = True,
                                languages: Optional[Tuple[str, str]] = None) -> int:
    """Write a decoding-only copy of a training checkpoint; return its size in bytes.

    Drops the optimizer state and (with ``half``) stores floating-point weights as fp16;
    fairseq casts them back to the model's dtype when it loads the state dict.
    """
    register_safe_globals()
    state = torch.load(src, map_location="cpu", weights_only=True)
    model, converted = {}, {}
    for name, tensor in state["model"].items():
        # Tied weights (shared embeddings) are one tensor: convert once so torch.save stores them once.
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key not in converted:
            converted[key] = tensor.half() if half and tensor.is_floating_point() else tensor
        model[name] = converted[key]
    history = [{k: v for k, v in h.items() if k != "optimizer"} for h in state.get("optimizer_history", [])]
    slim = {
        "args": state.get("args"),
        "cfg": state["cfg"],
        "model": model,
        "optimizer_history": history[-1:],
        "extra_state": {"train_iterator": state.get("extra_state", {}).get("train_iterator")},
        "last_optimizer_state": None,
    }
    if languages is not None:
        record_languages(slim, *languages)
    torch.save(slim, dst)
    return os.path.getsize(dst)
