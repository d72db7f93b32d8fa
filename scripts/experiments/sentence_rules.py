#!/usr/bin/env python
"""One-off experiment (issue 81): per-sentence pruning rules of var-stream against the fixed beam, by BLEU and work.

A rule that reads only a sentence's own search (its candidates' scores and lengths, the step) gives the same output
wherever the sentence runs, so its cost can be counted without a clock: the decoder rows it feeds (expansions) and its
steps, against ``fixed-ours``' at the same k. This decodes the input with ``fixed-ours`` and with var-stream under each
``--rule`` (a spec of decoding options, as a bench spec writes them: ``prune_abs_threshold=1.5,prune_abs_scale=2``;
``default`` is the shipped default), one process and one thread, and prints per rule: ΔBLEU against ``fixed-ours`` (and
its paired-bootstrap p-value of a loss), the outputs' length over the references' and its shift against ``fixed-ours``
(what BLEU's brevity penalty reads), the mean change of the best hypothesis's model score, the share of outputs
changed, and the expansions and steps as multiples of ``fixed-ours``'. Deterministic: no clock.

    python scripts/experiments/sentence_rules.py --model-dir ~/.cache/fairseq_stream/zoo/NAME --beam 5 50 \\
        --rule default --rule prune_abs_threshold=1.5,prune_abs_scale=2 [--lenpen 0.6] [--json OUT.json]

``--model-dir`` is a zoo model's folder (or the demo's, the default): its checkpoint, dictionaries, BPE codes and
``test.SRC``/``test.TGT`` (the direction read from the dictionaries' names); ``--path`` another checkpoint of it.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any, Dict, List

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

DEMO = os.path.join(REPO, "user_dir_examples", "demo")


def parse_rule(spec: str) -> Dict[str, Any]:
    """``key=value,...`` as decoding options (numbers as numbers); ``default`` is no option at all."""
    if spec == "default":
        return {}
    out: Dict[str, Any] = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        try:
            out[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else float(value)
        except ValueError:
            out[key.strip()] = value.strip()
    return out


def ref_ratio(bleu: Any) -> float:
    """The outputs' length over the references' (sacrebleu's): below 1 BLEU's brevity penalty applies, above it
    longer outputs only lose precision, so a rule's length shift moves BLEU either way (issue 81)."""
    return bleu.sys_len / max(bleu.ref_len, 1)


def direction(model_dir: str) -> "tuple[str, str]":
    """(source, target) of a model folder: the language whose test file and dictionary exist, source first as
    the BPE codes name it (``bpe.codes`` is the source side's)."""
    langs = sorted(os.path.basename(p)[len("dict."):-len(".txt")] for p in glob.glob(os.path.join(model_dir, "dict.*.txt")))
    if len(langs) != 2:
        raise SystemExit(f"sentence_rules: {model_dir} needs exactly two dict.LANG.txt files, found {langs}")
    state = os.path.join(model_dir, "state.json")
    if os.path.exists(state):
        with open(state, encoding="utf-8") as f:
            spec = json.load(f)["spec"]
        return spec["src"], spec["tgt"]
    return ("es", "en") if langs == ["en", "es"] else (langs[0], langs[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=DEMO, help="a zoo model's folder (default: the demo's)")
    parser.add_argument("--path", default=None, help="the checkpoint (default: MODEL_DIR/checkpoint.pt)")
    parser.add_argument("--name", default=None, help="the model's name in the table")
    parser.add_argument("--limit", type=int, default=300, help="first N sentences of the test set")
    parser.add_argument("--beam", type=int, nargs="+", default=[5, 50], help="beam widths k")
    parser.add_argument("--lenpen", type=float, default=1.0)
    parser.add_argument("--unnormalized", action="store_true")
    parser.add_argument("--rule", action="append", default=None, help="decoding options of one row (repeatable)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", default=None, help="also write every row and every output here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import sacrebleu

    from fairseq_stream.tools.session import TranslationSession
    from fairseq_stream.tools.significance import paired_bootstrap_p

    src, tgt = direction(args.model_dir)
    path = args.path or os.path.join(args.model_dir, "checkpoint.pt")

    def lines(name: str) -> List[str]:
        with open(os.path.join(args.model_dir, name), encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f][:args.limit]

    session = TranslationSession.load(args.model_dir, path, bpe_codes=os.path.join(args.model_dir, "bpe.codes"),
                                      extra_args=["--source-lang", src, "--target-lang", tgt])
    dataset = session.encode(lines(f"test.{src}"))
    refs = lines(f"test.{tgt}")
    name = args.name or os.path.basename(os.path.normpath(args.model_dir)) + (
        "" if args.path is None else ":" + os.path.basename(args.path))
    rules = args.rule or ["default"]
    print(f"| model | k | rule | BLEU | Δ BLEU (p loss) | length / ref | length shift | score Δ | changed | expansions × | "
          f"steps × |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    dump: Dict[str, Any] = {}
    for beam in args.beam:
        gen = {"beam": beam, "lenpen": args.lenpen, "unnormalized": args.unnormalized}

        def run(search: str, opts: Dict[str, Any]) -> Any:
            return session.translate(dataset, search=search, gen=gen, opts=opts, batch_size=args.batch_size)

        def outcome(result: Any) -> Dict[str, Any]:
            """BLEU, the outputs' length over the references', their tokens and each best hypothesis's score."""
            bleu = sacrebleu.corpus_bleu(result.strings, [refs])
            return {"bleu": bleu.score, "ref_ratio": ref_ratio(bleu),
                    "length": sum(int(h[0]["tokens"].numel()) for h in result.hypos),
                    "scores": [float(h[0]["score"]) for h in result.hypos]}

        fixed = run("fixed-ours", {})
        base = outcome(fixed)
        print(f"| {name} | {beam} | fixed-ours | {base['bleu']:.2f} | | {base['ref_ratio']:.3f} | | | | 1 | 1 |", flush=True)
        dump[str(beam)] = {"fixed-ours": dict(base, strings=fixed.strings)}
        for rule in rules:
            got = run("var-stream", parse_rule(rule))
            row = outcome(got)
            p_loss = paired_bootstrap_p(fixed.strings, got.strings, refs)
            # fairseq's score of the best hypothesis (normalised by length ** lenpen): < 0 = a search error on average
            score_delta = sum(a - b for a, b in zip(row["scores"], base["scores"])) / max(len(refs), 1)
            changed = sum(a != b for a, b in zip(fixed.strings, got.strings)) / max(len(refs), 1)
            row.update(delta_bleu=row["bleu"] - base["bleu"], p=p_loss, length_shift=row["length"] / base["length"] - 1,
                       score_delta=score_delta, changed=changed,
                       expansions=got.stats.expansions / max(fixed.stats.expansions, 1),
                       steps=got.stats.timesteps / max(fixed.stats.timesteps, 1), strings=got.strings)
            dump[str(beam)][rule] = row
            print(f"| {name} | {beam} | {rule} | {row['bleu']:.2f} | {row['delta_bleu']:+.2f} ({p_loss:.2f}) | "
                  f"{row['ref_ratio']:.3f} | {100 * row['length_shift']:+.1f}% | {score_delta:+.4f} | "
                  f"{100 * changed:.0f}% | {row['expansions']:.3f} | {row['steps']:.3f} |", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dump, f)


if __name__ == "__main__":
    main()
