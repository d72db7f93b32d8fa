"""Start the shards' processes, wait for them, and say in one line which failed and how to re-run it."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from typing import Dict, List, Sequence

from fairseq_stream.tools.shard.plan import Shard


def failure_of(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def run_shards(shards: List[Shard]) -> Dict[int, int]:
    """Start every shard without a finished output at once; return their exit statuses."""
    running = {}
    for shard in shards:
        if os.path.exists(shard.out):
            print(f"fairseq-stream-shard: shard {shard.index}: re-using {shard.out}", file=sys.stderr)
            continue
        if os.path.exists(shard.failed):
            os.remove(shard.failed)
        with open(shard.log, "w", encoding="utf-8") as log:
            log.write(f"# {shard.command_line()}\n")
        partial = open(shard.out + ".partial", "w", encoding="utf-8")
        log = open(shard.log, "a", encoding="utf-8")
        proc = subprocess.Popen(shard.argv, stdout=partial, stderr=log, env=dict(os.environ, **shard.env))
        with open(shard.pid, "w") as f:
            f.write(f"{proc.pid}\n")
        running[shard.index] = (shard, proc, partial, log)
    codes = {}
    for index, (shard, proc, partial, log) in running.items():
        codes[index] = proc.wait()
        partial.close()
        log.close()
        os.remove(shard.pid)
        if codes[index] == 0:
            os.replace(shard.out + ".partial", shard.out)  # only finished shards count as done
    return codes


def last_log_line(path: str) -> str:
    """The last non-empty line of a shard's log: most often the error itself."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines and not lines[-1].startswith("# ") else ""


def failure_message(shards: List[Shard], codes: Dict[int, int], nprocs: int, argv: Sequence[str], workdir: str) -> str:
    failed = [i for i, code in codes.items() if code != 0]
    i = failed[0]
    last = last_log_line(shards[i].log)
    return (f"shard {i} of {nprocs} failed ({failure_of(codes[i])}; log {shards[i].log}"
            + (f": {last[:300]!r}" if last else "")
            + (f"; also failed: shards {failed[1:]}" if failed[1:] else "")
            + f"); re-run it alone (finished shards are re-used): {resume_command(argv, workdir, nprocs)}")


def resume_command(argv: Sequence[str], workdir: str, nprocs: int) -> str:
    """The command that runs the missing shards on this machine and merges all of them."""
    rest = [a for a in argv if a != "--fresh"]  # a resume must keep the finished shards
    if "--workdir" not in rest and not any(a.startswith("--workdir=") for a in rest):
        rest = ["--workdir", workdir, *rest]
    if "--nprocs" not in rest and not any(a.startswith("--nprocs=") for a in rest):
        rest = ["--nprocs", str(nprocs), *rest]  # under torchrun it came from WORLD_SIZE
    # As invoked: the console script, or ``python -m`` where it is not installed.
    program = (["fairseq-stream-shard"] if os.path.basename(sys.argv[0]) == "fairseq-stream-shard"
               else [sys.executable, "-m", "fairseq_stream.tools.shard"])
    return shlex.join([*program, *rest])
