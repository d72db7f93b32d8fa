#!/usr/bin/env python
"""One-off experiment: does the variable-width beam lose BLEU? Per checkpoint and beam size, one table (docs/results.md, "Variable-width streaming beam search", 2026-11-23).

For every checkpoint and every ``k`` this decodes the same sentences with fairseq's ``beam``,
``fixed-ours`` and ``var-batch`` under each reference of the pruning thresholds
(``--prune-reference``: ``final`` is Yang2020's literal rule, see
:class:`fairseq_stream.search.beam.Pruning`), and prints BLEU, the length ratio
(hypothesis / reference words, sacrebleu's) and the candidate expansions, also relative to
``fixed-ours`` with a paired-bootstrap p-value of a loss against ``fixed-ours`` (the share
of 1,000 resampled test sets on which the row is not worse: below 0.05, the loss is real),
and how the beam searches ended: the sentences whose beam emptied before
``Z`` final hypotheses ("short of Z") and those whose output is the first hypothesis that
became final ("first final won"). Early checkpoints come from ``scripts/models/build_demo_model.py --save-every``:

    python scripts/models/build_demo_model.py --corpus DIR --stages prep,train --max-update 1500 --save-every 100
    python scripts/experiments/var_width_quality.py --limit 500 \\
        --checkpoint 300=work/demo_build/checkpoints/checkpoint_2_300.pt \\
        --checkpoint final=user_dir_examples/demo/checkpoint.pt

Decoding is ``var-batch`` (= ``var-stream``'s output, exactly) so the rows are one search each.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

import torch  # noqa: E402

from fairseq_stream.tools.bench import parse_run, rows_for_json, run_benchmark  # noqa: E402
from fairseq_stream.tools.session import TranslationSession  # noqa: E402
from fairseq_stream.tools.significance import paired_bootstrap_p  # noqa: E402
from fairseq_stream.search.beam import ENDED, REFERENCES  # noqa: E402

DEMO = os.path.join(REPO, "user_dir_examples", "demo")


def runs_for(k: int, references: List[str], ended: List[str], fairseq_beam: bool = True) -> List[str]:
    specs = [f"beam:beam={k},label=fairseq beam"] if fairseq_beam else []
    specs += [f"fixed-ours:beam={k},label=fixed-ours"]
    specs += [f"var-batch:beam={k},prune_reference={ref},prune_ended={e},label=var {ref}" + (f" {e}" if len(ended) > 1 else "")
              for e in ended for ref in references]
    return specs


def measure(session: Any, sources: List[str], refs: List[str], k: int, references: List[str],
            batch_size: int, ended: List[str], fairseq_beam: bool = True) -> List[Dict[str, Any]]:
    specs = runs_for(k, references, ended, fairseq_beam)
    runs = [parse_run(s, list(session.cfg.generation.keys())) for s in specs]
    rows = run_benchmark(session, sources, refs, runs, repeats=1, batch_size=batch_size, progress=False,
                         log=lambda m: print(m, file=sys.stderr))
    fixed_row = next(r for r in rows if r["search"] == "fixed-ours")
    fixed = fixed_row["stats"]["expansions"]
    for row in rows:
        row["p_vs_fixed"] = None if row is fixed_row else paired_bootstrap_p(fixed_row["outputs"], row["outputs"], refs)
        row["k"] = k
        exp = row["stats"].get("expansions", 0)
        row["expansions"] = exp
        row["expansions_vs_fixed"] = exp / fixed if exp and fixed else None
    return rows


def format_rows(rows: List[Dict[str, Any]]) -> str:
    head = ["checkpoint", "k", "strategy", "BLEU", "Δ fixed-ours", "length ratio", "expansions", "× fixed-ours",
            "p (loss)", "short of Z", "first final won"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    fixed = {(r["checkpoint"], r["k"]): r["bleu"] for r in rows if r["search"] == "fixed-ours"}
    for r in rows:
        delta = r["bleu"] - fixed[(r["checkpoint"], r["k"])]
        ratio = f"{r['expansions_vs_fixed']:.2f}" if r["expansions_vs_fixed"] else "—"
        exp = str(r["expansions"]) if r["expansions"] else "—"
        extra, n = r["stats"].get("extra", {}), r["sentences"]
        short = f"{100 * extra.get('beam_ended_short_of_z', 0) / n:.0f}%" if "beam_finals" in extra else "—"
        first = f"{100 * extra.get('beam_first_final_won', 0) / n:.0f}%" if "beam_finals" in extra else "—"
        p = "—" if r.get("p_vs_fixed") is None else f"{r['p_vs_fixed']:.3f}"
        lines.append(f"| {r['checkpoint']} | {r['k']} | {r['label']} | {r['bleu']:.2f} | {delta:+.2f} | "
                     f"{r['length_ratio']:.3f} | {exp} | {ratio} | {p} | {short} | {first} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", action="append", required=True, metavar="LABEL=PATH",
                        help="a checkpoint to evaluate, repeatable (LABEL names its row, e.g. its updates)")
    parser.add_argument("--data", default=DEMO, help="directory with the dictionaries")
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO, "test.es"))
    parser.add_argument("--ref", default=os.path.join(DEMO, "test.en"))
    parser.add_argument("--limit", type=int, default=500, help="first N sentences")
    parser.add_argument("--beam", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--references", nargs="+", default=list(REFERENCES), choices=REFERENCES)
    parser.add_argument("--ended", nargs="+", default=["prune"], choices=ENDED,
                        help="--prune-ended values to compare (each with every reference)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch, every row alike")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-fairseq-beam", action="store_true",
                        help="leave out fairseq's beam (the slowest row on a model that does not stop)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    with open(args.src, encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f][: args.limit]
    with open(args.ref, encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f][: args.limit]
    extra = ["--source-lang", os.path.splitext(args.src)[1][1:], "--target-lang", os.path.splitext(args.ref)[1][1:]]
    rows: List[Dict[str, Any]] = []
    for spec in args.checkpoint:
        label, _, path = spec.partition("=")
        if not path:
            parser.error(f"--checkpoint {spec!r}: expected LABEL=PATH")
        session = TranslationSession.load(args.data, path, bpe_codes=args.bpe_codes, extra_args=extra, cpu=True)
        for k in args.beam:
            print(f"checkpoint {label}, k = {k}", file=sys.stderr)
            for row in measure(session, sources, refs, k, args.references, args.batch_size, args.ended,
                               not args.no_fairseq_beam):
                rows.append(dict(row, checkpoint=label))
    print(f"{len(sources)} sentences of {args.src}")
    print(format_rows(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows_for_json(rows), f, indent=1)


if __name__ == "__main__":
    main()
