"""The demo: translate held-out Spanish Bible verses with the shipped model and compare strategies.

    python -m fairseq_stream.tools.demo                 # 50 sentences, 6 strategies: about a minute
    python -m fairseq_stream.tools.demo --full          # 200 sentences, every demo strategy
    python -m fairseq_stream.tools.demo --full --limit 986 --repeats 3

It prints a few translations, then one table: BLEU (sacreBLEU on detokenised text),
wall seconds, sentences/s and each strategy's statistics. A line per decoding pass shows the
progress. Torch's threads follow the command-line tools' rule (the idle cores only, unless
``OMP_NUM_THREADS`` is set), and a line under the table says when other processes kept the
machine busy while it was measured (then its times say more about the load than the strategies).
The model, BPE codes, dictionaries and test sample are in ``user_dir_examples/demo/``
(``scripts/models/build_demo_model.py`` rebuilds them), or their installed copy
(:mod:`fairseq_stream.tools.demo_files`).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Callable, List, Optional, Sequence, Tuple

import torch

from fairseq_stream.tools.bench import DEMO_DIR, RunSpec, format_table, run_benchmark
from fairseq_stream.tools.demo_files import require_demo_dir
from fairseq_stream.engine.output_paths import check_output_path, write_text_checked
from fairseq_stream.errors import FairseqStreamError, UsageError, usage_errors

_LEN = {"max_len_a": 1.2, "max_len_b": 10}
_CAP = {"stream_capacity": 32}
#: The rows of the demo table, one line each: (in the default run?, the row). ``--full`` runs
#: every row; a new strategy adds its line here.
DEMO_ROWS: List[Tuple[bool, RunSpec]] = [
    (True, RunSpec("fairseq beam k=5", "beam", gen=dict(_LEN, beam=5))),
    (False, RunSpec("fixed-ours k=5", "fixed-ours", gen=dict(_LEN, beam=5), opts=dict(_CAP))),
    (False, RunSpec("var-batch k=5", "var-batch", gen=dict(_LEN, beam=5), opts=dict(_CAP))),
    (True, RunSpec("var-stream k=5", "var-stream", gen=dict(_LEN, beam=5), opts=dict(_CAP))),
    (False, RunSpec("topup k=5", "topup", gen=dict(_LEN, beam=5), opts=dict(_CAP))),
    (True, RunSpec("fairseq greedy", "beam", gen=dict(_LEN, beam=1))),
    (True, RunSpec("gs-jacobi b=3", "gs-jacobi", gen=dict(_LEN, beam=1), opts=dict(_CAP))),
    (False, RunSpec("hybrid-jacobi b=3", "hybrid-jacobi", gen=dict(_LEN, beam=1), opts=dict(_CAP))),
    (True, RunSpec("speculative γ=3", "speculative", gen=dict(_LEN, beam=1),
                   opts={"draft_path": os.path.join(DEMO_DIR, "draft.pt"), "draft_tokens": "3"})),
    (True, RunSpec("lookahead N=3 + prior", "lookahead", gen=dict(_LEN, beam=1),
                   opts={"lookahead_ngram": 3, "lookahead_prior": os.path.join(DEMO_DIR, "lookahead_prior.pt")})),
]
DEMO_RUNS: List[RunSpec] = [run for _, run in DEMO_ROWS]  # --full's rows
QUICK_RUNS: List[RunSpec] = [run for quick, run in DEMO_ROWS if quick]  # the default's rows
QUICK_LIMIT, FULL_LIMIT = 50, 200  # sentences of the default run and of --full
#: Other processes' busy cores (mean over the measurement) from which the table gets a warning line.
BUSY_CORES = 0.5


def check_args(args: argparse.Namespace) -> None:
    """Counts below 1 are refused up front (one line, exit 2), not met by a traceback mid-run."""
    for flag, value, least in (("--limit", args.limit, 1), ("--repeats", args.repeats, 1),
                               ("--warmup", args.warmup, 0), ("--examples", args.examples, 0)):
        if value is not None and value < least:
            raise UsageError(f"{flag} must be >= {least}, got {value}")
    if args.outputs:  # checked now, not after every strategy ran; the demo's own files are all inputs
        demo_files = [("a file of the demo", os.path.join(DEMO_DIR, n)) for n in _listdir(DEMO_DIR)]
        try:
            check_output_path(args.outputs, "--outputs", inputs=demo_files)
        except FairseqStreamError as exc:
            raise UsageError(str(exc)) from None


def _listdir(folder: str) -> List[str]:
    try:
        return os.listdir(folder)
    except OSError:  # no demo folder: require_demo_dir says so
        return []


def busy_note(busy: Optional[float], cores: int, threshold: float = BUSY_CORES) -> Optional[str]:
    """The line under the table when other processes kept ``busy`` cores (mean) of ``cores`` busy."""
    if busy is None or busy < threshold:
        return None
    return (f"note: other processes kept about {busy:.1f} of {cores} cores busy while this was measured: the wall "
            "times and ratios above reflect that load more than the strategies; rerun on an idle machine to compare speed")


def pass_logger(total: int, write: Callable[[str], None], clock: Callable[[], float] = time.perf_counter
                ) -> Callable[[str], None]:
    """Numbers run_benchmark's line per decoding pass ("[3/8] ... elapsed 12 s"): progress while it runs."""
    start, done = clock(), [0]

    def log(message: str) -> None:
        done[0] += 1
        write(f"[{done[0]}/{total}] {message.strip()} (elapsed {clock() - start:.0f} s)")

    return log


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help=f"every demo strategy ({len(DEMO_RUNS)}) over {FULL_LIMIT} sentences, instead of "
                             f"{len(QUICK_RUNS)} strategies over {QUICK_LIMIT}")
    parser.add_argument("--limit", type=int, default=None,
                        help=f"held-out sentences to translate (max 986; default {QUICK_LIMIT}, {FULL_LIMIT} with --full)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per strategy (the table gives the median)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per strategy first (0 = none)")
    parser.add_argument("--examples", type=int, default=3, help="translations to print")
    parser.add_argument("--outputs", metavar="FILE", default=None,
                        help="also write every row's translations (JSON: label → detokenised 1-best lines), e.g. to "
                             "compare two revisions' outputs")
    return parser


def _read(name: str, limit: int) -> List[str]:
    with open(os.path.join(DEMO_DIR, name), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:limit]


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    with usage_errors():
        check_args(args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("fairseq").setLevel(logging.WARNING)

    from fairseq_stream.integration.compat import install_excepthook
    from fairseq_stream.integration.runtime import LoadMeter, avoid_oversubscription
    from fairseq_stream.tools.session import TranslationSession

    install_excepthook()
    require_demo_dir(DEMO_DIR)
    runs = DEMO_RUNS if args.full else QUICK_RUNS
    limit = args.limit or (FULL_LIMIT if args.full else QUICK_LIMIT)
    sources, references = _read("test.es", limit), _read("test.en", limit)
    session = TranslationSession.load(
        DEMO_DIR, os.path.join(DEMO_DIR, "checkpoint.pt"), bpe_codes=os.path.join(DEMO_DIR, "bpe.codes"),
        extra_args=["--source-lang", "es", "--target-lang", "en"],
    )
    avoid_oversubscription(on_cpu=not session.use_cuda)  # the command-line tools' thread rule
    print(f"fairseq-stream demo: {len(sources)} held-out Spanish→English verses, "
          f"{len(session.models)} model(s), torch threads {torch.get_num_threads()}\n")
    example = session.translate(session.encode(sources[: args.examples]), search="beam", gen={"beam": 5})
    for src, hyp, ref in zip(sources, example.strings, references):
        print(f"  es:  {src}\n  hyp: {hyp}\n  ref: {ref}\n")
    passes = len(runs) * (args.warmup + args.repeats)
    print(f"measuring {len(runs)} strategies × {args.warmup} warm-up + {args.repeats} timed pass(es) over "
          f"{len(sources)} sentences{'' if args.full else ' (--full: every strategy over ' + str(FULL_LIMIT) + ')'}",
          file=sys.stderr, flush=True)
    meter = LoadMeter().start()
    rows = run_benchmark(session, sources, references, runs, repeats=args.repeats, warmup=args.warmup,
                         log=pass_logger(passes, lambda m: print(m, file=sys.stderr, flush=True)))
    busy = meter.stop()
    print(format_table(rows))
    if args.outputs:
        write_text_checked(args.outputs, json.dumps({row["label"]: row["outputs"] for row in rows}, ensure_ascii=False,
                                                    indent=1), "--outputs")
    note = busy_note(busy, os.cpu_count() or 1)
    if note:
        print(note)


if __name__ == "__main__":
    main()
