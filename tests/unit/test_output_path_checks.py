"""engine/output_paths.py (issue 80): an output file is refused before any work when it cannot be written
or names a file the run reads, the results file or stdout's file; it is written whole or not at all, and a
failure is one line naming the option."""
from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys

import pytest

from conftest import REPO
from fairseq_stream.engine.output_paths import check_output_path, data_files, write_text_checked
from fairseq_stream.errors import FairseqStreamError


def refusal(path: str, **kwargs) -> str:
    with pytest.raises(FairseqStreamError) as info:
        check_output_path(path, "--stream-stats", **kwargs)
    message = str(info.value)
    assert "\n" not in message and "--stream-stats" in message
    return message


def test_unwritable_places_are_refused(tmp_path):
    assert "is a directory" in refusal(str(tmp_path))
    assert "does not exist" in refusal(str(tmp_path / "missing" / "s.json"))
    assert "needs a file name" in refusal("")
    assert "No space left" in refusal("/dev/full")  # a device that refuses writes, found by a zero-byte write
    read_only = tmp_path / "ro.json"
    read_only.write_text("x")
    read_only.chmod(0o444)  # the mode bits count, also for root (whom access() lets write anywhere)
    assert "read-only file" in refusal(str(read_only))
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert "not writable" in refusal(str(folder / "s.json"))
    finally:
        folder.chmod(0o755)
    check_output_path("/dev/null", "--stream-stats")
    check_output_path(str(tmp_path / "new.json"), "--stream-stats")


def test_inputs_and_other_outputs_are_refused(tmp_path):
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"weights")
    os.link(ckpt, tmp_path / "hard.pt")
    os.symlink(ckpt, tmp_path / "link.pt")
    inputs = [("the checkpoint of --path", str(ckpt))]
    for name in ("m.pt", "hard.pt", "link.pt"):  # the same file by any name
        assert "the checkpoint of --path" in refusal(str(tmp_path / name), inputs=inputs)
    results = str(tmp_path / "r" / "generate-test.txt")  # not there yet: compared by name
    os.makedirs(tmp_path / "r")
    assert "--results-path" in refusal(results, outputs=[("--results-path's file", results)])
    check_output_path(str(tmp_path / "s.json"), "--stream-stats", inputs=inputs, outputs=[("x", results)])


@pytest.mark.parametrize("fd, name", [(1, "stdout"), (2, "stderr")])
def test_the_file_stdout_goes_to_is_refused(tmp_path, fd, name):
    target = tmp_path / "out.txt"
    saved = os.dup(fd)
    try:
        with open(target, "w") as f:
            os.dup2(f.fileno(), fd)
        words = "standard output" if fd == 1 else "standard error"
        with pytest.raises(FairseqStreamError, match=words):
            check_output_path(str(target), "--stream-stats")
        with pytest.raises(FairseqStreamError, match=words):
            check_output_path(f"/dev/{name}", "--stream-stats")
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def test_data_files_are_what_fairseq_reads(tmp_path):
    for name in ("dict.en.txt", "test.es-en.en.bin", "test.es-en.en.idx", "test.es-en.es", "stats.json", "notes.txt"):
        (tmp_path / name).write_text("x")
    found = sorted(os.path.basename(p) for p in data_files(f"{tmp_path}:{tmp_path / 'missing'}"))
    assert found == ["dict.en.txt", "test.es-en.en.bin", "test.es-en.en.idx", "test.es-en.es"]


def test_a_write_is_whole_or_nothing(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    write_text_checked(str(path), "first", "--stream-stats")
    assert path.read_text() == "first"

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(FairseqStreamError, match=r"--stream-stats .*No space left on device") as info:
        write_text_checked(str(path), "second, longer", "--stream-stats")
    assert "\n" not in str(info.value)
    assert path.read_text() == "first"  # the old file stays whole, and no temporary file is left
    assert os.listdir(tmp_path) == ["s.json"]


def test_devices_are_written_in_place(tmp_path):
    write_text_checked("/dev/null", "x", "--json")
    with pytest.raises(FairseqStreamError, match=r"^--json /dev/full: could not write the file \(No space left"):
        write_text_checked("/dev/full", "x" * 10000, "--json")
    link = tmp_path / "link.json"  # a symlink's target is written, the link kept
    target = tmp_path / "target.json"
    target.write_text("old")
    os.symlink(target, link)
    write_text_checked(str(link), "new", "--json")
    assert target.read_text() == "new" and stat.S_ISLNK(os.lstat(link).st_mode)


def test_a_failed_write_at_exit_is_one_line_and_status_1():
    """Where fairseq's main was not wrapped, the statistics are written by an atexit callback, whose
    exceptions Python only prints (status 0): it says the line and ends the process with status 1."""
    code = ("import atexit\n"
            "from fairseq_stream.errors import FairseqStreamError\n"
            "from fairseq_stream.integration import generator\n"
            "class Full:\n"
            "    def report(self):\n"
            "        raise FairseqStreamError('--stream-stats /dev/full: could not write the file')\n"
            "generator._unreported.append(Full())\n"
            "atexit.register(generator._report_at_exit)\n"
            "print('translations', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 1 and proc.stdout == "translations\n"
    assert proc.stderr.strip() == "fairseq-stream: error: --stream-stats /dev/full: could not write the file"
