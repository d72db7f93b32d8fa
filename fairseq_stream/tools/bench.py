"""Benchmark harness: decoding strategies side by side, in one process, interleaved and repeated.

    python -m fairseq_stream.tools.bench --data DIR --path ckpt.pt --bpe-codes codes \\
        --src test.es --ref test.en --run beam:beam=5 --run beam:beam=50 --run beam:beam=1

Each ``--run`` is ``SEARCH[:key=value,...]``; a key is a fairseq generation option
(``beam``, ``lenpen``, ``max_len_b``, ...) or a fairseq-stream decoding option (see
``--help`` of fairseq-generate with ``--user-dir fairseq_stream``); ``label=...`` names the
row. The task's options (``data``, ``source_lang``, ...) are the harness's own flags, the same
for every row, and ``search`` is the part before ``:``: as keys they are refused. Each row
first runs ``--warmup`` times untimed (compiles, kernel builds and the output layer's choice
stay out of the timings), then the runs are repeated ``--repeats`` times in round-robin order,
so a noisy machine slows all alike; the table gives the median wall time,
sentences/s, the ratio to the first row, the ratio to our own engine's baseline at the same
beam width (``vs ours``: ``fixed-ours``, at width 1 our greedy; added as a row where none is
given, unless ``--no-own-baselines``) and each strategy's own statistics (Freitag2017's fan-out
per sentence among them), and ``--json`` writes the rows. The default data are the demo's.

Batching follows Yang2020's protocol: fairseq's own ``beam`` (FIXED) decodes batches of
``--batch-size`` sentences (or ``--max-tokens``), while our strategies, which schedule
internally, stream over the whole input and keep ``stream_capacity`` sentences in flight; the
batches are only how they read it. A row with ``stream_per_batch=true`` streams each batch on
its own instead (draining at its end; the behaviour before one stream per run), and
``--pool-size`` then sizes those batches (``0`` = the whole input); without it every row gets
the same batches. ``--device cuda`` runs on the GPU (timed after ``torch.cuda.synchronize()``, and
the cost table, with GPU-busy fraction and kernels per step, is added) and ``--dtype`` casts the
models (``float16``/``bfloat16`` are meant for GPUs). Each row names the backend each fused step
operator ran on (the run's ``step_backends`` statistic, e.g. ``beam_step=cpp``); a row option
``step_backend=...`` chooses it. Bad arguments are one ``fairseq-stream: error:`` line, exit
status 2, before anything is decoded: every row's generator is built first (:func:`check_runs`).

Its figures are **warmed**: one process, the model loaded once, each row warmed up before it is timed,
the session's own clock. That is what A/B work on the engine wants (one-off costs out, small differences
seen); the table says so in a line above it and ``--json`` in ``meta.timing``. A figure a user should be
able to reproduce with their own command comes from ``python -m fairseq_stream.tools.user_bench``
instead: a fresh ``fairseq-generate`` per run, fairseq's own timer, true batch 1 (issue 79).
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import os
import statistics
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, Union

import torch

from fairseq_stream.tools.demo_files import find_demo_dir
from fairseq_stream.errors import FairseqStreamError, UsageError, usage_errors
from fairseq_stream.engine.stats import describe_backends
from fairseq_stream.engine.output_paths import check_output_path, data_files, write_text_checked

DTYPES = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}  # None: as loaded
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_DIR = find_demo_dir()  # the checkout's user_dir_examples/demo, or the installed copy
#: the line above the table (and meta.timing of --json): these figures are not a user's cold command's
WARMED_NOTE = ("warmed: one process, each row warmed up untimed before its timed runs (the user's cold command: "
               "python -m fairseq_stream.tools.user_bench)")


@dataclass
class RunSpec:
    """One row of the table: a strategy and its option overrides."""

    label: str
    search: str
    gen: Dict[str, Any] = field(default_factory=dict)
    opts: Dict[str, Any] = field(default_factory=dict)
    #: label of an earlier row whose output lengths become this row's maximum lengths
    #: (Santilli2023's "ideal condition" for PJ/PGJ: the target length known beforehand)
    length_from: Optional[str] = None


def _coerce(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


#: what a ``--run`` value must look like, per option: "int", "float", "bool", "str" or None (unchecked)
Kinds = Mapping[str, Optional[str]]
_KIND_NAMES = {"int": "an integer", "float": "a number", "bool": "true or false"}


def _kind(tp: Any) -> Optional[str]:
    """The kind of a dataclass field's type (``Optional[int]`` is ``"int"``); None for the rest."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if len(args) == 1 else None
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(tp)  # type: ignore[arg-type]


def option_kinds(config: Any, keys: Iterable[str]) -> Dict[str, Optional[str]]:
    """``keys`` of a fairseq config with the kinds of ``config``'s dataclass fields (None: unknown)."""
    fields = {f.name: _kind(f.type) for f in dataclasses.fields(config)} if config is not None else {}
    return {k: fields.get(k) for k in keys}


def _as_kinds(keys: Union[Sequence[str], Kinds]) -> Kinds:
    return keys if isinstance(keys, Mapping) else {k: None for k in keys}


def _typed(spec: str, key: str, value: str, kind: Optional[str]) -> Any:
    """``value`` as ``kind`` wants it; a value of the wrong kind is a usage error, not a TypeError later."""
    coerced = _coerce(value)
    if kind == "str":
        return value  # "prune_rules=3" stays the string "3"
    ok = {"int": isinstance(coerced, int) and not isinstance(coerced, bool),
          "float": isinstance(coerced, (int, float)) and not isinstance(coerced, bool),
          "bool": isinstance(coerced, bool)}.get(kind or "", True)
    if not ok:
        raise UsageError(f"--run {spec!r}: {key}={value!r} must be {_KIND_NAMES[kind]}")  # type: ignore[index]
    return float(coerced) if kind == "float" else coerced


def _unknown_key(spec: str, key: str, known: Iterable[str]) -> UsageError:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UsageError(f"--run {spec!r}: unknown option {key!r}: neither a fairseq generation option nor a "
                      f"fairseq-stream decoding option (fairseq-generate --user-dir fairseq_stream --help lists "
                      f"both){hint}")


def parse_run(spec: str, gen_keys: Union[Sequence[str], Kinds],
              opt_keys: Union[None, Sequence[str], Kinds] = None, refused: Optional[Dict[str, str]] = None) -> RunSpec:
    """``"var-stream:beam=50,stream_epsilon=0.167,label=vs50"`` → :class:`RunSpec`.

    A key of ``gen_keys`` is a generation option, one of ``opt_keys`` a decoding option (the task
    config's, e.g. ``step_backend``); with ``opt_keys`` None every other key is taken as a decoding
    option unchecked. Given as mappings to kinds (:func:`option_kinds`), the values are checked too.
    Any other key is refused, with ``refused[key]`` as the reason where given (formatted with
    ``key`` and ``item``, the ``key=value`` text), else with the keys that exist.
    """
    search, _, rest = spec.partition(":")
    run = RunSpec(label=spec, search=search.strip())
    gen, opt = _as_kinds(gen_keys), (None if opt_keys is None else _as_kinds(opt_keys))
    previous = ""
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            hint = "; a label cannot contain ',' (use ';' or spaces)" if previous == "label" else ""
            raise UsageError(f"--run {spec!r}: expected key=value, got {item!r}{hint}")
        key = previous = key.strip().replace("-", "_")
        if key == "label":
            run.label = value
        elif key == "length_from":
            run.length_from = value
        elif key in gen:
            run.gen[key] = _typed(spec, key, value, gen[key])
        elif opt is None or key in opt:
            run.opts[key] = _typed(spec, key, value, None if opt is None else opt[key])
        elif refused and key in refused:
            raise UsageError(f"--run {spec!r}: " + refused[key].format(key=key, item=item))
        else:
            raise _unknown_key(spec, key, [*gen, *opt, "label", "length_from"])
    return run


#: our own engine's baseline: the fixed beam (FIXED-OURS), at width 1 our greedy
OWN_BASELINE = "fixed-ours"


def _beam(run: RunSpec, default_beam: int) -> int:
    return int(run.gen.get("beam", default_beam))


def own_baselines(runs: List[RunSpec], default_beam: int) -> List[RunSpec]:
    """``runs`` and, for every beam width they time, our own engine's fixed beam at that width
    (``fixed-ours``; at width 1 our greedy) where no row is one already, so that every speed
    comparison has a baseline from the engine it measures beside fairseq's. Each added row
    takes the ``stream_capacity`` of the first of our rows at its width. Runs of IBDecoder
    checkpoints (``ib-beam``) get none: ``fixed-ours`` does not decode those models."""
    from fairseq_stream.search.registry import get_search

    if any(get_search(r.search).capabilities.models != "standard" for r in runs):
        return list(runs)
    widths: Dict[int, Optional[int]] = {}
    for run in runs:
        capacity = run.opts.get("stream_capacity") if run.search != "beam" else None
        width = _beam(run, default_beam)
        if widths.get(width) is None:
            widths[width] = capacity
    have = {_beam(r, default_beam) for r in runs if r.search == OWN_BASELINE}
    added = []
    for width, capacity in widths.items():
        if width in have:
            continue
        label = "ours greedy (fixed-ours k=1)" if width == 1 else f"ours fixed (fixed-ours k={width})"
        opts = {} if capacity is None else {"stream_capacity": capacity}
        added.append(RunSpec(label, OWN_BASELINE, gen={"beam": width}, opts=opts))
    return list(runs) + added


def own_ratios(runs: List[RunSpec], rows: List[Dict[str, Any]], default_beam: int) -> None:
    """``row["vs_ours"]``: each row's median wall time over that of our fixed beam at its width
    (the first ``fixed-ours`` row at that width; None where there is none)."""
    base: Dict[int, float] = {}
    for run, row in zip(runs, rows):
        if run.search == OWN_BASELINE:
            base.setdefault(_beam(run, default_beam), row["wall_median"])
    for run, row in zip(runs, rows):
        wall = base.get(_beam(run, default_beam))
        row["vs_ours"] = row["wall_median"] / wall if wall else None


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def read_lines(path: str, limit: Optional[int]) -> List[str]:
    """The first ``limit`` lines of a UTF-8 text file (all for ``None`` or 0), without newlines."""
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def _stat_columns(rows: List[Dict[str, Any]]) -> List[str]:
    wanted = ["timesteps", "expansions", "expansions_per_step", "fanout_per_step", "fanout_per_sentence",
              "mean_active_sentences", "iteration_speedup"]
    return [c for c in wanted if any(r["stats"].get(c) for r in rows)]


def _mean_sd(walls: List[float]) -> str:
    """``mean ± sd`` of the timed runs; the mean alone after one run, which has no spread."""
    mean = f"{statistics.mean(walls):.2f}"
    return f"{mean} ± {statistics.stdev(walls):.2f}" if len(walls) > 1 else mean


def format_table(rows: List[Dict[str, Any]]) -> str:
    """The Markdown table of a benchmark run."""
    stat_cols = _stat_columns(rows)
    backends = any(r.get("step_backends") for r in rows)  # the column once a row reports its operators
    own = any(r.get("vs_ours") is not None for r in rows)  # the ratio to our own fixed beam / greedy
    head = ["strategy", "BLEU", "wall s (median)", "wall s (mean ± sd)", "sent/s", "ratio"] + (["vs ours"] if own else [])
    head += [c.replace("_", " ") for c in stat_cols]
    head += ["step backends"] if backends else []
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for row in rows:
        cells = [
            row["label"],
            f"{row['bleu']:.2f}",
            f"{row['wall_median']:.2f}",
            _mean_sd(row["walls"]),
            f"{row['sentences_per_second']:.1f}",
            f"{row['ratio']:.2f}",
        ] + ([_cell(row.get("vs_ours"), ".2f")] if own else [])
        for c in stat_cols:
            v = row["stats"].get(c)
            digits = 3 if c == "iteration_speedup" else 2 if c == "fanout_per_step" else 1  # a few percent matter here
            cells.append("—" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v)))
        if backends:
            cells.append(format_backends(row.get("step_backends", {})))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def batching(run: RunSpec, n: int, *, max_tokens: Optional[int], batch_size: Optional[int],
             pool_size: Optional[int]) -> Dict[str, Optional[int]]:
    """The batch iterator's limits for ``run`` over ``n`` sentences (see the module docstring)."""
    if pool_size is None or run.search == "beam":
        return {"max_tokens": max_tokens, "batch_size": batch_size}
    # Our strategies batch internally (stream_capacity): the iterator's batch is only their
    # pool, so it is not cut to a multiple of 8 (a pool of 12 would otherwise be 8 + 4).
    return {"max_tokens": None, "batch_size": pool_size or max(n, 1), "required_batch_size_multiple": 1}


def translate_with_lengths(session: Any, dataset: Any, run: RunSpec, opts: Dict[str, Any],
                           reference: Any, **kwargs: Any) -> Any:
    """Translate with each sentence's maximum length set to its output length in ``reference``.

    fairseq's maximum length is ``a·|x| + b`` for a whole batch, so sentences are decoded in
    groups of equal oracle length (``a = 0``, ``b`` = length without EOS); the wall time and
    statistics are the groups' sums, computed outside the reference row's timing.
    """
    from fairseq_stream.tools.session import TranslationResult
    from fairseq_stream.engine.stats import DecodeStats

    groups: Dict[int, List[int]] = {}
    for i, hypos in enumerate(reference.hypos):
        groups.setdefault(int(hypos[0]["tokens"].numel()), []).append(i)
    hypos: List[Any] = [None] * len(dataset)
    stats = DecodeStats()
    for length, ids in sorted(groups.items()):
        subset = session.task.build_dataset_for_inference([dataset.src[i] for i in ids],
                                                          [int(dataset.src_sizes[i]) for i in ids])
        gen = dict(run.gen, max_len_a=0, max_len_b=max(length - 1, 1))
        part = session.translate(subset, search=run.search, gen=gen, opts=opts, postprocess=False, **kwargs)
        for i, h in zip(ids, part.hypos):
            hypos[i] = h
        stats.merge(part.stats)
    result = TranslationResult(hypos=hypos, stats=stats)
    result.strings = [session.detokenize(h[0]["tokens"]) for h in hypos]
    return result


def _translate(session: Any, dataset: Any, run: RunSpec, opts: Dict[str, Any], limits: Dict[str, Any],
               results: Dict[int, Any], labels: List[str], progress: bool) -> Any:
    """One decoding pass of ``run`` (``results`` holds the rows decoded so far, for ``length_from``)."""
    if run.length_from is not None:
        reference = results[labels.index(run.length_from)]
        return translate_with_lengths(session, dataset, run, opts, reference, **limits)
    return session.translate(dataset, search=run.search, gen=run.gen, opts=opts, progress=progress, **limits)


def run_benchmark(
    session: Any,
    sources: List[str],
    references: List[str],
    runs: List[RunSpec],
    *,
    repeats: int = 3,
    warmup: int = 1,
    max_tokens: Optional[int] = None,
    batch_size: Optional[int] = None,
    pool_size: Optional[int] = None,
    progress: bool = True,
    log=print,
    trace_dir: Optional[str] = None,
) -> List[Dict[str, Any]]:
    """Run every spec ``warmup`` times untimed, then ``repeats`` times timed, round-robin; one row per spec.

    The warm-up passes keep one-off costs out of the timings: Triton's compiles, C++ kernel
    builds, the output layer's measured choice, the allocator's first growth. Each timed pass is
    :meth:`TranslationSession.translate`'s wall time, read after ``torch.cuda.synchronize()`` on
    CUDA at both ends. ``batch_size``/``max_tokens`` batch fairseq's ``beam``; with ``pool_size``
    (0 = all) our strategies read the input in batches of that many sentences instead. With
    ``trace_dir`` each of our strategies also records its per-step active batch (last timed pass),
    written as ``trace_dir/LABEL.json`` (for ``scripts/papers/plot_occupancy.py``).
    """
    if repeats < 1 or warmup < 0:
        raise FairseqStreamError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    dataset = session.encode(sources)
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
    walls: Dict[int, List[float]] = {i: [] for i in range(len(runs))}
    results: Dict[int, Any] = {}
    labels = [run.label for run in runs]
    check_length_from(runs)
    limits = [batching(run, len(sources), max_tokens=max_tokens, batch_size=batch_size, pool_size=pool_size)
              for run in runs]
    for w in range(warmup):
        for i, run in enumerate(runs):
            results[i] = _translate(session, dataset, run, dict(run.opts), limits[i], results, labels, progress)
            log(f"  warm-up {w + 1}/{warmup} {run.label}: {results[i].stats.wall_seconds:.2f}s (not timed)")
    for r in range(repeats):
        for i, run in enumerate(runs):
            opts = dict(run.opts)
            if trace_dir and run.search != "beam":
                opts["stream_stats"] = os.path.join(trace_dir, _slug(run.label) + ".json")
            result = _translate(session, dataset, run, opts, limits[i], results, labels, progress)
            if "stream_stats" in opts:  # the session wrote it under the search's name; the plots want the row's
                write_text_checked(opts["stream_stats"], result.stats.to_json(run.label, indent=None), "stream_stats")
            walls[i].append(result.stats.wall_seconds)
            results[i] = result
            log(f"  repeat {r + 1}/{repeats} {run.label}: {result.stats.wall_seconds:.2f}s")
    rows = [_row(run, results[i], walls[i], len(sources), references) for i, run in enumerate(runs)]
    for row in rows:
        row["ratio"] = row["wall_median"] / rows[0]["wall_median"] if rows[0]["wall_median"] else 0.0
    own_ratios(runs, rows, _default_beam(session))
    return rows


def _default_beam(session: Any) -> int:
    """fairseq's --beam of the session (a row without ``beam=`` decodes with it)."""
    try:
        return int(session.cfg.generation.beam)
    except AttributeError:  # a stand-in session without fairseq's config
        return 5


def _row(run: RunSpec, result: Any, walls: List[float], sentences: int, references: List[str]) -> Dict[str, Any]:
    """One table row: quality of ``result``, the median of ``walls``, the run's statistics."""
    import sacrebleu

    wall = statistics.median(walls)
    stats = result.stats.to_dict()
    bleu = sacrebleu.corpus_bleu(result.strings, [references])
    return {
        "label": run.label,
        "search": run.search,
        "gen": run.gen,
        "opts": run.opts,
        "bleu": bleu.score,
        "length_ratio": bleu.sys_len / bleu.ref_len if bleu.ref_len else 0.0,  # hypothesis / reference words
        "wall_median": wall,
        "walls": walls,
        "sentences": sentences,
        "sentences_per_second": sentences / wall if wall else 0.0,
        "stats": stats,
        # which implementation each fused step operator ran on, e.g. {"beam_step": "cpp"}
        "step_backends": dict(stats.get("step_backends") or {}),
        "outputs": result.strings,  # detokenised 1-best, for significance tests; not written to --json
    }


def rows_for_json(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rows without their outputs (kept in memory for significance tests, not written)."""
    return [{k: v for k, v in r.items() if k != "outputs"} for r in rows]


def measure_costs(session: Any, sources: List[str], runs: List[RunSpec], rows: List[Dict[str, Any]], *,
                  device: str = "cpu", max_tokens: Optional[int] = None, batch_size: Optional[int] = None,
                  pool_size: Optional[int] = None) -> None:
    """Add the device-cost columns to ``rows``, from extra (untimed) runs per strategy.

    ``host reads/step`` and ``ops/step`` are counted in the decoding loop (the scheduler's
    steps and the read-out after each pool; fairseq's ``beam`` has no such loop and is
    counted whole, encoder included); ``outside the region`` are the ops/step outside a static
    step's region (a row with ``step_mode=static``: what a CUDA graph replay would not hold, the
    launches around it; all of them for any other row); ``run reads/step`` counts the whole run. ``peak MiB`` is
    the run's peak memory (``max_memory_allocated``, reset per row, on CUDA; the process's
    resident high-water mark on CPU). On CUDA one profiled run gives ``GPU busy`` (kernel time /
    wall time) and ``kernels/step`` (kernels run over the whole run / decoder steps); on CPU
    they are None (shown n/a): nothing there measures them.
    """
    from fairseq_stream.engine.profiling import CostCounter, CostCounts, PeakMemory, count_decoder_steps, gpu_profile

    dataset = session.encode(sources)
    for run, row in zip(runs, rows):
        limits = batching(run, len(sources), max_tokens=max_tokens, batch_size=batch_size, pool_size=pool_size)
        translate = lambda: session.translate(dataset, search=run.search, gen=run.gen, opts=run.opts,  # noqa: E731
                                              postprocess=False, **limits)
        with PeakMemory(device) as peak:
            translate()
        loop = CostCounts()
        with CostCounter() as whole, count_decoder_steps(loop):
            result = translate()
        steps = max(result.stats.timesteps, 1)
        counted = loop if run.search != "beam" else whole.counts
        costs: Dict[str, Optional[float]] = dict(
            counted.per_step(steps), run_reads_per_step=whole.counts.host_reads / steps, peak_mib=peak.mib,
            gpu_busy=None, kernels_per_step=None)
        if device == "cuda":
            prof = gpu_profile(translate)
            costs.update(gpu_busy=prof["gpu_busy"], kernels_per_step=prof["kernels"] / steps)
        row["costs"] = costs


def _cell(value: Optional[float], fmt: str) -> str:
    """A number, or n/a where this device cannot measure it (never a made-up 0)."""
    return "n/a" if value is None else format(value, fmt)


def format_costs(rows: List[Dict[str, Any]]) -> str:
    """The device-cost table of :func:`measure_costs`."""
    head = ["strategy", "host reads/step", "run reads/step", "ops/step", "outside the region", "kernels/step",
            "peak MiB", "GPU busy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for row in rows:
        c = row["costs"]
        cells = [row["label"], f"{c['host_reads_per_step']:.2f}", f"{c['run_reads_per_step']:.2f}",
                 f"{c['ops_per_step']:.1f}", f"{c.get('ops_outside_region_per_step', c['ops_per_step']):.1f}",
                 _cell(c.get("kernels_per_step"), ".1f"), f"{c['peak_mib']:.0f}",
                 _cell(c.get("gpu_busy"), ".0%")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_backends(backends: Mapping[str, Any]) -> str:
    """``{"beam_step": ["cpp"]}`` → ``beam_step=cpp`` (— when the row ran no fused step operator)."""
    return describe_backends(dict(backends))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEMO_DIR, help="directory with dict.SRC.txt and dict.TGT.txt")
    parser.add_argument("--path", default=os.path.join(DEMO_DIR, "checkpoint.pt"), help="checkpoint(s), ':'-separated")
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO_DIR, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO_DIR, "test.es"), help="raw source sentences")
    parser.add_argument("--ref", default=os.path.join(DEMO_DIR, "test.en"), help="raw reference translations")
    parser.add_argument("--source-lang", default=None)
    parser.add_argument("--target-lang", default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N sentences only")
    parser.add_argument("--run", action="append", default=[], help="SEARCH[:key=value,...]; repeatable")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row; the table gives their median")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed runs per row before the timed ones (Triton compiles, kernel builds, the "
                             "output layer's choice); 0 = none; default 1, on --device cuda 2 (a graph row's "
                             "second run still captures the steps whose cache slabs grew in its first)")
    parser.add_argument("--max-tokens", type=int, default=None, help="tokens per batch of fairseq's beam (FIXED)")
    parser.add_argument("--batch-size", type=int, default=None, help="sentences per batch of fairseq's beam (FIXED)")
    parser.add_argument("--pool-size", type=int, default=None,
                        help="batches our strategies read the input in (0 = the whole input; matters for rows "
                             "with stream_per_batch=true); default: the FIXED batches")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="the models' dtype")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--trace-dir", default=None, help="write each strategy's per-step trace here")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--costs", action="store_true",
                        help="also count host reads and aten ops per decoder step, peak memory and (CUDA) GPU busy "
                             "time and kernels per step, in extra untimed runs per strategy (always on with "
                             "--device cuda unless --no-costs)")
    parser.add_argument("--no-costs", action="store_true", help="--device cuda: leave the cost table out")
    parser.add_argument("--no-own-baselines", action="store_true",
                        help="do not add our own engine's fixed beam (fixed-ours, at width 1 our greedy) at every beam "
                             "width the rows time; by default it is added where no row is one, and the 'vs ours' column "
                             "gives each row's time over it, beside 'ratio' (over the first row, usually fairseq's)")
    return parser


def bench_inputs(args: argparse.Namespace) -> List[Tuple[str, str]]:
    """The files the harness reads (``(what, path)``): no output of it may name one."""
    found = [("the checkpoint of --path", p) for p in (args.path or "").split(os.pathsep) if p]
    found += [(flag, path) for flag, path in (("--src", args.src), ("--ref", args.ref), ("--bpe-codes", args.bpe_codes))
              if path]
    return found + [("a file of --data", p) for p in data_files(args.data or "")]


def check_output(flag: str, path: str, args: argparse.Namespace) -> None:
    """Refuse an output file that cannot be written now, not after the whole benchmark ran, or that names a
    file the harness reads (:func:`bench_inputs`; also the frontier's)."""
    try:
        check_output_path(path, flag, inputs=bench_inputs(args))
    except FairseqStreamError as exc:
        raise UsageError(str(exc)) from None


def check_args(args: argparse.Namespace) -> None:
    """The command-line checks argparse cannot express; a :class:`UsageError` before any work."""
    for flag, value, least in (("--repeats", args.repeats, 1), ("--warmup", args.warmup, 0),
                               ("--limit", args.limit, 1), ("--batch-size", args.batch_size, 1),
                               ("--max-tokens", args.max_tokens, 1), ("--pool-size", args.pool_size, 0),
                               ("--threads", args.threads, 1)):
        if value is not None and value < least:
            hint = {"--limit": " (leave it out for every sentence)", "--pool-size": " (0 = the whole input)"}
            raise UsageError(f"{flag} must be >= {least}{hint.get(flag, '')}, got {value}")
    for flag, path in (("--src", args.src), ("--ref", args.ref), ("--bpe-codes", args.bpe_codes)):
        if path and not os.path.isfile(path):
            raise UsageError(f"{flag} {path!r}: no such file")
        if flag != "--bpe-codes" and path and os.path.getsize(path) == 0:  # nothing to time (IndexError later)
            raise UsageError(f"{flag} {path!r} is empty; give a file with one sentence per line")
    if args.json:
        check_output("--json", args.json, args)


def parse_runs(session: Any, specs: Sequence[str]) -> List[RunSpec]:
    """The ``--run`` rows, their keys and values checked against the session's options.

    A key is a fairseq generation option or a fairseq-stream decoding option (the fields of
    :class:`~fairseq_stream.engine.options.StreamDecodingConfig`). The task's other options (``data``,
    ``source_lang``, ``ib_h``, ...) are refused: the model and the data are loaded once for every
    row, so a row's value would be ignored; so is ``search``, which is the part before ``:``."""
    from fairseq.dataclass.configs import GenerationConfig

    from fairseq_stream.engine.options import StreamDecodingConfig
    from fairseq_stream.search.registry import search_names

    decoding = [f.name for f in dataclasses.fields(StreamDecodingConfig) if not f.name.startswith("_")]
    gen = option_kinds(GenerationConfig, session.cfg.generation.keys())
    opt = option_kinds(StreamDecodingConfig, [k for k in decoding if k != "search"])
    task = ("{key} is a task option (the data, the languages, the model), not a generation or decoding option: the "
            "model and data are loaded once for every row, so set it with the harness's own flags "
            "(fairseq-stream-bench --help)")
    refused = {k: task for k in session.cfg.task.keys() if k not in opt and not k.startswith("_")}
    refused["search"] = "the search is the part before ':' (--run beam:beam=5), not a key: drop {item!r}"
    runs = [parse_run(spec, gen, opt, refused) for spec in specs]
    for spec, run in zip(specs, runs):
        if run.search not in search_names():
            raise UsageError(f"--run {spec!r}: unknown search {run.search!r}; valid names: {', '.join(search_names())}")
    return runs


def check_length_from(runs: Sequence[RunSpec], specs: Sequence[str] = (),
                      error: Type[FairseqStreamError] = FairseqStreamError) -> None:
    """Each ``length_from`` names an earlier row's label (its lengths come from that row's result);
    the row is named by its ``--run`` text (``specs[i]``), else its label."""
    labels = [run.label for run in runs]
    for i, run in enumerate(runs):
        if run.length_from is not None and run.length_from not in labels[:i]:
            name = specs[i] if i < len(specs) else run.label
            raise error(f"--run {name!r}: length_from={run.length_from!r} must name an earlier row's label")


def check_runs(session: Any, runs: Sequence[RunSpec], specs: Sequence[str] = ()) -> None:
    """Every row's options checked before the first row decodes: each row's generator is built
    (and dropped) as its decoding will build it, so an impossible value (the validation of
    :mod:`fairseq_stream.engine.validation`), an option its search does not read, or a draft that
    cannot be read is a :class:`UsageError` naming the row (``specs[i]``, else its label)."""
    check_length_from(runs, specs, error=UsageError)
    for i, run in enumerate(runs):
        name = specs[i] if i < len(specs) else run.label
        try:
            session.build_generator(run.search, run.gen, run.opts)
        except FairseqStreamError as exc:
            raise UsageError(f"--run {name!r}: {exc}") from None


def check_row_outputs(args: argparse.Namespace, runs: Sequence[RunSpec], specs: Sequence[str] = ()) -> None:
    """Each row's ``stream_stats`` file, before the first row decodes: not a file the harness reads, not
    ``--json``, not another row's (the session checks that it can be written)."""
    taken = [("--json", args.json)] if args.json else []
    for i, run in enumerate(runs):
        path = run.opts.get("stream_stats")
        if not path:
            continue
        name = specs[i] if i < len(specs) else run.label
        try:
            check_output_path(path, "stream_stats", inputs=bench_inputs(args), outputs=taken)
        except FairseqStreamError as exc:
            raise UsageError(f"--run {name!r}: {exc}") from None
        taken.append((f"the stream_stats of --run {name!r}", path))


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    with usage_errors():
        check_args(args)
    if args.warmup is None:
        args.warmup = 2 if args.device == "cuda" else 1

    from fairseq_stream.integration.compat import install_excepthook
    from fairseq_stream.tools.session import TranslationSession

    install_excepthook()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    # By default the languages are the file extensions of --src and --ref (test.es, test.en).
    source_lang = args.source_lang or os.path.splitext(args.src)[1].lstrip(".")
    target_lang = args.target_lang or os.path.splitext(args.ref)[1].lstrip(".")
    extra = ["--source-lang", source_lang, "--target-lang", target_lang]
    if args.device == "cuda" and not torch.cuda.is_available():
        raise FairseqStreamError("--device cuda: torch sees no GPU (use --device cpu)")
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes, extra_args=extra,
                                      cpu=args.device == "cpu", dtype=DTYPES[args.dtype])
    specs = args.run or ["beam:beam=5"]
    with usage_errors():  # still before any decoding: every row's keys, values and generator
        runs = parse_runs(session, specs)
        if not args.no_own_baselines:
            runs = own_baselines(runs, _default_beam(session))
        check_runs(session, runs, specs)
        check_row_outputs(args, runs, specs)
    sources = read_lines(args.src, args.limit)
    references = read_lines(args.ref, args.limit)
    if len(sources) != len(references):
        raise FairseqStreamError(f"{args.src} has {len(sources)} lines but {args.ref} has {len(references)}")
    print(
        f"{len(sources)} sentences, {len(runs)} strategies x {args.repeats} repeats (+{args.warmup} warm-up), "
        f"{args.device} {args.dtype}, torch threads {torch.get_num_threads()}",
        file=sys.stderr,
    )
    rows = run_benchmark(
        session, sources, references, runs, repeats=args.repeats, warmup=args.warmup, max_tokens=args.max_tokens,
        batch_size=args.batch_size, pool_size=args.pool_size, progress=not args.no_progress,
        log=lambda m: print(m, file=sys.stderr), trace_dir=args.trace_dir,
    )
    print(WARMED_NOTE)
    print(format_table(rows))
    if args.costs or (args.device == "cuda" and not args.no_costs):
        measure_costs(session, sources, runs, rows, device=args.device, max_tokens=args.max_tokens,
                      batch_size=args.batch_size, pool_size=args.pool_size)
        print()
        print(format_costs(rows))
    if args.json:
        write_json(args, rows, len(sources))


def write_json(args: argparse.Namespace, rows: List[Dict[str, Any]], sentences: int) -> None:
    """The rows and how they were measured (what ``scripts/gpu/gpu_report.py`` reads)."""
    meta = {"timing": "warmed", "threads": torch.get_num_threads(), "sentences": sentences, "repeats": args.repeats,
            "warmup": args.warmup, "device": args.device, "dtype": args.dtype, "batch_size": args.batch_size,
            "max_tokens": args.max_tokens, "pool_size": args.pool_size, "path": args.path,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
    write_text_checked(args.json, json.dumps({"meta": meta, "rows": rows_for_json(rows)}, indent=2), "--json")


if __name__ == "__main__":
    main()
