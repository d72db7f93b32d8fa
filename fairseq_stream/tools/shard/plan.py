"""The shards of a run: one fairseq-generate command per process, and batch options that give every
process a batch (fairseq shards whole batches, round-robin)."""
from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from fairseq_stream.errors import FairseqStreamError


@dataclass
class Shard:
    index: int
    argv: List[str]  # the fairseq-generate command of this shard
    env: Dict[str, str]  # environment changes (CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS)
    out: str
    log: str
    pid: str

    @property
    def stats(self) -> str:
        """This shard's ``--stream-stats`` file (merged into the run's own by :func:`merge_stats`)."""
        return self.out[: -len(".out")] + ".stats.json"

    @property
    def failed(self) -> str:
        """Written by a torchrun rank whose shard failed (rank 0 then stops waiting)."""
        return self.out[: -len(".out")] + ".failed"

    def command_line(self) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (prefix + " " if prefix else "") + shlex.join(self.argv)


def option_value(argv: Sequence[str], *flags: str) -> Optional[str]:
    """The value of the last of ``flags`` in ``argv`` (``--flag v`` or ``--flag=v``), or None."""
    found = None
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in flags:
            found = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return found


def with_value(argv: Sequence[str], flag: str, value: str) -> List[str]:
    """``argv`` with every value of ``flag`` (``--flag v`` or ``--flag=v``) replaced by ``value``."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == flag and i + 1 < len(out):
            out[i + 1] = value
        elif arg.startswith(flag + "="):
            out[i] = f"{flag}={value}"
    return out


def visible_gpus(devices: str) -> List[str]:
    """The GPU ids this command may hand out ([] = CPU)."""
    if devices == "cpu":
        return []
    import torch

    if not torch.cuda.is_available():
        if devices == "cuda":
            raise FairseqStreamError("--devices cuda: torch sees no GPU")
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in visible.split(",") if d.strip()] if visible else []
    return ids or [str(i) for i in range(torch.cuda.device_count())]


def plan_shards(nprocs: int, generate_args: List[str], workdir: str, gpus: List[str]) -> List[Shard]:
    """One fairseq-generate command (and environment) per shard."""
    base = [sys.executable, "-m", "fairseq_cli.generate", *generate_args]
    if not gpus and "--cpu" not in generate_args:
        base.append("--cpu")
    threads = str(max(1, (os.cpu_count() or 1) // nprocs))
    shards = []
    for i in range(nprocs):
        env = {"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else {}
        if not gpus and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = threads  # N processes share the cores
        stem = os.path.join(workdir, f"shard{i}")
        # Each shard its own statistics file: under one --stream-stats F every process wrote F, the last one's won.
        argv = with_value(base, "--stream-stats", stem + ".stats.json")
        shards.append(Shard(i, argv + ["--distributed-world-size", str(nprocs), "--distributed-rank", str(i)], env,
                            stem + ".out", stem + ".log", stem + ".pid"))
    return shards


def split_sizes(generate_args: Sequence[str]) -> "Optional[tuple[np.ndarray, np.ndarray]]":
    """(source, target) lengths of the split's sentences, read from its binarized files (None: not found)."""
    prefixes = split_prefixes(generate_args)
    if not prefixes:
        return None
    from fairseq.data import indexed_dataset

    sizes = []
    for prefix in prefixes:
        # The index alone: mapping the data file fails on an empty split ("cannot mmap an empty file").
        index = indexed_dataset.MMapIndexedDataset.Index(indexed_dataset.index_file_path(prefix))
        sizes.append(np.array(index.sizes, dtype=np.int64, copy=True))  # a copy: the memory map closes with it
        del index
    return sizes[0], sizes[-1]


def split_prefixes(generate_args: Sequence[str]) -> List[str]:
    """The split's binarized files (source then target, without ``.idx``/``.bin``) that exist."""
    from fairseq.data import data_utils, indexed_dataset

    folder, subset = generate_args[0].split(":")[0], option_value(generate_args, "--gen-subset") or "test"
    src, tgt = option_value(generate_args, "-s", "--source-lang"), option_value(generate_args, "-t", "--target-lang")
    if src is None or tgt is None:
        src, tgt = data_utils.infer_language_pair(folder)
    if not (src and tgt):
        return []
    prefixes = [os.path.join(folder, f"{subset}.{src}-{tgt}.{lang}") for lang in (src, tgt)]
    return [p for p in prefixes if indexed_dataset.dataset_exists(p, impl="mmap")]


def refuse_empty_input(generate_args: Sequence[str]) -> None:
    """One line, before any process starts, for a split without sentences (every shard would fail)."""
    try:
        sizes = split_sizes(generate_args)
    except Exception:  # an unusual data layout: fairseq-generate's own checks will speak
        return
    if sizes is not None and len(sizes[0]) == 0:
        subset = option_value(generate_args, "--gen-subset") or "test"
        raise FairseqStreamError(
            f"the {subset} split of {generate_args[0].split(':')[0]} holds no sentences "
            f"({os.path.basename(split_prefixes(generate_args)[0])}.idx lists none): nothing to decode; binarize "
            "a split with sentences or choose another --gen-subset")


def even_batching(nprocs: int, generate_args: Sequence[str]) -> List[str]:
    """Batch options that deal the input evenly to ``nprocs`` processes, where the user chose none.

    fairseq deals whole batches round-robin, and its default batching (``--max-tokens 12000``, a
    multiple of 8 sentences) cut 10 short sentences 8 + 2. Without ``--batch-size``/``--max-tokens``
    the shards get batches of ⌈n / nprocs⌉ sentences (under fairseq's default token budget, so a
    batch is never larger than it would have been) cut at any size: 10 sentences over 2 → 5 / 5.
    The user's own batch options are kept as given (a shard then equals one process to the bit).
    """
    if nprocs <= 1 or option_value(generate_args, "--batch-size", "--max-sentences", "--max-tokens") is not None:
        return []
    try:
        sizes = split_sizes(generate_args)
    except Exception:  # an unusual data layout: fairseq-generate's own checks will speak
        return []
    if sizes is None or len(sizes[0]) == 0:
        return []
    per_process = -(-len(sizes[0]) // nprocs)
    extra = ["--max-tokens", "12000", "--batch-size", str(per_process)]
    if option_value(generate_args, "--required-batch-size-multiple") is None:
        extra += ["--required-batch-size-multiple", "1"]
    return extra


def count_batches(generate_args: Sequence[str]) -> Optional[int]:
    """The batches fairseq-generate cuts the split into (None when it cannot be told up front).

    The same sizes, order (target then source length) and ``batch_by_size`` as the task, the
    dropped tail put back; sentences the model's positions filter out are not known here.
    """
    from fairseq.data import data_utils

    sizes = split_sizes(generate_args)
    if sizes is None:
        return None
    src_sizes, tgt_sizes = sizes
    indices = np.arange(len(src_sizes), dtype=np.int64)
    indices = indices[np.argsort(tgt_sizes[indices], kind="mergesort")]
    indices = indices[np.argsort(src_sizes[indices], kind="mergesort")]
    tokens = np.maximum(src_sizes, tgt_sizes)
    max_sentences = option_value(generate_args, "--batch-size", "--max-sentences")
    max_tokens = option_value(generate_args, "--max-tokens")
    if max_sentences is None and max_tokens is None:
        max_tokens = "12000"  # fairseq-generate's default
    batches = data_utils.batch_by_size(
        indices, lambda i: int(tokens[i]), num_tokens_vec=tokens[indices],
        max_tokens=int(max_tokens) if max_tokens else None, max_sentences=int(max_sentences) if max_sentences else None,
        required_batch_size_multiple=int(option_value(generate_args, "--required-batch-size-multiple") or 8))
    kept = sum(len(b) for b in batches)
    return len(batches) + (kept < len(indices))  # the task puts the dropped tail back as one batch


def capped_nprocs(nprocs: int, generate_args: Sequence[str]) -> int:
    """``nprocs``, or the number of batches when that is smaller (said in one line on stderr)."""
    try:
        batches = count_batches(generate_args)
    except Exception:  # an unusual data layout: fairseq-generate's own checks will speak
        return nprocs
    if batches is None or batches >= nprocs:
        return nprocs
    batches = max(batches, 1)
    print(f"fairseq-stream-shard: the input makes {batches} batch(es) for --nprocs {nprocs}: starting {batches} "
          "process(es), an empty shard would fail; pass a smaller --batch-size or --max-tokens to use more",
          file=sys.stderr, flush=True)
    return batches
