#!/usr/bin/env python
"""One-off experiment: what each rung of --prune-auto's ladder does to a model's whole input, the controller's evidence against BLEU (docs/history/results-2026-11.md, ``--prune-auto`` round 5, 2026-11-29).

``--prune-auto`` judges a rung (δ, M) by the loss of the best hypothesis's length-normalised model score
against the fixed beam's, on a few probes (fairseq_stream/search/prune_controller.py). This decodes every
sentence of the input at every rung of the ladder and with the fixed beam, and prints, per rung, what the
controller would measure if every sentence were a probe — the relative loss (the controller's statistic:
the summed loss over the fixed beam's summed |score|), the share of best hypotheses changed, made worse and
made better, and their summed length against the fixed beam's (the length shift: what BLEU's brevity penalty
reads) — beside what it cannot see: the corpus BLEU against the fixed beam's, and the expansions (the
decoder rows) as a multiple of the fixed beam's. So one can see, model by model and k by k, whether a
criterion on the model score can tell the rungs that keep BLEU from those that lose it.

    python scripts/experiments/rung_outcomes.py --path ckpt.pt --data DIR --bpe-codes CODES \\
        --src test.es --ref test.en --limit 300 --beam 5 50 [--also 1:5] [--json OUT.json]

Deterministic (counts and scores; no clock). Each rung's run is the run's strategy (var-stream) with that
rung for every sentence, its rows metered per sentence by the beam step (``BeamSearch.use_rungs(meter=True)``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Dict, List

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from fairseq_stream.integration.prune_auto import pruning_of  # noqa: E402
from fairseq_stream.model.encoder_slots import SLOT_MODULUS  # noqa: E402
from fairseq_stream.search.beam import Rung  # noqa: E402
from fairseq_stream.search.prune_controller import OFF, Setting, ladder  # noqa: E402

DEMO = os.path.join(REPO, "user_dir_examples", "demo")
Outcome = Dict[int, Dict[str, Any]]  # sentence id → score, tokens, text, rows


def decode(session: Any, dataset: Any, beam: int, setting: Setting, batch_size: int) -> Outcome:
    """Every sentence of ``dataset`` by var-stream at ``setting``: its best hypothesis and its decoder rows."""
    gen = session.build_generator("var-stream", {"beam": beam}, {"prune_auto": "off"})  # each rung fixed, no probes
    gen.config = dataclasses.replace(gen.config, pruning=pruning_of(setting, gen.config.pruning))
    gen.strategy.set_pruning(gen.config.pruning)
    # every sentence pinned to one rung, the run's setting: the same outputs, and each sentence's rows metered
    gen.strategy.use_rungs([Rung(setting.delta, setting.max_cands)], torch.ones_like, meter=True)
    serial_ids: Dict[int, int] = {}

    def admitted(admission: Any) -> None:
        for row in range(admission.count):
            serial_ids[admission.first + row] = gen.input.sentence_id(admission.first + row)

    gen.input.on_admit = admitted
    out: Outcome = {}
    with torch.no_grad():
        for batch in session.batches(dataset, None, batch_size, None):
            for i, hypos in zip(batch["id"].tolist(), gen.generate(session.models, batch)):
                best = hypos[0]
                out[i] = {"score": float(best["score"]), "tokens": best["tokens"].tolist(),
                          "text": session.detokenize(best["tokens"])}
    for handle, rows in gen.strategy.pinned_rows.items():
        out[serial_ids[handle // SLOT_MODULUS]]["rows"] = rows
    metered = sum(o.get("rows", 0) for o in out.values())
    if metered != gen.stats.expansions or len(gen.strategy.pinned_rows) != len(out):
        raise SystemExit(f"rung_outcomes: the per-sentence rows ({metered}) are not the run's expansions "
                         f"({gen.stats.expansions}) at {setting.label()}")
    return out


def summary(fixed: Outcome, got: Outcome, refs: List[str], src_tokens: List[int]) -> Dict[str, float]:
    """What the controller measures on ``got`` against ``fixed`` (blank and one-token sources left out, as
    the controller leaves them out), and what it cannot: BLEU and work."""
    import sacrebleu

    ids = sorted(fixed)
    probes = [i for i in ids if src_tokens[i] >= 2]
    scale = sum(abs(fixed[i]["score"]) for i in probes) or 1.0
    loss = sum(fixed[i]["score"] - got[i]["score"] for i in probes)
    changed = [i for i in probes if fixed[i]["tokens"] != got[i]["tokens"]]
    bleu = sacrebleu.corpus_bleu([got[i]["text"] for i in ids], [[refs[i] for i in ids]]).score
    fixed_bleu = sacrebleu.corpus_bleu([fixed[i]["text"] for i in ids], [[refs[i] for i in ids]]).score
    return {"relative_loss": loss / scale, "changed": len(changed) / max(len(probes), 1),
            "worse": sum(fixed[i]["score"] - got[i]["score"] > 1e-6 for i in probes) / max(len(probes), 1),
            "better": sum(got[i]["score"] - fixed[i]["score"] > 1e-6 for i in probes) / max(len(probes), 1),
            "delta_bleu": bleu - fixed_bleu,
            # the best hypotheses' summed length against the fixed beam's: a shift BLEU's brevity penalty reads
            "length_shift": sum(len(got[i]["tokens"]) for i in probes) / max(sum(len(fixed[i]["tokens"]) for i in probes), 1) - 1,
            "expansions": sum(got[i]["rows"] for i in ids) / max(sum(fixed[i]["rows"] for i in ids), 1),
            "mean_fixed_score": -scale / max(len(probes), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=os.path.join(DEMO, "checkpoint.pt"), help="the checkpoint")
    parser.add_argument("--data", default=DEMO, help="directory with dict.SRC.txt and dict.TGT.txt")
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO, "test.es"), help="raw source sentences")
    parser.add_argument("--ref", default=os.path.join(DEMO, "test.en"), help="raw reference translations")
    parser.add_argument("--source-lang", default="es")
    parser.add_argument("--target-lang", default="en")
    parser.add_argument("--limit", type=int, default=300, help="first N sentences")
    parser.add_argument("--beam", type=int, nargs="+", default=[5, 50], help="beam widths k")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--also", nargs="*", default=["1:5"], metavar="δ:M",
                        help="settings beyond the ladder, as δ:M (default 1:5: the rung below the ladder's fastest)")
    parser.add_argument("--model", default=None, help="the model's name in the table (default: the file)")
    parser.add_argument("--json", default=None, help="also write every sentence's outcome at every rung here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from fairseq_stream.tools.session import TranslationSession

    def lines(path: str) -> List[str]:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f][:args.limit]

    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes,
                                      extra_args=["--source-lang", args.source_lang, "--target-lang", args.target_lang])
    dataset = session.encode(lines(args.src))
    refs = lines(args.ref)
    src_tokens = [int(dataset.src_sizes[i]) - 1 for i in range(len(dataset))]  # EOS excluded, as the controller counts
    name = args.model or os.path.basename(args.path)
    print("| model | k | rung | relative loss | changed | worse | better | length shift | Δ BLEU against the fixed beam | "
          "expansions × the fixed beam |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    dump: Dict[str, Any] = {}
    for beam in args.beam:
        extra = [Setting(float(d), int(m)) for d, m in (a.split(":") for a in args.also)]
        rungs = sorted({*extra, *ladder(beam)[:-1]}, key=lambda s: (s.delta, s.max_cands or 0)) + [OFF]
        outcomes = {s.label(): decode(session, dataset, beam, s, args.batch_size) for s in rungs}
        fixed = outcomes[OFF.label()]
        for s in rungs[:-1]:
            row = summary(fixed, outcomes[s.label()], refs, src_tokens)
            print(f"| {name} | {beam} | {s.label()} | {100 * row['relative_loss']:.2f}% | {100 * row['changed']:.0f}% | "
                  f"{100 * row['worse']:.0f}% | {100 * row['better']:.0f}% | {100 * row['length_shift']:+.1f}% | "
                  f"{row['delta_bleu']:+.2f} | {row['expansions']:.3f} |",
                  flush=True)
        print(f"| {name} | {beam} | (the fixed beam's mean score {row['mean_fixed_score']:.3f}) "
              "| | | | | | | |", flush=True)
        dump[str(beam)] = {label: {str(i): o for i, o in out.items()} for label, out in outcomes.items()}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dump, f)


if __name__ == "__main__":
    main()
