"""A speculative draft's checkpoint, checked before it is loaded (:mod:`fairseq_stream.strategies.speculative`).

A proposal is a token index compared with the target's arg-max, so a draft must share the model's
dictionaries; the engine's draft loader (:func:`fairseq_stream.integration.engine.load_models_like`)
calls :func:`check_draft_vocabulary` first, so a mismatch is one clear line, not fairseq's tensor
size error. It reads the checkpoint with the package's allow-list (integration/compat.py), which is
why it lives here and not in the strategy.
"""
from __future__ import annotations

import os
from typing import Any

import torch

from fairseq_stream.errors import FairseqStreamError


def check_draft_vocabulary(paths: str, task: Any) -> None:
    """One clear error for a draft whose dictionaries differ from the model's.

    A proposal is a token index, compared with the target's arg-max: the same index must mean
    the same word. Checked before fairseq loads the draft (it would fail with a tensor size
    mismatch): the sizes of the draft's embeddings, and, where the draft's dictionaries are
    found (next to it, or in the data folder its checkpoint names), their words.
    """
    from fairseq_stream.integration.compat import register_safe_globals

    register_safe_globals()
    for path in paths.split(":"):
        state = torch.load(path, map_location="cpu", weights_only=True)
        sizes = {"source": ("encoder.embed_tokens.weight", task.source_dictionary),
                 "target": ("decoder.embed_tokens.weight", task.target_dictionary)}
        for side, (key, dictionary) in sizes.items():
            weight = state["model"].get(key)
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
