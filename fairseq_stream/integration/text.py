"""Text pipeline of the demo and the benchmarks: Moses tokenisation and subword-nmt BPE.

The settings match fairseq's own ``--tokenizer moses --bpe subword_nmt`` defaults (HTML
escaping and aggressive dash splits on), so a model prepared with these functions also works
with ``fairseq-interactive --tokenizer moses --bpe subword_nmt --bpe-codes CODES``.

BPE codes may also be fastBPE's (fairseq's WMT'19 models): :func:`subword_nmt_codes` turns
them into subword-nmt's version 0.2 format, which treats ``</w>`` as fastBPE does.
"""
from __future__ import annotations

import io
import re
from functools import lru_cache
from typing import Any, Iterable, List

from fairseq_stream.errors import FairseqStreamError

_BPE_JOINER = re.compile(r"@@ |@@ ?$")


@lru_cache(maxsize=4)
def _moses_tokenizer(lang: str):
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


@lru_cache(maxsize=4)
def _moses_detokenizer(lang: str):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def tokenize(line: str, lang: str) -> str:
    """Moses-tokenise one line exactly as fairseq's ``moses`` tokenizer does by default."""
    return _moses_tokenizer(lang).tokenize(
        line.strip(), aggressive_dash_splits=True, return_str=True, escape=True
    )


# The Moses detokeniser knows only ASCII quotes: it leaves "“Don ’ t die . ”" as
# "“Don ’ t die. ”", and it pairs “ and „ with each other as if they were ASCII '"' (so a
# second “ is attached to the left). Typographic quote tokens are therefore hidden from it as
# private-use characters and re-attached afterwards by :func:`fix_quotes`.
_CURLY = "‘’“”„‚«»"
_HIDE = {q: chr(0xE000 + i) for i, q in enumerate(_CURLY)}
_SHOW = str.maketrans({v: k for k, v in _HIDE.items()})
_CONTRACTION = re.compile(r"(\w) ’ (s|t|m|d|re|ve|ll)\b", re.IGNORECASE)  # Don ’ t → Don’t
_ELISION = re.compile(r"\b([ldjcnmst]|qu|lorsqu|jusqu|puisqu) ’ (?=\w)", re.IGNORECASE)  # l ’ eau → l’eau
#: (opening, closing) quotes per language; German opens low („ ‚) and closes with “ ‘ (and
#: guillemets point inwards, »so«); French keeps its spaces inside « ».
_QUOTES = {"de": ("„‚»", "“‘«"), "fr": ("‘“", "’”"), "": ("‘“«", "’”»")}


def fix_quotes(text: str, lang: str) -> str:
    """Attach curly quotes and apostrophes that Moses detokenisation left spaced out."""
    text = _CONTRACTION.sub(r"\1’\2", text)
    text = _ELISION.sub(r"\1’", text)
    opening, closing = _QUOTES.get(lang, _QUOTES[""])
    text = re.sub(f"(?<=\\S) ([{closing}’])", r"\1", text)  # closing quotes, plural possessives lean left
    return re.sub(f"(?<!\\S)([{opening}]) (?=\\S)", r"\1", text)  # opening quotes lean right


def detokenize(line: str, lang: str) -> str:
    """Undo :func:`tokenize` (and Moses HTML escaping), typographic quotes included."""
    tokens = [_HIDE.get(t, t) for t in line.split()]
    return fix_quotes(_moses_detokenizer(lang).detokenize(tokens).translate(_SHOW), lang)


class TypographicMoses:
    """fairseq's ``--tokenizer moses`` whose ``decode`` is :func:`detokenize`: the ``D-`` lines of
    fairseq-generate and fairseq-interactive then attach typographic quotes as the demo and the
    benchmarks do (``God said, “Let there be light.”``, not ``... light. ”``)."""

    def __init__(self, moses: Any) -> None:
        self.moses = moses
        self.lang = moses.cfg.target_lang

    def encode(self, x: str) -> str:
        return self.moses.encode(x)

    def decode(self, x: str) -> str:
        return detokenize(x, self.lang)


def with_typographic_quotes(tokenizer: Any) -> Any:
    """``tokenizer`` with :class:`TypographicMoses` decoding if it is fairseq's Moses tokenizer."""
    from fairseq.data.encoders.moses_tokenizer import MosesTokenizer

    return TypographicMoses(tokenizer) if isinstance(tokenizer, MosesTokenizer) else tokenizer


def remove_bpe(line: str) -> str:
    """Join subword-nmt pieces (``"wor@@ d"`` → ``"word"``), as fairseq's ``--post-process subword_nmt``."""
    return _BPE_JOINER.sub("", line + " ").rstrip()


def subword_nmt_codes(lines: List[str], path: str = "codes") -> List[str]:
    """BPE codes in subword-nmt's format: fastBPE codes (``a b count``) are converted, others kept.

    fastBPE, like subword-nmt 0.2, marks a word's last character with ``</w>`` and applies the
    merges in file order; without the ``#version: 0.2`` header subword-nmt would read the pairs
    as version 0.1 codes (``</w>`` a symbol of its own), so no word-final merge would apply
    ("the" → "th@@ e"). Hence the header, the pairs, and no counts.
    """
    body = [line.rstrip("\r\n") for line in lines]
    if not body or body[0].startswith("#version:"):
        return body
    fields = [line.split(" ") for line in body if line]
    if not all(len(f) == 3 for f in fields):
        return body  # subword-nmt codes without a header: genuinely version 0.1
    for n, f in enumerate(fields, 1):
        if not f[2].isdigit():
            raise FairseqStreamError(f"{path}:{n}: not a fastBPE code ('a b count'): {' '.join(f)!r}")
    return ["#version: 0.2"] + [f"{a} {b}" for a, b, _ in fields]


class BpeCodes:
    """Apply subword-nmt or fastBPE codes to tokenised text."""

    def __init__(self, codes_path: str) -> None:
        from subword_nmt.apply_bpe import BPE

        with open(codes_path, encoding="utf-8") as f:
            lines = subword_nmt_codes(f.readlines(), codes_path)
        self._bpe = BPE(io.StringIO("\n".join(lines) + "\n"))

    def apply(self, line: str) -> str:
        return self._bpe.process_line(line)

    def apply_all(self, lines: Iterable[str]) -> List[str]:
        return [self.apply(line) for line in lines]


def postprocess(bpe_line: str, lang: str) -> str:
    """A model output in BPE pieces → detokenised text for sacreBLEU."""
    return detokenize(remove_bpe(bpe_line), lang)
