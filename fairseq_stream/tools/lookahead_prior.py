"""Count a prior for ``--search lookahead --lookahead-prior FILE`` (fairseq_stream/search/lookahead_prior.py).

    python -m fairseq_stream.tools.lookahead_prior --dict MODEL_DIR/dict.en.txt --text OUTPUTS.en \\
        --ngram 4 --out prior.pt

``OUTPUTS.en``: the model's own greedy translations of training sources, one a line, tokenised and
BPE-split as the model writes them (``scripts/train_draft.sh`` leaves exactly this file in
``WORK/kd/train.TGT``). Never the test set's: a prior counted there would guess the test
translations themselves (the output would still be greedy's, but the speed would not be a
decoder's). ``--ngram`` must equal the run's ``--lookahead-ngram``.
"""
from __future__ import annotations

import argparse
import time
from typing import List, Optional, Sequence

from fairseq.data import Dictionary

from fairseq_stream.engine.output_paths import check_output_path, write_bytes_checked
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.lookahead_prior import count_prior, prior_bytes


def _load_dictionary(path: str) -> Dictionary:
    """``--dict``, or one line saying why it is not a fairseq dictionary (a binary file was a traceback)."""
    try:
        return Dictionary.load(path)
    except OSError as err:
        raise FairseqStreamError(f"--dict {path}: cannot read it ({err.strerror or err}); give the model's "
                                 "dict.TGT.txt") from None
    except Exception as err:  # fairseq raises a bare Exception for a file that is not UTF-8, ValueError for the format
        raise FairseqStreamError(f"--dict {path}: not a fairseq dictionary ({err}); give the model's dict.TGT.txt "
                                 "(one 'word count' a line)") from None


def _read_sentences(path: str, dictionary: Dictionary) -> List[List[int]]:
    """``--text``'s non-blank lines as token ids, EOS included."""
    sentences: List[List[int]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    sentences.append(dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).tolist())
    except UnicodeDecodeError as err:
        raise FairseqStreamError(f"--text {path}: not UTF-8 text (line {len(sentences) + 1} or after: {err.reason}); "
                                 "give the model's outputs as UTF-8 text") from None
    except OSError as err:
        raise FairseqStreamError(f"--text {path}: cannot read it ({err.strerror or err})") from None
    if not sentences:
        raise FairseqStreamError(f"--text {path}: no sentences")
    return sentences


def _check_args(args: argparse.Namespace) -> None:
    """Refused before any counting: the options, and an --out that could not be written or would destroy an input."""
    if not 2 <= args.ngram <= 16:
        raise FairseqStreamError(f"--ngram must be in [2, 16] (it is the run's --lookahead-ngram), got {args.ngram}")
    if args.min_count < 1:
        raise FairseqStreamError(f"--min-count must be >= 1, got {args.min_count}")
    check_output_path(args.out, "--out", inputs=[("the --dict file", args.dict), ("the --text file", args.text)])


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dict", required=True, help="the model's target dictionary (dict.TGT.txt)")
    parser.add_argument("--text", required=True, help="the model's greedy outputs on training sources, BPE'd")
    parser.add_argument("--ngram", type=int, default=4, help="N: the run's --lookahead-ngram")
    parser.add_argument("--min-count", type=int, default=1, help="keep a key's continuation seen this often")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from fairseq_stream.integration.compat import install_excepthook

    install_excepthook()  # a FairseqStreamError below is the one `fairseq-stream: error:` line, exit 1
    _check_args(args)
    dictionary = _load_dictionary(args.dict)
    start = time.perf_counter()
    sentences = _read_sentences(args.text, dictionary)
    prior = count_prior(sentences, ngram=args.ngram, dictionary=dictionary, bos=dictionary.bos(),
                        min_count=args.min_count)
    data = prior_bytes(prior)
    write_bytes_checked(args.out, data, "--out")
    print(f"wrote {args.out} ({len(data) / 2**10:.0f} KiB): {len(prior.unigram)} one-token and {len(prior.bigram_keys)} "
          f"two-token keys from {len(sentences)} sentences, N = {args.ngram} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
