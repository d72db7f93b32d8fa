"""The user's command as the benchmark: ``fairseq-generate`` run as a user runs it, a fresh process per run.

    OMP_NUM_THREADS=1 python -m fairseq_stream.tools.user_bench --model user_dir_examples/demo \\
        --rows batch1,k5 --limit 300 --repeats 3 --json user_bench.json

Each ``--model DIR`` is a folder as the zoo exports it (``checkpoint.pt``, ``dict.SRC.txt``, ``dict.TGT.txt``,
``bpe.codes``, ``test.SRC``, ``test.TGT``; optional ``draft.pt`` and ``prior.pt``, the demo's
``lookahead_prior.pt`` too). The language pair is the one the checkpoint records. The first ``--limit`` test
sentences are tokenised and BPE'd with the folder's codes (the package's text pipeline) and binarized once
with the folder's dictionaries (``fairseq-preprocess`` into a temporary folder). Then every row is one
``fairseq-generate`` command (``--user-dir fairseq_stream``, ``--required-batch-size-multiple 1``,
``--tokenizer moses --bpe subword_nmt --bpe-codes``), started fresh for every run; rows are interleaved
(round-robin over the rows, ``--repeats`` times) so a noisy machine slows them alike. A row's decode time
is read from fairseq's own closing line, "Translated N sentences (T tokens) in Xs (S sentences/s, R
tokens/s)": its generation timer's sum, taken as T / R (X is printed to 0.1 s; T / R is the same sum to
four digits). Model loading, binarized-data reading and detokenisation are outside it, as for a user.

Rows (``--rows``, comma-separated presets, or ``--run 'LABEL=fairseq-generate options'`` for your own, the
options after any environment assignments of that row's runs, as a shell takes them: ``--run 'float32
panels=FAIRSEQ_STREAM_NO_HALF_PANELS=1 --search fixed-ours ...'``):

* ``batch1`` — true batch 1 (``--beam 1 --stream-capacity 1 --batch-size 1``; ``--batch-size 1`` alone
  still streams about 11 sentences at once): our greedy (``fixed-ours``), ``speculative`` with the folder's
  draft, ``lookahead`` with its prior, ``gs-jacobi``, ``hybrid-jacobi``; each must equal greedy.
* ``k5`` / ``k50`` — fairseq's ``beam``, ``fixed-ours``, ``fixed-ours --beam-finalize fairseq`` (must equal
  fairseq's beam), ``var-stream`` and, with the folder's draft, ``speculative-beam`` (must equal ``fixed-ours``)
  at that width, with fairseq's default batching.
* ``k5b1`` — ``fixed-ours --beam 5`` at true batch 1 and ``speculative-beam`` with the folder's draft (must equal it).
* ``online`` — the batch-1 methods as a translation service runs them: ``fairseq-interactive`` reading the raw test
  sentences (``--input FILE``, its own ``--tokenizer``/``--bpe``) one line a chunk (``--buffer-size 1``) at true batch 1:
  our greedy, ``speculative`` and ``lookahead`` (each must equal greedy). Their decode time is fairseq-interactive's
  closing "translation time" (the sum of its timed ``inference_step`` calls; reading, tokenising and printing are
  outside it), the table's "latency" column the median of its per-sentence ``W-`` times (ms).

CTranslate2 rows (float32 and int8, one thread, decode time of ``translate_batch`` in a fresh process) are
added per preset where ``ctranslate2`` is importable and its fairseq converter takes the model (the
converter and the row of ``scripts/bench/bench_vs_ctranslate2.py``); otherwise one line says why they are
left out. The table per model gives the median decode time, its ratio to the preset's reference row (our
greedy; fairseq's beam), BLEU (sacreBLEU on the detokenised ``D-`` lines against the raw references) and,
for a row that must equal another, whether every output does. ``--json`` also holds each row's exact
command and every run's time; the header names the CPU and the threads.

Why a batch-1 row takes the time it takes: for every row whose closing statistics (the ``fairseq-stream``
line) count its iterations — ``speculative``, ``lookahead``, the Jacobi family — a second table splits its
ratio to its reference row into the tokens a call accepts (greedy's steps over the row's calls) and what a
call costs (its decode time over its calls) against one of the reference's steps; ratio = call cost /
tokens a call. For ``speculative`` it splits a call into the draft's part, the verification's and the rest
(what a sentence costs besides its calls — the refill's encoders, Python — spread over its calls); under
``--jacobi-parallel auto`` the row says in how many of its sentence runs the blocks ran.

Which harness when: this one for figures a user can reproduce with their own command (cold process,
fairseq's own timer, true batch 1). ``python -m fairseq_stream.tools.bench`` (warmed, in one process, over
the Python API) for A/B work on the engine: its figures are warmed and leave one-off costs out.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_stream.engine.output_paths import check_output_path, write_text_checked
from fairseq_stream.errors import FairseqStreamError, UsageError, usage_errors
from fairseq_stream.tools.demo_files import find_demo_dir

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # --user-dir
REPO_DIR = os.path.dirname(PACKAGE_DIR)
CT2_SCRIPT = os.path.join(REPO_DIR, "scripts", "bench", "bench_vs_ctranslate2.py")
#: fairseq_cli/generate.py's closing line; the counts carry thousands separators ("1,000").
_CLOSING = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s"
                      r"(?: \(([\d.]+|inf|nan) sentences/s, ([\d.]+|inf|nan) tokens/s\))?")
_SENTENCE = re.compile(r"^([HD])-(\d+)\t[^\t]*\t(.*)$")
#: our closing statistics (engine/stats.py ``summary``), logged by fairseq-generate as "fairseq-stream NAME: ..."
_STATS_LINE = re.compile(r"fairseq-stream [\w-]+: (\d+) sentences, (\d+) timesteps[^\n]*")
_ITERATIONS = re.compile(r"per-sentence iterations (\d+) vs greedy steps (\d+)")
_SHARES = re.compile(r"draft (\d+)% and verification (\d+)% of the time")
_GATE = re.compile(r"--jacobi-parallel auto: (\d+) sentence runs in blocks, (\d+) one position a call")
#: fairseq-interactive's closing line (fairseq_cli/interactive.py): its wall time and its translation timer's sum
_INTERACTIVE_CLOSING = re.compile(r"Total time: ([\d.]+) seconds; translation time: ([\d.]+)")
#: fairseq-interactive's per-sentence time: its batch's inference_step time over the batch's sentences
_SENTENCE_TIME = re.compile(r"^W-(\d+)\t([\d.]+)\tseconds$", re.M)
ONE_SENTENCE = ["--stream-capacity", "1", "--batch-size", "1"]  # true batch 1
BATCH1 = ["--beam", "1", *ONE_SENTENCE]


# ---------------------------------------------------------------------------------------------------------------
# Reading fairseq-generate's output
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class Closing:
    """fairseq-generate's closing line: sentences, generated tokens and the generation timer's sum (s)."""

    sentences: int
    tokens: int
    seconds: float


def parse_closing_line(text: str) -> Optional[Closing]:
    """The last "Translated N sentences (T tokens) in Xs (..)" line of ``text``, or None.

    fairseq prints the timer's sum rounded to 0.1 s, but also ``1 / avg`` tokens/s with ``avg = sum / T``:
    T over that rate is the sum to four digits (a 0.14 s run is not "0.1s"). Without tokens (or a rate),
    the sentence rate, then the rounded figure, are used."""
    found = list(_CLOSING.finditer(text))
    if not found:
        return None
    m = found[-1]
    sentences, tokens = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    seconds = float(m.group(3))
    sent_rate, tok_rate = (_rate(m.group(i)) for i in (4, 5))
    if tokens and tok_rate:
        seconds = tokens / tok_rate
    elif sentences and sent_rate:
        seconds = sentences / sent_rate
    return Closing(sentences, tokens, seconds)


def _rate(text: Optional[str]) -> Optional[float]:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value and value != float("inf") else None


def parse_stream_stats(text: str) -> Dict[str, float]:
    """Counts from the last ``fairseq-stream NAME: ...`` statistics line of ``text``: ``timesteps`` (decoder calls at
    batch 1), ``iterations`` and ``greedy_steps`` (a row that counts its iterations: greedy's steps for the same
    tokens), ``draft_share`` and ``verify_share`` (speculative: fractions of its time), ``block_runs`` and
    ``single_runs`` (``--jacobi-parallel auto``: sentence runs in blocks, one position a call); {} without such a line."""
    found = list(_STATS_LINE.finditer(text))
    if not found:
        return {}
    line = found[-1]
    out = {"timesteps": float(line.group(2))}
    iterations = _ITERATIONS.search(line.group(0))
    if iterations:
        out.update(iterations=float(iterations.group(1)), greedy_steps=float(iterations.group(2)))
    shares = _SHARES.search(line.group(0))
    if shares:
        out.update(draft_share=int(shares.group(1)) / 100, verify_share=int(shares.group(2)) / 100)
    gate = _GATE.search(line.group(0))
    if gate:
        out.update(block_runs=float(gate.group(1)), single_runs=float(gate.group(2)))
    return out


def parse_interactive_closing(text: str) -> Optional[float]:
    """fairseq-interactive's translation time (s) from its last "Total time: X seconds; translation time: Y" line,
    or None. Printed to the millisecond."""
    found = list(_INTERACTIVE_CLOSING.finditer(text))
    return float(found[-1].group(2)) if found else None


def sentence_times(stdout: str) -> Dict[int, float]:
    """``{id: seconds}`` of fairseq-interactive's ``W-`` lines (each sentence's share of its batch's time)."""
    return {int(m.group(1)): float(m.group(2)) for m in _SENTENCE_TIME.finditer(stdout)}


def sentence_lines(stdout: str, kind: str) -> Dict[int, str]:
    """``{id: text}`` of fairseq-generate's ``H-`` (``kind="H"``) or ``D-`` lines (score column dropped)."""
    found = {}
    for line in stdout.splitlines():
        m = _SENTENCE.match(line)
        if m and m.group(1) == kind:
            found[int(m.group(2))] = m.group(3)
    return found


def interleaved(rows: int, repeats: int) -> List[Tuple[int, int]]:
    """``(repeat, row)`` in run order: round-robin over the rows, ``repeats`` times."""
    return [(r, i) for r in range(repeats) for i in range(rows)]


# ---------------------------------------------------------------------------------------------------------------
# The model folder
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class ModelDir:
    """A model folder as the zoo exports it (the demo folder too)."""

    path: str
    source_lang: str
    target_lang: str
    draft: Optional[str] = None
    prior: Optional[str] = None

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def inputs(self) -> List[Tuple[str, str]]:
        """The folder's files (``(what, path)``): no output of the harness may name one."""
        return [(f"a file of --model {self.path}", os.path.join(self.path, n)) for n in sorted(os.listdir(self.path))]


def recorded_languages(checkpoint: str) -> Tuple[Optional[str], Optional[str]]:
    """The (source, target) language pair a checkpoint's configuration records (task, model, or legacy args)."""
    import torch

    from fairseq_stream.integration.checkpoints import register_safe_globals

    register_safe_globals()
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    cfg = state.get("cfg") or {}
    for part in (cfg.get("task"), cfg.get("model"), state.get("args")):  # args: a legacy (argparse) checkpoint
        get = part.get if isinstance(part, dict) else (lambda k, p=part: getattr(p, k, None))
        if part is not None and get("source_lang") and get("target_lang"):
            return get("source_lang"), get("target_lang")
    return None, None


def load_model_dir(path: str) -> ModelDir:
    """The folder ``path`` checked: one line saying what is missing, else its files and language pair."""
    where = f"--model {path}"
    if not os.path.isdir(path):
        raise UsageError(f"{where}: not a folder; give a folder with checkpoint.pt, dict.SRC.txt, dict.TGT.txt, "
                         "bpe.codes, test.SRC and test.TGT (as the zoo exports, or user_dir_examples/demo)")
    for name in ("checkpoint.pt", "bpe.codes"):
        if not os.path.isfile(os.path.join(path, name)):
            raise UsageError(f"{where}: no {name} in the folder; a model folder holds checkpoint.pt, dict.SRC.txt, "
                             "dict.TGT.txt, bpe.codes, test.SRC and test.TGT")
    try:
        src, tgt = recorded_languages(os.path.join(path, "checkpoint.pt"))
    except Exception as exc:  # noqa: BLE001  (not a checkpoint: torch's own message, on one line)
        raise UsageError(f"{where}: checkpoint.pt cannot be read ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0]}); export it with tools/checkpoint.py") from None
    if not (src and tgt):
        raise UsageError(f"{where}: checkpoint.pt records no language pair; export it with "
                         "fairseq_stream.tools.checkpoint.export_inference_checkpoint(..., languages=(SRC, TGT))")
    for name in (f"dict.{src}.txt", f"dict.{tgt}.txt", f"test.{src}", f"test.{tgt}"):
        if not os.path.isfile(os.path.join(path, name)):
            raise UsageError(f"{where}: the checkpoint translates {src}→{tgt} but the folder has no {name}")
    prior = next((os.path.join(path, n) for n in ("prior.pt", "lookahead_prior.pt")
                  if os.path.isfile(os.path.join(path, n))), None)
    draft = os.path.join(path, "draft.pt") if os.path.isfile(os.path.join(path, "draft.pt")) else None
    return ModelDir(path, src, tgt, draft=draft, prior=prior)


def read_test(model: ModelDir, limit: int) -> Tuple[List[str], List[str]]:
    """The first ``limit`` test sentences and their raw references."""
    from fairseq_stream.tools.bench import read_lines

    sources = read_lines(model.file(f"test.{model.source_lang}"), limit)
    references = read_lines(model.file(f"test.{model.target_lang}"), limit)
    if len(sources) != len(references) or not sources:
        raise FairseqStreamError(f"--model {model.path}: test.{model.source_lang} and test.{model.target_lang} hold "
                                 f"{len(sources)} and {len(references)} of the first {limit} lines; they must be "
                                 "parallel and not empty")
    return sources, references


def binarize(model: ModelDir, sources: List[str], references: List[str], dest: str) -> List[List[str]]:
    """Tokenise and BPE the sentences with the folder's codes, ``fairseq-preprocess`` them with its
    dictionaries into ``dest`` (split ``test``); return the BPE'd source tokens (CTranslate2's input)."""
    from fairseq_stream.integration.text import BpeCodes, tokenize

    bpe = BpeCodes(model.file("bpe.codes"))
    raw = os.path.join(dest, "raw")
    os.makedirs(raw, exist_ok=True)
    pieces = {}
    for lang, lines in ((model.source_lang, sources), (model.target_lang, references)):
        pieces[lang] = [bpe.apply(tokenize(line, lang)) for line in lines]
        with open(os.path.join(raw, f"test.{lang}"), "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in pieces[lang])
    cmd = [tool("fairseq-preprocess"), "--source-lang", model.source_lang, "--target-lang", model.target_lang,
           "--srcdict", model.file(f"dict.{model.source_lang}.txt"),
           "--tgtdict", model.file(f"dict.{model.target_lang}.txt"),
           "--testpref", os.path.join(raw, "test"), "--destdir", dest, "--workers", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FairseqStreamError(f"fairseq-preprocess failed on --model {model.path}: {_last_line(proc.stderr)}")
    return [line.split() for line in pieces[model.source_lang]]


def tool(name: str) -> str:
    """A console script of this interpreter's environment (fairseq's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.isfile(here) else (shutil.which(name) or name)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


# ---------------------------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class Row:
    """One table row: a label and how it runs (fairseq-generate options, or a CTranslate2 decode)."""

    label: str
    options: List[str] = field(default_factory=list)
    reference: Optional[str] = None  # the row its time is divided by
    identical_to: Optional[str] = None  # the row whose outputs it must equal
    ct2: Optional[Dict[str, Any]] = None  # a CTranslate2 row: compute_type, k, batch
    env: Dict[str, str] = field(default_factory=dict)  # environment variables of its runs (``--run 'L=VAR=1 ...'``)
    interactive: bool = False  # run by fairseq-interactive over the raw sentences (the ``online`` preset)


def batch1_rows(model: ModelDir, online: bool = False) -> Tuple[List[Row], List[str]]:
    """Our greedy and the strategies that must equal it, at true batch 1; the lines of rows left out. ``online``:
    the rows of the ``online`` preset — greedy, ``speculative`` and ``lookahead`` run by ``fairseq-interactive``
    (one line a chunk), labelled "... online"."""
    tag = " online" if online else ""
    ref = f"greedy{tag}"
    rows = [Row(ref, ["--search", "fixed-ours", *BATCH1], reference=ref, interactive=online)]
    skipped = []
    if model.draft:
        rows.append(Row(f"speculative{tag}", ["--search", "speculative", "--draft-path", model.draft, *BATCH1], ref, ref,
                        interactive=online))
    else:
        skipped.append(f"speculative{tag}: {model.path} has no draft.pt (scripts/train_draft.sh distils one)")
    prior = ["--lookahead-prior", model.prior] if model.prior else []
    rows.append(Row(f"lookahead{tag}" if model.prior else f"lookahead{tag} (no prior)",
                    ["--search", "lookahead", *prior, *BATCH1], ref, ref, interactive=online))
    if not online:
        rows += [Row(s, ["--search", s, *BATCH1], ref, ref) for s in ("gs-jacobi", "hybrid-jacobi")]
    return rows, skipped


def beam_rows(k: int, model: ModelDir) -> Tuple[List[Row], List[str]]:
    """fairseq's beam at width ``k`` (the reference), our fixed beam, its exact variants and var-stream."""
    ref = f"fairseq beam k={k}"
    width = ["--beam", str(k)]
    rows = [Row(ref, ["--search", "beam", *width], ref),
            Row(f"fixed-ours k={k}", ["--search", "fixed-ours", *width], ref),
            Row(f"fixed-ours --beam-finalize fairseq k={k}",
                ["--search", "fixed-ours", "--beam-finalize", "fairseq", *width], ref, ref),
            Row(f"var-stream k={k}", ["--search", "var-stream", *width], ref)]
    found, skipped = _speculative_beam(model, f"speculative-beam k={k}", width, ref, f"fixed-ours k={k}")
    return rows + found, skipped


def beam_batch1_rows(k: int, model: ModelDir) -> Tuple[List[Row], List[str]]:
    """The fixed beam at width ``k`` and true batch 1 (the reference), and ``speculative-beam``, which must equal it."""
    ref = f"fixed-ours k={k} b1"
    width = ["--beam", str(k), *ONE_SENTENCE]
    found, skipped = _speculative_beam(model, f"speculative-beam k={k} b1", width, ref, ref)
    return [Row(ref, ["--search", "fixed-ours", *width], ref)] + found, skipped


def _speculative_beam(model: ModelDir, label: str, width: List[str], ref: str,
                      equal: str) -> Tuple[List[Row], List[str]]:
    """The ``speculative-beam`` row with the folder's draft, which must equal row ``equal``; or why there is none."""
    if not model.draft:
        return [], [f"speculative-beam: {model.path} has no draft.pt"]
    return [Row(label, ["--search", "speculative-beam", "--draft-path", model.draft, *width], ref, equal)], []


PRESETS: Dict[str, Callable[[ModelDir], Tuple[List[Row], List[str]]]] = {
    "batch1": batch1_rows,
    "k5": lambda model: beam_rows(5, model),
    "k50": lambda model: beam_rows(50, model),
    "k5b1": lambda model: beam_batch1_rows(5, model),
    "online": lambda model: batch1_rows(model, online=True),
}
#: a preset's CTranslate2 decode: (beam width, max_batch_size); 64 is bench_vs_ctranslate2.py's default
CT2_PRESETS = {"batch1": (1, 1), "k5": (5, 64), "k50": (50, 64), "k5b1": (5, 1), "online": (1, 1)}
CT2_TYPES = ("float32", "int8")  # the compute types of a preset's CTranslate2 rows


def ct2_label(compute_type: str, preset: str) -> str:
    """The label of a preset's CTranslate2 row (the row itself, and ``--skip`` before the converter has run)."""
    return f"CTranslate2 {compute_type} {preset}"


_ENV_ASSIGNMENT = r"[A-Z_][A-Z0-9_]*=\S*"


def custom_row(spec: str) -> Row:
    """``--run 'LABEL=fairseq-generate options'`` → a row (its options split as a shell would); it is timed
    against the table's first row. The options may start with environment assignments, as a shell command
    does (``--run 'float32 panels=FAIRSEQ_STREAM_NO_HALF_PANELS=1 --search fixed-ours ...'``): that row's
    runs get them."""
    # the label ends at the '=' before the first option (or assignment), so it may hold one itself
    # ("fixed-ours k=5=--beam 5")
    m = re.match(rf"(.*?)=\s*((?:{_ENV_ASSIGNMENT}\s+)*-.*)?$", spec) if "=" in spec else None
    label, options = (m.group(1), m.group(2) or "") if m else ("", "")
    if not label.strip():
        raise UsageError(f"--run {spec!r}: expected LABEL=OPTIONS, e.g. --run 'greedy b1=--search fixed-ours --beam 1 "
                         "--stream-capacity 1 --batch-size 1'")
    try:
        words = shlex.split(options)
    except ValueError as exc:
        raise UsageError(f"--run {spec!r}: {exc}") from None
    env = {}
    while words and re.fullmatch(_ENV_ASSIGNMENT, words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return Row(label.strip(), words, env=env)


def rows_for(model: ModelDir, presets: Sequence[str], runs: Sequence[str], ct2: Optional[str],
             identical: Sequence[str] = (), skip: Sequence[str] = ()) -> Tuple[List[Row], List[str]]:
    """Every row of one model (presets, their CTranslate2 rows, then ``--run`` rows) and the lines of rows
    left out; ``ct2`` is the converted model's folder, or why there is none; ``identical`` the
    ``--identical ROW=OTHER`` pairs; ``skip`` the labels of preset rows not to run (``--skip``)."""
    rows: List[Row] = []
    skipped: List[str] = []
    for name in presets:
        found, left = PRESETS[name](model)
        rows += found
        skipped += left
        k, batch = CT2_PRESETS[name]
        if ct2 is not None and os.path.isdir(ct2):
            rows += [Row(ct2_label(ct, name), reference=found[0].label,
                         ct2={"model": ct2, "compute_type": ct, "k": k, "batch": batch}) for ct in CT2_TYPES]
    if ct2 is not None and not os.path.isdir(ct2) and presets:
        skipped.append(f"CTranslate2 rows: {ct2}")
    # the CTranslate2 rows' labels count even before the converter has run (check_args)
    known = [row.label for row in rows] + [ct2_label(ct, name) for name in presets for ct in CT2_TYPES]
    unknown = [label for label in skip if label not in known]
    if unknown:
        raise UsageError(f"--skip {', '.join(map(repr, unknown))}: no preset row of that label "
                         f"({', '.join(dict.fromkeys(known))})")
    for label in skip:
        users = [row.label for row in rows if row.label not in skip and label in (row.reference, row.identical_to)]
        if users:
            raise UsageError(f"--skip {label!r}: rows {', '.join(users)} are timed against it or must equal it")
    skipped += [f"{label}: --skip" for label in skip]
    rows = [row for row in rows if row.label not in skip]
    custom = [custom_row(spec) for spec in runs]
    first = (rows or custom or [Row("")])[0].label
    for row in custom:
        row.reference = first
    rows += custom
    labels = [row.label for row in rows]
    for label in labels:
        if labels.count(label) > 1:
            raise UsageError(f"two rows are labelled {label!r}; give each --run its own label")
    by_label = {row.label: row for row in rows}
    for pair in identical:
        row, eq, other = (part.strip() for part in pair.partition("="))
        if not eq or row not in by_label or other not in by_label:
            raise UsageError(f"--identical {pair!r}: expected ROW=OTHER, two of the rows' labels ({', '.join(labels)})")
        by_label[row].identical_to = other
    return rows, skipped


# ---------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------
def generate_command(model: ModelDir, data: str, row: Row) -> List[str]:
    """The ``fairseq-generate`` command line of ``row`` over the binarized ``data``."""
    return [tool("fairseq-generate"), data, "--user-dir", PACKAGE_DIR, "--path", model.file("checkpoint.pt"),
            "--source-lang", model.source_lang, "--target-lang", model.target_lang, "--gen-subset", "test",
            "--required-batch-size-multiple", "1", "--tokenizer", "moses", "--bpe", "subword_nmt",
            "--bpe-codes", model.file("bpe.codes"), *row.options]


def interactive_command(model: ModelDir, data: str, source_file: str, row: Row) -> List[str]:
    """The ``fairseq-interactive`` command line of ``row``: the raw sentences of ``source_file`` one line a chunk, the
    dictionaries of the binarized ``data`` folder, the folder's tokenizer and BPE as fairseq applies them."""
    return [tool("fairseq-interactive"), data, "--user-dir", PACKAGE_DIR, "--path", model.file("checkpoint.pt"),
            "--source-lang", model.source_lang, "--target-lang", model.target_lang, "--tokenizer", "moses",
            "--bpe", "subword_nmt", "--bpe-codes", model.file("bpe.codes"), "--input", source_file,
            "--buffer-size", "1", *row.options]


#: a CTranslate2 row's process: bench_vs_ctranslate2.py's row, timed round translate_batch only
_CT2_CHILD = """\
import json, sys
sys.path.insert(0, sys.argv[1])
from bench_vs_ctranslate2 import ctranslate2_row
spec = json.load(open(sys.argv[2], encoding="utf-8"))
row = ctranslate2_row(spec["model"], spec["compute_type"], spec["tokens"], spec["k"], spec["batch"], " ".join)
outputs, wall, cpu = row.decode(range(len(spec["tokens"])))
print(json.dumps({"seconds": wall, "outputs": outputs}))
"""


def ct2_command(row: Row, spec_file: str) -> List[str]:
    return [sys.executable, "-c", _CT2_CHILD, os.path.dirname(CT2_SCRIPT), spec_file]


@dataclass
class RunResult:
    """One run of a row: its decode time and outputs (BPE'd hypotheses, detokenised text), by sentence."""

    seconds: float
    hypotheses: List[str]
    detokenised: List[str]
    stats: Dict[str, float] = field(default_factory=dict)  # parse_stream_stats of a fairseq-generate run
    latencies: List[float] = field(default_factory=list)  # fairseq-interactive: each sentence's W- time (s)


def _run_fairseq(cmd: List[str], env: Dict[str, str], label: str) -> subprocess.CompletedProcess:
    """One fresh process of a fairseq command line (``cmd[0]``), which must exit 0."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise FairseqStreamError(f"row {label!r}: {os.path.basename(cmd[0])} exited {proc.returncode}: "
                                 f"{_last_line(proc.stderr)}")
    return proc


def run_generate(cmd: List[str], env: Dict[str, str], n: int, label: str) -> RunResult:
    """One fresh ``fairseq-generate`` process; its decode time from the closing line."""
    proc = _run_fairseq(cmd, env, label)
    closing = parse_closing_line(proc.stderr + proc.stdout)
    if closing is None:
        raise FairseqStreamError(f"row {label!r}: fairseq-generate printed no 'Translated N sentences' line")
    if closing.sentences != n or closing.seconds <= 0:
        raise FairseqStreamError(f"row {label!r}: fairseq-generate translated {closing.sentences} of {n} sentences "
                                 f"in {closing.seconds:g} s")
    hyps, detok = sentence_lines(proc.stdout, "H"), sentence_lines(proc.stdout, "D")
    missing = [i for i in range(n) if i not in hyps or i not in detok]
    if missing:
        raise FairseqStreamError(f"row {label!r}: no H-/D- line for sentence {missing[0]} in fairseq-generate's output")
    return RunResult(closing.seconds, [hyps[i] for i in range(n)], [detok[i] for i in range(n)],
                     parse_stream_stats(proc.stderr + proc.stdout))


def run_interactive(cmd: List[str], env: Dict[str, str], n: int, label: str) -> RunResult:
    """One fresh ``fairseq-interactive`` process; its decode time from its closing "translation time"."""
    proc = _run_fairseq(cmd, env, label)
    seconds = parse_interactive_closing(proc.stderr + proc.stdout)
    if seconds is None:
        raise FairseqStreamError(f"row {label!r}: fairseq-interactive printed no 'Total time: ...; translation time' line")
    hyps, detok, times = sentence_lines(proc.stdout, "H"), sentence_lines(proc.stdout, "D"), sentence_times(proc.stdout)
    missing = [i for i in range(n) if i not in hyps or i not in detok or i not in times]
    if missing or seconds <= 0:
        raise FairseqStreamError(f"row {label!r}: fairseq-interactive translated {n - len(missing)} of {n} sentences "
                                 f"(no H-/D-/W- line for sentence {missing[0] if missing else '?'}) in {seconds:g} s")
    return RunResult(seconds, [hyps[i] for i in range(n)], [detok[i] for i in range(n)],
                     parse_stream_stats(proc.stderr + proc.stdout), [times[i] for i in range(n)])


def run_ct2(cmd: List[str], env: Dict[str, str], label: str, target_lang: str) -> RunResult:
    """One fresh CTranslate2 process; its BPE pieces detokenised by the package's text pipeline."""
    from fairseq_stream.integration.text import postprocess

    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise FairseqStreamError(f"row {label!r}: the CTranslate2 process exited {proc.returncode}: "
                                 f"{_last_line(proc.stderr)}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return RunResult(out["seconds"], out["outputs"], [postprocess(o, target_lang) for o in out["outputs"]])


def prepare_ct2(model: ModelDir, work: str, presets: Sequence[str], threads: int) -> Optional[str]:
    """The converted model's folder, or why there are no CTranslate2 rows (None: no preset wants them)."""
    if not presets:
        return None
    if threads != 1:
        return "not run at --threads > 1 (bench_vs_ctranslate2.py's rows run one thread)"
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return "ctranslate2 is not importable here (pip install .[bench])"
    if not os.path.isfile(CT2_SCRIPT):
        return f"{CT2_SCRIPT} (the row's code) is not here; run from a checkout"
    sys.path.insert(0, os.path.dirname(CT2_SCRIPT))
    from bench_vs_ctranslate2 import convert  # the script's converter call, not a copy

    out = os.path.join(work, "ct2")
    try:
        convert(model.file("checkpoint.pt"), model.path, out, model.source_lang, model.target_lang)
    except FairseqStreamError as exc:
        return f"the converter does not take this model ({exc})"
    return out


def row_commands(model: ModelDir, data: str, rows: Sequence[Row], tokens: List[List[str]],
                 work: str, sources: Sequence[str] = ()) -> List[List[str]]:
    """Each row's command; a CTranslate2 row's input (the BPE'd source tokens) and fairseq-interactive's (the raw
    ``sources``, one a line) are written beside the data."""
    commands = []
    source_file = os.path.join(work, f"input.{model.source_lang}")
    if any(row.interactive for row in rows):
        with open(source_file, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in sources)
    for i, row in enumerate(rows):
        if row.interactive:
            commands.append(interactive_command(model, data, source_file, row))
            continue
        if row.ct2 is None:
            commands.append(generate_command(model, data, row))
            continue
        spec_file = os.path.join(work, f"ct2_row{i}.json")
        with open(spec_file, "w", encoding="utf-8") as f:
            json.dump(dict(row.ct2, tokens=tokens), f)
        commands.append(ct2_command(row, spec_file))
    return commands


#: ``--isa avx2``: every library of every row limited to AVX2 (+FMA, F16C), so an AVX-512 machine runs what an
#: AVX2-only CPU would: our kernels (built so, in their own cache entries), PyTorch's own kernels, MKL, oneDNN and
#: CTranslate2. The arithmetic units and the memory stay this machine's: a stand-in, named so in the header.
ISA_ENV: Dict[str, Dict[str, str]] = {
    "native": {},
    "avx2": {"FAIRSEQ_STREAM_KERNEL_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2", "CT2_FORCE_CPU_ISA": "AVX2"},
}


def prebuild_kernels(env: Dict[str, str], log: Callable[[str], None]) -> None:
    """Build the package's kernels for ``env``'s instruction set now: a kernel built at its first use is built inside
    a run's generation timer."""
    code = "import sys; from fairseq_stream.ops.kernels import prebuild; sys.exit(1 if prebuild(write=print) else 0)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.strip():
            log(line)
    if proc.returncode != 0:
        raise UsageError("the C++ kernels could not be built for --isa (above); the rows would time PyTorch's paths")


def measure(model: ModelDir, rows: Sequence[Row], commands: Sequence[List[str]], n: int, repeats: int,
            threads: int, log: Callable[[str], None], isa: str = "native") -> List[List[RunResult]]:
    """Every row's runs, interleaved (:func:`interleaved`): ``[row][repeat]``, under ``--isa``'s limits."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore",
               **ISA_ENV[isa])
    results: List[List[RunResult]] = [[] for _ in rows]
    order = interleaved(len(rows), repeats)
    for done, (r, i) in enumerate(order, 1):
        row = rows[i]
        if row.interactive:
            result = run_interactive(commands[i], dict(env, **row.env), n, row.label)
        elif row.ct2 is None:
            result = run_generate(commands[i], dict(env, **row.env), n, row.label)
        else:
            result = run_ct2(commands[i], env, row.label, model.target_lang)
        results[i].append(result)
        log(f"[{done}/{len(order)}] {model.name} repeat {r + 1}/{repeats} {row.label}: {result.seconds:.3f} s")
    return results


def summarise(rows: Sequence[Row], commands: Sequence[List[str]], results: Sequence[Sequence[RunResult]],
              references: List[str]) -> List[Dict[str, Any]]:
    """One dict per row: median decode time, ratio to its reference row, BLEU, identity, the command."""
    import sacrebleu

    medians = {row.label: statistics.median(r.seconds for r in runs) for row, runs in zip(rows, results)}
    last = {row.label: runs[-1] for row, runs in zip(rows, results)}
    out = []
    for row, cmd, runs in zip(rows, commands, results):
        base = medians.get(row.reference or "")
        entry: Dict[str, Any] = {
            "label": row.label, "command": shlex.join([f"{k}={v}" for k, v in row.env.items()] + list(cmd)),
            "seconds": [r.seconds for r in runs],
            "median": medians[row.label], "reference": row.reference,
            "ratio": medians[row.label] / base if base else None,
            "bleu": sacrebleu.corpus_bleu(runs[-1].detokenised, [references]).score,
            "identical_to": row.identical_to, "identical": None, "sentences": len(references),
            # a fresh process decodes deterministically: every run of a row gives the same outputs
            "stable": all(r.hypotheses == runs[0].hypotheses for r in runs),
            "stats": runs[-1].stats,  # counts: the same in every run of a row
            # fairseq-interactive: the median over sentences of each sentence's median W- time over the runs (s)
            "latency": statistics.median(statistics.median(t) for t in zip(*(r.latencies for r in runs)))
            if runs[-1].latencies else None,
        }
        if row.identical_to in last:
            entry["identical"] = sum(a == b for a, b in zip(runs[-1].hypotheses, last[row.identical_to].hypotheses))
        out.append(entry)
    return out


def _identity_cell(row: Dict[str, Any]) -> str:
    if row["identical_to"] is None or row["identical"] is None:
        return ""
    n = row["sentences"]
    if row["identical"] == n:
        return f"identical to {row['identical_to']} ({n}/{n})"
    return f"**NOT identical** to {row['identical_to']} ({row['identical']}/{n})"


def format_table(model: ModelDir, rows: List[Dict[str, Any]], repeats: int) -> str:
    """The markdown table of one model, under a heading that names it."""
    n = rows[0]["sentences"] if rows else 0
    online = any(row.get("latency") is not None for row in rows)
    return (f"### {model.name} ({model.source_lang}→{model.target_lang}, {n} sentences, median of {repeats} "
            f"fresh {'fairseq-generate / fairseq-interactive' if online else 'fairseq-generate'} runs)\n\n"
            + format_rows(rows))


def format_rows(rows: List[Dict[str, Any]]) -> str:
    """The markdown table of :func:`summarise`'s rows (a latency column where a row has one)."""
    online = any(row.get("latency") is not None for row in rows)
    lines = ["| row | decode s (median) | ratio | BLEU | identical |" + (" latency ms |" if online else ""),
             "|---|---|---|---|---|" + ("---|" if online else "")]
    for row in rows:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}× {row['reference']}"
        latency = "" if row.get("latency") is None else f" {1000 * row['latency']:.1f} |"
        lines.append(f"| {row['label']} | {row['median']:.3f} | {ratio} | {row['bleu']:.2f} | {_identity_cell(row)} |"
                     + (latency or (" |" if online else "")))
    return "\n".join(lines)


def why_rows(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The breakdown of every row that counts its iterations, against its reference row's steps where that row took
    one step a token (greedy at batch 1: its steps are the row's greedy steps): calls, tokens a call (greedy's
    steps / calls), a call's time and its ratio to one reference step, the draft's and the
    verification's shares and the rest (speculative: the refill and Python, spread over the calls); ``ratio`` =
    ``call_ratio`` / ``tokens_per_call`` (the table's ratio)."""
    by = {row["label"]: row for row in rows}
    out = []
    for row in rows:
        stats, ref = row.get("stats") or {}, by.get(row.get("reference") or "")
        if not stats.get("iterations") or ref is None or ref is row:
            continue
        if (ref.get("stats") or {}).get("timesteps") != stats["greedy_steps"]:  # not one step a token (batch 1)
            continue
        calls, ref_step = stats["iterations"], ref["median"] / ref["stats"]["timesteps"]
        call = row["median"] / calls
        entry = {"label": row["label"], "reference": ref["label"], "calls": int(calls),
                 "tokens_per_call": stats["greedy_steps"] / calls, "call_us": 1e6 * call,
                 "reference_step_us": 1e6 * ref_step, "call_ratio": call / ref_step}
        entry["ratio"] = entry["call_ratio"] / entry["tokens_per_call"]
        if "block_runs" in stats:  # --jacobi-parallel auto: the sentence runs the gate gave blocks
            entry.update(block_runs=int(stats["block_runs"]), gated_runs=int(stats["block_runs"] + stats["single_runs"]))
        if "draft_share" in stats:
            entry.update(draft_us=1e6 * stats["draft_share"] * call, verify_us=1e6 * stats["verify_share"] * call)
            # the rest: what a sentence costs besides its calls (the refill: encoders, slots; Python), spread over them
            entry["rest_us"] = entry["call_us"] - entry["draft_us"] - entry["verify_us"]
        out.append(entry)
    return out


def format_why(rows: List[Dict[str, Any]]) -> str:
    """The markdown table of :func:`why_rows` (empty when no row counts its iterations)."""
    if not rows:
        return ""
    lines = ["why: ratio = a call's cost (× one step of the reference row) / tokens a call", "",
             "| row | calls | tokens a call | a call, µs | × a reference step (µs) | of a call: draft / verification / "
             "the rest, µs | ratio |", "|---|---|---|---|---|---|---|"]
    for w in rows:
        split = f"{w['draft_us']:.0f} / {w['verify_us']:.0f} / {w['rest_us']:.0f}" if "draft_us" in w else ""
        gated = f" (blocks in {w['block_runs']} of {w['gated_runs']} runs)" if "gated_runs" in w else ""
        lines.append(f"| {w['label']}{gated} | {w['calls']} | {w['tokens_per_call']:.2f} | {w['call_us']:.0f} | "
                     f"{w['call_ratio']:.2f}× {w['reference']} ({w['reference_step_us']:.0f}) | {split} | "
                     f"{w['ratio']:.2f}× |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------------------------------------------
def cpu_name() -> str:
    """lscpu's model name and the widest integer-dot-product instructions: "AMD EPYC (AVX-512 VNNI)"."""
    name = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
    except OSError:  # no lscpu: /proc/cpuinfo names it too
        pass
    flags = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and not name:
                    name = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = ("AVX-512 VNNI" if "avx512_vnni" in flags else "AVX-512" if "avx512f" in flags
           else "AVX2" if "avx2" in flags else "no AVX2")
    return f"{name or 'unknown CPU'} ({isa})"


def _revision() -> Optional[str]:
    """The commit measured, ``+dirty`` where tracked files differ from it (a figure must name what ran)."""
    try:
        head = subprocess.run(["git", "-C", REPO_DIR, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        if not head:
            return None
        changed = subprocess.run(["git", "-C", REPO_DIR, "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True)
    except OSError:
        return None
    return head + ("+dirty" if changed.returncode == 0 and changed.stdout.strip() else "")


# ---------------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], metavar="DIR",
                        help="a model folder (repeatable; default: the demo folder)")
    parser.add_argument("--limit", type=int, default=300, help="test sentences per model (default 300)")
    parser.add_argument("--rows", default=None,
                        help=f"comma-separated presets: {', '.join(PRESETS)} (default: batch1,k5; none with --run)")
    parser.add_argument("--run", action="append", default=[], metavar="'LABEL=OPTIONS'",
                        help="a row of your own: fairseq-generate options after the harness's, after environment "
                        "assignments as a shell takes them ('LABEL=VAR=1 --beam 1'; repeatable)")
    parser.add_argument("--identical", action="append", default=[], metavar="'ROW=OTHER'",
                        help="row ROW must give the outputs of row OTHER (the presets mark their own; repeatable)")
    parser.add_argument("--skip", action="append", default=[], metavar="LABEL",
                        help="a preset row not to run, by its label (e.g. 'speculative-beam k=50'; repeatable)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row, interleaved; the table gives the median")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every run (default 1)")
    parser.add_argument("--isa", choices=tuple(ISA_ENV), default="native",
                        help="avx2: every row's libraries (our kernels, PyTorch, MKL, oneDNN, CTranslate2) limited to "
                        "AVX2, to see on an AVX-512 machine what an AVX2-only CPU runs (default: native)")
    parser.add_argument("--json", default=None, help="write every row (commands and times included) here")
    return parser


def check_args(args: argparse.Namespace) -> Tuple[List[ModelDir], List[str]]:
    """Everything checkable before the first run: counts, presets, the folders, the output path."""
    for flag, value in (("--limit", args.limit), ("--repeats", args.repeats), ("--threads", args.threads)):
        if value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    presets = [p.strip() for p in (args.rows if args.rows is not None else ("" if args.run else "batch1,k5")).split(",")
               if p.strip()]
    for name in presets:
        if name not in PRESETS:
            raise UsageError(f"--rows {name!r}: no such preset; choose from {', '.join(PRESETS)}")
    if not presets and not args.run:
        raise UsageError("no rows: give --rows PRESETS or --run 'LABEL=OPTIONS'")
    models = [load_model_dir(path) for path in (args.model or [find_demo_dir()])]
    for model in models:  # labels, --identical pairs: before the first run, not after a model's runs
        rows_for(model, presets, args.run, None, args.identical, args.skip)
    if args.json:
        inputs = [item for model in models for item in model.inputs()]
        try:
            check_output_path(args.json, "--json", inputs=inputs)
        except FairseqStreamError as exc:
            raise UsageError(str(exc)) from None
    return models, presets


def bench_model(model: ModelDir, args: argparse.Namespace, presets: List[str], log: Callable[[str], None]
                ) -> Dict[str, Any]:
    """Binarize one model's test sentences, run its rows, print its table; its part of the JSON."""
    sources, references = read_test(model, args.limit)
    with tempfile.TemporaryDirectory(prefix="user_bench_") as work:
        data = os.path.join(work, "data")
        tokens = binarize(model, sources, references, data)
        ct2 = prepare_ct2(model, work, [p for p in presets if p in CT2_PRESETS], args.threads)
        rows, skipped = rows_for(model, presets, args.run, ct2, args.identical, args.skip)
        commands = row_commands(model, data, rows, tokens, work, sources)
        results = measure(model, rows, commands, len(sources), args.repeats, args.threads, log, args.isa)
    table = summarise(rows, commands, results, references)
    print(format_table(model, table, args.repeats))
    why = why_rows(table)
    if why:
        print("\n" + format_why(why))
    for line in skipped:
        print(f"\nleft out: {line}")
    print("\ncommands (the data folder was temporary):")
    for row in table:
        print(f"- {row['label']}: `{row['command']}`")
    print()
    return {"model": model.path, "source_lang": model.source_lang, "target_lang": model.target_lang,
            "sentences": len(sources), "rows": table, "why": why, "left_out": skipped}


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    from fairseq_stream.integration.compat import install_excepthook

    install_excepthook()
    with usage_errors():
        models, presets = check_args(args)
    cpu = cpu_name()
    if args.isa != "native":  # the figures are this CPU's, running the other instruction set's code
        cpu += f", run as {args.isa.upper()} only (" + " ".join(f"{k}={v}" for k, v in ISA_ENV[args.isa].items()) + ")"
    machine = {"cpu": cpu, "isa": args.isa, "omp_num_threads": args.threads, "repeats": args.repeats, "limit": args.limit,
               "revision": _revision(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "command": shlex.join(["python", "-m", "fairseq_stream.tools.user_bench",
                                      *(sys.argv[1:] if argv is None else argv)]),
               "timing": "cold: a fresh fairseq-generate process per run, its own 'Translated ... in Xs' timer "
                         "(online rows: fairseq-interactive's 'translation time')"}
    print(f"CPU: {machine['cpu']}; torch threads in every run: {args.threads} (OMP_NUM_THREADS); "
          f"{args.repeats} fresh process(es) per row, interleaved; revision {machine['revision'] or 'unknown'}\n")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if ISA_ENV[args.isa]:  # the kernels of this instruction set, before the first timed run (~40 s each)
        prebuild_kernels(dict(os.environ, **ISA_ENV[args.isa]), log)
    found = [bench_model(model, args, presets, log) for model in models]
    if args.json:
        write_text_checked(args.json, json.dumps({"meta": machine, "models": found}, indent=2, ensure_ascii=False),
                           "--json")


if __name__ == "__main__":
    main()
