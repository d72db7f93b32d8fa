#!/usr/bin/env python
"""Zhang2020 on the demo corpus: a standard transformer vs an IBDecoder of the same size and budget.

Stages (each skipped when its output exists; ``--stages`` picks some; training resumes an
interrupted run, or a finished one asked for more ``--updates``, from its last checkpoint):

    train    fairseq-train a standard transformer (--task translation) and an IBDecoder
             (--task translation_ib --arch transformer_ib --ib-h 2 --ib-c 1) with the same
             architecture, batch size and number of updates; the training speed of both
             (target words per second from fairseq's logs) is printed as a ratio
    kd       sequence-level knowledge distillation (Kim & Rush 2016): the teacher (default: the
             shipped demo model) translates the training sources with plain beam search (k = 4,
             --kd-search beam: fairseq's; fixed-ours; or var-stream, the pruned teacher); the
             outputs are binarised and an IBDecoder student trains on them with the same budget
    eval     one table per setting: BLEU (sacreBLEU, detokenised), decoding steps and latency
             at batch 1 and 32, beam 1 and 4, for the standard model (our fixed beam and
             fairseq's) and the IBDecoders (ib-beam, with and without --ib-dedup), via the
             benchmark harness

    python scripts/papers/ib_experiment.py --updates 1500 --eval-sentences 300
    python scripts/papers/ib_experiment.py --updates 1500 --variants im,sa    # + IMDecoder, IBDecoder+SA rows

Rows and Zhang2020's tables: Transformer and IBDecoder (+KD) = Table 1 ① and ②; --variants sa =
Table 1 ③ (Table 2 row 7), im = Table 1 ④, m2s = Table 2 row 4 (middle-to-side), vsa / vsa4 =
Table 2 rows 6 / 8 (vanilla SA, c = 2 / 4). The rule is the package's ("ours": --ib-eos step,
--ib-finalize top; --ib-eos single trains with the paper's one EOS); the paper's reading of
Algorithm 1 on WMT14 is ``scripts/papers/wmt14_ibdecoder.sh --rule paper`` (its default).

Budgets here are CPU-sized; the paper's WMT14 setup is ``scripts/papers/wmt14_ibdecoder.sh``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DEMO = REPO / "user_dir_examples" / "demo"


def arch(layers: int) -> List[str]:
    return ["--share-all-embeddings", "--encoder-layers", str(layers), "--decoder-layers", str(layers),
            "--encoder-embed-dim", "256", "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024",
            "--decoder-ffn-embed-dim", "1024", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
            "--encoder-normalize-before", "--decoder-normalize-before"]


def tool(name: str) -> str:
    """A console script of the Python running this script (its virtual environment's fairseq)."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    return path if os.path.exists(path) else name


def run(cmd: List[str], log: Path, append: bool = False) -> None:
    cmd = [tool(cmd[0]), *cmd[1:]]
    print("+", " ".join(cmd), flush=True)
    with open(log, "a" if append else "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode:
        sys.exit(f"failed ({proc.returncode}); see {log}")


def trained_updates(log: Path) -> int:
    """Updates a finished fairseq-train run in ``log`` reached (0 if none finished)."""
    text = log.read_text() if log.exists() else ""
    if "done training" not in text:
        return 0
    found = re.findall(r"num_updates=(\d+)", text)
    return int(found[-1]) if found else 0


# The IBDecoder family's layouts (Zhang2020): generation directions h, words per direction c, order.
LAYOUTS = {"ib": (2, 1, "side-to-middle"), "im": (4, 1, "side-to-middle"), "sa": (2, 2, "side-to-middle"),
           "vsa": (1, 2, "side-to-middle"), "vsa4": (1, 4, "side-to-middle"), "m2s": (2, 1, "middle-to-side")}
VARIANT_LABELS = {"im": "IMDecoder", "sa": "IBDecoder+SA", "vsa": "IBDecoder-family vanilla SA c=2",
                  "vsa4": "IBDecoder-family vanilla SA c=4", "m2s": "IBDecoder middle-to-side"}


def train_command(data: Path, save: Path, kind: str, updates: int, layers: int, ib_eos: str = "step",
                  extra: Sequence[str] = ()) -> List[str]:
    """fairseq-train for ``kind``: "standard" (a transformer) or a layout of :data:`LAYOUTS`."""
    if kind == "standard":
        task = ["--task", "translation", "--arch", "transformer"]
    else:
        h, c, order = LAYOUTS[kind]
        task = ["--task", "translation_ib", "--arch", "transformer_ib", "--ib-h", str(h), "--ib-c", str(c),
                "--ib-eos", ib_eos, *(["--ib-order", order] if order != "side-to-middle" else [])]
    return ["fairseq-train", str(data), "--user-dir", str(REPO / "fairseq_stream"), "--cpu", *task, *arch(layers),
            "--dropout", "0.2", "--attention-dropout", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
            "--lr", "0.0015", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "600",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "4096",
            "--max-update", str(updates), "--save-dir", str(save), "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "50", "--seed", "1", *extra]


def train(data: Path, save: Path, kind: str, updates: int, layers: int, ib_eos: str = "step",
          extra: Sequence[str] = ()) -> Path:
    best, log = save / "checkpoint_best.pt", save / "train.log"
    if trained_updates(log) >= updates:
        return best
    # An interrupted run, or one asked for more updates, resumes from checkpoint_last.pt
    # (fairseq's default) and appends to its log.
    save.mkdir(parents=True, exist_ok=True)
    run(train_command(data, save, kind, updates, layers, ib_eos, extra), log, append=True)
    return best


def words_per_second(log: Path) -> float:
    """Median training speed (target words/s) over fairseq's train_inner lines."""
    values = sorted(float(m.group(1)) for m in re.finditer(r"train_inner .*? wps=([\d.]+)", log.read_text()))
    return values[len(values) // 2] if values else float("nan")


def distill(data: Path, work: Path, teacher: str, limit: int, search: str = "beam") -> Path:
    """Teacher translations of the training sources → a binarised KD data set."""
    out = work / "kd_bin"
    if (out / "train.es-en.en.bin").exists():
        return out
    from fairseq_stream.tools.session import TranslationSession

    bpe_dir = work.parent / "demo_build" / "bpe"
    with open(bpe_dir / "train.es", encoding="utf-8") as f:
        sources_bpe = [line.rstrip("\n") for line in f][: limit or None]
    session = TranslationSession.load(str(data), teacher, extra_args=["--source-lang", "es", "--target-lang", "en"])
    src_dict = session.task.source_dictionary
    tokens = [src_dict.encode_line(s, add_if_not_exist=False).long() for s in sources_bpe]
    dataset = session.task.build_dataset_for_inference(tokens, [t.numel() for t in tokens])
    result = session.translate(dataset, search=search, gen={"beam": 4, "max_len_a": 1.2, "max_len_b": 10},
                               postprocess=False, progress=True)
    raw = work / "kd_raw"
    raw.mkdir(parents=True, exist_ok=True)
    tgt = session.task.target_dictionary
    with open(raw / "train.en", "w", encoding="utf-8") as f:
        f.writelines(tgt.string(h[0]["tokens"]) + "\n" for h in result.hypos)
    with open(raw / "train.es", "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in sources_bpe)
    run(["fairseq-preprocess", "--source-lang", "es", "--target-lang", "en", "--trainpref", str(raw / "train"),
         "--validpref", str(bpe_dir / "valid"), "--destdir", str(out), "--srcdict", str(data / "dict.es.txt"),
         "--tgtdict", str(data / "dict.en.txt"), "--workers", "2"], work / "kd_preprocess.log")
    return out


def evaluate(work: Path, models: dict, n: int, repeats: int) -> None:
    from fairseq_stream.tools.bench import RunSpec, format_table, run_benchmark
    from fairseq_stream.tools.session import TranslationSession

    with open(DEMO / "test.es", encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f][:n]
    with open(DEMO / "test.en", encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f][:n]
    gen = {"max_len_a": 1.2, "max_len_b": 10, "lenpen": 0.6}
    sessions = {label: TranslationSession.load(str(DEMO), str(ckpt), bpe_codes=str(DEMO / "bpe.codes"),
                                               extra_args=["--source-lang", "es", "--target-lang", "en"])
                for label, ckpt in models.items()}
    report = {}
    for batch in (1, 32):
        for beam in (1, 4):
            rows = []
            for label, session in sessions.items():
                g = dict(gen, beam=beam)
                opts = {"stream_capacity": batch}
                if label != "Transformer":  # the IBDecoder family
                    runs = [RunSpec(f"{label} ib-beam", "ib-beam", gen=g, opts=opts),
                            RunSpec(f"{label} ib-beam --ib-dedup", "ib-beam", gen=g, opts=dict(opts, ib_dedup=True))]
                else:
                    runs = [RunSpec(f"{label} fixed-ours", "fixed-ours", gen=g, opts=opts),
                            RunSpec(f"{label} fairseq beam", "beam", gen=g)]
                rows += run_benchmark(session, sources, references, runs, repeats=repeats, batch_size=batch,
                                      progress=False, log=lambda m: None)
            base = rows[0]["wall_median"]
            for row in rows:
                row["ratio"] = row["wall_median"] / base
            title = f"batch {batch}, beam {beam}, {n} sentences"
            print(f"\n### {title}\n\n{format_table(rows)}", flush=True)
            report[title] = rows
    with open(work / "ib_results.json", "w") as f:
        json.dump(report, f, indent=1, default=str)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO / "work" / "demo_build" / "bin",
                        help="binarised demo corpus (scripts/models/build_demo_model.py --stages prep)")
    parser.add_argument("--work", type=Path, default=REPO / "work" / "ib_exp")
    parser.add_argument("--updates", type=int, default=1200, help="training budget of every model")
    parser.add_argument("--layers", type=int, default=2, help="encoder and decoder layers of every model")
    parser.add_argument("--ib-eos", choices=["step", "single"], default="step",
                        help="the IBDecoder's --ib-eos (end of target: EOS fills the meeting step, or one EOS)")
    parser.add_argument("--teacher", default=str(DEMO / "checkpoint.pt"))
    parser.add_argument("--kd-search", choices=["beam", "fixed-ours", "fixed-stream", "var-stream"], default="beam",
                        help="the teacher's search: plain beam search as Kim & Rush 2016 (beam = fairseq's, "
                             "fixed-ours/fixed-stream = ours), or var-stream (pruned, faster)")
    parser.add_argument("--kd-sentences", type=int, default=0, help="distil only the first N (0 = all)")
    parser.add_argument("--eval-sentences", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--stages", default="train,kd,eval")
    parser.add_argument("--variants", default="",
                        help="also train and evaluate these layouts with the same budget: im = IMDecoder (h = 4), "
                             "sa = IBDecoder+SA (c = 2), comma-separated")
    parser.add_argument("--train-args", default="",
                        help="more fairseq-train arguments for every model (later ones win), e.g. a quick speed check: "
                             "--train-args='--encoder-embed-dim 64 --decoder-embed-dim 64 --log-interval 10'")
    args = parser.parse_args()
    if not (args.data / "dict.en.txt").exists():
        sys.exit(f"{args.data} has no binarised data: run scripts/models/build_demo_model.py --stages prep first")
    stages = args.stages.split(",")
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANT_LABELS]
    if unknown:
        sys.exit(f"--variants: unknown layout {unknown[0]!r}; choose from {', '.join(VARIANT_LABELS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    models = {}
    if "train" in stages or "eval" in stages:
        extra = shlex.split(args.train_args)
        models["Transformer"] = train(args.data, args.work / "standard", "standard", args.updates, args.layers,
                                      extra=extra)
        models["IBDecoder"] = train(args.data, args.work / "ib", "ib", args.updates, args.layers, args.ib_eos, extra)
        ratio = words_per_second(args.work / "ib" / "train.log") / words_per_second(args.work / "standard" / "train.log")
        print(f"training speed IBDecoder / Transformer: {ratio:.3f}")
        for variant in variants:
            models[VARIANT_LABELS[variant]] = train(args.data, args.work / variant, variant, args.updates, args.layers,
                                                    args.ib_eos, extra)
    if "kd" in stages:
        kd = distill(args.data, args.work, args.teacher, args.kd_sentences, args.kd_search)
        models["IBDecoder+KD"] = train(kd, args.work / "ib_kd", "ib", args.updates, args.layers, args.ib_eos,
                                       shlex.split(args.train_args))
    elif (args.work / "ib_kd" / "checkpoint_best.pt").exists():
        models["IBDecoder+KD"] = args.work / "ib_kd" / "checkpoint_best.pt"
    if "eval" in stages:
        evaluate(args.work, models, args.eval_sentences, args.repeats)


if __name__ == "__main__":
    main()
