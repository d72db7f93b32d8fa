"""Checkpoints: the allow-list of globals that ``torch.load(weights_only=True)`` needs for
fairseq's checkpoints, and a speculative draft's checkpoints read as ``--path`` reads the model's.

A proposal of the draft (:mod:`fairseq_stream.search.speculative`) is a token index compared with
the target's arg-max, so a draft must share the model's dictionaries and translate in the model's
direction. :func:`load_draft` (called by :func:`fairseq_stream.integration.build.load_models_like`)
reads each file with fairseq's loader (weights only: a pickle naming code is refused, never run),
checks it with :func:`check_draft_vocabulary` before the model is built (a mismatch is one clear
line, not fairseq's tensor size error), and turns every failure into one line naming
``--draft-path`` and the file: a corrupt, truncated or empty file, a checkpoint without
``model`` or fairseq's metadata, a draft of the other direction.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any, List, Optional

import numpy as np
import torch

from fairseq_stream.errors import DirectionMismatch, FairseqStreamError, checkpoint_problem


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


@dataclass(frozen=True)
class BeingLoaded:
    """The file fairseq's loader is reading, and how many files its call reads (``--path a.pt:b.pt``: 2)."""

    path: str
    files: int


def checkpoint_being_loaded() -> Optional[BeingLoaded]:
    """The file fairseq's ``load_model_ensemble_and_task`` is reading now (its locals ``filename``
    and ``filenames``), from the call stack; None outside it. The task's ``build_model``, which
    fairseq calls for each file, is not told which file of an ensemble it builds."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "load_model_ensemble_and_task" and "checkpoint_utils" in code.co_filename:
            filename, filenames = frame.f_locals.get("filename"), frame.f_locals.get("filenames")
            if not isinstance(filename, str):
                return None
            return BeingLoaded(filename, len(filenames) if isinstance(filenames, (list, tuple)) else 1)
        frame = frame.f_back
    return None


def load_draft(paths: str, task: Any) -> List[Any]:
    """The draft's models, ``paths`` being ``--draft-path`` (``a.pt:b.pt`` = an ensemble draft).

    Each file is read by fairseq's loader as ``--path`` is (weights only), checked against the
    model's dictionaries, then built with ``task``; any failure is one line naming
    ``--draft-path`` and the file (:func:`fairseq_stream.errors.checkpoint_problem`)."""
    from fairseq import checkpoint_utils, utils

    register_safe_globals()
    models: List[Any] = []
    for path in utils.split_paths(paths):
        try:
            state = checkpoint_utils.load_checkpoint_to_cpu(path)
            check_draft_vocabulary(path, state, task)
            loaded, _ = checkpoint_utils.load_model_ensemble([path], task=task, state=state)
        except DirectionMismatch as exc:
            (src, tgt), (run_src, run_tgt) = exc.saved, exc.given
            raise FairseqStreamError(
                f"--draft-path {path}: the draft was trained for {src}→{tgt} ({exc.where}), but the model translates "
                f"{run_src}→{run_tgt}; a draft proposes the model's next words, so give a draft trained for "
                f"{run_src}→{run_tgt} (scripts/train_draft.sh distils one from the model)") from None
        except FairseqStreamError:
            raise
        except Exception as exc:  # fairseq's loader: the same one line as under --path
            problem = checkpoint_problem(exc, exc.__traceback__, flag="--draft-path")
            if problem is None:
                raise
            raise FairseqStreamError(problem) from None
        models += loaded
    return models


def check_draft_vocabulary(path: str, state: Any, task: Any) -> None:
    """One clear error for a draft whose dictionaries differ from the model's.

    A proposal is a token index, compared with the target's arg-max: the same index must mean
    the same word. Checked on the draft's loaded checkpoint ``state`` before fairseq builds the
    draft (it would fail with a tensor size mismatch): the sizes of the draft's embeddings, and,
    where the draft's dictionaries are found (next to it, or in the data folder its checkpoint
    names), their words. A checkpoint without ``model`` is left to fairseq's loader, whose
    failure :func:`load_draft` reports as ``--path``'s is.
    """
    weights = state.get("model") if hasattr(state, "get") else None
    if not isinstance(weights, dict):
        return
    sizes = {"source": ("encoder.embed_tokens.weight", task.source_dictionary),
             "target": ("decoder.embed_tokens.weight", task.target_dictionary)}
    for side, (key, dictionary) in sizes.items():
        weight = weights.get(key)
        if weight is not None and weight.size(0) != len(dictionary):
            raise FairseqStreamError(
                f"--draft-path {path}: its {side} dictionary has {weight.size(0)} symbols, the model's "
                f"{len(dictionary)}; a draft must share the model's dictionaries (train it with "
                "scripts/train_draft.sh, which uses them)")
    _compare_dictionary_files(path, state, task)


def _compare_dictionary_files(path: str, state: Any, task: Any) -> None:
    cfg = state.get("cfg") or {}
    task_cfg = cfg.get("task") if hasattr(cfg, "get") else None
    langs = (task.cfg.source_lang, task.cfg.target_lang) if hasattr(task, "cfg") else (None, None)
    folders = [os.path.dirname(os.path.abspath(path))]
    data = task_cfg.get("data") if task_cfg is not None and hasattr(task_cfg, "get") else None
    if data:
        folders.append(str(data).split(":")[0])
    for lang, dictionary in zip(langs, (task.source_dictionary, task.target_dictionary)):
        for folder in folders:
            file = os.path.join(folder, f"dict.{lang}.txt")
            if lang and os.path.isfile(file):
                if _words(file) != list(dictionary.symbols[dictionary.nspecial:]):
                    raise FairseqStreamError(
                        f"--draft-path {path}: its {lang} dictionary ({file}) is not the model's; a draft must "
                        "share the model's dictionaries")
                break


def _words(file: str) -> list:
    """The symbols of a fairseq ``dict.txt`` (``word count [#fairseq:overwrite]`` a line), in order."""
    with open(file, encoding="utf-8") as f:
        lines = [line.replace(" #fairseq:overwrite", "") for line in f.read().splitlines() if line.strip()]
    return [line.rsplit(" ", 1)[0] for line in lines]
