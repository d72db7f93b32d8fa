#!/usr/bin/env python
"""Where a k = 5 decode of the demo model spends its time on a device: the explanation the GPU
check's rows need (scripts/gpu_check.sh writes it as ``OUT/profile.md``).

    python scripts/gpu/gpu_profile.py --device cuda --limit 300 --out gpu_check_out/profile.md

For stock fairseq's beam, ``fixed-ours`` and ``var-stream`` (k = 5, in one process, after
two untimed warm-ups): the wall time of a synchronised run; from one ``torch.profiler`` run the host
(CPU) time against the device's kernel time, kernel launches per decoder step and the operators
that take the most host and device time; from one counted run (``core.profiling``) the host
reads per step and where in this package they happen (fairseq's beam has no decoding loop of
ours: its reads are not broken down). On a CPU the device columns are n/a (a dry run).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DEMO = REPO / "user_dir_examples" / "demo"
def runs(device: str) -> List[Any]:
    """fairseq's beam, then ours eager and as graphs (a CPU dry run: static, no capture)."""
    fast = "graph" if device == "cuda" else "static"
    return [("fairseq-beam", "beam", {})] + [
        (f"{name} [{mode}]", name, {"stream_capacity": 128, "step_mode": mode})
        for name in ("fixed-ours", "var-stream") for mode in ("eager", fast)]


def _on_device(event: Any) -> bool:
    """A kernel's own event (not the host operator that launched it)."""
    return str(getattr(event, "device_type", "")).endswith("CUDA")


def _top(events: List[Any], key: str, n: int, total: float) -> List[str]:
    rows = sorted((e for e in events if getattr(e, key, 0) > 0), key=lambda e: -getattr(e, key, 0))[:n]
    return [f"| {e.key[:60]} | {getattr(e, key) / 1e3:.1f} | {100 * getattr(e, key) / max(total, 1e-9):.0f}% | {e.count} |"
            for e in rows]


def profile_run(session: Any, data: Any, search: str, opts: Dict[str, Any], device: str, top: int) -> List[str]:
    from torch.profiler import ProfilerActivity, profile

    from fairseq_stream.engine.profiling import CostCounts, count_decoder_steps

    kw = dict(search=search, gen={"beam": 5}, opts=opts, postprocess=False)
    for _ in range(2):  # warm-up: kernels compiled, output-layer kernels chosen; graph: the second run replays
        session.translate(data, **kw)  # every step (the first one's cache slabs grow under its first captures)
    timed = session.translate(data, **kw)
    steps = max(int(timed.stats.timesteps), 1)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        session.translate(data, **kw)
    events = prof.key_averages()
    host = sum(e.self_cpu_time_total for e in events)
    # fairseq's record_function ranges ("EnsembleModel: forward_decoder") show as device events too:
    # counted as kernels they put its GPU busy over 100% (the second GPU run); kernels only
    ranges = {e.key for e in events if e.self_cpu_time_total > 0}
    kernels = [e for e in events if _on_device(e) and e.key not in ranges]
    dev = sum(getattr(e, "self_device_time_total", 0) for e in kernels)
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                                        "cuLaunchKernelEx", "cudaGraphLaunch"))
    wall = timed.stats.wall_seconds
    lines = [f"wall {wall:.3f} s, {timed.stats.timesteps} decoder steps; profiled run: host "
             f"{host / 1e6:.3f} s of CPU, " + (f"device kernels {dev / 1e6:.3f} s ({100 * dev / max(host, 1):.0f}% of the "
                                                f"host time), {launches / steps:.1f} kernel launches per step "
                                                f"(a graph replay is one), GPU busy {100 * dev / 1e6 / max(wall, 1e-9):.0f}% "
                                                "(kernel time over the unprofiled run's wall time)"
                                                if device == "cuda" else "device n/a (a CPU run)"), ""]
    modes = timed.stats.step_mode
    if modes and search != "beam":
        lines[0] += (f"; steps: {modes.get('steps_replayed', 0)} replayed, {modes.get('steps_static', 0)} static, "
                     f"{modes.get('steps_eager', 0)} eager")
    lines += ["| operator (host) | ms | share | calls |", "|---|---|---|---|"] + _top(events, "self_cpu_time_total", top, host)
    if device == "cuda":
        lines += ["", "| kernel (device) | ms | share | calls |", "|---|---|---|---|"]
        lines += _top(kernels, "self_device_time_total", top, dev)
    if search != "beam":
        counts = CostCounts(read_sites=Counter())
        with count_decoder_steps(counts):
            counted = session.translate(data, **kw)
        n = max(int(counted.stats.timesteps), 1)
        lines += ["", f"host reads: {counts.host_reads / n:.2f} per step, aten operations {counts.ops / n:.1f} per step; "
                  "where the reads happen:", "", "| reads per step | op | where (innermost first) |", "|---|---|---|"]
        lines += [f"| {c / n:.2f} | {op} | {where} |" for (op, where), c in counts.read_sites.most_common(8)]
    return lines


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--limit", type=int, default=300, help="demo test sentences")
    parser.add_argument("--top", type=int, default=12, help="operators listed per table")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here (else standard output)")
    args = parser.parse_args(argv)
    if args.limit < 1 or args.top < 1:
        parser.error("--limit and --top must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU (use --device cpu for a dry run)")
    if args.threads:
        torch.set_num_threads(args.threads)
    from gpu_rows import load  # the GPU check's loader (this script's folder is on the path)

    from fairseq_stream.tools.bench import read_lines

    session = load(str(DEMO), str(DEMO / "checkpoint.pt"), args.device, "float32")
    data = session.encode(read_lines(str(DEMO / "test.es"), args.limit))
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    lines = [f"Demo model, k = 5, {args.limit} sentences, {name}, torch {torch.__version__} "
             f"(`python scripts/gpu/gpu_profile.py --device {args.device} --limit {args.limit}`)", ""]
    start = time.perf_counter()
    for label, search, opts in runs(args.device):
        lines += [f"### {label}", ""] + profile_run(session, data, search, opts, args.device, args.top) + [""]
    lines.append(f"({time.perf_counter() - start:.0f} s)")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text)


if __name__ == "__main__":
    main()
