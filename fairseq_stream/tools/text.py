"""``python -m fairseq_stream.tools.text``: the package's text pipeline from the shell.

The functions are :mod:`fairseq_stream.integration.text` (Moses settings of fairseq's
``--tokenizer moses``, subword-nmt BPE, fastBPE codes converted).
"""
from __future__ import annotations

import argparse
import sys

from fairseq_stream.integration.text import BpeCodes, detokenize, postprocess, subword_nmt_codes, tokenize


def main() -> None:
    """``python -m fairseq_stream.tools.text tokenize|detokenize|postprocess --lang L < in > out`` (the
    package's Moses settings; ``tokenize --codes CODES`` also applies BPE, either format);
    ``convert-codes < fastbpe.codes > subword-nmt.codes``; ``apply-bpe --codes CODES < tok > bpe``."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("action", choices=["tokenize", "detokenize", "postprocess", "convert-codes", "apply-bpe"])
    parser.add_argument("--lang", help="language code (tokenize, detokenize, postprocess)")
    parser.add_argument("--codes", help="BPE codes (apply-bpe; tokenize: apply them after tokenising)")
    args = parser.parse_args()
    if args.action == "convert-codes":
        sys.stdout.writelines(line + "\n" for line in subword_nmt_codes(sys.stdin.readlines(), "<stdin>"))
        return
    if args.action == "apply-bpe":
        if not args.codes:
            parser.error("apply-bpe needs --codes")
        bpe = BpeCodes(args.codes)
        sys.stdout.writelines(bpe.apply(line.rstrip("\n")) + "\n" for line in sys.stdin)
        return
    if not args.lang:
        parser.error(f"{args.action} needs --lang")
    fn = {"tokenize": tokenize, "detokenize": detokenize, "postprocess": postprocess}[args.action]
    if args.action == "tokenize" and args.codes:
        bpe = BpeCodes(args.codes)
        fn = lambda line, lang: bpe.apply(tokenize(line, lang))  # noqa: E731
    for line in sys.stdin:
        sys.stdout.write(fn(line.rstrip("\n"), args.lang) + "\n")


if __name__ == "__main__":
    main()
