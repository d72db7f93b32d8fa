"""fairseq-interactive at a terminal (a pty: lines arrive one at a time, each its own chunk) decodes each line once:
the default pruning takes no probe on credit from a sentence that is all the stream can see (issue 80, round 6)."""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

import pytest

from conftest import DEMO, REPO

pty = pytest.importorskip("pty")
LINES = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra."]


class _Terminal:
    """A command run on a pseudo-terminal: what it printed so far, read as it comes."""

    def __init__(self, argv: list[str]) -> None:
        self.out = b""
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, on the terminal
            os.chdir(REPO)
            os.environ.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
            os.execv(argv[0], argv)

    def wait_for(self, text: str, timeout: float = 180.0) -> bool:
        end = time.monotonic() + timeout
        while text.encode() not in self.out and time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:  # the command ended
                    return text.encode() in self.out
                if not data:
                    break
                self.out += data
        return text.encode() in self.out

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def end(self) -> int:
        os.write(self.fd, b"\x04")  # Ctrl-D: the end of the input
        self.wait_for("\0never\0", timeout=60)
        try:
            return os.waitpid(self.pid, 0)[1]
        finally:
            os.close(self.fd)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@pytest.mark.parametrize("extra", [["--stream-per-batch"], pytest.param([], marks=pytest.mark.slow)])
def test_a_line_typed_at_a_terminal_is_decoded_once(tmp_path, extra):
    stats = tmp_path / "stats.json"
    exe = os.path.join(os.path.dirname(sys.executable), "fairseq-interactive")
    term = _Terminal([exe, DEMO, "--user-dir", "fairseq_stream", "--path", os.path.join(DEMO, "checkpoint.pt"), "--cpu",
                      "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
                      "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--search", "var-stream", "--beam", "4",
                      "--prune-auto", "--stream-stats", str(stats), *extra])  # opt-in: a terminal line gets no probe
    try:
        assert term.wait_for("Type the input sentence"), term.out[-2000:]
        for i, line in enumerate(LINES):  # each line translated before the next is typed
            term.type(line)
            assert term.wait_for(f"\nH-{i}\t"), term.out[-2000:]
        status = term.end()
    finally:
        term.kill()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, term.out[-2000:]
    auto = json.loads(stats.read_text())["prune_auto"]
    assert auto["probes"] == 0 and auto["probed_ids"] == [] and auto["probe_work"] == 0, auto
    assert json.loads(stats.read_text())["sentences"] == len(LINES)
