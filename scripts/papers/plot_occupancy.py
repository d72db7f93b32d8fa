#!/usr/bin/env python
"""Plot the actual batch size during decoding (Hoang2018 Figures 2 and 8) from ``--stream-stats`` files.

    fairseq-generate ... --search var-batch  --stream-stats batch.json
    fairseq-generate ... --search var-stream --stream-stats stream.json
    python scripts/papers/plot_occupancy.py batch.json stream.json --out occupancy.png

Left: sentences (or, with ``--rows``, hypotheses) in each decoder call, step by step. Right:
their distribution — how often the batch was full, half full, nearly empty.
"""
from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stats", nargs="+", help="JSON files written by --stream-stats")
    parser.add_argument("--rows", action="store_true", help="plot hypotheses (candidates) instead of sentences")
    parser.add_argument("--out", default="occupancy.png")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = "rows" if args.rows else "sentences"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for path in args.stats:
        with open(path, encoding="utf-8") as f:
            stats = json.load(f)
        trace = stats.get("trace") or []
        if not trace:
            raise SystemExit(f"{path} has no trace; write it with --stream-stats")
        label = f"{stats.get('search', os.path.basename(path))} ({len(trace)} steps)"
        values = [entry[key] for entry in trace]
        left.plot(range(1, len(values) + 1), values, label=label, linewidth=0.8)
        right.hist(values, bins=30, alpha=0.5, label=label)
    left.set_xlabel("decoding step")
    left.set_ylabel(f"{key} in the step")
    left.set_title("Actual batch size during decoding")
    right.set_xlabel(f"{key} in the step")
    right.set_ylabel("steps")
    right.set_title("Distribution")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=130)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
