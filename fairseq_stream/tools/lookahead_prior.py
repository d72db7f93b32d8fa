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
import sys
import time
from typing import List, Optional, Sequence

from fairseq.data import Dictionary

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.lookahead_prior import count_prior, save_prior


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dict", required=True, help="the model's target dictionary (dict.TGT.txt)")
    parser.add_argument("--text", required=True, help="the model's greedy outputs on training sources, BPE'd")
    parser.add_argument("--ngram", type=int, default=4, help="N: the run's --lookahead-ngram")
    parser.add_argument("--min-count", type=int, default=1, help="keep a key's continuation seen this often")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        dictionary = Dictionary.load(args.dict)
        start = time.perf_counter()
        sentences: List[List[int]] = []
        with open(args.text, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    sentences.append(dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).tolist())
        if not sentences:
            raise FairseqStreamError(f"--text {args.text}: no sentences")
        prior = count_prior(sentences, ngram=args.ngram, dictionary=dictionary, bos=dictionary.bos(),
                            min_count=args.min_count)
        size = save_prior(prior, args.out)
    except (FairseqStreamError, OSError) as err:
        sys.exit(f"lookahead_prior: {err}")
    print(f"wrote {args.out} ({size / 2**10:.0f} KiB): {len(prior.unigram)} one-token and {len(prior.bigram_keys)} "
          f"two-token keys from {len(sentences)} sentences, N = {args.ngram} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
