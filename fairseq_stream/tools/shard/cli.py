"""``fairseq-stream-shard``: decode one input on several processes (one GPU each when present).

    fairseq-stream-shard --nprocs 4 data-bin/wmt --user-dir fairseq_stream --path ckpt.pt \\
        --search var-stream --beam 5 --batch-size 256

Everything after ``--nprocs N`` (and the options below) goes to ``fairseq-generate`` unchanged.
Process ``i`` runs ``fairseq-generate ... --distributed-world-size N --distributed-rank i``,
fairseq's own sharding of generation (fairseq-generate shards its batch iterator by these two
options; it ignores ``--num-shards/--shard-id``): the length-sorted batches are dealt out
round-robin, so every process gets whole batches of similar lengths (and streams over its
own batches). The project's task puts back the sentences fairseq-fixed's
``batch_by_size`` drops before the batches are dealt, so no shard loses any.
With GPUs, process ``i`` sees only GPU ``i mod #GPUs`` (``CUDA_VISIBLE_DEVICES``); without,
it runs with ``--cpu`` and ``OMP_NUM_THREADS = cores / N``. The command then prints the
S-/T-/H-/D-/P- lines of every sentence once, in id order (the ids of the whole input), after
checking that no id is missing or repeated; each process's log lines go to stderr.

Without ``--batch-size`` or ``--max-tokens`` the shards read batches of ⌈n / N⌉ sentences
(under fairseq-generate's default token budget), so the sentences are dealt evenly (10 over 2:
5 and 5; fairseq's default cut 10 short sentences 8 + 2); batch options of the user's are
kept. After the sentence lines comes fairseq-generate's score line for the whole input
(``Generate test with beam=5: BLEU4 = ...``, the T- lines against the D- lines through
fairseq's own scorer), as one process would print it; each shard's own line goes to stderr.

The shards write into ``--workdir`` (a new temporary folder by default, removed after a run
that succeeded; a failed run keeps it for the resume command it prints): ``shardI.out``
once process I finished, ``shardI.log`` (its command and stderr) and ``shardI.pid`` while it
runs, and ``manifest.json``: the arguments and the sizes and modification times of the input
files (the split, the dictionaries, the checkpoints). A workdir made by another run (other
arguments or changed files) is refused in one line naming what differs; ``--fresh`` starts
over there. No process starts without a batch: N is capped by the number of batches the
input makes (said in one line). A failed or killed process gives one ``fairseq-stream:
error:`` line quoting the last line of its log, with the command that re-runs it alone: the
same command with ``--workdir``, which re-uses the finished shards (a finished shard whose
output was cut short since is named and decoded again). One run at a time holds the workdir
(``workdir.lock``); SIGINT or SIGTERM stops the shards, says which finished and how to resume,
and exits 130 / 143. ``--stream-stats`` is checked before any shard starts.

Under ``torchrun`` (several machines, or a cluster scheduler that starts one process per
device) each process is one shard::

    torchrun --nnodes 2 --nproc-per-node 4 ... --no-python fairseq-stream-shard \\
        --workdir /shared/run1 data-bin/wmt --user-dir fairseq_stream --path ckpt.pt ...

The rank and the number of shards come from the environment torchrun sets (``RANK``,
``WORLD_SIZE``; ``LOCAL_RANK`` picks the GPU, ``LOCAL_WORLD_SIZE`` divides the cores);
``--nprocs`` may be left out. ``--workdir`` is required and must be one folder every machine
reaches. Rank 0 checks and claims the workdir while the others wait (one
``torch.distributed`` broadcast over gloo, then the group is closed); every rank decodes its
shard as above (the same manifest, files and sharding, so a local run with ``--nprocs
WORLD_SIZE`` finishes or re-uses the same shards); rank 0 then waits for every shard's output
(``--shard-timeout`` seconds after its own, one error line naming the missing shards when it
runs out, at once when a rank reports a failure) and prints the merged output. A rank that
fails says so in one line with the command that re-runs its shard alone; running the torchrun
command again re-uses the finished shards.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence

from fairseq_stream.engine.output_paths import check_output_path
from fairseq_stream.errors import PREFIX, FairseqStreamError
from fairseq_stream.search.defaults import prune_auto_on
from fairseq_stream.tools.shard.launch import failure_message, resume_command, run_shards
from fairseq_stream.tools.shard.merge import write_merged
from fairseq_stream.tools.shard.plan import (
    capped_nprocs, even_batching, option_value, plan_shards, refuse_empty_input, visible_gpus,
)
from fairseq_stream.tools.shard.torchrun import run_rank, torchrun_ranks
from fairseq_stream.tools.shard.workdir import (
    LOCK, MANIFEST, claim_workdir, fingerprint, input_files, lock_workdir, make_workdir,
)


def _parse(argv: Sequence[str]) -> "tuple[argparse.Namespace, List[str]]":
    parser = argparse.ArgumentParser(
        prog="fairseq-stream-shard", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # fairseq-generate's own options pass through untouched
        usage="fairseq-stream-shard --nprocs N [--workdir DIR] DATA <fairseq-generate arguments>\n"
              "       torchrun ... --no-python fairseq-stream-shard --workdir DIR DATA <fairseq-generate arguments>",
    )
    parser.add_argument("--nprocs", type=int, default=None,
                        help="processes (shards) to decode with; under torchrun: WORLD_SIZE (may be left out)")
    parser.add_argument("--workdir", default=None, help="shard outputs and logs; re-run with it to resume")
    parser.add_argument("--devices", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: one GPU per process when GPUs are visible, else CPU")
    parser.add_argument("--fresh", action="store_true",
                        help="start over in --workdir, deleting the shards of an earlier run there")
    parser.add_argument("--shard-timeout", type=float, default=3600.0,
                        help="under torchrun: seconds rank 0 waits for the other shards once its own is done "
                             "(and for the group to form)")
    args, generate_args = parser.parse_known_args(argv)
    if args.shard_timeout <= 0:
        raise FairseqStreamError(f"--shard-timeout must be > 0 seconds, got {args.shard_timeout}")
    if args.nprocs is not None and args.nprocs < 1:
        raise FairseqStreamError(f"--nprocs must be >= 1, got {args.nprocs}")
    for flag in ("--distributed-world-size", "--distributed-rank", "--num-shards", "--shard-id", "--results-path"):
        if any(a == flag or a.startswith(flag + "=") for a in generate_args):
            raise FairseqStreamError(f"{flag} is fairseq-stream-shard's to set (one shard per process, "
                                     "output collected from stdout); leave it out")
    if "--quiet" in generate_args:
        raise FairseqStreamError("--quiet hides the sentence lines that fairseq-stream-shard merges and checks; leave it out")
    if not generate_args or generate_args[0].startswith("-"):
        raise FairseqStreamError("the data directory (fairseq-generate's first argument) must follow the options")
    return args, generate_args


def prune_auto_warning(generate_args: Sequence[str]) -> Optional[str]:
    """The one line said when the run steers its pruning (``--prune-auto``, opt-in): it is the one setting whose
    output depends on the split."""
    given: Dict[str, Optional[str]] = {}
    for i, arg in enumerate(generate_args):  # --name value, --name=value or a bare flag
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            following = generate_args[i + 1] if i + 1 < len(generate_args) else None
            given[name.replace("-", "_")] = value if eq else (
                following if following is not None and not following.startswith("--") else "")
    if given.get("prune_auto") == "":
        given["prune_auto"] = "on"  # the bare flag
    if not prune_auto_on(SimpleNamespace(**given)):
        return None
    return ("fairseq-stream: warning: --prune-auto steers each shard on its own input (probes "
            "of its own batches), so the shards may move through other settings than one process would and the "
            "output can differ from one process's; each shard's --prune-auto line is in its shardI.log "
            "(without --prune-auto the shards decode as one process)")


class Stopped(BaseException):
    """SIGINT or SIGTERM to the shard parent, raised where it is (a BaseException: no ``except Exception``
    on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the workers' stop short
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signum)


def check_stats_path(generate_args: Sequence[str], workdir: Optional[str], nprocs: Optional[int]) -> None:
    """The run's own ``--stream-stats``, checked before any shard starts (it is written after the merge)."""
    stats = option_value(generate_args, "--stream-stats")
    if stats is None:
        return
    own: List[str] = []
    if workdir is not None:  # the workdir's files: a resume reads them
        own = [os.path.join(workdir, name) for name in (MANIFEST, LOCK)] + [
            os.path.join(workdir, f"shard{i}{ext}") for i in range(nprocs or 0)
            for ext in (".out", ".log", ".stats.json", ".out.partial")]
    check_output_path(stats, "--stream-stats", inputs=input_files(generate_args),
                      outputs=[("a file of --workdir", path) for path in own])


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, generate_args = _parse(argv)
        ranks = torchrun_ranks(dict(os.environ))
        warning = prune_auto_warning(generate_args)
        if warning and (ranks is None or ranks.rank == 0):  # said once per run
            print(warning, file=sys.stderr, flush=True)
        if ranks is None and args.nprocs is None:
            raise FairseqStreamError("--nprocs N is required (or start one process per shard with torchrun)")
        refuse_empty_input(generate_args)  # every shard would fail
        check_stats_path(generate_args, args.workdir, ranks.world_size if ranks else args.nprocs)
        if ranks is not None:
            run_rank(args, generate_args, argv, ranks)
            return
        run_local(args, generate_args, argv)
    except FairseqStreamError as exc:
        print(PREFIX + str(exc), file=sys.stderr)
        sys.exit(1)


def run_local(args: argparse.Namespace, generate_args: List[str], argv: List[str]) -> None:
    """The shards as processes of this one; the merged output on stdout. The workdir is locked for the
    run; a temporary one is removed at the end unless a message names it for a resume."""
    temporary = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="fairseq-stream-shard.")
    keep, lock = False, None
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    nprocs = args.nprocs
    try:
        make_workdir(workdir)
        lock = lock_workdir(workdir)
        manifest = {"argv": ["--nprocs", str(args.nprocs), "--devices", args.devices, *generate_args],
                    "inputs": fingerprint(generate_args)}
        claim_workdir(workdir, manifest, args.fresh)
        generate_args = generate_args + even_batching(args.nprocs, generate_args)
        nprocs = capped_nprocs(args.nprocs, generate_args)
        shards = plan_shards(nprocs, generate_args, workdir, visible_gpus(args.devices))
        codes = run_shards(shards)
        if any(codes.values()):  # the workdir stays: the failure line's command re-uses its finished shards
            keep = True
            raise FairseqStreamError(failure_message(shards, codes, nprocs, argv, workdir))
        write_merged(shards, workdir, generate_args, kept=not temporary)
    except Stopped as stop:
        keep = _say_stopped(stop.signum, workdir, nprocs, argv, temporary)
        sys.exit(128 + stop.signum)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if lock is not None:
            lock.close()
        if temporary and not keep:  # a folder of our own making: nothing to resume from it
            shutil.rmtree(workdir, ignore_errors=True)


def _say_stopped(signum: int, workdir: str, nprocs: int, argv: List[str], temporary: bool) -> bool:
    """One line on a signal: which shards finished and the command that resumes; whether to keep a
    temporary workdir (only when something finished there)."""
    name = signal.Signals(signum).name
    finished = [i for i in range(nprocs) if os.path.exists(os.path.join(workdir, f"shard{i}.out"))]
    if temporary and not finished:
        print(f"fairseq-stream-shard: stopped by {name}: no shard had finished (workers stopped, the temporary "
              "workdir removed); run the command again to start over", file=sys.stderr, flush=True)
        return False
    stopped = [i for i in range(nprocs) if i not in finished]
    done = (f"shard(s) {', '.join(map(str, finished))} of {nprocs} finished" if finished
            else f"no shard of {nprocs} had finished")
    print(f"fairseq-stream-shard: stopped by {name}: {done}"
          + (f", shard(s) {', '.join(map(str, stopped))} stopped (their workers ended, partial output discarded)"
             if stopped else "")
          + f"; resume (finished shards are re-used): {resume_command(argv, workdir, nprocs)}",
          file=sys.stderr, flush=True)
    return True
