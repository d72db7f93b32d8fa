"""The quality/speed frontier of the variable-width beam: BLEU against decode time, per setting.

    python -m fairseq_stream.tools.frontier --path ckpt.pt --beam 5 50 --limit 150 \\
        --deltas 1 1.5 2 3 4 --scales 0 2 3 --references normalized final --out docs/frontier_demo

For each beam width ``k`` this decodes the same sentences, in one process and on one thread,
with fairseq's ``beam`` and ``fixed-ours`` (the points to beat) and the grid of pruning settings
of ``--search`` (var-stream by default): every δ × M × reference × α (``--prune-abs-scale``) of
the lists, the default setting (the row "default": the var-* default rule, each sentence's own),
``--prune-auto`` (its label names the settings it moved through and what its probes cost, the plot
draws its path through them; ``--no-auto`` leaves it out), the default with ``--stream-max-candidates C`` (and with
over-subscription) for each ``--max-candidates C``, and any ``--run`` spec. It reports BLEU,
its change against ``fixed-ours`` with a paired-bootstrap p-value (Koehn 2004: the share of
resampled test sets on which the point is not worse; below 0.05 a loss is real), the length
ratio, the median decode time over ``--repeats`` and its ratio to ``fixed-ours``, and marks the
**Pareto frontier**: the points no other point beats on both time and BLEU. It writes
``OUT.md`` (the table), ``OUT.json`` (the rows) and ``OUT.png`` (BLEU against time relative to
``fixed-ours``, one panel per ``k``; matplotlib). Bad arguments are one
``fairseq-stream: error:`` line before anything is decoded.
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import itertools
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from fairseq_stream.engine.output_paths import write_bytes_checked, write_text_checked
from fairseq_stream.errors import UsageError, usage_errors
from fairseq_stream.tools.demo_files import find_demo_dir

DEMO_DIR = find_demo_dir()
REFERENCE_CHOICES = ("final", "active", "normalized")


@dataclass(frozen=True)
class Point:
    """A setting's place in the plane: decode time (lower is better) and BLEU (higher is better)."""

    time: float
    bleu: float


def pareto_front(points: Sequence[Point]) -> List[bool]:
    """Whether each point is on the frontier: no other point is at least as fast and as good and
    strictly better in one of the two (ties in both keep both)."""
    return [not any(q.time <= p.time and q.bleu >= p.bleu and (q.time < p.time or q.bleu > p.bleu) for q in points)
            for p in points]


@dataclass(frozen=True)
class Grid:
    """The pruning settings to sweep at one ``k``."""

    search: str
    deltas: Sequence[float]
    max_cands: Sequence[int]
    references: Sequence[str]
    scales: Sequence[float]
    max_candidates: Sequence[int]
    runs: Sequence[str]
    auto: bool = True  # the --prune-auto point (its probes included in its time)

    def specs(self, k: int, fairseq_beam: bool = True) -> List[str]:
        """``--run`` specs of the bench harness: the two baselines first, then the grid."""
        specs = ([f"beam:beam={k},label=fairseq beam"] if fairseq_beam else []) + [f"fixed-ours:beam={k},label=fixed-ours"]
        # the var-* default (a rule each sentence decides alone, issue 81); --prune-auto is the opt-in point
        specs.append(f"{self.search}:beam={k},label=default")
        if self.auto:
            specs.append(f"{self.search}:beam={k},prune_auto=true,label=auto")
        for delta, m, ref, scale in itertools.product(self.deltas, self.max_cands, self.references, self.scales):
            label = f"δ={delta:g} M={m} {ref}" + (f" α={scale:g}" if scale else "")
            specs.append(f"{self.search}:beam={k},prune_abs_threshold={delta},prune_max_cands_per_node={m},"
                         f"prune_reference={ref},prune_abs_scale={scale},label={label}")
        for c in self.max_candidates:
            specs.append(f"{self.search}:beam={k},stream_max_candidates={c},label=default C={c}")
            specs.append(f"{self.search}:beam={k},stream_max_candidates={c},stream_oversubscribe=true,"
                         f"label=default C={c} oversubscribed")
        specs += [s.replace("{k}", str(k)) for s in self.runs]
        return specs


def annotate(rows: List[Dict[str, Any]], refs: List[str]) -> None:
    """Add to each row of one ``k`` its change and p-value against ``fixed-ours`` and the frontier mark."""
    from fairseq_stream.tools.significance import paired_bootstrap_p

    fixed = next(r for r in rows if r["search"] == "fixed-ours")
    for row in rows:
        row["delta_bleu"] = row["bleu"] - fixed["bleu"]
        row["time_vs_fixed"] = row["wall_median"] / fixed["wall_median"] if fixed["wall_median"] else None
        exp, base = row["stats"].get("expansions"), fixed["stats"].get("expansions")
        row["expansions_vs_fixed"] = exp / base if exp and base else None
        row["p_vs_fixed"] = None if row is fixed else paired_bootstrap_p(fixed["outputs"], row["outputs"], refs)
    marks = pareto_front([Point(r["wall_median"], r["bleu"]) for r in rows])
    for row, on in zip(rows, marks):
        row["frontier"] = on


def _num(value: Optional[float], fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def format_table(rows: List[Dict[str, Any]]) -> str:
    """The Markdown table: one line per point, ``k`` by ``k``; ★ marks the frontier."""
    head = ["model", "k", "setting", "BLEU", "Δ fixed-ours", "p (loss)", "length ratio", "time s",
            "× fixed-ours", "expansions × fixed", "frontier"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for r in rows:
        lines.append(f"| {r.get('model', '')} | {r['k']} | {auto_label(r)} | {r['bleu']:.2f} | {r['delta_bleu']:+.2f} | "
                     f"{_num(r['p_vs_fixed'], '.3f')} | {r['length_ratio']:.3f} | {r['wall_median']:.2f} | "
                     f"{_num(r['time_vs_fixed'], '.2f')} | {_num(r['expansions_vs_fixed'], '.2f')} | "
                     f"{'★' if r['frontier'] else ''} |")
    return "\n".join(lines)


def auto_label(row: Dict[str, Any]) -> str:
    """A row's label; the --prune-auto point's says where the controller went and what its probes cost."""
    auto = (row.get("stats") or {}).get("prune_auto")
    if not auto:
        return row["label"]
    moves = " → ".join(change["setting"] for change in auto.get("changes", [])) or auto["setting"]
    return (f"{row['label']}: {moves} ({auto.get('probes', 0)} probes, "
            f"{100 * (auto.get('probe_share') or 0):.1f}% of the work)")


def setting_of(row: Dict[str, Any]) -> Optional[str]:
    """The --prune-auto controller's label of the fixed setting a row ran (``δ 1.5, M 5``; fixed-ours is its
    last rung, off), or None for a row of another kind; the default row is the var-* defaults' δ and M where
    the default δ is a fixed one."""
    from fairseq_stream.search.defaults import DEFAULT_ABS_SCALE, DEFAULT_MAX_CANDS_PER_NODE, default_abs_threshold
    from fairseq_stream.search.prune_controller import OFF, Setting

    if row["search"] == "fixed-ours":
        return OFF.label()
    if row["search"] == "beam" or row["label"] == "auto":
        return None
    opts = row.get("opts") or {}
    if any(opts.get(name) for name in ("prune_abs_scale", "stream_max_candidates", "prune_auto")) \
            or opts.get("prune_reference", "normalized") != "normalized":
        return None
    if DEFAULT_ABS_SCALE and "prune_abs_threshold" not in opts:  # the default δ is scaled per sentence
        return None
    return Setting(float(opts.get("prune_abs_threshold", default_abs_threshold((row.get("gen") or {}).get("beam")))),
                   int(opts.get("prune_max_cands_per_node", DEFAULT_MAX_CANDS_PER_NODE))).label()


def trajectory(auto: Dict[str, Any], at_k: List[Dict[str, Any]]) -> List[Tuple[float, float]]:
    """The --prune-auto point's path on the plot: the grid points of the settings it moved through (those
    the grid has), in order, then the point itself."""
    by_setting = {setting: r for r in at_k if (setting := setting_of(r)) is not None}
    changes = ((auto.get("stats") or {}).get("prune_auto") or {}).get("changes", [])
    path = [(by_setting[c["setting"]]["time_vs_fixed"], by_setting[c["setting"]]["bleu"])
            for c in changes if c["setting"] in by_setting]
    return path + [(auto["time_vs_fixed"], auto["bleu"])]


def plot(rows: List[Dict[str, Any]], path: str, title: str) -> None:
    """BLEU against time / fixed-ours' time, one panel per ``k``: the grid, its frontier line,
    fixed-ours (×), fairseq's beam (■) and --prune-auto (★) with its trajectory (dotted, through the
    grid's points of the settings it moved through)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted({r["k"] for r in rows})
    fig, axes = plt.subplots(1, len(ks), figsize=(6.5 * len(ks), 4.8), squeeze=False)
    for ax, k in zip(axes[0], ks):
        at_k = [r for r in rows if r["k"] == k]
        grid = [r for r in at_k if r["search"] not in ("beam", "fixed-ours") and r["label"] != "auto"]
        ax.scatter([r["time_vs_fixed"] for r in grid], [r["bleu"] for r in grid], s=18, color="tab:blue",
                   label="variable-width settings")
        front = sorted((r for r in at_k if r["frontier"]), key=lambda r: r["time_vs_fixed"])
        ax.step([r["time_vs_fixed"] for r in front], [r["bleu"] for r in front], where="post", color="tab:green",
                label="Pareto frontier")
        for r in grid:
            if r["frontier"] or r["label"] in ("default", "off"):
                ax.annotate(r["label"], (r["time_vs_fixed"], r["bleu"]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
        for r in (r for r in at_k if r["label"] == "auto"):
            moves = trajectory(r, at_k)  # the fixed settings it moved through, then where its run landed
            ax.plot([x for x, _ in moves], [y for _, y in moves], linestyle=":", marker=".", color="tab:orange",
                    linewidth=1)
            ax.scatter([r["time_vs_fixed"]], [r["bleu"]], marker="*", s=160, color="tab:orange", label="--prune-auto")
            ax.annotate(auto_label(r), (r["time_vs_fixed"], r["bleu"]), fontsize=7, xytext=(3, -10),
                        textcoords="offset points")
        for search, marker, color in (("fixed-ours", "X", "tab:red"), ("beam", "s", "black")):
            for r in (r for r in at_k if r["search"] == search):
                ax.scatter([r["time_vs_fixed"]], [r["bleu"]], marker=marker, s=70, color=color, label=r["label"])
        ax.set_xlabel("decode time / fixed-ours' time (1 thread)")
        ax.set_ylabel("BLEU")
        ax.set_title(f"{title}, k = {k}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    image = io.BytesIO()  # rendered first: a full disk must not leave half a PNG
    fig.savefig(image, dpi=110, format="png")
    write_bytes_checked(path, image.getvalue(), "--out")
    plt.close(fig)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", default=os.path.join(DEMO_DIR, "checkpoint.pt"), help="the checkpoint")
    parser.add_argument("--model", default=None, help="the model's name in the table and plot (default: the file)")
    parser.add_argument("--data", default=DEMO_DIR, help="directory with dict.SRC.txt and dict.TGT.txt")
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO_DIR, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO_DIR, "test.es"), help="raw source sentences")
    parser.add_argument("--ref", default=os.path.join(DEMO_DIR, "test.en"), help="raw reference translations")
    parser.add_argument("--limit", type=int, default=150, help="first N sentences")
    parser.add_argument("--beam", type=int, nargs="+", default=[5, 50], help="beam widths k")
    parser.add_argument("--search", default="var-stream", choices=["var-stream", "var-batch", "var-fifo"])
    parser.add_argument("--deltas", type=float, nargs="*", default=[1.0, 1.5, 2.0, 3.0, 4.0], help="δ values")
    parser.add_argument("--max-cands", type=int, nargs="*", default=[5], help="M values")
    parser.add_argument("--references", nargs="*", default=["normalized"], choices=REFERENCE_CHOICES)
    parser.add_argument("--scales", type=float, nargs="*", default=[0.0],
                        help="α values of --prune-abs-scale (0 = a fixed δ)")
    parser.add_argument("--max-candidates", type=int, nargs="*", default=[],
                        help="--stream-max-candidates values, each with and without over-subscription")
    parser.add_argument("--no-auto", action="store_true", help="leave the --prune-auto point out")
    parser.add_argument("--run", action="append", default=[],
                        help="another point, a bench spec ('{k}' is replaced by the beam width); repeatable")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per point; the median counts")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch of fairseq's beam")
    parser.add_argument("--no-fairseq-beam", action="store_true", help="leave fairseq's beam out (slow on weak models)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: decode on the GPU (our rows with --step-mode auto = graph), one untimed warm-up per point")
    parser.add_argument("--dtype", choices=["float32", "float16"], default="float32", help="the model's precision")
    parser.add_argument("--out", required=True, help="write OUT.md, OUT.json and OUT.png")
    return parser


#: the grid's values, with the ranges of the options they become (refused after the baselines otherwise)
_GRID_RANGES = (
    ("--deltas", "deltas", "--prune-abs-threshold", lambda x: x >= 0, ">= 0 (inf = off)"),
    ("--max-cands", "max_cands", "--prune-max-cands-per-node", lambda x: x >= 1, ">= 1"),
    ("--scales", "scales", "--prune-abs-scale", lambda x: 0 <= x < math.inf, ">= 0 and finite"),
    ("--max-candidates", "max_candidates", "--stream-max-candidates", lambda x: x >= 1, ">= 1"),
)


#: the files of --out OUT: the table, the rows, the plot
OUT_SUFFIXES = (".md", ".json", ".png")


def check_grid(args: argparse.Namespace) -> None:
    """Every value of the grid, before the baselines decode (a bad one used to fail only after them)."""
    for flag, name, option, ok, wanted in _GRID_RANGES:
        for value in getattr(args, name):
            if math.isnan(value) or not ok(value):
                raise UsageError(f"{flag}: each value (as {option}) must be {wanted}, got {value}")


def check_args(args: argparse.Namespace) -> None:
    """The checks argparse cannot express; a :class:`UsageError` before any work."""
    for flag, value in (("--limit", args.limit), ("--repeats", args.repeats), ("--threads", args.threads),
                        ("--batch-size", args.batch_size)):
        if value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if any(k < 1 for k in args.beam):
        raise UsageError(f"--beam must be >= 1, got {args.beam}")
    check_grid(args)
    for flag, path in (("--path", args.path), ("--src", args.src), ("--ref", args.ref), ("--bpe-codes", args.bpe_codes)):
        if path and not os.path.isfile(path):
            raise UsageError(f"{flag} {path!r}: no such file")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq leaves the root logger at DEBUG
    if importlib.util.find_spec("matplotlib") is None:  # the plot comes after the whole sweep: refuse now
        raise UsageError("the frontier plot needs matplotlib: pip install 'fairseq-stream[plots]'")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: torch sees no GPU")
    elif args.dtype != "float32":
        raise UsageError("--dtype float16 needs --device cuda")
    from fairseq_stream.tools.bench import check_output

    for suffix in OUT_SUFFIXES:  # checked now: they are written only after the whole sweep
        check_output("--out", args.out + suffix, args)


def sweep(session: Any, sources: List[str], refs: List[str], grid: Grid, ks: Sequence[int], *, repeats: int,
          batch_size: int, fairseq_beam: bool, model: str, warmup: int = 0) -> List[Dict[str, Any]]:
    """Every point of ``grid`` at every ``k``, annotated; the rows in table order."""
    from fairseq_stream.tools.bench import parse_runs, run_benchmark

    rows: List[Dict[str, Any]] = []
    for k in ks:
        runs = parse_runs(session, grid.specs(k, fairseq_beam))
        print(f"{model}, k = {k}: {len(runs)} points", file=sys.stderr)
        at_k = run_benchmark(session, sources, refs, runs, repeats=repeats, warmup=warmup, batch_size=batch_size,
                             progress=False, log=lambda m: print(m, file=sys.stderr))
        for row in at_k:
            row.update(k=k, model=model)
        annotate(at_k, refs)
        rows += at_k
    return rows


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    with usage_errors():
        check_args(args)
    import torch

    from fairseq_stream.integration.compat import install_excepthook
    from fairseq_stream.tools.bench import read_lines, rows_for_json
    from fairseq_stream.tools.session import TranslationSession

    install_excepthook()
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    torch.set_num_threads(args.threads)
    sources, refs = read_lines(args.src, args.limit), read_lines(args.ref, args.limit)
    with usage_errors():
        if len(sources) != len(refs):
            raise UsageError(f"--src has {len(sources)} of the first {args.limit} lines but --ref has {len(refs)}")
    extra = ["--source-lang", os.path.splitext(args.src)[1][1:], "--target-lang", os.path.splitext(args.ref)[1][1:]]
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes, extra_args=extra,
                                      cpu=args.device == "cpu", dtype=getattr(torch, args.dtype))
    grid = Grid(args.search, args.deltas, args.max_cands, args.references, args.scales, args.max_candidates, args.run,
                auto=not args.no_auto)
    model = args.model or os.path.basename(args.path)
    rows = sweep(session, sources, refs, grid, args.beam, repeats=args.repeats, batch_size=args.batch_size,
                 fairseq_beam=not args.no_fairseq_beam, model=model, warmup=int(args.device == "cuda"))
    table = format_table(rows)
    print(table)
    where = f"{args.threads} thread(s)" if args.device == "cpu" else f"{torch.cuda.get_device_name()}, {args.dtype}"
    header = f"{model}: {len(sources)} sentences of {os.path.basename(args.src)}, {args.repeats} timed run(s), " \
             f"{where}\n\n"
    write_text_checked(args.out + ".md", header + table + "\n", "--out")
    write_text_checked(args.out + ".json", json.dumps({
        "model": model, "path": args.path, "sentences": len(sources), "repeats": args.repeats,
        "threads": args.threads, "rows": rows_for_json(rows)}, indent=1), "--out")
    plot(rows, args.out + ".png", model)


if __name__ == "__main__":
    main()
