#!/usr/bin/env python
"""Rebuild the demo model shipped in ``user_dir_examples/demo/`` from the Bible corpus.

Pipeline: raw Spanish–English verses → held-out split → sacremoses tokenisation →
subword-nmt joint BPE → ``fairseq-preprocess`` → ``fairseq-train`` (a small pre-norm
transformer on CPU) → an inference-only fp16 checkpoint.

The corpus (``--corpus DIR``, needed by the ``prep`` stage) is ``DIR/train.{es,en}`` and
``DIR/valid.{es,en}``: raw UTF-8 text, one verse a line, line i of the ``.es`` file translating
line i of the ``.en`` file. The shipped model was trained on the public-domain Reina-Valera 1909
(Spanish) and World English Bible (English), as Debian packages them in the SWORD modules
``sword-text-sparv`` and ``sword-text-web``, aligned verse by verse (29,591 training and 298
validation pairs).

    python scripts/models/build_demo_model.py --corpus DIR                                   # all stages
    python scripts/models/build_demo_model.py --corpus DIR --stages prep                     # data only
    python scripts/models/build_demo_model.py --stages train,export --train-hours 1          # from prepared data

Held-out rule (deterministic): training pair n (1-based) goes to ``test`` when n % 30 == 0;
the corpus's own ``valid`` split stays the validation set. The shipped ``test`` sample is what
the demo and the benchmarks translate. Training used 2 CPU threads for about an hour.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # train_autocast.py beside this script

import train_autocast  # noqa: E402
from fairseq_stream.integration.text import BpeCodes, tokenize  # noqa: E402

SRC, TGT = "es", "en"
HELDOUT_EVERY = 30
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Recipe:
    """A pre-norm transformer's shape and training settings; the defaults are the demo model's.
    ``joint``: one dictionary for both languages and all embeddings shared (else only the
    decoder's input and output embeddings)."""
    encoder_layers: int = 3
    decoder_layers: int = 3
    dim: int = 256
    ffn: int = 1024
    heads: int = 4
    joint: bool = True
    dropout: float = 0.2
    lr: float = 0.0015
    warmup: int = 600
    label_smoothing: float = 0.1
    seed: int = 1


def tool(name: str) -> str:
    """A console script of the Python running this script (its virtual environment's fairseq,
    also where that environment is not on PATH)."""
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


def read_lines(path: Path) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_lines(path: Path, lines: List[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def split_corpus(corpus: Path, raw: Path) -> None:
    """train → train + held-out test (every 30th pair); valid stays valid."""
    for lang in (SRC, TGT):
        lines = read_lines(corpus / f"train.{lang}")
        write_lines(raw / f"train.{lang}", [s for n, s in enumerate(lines, 1) if n % HELDOUT_EVERY])
        write_lines(raw / f"test.{lang}", [s for n, s in enumerate(lines, 1) if not n % HELDOUT_EVERY])
        shutil.copy(corpus / f"valid.{lang}", raw / f"valid.{lang}")


def tokenise_splits(raw: Path, tok: Path) -> None:
    """sacremoses tokenisation of every split of both languages."""
    for split in SPLITS:
        for lang in (SRC, TGT):
            print(f"tokenising {split}.{lang}", flush=True)
            write_lines(tok / f"{split}.{lang}", [tokenize(s, lang) for s in read_lines(raw / f"{split}.{lang}")])


def learn_codes(texts: Sequence[Path], codes: Path, merges: int) -> None:
    """subword-nmt BPE codes of ``merges`` merges learnt on the lines of ``texts`` together."""
    from subword_nmt.learn_bpe import learn_bpe

    lines: List[str] = []
    for text in texts:
        lines += read_lines(text)
    print(f"learning {merges} BPE merges on {', '.join(t.name for t in texts)}", flush=True)
    with open(codes, "w", encoding="utf-8") as fout:
        learn_bpe(io.StringIO("".join(line + "\n" for line in lines)), fout, merges)


def apply_codes(codes: Path, tok: Path, bpe: Path, lang: str) -> None:
    bpe_codes = BpeCodes(str(codes))
    for split in SPLITS:
        write_lines(bpe / f"{split}.{lang}", bpe_codes.apply_all(read_lines(tok / f"{split}.{lang}")))


def binarize(bpe: Path, dest: Path, src: str, tgt: str, joined: bool) -> None:
    """``fairseq-preprocess`` of the BPE'd splits: one joint dictionary or one per language."""
    subprocess.run(
        [
            tool("fairseq-preprocess"), "--source-lang", src, "--target-lang", tgt,
            "--trainpref", str(bpe / "train"), "--validpref", str(bpe / "valid"),
            "--testpref", str(bpe / "test"), "--destdir", str(dest),
            *(["--joined-dictionary"] if joined else []), "--workers", "2",
        ],
        check=True,
    )


def prepare(corpus: Path, work: Path, bpe_merges: int) -> None:
    raw, tok, bpe = work / "raw", work / "tok", work / "bpe"
    split_corpus(corpus, raw)
    tokenise_splits(raw, tok)
    learn_codes([tok / f"train.{SRC}", tok / f"train.{TGT}"], work / "bpe.codes", bpe_merges)
    for lang in (SRC, TGT):
        apply_codes(work / "bpe.codes", tok, bpe, lang)
    binarize(bpe, work / "bin", SRC, TGT, joined=True)


def train_command(data: Path, save_dir: Path, recipe: Recipe, stop: Sequence[str], keep: Sequence[str],
                  precision: Optional[str] = None) -> List[str]:
    """fairseq-train of ``recipe`` on ``data`` into ``save_dir`` (resumes from its checkpoint_last.pt);
    ``stop``: when to stop (--max-update, --stop-time-hours, --max-epoch); ``keep``: which interval
    checkpoints to keep; ``precision``: None for fairseq-train itself, else ``train_autocast.py``'s
    ``--precision`` (bfloat16 products where the CPU has them: more updates in a budget of minutes)."""
    r = recipe
    share = ["--share-all-embeddings"] if r.joint else ["--share-decoder-input-output-embed"]
    args = [
        # --user-dir: our safe checkpoint loading lets torch >= 2.6 resume an interrupted run.
        str(data), "--user-dir", str(REPO / "fairseq_stream"),
        "--cpu", "--arch", "transformer", *share,
        "--encoder-layers", str(r.encoder_layers), "--decoder-layers", str(r.decoder_layers),
        "--encoder-embed-dim", str(r.dim), "--decoder-embed-dim", str(r.dim),
        "--encoder-ffn-embed-dim", str(r.ffn), "--decoder-ffn-embed-dim", str(r.ffn),
        "--encoder-attention-heads", str(r.heads), "--decoder-attention-heads", str(r.heads),
        "--encoder-normalize-before", "--decoder-normalize-before",
        "--dropout", str(r.dropout), "--attention-dropout", "0.1",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
        "--lr", str(r.lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(r.warmup),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", str(r.label_smoothing),
        "--max-tokens", "4096", "--required-batch-size-multiple", "1",
        *stop, "--save-dir", str(save_dir), "--no-epoch-checkpoints", *keep,
        "--log-format", "simple", "--log-interval", "50", "--seed", str(r.seed),
    ]
    return [tool("fairseq-train"), *args] if precision is None else train_autocast.command(precision, args)


def train(work: Path, hours: float, max_update: int = 0, save_every: int = 0, seed: int = 1) -> None:
    """``save_every`` > 0 keeps a checkpoint every that many updates (the early checkpoints
    of ``scripts/experiments/var_width_quality.py``); ``max_update`` > 0 stops there; ``seed``
    (the shipped model's is 1) gives another training run of the same data: held-out checkpoints."""
    keep = ["--save-interval-updates", str(save_every), "--keep-interval-updates", "-1"] if save_every else \
        ["--save-interval-updates", "500", "--keep-interval-updates", "1"]
    # --max-update alone bounds a run that keeps early checkpoints (resumable: rerun it)
    stop = [*(["--stop-time-hours", str(hours)] if not max_update else []), "--max-epoch", "100",
            "--max-update", str(max_update)]
    subprocess.run(train_command(work / "bin", work / "checkpoints", Recipe(seed=seed), stop, keep), check=True)


def export(work: Path, out: Path) -> None:
    """Copy what the demo needs into ``out`` (a few MB): BPE codes, dictionaries, test sample, checkpoint."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "bpe.codes", out / "bpe.codes")
    for lang in (SRC, TGT):
        shutil.copy(work / "bin" / f"dict.{lang}.txt", out / f"dict.{lang}.txt")
        shutil.copy(work / "raw" / f"test.{lang}", out / f"test.{lang}")
    from fairseq_stream.tools.checkpoint import export_inference_checkpoint

    best = work / "checkpoints" / "checkpoint_best.pt"
    size = export_inference_checkpoint(str(best), str(out / "checkpoint.pt"), languages=(SRC, TGT))
    print(f"wrote {out / 'checkpoint.pt'} ({size / 2**20:.1f} MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=None,
                        help="folder of train.{es,en} and valid.{es,en}, raw text (required by the prep stage)")
    parser.add_argument("--work", type=Path, default=REPO / "work" / "demo_build")
    parser.add_argument("--out", type=Path, default=REPO / "user_dir_examples" / "demo")
    parser.add_argument("--stages", default="prep,train,export")
    parser.add_argument("--bpe-merges", type=int, default=6000)
    parser.add_argument("--train-hours", type=float, default=None, help="wall-clock budget of training (default 1)")
    parser.add_argument("--max-update", type=int, default=0, help="stop after this many updates (0: --train-hours)")
    parser.add_argument("--save-every", type=int, default=0,
                        help="keep a checkpoint every N updates (early checkpoints for scripts/experiments/var_width_quality.py)")
    parser.add_argument("--seed", type=int, default=1,
                        help="fairseq-train's seed (the shipped model's is 1; another gives a held-out run of the same data)")
    args = parser.parse_args()
    if args.train_hours is not None and args.max_update:
        parser.error("--train-hours and --max-update exclude each other: a run with --max-update has no time limit")
    args.train_hours = 1.0 if args.train_hours is None else args.train_hours
    stages = args.stages.split(",")
    if "prep" in stages:
        if args.corpus is None:
            parser.error("the prep stage needs --corpus DIR (a folder of train.{es,en} and valid.{es,en})")
        missing = [f"{split}.{lang}" for split in ("train", "valid") for lang in (SRC, TGT)
                   if not (args.corpus / f"{split}.{lang}").is_file()]
        if missing:
            parser.error(f"--corpus {args.corpus} lacks {', '.join(missing)}")
    os.makedirs(args.work, exist_ok=True)
    if "prep" in stages:
        prepare(args.corpus, args.work, args.bpe_merges)
    if "train" in stages:
        train(args.work, args.train_hours, args.max_update, args.save_every, args.seed)
    if "export" in stages:
        export(args.work, args.out)


if __name__ == "__main__":
    main()
