#!/usr/bin/env python
"""The GPU check's one Markdown report, from the JSON rows of scripts/gpu/gpu_rows.py.

    python scripts/gpu/gpu_report.py OUT   # reads OUT/rows_*.json, OUT/skipped.json, OUT/*.md parts; writes OUT/gpu_report.md

Per row: the median wall time, the ratio to stock fairseq at the same beam measured in the same
process (the ``beam`` row of the same table; ib-beam's is the demo model's), BLEU, the backend
each fused step operator ran on, the GPU-busy fraction, kernel launches, host reads and aten ops
per decoder step, and peak memory. What a CPU cannot measure is n/a. Pure text processing: it
imports neither torch nor fairseq.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

COLUMNS = ["table", "strategy", "sentences", "wall s (median)", "ratio vs fairseq", "vs fixed-ours", "vs [eager]",
           "steps replayed",
           "BLEU", "step backends",
           "GPU busy", "kernels/step", "host reads/step", "ops/step", "ops/step outside the replay", "peak MiB"]


def load_tables(out: Path) -> Dict[str, Dict[str, Any]]:
    """``rows_NAME.json`` → {NAME: {"meta": ..., "rows": [...]}}, in the order they were measured."""
    paths = sorted(out.glob("rows_*.json"), key=lambda p: (p.stat().st_mtime, p.name))
    return {p.stem[len("rows_"):]: json.loads(p.read_text(encoding="utf-8")) for p in paths}


def beam_of(row: Dict[str, Any]) -> int:
    return int(row.get("gen", {}).get("beam", 5))


def reference(tables: Dict[str, Dict[str, Any]], name: str, row: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Stock fairseq's row at ``row``'s beam in the same process: the same table, or for ib-beam
    the demo model's table of the same dtype (``ibbase``: the base model's batch-1 table)."""
    meta = tables[name]["meta"]
    candidates = [name]
    if meta.get("model") == "ib":
        candidates.append(name.replace("ib_", "demo_", 1))
    if meta.get("model") == "ibbase":
        candidates.append(name.replace("ibbase_", "base32k_", 1))
    for table in candidates:
        for ref in tables.get(table, {}).get("rows", []):
            if ref["search"] == "beam" and beam_of(ref) == beam_of(row):
                return ref
    return None


def _num(value: Optional[float], fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def backends(row: Dict[str, Any]) -> str:
    found = row.get("step_backends") or row.get("stats", {}).get("step_backends") or {}
    # each operator → the backends that ran it (a list; several when one fell back mid-run)
    return " ".join(f"{op}={v if isinstance(v, str) else '+'.join(v)}" for op, v in sorted(found.items())) or "—"


def eager_twin(tables: Dict[str, Dict[str, Any]], name: str, row: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The same row of the same table with ``--step-mode eager`` (labels ``X [mode]``, gpu_rows.moded)."""
    label = row["label"]
    if not label.endswith("]") or label.endswith("[eager]"):
        return None
    base = label[: label.rindex("[")] + "[eager]"
    base = base.replace(" cap=256", "")  # the capacity row against the default capacity's eager row
    return next((r for r in tables[name]["rows"] if r["label"] == base), None)


def own_twin(tables: Dict[str, Dict[str, Any]], name: str, row: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Our fixed beam (at beam 1 our greedy) at ``row``'s beam and step mode in the same table (for ib-beam,
    the base model's table of the same batch): the engine's own baseline."""
    if row["search"] in ("beam", "fixed-ours"):
        return None
    mode = row["label"][row["label"].rindex("["):] if row["label"].endswith("]") else ""
    meta = tables[name]["meta"]
    candidates = [name] + ([name.replace("ibbase_", "base32k_", 1)] if meta.get("model") == "ibbase" else [])
    for table in candidates:
        for ref in tables.get(table, {}).get("rows", []):
            if ref["search"] == "fixed-ours" and beam_of(ref) == beam_of(row) and ref["label"].endswith(mode):
                return ref
    return None


def replayed(row: Dict[str, Any]) -> str:
    """``412/450`` decoder steps replayed as CUDA graphs (the run's step_mode statistic)."""
    modes = row.get("stats", {}).get("step_mode") or {}
    if not modes:
        return "—"
    steps = sum(int(modes.get(k, 0)) for k in ("steps_replayed", "steps_static", "steps_eager"))
    return f"{int(modes.get('steps_replayed', 0))}/{steps}"


def row_cells(tables: Dict[str, Dict[str, Any]], name: str, row: Dict[str, Any]) -> List[str]:
    ref = reference(tables, name, row)
    ratio = row["wall_median"] / ref["wall_median"] if ref and ref["wall_median"] else None
    twin = eager_twin(tables, name, row)
    vs_eager = row["wall_median"] / twin["wall_median"] if twin and twin["wall_median"] else None
    own = own_twin(tables, name, row)
    vs_own = row["wall_median"] / own["wall_median"] if own and own["wall_median"] else None
    costs = row.get("costs", {})
    label = row["label"]
    chosen = (row.get("stats") or {}).get("prune_auto")
    if chosen:  # the setting --prune-auto chose, and why when it fell back
        label += f" (chose {chosen.get('setting')}{'; ' + str(chosen['fallback']) if chosen.get('fallback') else ''})"
    return [name, label, str(row["sentences"]), f"{row['wall_median']:.3f}", _num(ratio, ".2f"),
            _num(vs_own, ".2f"), _num(vs_eager, ".2f"), replayed(row), f"{row['bleu']:.2f}", backends(row), _num(costs.get("gpu_busy"), ".0%"),
            _num(costs.get("kernels_per_step"), ".1f"), _num(costs.get("host_reads_per_step"), ".2f"),
            _num(costs.get("ops_per_step"), ".1f"), _num(costs.get("ops_outside_region_per_step"), ".1f"),
            _num(costs.get("peak_mib"), ".0f")]


def header(tables: Dict[str, Dict[str, Any]], title: str) -> List[str]:
    meta = next(iter(tables.values()))["meta"] if tables else {}
    cpu = meta.get("device") != "cuda"
    lines = [f"# {title}", ""]
    lines += [f"- device: {meta.get('device_name', 'unknown')}" + (" (a CPU dry run: GPU-only columns are n/a)" if cpu else ""),
              f"- torch {meta.get('torch')}, CUDA {meta.get('cuda') or 'none'}, Triton {meta.get('triton') or 'not installed'}",
              f"- per row: {meta.get('warmup', '?')} untimed warm-up run(s), then the median of {meta.get('repeats', '?')} "
              "timed runs (synchronised on CUDA), rows of a table interleaved; costs from extra runs over the first "
              f"{meta.get('costs_sentences', '?')} sentences (kernels/step: the whole run's kernels over decoder steps; "
              "host reads and ops/step: the decoding loop's, fairseq's beam counted whole; ops/step outside the replay: "
              "those outside the static step's region, the launches around each graph replay)",
              "- ratio vs fairseq: wall time / stock fairseq's at the same beam in the same process (< 1: faster)",
              "- vs [eager]: wall time / the same row's with --step-mode eager; steps replayed: decoder steps run as a "
              "CUDA graph replay / all decoder steps (the run's step_mode statistic)",
              "- peak MiB: " + ("the process's resident high-water mark (a CPU)" if cpu else
                                "torch.cuda.max_memory_allocated, reset per row"),
              "- step backends: the implementation each fused step operator ran on (the run's step_backends "
              "statistic; — where the row reported none)", ""]
    return lines


def sections(out: Path) -> List[str]:
    """The parts gpu_check.sh wrote beside the rows: the gpu tests' summary, the output layer."""
    lines: List[str] = []
    for name, title in (("gpu_tests.txt", "gpu-marked tests (pytest -m gpu)"), ("install.txt", "install"),
                        ("output_layer_float32.md", "output layer micro-benchmark, float32"),
                        ("output_layer_float16.md", "output layer micro-benchmark, float16"),
                        ("profile.md", "profile of a k = 5 decode (scripts/gpu/gpu_profile.py)"),
                        ("train_speed.md", "IBDecoder training speed (scripts/gpu/gpu_train_speed.py)"),
                        ("frontier.md", "the k = 5 quality/speed frontier on the device (fairseq-stream-frontier)"),
                        ("ct2.md", "CTranslate2 on the same GPU (scripts/bench/bench_vs_ctranslate2.py --device cuda)")):
        path = out / name
        if path.exists():
            lines += [f"## {title}", "", path.read_text(encoding="utf-8").strip(), ""]
    return lines


def report(out: Path, title: str = "fairseq-stream GPU check") -> str:
    tables = load_tables(out)
    lines = header(tables, title)
    lines += ["## rows", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, table in tables.items():
        meta = table["meta"]
        for row in table["rows"]:
            cells = row_cells(tables, name, row)
            cells[0] = f"{meta.get('model')} {meta.get('dtype')} {name.rsplit('_', 1)[-1]}"
            lines.append("| " + " | ".join(cells) + " |")
    skipped = json.loads((out / "skipped.json").read_text(encoding="utf-8")) if (out / "skipped.json").exists() else []
    if skipped:
        lines += ["", "## skipped", ""] + [f"- {s['table']}: {s['reason']}" for s in skipped]
    return "\n".join(lines + [""] + sections(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder of gpu_rows.py's JSON rows; the report goes there too")
    parser.add_argument("--title", default="fairseq-stream GPU check")
    args = parser.parse_args()
    if not args.out.is_dir():
        parser.error(f"{args.out}: no such folder (run scripts/gpu_check.sh or scripts/gpu/gpu_rows.py first)")
    text = report(args.out, args.title)
    (args.out / "gpu_report.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
