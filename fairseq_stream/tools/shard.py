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
same command with ``--workdir``, which re-uses the finished shards.

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
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from fairseq_stream.errors import PREFIX, FairseqStreamError
from fairseq_stream.search.defaults import prune_auto_on

#: Per-sentence lines of fairseq-generate: S(ource), T(arget), H(ypothesis), D(etokenised),
#: P(ositional scores), A(lignment), E/I (steps of iterative decoders).
_SENTENCE_LINE = re.compile(r"^([STHDPAEI])-(\d+)\t")
_TRANSLATED = re.compile(r"Translated ([\d,]+) sentences")


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


def prune_auto_warning(generate_args: Sequence[str], on_cuda: bool = False) -> Optional[str]:
    """The one line said when the run steers its pruning (``--prune-auto``, var-stream's default on a CPU): it is
    the one setting whose output depends on the split. ``on_cuda``: the shards run on GPUs."""
    given: Dict[str, Optional[str]] = {}
    for i, arg in enumerate(generate_args):  # --name value, --name=value or a bare flag
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            following = generate_args[i + 1] if i + 1 < len(generate_args) else None
            given[name.replace("-", "_")] = value if eq else (
                following if following is not None and not following.startswith("--") else "")
    if given.get("prune_auto") == "":
        given["prune_auto"] = "on"  # the bare flag
    beam = given.get("beam")
    if not prune_auto_on(given.get("search") or "", SimpleNamespace(**given), on_cuda,
                         int(beam) if beam and beam.isdigit() else None):
        return None
    return ("fairseq-stream: warning: --prune-auto (var-stream's default) steers each shard on its own input (probes "
            "of its own batches), so the shards may move through other settings than one process would and the "
            "output can differ from one process's; each shard's --prune-auto line is in its shardI.log "
            "(--prune-auto off or an explicit δ decodes as one process)")


def _visible_gpus(devices: str) -> List[str]:
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
        argv = _with_value(base, "--stream-stats", stem + ".stats.json")
        shards.append(Shard(i, argv + ["--distributed-world-size", str(nprocs), "--distributed-rank", str(i)], env,
                            stem + ".out", stem + ".log", stem + ".pid"))
    return shards


def _with_value(argv: Sequence[str], flag: str, value: str) -> List[str]:
    """``argv`` with every value of ``flag`` (``--flag v`` or ``--flag=v``) replaced by ``value``."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == flag and i + 1 < len(out):
            out[i + 1] = value
        elif arg.startswith(flag + "="):
            out[i] = f"{flag}={value}"
    return out


def merge_stats(shards: List[Shard], path: str) -> None:
    """The run's ``--stream-stats`` file: the shards' statistics summed, and each shard's as it wrote it.

    Counts (sentences, timesteps, expansions, ``extra``'s counters, ...) are summed; the peaks
    (``peak_*``, ``encoder_slots``) are the largest shard's; ``wall_seconds`` is the shards' decoding
    time summed (they ran at once, so ``sentences_per_second`` is a rate per process). The per-step
    ``trace`` and a ``prune_auto`` choice that differs between shards are not merged: they stay
    under ``shards``, one entry per shard in shard order.
    """
    import dataclasses

    from fairseq_stream.engine.stats import DecodeStats

    names = {f.name for f in dataclasses.fields(DecodeStats)}
    per_shard: List[Dict[str, Any]] = []
    total = DecodeStats()
    missing = []
    for shard in shards:
        try:
            with open(shard.stats, encoding="utf-8") as f:
                one = json.load(f)
        except (OSError, ValueError):
            missing.append(shard.index)
            continue
        per_shard.append(dict(one, shard=shard.index))
        total.merge(DecodeStats(**{k: v for k, v in one.items() if k in names and k != "trace"}))
    if not per_shard:
        print(f"fairseq-stream-shard: warning: no shard wrote statistics (in {os.path.dirname(shards[0].stats)}); "
              f"--stream-stats {path} not written", file=sys.stderr)
        return
    choices = [p.get("prune_auto") or {} for p in per_shard]
    total.prune_auto = choices[0] if all(c == choices[0] for c in choices) else {}
    merged = dict(total.to_dict(), search=per_shard[0].get("search"), merged_shards=len(per_shard),
                  missing_shards=missing, shards=per_shard)
    if missing:
        print(f"fairseq-stream-shard: warning: shard(s) {missing} wrote no statistics; --stream-stats {path} holds "
              f"the other {len(per_shard)} shard(s)' only", file=sys.stderr)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(merged, f, indent=1)


def _failure(code: int) -> str:
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


def _translated(path: str) -> int:
    """The sentence count of fairseq-generate's "Translated N sentences" log line in ``path``."""
    with open(path, encoding="utf-8") as f:
        found = [m for m in map(_TRANSLATED.search, f) if m]
    return int(found[-1].group(1).replace(",", "")) if found else 0


def merge_outputs(paths: List[str], translated: int) -> "tuple[List[str], List[str]]":
    """Sentence lines of all shards in id order, and the other lines of their outputs.

    Raises when an id appears in two shards, when ids are missing below the largest one, or
    when the shards output another number of sentences than they say they ``translated``.
    """
    blocks: Dict[int, List[str]] = {}
    owner: Dict[int, int] = {}
    other: List[str] = []
    for shard, path in enumerate(paths):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = _SENTENCE_LINE.match(line)
                if m is None:
                    other.append(f"[shard {shard}] {line}")
                    continue
                sid = int(m.group(2))
                if owner.setdefault(sid, shard) != shard:
                    raise FairseqStreamError(f"sentence {sid} was decoded by shards {owner[sid]} and {shard}")
                if m.group(1) == "S" and any(x.startswith("S-") for x in blocks.get(sid, [])):
                    raise FairseqStreamError(f"sentence {sid} appears twice in shard {shard}")
                blocks.setdefault(sid, []).append(line)
    missing = sorted(set(range(max(blocks, default=-1) + 1)) - set(blocks))
    if missing or len(blocks) != translated:
        raise FairseqStreamError(
            f"the shards translated {translated} sentences but output {len(blocks)} ids"
            + (f" (missing ids {missing[:5]}{'...' if len(missing) > 5 else ''})" if missing else "")
        )
    return [line for sid in sorted(blocks) for line in blocks[sid]], other


def _resume_command(argv: Sequence[str], workdir: str, nprocs: int) -> str:
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


def _sentences_in(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.startswith("S-"))


# ---- the workdir's manifest: which run made it --------------------------------------------
MANIFEST = "manifest.json"


def _option_value(argv: Sequence[str], *flags: str) -> Optional[str]:
    """The value of the last of ``flags`` in ``argv`` (``--flag v`` or ``--flag=v``), or None."""
    found = None
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in flags:
            found = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return found


def input_files(generate_args: Sequence[str]) -> List[str]:
    """The files a run's output depends on: the split's binarized files, the dictionaries, the checkpoints."""
    subset = _option_value(generate_args, "--gen-subset") or "test"
    found: List[str] = []
    for folder in generate_args[0].split(":"):
        if os.path.isdir(folder):
            found += sorted(os.path.join(folder, name) for name in os.listdir(folder)
                            if name.startswith(subset + ".") or (name.startswith("dict.") and name.endswith(".txt")))
    found += [p for p in (_option_value(generate_args, "--path") or "").split(":") if p and os.path.isfile(p)]
    return found


def fingerprint(generate_args: Sequence[str]) -> Dict[str, List[int]]:
    """path → [size, mtime in ns] of :func:`input_files` (cheap; a changed file changes one of them)."""
    return {path: [os.stat(path).st_size, os.stat(path).st_mtime_ns] for path in input_files(generate_args)}


def _options(argv: Sequence[str]) -> Dict[str, str]:
    """flag → its value(s), the positional data directory as DATA (for naming what differs)."""
    out: Dict[str, str] = {}
    key = "DATA"
    for arg in argv:
        if arg.startswith("--") or (arg.startswith("-") and len(arg) == 2 and arg[1].isalpha()):
            key, _, value = arg.partition("=")
            out[key] = value
        else:
            out[key] = (out.get(key, "") + " " + arg).strip()
    return out


def manifest_difference(old: Dict[str, object], new: Dict[str, object]) -> List[str]:
    """What differs between two manifests, one phrase per argument or input file."""
    before, after = _options(old.get("argv", [])), _options(new.get("argv", []))  # type: ignore[arg-type]
    diffs = [f"{key} {before.get(key, '(unset)')!s} -> {after.get(key, '(unset)')!s}".replace("  ", " ")
             for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    old_files, new_files = old.get("inputs", {}), new.get("inputs", {})
    # A file read by one run only follows from an argument that differs (--gen-subset, --path, DATA),
    # already named: only files both runs read, changed on disk, are news (or any file, if no argument differs).
    both = set(old_files) & set(new_files)  # type: ignore[arg-type]
    changed = sorted(p for p in set(old_files) | set(new_files)  # type: ignore[arg-type]
                     if old_files.get(p) != new_files.get(p) and (p in both or not diffs))  # type: ignore[union-attr]
    if changed:
        diffs.append("input files changed: " + ", ".join(os.path.basename(p) for p in changed[:3])
                     + ("..." if len(changed) > 3 else ""))
    return diffs


def claim_workdir(workdir: str, manifest: Dict[str, object], fresh: bool) -> None:
    """Record ``manifest`` in ``workdir``, refusing one made by another run (``fresh``: start over)."""
    path = os.path.join(workdir, MANIFEST)
    leftovers = [n for n in os.listdir(workdir)
                 if re.match(r"shard\d+\.(out|log|pid|failed|out\.partial|stats\.json)$", n)]
    if fresh:
        for name in leftovers + ([MANIFEST] if os.path.exists(path) else []):
            os.remove(os.path.join(workdir, name))
    elif os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        diffs = manifest_difference(old, manifest)
        if diffs:
            raise FairseqStreamError(f"--workdir {workdir} holds the shards of another run ({'; '.join(diffs)}); "
                                     "pass --fresh to overwrite them or choose another --workdir")
        return
    elif leftovers:
        raise FairseqStreamError(f"--workdir {workdir} holds shard files without a {MANIFEST} (another run or "
                                 "version made them); pass --fresh to overwrite them or choose another --workdir")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)


# ---- no empty shard: as many processes as batches at most ---------------------------------
def split_sizes(generate_args: Sequence[str]) -> "Optional[tuple[np.ndarray, np.ndarray]]":
    """(source, target) lengths of the split's sentences, read from its binarized files (None: not found)."""
    from fairseq.data import data_utils, indexed_dataset

    folder, subset = generate_args[0].split(":")[0], _option_value(generate_args, "--gen-subset") or "test"
    src, tgt = _option_value(generate_args, "-s", "--source-lang"), _option_value(generate_args, "-t", "--target-lang")
    if src is None or tgt is None:
        src, tgt = data_utils.infer_language_pair(folder)
    sizes = []
    for lang in (src, tgt):
        prefix = os.path.join(folder, f"{subset}.{src}-{tgt}.{lang}")
        if src and tgt and indexed_dataset.dataset_exists(prefix, impl="mmap"):
            dataset = indexed_dataset.make_dataset(prefix, impl="mmap")
            sizes.append(np.array(dataset.sizes, dtype=np.int64, copy=True))  # a copy: the memory map closes with it
            del dataset
    return (sizes[0], sizes[-1]) if sizes else None


def even_batching(nprocs: int, generate_args: Sequence[str]) -> List[str]:
    """Batch options that deal the input evenly to ``nprocs`` processes, where the user chose none.

    fairseq deals whole batches round-robin, and its default batching (``--max-tokens 12000``, a
    multiple of 8 sentences) cut 10 short sentences 8 + 2. Without ``--batch-size``/``--max-tokens``
    the shards get batches of ⌈n / nprocs⌉ sentences (under fairseq's default token budget, so a
    batch is never larger than it would have been) cut at any size: 10 sentences over 2 → 5 / 5.
    The user's own batch options are kept as given (a shard then equals one process to the bit).
    """
    if nprocs <= 1 or _option_value(generate_args, "--batch-size", "--max-sentences", "--max-tokens") is not None:
        return []
    try:
        sizes = split_sizes(generate_args)
    except Exception:  # an unusual data layout: fairseq-generate's own checks will speak
        return []
    if sizes is None or len(sizes[0]) == 0:
        return []
    per_process = -(-len(sizes[0]) // nprocs)
    extra = ["--max-tokens", "12000", "--batch-size", str(per_process)]
    if _option_value(generate_args, "--required-batch-size-multiple") is None:
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
    max_sentences = _option_value(generate_args, "--batch-size", "--max-sentences")
    max_tokens = _option_value(generate_args, "--max-tokens")
    if max_sentences is None and max_tokens is None:
        max_tokens = "12000"  # fairseq-generate's default
    batches = data_utils.batch_by_size(
        indices, lambda i: int(tokens[i]), num_tokens_vec=tokens[indices],
        max_tokens=int(max_tokens) if max_tokens else None, max_sentences=int(max_sentences) if max_sentences else None,
        required_batch_size_multiple=int(_option_value(generate_args, "--required-batch-size-multiple") or 8))
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


def _last_log_line(path: str) -> str:
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
    last = _last_log_line(shards[i].log)
    return (f"shard {i} of {nprocs} failed ({_failure(codes[i])}; log {shards[i].log}"
            + (f": {last[:300]!r}" if last else "")
            + (f"; also failed: shards {failed[1:]}" if failed[1:] else "")
            + f"); re-run it alone (finished shards are re-used): {_resume_command(argv, workdir, nprocs)}")


# ---- torchrun: one shard per rank -----------------------------------------------------------
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
    os.makedirs(workdir, exist_ok=True)
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
    shards = rank_shard(ranks, generate_args, workdir, _visible_gpus(args.devices))
    mine = shards[ranks.rank]
    codes = run_shards([mine])
    if codes.get(ranks.rank):
        with open(mine.failed, "w", encoding="utf-8") as f:
            f.write(_failure(codes[ranks.rank]) + "\n")
        raise FairseqStreamError(failure_message(shards, codes, world, argv, workdir))
    if ranks.rank != 0:
        print(f"fairseq-stream-shard: rank {ranks.rank} of {world}: shard done ({mine.out})", file=sys.stderr)
        return
    wait_for_shards(shards, args.shard_timeout, lambda s: _reported_failure(s, shards, world, argv, workdir))
    print_merged(shards, workdir, generate_args)


def _reported_failure(shard: Shard, shards: List[Shard], world: int, argv: Sequence[str], workdir: str) -> str:
    with open(shard.failed, encoding="utf-8") as f:
        what = f.read().strip()
    last = _last_log_line(shard.log)
    return (f"shard {shard.index} of {world} failed ({what}; log {shard.log}" + (f": {last[:300]!r}" if last else "")
            + f"); re-run it alone (finished shards are re-used): {_resume_command(argv, workdir, world)}")


def merged_score(lines: Sequence[str], generate_args: Sequence[str]) -> Optional[str]:
    """fairseq-generate's closing score line for the whole input, from the merged lines.

    Each shard prints its own ``Generate ... BLEU4 = ...`` over its sentences; this is the line
    one process would print: every sentence's ``T-`` line against its first ``D-`` line (the
    strings fairseq-generate scores), through fairseq's own scorer (``--scoring bleu``, the
    default, or ``sacrebleu``). None without targets, under another ``--scoring``, or where
    fairseq scores token ids that the printed lines do not show (``--tokenizer``/``--bpe``
    without ``--remove-bpe``).
    """
    refs: Dict[int, str] = {}
    hyps: Dict[int, str] = {}
    for line in lines:
        m = _SENTENCE_LINE.match(line)
        if m and m.group(1) == "T":
            refs[int(m.group(2))] = line.rstrip("\n").split("\t", 1)[1]
        elif m and m.group(1) == "D":
            hyps.setdefault(int(m.group(2)), line.rstrip("\n").split("\t", 2)[-1])
    scoring = _option_value(generate_args, "--scoring") or "bleu"
    if not refs or set(refs) != set(hyps) or scoring not in ("bleu", "sacrebleu"):
        return None
    given = lambda *flags: any(a.split("=", 1)[0] in flags for a in generate_args)  # noqa: E731
    if scoring == "bleu" and not given("--remove-bpe", "--post-process") and given("--tokenizer", "--bpe"):
        return None  # fairseq scores the token ids then, which the detokenised lines no longer show
    from fairseq.scoring import bleu

    if scoring == "sacrebleu":
        scorer: Any = bleu.SacrebleuScorer(bleu.SacrebleuConfig(
            sacrebleu_tokenizer=_option_value(generate_args, "--sacrebleu-tokenizer") or "13a"))
        for sid in sorted(refs):
            scorer.add_string(refs[sid], hyps[sid])
    else:  # as fairseq-generate does after --remove-bpe: both strings encoded by one dictionary
        from fairseq.data import Dictionary

        words = Dictionary()
        scorer = bleu.Scorer(bleu.BleuConfig(pad=words.pad(), eos=words.eos(), unk=words.unk()))
        for sid in sorted(refs):
            scorer.add(words.encode_line(refs[sid], add_if_not_exist=True),
                       words.encode_line(hyps[sid], add_if_not_exist=True))
    subset = _option_value(generate_args, "--gen-subset") or "test"
    return f"Generate {subset} with beam={_option_value(generate_args, '--beam') or 5}: {scorer.result_string()}"


def print_merged(shards: List[Shard], workdir: str, generate_args: Sequence[str] = (), kept: bool = True) -> None:
    """Every shard's sentence lines once, in id order, on stdout, then the score of the whole input;
    their other lines (each shard's own score among them) on stderr."""
    # fairseq logs to stdout or stderr depending on who configured logging first.
    translated = sum(max(_translated(s.out), _translated(s.log)) for s in shards)
    lines, other = merge_outputs([s.out for s in shards], translated)
    sys.stderr.writelines(other)
    empty = [s.index for s in shards if _sentences_in(s.out) == 0]
    if empty:
        print(f"fairseq-stream-shard: warning: shard(s) {empty} got no sentences: fairseq shards whole batches; "
              "pass a smaller --batch-size or --max-tokens to use every process", file=sys.stderr)
    sys.stdout.writelines(lines)
    stats = _option_value(generate_args, "--stream-stats")
    if stats:
        merge_stats(shards, stats)
    score = merged_score(lines, generate_args) if generate_args else None
    if score is not None:
        print(score)
    where = f"outputs in {workdir}" if kept else "temporary outputs removed; --workdir DIR keeps them"
    split = " + ".join(str(_sentences_in(s.out)) for s in shards)
    print(f"fairseq-stream-shard: {translated} sentences from {len(shards)} shards ({split}; {where})", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, generate_args = _parse(argv)
        ranks = torchrun_ranks(dict(os.environ))
        on_cuda = "--cpu" not in generate_args and bool(_visible_gpus(args.devices))
        warning = prune_auto_warning(generate_args, on_cuda)
        if warning and (ranks is None or ranks.rank == 0):  # said once per run
            print(warning, file=sys.stderr, flush=True)
        if ranks is not None:
            run_rank(args, generate_args, argv, ranks)
            return
        if args.nprocs is None:
            raise FairseqStreamError("--nprocs N is required (or start one process per shard with torchrun)")
        workdir = args.workdir or tempfile.mkdtemp(prefix="fairseq-stream-shard.")
        os.makedirs(workdir, exist_ok=True)
        manifest = {"argv": ["--nprocs", str(args.nprocs), "--devices", args.devices, *generate_args],
                    "inputs": fingerprint(generate_args)}
        claim_workdir(workdir, manifest, args.fresh)
        generate_args = generate_args + even_batching(args.nprocs, generate_args)
        nprocs = capped_nprocs(args.nprocs, generate_args)
        shards = plan_shards(nprocs, generate_args, workdir, _visible_gpus(args.devices))
        codes = run_shards(shards)
        if any(codes.values()):  # the workdir stays: the failure line's command re-uses its finished shards
            raise FairseqStreamError(failure_message(shards, codes, nprocs, argv, workdir))
        print_merged(shards, workdir, generate_args, kept=args.workdir is not None)
        if args.workdir is None:  # a folder of our own making: nothing to resume from it
            shutil.rmtree(workdir, ignore_errors=True)
    except FairseqStreamError as exc:
        print(PREFIX + str(exc), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
