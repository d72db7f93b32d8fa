#!/usr/bin/env python
"""Speculative decoding against our own greedy: decode time, identical output, acceptance.

One process, the demo model (float32) and its shipped draft, held-out ``test.es``; each row is
run ``--repeats`` times interleaved with the others (a shared machine slows all alike) and the
table gives the median decode time and its ratio to our greedy (``fixed-ours --beam 1``) at
the same capacity, the median of each run's ratio to greedy's run of the same round (``paired``:
steadier where the machine's speed drifts between rounds; every run's time is printed below),
how many sentences' tokens equal greedy's, tokens accepted per verification, the mean γ and the
draft's share of the time.

    OMP_NUM_THREADS=1 python scripts/bench/bench_speculative.py --limit 100 --capacity 1 --repeats 3
    OMP_NUM_THREADS=1 python scripts/bench/bench_speculative.py --limit 300 --capacity 64 --repeats 3
    ... --draft user_dir_examples/demo/draft.pt NEW.pt     # two drafts, side by side
    ... --draft-quantize none,int8                         # the draft's float and int8 weights, side by side
    ... --lookahead-prior PRIOR.pt                         # lookahead also with a prior (tools/lookahead_prior.py)

Its own timing loop, not the harness's (``python -m fairseq_stream.tools.bench``, the one benchmarking
entry point; ``--run speculative:draft_path=...`` there times the same rows without these columns):
the columns need each run's hypotheses as tokens (identity to greedy) and the per-round pairing, and
it reads no references (the harness scores BLEU); moving it onto the harness is not a small change.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "user_dir_examples", "demo")
sys.path.insert(0, REPO)

import torch  # noqa: E402

from fairseq_stream.tools.session import TranslationSession  # noqa: E402


def _read(path: str, limit: int) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", default=os.path.join(DEMO, "checkpoint.pt"))
    parser.add_argument("--draft", nargs="+", default=[os.path.join(DEMO, "draft.pt")],
                        help="draft checkpoint(s): each gets the --gammas rows (two drafts compared in one run)")
    parser.add_argument("--src", default=os.path.join(DEMO, "test.es"))
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=1)
    parser.add_argument("--gammas", default="2,3,4,6,auto",
                        help="--draft-tokens values, one row each ('' = no speculative rows)")
    parser.add_argument("--draft-quantize", default="auto",
                        help="--draft-quantize values (comma-separated): each gets the --gammas rows")
    parser.add_argument("--lookahead", default="3", help="--lookahead-ngram values, one row each ('' = none)")
    parser.add_argument("--lookahead-prior", nargs="*", default=[],
                        help="--lookahead-prior files: each --lookahead row again with each counted for its N")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    session = TranslationSession.load(DEMO, args.path, bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    data = session.encode(_read(args.src, args.limit))
    gen = {"beam": 1}
    rows: List[Dict[str, Any]] = [{"label": "greedy (fixed-ours --beam 1)", "search": "fixed-ours", "opts": {}}]
    choices = args.draft_quantize.split(",")
    for draft in args.draft:
        name = f" ({os.path.basename(draft)})" if len(args.draft) > 1 else ""
        for q in choices:
            weights = f" --draft-quantize {q}" if len(choices) > 1 else ""
            for g in filter(None, args.gammas.split(",")):
                rows.append({"label": f"speculative --draft-tokens {g}{weights}{name}", "search": "speculative",
                             "opts": {"draft_path": draft, "draft_tokens": g, "draft_quantize": q}})
    prior_ngram = {prior: torch.load(prior, weights_only=True)["ngram"] for prior in args.lookahead_prior}
    for n in filter(None, args.lookahead.split(",")):
        rows.append({"label": f"lookahead --lookahead-ngram {n}", "search": "lookahead",
                     "opts": {"lookahead_ngram": int(n)}})
        for prior in args.lookahead_prior:
            if prior_ngram[prior] != int(n):
                continue  # a prior counted for another N
            rows.append({"label": f"lookahead --lookahead-ngram {n} --lookahead-prior {os.path.basename(prior)}",
                         "search": "lookahead", "opts": {"lookahead_ngram": int(n), "lookahead_prior": prior}})
    warm = session.encode(_read(args.src, 8))
    for row in rows:  # warm-up: kernel builds, first-call allocations
        session.translate(warm, search=row["search"], gen=gen, opts=dict(row["opts"], stream_capacity=args.capacity),
                          postprocess=False)
    for _ in range(args.repeats):
        for row in rows:
            start = time.perf_counter()
            out = session.translate(data, search=row["search"], gen=gen,
                                    opts=dict(row["opts"], stream_capacity=args.capacity), postprocess=False)
            row.setdefault("times", []).append(time.perf_counter() - start)
            row["out"] = out
    greedy = rows[0]["out"]
    base = statistics.median(rows[0]["times"])
    print(f"{len(data)} sentences, capacity {args.capacity}, {torch.get_num_threads()} thread(s), "
          f"median of {args.repeats} interleaved runs")
    print("| row | decode s | vs greedy | paired | identical to greedy | tokens/verification | mean γ | draft time |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        out, t = row["out"], statistics.median(row["times"])
        same = sum(a[0]["tokens"].tolist() == b[0]["tokens"].tolist() for a, b in zip(greedy.hypos, out.hypos))
        extra = out.stats.extra
        iterations = extra.get("sentence_iterations")
        per_verify = f"{out.stats.autoregressive_steps / iterations:.2f}" if iterations else "—"
        gamma = (f"{extra['draft_tokens_proposed'] / extra['draft_proposals']:.2f}" if extra.get("draft_proposals")
                 else "—")
        share = (f"{100 * extra['draft_seconds'] / out.stats.wall_seconds:.0f}%" if extra.get("draft_seconds") else "—")
        # each run against greedy's run of the same round: a slow spell of a shared machine hits both
        paired = statistics.median(a / b for a, b in zip(row["times"], rows[0]["times"]))
        print(f"| {row['label']} | {t:.2f} | {t / base:.2f}× | {paired:.2f}× | {same}/{len(out.hypos)} | {per_verify} | "
              f"{gamma} | {share} |")
    for row in rows:  # every run, in order: how noisy the machine was
        print(f"{row['label']}: runs " + " ".join(f"{t:.2f}" for t in row["times"]) + " s")
    for row in rows:  # accepted tokens per row and verification (speculative's closing statistics)
        hist = sorted((int(k.split("_")[1]), int(v)) for k, v in row["out"].stats.extra.items() if k.startswith("accepted_"))
        if hist:
            print(f"{row['label']}: tokens accepted per verification " + " ".join(f"{k}:{n}" for k, n in hist))


if __name__ == "__main__":
    main()
