#!/usr/bin/env python
"""Zhang2020 Table 1 columns for trained checkpoints: BLEU with GNMT's length penalty, latency at batch 1.

    python scripts/papers/ib_eval.py --data BIN --bpe-codes CODES --src test.en --ref test.de \\
        --model Transformer=beam:ckpt_a.pt --model IBDecoder+KD=ib-beam:ckpt_b.pt --beams 4 1

For every model and beam size B: the test set is decoded with ``--nbest B`` and each n-best list
re-ranked by GNMT's penalty ``((5 + |Y|) / 6)^α`` (:mod:`fairseq_stream.search.rescore`; α = 0.6 as in
the paper), then detokenised and scored with sacreBLEU. Latency (Zhang2020: "decoding the test
set with a batch size of 1, averaged over three runs") is the mean wall time per sentence at
batch size 1 over ``--runs`` runs of the benchmark harness; the speedup is relative to the first
model at the first beam size, "vs ours" to our own engine's fixed beam (a ``fixed-ours`` model
row) at the same beam size. Used by ``scripts/papers/wmt14_ibdecoder.sh``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def read_lines(path: str, limit: int = 0) -> List[str]:
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def search_options(search: str, capacity: int, ib_finalize: str) -> Dict[str, Any]:
    """Our strategies' options: the stream's capacity, and ib-beam's rule for ended continuations."""
    if search == "beam":
        return {}
    return {"stream_capacity": capacity, **({"ib_finalize": ib_finalize} if search == "ib-beam" else {})}


def bleu_gnmt(session: Any, dataset: Any, search: str, gen: Dict[str, Any], alpha: float, refs: List[str],
              ib_finalize: str = "top") -> float:
    import sacrebleu

    from fairseq_stream.search.rescore import rerank_all

    opts = search_options(search, 64, ib_finalize)
    result = session.translate(dataset, search=search, gen=gen, opts=opts, postprocess=False)
    hyps = [session.detokenize(h["tokens"]) for h in rerank_all(result.hypos, alpha)]
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def latency_ms(session: Any, sources: List[str], refs: List[str], search: str, gen: Dict[str, Any], runs: int,
               ib_finalize: str = "top") -> float:
    from fairseq_stream.tools.bench import RunSpec, run_benchmark

    opts = search_options(search, 1, ib_finalize)
    run = RunSpec(f"{search} B={gen['beam']}", search, gen=gen, opts=opts)
    row = run_benchmark(session, sources, refs, [run], repeats=runs, batch_size=1, progress=False,
                        log=lambda m: None)[0]
    return 1000.0 * statistics.mean(row["walls"]) / len(sources)


def evaluate(args: argparse.Namespace) -> List[Dict[str, Any]]:
    from fairseq_stream.tools.bench import DTYPES
    from fairseq_stream.tools.session import TranslationSession

    sources, refs = read_lines(args.src), read_lines(args.ref)
    n = args.latency_sentences or len(sources)
    rows = []
    for spec in args.model:
        label, _, rest = spec.partition("=")
        search, _, ckpt = rest.partition(":")
        session = TranslationSession.load(
            args.data, ckpt, bpe_codes=args.bpe_codes, cpu=args.device == "cpu", dtype=DTYPES[args.dtype],
            extra_args=["--source-lang", args.source_lang, "--target-lang", args.target_lang])
        dataset = session.encode(sources)
        for beam in args.beams:
            # raw scores and every finished hypothesis: GNMT's penalty picks among them
            gen = {"beam": beam, "nbest": beam, "lenpen": 0.0, "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}
            bleu = bleu_gnmt(session, dataset, search, gen, args.alpha, refs, args.ib_finalize)
            ms = (latency_ms(session, sources[:n], refs[:n], search, gen, args.runs, args.ib_finalize)
                  if args.runs else float("nan"))
            rows.append({"model": label, "search": search, "beam": beam, "bleu": bleu, "latency_ms": ms})
            print(f"  {label} B={beam}: BLEU {bleu:.2f}, {ms:.1f} ms/sentence", file=sys.stderr, flush=True)
    for row in rows:
        row["speedup"] = rows[0]["latency_ms"] / row["latency_ms"] if row["latency_ms"] else float("nan")
        row["speedup_vs_ours"] = own_speedup(rows, row)
    return rows


def own_speedup(rows: List[Dict[str, Any]], row: Dict[str, Any]) -> float:
    """``row``'s speedup over our own engine's fixed beam (``fixed-ours``) at the same beam: the
    last such row before it (the Transformer of its training), else the first; NaN without one."""
    own = [r for r in rows if r["search"] == "fixed-ours" and r["beam"] == row["beam"]]
    before = [r for r in own if rows.index(r) <= rows.index(row)]
    base = (before or own or [None])[-1 if before else 0]
    if base is None or not row["latency_ms"]:
        return float("nan")
    return base["latency_ms"] / row["latency_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="directory with the dictionaries")
    parser.add_argument("--bpe-codes", required=True)
    parser.add_argument("--src", required=True, help="raw test sources")
    parser.add_argument("--ref", required=True, help="raw test references")
    parser.add_argument("--source-lang", required=True)
    parser.add_argument("--target-lang", required=True)
    parser.add_argument("--model", action="append", required=True,
                        help="LABEL=SEARCH:CHECKPOINT (no '=' in LABEL); repeatable")
    parser.add_argument("--beams", type=int, nargs="+", default=[4, 1])
    parser.add_argument("--alpha", type=float, default=0.6, help="GNMT length penalty α")
    parser.add_argument("--max-len-a", type=float, default=1.2, help="maximum length a·|x| + b")
    parser.add_argument("--max-len-b", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3, help="latency runs (0 = no latency)")
    parser.add_argument("--latency-sentences", type=int, default=0, help="first N test sentences (0 = all)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    parser.add_argument("--ib-finalize", choices=["top", "all"], default="top",
                        help="ib-beam's rule for ended continuations: 'all' = Algorithm 1 read literally (the "
                             "paper's rows), 'top' = our default")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = evaluate(args)
    print("| model | B | BLEU (GNMT lp) | latency ms (batch 1) | speedup | vs ours |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['beam']} | {r['bleu']:.2f} | {r['latency_ms']:.1f} | {r['speedup']:.2f}x "
              f"| {r['speedup_vs_ours']:.2f}x |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": args.device, "dtype": args.dtype, "ib_finalize": args.ib_finalize, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
