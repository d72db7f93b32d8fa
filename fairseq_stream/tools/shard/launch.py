"""Start the shards' processes, wait for them, and say in one line which failed and how to re-run it."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from typing import IO, Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_stream.tools.shard.merge import shard_damage
from fairseq_stream.tools.shard.plan import Shard


def failure_of(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def run_shards(shards: List[Shard]) -> Dict[int, int]:
    """Start every shard without a finished output at once; return their exit statuses.

    Any exception while they run (a signal turned into one by the caller, a broken pipe) stops the
    running shards first: none is left decoding into the workdir after this process is gone.
    """
    running: Dict[int, Tuple[Shard, "subprocess.Popen[bytes]", IO[str], IO[str]]] = {}
    codes = {}
    try:
        for shard in shards:
            if reusable(shard):
                continue
            running[shard.index] = _start(shard)
        for index, (shard, proc, partial, log) in list(running.items()):
            codes[index] = proc.wait()
            del running[index]
            _close(shard, partial, log)
            if codes[index] == 0:
                os.replace(shard.out + ".partial", shard.out)  # only finished shards count as done
    finally:
        stop_shards(running)
    return codes


def reusable(shard: Shard) -> bool:
    """Whether ``shard`` finished in an earlier run and its output is whole (said on stderr either way).
    A damaged one (cut short or changed after it finished) is removed, so that it is decoded again."""
    if not os.path.exists(shard.out):
        return False
    damage = shard_damage(shard)
    if damage is None:
        print(f"fairseq-stream-shard: shard {shard.index}: re-using {shard.out}", file=sys.stderr)
        return True
    print(f"fairseq-stream-shard: shard {shard.index}: {damage} (cut short or changed after it finished): decoding "
          f"shard {shard.index} again", file=sys.stderr, flush=True)
    for path in (shard.out, shard.stats):
        if os.path.exists(path):
            os.remove(path)
    return False


def _start(shard: Shard) -> Tuple[Shard, "subprocess.Popen[bytes]", IO[str], IO[str]]:
    if os.path.exists(shard.failed):
        os.remove(shard.failed)
    with open(shard.log, "w", encoding="utf-8") as log:
        log.write(f"# {shard.command_line()}\n")
    partial = open(shard.out + ".partial", "w", encoding="utf-8")
    log = open(shard.log, "a", encoding="utf-8")
    proc = subprocess.Popen(shard.argv, stdout=partial, stderr=log, env=dict(os.environ, **shard.env),
                            preexec_fn=_die_with_parent())
    with open(shard.pid, "w") as f:
        f.write(f"{proc.pid}\n")
    return shard, proc, partial, log


def _close(shard: Shard, partial: IO[str], log: IO[str]) -> None:
    partial.close()
    log.close()
    if os.path.exists(shard.pid):
        os.remove(shard.pid)


def _die_with_parent() -> Optional[Callable[[], None]]:
    """A function to run in the child before it execs: SIGTERM when the parent dies, even by SIGKILL
    (Linux's PR_SET_PDEATHSIG), so that no shard goes on decoding for a run that is gone. None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:  # looked up here, in the parent: the child between fork and exec must not load libraries
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG


def stop_shards(running: Dict[int, Tuple[Shard, "subprocess.Popen[bytes]", IO[str], IO[str]]],
                grace: float = 10.0) -> None:
    """Terminate the shards still running and wait for them (SIGKILL after ``grace`` seconds)."""
    for _, proc, _, _ in running.values():
        if proc.poll() is None:
            proc.terminate()
    for shard, proc, partial, log in running.values():
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _close(shard, partial, log)


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
