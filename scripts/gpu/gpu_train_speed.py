#!/usr/bin/env python
"""IBDecoder training speed against the standard transformer of the same size (the GPU check's row).

    python scripts/gpu/gpu_train_speed.py --out DIR [--device cuda] [--updates 80] [--layers 6 --dim 512]

Both models train with stock fairseq-train (``python -m fairseq_cli.train``: console scripts may be
missing on an offline GPU machine) on the demo's held-out sample (Moses + the demo's BPE, the demo
dictionaries), same architecture, batch (--max-tokens) and updates, one after the other in this
process's machine: ``--task translation --arch transformer`` and ``--task translation_ib --arch
transformer_ib --ib-h 2 --ib-c 1`` (Zhang2020's IBDecoder). The speed is fairseq's own ``wps``
(target tokens per second) of its ``train_inner`` lines, the median over the run without the first
interval (warm-up). Writes ``DIR/train_speed.md``; ``--device cpu`` is the dry run (tiny sizes).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "user_dir_examples" / "demo"


def prepare(work: Path, limit: int) -> Path:
    """The demo sample as fairseq binary data (train = the sample; no validation)."""
    sys.path.insert(0, str(REPO))
    from fairseq_stream.integration.text import BpeCodes, tokenize

    raw, data = work / "raw", work / "bin"
    raw.mkdir(parents=True, exist_ok=True)
    codes = BpeCodes(str(DEMO / "bpe.codes"))
    for lang in ("es", "en"):
        lines = (DEMO / f"test.{lang}").read_text(encoding="utf-8").splitlines()[:limit]
        (raw / f"train.{lang}").write_text("".join(codes.apply(tokenize(x, lang)) + "\n" for x in lines), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", "es", "--target-lang", "en",
                    "--trainpref", str(raw / "train"), "--destdir", str(data), "--srcdict", str(DEMO / "dict.es.txt"),
                    "--tgtdict", str(DEMO / "dict.en.txt"), "--workers", "1"], check=True, capture_output=True)
    return data


def train(data: Path, work: Path, kind: str, args: argparse.Namespace) -> float:
    task = (["--task", "translation", "--arch", "transformer"] if kind == "standard" else
            ["--task", "translation_ib", "--arch", "transformer_ib", "--ib-h", "2", "--ib-c", "1"])
    size = ["--encoder-layers", str(args.layers), "--decoder-layers", str(args.layers),
            "--encoder-embed-dim", str(args.dim), "--decoder-embed-dim", str(args.dim),
            "--encoder-ffn-embed-dim", str(4 * args.dim), "--decoder-ffn-embed-dim", str(4 * args.dim),
            "--encoder-attention-heads", str(max(1, args.dim // 64)), "--decoder-attention-heads", str(max(1, args.dim // 64))]
    device = ["--fp16"] if args.device == "cuda" and args.fp16 else (["--cpu"] if args.device == "cpu" else [])
    cmd = [sys.executable, "-m", "fairseq_cli.train", str(data), "--user-dir", str(REPO / "fairseq_stream"), *task, *size,
           *device, "--optimizer", "adam", "--lr", "0.0005", "--criterion", "label_smoothed_cross_entropy",
           "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens), "--max-update", str(args.updates),
           "--disable-validation", "--no-save", "--log-format", "simple", "--log-interval", str(args.log_interval),
           "--seed", "1", "--num-workers", "0", "--save-dir", str(work / f"save_{kind}")]
    log = work / f"train_{kind}.log"
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode:
        raise SystemExit(f"gpu_train_speed: {kind} training failed ({proc.returncode}); see {log}")
    return words_per_second(log.read_text())


def words_per_second(text: str) -> float:
    """Median ``wps`` of fairseq's ``train_inner`` lines, the first (warm-up) interval left out."""
    values = [float(v) for v in re.findall(r"train_inner .*?wps=([\d.]+)", text)][1:]
    return sorted(values)[len(values) // 2] if values else float("nan")


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--updates", type=int, default=80)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--limit", type=int, default=1000, help="demo sample sentences to train on")
    parser.add_argument("--no-fp16", dest="fp16", action="store_false")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    data = prepare(args.out / "train_speed", args.limit)
    wps = {kind: train(data, args.out / "train_speed", kind, args) for kind in ("standard", "ib")}
    ratio = wps["ib"] / wps["standard"] if wps["standard"] else float("nan")
    precision = "fp16" if args.device == "cuda" and args.fp16 else "fp32"
    lines = [f"{args.layers}+{args.layers} layers × {args.dim}, {precision}, --max-tokens {args.max_tokens}, "
             f"{args.updates} updates on the demo sample ({args.limit} sentences), {args.device} "
             f"(`python scripts/gpu/gpu_train_speed.py --device {args.device} --updates {args.updates} --layers {args.layers} "
             f"--dim {args.dim}`):", "",
             "| model | target tokens/s (fairseq wps, median) |", "|---|---|",
             f"| transformer | {wps['standard']:.0f} |", f"| IBDecoder (h=2, c=1) | {wps['ib']:.0f} |", "",
             f"IBDecoder / transformer: **{ratio:.2f}×** ({time.perf_counter() - start:.0f} s)"]
    (args.out / "train_speed.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
