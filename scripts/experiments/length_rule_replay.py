"""One-off experiment: would a rule on the probes' output lengths steer ``--prune-auto`` where the score does not? A replay, offline (docs/history/results-2026-11.md, ``--prune-auto`` round 7, 2026-11-29).

On weak models pruning's search error shows as a shift of output length more than as a loss of model
score (docs/history/results-2026-11.md, ``--prune-auto`` round 7), so the controller (search/prune_controller.py), which
judges by the score, never widens for them. This script replays a simplified controller over what
``scripts/experiments/rung_outcomes.py --json`` wrote (every sentence decoded at every rung and by the
fixed beam), with and without a length rule, and prints the BLEU and decoder rows each rule would give:

* the run goes through the sentences in the dump's order (the stream's), starting at the fastest rung;
  ``--probes`` of them (per k) are probes, drawn at random positions, ``--draws`` times;
* each probe's outcome at the current rung joins a window; **score rule** (the controller's relax
  test): at least PRUNE_AUTO_MIN_RELAX outcomes and a relative loss of the fixed beam's score above
  ``--tolerance`` moves one rung safer; **length rule**: besides, ``--need`` probes in the window whose best
  hypothesis is shorter than ``--ratio`` × the fixed beam's or longer than 1/``--ratio`` × (the fixed beam's at
  least 4 tokens) move one rung safer, or, with ``jump``, straight to the safest pruned rung;
* every sentence's output is its rung's at the time the run reached it (a move steers what follows).

No tightening and no budget: it asks only whether the evidence a 300-sentence run reads could tell a
weak model from a strong one. Example (the rung_outcomes dumps of two models)::

    python scripts/experiments/rung_outcomes.py --beam 5 50 --json demo.json
    python scripts/experiments/length_rule_replay.py demo.json --ref user_dir_examples/demo/test.en
"""
from __future__ import annotations

import argparse
import json
import random
import os
import sys
from collections import deque
from typing import Any, Deque, Dict, List, Sequence, Tuple

import sacrebleu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
from fairseq_stream.search.defaults import PRUNE_AUTO_MIN_RELAX, PRUNE_AUTO_TOLERANCE  # noqa: E402
from fairseq_stream.search.prune_controller import OFF as OFF_SETTING, Probe, Window, ladder  # noqa: E402

OFF = OFF_SETTING.label()


def rungs_of(outcomes: Dict[str, Any], beam: int) -> List[str]:
    """The controller's ladder at ``--beam beam`` (its start, the fastest, first; then the fixed beam), as far as
    the dump decoded it."""
    return [label for label in (s.label() for s in ladder(beam)) if label in outcomes]


def replay(outcomes: Dict[str, Any], refs: Sequence[str], beam: int, probes: int, seed: int, *, rule: str,
           need: int = 1, ratio: float = 0.8, jump: bool = False,
           tolerance: float = PRUNE_AUTO_TOLERANCE) -> Tuple[float, int, int]:
    """BLEU, decoder rows and moves of one run with probes at ``probes`` random positions."""
    order = list(outcomes[OFF])
    fixed = outcomes[OFF]
    rungs = rungs_of(outcomes, beam)
    at, moves = 0, 0
    window = Window()  # the controller's: its relative loss over its last PRUNE_AUTO_WINDOW probes
    drastic: Deque[bool] = deque(maxlen=window.size)  # the same probes' length test
    probe_at = set(random.Random(seed).sample(range(len(order)), min(probes, len(order))))
    out = {}
    for pos, i in enumerate(order):
        rung = rungs[at]
        out[i] = outcomes[rung][i]
        if pos not in probe_at or rung == OFF or len(fixed[i]["tokens"]) < 3:  # blank, one token: no evidence
            continue
        got = outcomes[rung][i]
        n_fixed, n_got = len(fixed[i]["tokens"]), len(got["tokens"])
        window.add(Probe(fixed[i]["score"], got["score"], got["tokens"] != fixed[i]["tokens"]))
        drastic.append(n_fixed >= 4 and not ratio <= n_got / n_fixed <= 1 / ratio)
        to = at
        if len(window) >= PRUNE_AUTO_MIN_RELAX and not window.within(tolerance):
            to = at + 1
        if rule == "length" and sum(drastic) >= need:
            to = max(to, len(rungs) - 2 if jump else at + 1)
        if to != at and to < len(rungs) - 1:
            at, moves = to, moves + 1
            window, drastic = Window(), deque(maxlen=window.size)
    bleu = sacrebleu.corpus_bleu([out[i]["text"] for i in order], [[refs[int(i)] for i in order]]).score
    return bleu, sum(o["rows"] for o in out.values()), moves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dump", help="rung_outcomes.py --json's file")
    parser.add_argument("--ref", required=True, help="the raw references the dump's sentence numbers index")
    parser.add_argument("--probes", nargs="+", default=["5:15", "50:5"], metavar="K:N",
                        help="probes a run reads at beam K (a 300-sentence run: 15-17 at k = 5, 4-7 at k = 50)")
    parser.add_argument("--draws", type=int, default=40, help="random draws of the probes' positions")
    parser.add_argument("--ratio", type=float, nargs="+", default=[0.8, 0.7], help="a drastic length change")
    parser.add_argument("--tolerance", type=float, default=PRUNE_AUTO_TOLERANCE,
                        help="the relative loss the score rule allows (default: the controller's, %(default)s)")
    args = parser.parse_args()
    refs = open(args.ref, encoding="utf-8").read().split("\n")
    dump = json.load(open(args.dump, encoding="utf-8"))
    print("| k | rule | Δ BLEU against the fixed beam (mean, worst) | rows × the fixed beam's | runs that moved |")
    print("|---|---|---|---|---|")
    for spec in args.probes:
        k, probes = spec.split(":")
        if k not in dump:
            continue
        outcomes = dump[k]
        order = list(outcomes[OFF])
        refs_k = [[refs[int(i)] for i in order]]
        base = sacrebleu.corpus_bleu([outcomes[OFF][i]["text"] for i in order], refs_k).score
        base_rows = sum(o["rows"] for o in outcomes[OFF].values())
        for rung in rungs_of(outcomes, int(k))[:-1]:
            bleu = sacrebleu.corpus_bleu([outcomes[rung][i]["text"] for i in order], refs_k).score
            rows = sum(o["rows"] for o in outcomes[rung].values())
            print(f"| {k} | {rung}, fixed | {bleu - base:+.2f} | {rows / base_rows:.3f} | |")
        rules = [("score", 1, 0.8, False)] + [("length", need, ratio, jump) for ratio in args.ratio
                                               for need in (1, 2) for jump in (False, True)]
        for rule, need, ratio, jump in rules:
            runs = [replay(outcomes, refs, int(k), int(probes), seed, rule=rule, need=need, ratio=ratio, jump=jump,
                           tolerance=args.tolerance) for seed in range(args.draws)]
            label = "score (the controller's)" if rule == "score" else \
                f"length: {need} outside [{ratio:g}, {1 / ratio:.2f}] → {'the safest rung' if jump else 'one rung'}"
            mean = sum(b for b, _, _ in runs) / len(runs) - base
            worst = min(b for b, _, _ in runs) - base
            rows = sum(r for _, r, _ in runs) / len(runs) / base_rows
            moved = sum(m > 0 for _, _, m in runs) / len(runs)
            print(f"| {k} | {label} | {mean:+.2f}, {worst:+.2f} | {rows:.3f} | {100 * moved:.0f}% |")


if __name__ == "__main__":
    main()
