#!/usr/bin/env python
"""The rows of the GPU check (scripts/gpu_check.sh), all in one process: every model is loaded once
per dtype, and each table interleaves stock fairseq with our strategies (python -m fairseq_stream.tools.bench's
run_benchmark: untimed warm-up, then the median of --repeats timed runs; costs from extra runs).

Tables, per model and dtype:

* ``batched``: fairseq's beam (FIXED, fairseq's batches) vs ``fixed-ours`` and ``var-stream``
  (one stream over the input) at k = 5 and k = 50;
* ``batch1``: at batch 1, fairseq's greedy vs ours (``fixed-ours:beam=1``) and ``gs-jacobi`` b = 3;
* ``ib`` (with ``--ib-path``): ``ib-beam`` k = 5 on the IBDecoder checkpoint, in the same process as
  the demo model's fairseq-beam row of that dtype (not interleaved with it: another model);
* ``ibbase`` (with ``--ib-base``, an IBDecoder of the base model's size from ``make_base_model.py
  --ib``): ``ib-beam`` beam 4 at batch 1, next to the base model's batch-1 table, which then also
  times fairseq's beam 4 and ``fixed-ours`` beam 4 at batch 1 (issue 25's IBDecoder row); and the
  same at batch ``--ib-batch`` (32; tables ``beam4batched``);
* ``drafts`` (the demo model, whose draft ships beside it): ``speculative`` and ``lookahead`` at
  batch 1 in the batch-1 table (beside our greedy), and over a stream of ``--drafts-capacity``
  sentences beside our greedy and fairseq's (table ``drafts``).

The batched table also runs ``var-stream --prune-auto`` at k = 5 and k = 50 (the last step mode);
the report names the setting it chose.

Each table is written as ``OUT/rows_MODEL_DTYPE_TABLE.json`` (the harness's ``--json`` layout);
tables left out (float16 on a CPU, no IBDecoder, the time budget spent) are listed in
``OUT/skipped.json``. ``scripts/gpu/gpu_report.py`` turns both into the report.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DEMO = REPO / "user_dir_examples" / "demo"



def moded(specs: List[str], modes: List[str]) -> List[str]:
    """Each of our rows once per ``--step-mode`` (label suffixed ``[mode]``); fairseq's rows once."""
    out = []
    for spec in specs:
        if spec.startswith("beam:"):
            out.append(spec)
            continue
        head, _, label = spec.partition(",label=")
        out += [f"{head},step_mode={mode},label={label} [{mode}]" for mode in modes]
    return out


def batched(big: int, modes: List[str], capacities: List[int]) -> List[str]:
    """fairseq's beam, fixed-ours and var-stream at k = 5 and k = ``big`` (50; less in a dry run), ours
    in every step mode; var-stream k = 5 also at the other stream ``capacities`` (the CUDA default)."""
    rows = moded(["beam:beam=5,label=fairseq-beam k=5", "fixed-ours:beam=5,stream_capacity=128,label=fixed-ours k=5",
                  "var-stream:beam=5,stream_capacity=128,label=var-stream k=5"], modes)
    rows += [f"var-stream:beam=5,stream_capacity={c},step_mode={modes[-1]},label=var-stream k=5 cap={c} [{modes[-1]}]"
             for c in capacities if c != 128]
    rows += [f"var-stream:beam=5,stream_capacity={capacities[-1]},prune_auto=true,step_mode={modes[-1]},"
             f"label=var-stream k=5 cap={capacities[-1]} prune-auto [{modes[-1]}]"]
    return rows + moded([f"beam:beam={big},label=fairseq-beam k={big}",
                         f"fixed-ours:beam={big},stream_capacity=64,label=fixed-ours k={big}",
                         f"var-stream:beam={big},stream_capacity=64,label=var-stream k={big}"], modes) + [
        f"var-stream:beam={big},stream_capacity=64,prune_auto=true,step_mode={modes[-1]},"
        f"label=var-stream k={big} prune-auto [{modes[-1]}]"]


BATCH1 = ["beam:beam=1,label=fairseq-greedy", "fixed-ours:beam=1,stream_capacity=1,label=greedy-ours",
          "gs-jacobi:beam=1,jacobi_block=3,stream_capacity=1,label=gs-jacobi b=3"]
#: the drafting strategies at batch 1 (next to BATCH1 on the demo model: its draft is the demo's)
DRAFTS1 = [f"speculative:beam=1,draft_path={DEMO / 'draft.pt'},stream_capacity=1,label=speculative",
           "lookahead:beam=1,lookahead_ngram=4,stream_capacity=1,label=lookahead N=4"]


def drafts_batched(capacity: int) -> List[str]:
    """Greedy, speculative and lookahead over one stream of ``capacity`` sentences, beside fairseq's greedy."""
    return ["beam:beam=1,label=fairseq-greedy", f"fixed-ours:beam=1,stream_capacity={capacity},label=greedy-ours",
            f"speculative:beam=1,draft_path={DEMO / 'draft.pt'},stream_capacity={capacity},label=speculative",
            f"lookahead:beam=1,lookahead_ngram=4,stream_capacity={capacity},label=lookahead N=4"]


IB = ["ib-beam:beam=5,stream_capacity=128,label=ib-beam k=5"]
BEAM4_BATCH1 = ["beam:beam=4,label=fairseq-beam k=4", "fixed-ours:beam=4,stream_capacity=1,label=fixed-ours k=4"]
IB_BASE = ["ib-beam:beam=4,stream_capacity=1,label=ib-beam k=4",  # ib_step: the reference on CUDA, then Triton's kernels
           "ib-beam:beam=4,stream_capacity=1,step_backend=triton,label=ib-beam k=4 triton"]
#: the same at batch 32 (``--ib-batch``): fairseq's and our beam 4 in batches of 32, ib-beam over a stream of 32
BEAM4_BATCHED = ["beam:beam=4,label=fairseq-beam k=4", "fixed-ours:beam=4,stream_capacity=32,label=fixed-ours k=4"]
IB_BASE_BATCHED = ["ib-beam:beam=4,stream_capacity=32,label=ib-beam k=4",
                   "ib-beam:beam=4,stream_capacity=32,step_backend=triton,label=ib-beam k=4 triton"]


def environment(device: str) -> Dict[str, Any]:
    """What the report's header names: the device and the versions that shape a GPU timing."""
    try:
        import triton

        triton_version: Optional[str] = triton.__version__
    except ImportError:
        triton_version = None
    return {"device": device, "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version,
            "threads": torch.get_num_threads()}


def on_device(specs: List[str], device: str) -> List[str]:
    """``specs`` without the rows that name a CUDA-only step backend on a CPU (a dry run)."""
    return specs if device == "cuda" else [s for s in specs if "step_backend=triton" not in s]


def with_length(spec: str, length: int) -> str:
    """``spec`` with every sentence forced to ``length`` tokens (the random base model's rows)."""
    if not length:
        return spec
    sep = "," if ":" in spec else ":"
    return f"{spec}{sep}min_len={length},max_len_a=0,max_len_b={length}"


class Check:
    """The tables of one run: sizes, where they go, and what was skipped (and why)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.start = time.perf_counter()
        self.skipped: List[Dict[str, str]] = []
        self.env = environment(args.device)

    def over_budget(self) -> bool:
        return time.perf_counter() - self.start > self.args.budget_s

    def skip(self, table: str, reason: str) -> None:
        self.skipped.append({"table": table, "reason": reason})
        print(f"gpu_rows: {table}: skipped ({reason})", file=sys.stderr)

    def table(self, session: Any, name: str, specs: List[str], *, limit: int, length: int,
              batch_size: Optional[int], pool_size: Optional[int], meta: Dict[str, Any]) -> None:
        """Decode one table (warm-up, timed repeats, costs) and write its JSON rows."""
        from fairseq_stream.tools.bench import measure_costs, parse_runs, rows_for_json, run_benchmark

        a = self.args
        if self.over_budget():
            return self.skip(name, f"the time budget of {a.budget_s:.0f} s was spent")
        sources, refs = (read(DEMO / f"test.{lang}", limit) for lang in ("es", "en"))
        runs = parse_runs(session, [with_length(s, length) for s in specs])
        log = (lambda m: print(f"{name}: {m.strip()}", file=sys.stderr)) if a.verbose else (lambda m: None)
        rows = run_benchmark(session, sources, refs, runs, repeats=a.repeats, warmup=a.warmup, batch_size=batch_size,
                             pool_size=pool_size, progress=False, log=log)
        if a.costs_limit:  # 0: no counted/profiled cost runs (the step-mode rows' statistics say how steps ran)
            measure_costs(session, sources[: a.costs_limit], runs, rows, device=a.device, batch_size=batch_size,
                          pool_size=pool_size)
        meta = dict({**meta, **self.env}, table=name, sentences=len(sources), costs_sentences=min(len(sources), a.costs_limit),
                    repeats=a.repeats, warmup=a.warmup, batch_size=batch_size, pool_size=pool_size, forced_length=length)
        out = Path(a.out) / f"rows_{name}.json"
        out.write_text(json.dumps({"meta": meta, "rows": rows_for_json(rows)}, indent=2), encoding="utf-8")
        print(f"gpu_rows: {name}: {len(rows)} rows, {time.perf_counter() - self.start:.0f} s so far", file=sys.stderr)


def read(path: Path, limit: int) -> List[str]:
    return path.read_text(encoding="utf-8").splitlines()[:limit]


def load(data: str, path: str, device: str, dtype: str) -> Any:
    from fairseq_stream.tools.bench import DTYPES
    from fairseq_stream.tools.session import TranslationSession

    return TranslationSession.load(data, path, bpe_codes=str(DEMO / "bpe.codes"),
                                   extra_args=["--source-lang", "es", "--target-lang", "en"],
                                   cpu=device == "cpu", dtype=DTYPES[dtype])


def models(args: argparse.Namespace) -> List[Tuple[str, str, str, int]]:
    """(name, data folder, checkpoint, forced length) of each model."""
    out = [("demo", str(DEMO), str(DEMO / "checkpoint.pt"), args.demo_length)]
    if args.base:
        out.append(("base32k", str(Path(args.base).parent), args.base, args.base_length))
    return out


def run_model(check: Check, name: str, data: str, path: str, length: int, dtype: str) -> None:
    a = check.args
    if check.over_budget():
        return check.skip(f"{name}_{dtype}", f"the time budget of {a.budget_s:.0f} s was spent")
    session = load(data, path, a.device, dtype)
    meta = {"model": name, "dtype": dtype, "path": path, "step_modes": a.step_modes}
    modes = a.step_modes
    if "batched" in a.tables:
        check.table(session, f"{name}_{dtype}_batched", batched(a.big_beam, modes, a.capacities), limit=a.limit,
                    length=length, batch_size=None, pool_size=0, meta=meta)
    ib_base = name == "base32k" and a.ib_base and "ibbase" in a.tables
    drafts = name == "demo" and "drafts" in a.tables
    if "batch1" in a.tables or ib_base or drafts:
        specs = ((BATCH1 if "batch1" in a.tables else []) + (BEAM4_BATCH1 if ib_base else [])
                 + (DRAFTS1 if drafts else []))
        if "batch1" not in a.tables:  # the drafts' baselines
            specs = BATCH1[:2] + specs
        check.table(session, f"{name}_{dtype}_batch1", moded(specs, modes), limit=a.batch1_limit,
                    length=length, batch_size=1, pool_size=None, meta=meta)
    if drafts:
        check.table(session, f"{name}_{dtype}_drafts", moded(drafts_batched(a.drafts_capacity), modes),
                    limit=a.limit, length=length, batch_size=a.drafts_capacity, pool_size=None, meta=meta)
    ib_batch = ib_base and a.ib_batch > 1
    if ib_batch:  # fairseq's and our beam 4 at the IBDecoder's batch, on the base model
        check.table(session, f"{name}_{dtype}_beam4batched", moded(BEAM4_BATCHED, modes), limit=a.limit,
                    length=length, batch_size=a.ib_batch, pool_size=None, meta=meta)
    if ib_base:  # the IBDecoder of the same size, forced to the same lengths
        ib = load(str(Path(a.ib_base).parent), a.ib_base, a.device, dtype)
        check.table(ib, f"ibbase_{dtype}_batch1", moded(on_device(IB_BASE, a.device), modes), limit=a.batch1_limit, length=length,
                    batch_size=1, pool_size=None, meta=dict(meta, model="ibbase", path=a.ib_base))
        if ib_batch:
            check.table(ib, f"ibbase_{dtype}_beam4batched", moded(on_device(IB_BASE_BATCHED, a.device), modes), limit=a.limit,
                        length=length, batch_size=a.ib_batch, pool_size=None,
                        meta=dict(meta, model="ibbase", path=a.ib_base))
        del ib
    if name == "demo" and a.ib_path and "ib" in a.tables:  # ib-beam next to the fairseq-beam row of this process
        ib = load(a.ib_data or data, a.ib_path, a.device, dtype)
        check.table(ib, f"ib_{dtype}_batched", moded(IB, modes), limit=a.limit, length=0,
                    batch_size=None, pool_size=0, meta=dict(meta, model="ib", path=a.ib_path))
    elif name == "demo" and "ib" in a.tables:
        check.skip(f"ib_{dtype}_batched", "no IBDecoder checkpoint given (--ib-path)")
    del session
    if a.device == "cuda":
        torch.cuda.empty_cache()


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "float16", "bfloat16"], default=["float32", "float16"])
    parser.add_argument("--base", default=None, help="the 32k base model's checkpoint (make_base_model.py --vocab 32000)")
    parser.add_argument("--base-length", type=int, default=40, help="tokens every base-model sentence is forced to")
    parser.add_argument("--demo-length", type=int, default=0, help="force the demo model's outputs to N tokens (0: off)")
    parser.add_argument("--big-beam", type=int, default=50, help="the wide beam of the batched tables")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--ib-path", default=None, help="an IBDecoder checkpoint (else its row is listed as skipped)")
    parser.add_argument("--ib-data", default=None, help="its dictionaries (default: the demo's)")
    parser.add_argument("--ib-base", default=None,
                        help="an IBDecoder of the base model's size (make_base_model.py --ib, same --vocab): the ibbase table")
    parser.add_argument("--limit", type=int, default=300, help="sentences of the batched tables")
    parser.add_argument("--batch1-limit", type=int, default=40, help="sentences of the batch-1 tables")
    parser.add_argument("--costs-limit", type=int, default=50,
                        help="sentences of the counted/profiled cost runs (0: none)")
    parser.add_argument("--step-modes", nargs="+", default=None, choices=["eager", "static", "graph", "auto"],
                        help="--step-mode of each of our rows, side by side (default: eager graph on CUDA, eager static "
                        "on a CPU)")
    parser.add_argument("--capacities", nargs="+", type=int, default=[128, 256],
                        help="stream capacities of the var-stream k=5 rows (the last step mode): the CUDA default")
    parser.add_argument("--tables", nargs="+", default=["batched", "batch1", "ib", "ibbase", "drafts"],
                        choices=["batched", "batch1", "ib", "ibbase", "drafts"], help="which tables to decode")
    parser.add_argument("--drafts-capacity", type=int, default=32,
                        help="the drafts table's stream capacity (and fairseq's batch size there)")
    parser.add_argument("--ib-batch", type=int, default=32,
                        help="the batch of the ibbase table's batched rows (1: batch 1 only)")
    parser.add_argument("--models", nargs="+", default=["demo", "base32k"], choices=["demo", "base32k"],
                        help="which models' tables to decode")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--budget-s", type=float, default=900.0, help="tables not started by then are skipped")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if min(args.limit, args.batch1_limit, args.repeats) < 1 or args.warmup < 0 or args.costs_limit < 0:
        parser.error("--limit, --batch1-limit and --repeats must be >= 1, --warmup and --costs-limit >= 0")
    if args.step_modes is None:
        args.step_modes = ["eager", "graph"] if args.device == "cuda" else ["eager", "static"]
    if args.device == "cpu" and "graph" in args.step_modes:
        parser.error("--step-modes graph needs --device cuda (a CPU runs static)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU (use --device cpu for a dry run)")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    check = Check(args)
    for dtype in args.dtypes:
        for name, data, path, length in models(args):
            if name not in args.models:
                continue
            if args.device == "cpu" and dtype != "float32":
                check.skip(f"{name}_{dtype}", f"{dtype} runs on a GPU only (a CPU dry run)")
                continue
            run_model(check, name, data, path, length, dtype)
    (Path(args.out) / "skipped.json").write_text(json.dumps(check.skipped, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
