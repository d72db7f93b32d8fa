"""Output files of every tool (issue 80, round 6): ``--stream-stats`` of fairseq-generate and
fairseq-interactive, the Python session's ``stream_stats``, the benchmark's ``--json`` and rows'
``stream_stats``, the frontier's ``--out``, the demo's ``--outputs``.

Each is checked before the first decode — one line and a non-zero exit for a file that cannot be
written (``/dev/full``, a read-only file or folder) or that names a checkpoint, the data, ``--input``,
the results file or the file stdout goes to — and written whole or not at all at the end, where a
failure (a full disk) is one line and exit status 1, never "Exception ignored in atexit" and status 0.
The fairseq cases run in one process that forks per case (``cli_cases.py``; stdout is a file there).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

from conftest import DEMO, REPO, binarize, read_lines

PREFIX = "fairseq-stream: error: "
N = 12  # sentences of the binarized split


def _errors(stderr: str) -> List[str]:
    return [line for line in stderr.splitlines() if line.startswith(PREFIX)]


class Files:
    """Copies of the demo's files (a refusal that fails must not destroy the shipped ones)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.data = binarize(os.path.join(root, "bin"), {"test": N})
        for name in ("checkpoint.pt", "draft.pt", "lookahead_prior.pt"):
            shutil.copy(os.path.join(DEMO, name), os.path.join(root, name))
        self.ckpt, self.draft, self.prior = (os.path.join(root, n) for n in ("checkpoint.pt", "draft.pt", "lookahead_prior.pt"))
        os.link(self.ckpt, os.path.join(root, "member.pt"))  # a second ensemble member (the same weights)
        self.member = os.path.join(root, "member.pt")
        self.read_only = os.path.join(root, "read-only.json")
        with open(self.read_only, "w") as f:
            f.write("{}")
        os.chmod(self.read_only, 0o444)
        self.input = os.path.join(root, "input.es")
        with open(self.input, "w", encoding="utf-8") as f:
            f.write("\n".join(read_lines(os.path.join(DEMO, "test.es"), 2)) + "\n")
        self.sizes = {p: os.path.getsize(p) for p in (self.ckpt, self.draft, self.prior, self.input)}


def _gen(f: Files, *extra: str, path: str = "") -> List[str]:
    return ["fairseq-generate", f.data, "--user-dir", "fairseq_stream", "--path", path or f.ckpt, "--cpu",
            "--gen-subset", "test", "--search", "var-stream", "--beam", "2", *extra]


def _interactive(f: Files, *extra: str) -> List[str]:
    return ["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", f.ckpt, "--cpu", "-s", "es",
            "-t", "en", "--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", os.path.join(DEMO, "bpe.codes"),
            "--search", "var-stream", "--beam", "2", *extra]


def cases(f: Files) -> Dict[str, Tuple[List[str], List[str]]]:
    """name -> (argv, words the one error line must hold)."""
    results = os.path.join(f.root, "results")
    return {
        "generate-dev-full": (_gen(f, "--stream-stats", "/dev/full"), ["--stream-stats /dev/full", "No space left"]),
        "generate-checkpoint": (_gen(f, "--stream-stats", f.ckpt), ["checkpoint of --path"]),
        "generate-ensemble-member": (_gen(f, "--stream-stats", f.member, path=f"{f.ckpt}:{f.member}"),
                                     ["checkpoint of --path"]),
        "generate-results-file": (_gen(f, "--results-path", results, "--stream-stats",
                                       os.path.join(results, "generate-test.txt")), ["--results-path"]),
        "generate-stdout-file": (_gen(f, "--stream-stats", "/dev/stdout"), ["standard output"]),
        "generate-read-only-file": (_gen(f, "--stream-stats", f.read_only), ["read-only file"]),
        "generate-data-file": (_gen(f, "--stream-stats", os.path.join(f.data, "test.es-en.es.bin")), ["the data"]),
        "generate-draft": (_gen(f, "--search", "speculative", "--beam", "1", "--draft-path", f.draft,
                                "--stream-stats", f.draft), ["--draft-path"]),
        "generate-prior": (_gen(f, "--search", "lookahead", "--beam", "1", "--lookahead-prior", f.prior,
                                "--stream-stats", f.prior), ["--lookahead-prior"]),
        "interactive-dev-full": (_interactive(f, "--input", f.input, "--stream-stats", "/dev/full"), ["/dev/full"]),
        "interactive-input": (_interactive(f, "--input", f.input, "--stream-stats", f.input), ["is --input"]),
    }


CASE_IDS = ["generate-dev-full", "generate-checkpoint", "generate-ensemble-member", "generate-results-file",
            "generate-stdout-file", "generate-read-only-file", "generate-data-file", "generate-draft", "generate-prior",
            "interactive-dev-full", "interactive-input"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    files = Files(str(tmp_path_factory.mktemp("output_paths")))
    catalogue = cases(files)
    assert sorted(catalogue) == sorted(CASE_IDS)
    payload = [{"argv": argv} for argv, _ in catalogue.values()]
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "integration", "cli_cases.py")], cwd=REPO,
                          input=json.dumps(payload), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return files, dict(zip(catalogue, zip(catalogue.values(), json.loads(proc.stdout))))


@pytest.mark.parametrize("name", CASE_IDS)
def test_a_bad_stats_path_is_refused_before_the_decode(outcomes, name):
    """Was: written at exit over whatever it named (the 30 MB checkpoint, the results file: 0 of 100
    hypotheses), or "Exception ignored in atexit callback" and status 0 with no statistics."""
    files, found = outcomes
    (_, words), result = found[name]
    errors = _errors(result["stderr"])
    assert result["rc"] == 1 and len(errors) == 1, result["stderr"][-2000:]
    assert all(w in errors[0] for w in words), errors[0]
    assert "Traceback" not in result["stderr"] and "Exception ignored" not in result["stderr"]
    assert not [line for line in result["stdout"].splitlines() if line.startswith("H-")]  # refused before decoding
    assert {p: os.path.getsize(p) for p in files.sizes} == files.sizes  # nothing it reads was touched


def test_a_full_disk_at_the_end_is_one_line_and_status_1(tmp_path):
    """The statistics are written at the end of fairseq-generate's main: a write that fails there (the disk
    filled during the run: fsync reports ENOSPC) leaves no file, says one line and exits 1."""
    data = binarize(str(tmp_path / "bin"), {"test": N})
    stats = tmp_path / "stats.json"
    argv = _gen_argv(data, "--stream-stats", str(stats))
    code = ("import errno, os, sys\n"
            "import fairseq_cli.generate\n"
            f"sys.argv = {argv!r}\n"
            "def full(fd):\n"
            "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
            "os.fsync = full\n"
            "fairseq_cli.generate.cli_main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    errors = _errors(proc.stderr)
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-2000:]
    assert "--stream-stats" in errors[0] and "No space left on device" in errors[0]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert len([line for line in proc.stdout.splitlines() if line.startswith("H-")]) == N  # the work is there
    assert os.listdir(tmp_path) == ["bin"]  # no statistics file that looks complete, no temporary file


def _gen_argv(data: str, *extra: str) -> List[str]:
    return ["fairseq-generate", data, "--user-dir", "fairseq_stream", "--path", os.path.join(DEMO, "checkpoint.pt"),
            "--cpu", "--gen-subset", "test", "--search", "var-stream", "--beam", "2", *extra]


def test_the_session_writes_stream_stats(demo_session, demo_sources, tmp_path):
    """Was: ``translate(opts={"stream_stats": P})`` accepted and never written."""
    from fairseq_stream.errors import FairseqStreamError

    stats = tmp_path / "stats.json"
    result = demo_session.translate(demo_session.encode(demo_sources[:3]), search="var-stream", gen={"beam": 2},
                                    opts={"stream_stats": str(stats)})
    written = json.loads(stats.read_text())
    assert written["sentences"] == 3 == result.stats.sentences and written["search"] == "var-stream"
    assert written["trace"]  # the per-step trace, as fairseq-generate's file has it
    for bad, words in (("/dev/full", "No space left"), (os.path.join(DEMO, "checkpoint.pt"), "checkpoint of --path"),
                       (str(tmp_path), "is a directory")):
        with pytest.raises(FairseqStreamError, match="--stream-stats") as info:
            demo_session.translate(demo_session.encode(demo_sources[:1]), search="var-stream", gen={"beam": 2},
                                   opts={"stream_stats": bad})
        assert words in str(info.value)


def _tool(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))


@pytest.mark.parametrize("tool", ["bench-json", "demo-outputs", "frontier-out-read-only"] + [
    pytest.param(t, marks=pytest.mark.slow) for t in ("bench-row-stats", "demo-outputs-read-only", "bench-json-is-src")])
def test_tool_outputs_are_checked_before_the_work(tool, tmp_path):
    """Was: bench --json /dev/full, a row's stream_stats=/dev/full, demo --outputs /dev/full or read-only,
    frontier --out in a read-only folder: a traceback after the whole run."""
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    argv = {
        "bench-json": ("fairseq_stream.tools.bench", "--limit", "2", "--json", "/dev/full"),
        "bench-row-stats": ("fairseq_stream.tools.bench", "--limit", "2", "--repeats", "1", "--warmup", "0",
                            "--run", "var-stream:stream_stats=/dev/full"),
        "bench-json-is-src": ("fairseq_stream.tools.bench", "--limit", "2", "--json", os.path.join(DEMO, "test.es")),
        "demo-outputs": ("fairseq_stream.tools.demo", "--limit", "2", "--outputs", "/dev/full"),
        "demo-outputs-read-only": ("fairseq_stream.tools.demo", "--limit", "2", "--outputs", str(read_only / "o.json")),
        "frontier-out-read-only": ("fairseq_stream.tools.frontier", "--limit", "2", "--out", str(read_only / "f")),
    }[tool]
    try:
        proc = _tool(*argv)
    finally:
        read_only.chmod(0o755)
    errors = _errors(proc.stderr)
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not proc.stdout.strip()  # nothing was measured first
    assert read_lines(os.path.join(DEMO, "test.es"), 1)  # the demo's files are intact
