"""Output files of a run, checked before the first decode and written so that a failure is seen.

Every file a tool writes besides its translations (``--stream-stats``, the benchmark's ``--json``,
the frontier's ``--out``, the demo's ``--outputs``) goes through this module twice:

* :func:`check_output_path` before any work: the path must be a file that can be written (not a
  directory, not in a missing or read-only folder, not a read-only file, not a device that refuses
  writes such as ``/dev/full``), and it must not name anything the run reads or writes otherwise —
  a checkpoint, a data file, the results file, another output, or the file stdout is redirected
  to. Without it a typo replaced a 30 MB checkpoint with 23 KB of JSON, and statistics written to
  the results file left none of its hypotheses (issue 80).
* :func:`write_text_checked` at the end: a temporary file beside the target, fsync, rename — so a
  full disk never leaves a truncated file that looks complete — and any ``OSError`` becomes one
  :class:`~fairseq_stream.errors.FairseqStreamError` line naming the option.
"""
from __future__ import annotations

import os
import stat
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from fairseq_stream.errors import FairseqStreamError

#: An input or another output: a path, or ``(what it is, path)`` so the refusal can name it.
Named = Union[str, Tuple[str, str]]


def _named(items: Iterable[Named], default: str) -> Iterable[Tuple[str, str]]:
    for item in items:
        if isinstance(item, tuple):
            yield item[0], item[1]
        elif item:
            yield default, item


#: What fairseq reads from a data folder: dictionaries, binarized splits (.bin/.idx) and raw text splits.
_DATA_SUFFIXES = (".bin", ".idx")


def data_files(data: str) -> List[str]:
    """The existing files of fairseq's data folder(s) ``data`` (``a:b``) that a run may read: ``dict.*``,
    binarized splits and raw splits (``test.es-en.en``): no output may overwrite them. Other
    files there (a statistics file of an earlier run) stay writable."""
    found = []
    for folder in filter(None, data.split(os.pathsep)):
        try:
            names = os.listdir(folder)
        except OSError:  # not a folder (or missing): fairseq says so itself
            continue
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and (name.startswith("dict.") or name.endswith(_DATA_SUFFIXES)
                                         or _is_raw_split(name)):
                found.append(path)
    return found


def _is_raw_split(name: str) -> bool:
    # fairseq's raw splits are named as its binarized ones: "test.es-en.en" (split, pair, language).
    parts = name.split(".")
    return len(parts) == 3 and "-" in parts[1] and parts[2] in parts[1].split("-")


def _stat(path: str) -> Optional[os.stat_result]:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same_file(path: str, st: Optional[os.stat_result], other: str) -> bool:
    """The same file by device and inode when both exist, else the same resolved path."""
    other_st = _stat(other)
    if st is not None and other_st is not None:
        return (st.st_dev, st.st_ino) == (other_st.st_dev, other_st.st_ino)
    return os.path.realpath(path) == os.path.realpath(other)


def _std_stream(st: Optional[os.stat_result]) -> Optional[str]:
    """"standard output" (or error) when the file is where that stream is redirected to, else None.
    Regular files and pipes only: a terminal or /dev/null shared with them loses nothing."""
    if st is None:
        return None
    for fd, name in ((1, "standard output"), (2, "standard error")):
        try:
            out = os.fstat(fd)
        except OSError:  # closed
            continue
        if (stat.S_ISREG(out.st_mode) or stat.S_ISFIFO(out.st_mode)) and (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            return name
    return None


def _probe_device(path: str, option: str) -> None:
    """A zero-byte write: /dev/full answers it with ENOSPC, a terminal or /dev/null with 0."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"")
        finally:
            os.close(fd)
    except OSError as exc:
        raise FairseqStreamError(f"{option} {path}: cannot write there ({exc.strerror}); choose another path") from None


def _check_folder(path: str, option: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FairseqStreamError(f"{option} {path}: the directory {folder!r} does not exist; create it or choose "
                                 "another path")
    # The mode bits as well as access(): as root access() says yes to a folder the user made read-only.
    if not os.access(folder, os.W_OK) or not os.stat(folder).st_mode & 0o222:
        raise FairseqStreamError(f"{option} {path}: the directory {folder!r} is not writable; choose another path")


def check_output_path(path: str, option: str, *, inputs: Sequence[Named] = (),
                      outputs: Sequence[Named] = ()) -> None:
    """Refuse, in one line naming ``option``, an output path that cannot be written or would destroy
    something: ``inputs`` are files the run reads (checkpoints, data), ``outputs`` the run's other
    outputs (the results file, another option's file); each a path or ``(what, path)``."""
    if not path or not str(path).strip():
        raise FairseqStreamError(f"{option} needs a file name, got {path!r}")
    path = str(path)
    st = _stat(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise FairseqStreamError(f"{option} {path} is a directory; choose another path (a file name)")
    for what, other in _named(inputs, "an input of this run"):
        if _same_file(path, st, other):
            raise FairseqStreamError(f"{option} {path} is {what} ({other}); writing there would destroy it: "
                                     "choose another path")
    for what, other in _named(outputs, "another output of this run"):
        if _same_file(path, st, other):
            raise FairseqStreamError(f"{option} {path} is also {what} ({other}); one would overwrite the other: "
                                     "choose another path")
    stream = _std_stream(st)
    if stream is not None:
        raise FairseqStreamError(f"{option} {path} is the file {stream} goes to; what the run prints there and "
                                 "the file would overwrite each other: choose another path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISCHR(st.st_mode):
            _probe_device(path, option)
        return  # a device or a pipe is written in place (write_text_checked)
    _check_folder(path, option)
    if st is not None and (not os.access(path, os.W_OK) or not st.st_mode & 0o222):
        raise FairseqStreamError(f"{option} {path} is a read-only file; make it writable or choose another path")


def _write_in_place(path: str, data: bytes) -> None:
    # A device or pipe (/dev/null, /dev/full, a terminal) cannot be renamed over; written and flushed.
    with open(path, "wb") as f:
        f.write(data)
        f.flush()


def _write_replacing(path: str, data: bytes) -> None:
    target = os.path.realpath(path)  # a symlink's target is replaced, not the link
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # a full disk shows here, not after the rename
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_bytes_checked(path: str, data: bytes, option: str) -> None:
    """Write ``data`` to ``path`` whole or not at all (a temporary file beside it, fsync, rename; a
    device in place); a failure is one line naming ``option``."""
    try:
        st = _stat(path)
        if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            _write_in_place(path, data)
        else:
            _write_replacing(path, data)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise FairseqStreamError(f"{option} {path}: could not write the file ({why}); nothing was written there: "
                                 "free space or choose another path") from None


def write_text_checked(path: str, text: str, option: str) -> None:
    """:func:`write_bytes_checked` of ``text`` in UTF-8."""
    write_bytes_checked(path, text.encode("utf-8"), option)
