"""Checks on the sentences a task is asked to translate: what cannot be decoded, and why.

fairseq-generate reads a binarized split, where a sentence that cannot be decoded stops the
run with one line (or is skipped and listed under ``--skip-invalid-size-inputs-valid-test``).
fairseq-interactive reads a stream, one ``--buffer-size`` batch of lines at a time, and gives
ids relative to the buffer; there one bad line must not end the run, so each is reported
with its input line number, skipped, and the process exits non-zero after translating the
rest (see :func:`fairseq_stream.integration.compat.exit_nonzero_after_skipped_lines`).
"""
from __future__ import annotations

import logging
import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from fairseq_stream.errors import PREFIX, FairseqStreamError

logger = logging.getLogger(__name__)

#: Bytes that are not UTF-8 reach Python as lone surrogates (``surrogateescape``, stdin in a
#: C/POSIX locale) or as U+FFFD (``errors="replace"``); either would become ``<unk>``.
_UNDECODABLE = re.compile("[\udc80-\udcff\ufffd]")

#: Lines skipped so far by fairseq-interactive (the exit status is 1 when any was).
skipped_lines: List[int] = []


def is_blank(text: str) -> bool:
    """A line with nothing to translate: empty, or only whitespace (NBSP included), NUL and other
    control or format characters. It is decoded as an empty source (EOS only): the empty
    hypothesis, score 0, no model call; a NUL would otherwise become ``<unk>`` and a made-up sentence."""
    return all(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") for ch in text)


def undecodable(text: str) -> Optional[str]:
    """Why ``text`` cannot be translated as read, or ``None``."""
    bad = _UNDECODABLE.search(text)
    if bad is None:
        return None
    char = bad.group(0)
    what = f"byte 0x{ord(char) - 0xDC00:02x}" if char != "\ufffd" else "U+FFFD"
    return (f"is not valid UTF-8 ({what} at character {bad.start() + 1}); convert the input to UTF-8, "
            "e.g. iconv -f latin1 -t utf-8")


@dataclass
class InputBuffer:
    """One buffer of fairseq-interactive input; its ids start at 0, its lines at ``first_line``."""

    first_line: int  # 1-based input line number of id 0
    size: int
    invalid: Dict[int, str] = field(default_factory=dict)  # id → why it cannot be translated

    def line(self, index: int) -> int:
        return self.first_line + int(index)


def too_long(dataset: Any, indices: np.ndarray, max_positions: Any, ignored: Iterable[int],
             max_tokens: Optional[int]) -> Dict[int, str]:
    """id → reason, for sentences over the model's positions or over ``--max-tokens``.

    fairseq checks ``--max-tokens`` only inside ``batch_by_size``, with an assertion.
    """
    reasons = {int(i): f"has {dataset.num_tokens(i)} tokens, more than the model's max positions "
                       f"{max_positions}; shorten it" for i in ignored}
    if max_tokens and len(indices):
        vec = getattr(dataset, "num_tokens_vec", None)
        sizes = vec(indices) if vec is not None else np.array([dataset.num_tokens(i) for i in indices])
        for i, n in zip(np.asarray(indices)[sizes > max_tokens].tolist(), sizes[sizes > max_tokens].tolist()):
            reasons.setdefault(int(i), f"has {n} tokens, more than --max-tokens {max_tokens}; raise --max-tokens")
    return reasons


def report_skipped(buffer: InputBuffer, reasons: Dict[int, str], warn_only: Iterable[int] = ()) -> None:
    """One line per skipped input line, on stderr (fairseq-interactive logs to stdout).

    ``warn_only``: lines the user asked to skip (``--skip-invalid-size-inputs-valid-test``);
    they are a warning and do not make the exit status non-zero.
    """
    warn_only = set(warn_only)
    for index in sorted(reasons):
        line = buffer.line(index)
        prefix = "fairseq-stream: warning: " if index in warn_only else PREFIX
        if index not in warn_only:
            skipped_lines.append(line)
        print(f"{prefix}input line {line} {reasons[index]} (skipped; the other lines are translated)",
              file=sys.stderr, flush=True)


def raise_or_warn(reasons: Dict[int, str], ignore_invalid_inputs: bool, total: int) -> None:
    """fairseq-generate's rule: stop with one line, or skip and list under the skip flag."""
    ids = sorted(reasons)
    if ignore_invalid_inputs and len(ids) >= total:
        raise FairseqStreamError(f"all {total} sentence(s) are too long to decode (sentence {ids[0]} "
                                 f"{reasons[ids[0]]}); nothing is left to translate")
    if not ignore_invalid_inputs:
        first = ids[0]
        raise FairseqStreamError(
            f"{len(ids)} sentence(s) are too long to decode (first ids {ids[:5]}; sentence {first} {reasons[first]}), "
            "or pass --skip-invalid-size-inputs-valid-test to skip them"
        )
    logger.warning("skipping %d sentence(s) that cannot be decoded (%s), ids: %s", len(ids), reasons[ids[0]], ids)


class UnknownWords:
    """Warns once when most source words are unknown: raw text decoded without tokenizer/BPE."""

    def __init__(self, threshold: float = 0.1) -> None:
        self.threshold = threshold
        self.warned = False

    def check(self, tokens: List[Any], unk: int, has_bpe: bool) -> None:
        total = sum(int(t.numel()) - 1 for t in tokens)  # without EOS
        unknown = sum(int((t == unk).sum()) for t in tokens)
        if self.warned or total < 5 or unknown <= self.threshold * total:
            return
        self.warned = True
        hint = ("pass the training's tokenizer and BPE, e.g. --tokenizer moses --bpe subword_nmt "
                "--bpe-codes CODES" if not has_bpe else "check --bpe-codes and --source-lang")
        print(f"fairseq-stream: warning: {unknown} of {total} source tokens are unknown to the dictionary "
              f"(<unk>); the translations will be poor: {hint}", file=sys.stderr, flush=True)


def empty_split_file(data_path: str, split: str, src: str, tgt: str) -> Optional[str]:
    """The binarized file of ``split`` in ``data_path`` that holds no sentence (0 bytes), or None.

    fairseq maps a split's ``.bin`` file into memory, and ``mmap`` refuses an empty file
    ("cannot mmap an empty file", then an ``AttributeError`` from the dataset's ``__del__``);
    checked before fairseq opens it."""
    for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
        for lang in (src, tgt):
            path = os.path.join(data_path, f"{split}.{pair}.{lang}.bin")
            if os.path.isfile(path) and os.path.getsize(path) == 0:
                return path
    return None


def no_sentences(split: str, where: str) -> FairseqStreamError:
    """An input with no sentences: one line, exit 1. fairseq-generate cannot report on zero sentences
    (fairseq's own raw reader divides by zero there), and an empty split is a preprocessing input that
    went wrong far more often than a wish to translate nothing; a pipeline should stop, not go on."""
    return FairseqStreamError(f"--gen-subset {split}: the split has no sentences ({where}); binarize a non-empty "
                              "file with fairseq-preprocess, or choose another split with --gen-subset")


def check_split_has_sentences(data: str, split: str, epoch: int, src: Optional[str], tgt: Optional[str]) -> None:
    """Refuse, before fairseq opens it, a binarized ``split`` with no sentences (see :func:`no_sentences`)."""
    paths = [p for p in data.split(os.pathsep) if p] if data else []
    if not paths or src is None or tgt is None:
        return
    empty = empty_split_file(paths[(epoch - 1) % len(paths)], split, src, tgt)
    if empty is not None:
        raise no_sentences(split, f"{empty} is empty")
