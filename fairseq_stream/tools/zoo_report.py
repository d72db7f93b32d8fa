"""The zoo's record: one table per model from the user-command harness's ``--json`` files (issue 79).

    python -m fairseq_stream.tools.zoo_report --json b1.json --json k5k50.json --out docs/zoo.md

Every ``--json`` is a file ``python -m fairseq_stream.tools.user_bench ... --json FILE`` wrote. Each model gets a
section: what it is (its half, direction, shape, vocabulary, label smoothing, updates and training time, read from
the ``state.json`` that ``scripts/models/zoo.py`` wrote into its folder), then, for every run that measured it, the
run's CPU, revision and date and the harness's own tables (rows, why, rows left out). A summary table comes first,
one line a model: the tuning half above the held-out half, the batch-1 rows as × our greedy, the beam rows as ×
fairseq's beam with their BLEU. Where a row's time or BLEU reads from a run, that run's file is its source:
nothing is typed in by hand.
"""
import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from fairseq_stream.engine.output_paths import write_text_checked
from fairseq_stream.errors import UsageError, usage_errors
from fairseq_stream.tools.user_bench import format_rows, format_why

HALVES = ("tuning", "held-out")


def load_runs(paths: Sequence[str]) -> List[Dict[str, Any]]:
    """The harness's JSON files, each with its path; a file that is not one says which and why."""
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as exc:
            raise UsageError(f"--json {path}: cannot read it ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise UsageError(f"--json {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, dict) or "models" not in data or "meta" not in data:
            raise UsageError(f"--json {path}: not a user_bench file (no 'meta' and 'models'); "
                             "python -m fairseq_stream.tools.user_bench ... --json FILE writes one")
        runs.append({"path": path, **data})
    return runs


def model_info(folder: str) -> Dict[str, Any]:
    """What the zoo recorded of a model folder (its spec and training), or a stub for a folder it did not build."""
    name = os.path.basename(os.path.normpath(folder))
    try:
        with open(os.path.join(folder, "state.json"), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, json.JSONDecodeError):
        return {"name": name, "half": "tuning" if name == "demo" else "?", "spec": None, "train": None}
    spec = state.get("spec") or {}
    return {"name": name, "half": spec.get("half", "?"), "spec": spec, "train": state.get("stages", {}).get("train")}


def describe(info: Dict[str, Any]) -> str:
    """One line: direction, shape, vocabulary, label smoothing, training."""
    spec = info["spec"]
    if not spec:
        return "not built by scripts/models/zoo.py (no state.json)"
    enc, dec = spec["layers"]
    bpe = spec["bpe"]
    vocab = f"joint BPE {bpe[0]}" if len(bpe) == 1 else f"BPE {spec['src']} {bpe[0]} / {spec['tgt']} {bpe[1]}"
    text = (f"{spec['src']}→{spec['tgt']}, {enc} + {dec} layers × {spec['dim']} ({spec['heads']} heads, FFN "
            f"{spec['ffn']}), {vocab}, label smoothing {spec['label_smoothing']}")
    train = info["train"] or {}
    if spec.get("of_run"):
        text += f"; the checkpoint of {spec['of_run']} after {spec['at_update']} updates"
    elif train:
        text += f"; {train.get('updates', '?')} updates in {train.get('seconds', 0) / 60:.1f} min"
    return text


def by_model(runs: Sequence[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """Each model folder's measurements, in the order of the files: ``{"run": meta+path, "model": its part}``."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for run in runs:
        meta = {**run["meta"], "path": run["path"]}
        for model in run["models"]:
            out.setdefault(os.path.normpath(model["model"]), []).append({"run": meta, "model": model})
    return out


def rows_of(measured: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Every row label of a model, the last file's row where several files measured it."""
    out: Dict[str, Dict[str, Any]] = {}
    for item in measured:
        for row in item["model"]["rows"]:
            out[row["label"]] = row
    return out


def _ratio(rows: Dict[str, Dict[str, Any]], label: str) -> str:
    """A row's ratio to its reference row, marked where it fails its identity check; "" when absent."""
    row = rows.get(label)
    if row is None or row.get("ratio") is None:
        return ""
    wrong = row.get("identical") is not None and row["identical"] != row["sentences"]
    return f"{row['ratio']:.2f}×" + (" (**NOT identical**)" if wrong else "")


def _beam_cell(rows: Dict[str, Dict[str, Any]], k: int) -> str:
    """"fixed-ours / var-stream × fairseq's beam (var-stream × fixed-ours); BLEU fairseq / fixed-ours / var-stream"
    at width k."""
    ref, fixed, var = rows.get(f"fairseq beam k={k}"), rows.get(f"fixed-ours k={k}"), rows.get(f"var-stream k={k}")
    if not (ref and fixed and var):
        return ""
    return (f"{_ratio(rows, f'fixed-ours k={k}')} / {_ratio(rows, f'var-stream k={k}')} "
            f"({var['median'] / fixed['median']:.2f}× fixed-ours); {ref['bleu']:.2f} / {fixed['bleu']:.2f} / {var['bleu']:.2f}")


def summary_line(info: Dict[str, Any], rows: Dict[str, Dict[str, Any]]) -> str:
    greedy = rows.get("greedy")
    ct2 = rows.get("CTranslate2 float32 batch1")
    first = ""
    if greedy:
        first = f"{greedy['median']:.2f} s, {greedy['bleu']:.2f}"
        if ct2:
            first += f", {greedy['median'] / ct2['median']:.2f}×"
    lookahead = "lookahead" if "lookahead" in rows else "lookahead (no prior)"
    jacobi = " / ".join(x for x in (_ratio(rows, "gs-jacobi"), _ratio(rows, "hybrid-jacobi")) if x)
    cells = [info["name"], info["half"], first, _ratio(rows, "speculative"), _ratio(rows, lookahead), jacobi,
             _beam_cell(rows, 5), _beam_cell(rows, 50)]
    return "| " + " | ".join(cells) + " |"


SUMMARY_HEAD = ("| model | half | our greedy at batch 1: decode s, BLEU, × CTranslate2 float32 | `speculative` | "
                "`lookahead` | `gs-jacobi` / `hybrid-jacobi` | k = 5: fixed-ours / var-stream × fairseq's beam "
                "(var-stream × fixed-ours); BLEU fairseq / fixed-ours / var-stream | k = 50: the same |\n"
                "|---|---|---|---|---|---|---|---|")


def _table_body(model: Dict[str, Any]) -> str:
    """The harness's tables of one model's run (rows, why, rows left out); the model's heading is ours, above."""
    text = format_rows(model["rows"])
    if model.get("why"):
        text += "\n\n" + format_why(model["why"])
    for line in model.get("left_out") or []:
        text += f"\n\nleft out: {line}"
    return text


def report(runs: Sequence[Dict[str, Any]]) -> str:
    """The whole markdown record: the summary, then a section a model."""
    measured = by_model(runs)
    infos = {folder: model_info(folder) for folder in measured}
    # the tuning half, then the held-out half, then the rest; within a half the files' order (the sort is stable)
    order = sorted(measured, key=lambda f: HALVES.index(infos[f]["half"]) if infos[f]["half"] in HALVES else len(HALVES))
    cpus = sorted({run["meta"].get("cpu", "?") for run in runs})
    out = ["Batch-1 rows × our greedy (true batch 1, each must equal greedy), beam rows × fairseq's beam; the median of "
           f"each row's fresh `fairseq-generate` runs; CPU: {', '.join(cpus)}. Each model's section below gives its "
           "runs' revisions, dates and tables.", "", SUMMARY_HEAD]
    out += [summary_line(infos[f], rows_of(measured[f])) for f in order]
    for folder in order:
        info = infos[folder]
        out += ["", f"### {info['name']} ({info['half']})", "", describe(info)]
        for item in measured[folder]:
            meta = item["run"]
            out += ["", f"Run of {meta.get('date', '?')}: {meta.get('cpu', '?')}, revision {meta.get('revision') or '?'}, "
                        f"{meta.get('omp_num_threads', '?')} thread(s), {item['model']['sentences']} sentences, "
                        f"median of {meta.get('repeats', '?')} ({os.path.basename(meta['path'])})"
                        + (f": `{meta['command']}`" if meta.get("command") else ""), "",
                    _table_body(item["model"])]
    return "\n".join(out) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="append", default=[], metavar="FILE", required=True,
                        help="a file user_bench --json wrote (repeatable; a later file's row replaces an earlier one's "
                             "of the same label in the summary)")
    parser.add_argument("--out", default=None, help="write the markdown here (default: standard output)")
    parser.add_argument("--title", default="", help="a first line (e.g. '# The zoo through the user's command')")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = _parser().parse_args(argv)
    with usage_errors():
        text = (args.title + "\n\n" if args.title else "") + report(load_runs(args.json))
    if args.out:
        write_text_checked(args.out, text, "--out")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
