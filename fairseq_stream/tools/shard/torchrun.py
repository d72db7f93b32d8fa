"""Under torchrun: one shard per rank; rank 0 claims the workdir, waits for every shard and merges."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.tools.shard.launch import failure_message, failure_of, last_log_line, resume_command, run_shards
from fairseq_stream.tools.shard.merge import write_merged
from fairseq_stream.tools.shard.plan import Shard, count_batches, even_batching, plan_shards, visible_gpus
from fairseq_stream.tools.shard.workdir import claim_workdir, fingerprint, make_workdir


@dataclass(frozen=True)
class Ranks:
    """This process's place among the processes torchrun started (its environment variables)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def torchrun_ranks(environ: Dict[str, str]) -> Optional[Ranks]:
    """The ranks torchrun (or a scheduler setting the same variables) gave this process, or None."""
    names = ("RANK", "WORLD_SIZE")
    if not any(n in environ for n in names):
        return None
    if not all(n in environ for n in names):
        raise FairseqStreamError("RANK and WORLD_SIZE must be set together (torchrun sets both); "
                                 f"found only {[n for n in names if n in environ][0]}")
    try:
        rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        local, local_world = int(environ.get("LOCAL_RANK", rank)), int(environ.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise FairseqStreamError("RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be integers") from None
    if world < 1 or not 0 <= rank < world or not 0 <= local < local_world:
        raise FairseqStreamError(f"RANK {rank} / WORLD_SIZE {world} (LOCAL_RANK {local} / LOCAL_WORLD_SIZE "
                                 f"{local_world}) is not a rank of the group")
    return Ranks(rank, world, local, local_world)


def rank_shard(ranks: Ranks, generate_args: List[str], workdir: str, gpus: List[str]) -> List[Shard]:
    """Every shard of the run (as :func:`plan_shards` for ``WORLD_SIZE`` processes), this rank's
    with its machine's device: GPU ``LOCAL_RANK``, or the cores shared by the machine's ranks."""
    shards = plan_shards(ranks.world_size, generate_args, workdir, gpus)
    mine = shards[ranks.rank]
    if gpus:
        mine.env = {"CUDA_VISIBLE_DEVICES": gpus[ranks.local_rank % len(gpus)]}
    elif "OMP_NUM_THREADS" not in os.environ:
        mine.env = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // ranks.local_world_size))}
    return shards


def claim_together(ranks: Ranks, timeout: float, claim: Callable[[], None]) -> None:
    """Rank 0 runs ``claim`` (check and record the workdir) while the others wait; all learn
    its outcome. One broadcast over gloo: no rank looks at the workdir before rank 0 is done
    with it (``--fresh`` deletes files there)."""
    import datetime

    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    try:
        message: List[Optional[str]] = [None]
        if ranks.rank == 0:
            try:
                claim()
            except FairseqStreamError as exc:
                message[0] = str(exc)
        dist.broadcast_object_list(message, src=0)
    finally:
        dist.destroy_process_group()
    if message[0] is not None:
        raise FairseqStreamError(message[0] if ranks.rank == 0 else f"rank 0 refused the workdir: {message[0]}")


def wait_for_shards(shards: List[Shard], timeout: float, failure: Callable[[Shard], str], poll: float = 0.5) -> None:
    """Until every shard's output exists; one error when a rank reported a failure, or after
    ``timeout`` seconds naming the shards still missing."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [s for s in shards if not os.path.exists(s.out)]
        failed = [s for s in missing if os.path.exists(s.failed)]
        if failed:
            raise FairseqStreamError(failure(failed[0]))
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise FairseqStreamError(
                f"waited {timeout:g} s (--shard-timeout) for shard(s) {[s.index for s in missing]} of {len(shards)}: "
                f"no {os.path.basename(missing[0].out)} in {os.path.dirname(missing[0].out)} (still running, or "
                f"its rank was killed: see {missing[0].log})")
        time.sleep(poll)


def run_rank(args: argparse.Namespace, generate_args: List[str], argv: List[str], ranks: Ranks) -> None:
    """Decode this rank's shard; rank 0 then waits for the others' and prints the merged output."""
    if args.workdir is None:
        raise FairseqStreamError("under torchrun every rank needs --workdir: one folder that every machine reaches")
    if args.nprocs is not None and args.nprocs != ranks.world_size:
        raise FairseqStreamError(f"--nprocs {args.nprocs} differs from torchrun's WORLD_SIZE {ranks.world_size}; "
                                 "leave --nprocs out")
    workdir, world = args.workdir, ranks.world_size
    make_workdir(workdir)
    manifest = {"argv": ["--nprocs", str(world), "--devices", args.devices, *generate_args],
                "inputs": fingerprint(generate_args)}
    def claim() -> None:
        claim_workdir(workdir, manifest, args.fresh)
        for name in os.listdir(workdir):  # failures of an earlier run: their shards run again now
            if re.match(r"shard\d+\.failed$", name):
                os.remove(os.path.join(workdir, name))

    claim_together(ranks, args.shard_timeout, claim)
    generate_args = generate_args + even_batching(world, generate_args)  # as a local run with --nprocs world
    try:
        batches = count_batches(generate_args)
    except Exception:  # an unusual data layout: fairseq-generate's own checks will speak
        batches = None
    if batches is not None and batches < world:
        raise FairseqStreamError(f"the input makes {batches} batch(es) for {world} ranks: an empty shard would fail; "
                                 "pass a smaller --batch-size or --max-tokens, or start fewer ranks")
    shards = rank_shard(ranks, generate_args, workdir, visible_gpus(args.devices))
    mine = shards[ranks.rank]
    codes = run_shards([mine])
    if codes.get(ranks.rank):
        with open(mine.failed, "w", encoding="utf-8") as f:
            f.write(failure_of(codes[ranks.rank]) + "\n")
        raise FairseqStreamError(failure_message(shards, codes, world, argv, workdir))
    if ranks.rank != 0:
        print(f"fairseq-stream-shard: rank {ranks.rank} of {world}: shard done ({mine.out})", file=sys.stderr)
        return
    wait_for_shards(shards, args.shard_timeout, lambda s: _reported_failure(s, shards, world, argv, workdir))
    write_merged(shards, workdir, generate_args)


def _reported_failure(shard: Shard, shards: List[Shard], world: int, argv: Sequence[str], workdir: str) -> str:
    with open(shard.failed, encoding="utf-8") as f:
        what = f.read().strip()
    last = last_log_line(shard.log)
    return (f"shard {shard.index} of {world} failed ({what}; log {shard.log}" + (f": {last[:300]!r}" if last else "")
            + f"); re-run it alone (finished shards are re-used): {resume_command(argv, workdir, world)}")
