#!/usr/bin/env python
"""fairseq's beam, our strategies (float32 and ``--quantize int8``) and CTranslate2, in one process.

    pip install -e .[bench]    # ctranslate2==4.8.5
    OMP_NUM_THREADS=1 python scripts/bench/bench_vs_ctranslate2.py --limit 300 --limit-k50 60 --json out.json
    OMP_NUM_THREADS=1 python scripts/bench/bench_vs_ctranslate2.py --deltas 1 1.25 --prune-auto   # more var-stream rows
    python scripts/bench/bench_vs_ctranslate2.py --device cuda --limit 300 --limit-k50 60   # on a GPU

``--device cuda``: the model in float16, our rows with ``--step-mode graph`` (and var-stream eager
beside it), CTranslate2 with ``compute_type`` float16 and int8_float16 on the same GPU. Where
CTranslate2 cannot run (not installed, or its CUDA libraries missing: its wheels link CUDA 12's
cuBLAS), its rows are listed with the error instead of a time, and the other rows go on.

The demo model (``user_dir_examples/demo``, es→en) is converted with CTranslate2's fairseq
converter into a temporary folder (not timed), then every system decodes the same sentences
with one thread (``torch.set_num_threads(1)``; CTranslate2 ``intra_threads=1, inter_threads=1``)
at beam k=5 (``--limit`` sentences) and k=50 (``--limit-k50``). Each row is warmed up once,
untimed, on a few sentences, then timed ``--repeats`` times round-robin (a busy machine slows
all rows alike); the table gives the median decode time (encoding and decoding only: no model
loading, conversion, tokenisation or detokenisation), its ratio to fairseq's beam, the
process's CPU time over the same call (``time.process_time``: on a machine shared with other
jobs it counts the decode's own work, not the time it waited for a core), BLEU
(sacrebleu, detokenised output against the reference) and how many outputs are identical to
fairseq's beam. CTranslate2 gets the BPE'd source tokens our pipeline feeds fairseq
(:mod:`fairseq_stream.tools.text`), fairseq's length limit (200 tokens) and length penalty (1.0), and
its output goes through the same BPE removal and detokenisation as ours. ``--smoke``: a few
sentences, one repeat (the test).

Its own timing loop, not the harness's (``python -m fairseq_stream.tools.bench``, the one benchmarking
entry point): the harness decodes through a fairseq-stream session only, and here CTranslate2's
rows interleave with ours and are timed by the same clock and CPU time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from fairseq_stream.tools.demo_files import find_demo_dir  # noqa: E402
from fairseq_stream.errors import FairseqStreamError  # noqa: E402

DEMO = find_demo_dir()
WARMUP_SENTENCES = 8
#: fairseq's defaults, which CTranslate2 is given too: max_len_a = 0, max_len_b = 200, lenpen 1.
MAX_LEN = 200


@dataclass
class System:
    """One row: ``decode(sentences) -> detokenised outputs`` (timed inside, see :func:`_timed`)."""

    label: str
    decode: Callable[[Sequence[int]], Tuple[List[str], float, float]]
    why_not: Optional[str] = None  # a row that could not run: why (no time, no BLEU)


def ours(session: Any, dataset_for: Callable[[Sequence[int]], Any], label: str, search: str, k: int,
         opts: Dict[str, Any]) -> System:
    """A fairseq-stream (or fairseq ``beam``) row; the time is the session's decode wall time."""
    def decode(ids: Sequence[int]) -> Tuple[List[str], float, float]:
        dataset = dataset_for(ids)
        cpu = time.process_time()
        result = session.translate(dataset, search=search, gen={"beam": k}, opts=opts)
        return result.strings, result.stats.wall_seconds, time.process_time() - cpu

    return System(label, decode)


def ctranslate2_row(model_dir: str, compute_type: str, tokens: List[List[str]], k: int, batch: int,
                    detok: Callable[[List[str]], str], device: str = "cpu") -> System:
    import ctranslate2

    threads = dict(intra_threads=1, inter_threads=1) if device == "cpu" else {}
    translator = ctranslate2.Translator(model_dir, device=device, compute_type=compute_type, **threads)
    if device != "cpu":  # CUDA libraries load at the first translation (the H200 run: libcublas.so.12)
        translator.translate_batch(tokens[:1], beam_size=1, max_decoding_length=2)

    def decode(ids: Sequence[int]) -> Tuple[List[str], float, float]:
        source = [tokens[i] for i in ids]
        start, cpu = time.perf_counter(), time.process_time()
        out = translator.translate_batch(source, beam_size=k, max_batch_size=batch, batch_type="examples",
                                         length_penalty=1.0, max_decoding_length=MAX_LEN, num_hypotheses=1)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return [detok(r.hypotheses[0]) for r in out], wall, cpu

    return System(f"CTranslate2 {compute_type}", decode)


def convert(checkpoint: str, data_dir: str, out_dir: str, source_lang: str, target_lang: str) -> None:
    """CTranslate2's fairseq converter, in a subprocess (it sets fairseq up its own way)."""
    code = "import sys; from ctranslate2.converters.fairseq import main; sys.argv[0] = 'ct2-fairseq-converter'; main()"
    args = [sys.executable, "-c", code, "--model_path", checkpoint, "--data_dir", data_dir, "--source_lang",
            source_lang, "--target_lang", target_lang, "--unsafe_deserialization", "--output_dir", out_dir, "--force"]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no message"]
        raise FairseqStreamError(f"ct2-fairseq-converter failed on {checkpoint}: {tail[0]}")


def unavailable(label: str, why: str) -> System:
    """A row that could not run: listed with ``why`` instead of a time."""
    def decode(ids: Sequence[int]) -> Tuple[List[str], float, float]:
        raise FairseqStreamError(why)

    return System(label, decode, why)


def ctranslate2_rows(model_dir: Optional[str], compute_types: Sequence[str], tokens: List[List[str]], k: int,
                     batch: int, detok: Callable[[List[str]], str], device: str) -> List[System]:
    """CTranslate2's rows; on a GPU, one that cannot load says why (the library it asked for)."""
    rows = []
    for ct in compute_types:
        try:
            if model_dir is None:
                raise FairseqStreamError("CTranslate2 is not installed (pip install .[bench])")
            rows.append(ctranslate2_row(model_dir, ct, tokens, k, batch, detok, device))
        except Exception as error:  # noqa: BLE001  (a missing CUDA library is an OSError/RuntimeError)
            if device == "cpu" and model_dir is not None:
                raise
            rows.append(unavailable(f"CTranslate2 {ct}", f"{type(error).__name__}: {str(error).splitlines()[0]}"))
    return rows


def gpu_systems(session: Any, dataset_for: Callable[[Sequence[int]], Any], k: int) -> List[System]:
    """Our best GPU rows: the static step replayed as CUDA graphs (var-stream also eager, beside it)."""
    return [ours(session, dataset_for, "fixed-ours [graph]", "fixed-ours", k, {"step_mode": "graph"}),
            ours(session, dataset_for, "fixed-ours (fairseq finalize) [graph]", "fixed-ours", k,
                 {"beam_finalize": "fairseq", "step_mode": "graph"}),
            ours(session, dataset_for, "var-stream [eager]", "var-stream", k, {"step_mode": "eager"}),
            ours(session, dataset_for, "var-stream [graph]", "var-stream", k, {"step_mode": "graph"})]


def systems_for(session: Any, model_dir: Optional[str], tokens: List[List[str]], k: int, batch: int,
                dataset_for: Callable[[Sequence[int]], Any], deltas: Sequence[float] = (),
                scales: Sequence[float] = (), device: str = "cpu", prune_auto_rows: bool = False) -> List[System]:
    """fairseq's beam first (the reference), then ours in float32 and int8 (``var-stream`` at its default, each
    sentence pruned by its own search, also at each δ of ``deltas``, each α of ``scales`` and, with
    ``prune_auto_rows``, steering its pruning: ``--prune-auto``),
    then CTranslate2; on a GPU ours in float16 as graphs (:func:`gpu_systems`) and CTranslate2
    float16 / int8_float16."""
    from fairseq.data.data_utils import post_process

    from fairseq_stream.integration.text import detokenize

    def detok(subwords: List[str]) -> str:
        return detokenize(post_process(" ".join(subwords), "subword_nmt"), session.target_lang)

    rows = [ours(session, dataset_for, "fairseq beam", "beam", k, {})]
    if device == "cuda":
        return rows + gpu_systems(session, dataset_for, k) + ctranslate2_rows(
            model_dir, ("float16", "int8_float16"), tokens, k, batch, detok, device)
    variants = [("fixed-ours", "fixed-ours", {}),
                ("fixed-ours (fairseq finalize)", "fixed-ours", {"beam_finalize": "fairseq"}),
                ("var-stream", "var-stream", {})]
    variants += [(f"var-stream δ {delta:g}", "var-stream", {"prune_abs_threshold": delta}) for delta in deltas]
    variants += [(f"var-stream α {scale:g}", "var-stream", {"prune_abs_scale": scale}) for scale in scales]
    if prune_auto_rows:
        variants.append(("var-stream --prune-auto", "var-stream", {"prune_auto": True}))
    for quantize in ("none", "int8"):
        for label, search, opts in variants:
            name = label + (" int8" if quantize == "int8" else "")
            rows.append(ours(session, dataset_for, name, search, k, dict(opts, quantize=quantize)))
    # what --cpu-matmul auto (oneDNN) gives the exact row, against PyTorch's default sgemm
    rows.append(ours(session, dataset_for, "fixed-ours (fairseq finalize) --cpu-matmul torch", "fixed-ours", k,
                     {"beam_finalize": "fairseq", "cpu_matmul": "torch"}))
    return rows + ctranslate2_rows(model_dir, ("float32", "int8"), tokens, k, batch, detok, device)


def measure(rows: List[System], n: int, repeats: int, references: List[str], log: Callable[[str], None],
            k: int) -> List[Dict[str, Any]]:
    """Warm every row up (untimed), then time them round-robin; one result dict per row."""
    import sacrebleu

    ids = list(range(n))
    missing = [{"system": row.label, "k": k, "sentences": n, "unavailable": row.why_not} for row in rows if row.why_not]
    rows = [row for row in rows if not row.why_not]
    if not rows:
        return missing
    for row in rows:
        row.decode(ids[:WARMUP_SENTENCES])
    walls: Dict[str, List[float]] = {row.label: [] for row in rows}
    cpus: Dict[str, List[float]] = {row.label: [] for row in rows}
    outputs: Dict[str, List[str]] = {}
    for r in range(repeats):
        for row in rows:
            outputs[row.label], wall, cpu = row.decode(ids)
            walls[row.label].append(wall)
            cpus[row.label].append(cpu)
            log(f"  k={k} repeat {r + 1}/{repeats} {row.label}: {wall:.2f}s ({cpu:.2f}s CPU)")
    reference_row = outputs[rows[0].label]
    base = statistics.median(walls[rows[0].label])
    base_cpu = statistics.median(cpus[rows[0].label])
    results = []
    for row in rows:
        median, cpu = statistics.median(walls[row.label]), statistics.median(cpus[row.label])
        results.append({
            "system": row.label, "k": k, "sentences": n, "seconds": median, "walls": walls[row.label],
            "ratio": median / base if base else 0.0, "cpu_seconds": cpu, "cpus": cpus[row.label],
            "cpu_ratio": cpu / base_cpu if base_cpu else 0.0,
            "bleu": sacrebleu.corpus_bleu(outputs[row.label], [references[:n]]).score,
            "identical": sum(a == b for a, b in zip(outputs[row.label], reference_row)),
        })
    return results + missing


def format_table(results: List[Dict[str, Any]]) -> str:
    lines = ["| system | k | sentences | decode s (median) | × fairseq beam | CPU s (median) | × fairseq beam (CPU) "
             "| BLEU | identical to fairseq beam |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.get("unavailable"):
            lines.append(f"| {r['system']} | {r['k']} | {r['sentences']} | not run: {r['unavailable']} |  |  |  |  |  |")
            continue
        lines.append(f"| {r['system']} | {r['k']} | {r['sentences']} | {r['seconds']:.2f} | {r['ratio']:.2f} | "
                     f"{r['cpu_seconds']:.2f} | {r['cpu_ratio']:.2f} | {r['bleu']:.2f} | {r['identical']}/{r['sentences']} |")
    return "\n".join(lines)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and sentences a script decodes (the demo's by default; the files' suffixes are the
    languages): ``--data``, ``--path``, ``--bpe-codes``, ``--src``, ``--ref`` (also time_breakdown.py's)."""
    parser.add_argument("--data", default=DEMO, help="directory with dict.SRC.txt and dict.TGT.txt")
    parser.add_argument("--path", default=os.path.join(DEMO, "checkpoint.pt"), help="one fairseq checkpoint")
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO, "test.es"))
    parser.add_argument("--ref", default=os.path.join(DEMO, "test.en"))


def load_model(args: argparse.Namespace, limit: int) -> Tuple[Any, List[str], Any]:
    """The float32 CPU session of :func:`add_model_arguments`' model, the first ``limit`` ``--src`` lines and
    their dataset (time_breakdown.py's and step_profile.py's)."""
    from fairseq_stream.tools.session import TranslationSession

    src_lang, tgt_lang = languages(args)
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes,
                                      extra_args=["--source-lang", src_lang, "--target-lang", tgt_lang])
    with open(args.src, encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f][:limit]
    return session, sources, session.encode(sources)


def languages(args: argparse.Namespace) -> Tuple[str, str]:
    """(source, target) language: the suffixes of ``--src`` and ``--ref``."""
    return os.path.splitext(args.src)[1].lstrip("."), os.path.splitext(args.ref)[1].lstrip(".")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--limit", type=int, default=300, help="sentences decoded at k=5")
    parser.add_argument("--limit-k50", type=int, default=60, help="sentences decoded at k=50 (0 = skip k=50)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ct2-batch-size", type=int, default=64,
                        help="CTranslate2's max_batch_size (examples; our strategies keep 64 sentences in flight)")
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: float16, our rows as CUDA graphs, CTranslate2 float16 / int8_float16 on the GPU")
    parser.add_argument("--smoke", action="store_true", help="6 sentences at k=5, 2 at k=50, one repeat")
    parser.add_argument("--deltas", type=float, nargs="*", default=[],
                        help="more var-stream rows (float32 and int8), one per pruning threshold δ")
    parser.add_argument("--scales", type=float, nargs="*", default=[],
                        help="more var-stream rows (float32 and int8), one per --prune-abs-scale α")
    parser.add_argument("--prune-auto", action="store_true", dest="prune_auto_rows",
                        help="more var-stream rows (float32 and int8) with --prune-auto, which steers the pruning "
                        "as the run goes (opt-in; the var-stream rows prune each sentence by its own search)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    if args.smoke:
        args.limit, args.limit_k50, args.repeats = 6, 2, 1
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_vs_ctranslate2.py: --device cuda: torch sees no GPU")
    torch.set_num_threads(1)
    from fairseq_stream.integration.compat import install_excepthook
    from fairseq_stream.tools.bench import read_lines
    from fairseq_stream.tools.session import TranslationSession

    install_excepthook()
    src_lang, tgt_lang = languages(args)
    cuda = args.device == "cuda"
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes,
                                      extra_args=["--source-lang", src_lang, "--target-lang", tgt_lang],
                                      cpu=not cuda, dtype=torch.float16 if cuda else None)
    n = max(args.limit, args.limit_k50)
    sources, references = read_lines(args.src, n), read_lines(args.ref, n)
    tokens = [session.source_text(line).split() for line in sources]
    dataset = session.encode(sources)

    def dataset_for(ids: Sequence[int]) -> Any:
        return session.task.build_dataset_for_inference([dataset.src[i] for i in ids],
                                                        [int(dataset.src_sizes[i]) for i in ids])

    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    results: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as converted:
        model_dir: Optional[str] = converted
        try:
            convert(args.path, args.data, converted, src_lang, tgt_lang)
        except FairseqStreamError as error:
            if not cuda:
                raise
            model_dir = None
            log(f"bench_vs_ctranslate2.py: CTranslate2 rows left out: {error}")
        for k, n in ((5, args.limit), (50, args.limit_k50)):
            if n > 0:
                rows = systems_for(session, model_dir, tokens, k, args.ct2_batch_size, dataset_for, args.deltas,
                                   args.scales, device=args.device, prune_auto_rows=args.prune_auto_rows)
                results += measure(rows, min(n, len(sources)), args.repeats, references, log, k)
    print(format_table(results))
    if args.json:
        meta = {"repeats": args.repeats, "threads": 1, "ct2_batch_size": args.ct2_batch_size, "device": args.device,
                "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": results}, f, indent=2)


if __name__ == "__main__":
    main()
