"""The workdir's manifest: which run made it (its arguments, its input files' sizes and times), so a
resume re-uses only shards of the same run."""
from __future__ import annotations

import json
import os
import re
from typing import IO, Dict, List, Sequence

from fairseq_stream.engine.output_paths import write_text_checked
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.tools.shard.plan import option_value


MANIFEST = "manifest.json"
LOCK = "workdir.lock"


def input_files(generate_args: Sequence[str]) -> List[str]:
    """The files a run's output depends on: the split's binarized files, the dictionaries, the checkpoints."""
    subset = option_value(generate_args, "--gen-subset") or "test"
    found: List[str] = []
    for folder in generate_args[0].split(":"):
        if os.path.isdir(folder):
            found += sorted(os.path.join(folder, name) for name in os.listdir(folder)
                            if name.startswith(subset + ".") or (name.startswith("dict.") and name.endswith(".txt")))
    found += [p for p in (option_value(generate_args, "--path") or "").split(":") if p and os.path.isfile(p)]
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


def make_workdir(workdir: str) -> None:
    """Create ``workdir`` if needed; one line when it is a file or cannot be written."""
    try:
        os.makedirs(workdir, exist_ok=True)
    except FileExistsError:
        raise FairseqStreamError(f"--workdir {workdir} is a file, not a folder; choose another --workdir "
                                 "(a new or existing folder)") from None
    except OSError as exc:
        raise FairseqStreamError(f"--workdir {workdir} cannot be created ({exc.strerror}); choose another "
                                 "--workdir") from None
    # The mode bits as well as access(): as root access() says yes to a folder the user made read-only.
    if not os.access(workdir, os.W_OK | os.X_OK) or not os.stat(workdir).st_mode & 0o200:
        raise FairseqStreamError(f"--workdir {workdir} is not writable (the shards write their outputs there); "
                                 "make it writable or choose another --workdir")


def lock_workdir(workdir: str) -> IO[str]:
    """Hold an exclusive lock on ``workdir`` for this run (keep the returned file open until the end).

    Two runs in one workdir decoded every shard into the same partial files. ``flock`` is released by
    the kernel when the process ends, however it ends, so a crash never leaves a stale lock.
    """
    import fcntl

    path = os.path.join(workdir, LOCK)
    try:
        lock = open(path, "a+", encoding="utf-8")
    except OSError as exc:
        raise FairseqStreamError(f"--workdir {workdir}: cannot open {LOCK} ({exc.strerror}); make the folder "
                                 "writable or choose another --workdir") from None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip()
        lock.close()
        raise FairseqStreamError(f"--workdir {workdir} is in use by another fairseq-stream-shard"
                                 + (f" (process {holder})" if holder.isdigit() else "")
                                 + "; wait for it to finish (or stop it), or choose another --workdir") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _read_manifest(workdir: str) -> Dict[str, object]:
    """The manifest of an earlier run; one line when it cannot be read (cut short, not this tool's)."""
    path = os.path.join(workdir, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "cut short or not JSON"
        old, problem = None, f"cannot be read ({why})"
    else:
        problem = "is not a manifest of fairseq-stream-shard"
    if isinstance(old, dict) and isinstance(old.get("argv"), list) and isinstance(old.get("inputs"), dict):
        return old
    raise FairseqStreamError(f"--workdir {workdir}: its {MANIFEST} {problem}, so its shards cannot be matched to "
                             "this run; pass --fresh to start over there (every shard is decoded again) or choose "
                             "another --workdir")


def claim_workdir(workdir: str, manifest: Dict[str, object], fresh: bool) -> None:
    """Record ``manifest`` in ``workdir``, refusing one made by another run (``fresh``: start over)."""
    path = os.path.join(workdir, MANIFEST)
    leftovers = [n for n in os.listdir(workdir)
                 if re.match(r"shard\d+\.(out|log|pid|failed|out\.partial|stats\.json)$", n)]
    if fresh:
        try:
            for name in leftovers + ([MANIFEST] if os.path.exists(path) else []):
                os.remove(os.path.join(workdir, name))
        except OSError as exc:
            raise FairseqStreamError(f"--workdir {workdir}: --fresh cannot remove {exc.filename} ({exc.strerror}); "
                                     "make the folder writable or choose another --workdir") from None
    elif os.path.exists(path):
        diffs = manifest_difference(_read_manifest(workdir), manifest)
        if diffs:
            raise FairseqStreamError(f"--workdir {workdir} holds the shards of another run ({'; '.join(diffs)}); "
                                     "pass --fresh to overwrite them or choose another --workdir")
        return
    elif leftovers:
        raise FairseqStreamError(f"--workdir {workdir} holds shard files without a {MANIFEST} (another run or "
                                 "version made them); pass --fresh to overwrite them or choose another --workdir")
    # Whole or not at all: a manifest cut short by a full disk or a kill would refuse every resume.
    write_text_checked(path, json.dumps(manifest, indent=1), "--workdir")
