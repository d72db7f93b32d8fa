#!/usr/bin/env python
"""One-off experiment: where a strategy's decoding time goes, a per-step cost model fitted on ``--stream-stats`` traces (docs/results.md, "How the figures are measured" and the var-stream step cost, 2026-11-22).

Streaming (Yang2020) pays off when a decoder call costs about the same whatever the number of
rows in it (a GPU below saturation): fewer, fuller calls then save time. On a CPU a call costs
roughly in proportion to its rows, so the saving shrinks. This script measures which regime a
run is in. For every step of each trace it fits, by least squares,

    ms(step) = a + b · rows + c · rows · length

(``a``: fixed cost per call — Python, scheduling, kernel launches; ``b``: per hypothesis —
feed-forward, output layer; ``c``: per hypothesis and cached position — attention) and prints
the coefficients, the share of the total time the fixed part explains, and the totals the
streaming and batched runs differ by (steps, rows, mean rows per step).

    python -m fairseq_stream.tools.bench --run var-batch:beam=5 --run var-stream:beam=5 --trace-dir traces
    python scripts/experiments/step_cost.py traces/*.json
"""
from __future__ import annotations

import argparse
import json
from typing import Dict, List

import numpy as np


def fit(trace: List[Dict[str, float]]) -> Dict[str, float]:
    ms = np.array([e["ms"] for e in trace], dtype=float)
    rows = np.array([e["rows"] for e in trace], dtype=float)
    length = np.array([e["length"] for e in trace], dtype=float)
    design = np.stack([np.ones_like(rows), rows, rows * length], axis=1)
    (a, b, c), *_ = np.linalg.lstsq(design, ms, rcond=None)
    predicted = design @ np.array([a, b, c])
    r2 = 1 - ((ms - predicted) ** 2).sum() / max(((ms - ms.mean()) ** 2).sum(), 1e-12)
    return {"steps": len(trace), "seconds": ms.sum() / 1000, "rows": rows.sum(), "mean_rows": rows.mean(),
            "a_ms": a, "b_us_per_row": 1000 * b, "c_ns_per_row_pos": 1e6 * c, "fixed_share": a * len(trace) / ms.sum(),
            "r2": r2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stats", nargs="+", help="JSON files written by --stream-stats or bench --trace-dir")
    args = parser.parse_args()
    head = ["run", "steps", "decoder s", "rows (hyps)", "rows/step", "a ms/call", "b µs/row", "c ns/row/pos",
            "fixed share", "R²"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for path in args.stats:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        trace = [e for e in data.get("trace") or [] if "ms" in e]
        if not trace:
            print(f"| {path} | no timed trace (rerun with --stream-stats / --trace-dir) |")
            continue
        r = fit(trace)
        print(f"| {data.get('search', path)} | {r['steps']} | {r['seconds']:.2f} | {r['rows']:.0f} | "
              f"{r['mean_rows']:.1f} | {r['a_ms']:.2f} | {r['b_us_per_row']:.0f} | {r['c_ns_per_row_pos']:.0f} | "
              f"{r['fixed_share']:.0%} | {r['r2']:.2f} |")


if __name__ == "__main__":
    main()
