"""Safe loading of fairseq checkpoints under torch ≥ 2.6 (``weights_only=True``).

torch now refuses to unpickle any global that is not on its allow-list, and fairseq
checkpoints hold a few plain-data classes besides tensors (fairseq issue #5610). Rather than
turning ``weights_only`` off for everything (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` unpickles
arbitrary code), :func:`register_safe_globals` allow-lists exactly those classes; a pickle
that names anything else is still refused.
"""
from __future__ import annotations

import argparse
import os
from typing import List

import numpy as np
import torch


def _numpy_globals() -> List[object]:
    """numpy scalars and dtypes as they appear in fairseq's ``extra_state`` (e.g. best loss)."""
    found: List[object] = [np.dtype]
    for module_name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = __import__(module_name, fromlist=["scalar"])
        except ImportError:
            continue
        found.append(module.scalar)
        break
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        found += [getattr(dtypes, n) for n in ("Float64DType", "Float32DType", "Int64DType") if hasattr(dtypes, n)]
    return found


#: Every global a stock fairseq checkpoint needs: ``cfg.model`` of a legacy (argparse)
#: architecture is an ``argparse.Namespace``; ``extra_state`` may hold numpy scalars.
SAFE_CHECKPOINT_GLOBALS: List[object] = [argparse.Namespace, *_numpy_globals()]


def register_safe_globals() -> None:
    """Allow-list :data:`SAFE_CHECKPOINT_GLOBALS` for ``torch.load(weights_only=True)``."""
    torch.serialization.add_safe_globals(SAFE_CHECKPOINT_GLOBALS)


def export_inference_checkpoint(src: str, dst: str, half: bool = True) -> int:
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
    torch.save(slim, dst)
    return os.path.getsize(dst)
