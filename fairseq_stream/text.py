"""Text pipeline of the demo and the benchmarks: Moses tokenisation and subword-nmt BPE.

The settings match fairseq's own ``--tokenizer moses --bpe subword_nmt`` defaults (HTML
escaping and aggressive dash splits on), so a model prepared with these functions also works
with ``fairseq-interactive --tokenizer moses --bpe subword_nmt --bpe-codes CODES``.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, List

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


def detokenize(line: str, lang: str) -> str:
    """Undo :func:`tokenize` (and Moses HTML escaping)."""
    return _moses_detokenizer(lang).detokenize(line.split())


def remove_bpe(line: str) -> str:
    """Join subword-nmt pieces (``"wor@@ d"`` → ``"word"``), as fairseq's ``--post-process subword_nmt``."""
    return _BPE_JOINER.sub("", line + " ").rstrip()


class BpeCodes:
    """Apply subword-nmt BPE codes to tokenised text."""

    def __init__(self, codes_path: str) -> None:
        from subword_nmt.apply_bpe import BPE

        with open(codes_path, encoding="utf-8") as f:
            self._bpe = BPE(f)

    def apply(self, line: str) -> str:
        return self._bpe.process_line(line)

    def apply_all(self, lines: Iterable[str]) -> List[str]:
        return [self.apply(line) for line in lines]


def postprocess(bpe_line: str, lang: str) -> str:
    """A model output in BPE pieces → detokenised text for sacreBLEU."""
    return detokenize(remove_bpe(bpe_line), lang)


def main() -> None:
    """``python -m fairseq_stream.text tokenize|detokenize --lang L < in > out`` (the package's Moses settings)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("action", choices=["tokenize", "detokenize", "postprocess"])
    parser.add_argument("--lang", required=True)
    args = parser.parse_args()
    fn = {"tokenize": tokenize, "detokenize": detokenize, "postprocess": postprocess}[args.action]
    for line in sys.stdin:
        sys.stdout.write(fn(line.rstrip("\n"), args.lang) + "\n")


if __name__ == "__main__":
    main()
