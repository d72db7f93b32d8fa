"""The demo: translate held-out Spanish Bible verses with the shipped model and compare strategies.

    python -m fairseq_stream.tools.demo                 # 200 held-out sentences, every demo strategy
    python -m fairseq_stream.tools.demo --limit 986 --repeats 3

It prints a few translations, then one table: BLEU (sacreBLEU on detokenised text),
wall seconds, sentences/s and each strategy's statistics. The model, BPE codes, dictionaries
and test sample are in ``user_dir_examples/demo/`` (``scripts/build_demo_model.py`` rebuilds them),
or their installed copy (:mod:`fairseq_stream.tools.demo_files`).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import List, Optional, Sequence

import torch

from fairseq_stream.tools.bench import DEMO_DIR, RunSpec, format_table, run_benchmark
from fairseq_stream.tools.demo_files import require_demo_dir
from fairseq_stream.errors import UsageError, usage_errors

#: The rows of the demo table: a new strategy adds its row here.
_LEN = {"max_len_a": 1.2, "max_len_b": 10}
DEMO_RUNS: List[RunSpec] = [
    RunSpec("fairseq beam k=5", "beam", gen=dict(_LEN, beam=5)),
    RunSpec("fixed-ours k=5", "fixed-ours", gen=dict(_LEN, beam=5), opts={"stream_capacity": 32}),
    RunSpec("var-batch k=5", "var-batch", gen=dict(_LEN, beam=5), opts={"stream_capacity": 32}),
    RunSpec("var-stream k=5", "var-stream", gen=dict(_LEN, beam=5), opts={"stream_capacity": 32}),
    RunSpec("topup k=5", "topup", gen=dict(_LEN, beam=5), opts={"stream_capacity": 32}),
    RunSpec("fairseq greedy", "beam", gen=dict(_LEN, beam=1)),
    RunSpec("gs-jacobi b=3", "gs-jacobi", gen=dict(_LEN, beam=1), opts={"stream_capacity": 32}),
    RunSpec("hybrid-jacobi b=3", "hybrid-jacobi", gen=dict(_LEN, beam=1), opts={"stream_capacity": 32}),
    RunSpec("speculative γ=2", "speculative", gen=dict(_LEN, beam=1), opts={"draft_path": os.path.join(DEMO_DIR, "draft.pt")}),
    RunSpec("lookahead N=4", "lookahead", gen=dict(_LEN, beam=1), opts={"lookahead_ngram": 4}),
]


def check_args(args: argparse.Namespace) -> None:
    """Counts below 1 are refused up front (one line, exit 2), not met by a traceback mid-run."""
    for flag, value, least in (("--limit", args.limit, 1), ("--repeats", args.repeats, 1),
                               ("--warmup", args.warmup, 0), ("--examples", args.examples, 0)):
        if value < least:
            raise UsageError(f"{flag} must be >= {least}, got {value}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=200, help="held-out sentences to translate (max 986)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per strategy (the table gives the median)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per strategy first (0 = none)")
    parser.add_argument("--examples", type=int, default=3, help="translations to print")
    args = parser.parse_args(argv)
    with usage_errors():
        check_args(args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("fairseq").setLevel(logging.WARNING)

    from fairseq_stream.integration.compat import install_excepthook
    from fairseq_stream.tools.session import TranslationSession

    install_excepthook()
    require_demo_dir(DEMO_DIR)
    with open(os.path.join(DEMO_DIR, "test.es"), encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f][: args.limit]
    with open(os.path.join(DEMO_DIR, "test.en"), encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f][: args.limit]
    session = TranslationSession.load(
        DEMO_DIR, os.path.join(DEMO_DIR, "checkpoint.pt"), bpe_codes=os.path.join(DEMO_DIR, "bpe.codes"),
        extra_args=["--source-lang", "es", "--target-lang", "en"],
    )
    print(f"fairseq-stream demo: {len(sources)} held-out Spanish→English verses, "
          f"{len(session.models)} model(s), torch threads {torch.get_num_threads()}\n")
    example = session.translate(session.encode(sources[: args.examples]), search="beam", gen={"beam": 5})
    for src, hyp, ref in zip(sources, example.strings, references):
        print(f"  es:  {src}\n  hyp: {hyp}\n  ref: {ref}\n")
    rows = run_benchmark(session, sources, references, DEMO_RUNS, repeats=args.repeats, warmup=args.warmup,
                         log=lambda m: print(m, file=sys.stderr))
    print(format_table(rows))


if __name__ == "__main__":
    main()
