#!/usr/bin/env python
"""A zoo of models the decoders were not tuned on, built from one parallel corpus (issue 79).

The models differ in the ways real models differ: both directions (es→en, en→es); 3 + 3 layers ×
256, a deep-encoder/shallow-decoder 6 + 2, one base-sized 6 + 6 × 512 (8 heads, FFN 2048); joint
and separate BPE vocabularies of different sizes; label smoothing 0.1 and 0; a weak and a
well-trained checkpoint of one run. Each model gets, in ``ROOT/NAME/``: ``checkpoint.pt`` (decoding
only: fp16 weights, no optimizer state), ``dict.SRC.txt``/``dict.TGT.txt``, ``bpe.codes`` (the
source side's codes, what ``--bpe-codes`` takes; with separate vocabularies ``bpe.SRC.codes`` and
``bpe.TGT.codes`` too), its held-out ``test.SRC``/``test.TGT`` (raw text)
and ``bin/`` (that test split binarised, for ``fairseq-generate ROOT/NAME/bin --gen-subset test``),
``draft.pt`` (``scripts/train_draft.sh``: distilled on the model's own greedy output),
``lookahead_prior.pt`` (``--lookahead-ngram 3``, counted on that same greedy output of training
sources) and ``state.json``. The layout is the demo model's (``user_dir_examples/demo/``).

**Tuning half and held-out half** (the table's ``half``): every constant of a default is chosen on
the tuning half and reported on the held-out half, whose models are looked at **once**, after the
choice; a weak checkpoint is in its run's half. The base-sized model is held-out.

    python scripts/models/zoo.py --list                                       # the table and each model's state
    python scripts/models/zoo.py --corpus DIR                                 # everything (hours: in the background)
    nohup python scripts/models/zoo.py --corpus DIR > zoo.log 2>&1 &          #   ... e.g. so
    python scripts/models/zoo.py --corpus DIR --models es-en-3x3-joint8k --stages prep,train
    python scripts/models/zoo.py --corpus DIR --budget-scale 0.05 --root /tmp/zoo   # a quick look

The corpus (``--corpus DIR``, needed by the prep stage) is ``DIR/train.{es,en}`` and
``DIR/valid.{es,en}``, raw text, line i of one file translating line i of the other (the layout of
``scripts/models/build_demo_model.py``, whose steps this script reuses). Held-out rule: training
pair n (1-based) is a test pair when n % 30 == 0 (the demo's rule); ``valid`` stays the validation set.

Stages, per model: **prep** (held-out split, sacremoses tokenisation, subword-nmt BPE, fairseq-preprocess),
**train** (fairseq-train for the model's budget of minutes, ``--stop-time-hours``: fairseq counts the
training time of every leg, so a rerun resumes from ``checkpoint_last.pt`` until the whole budget is
spent; a weak model is its run's checkpoint after N updates, kept before the run goes on), **draft**,
**prior**, **export**. ``ROOT/NAME/state.json`` records each stage's completion, seconds and updates: a
stage done is skipped; a stage that runs again (e.g. a larger ``--budget-scale``) makes the later
ones run again. Training data and checkpoints are in ``ROOT/work/`` (delete it once every model is exported).

Training precision (``--train-precision``, the model's and the draft's): ``auto`` (the default) trains with
bfloat16 products where the CPU has them (AMX-BF16 or AVX512-BF16: ``scripts/models/train_autocast.py``,
float32 weights and optimizer), float32 elsewhere; a budget of minutes then buys more updates. ``state.json``
records which precision each stage trained in.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_demo_model as demo  # noqa: E402  (REPO on sys.path from here on)
import train_autocast  # noqa: E402

from fairseq_stream.errors import FairseqStreamError  # noqa: E402

STAGES = ("prep", "train", "draft", "prior", "export")
HALVES = ("tuning", "held-out")
PRIOR_NGRAM = 3  # the demo's prior: N = 3 beat 4 at batch 1 (user_dir_examples/demo/lookahead_prior.md)


@dataclass(frozen=True)
class Spec:
    """One model of the zoo. ``bpe``: (merges,) for a joint vocabulary, (source merges, target merges)
    for separate ones. A weak model names its run (``of_run``, another spec with the same settings)
    and the update count of the run's checkpoint it is (``at_update``); its ``minutes`` are 0."""
    name: str
    src: str
    tgt: str
    layers: Tuple[int, int]  # encoder, decoder
    dim: int
    heads: int
    ffn: int
    bpe: Tuple[int, ...]
    label_smoothing: float
    minutes: float  # wall-clock training budget (fairseq-train --stop-time-hours)
    half: str  # "tuning" or "held-out"
    of_run: str = ""
    at_update: int = 0
    max_update: int = 0  # an update cap besides the budget (the tiny models); 0: none
    dropout: float = 0.2
    lr: float = 0.0015
    warmup: int = 600
    seed: int = 1
    draft_minutes: float = 30.0
    draft_dim: int = 128
    draft_lines: int = 0  # training sources distilled for the draft (0: all)

    @property
    def joint(self) -> bool:
        return len(self.bpe) == 1

    def recipe(self) -> demo.Recipe:
        return demo.Recipe(encoder_layers=self.layers[0], decoder_layers=self.layers[1], dim=self.dim, ffn=self.ffn,
                           heads=self.heads, joint=self.joint, dropout=self.dropout, lr=self.lr, warmup=self.warmup,
                           label_smoothing=self.label_smoothing, seed=self.seed)


def weak(run: Spec, at_update: int) -> Spec:
    """The checkpoint of ``run`` after ``at_update`` updates, as a model of its own (same half)."""
    return replace(run, name=f"{run.name}-u{at_update}", of_run=run.name, at_update=at_update, minutes=0.0)


_EN_ES_3X3 = Spec("en-es-3x3-sep6k4k", "en", "es", (3, 3), 256, 4, 1024, (6000, 4000), 0.0, 60, "tuning", seed=22)
TABLE: List[Spec] = [
    Spec("es-en-3x3-joint8k", "es", "en", (3, 3), 256, 4, 1024, (8000,), 0.1, 60, "tuning", seed=21),
    _EN_ES_3X3,
    weak(_EN_ES_3X3, 800),  # ~BLEU 14: the kind of model issue 79 was measured on
    Spec("es-en-6x2-joint10k", "es", "en", (6, 2), 256, 4, 1024, (10000,), 0.1, 75, "tuning", seed=23),
    Spec("en-es-6x2-joint5k", "en", "es", (6, 2), 384, 6, 1536, (5000,), 0.0, 90, "held-out", seed=31),
    Spec("en-es-3x3-sep7k5k", "en", "es", (3, 3), 256, 4, 1024, (7000, 5000), 0.1, 60, "held-out", seed=33),
    # Transformer-base's shape; a lower peak rate and dropout than the small models', as for base
    Spec("es-en-6x6x512-joint12k", "es", "en", (6, 6), 512, 8, 2048, (12000,), 0.1, 180, "held-out", seed=32,
         dropout=0.1, lr=0.001, warmup=1000, draft_lines=15000),
]

_TINY_EN_ES = Spec("tiny-en-es", "en", "es", (1, 1), 32, 2, 64, (500, 400), 0.0, 5, "held-out", max_update=20,
                   lr=0.005, warmup=5, draft_minutes=0.05, draft_dim=32)
# For tests: seconds each (1 + 1 layer × 32, 20 updates); both directions, both vocabularies, a weak checkpoint.
TINY: List[Spec] = [
    replace(_TINY_EN_ES, name="tiny-es-en", src="es", tgt="en", bpe=(500,), label_smoothing=0.1, half="tuning"),
    _TINY_EN_ES,
    weak(_TINY_EN_ES, 10),
]


def check_table(table: Sequence[Spec]) -> None:
    """The table's own promises (names usable as folders, halves, weak models' runs)."""
    names = [s.name for s in table]
    by_name = {s.name: s for s in table}
    for s in table:
        if names.count(s.name) > 1 or s.name == "work" or not s.name.replace("-", "").isalnum():
            raise FairseqStreamError(f"zoo table: model name {s.name!r} is repeated, 'work' or not a folder name")
        if s.half not in HALVES or {s.src, s.tgt} != {demo.SRC, demo.TGT} or len(s.bpe) not in (1, 2):
            raise FairseqStreamError(f"zoo table: {s.name} needs half in {HALVES}, es/en, and 1 or 2 BPE sizes")
        run = by_name.get(s.of_run)
        if s.of_run and (run is None or run.of_run or run.half != s.half or s.at_update <= 0
                         or replace(s, name=run.name, of_run="", at_update=0, minutes=run.minutes) != run):
            raise FairseqStreamError(f"zoo table: {s.name} must be weak(run, N) of a trained model in the table")


class Zoo:
    """The models of one table under one root, and their stages."""

    def __init__(self, table: Sequence[Spec], root: Path, corpus: Optional[Path], scale: float, threads: int,
                 precision: str = "float32") -> None:
        check_table(table)
        self.table, self.root, self.corpus = list(table), root, corpus
        self.scale, self.threads = scale, threads
        self.precision = train_autocast.resolve(precision)  # float32 or bf16, for this machine
        self.by_name = {s.name: s for s in table}

    # ---- places ----
    def out(self, spec: Spec) -> Path:
        return self.root / spec.name

    def work(self, spec: Spec) -> Path:
        return self.root / "work" / spec.name

    def run_of(self, spec: Spec) -> Spec:
        return self.by_name[spec.of_run] if spec.of_run else spec

    def codes(self, spec: Spec, lang: str) -> Path:
        """The BPE codes of ``lang`` in the run's work folder (one file for a joint vocabulary)."""
        return self.work(self.run_of(spec)) / ("bpe.codes" if spec.joint else f"bpe.{lang}.codes")

    # ---- state.json ----
    def state(self, spec: Spec) -> Dict:
        path = self.out(spec) / "state.json"
        if not path.is_file():
            return {"name": spec.name, "spec": asdict(spec), "stages": {}}
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def save_state(self, spec: Spec, state: Dict) -> None:
        path = self.out(spec) / "state.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")  # a run killed while writing keeps the old state
        tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def key(self, spec: Spec, stage: str) -> Dict:
        """What a stage's result depends on: a recorded stage with another key runs again."""
        if stage == "prep":
            return {"src": spec.src, "tgt": spec.tgt, "bpe": list(spec.bpe)}
        if stage == "train":
            return {"minutes": round(spec.minutes * self.scale, 4), "max_update": spec.max_update,
                    "at_update": spec.at_update, "layers": list(spec.layers), "dim": spec.dim}
        if stage == "draft":
            return {"minutes": round(spec.draft_minutes * self.scale, 4), "dim": spec.draft_dim}
        return {"ngram": PRIOR_NGRAM} if stage == "prior" else {}

    def done(self, spec: Spec, stage: str) -> bool:
        record = self.state(spec)["stages"].get(stage)
        return bool(record) and record.get("key") == self.key(spec, stage)

    # ---- running ----
    def run_stage(self, spec: Spec, stage: str) -> bool:
        """Run one stage unless it is done; record it (and forget the later stages, now stale)."""
        if self.done(spec, stage):
            took = self.state(spec)["stages"][stage]["seconds"]
            print(f"== {spec.name}: {stage} done before ({took:.0f} s), skipped", flush=True)
            return False
        print(f"== {spec.name}: {stage} ({datetime.datetime.now():%H:%M:%S})", flush=True)
        start = time.time()
        extra = getattr(self, f"_{stage}")(spec) or {}
        seconds = time.time() - start
        state = self.state(spec)
        later = STAGES[STAGES.index(stage) + 1:]
        state["spec"] = asdict(spec)
        state["stages"] = {k: v for k, v in state["stages"].items() if k not in later}
        state["stages"][stage] = {"key": self.key(spec, stage), "seconds": round(seconds, 1),
                                  "finished": datetime.datetime.now().isoformat(timespec="seconds"), **extra}
        self.save_state(spec, state)
        note = f", {extra['updates']} updates" if "updates" in extra else ""
        note += f", {extra['precision']} products" if "precision" in extra else ""
        print(f"== {spec.name}: {stage} took {seconds:.1f} s{note}", flush=True)
        return True

    def build(self, names: Sequence[str], stages: Sequence[str]) -> None:
        """Every chosen stage of every chosen model, in the table's order (a stage that runs has
        forgotten the later ones, so they run too)."""
        for name in names:
            for stage in STAGES:
                if stage in stages:
                    self.run_stage(self.by_name[name], stage)
        self.print_times(names)

    def check_order(self, names: Sequence[str], stages: Sequence[str]) -> None:
        """Refuse up front a stage whose earlier stages are neither done nor chosen, and a prep without the corpus."""
        for name in names:
            spec = self.by_name[name]
            ready = True
            for stage in STAGES:
                if stage in stages and not ready:
                    missing = next(s for s in STAGES if s not in stages and not self.done(spec, s))
                    raise FairseqStreamError(f"{name}: the {stage} stage needs {missing} first: "
                                             f"add {missing} to --stages")
                ready = ready and (stage in stages or self.done(spec, stage))
            if "prep" in stages and not self.done(self.run_of(spec), "prep") and self.corpus is None:
                raise FairseqStreamError(f"{name}: the prep stage needs --corpus DIR "
                                         "(a folder of train.{es,en} and valid.{es,en})")

    def _call(self, what: str, command: List[str], env: Optional[Dict[str, str]] = None) -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), PYTHONWARNINGS="ignore", **(env or {}))
        proc = subprocess.run(command, env=env)
        if proc.returncode:
            raise FairseqStreamError(f"{what} failed (exit {proc.returncode}, its output is above); rerun to resume")

    # ---- the stages ----
    def _prep(self, spec: Spec) -> None:
        run = self.run_of(spec)
        if run is not spec:  # a weak model reads its run's data
            self.run_stage(run, "prep")
            return
        work = self.work(spec)
        shutil.rmtree(work / "checkpoints", ignore_errors=True)  # trained on other data: resuming would fail
        demo.split_corpus(self.corpus, work / "raw")
        demo.tokenise_splits(work / "raw", work / "tok")
        sides = [(spec.src, spec.tgt)] if spec.joint else [(spec.src,), (spec.tgt,)]
        for langs, merges in zip(sides, spec.bpe):
            demo.learn_codes([work / "tok" / f"train.{lang}" for lang in langs], self.codes(spec, langs[0]), merges)
        for lang in (spec.src, spec.tgt):
            demo.apply_codes(self.codes(spec, lang), work / "tok", work / "bpe", lang)
        shutil.rmtree(work / "bin", ignore_errors=True)  # fairseq-preprocess refuses to overwrite dictionaries
        demo.binarize(work / "bpe", work / "bin", spec.src, spec.tgt, joined=spec.joint)

    def _train(self, spec: Spec) -> Dict:
        run = self.run_of(spec)
        if run is not spec:
            self._keep_weak(spec)
            return {"updates": spec.at_update, "precision": self.precision}
        for w in sorted((s for s in self.table if s.of_run == spec.name), key=lambda s: s.at_update):
            self._keep_weak(w)  # before the run goes past its update count
        hours = spec.minutes * self.scale / 60
        self._fairseq_train(spec, ["--stop-time-hours", f"{hours:.6f}", "--max-update", str(spec.max_update)])
        checkpoints = self.work(spec) / "checkpoints"
        best = checkpoints / "checkpoint_best.pt"
        return {"updates": self._export_model(best if best.is_file() else checkpoints / "checkpoint_last.pt", spec),
                "precision": self.precision}

    def _fairseq_train(self, run: Spec, stop: List[str]) -> None:
        work = self.work(run)
        keep = ["--save-interval-updates", "500", "--keep-interval-updates", "1"]
        command = demo.train_command(work / "bin", work / "checkpoints", run.recipe(),
                                     [*stop, "--max-epoch", "100000"], keep, precision=self.precision)
        self._call(f"fairseq-train of {run.name}", command)

    def _keep_weak(self, spec: Spec) -> None:
        """Train the run up to ``spec.at_update`` updates (if it is not there yet) and keep that
        checkpoint as ``spec``'s model."""
        if (self.work(spec) / "model.pt").is_file():
            return
        run = self.run_of(spec)
        last = self.work(run) / "checkpoints" / "checkpoint_last.pt"
        updates = updates_of(last) if last.is_file() else 0
        if updates > spec.at_update:
            raise FairseqStreamError(f"{run.name} is past update {spec.at_update} without keeping {spec.name}: "
                                     f"delete {self.work(run)} and build both again")
        if updates < spec.at_update:
            self._fairseq_train(run, ["--max-update", str(spec.at_update)])
        self._export_model(last, spec)

    def _export_model(self, checkpoint: Path, spec: Spec) -> int:
        """The decoding-only copy the later stages read (the draft distils exactly what is shipped)."""
        from fairseq_stream.tools.checkpoint import export_inference_checkpoint

        model = self.work(spec) / "model.pt"
        model.parent.mkdir(parents=True, exist_ok=True)
        export_inference_checkpoint(str(checkpoint), str(model), languages=(spec.src, spec.tgt))
        return updates_of(model)

    def _draft(self, spec: Spec) -> Dict:
        run_work = self.work(self.run_of(spec))
        sources = run_work / "raw" / f"train.{spec.src}"
        lines = spec.draft_lines or sum(1 for _ in open(sources, encoding="utf-8"))
        env = {"PYTHON": sys.executable, "SRC_LANG": spec.src, "TGT_LANG": spec.tgt,
               "BPE_CODES": str(self.codes(spec, spec.src)), "KD_LINES": str(lines), "DIM": str(spec.draft_dim),
               "FFN": str(4 * spec.draft_dim), "TRAIN_MINUTES": str(spec.draft_minutes * self.scale),
               "WORK": str(self.work(spec) / "draft"), "THREADS": str(self.threads), "PRECISION": self.precision}
        script = demo.REPO / "scripts" / "train_draft.sh"
        self._call(f"the draft of {spec.name}", ["bash", str(script), str(run_work / "bin"),
                                                 str(self.work(spec) / "model.pt"), str(sources),
                                                 str(self.work(spec) / "draft.pt")], env)
        return {"precision": self.precision}

    def _prior(self, spec: Spec) -> None:
        # the model's greedy output of training sources: what train_draft.sh distilled
        greedy = self.work(spec) / "draft" / "kd" / f"train.{spec.tgt}"
        self._call(f"the prior of {spec.name}", [
            sys.executable, "-m", "fairseq_stream.tools.lookahead_prior",
            "--dict", str(self.work(self.run_of(spec)) / "bin" / f"dict.{spec.tgt}.txt"), "--text", str(greedy),
            "--ngram", str(PRIOR_NGRAM), "--min-count", "2", "--out", str(self.work(spec) / "lookahead_prior.pt")])

    def _export(self, spec: Spec) -> None:
        out, work, run_work = self.out(spec), self.work(spec), self.work(self.run_of(spec))
        (out / "bin").mkdir(parents=True, exist_ok=True)
        shutil.copy(work / "model.pt", out / "checkpoint.pt")
        for name in ("draft.pt", "lookahead_prior.pt"):
            shutil.copy(work / name, out / name)
        shutil.copy(self.codes(spec, spec.src), out / "bpe.codes")
        if not spec.joint:  # each side's codes too (the target's: to BPE references as the model saw them)
            for lang in (spec.src, spec.tgt):
                shutil.copy(self.codes(spec, lang), out / f"bpe.{lang}.codes")
        for lang in (spec.src, spec.tgt):
            shutil.copy(run_work / "bin" / f"dict.{lang}.txt", out / f"dict.{lang}.txt")
            shutil.copy(run_work / "bin" / f"dict.{lang}.txt", out / "bin" / f"dict.{lang}.txt")
            shutil.copy(run_work / "raw" / f"test.{lang}", out / f"test.{lang}")
            for ext in ("bin", "idx"):
                name = f"test.{spec.src}-{spec.tgt}.{lang}.{ext}"
                shutil.copy(run_work / "bin" / name, out / "bin" / name)

    # ---- reports ----
    def print_times(self, names: Sequence[str]) -> None:
        print("\n| model | " + " | ".join(STAGES) + " | total |\n|---|" + "---|" * (len(STAGES) + 1))
        for name in names:
            stages = self.state(self.by_name[name])["stages"]
            cells = [_duration(stages[s]["seconds"]) if s in stages else "—" for s in STAGES]
            total = _duration(sum(r["seconds"] for r in stages.values()))
            print(f"| {name} | " + " | ".join(cells) + f" | {total} |")

    def print_list(self) -> None:
        print("| model | half | direction | layers × dim (heads, FFN) | BPE | LS | budget | stages done | time |")
        print("|---|---|---|---|---|---|---|---|---|")
        for s in self.table:
            stages = self.state(s)["stages"]
            done = [k for k in STAGES if self.done(s, k)]
            bpe = f"joint {s.bpe[0]}" if s.joint else f"{s.src} {s.bpe[0]} / {s.tgt} {s.bpe[1]}"
            budget = (f"{s.at_update} updates of {s.of_run}" if s.of_run else
                      f"{s.minutes * self.scale:g} min" + (f" or {s.max_update} updates" if s.max_update else ""))
            took = _duration(sum(r["seconds"] for r in stages.values())) if stages else "—"
            print(f"| {s.name} | {s.half} | {s.src}→{s.tgt} | {s.layers[0]}+{s.layers[1]} × {s.dim} ({s.heads}, "
                  f"{s.ffn}) | {bpe} | {s.label_smoothing:g} | {budget} | {' '.join(done) or '—'} | {took} |")


def updates_of(checkpoint: Path) -> int:
    """The update count fairseq recorded in a checkpoint."""
    import torch

    from fairseq_stream.integration.checkpoints import register_safe_globals

    register_safe_globals()
    state = torch.load(str(checkpoint), map_location="cpu", weights_only=True)
    return int(state["optimizer_history"][-1]["num_updates"])


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def default_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "fairseq_stream" / "zoo"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=None,
                        help="folder of train.{es,en} and valid.{es,en}, raw text (needed by the prep stage)")
    parser.add_argument("--root", type=Path, default=None,
                        help="where the models go (default ${XDG_CACHE_HOME:-~/.cache}/fairseq_stream/zoo)")
    parser.add_argument("--models", default="", help="comma-separated names (default: every model of the table)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"a subset of {','.join(STAGES)}")
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="multiplies every training budget, the drafts' too (e.g. 0.05 for a quick look)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads of every step")
    parser.add_argument("--train-precision", choices=train_autocast.PRECISIONS, default="auto",
                        help="the products' precision in training, the drafts' too (default auto: bfloat16 where "
                             "the CPU has AMX-BF16 or AVX512-BF16, float32 elsewhere)")
    parser.add_argument("--tiny", action="store_true", help="tiny models instead (tests)")
    parser.add_argument("--list", action="store_true", help="print the table with each model's state, and stop")
    args = parser.parse_args(argv)
    args.root = args.root or default_root()
    args.stages = [s for s in args.stages.split(",") if s]
    bad = [s for s in args.stages if s not in STAGES]
    if bad or not args.stages:
        parser.error(f"--stages: {','.join(bad) or 'empty'}: choose from {','.join(STAGES)}")
    if args.budget_scale <= 0:
        parser.error("--budget-scale must be > 0")
    if args.corpus is not None:
        missing = [f"{split}.{lang}" for split in ("train", "valid") for lang in (demo.SRC, demo.TGT)
                   if not (args.corpus / f"{split}.{lang}").is_file()]
        if missing:
            parser.error(f"--corpus {args.corpus} lacks {', '.join(missing)}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    table = TINY if args.tiny else TABLE
    zoo = Zoo(table, args.root, args.corpus, args.budget_scale, args.threads, args.train_precision)
    if args.list:
        print(f"zoo in {args.root}")
        zoo.print_list()
        return
    names = [n for n in args.models.split(",") if n] or [s.name for s in table]
    unknown = [n for n in names if n not in zoo.by_name]
    if unknown:
        raise FairseqStreamError(f"--models: no model {', '.join(unknown)} in the table (see --list)")
    try:
        zoo.check_order(names, args.stages)
        zoo.build(names, args.stages)
    except KeyboardInterrupt:
        sys.exit("zoo.py: interrupted; rerun the same command to resume")


if __name__ == "__main__":
    try:
        main()
    except FairseqStreamError as e:
        sys.exit(f"zoo.py: error: {e}")
