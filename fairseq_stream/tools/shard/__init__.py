"""``fairseq-stream-shard``: decode one input on several processes (one GPU each when present).

The command and its options: :mod:`.cli` (``fairseq-stream-shard --help``; docs/sharding.md). Its parts:
:mod:`.plan` (one fairseq-generate command per shard, batch options that give every process a batch),
:mod:`.workdir` (the manifest: which run made a workdir), :mod:`.launch` (the processes and their
failures), :mod:`.merge` (the outputs in id order, the score and statistics of the whole input) and
:mod:`.torchrun` (one shard per rank).
"""
from fairseq_stream.tools.shard.cli import main, prune_auto_warning
from fairseq_stream.tools.shard.launch import failure_message, resume_command, run_shards
from fairseq_stream.tools.shard.merge import merge_outputs, merge_stats, merged_score, print_merged
from fairseq_stream.tools.shard.plan import Shard, capped_nprocs, count_batches, even_batching, plan_shards
from fairseq_stream.tools.shard.torchrun import Ranks, rank_shard, run_rank, torchrun_ranks, wait_for_shards
from fairseq_stream.tools.shard.workdir import claim_workdir, fingerprint, input_files, manifest_difference

__all__ = [
    "main", "prune_auto_warning", "failure_message", "resume_command", "run_shards", "merge_outputs", "merge_stats",
    "merged_score", "print_merged", "Shard", "capped_nprocs", "count_batches", "even_batching", "plan_shards",
    "Ranks", "rank_shard", "run_rank", "torchrun_ranks", "wait_for_shards", "claim_workdir", "fingerprint",
    "input_files", "manifest_difference",
]
