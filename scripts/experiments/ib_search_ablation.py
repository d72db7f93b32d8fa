#!/usr/bin/env python
"""One-off experiment: how the IBDecoder's target design and ib-beam's ending rule change BLEU and output length (docs/history/results-2026-11.md, "IBDecoder", 2026-11-23).

For each checkpoint (``LABEL=PATH``, trained with ``--task translation_ib``), translates the
demo test sentences with ``--search ib-beam`` in these settings and prints one markdown row each:

    greedy (beam 1) · beam B with --ib-finalize all (Algorithm 1 read literally) ·
    beam B with --ib-finalize top (our default) · the same with --ib-dedup

BLEU is sacreBLEU on detokenised output; "length" is hypothesis / reference length (sacreBLEU's
sys_len / ref_len): above 1 the outputs run on, below 1 they stop short.

    python scripts/experiments/ib_search_ablation.py single=work/ib_exp/ib/checkpoint_best.pt \\
        step=work/ib_exp3/ib/checkpoint_best.pt --sentences 300
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DEMO = REPO / "user_dir_examples" / "demo"

SETTINGS: List[Tuple[str, int, Dict[str, object]]] = [
    ("greedy", 1, {}),
    ("beam, --ib-finalize all", 0, {"ib_finalize": "all"}),
    ("beam, --ib-finalize top", 0, {"ib_finalize": "top"}),
    ("beam, top + --ib-dedup", 0, {"ib_finalize": "top", "ib_dedup": True}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="LABEL=PATH of IBDecoder-family checkpoints")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--lenpen", type=float, default=0.6)
    args = parser.parse_args()
    import sacrebleu
    from fairseq_stream.tools.session import TranslationSession

    with open(DEMO / "test.es", encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f][: args.sentences]
    with open(DEMO / "test.en", encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f][: args.sentences]
    print(f"{len(sources)} sentences, beam {args.beam}, lenpen {args.lenpen}\n")
    print("| checkpoint | setting | BLEU | length |\n|---|---|---|---|", flush=True)
    for item in args.checkpoints:
        label, sep, path = item.partition("=")
        if not sep or not Path(path).exists():
            sys.exit(f"expected LABEL=PATH of an existing checkpoint, got {item!r}")
        session = TranslationSession.load(str(DEMO), path, bpe_codes=str(DEMO / "bpe.codes"),
                                          extra_args=["--source-lang", "es", "--target-lang", "en"])
        data = session.encode(sources)
        for name, beam, opts in SETTINGS:
            gen = {"beam": beam or args.beam, "lenpen": args.lenpen, "max_len_a": 1.2, "max_len_b": 10}
            result = session.translate(data, search="ib-beam", gen=gen, opts=opts)
            bleu = sacrebleu.corpus_bleu(result.strings, [references])
            print(f"| {label} | {name} | {bleu.score:.2f} | {bleu.sys_len / bleu.ref_len:.3f} |", flush=True)


if __name__ == "__main__":
    main()
