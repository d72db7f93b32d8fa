"""Faults of the process around a decode (issue 80, round 6): stdout that fails, memory that runs out, a
data loader that must not hang.

Each case runs the real fairseq-generate / fairseq-interactive (or a Python session) in a subprocess
with a timeout, so that a hang fails the test instead of the CI job; resource limits are set in the
child (``preexec_fn`` with ``resource.setrlimit``, as ``ulimit`` does).
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from typing import Callable, List, Optional

import pytest
import torch

from conftest import DEMO, REPO, binarize
from fairseq_stream.errors import FairseqStreamError, format_error

CKPT = os.path.join(DEMO, "checkpoint.pt")
PREFIX = "fairseq-stream: error: "
TIMEOUT = 240  # seconds: a run takes ~10 s; only a hang gets near this
SOURCES = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra.",
           "Y la tierra estaba desordenada y vacía."] * 4


@pytest.fixture(scope="module")
def small_bin(tmp_path_factory) -> str:
    """12 binarized demo sentences."""
    return binarize(str(tmp_path_factory.mktemp("faults_bin")), {"test": 12})


def _exe(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def _generate(data: str, *extra: str) -> List[str]:
    return [_exe("fairseq-generate"), data, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
            "--gen-subset", "test", "--max-len-b", "20", *extra]


def _interactive(*extra: str) -> List[str]:
    return [_exe("fairseq-interactive"), DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
            "--source-lang", "es", "--target-lang", "en", "--max-len-b", "20", "--tokenizer", "moses",
            "--bpe", "subword_nmt", "--bpe-codes", os.path.join(DEMO, "bpe.codes"), *extra]


def _limit(kind: int, value: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(kind, (value, resource.getrlimit(kind)[1]))
    return preexec


def _run(argv: List[str], *, stdout, stdin: Optional[str] = None, preexec=None) -> subprocess.CompletedProcess:
    """``argv`` with stdout where the case says, stderr captured; a hang fails the test after TIMEOUT."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    try:
        return subprocess.run(argv, cwd=REPO, input=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                              env=env, preexec_fn=preexec, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no exit within {TIMEOUT} s: {' '.join(argv)}")


def _one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The run failed with exactly one error line holding every needle, and no traceback."""
    err = proc.stderr
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert proc.returncode == 1 and len(lines) == 1, (proc.returncode, err[-3000:])
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---- stdout ----

def _closed_pipe() -> int:
    """The write end of a pipe whose reader has already gone (``| head -1`` after its line)."""
    read, write = os.pipe()
    os.close(read)
    return write


STDOUT_FAULTS = ["dev-full", pytest.param("file-size-limit", marks=pytest.mark.slow), "reader-gone", "closed"]


@pytest.mark.parametrize("tool", ["generate", pytest.param("interactive", marks=pytest.mark.slow)])
@pytest.mark.parametrize("fault", STDOUT_FAULTS)
def test_a_failing_stdout_ends_the_run_as_a_unix_tool(small_bin, tmp_path, tool, fault):
    """> /dev/full and ulimit -f: one line naming stdout and the cause (were: OSError tracebacks); a reader that
    went away: quiet, status 141 (was: a BrokenPipeError traceback, status 1); >&-: refused before decoding
    (was: exit 0 with every translation lost)."""
    argv = _generate(small_bin) if tool == "generate" else _interactive()
    stdin = "\n".join(SOURCES) + "\n" if tool == "interactive" else None
    preexec, stdout = None, None
    if fault == "dev-full":
        stdout = open("/dev/full", "w")
    elif fault == "file-size-limit":  # Python ignores SIGXFSZ: the write fails with EFBIG
        stdout, preexec = open(tmp_path / "out.txt", "w"), _limit(resource.RLIMIT_FSIZE, 1024)
    elif fault == "reader-gone":
        stdout = _closed_pipe()
    else:
        stdout, preexec = subprocess.DEVNULL, lambda: os.close(1)
    try:
        proc = _run(argv, stdout=stdout, stdin=stdin, preexec=preexec)
    finally:
        if fault == "reader-gone":
            os.close(stdout)
        elif hasattr(stdout, "close"):
            stdout.close()
    if fault == "reader-gone":
        assert proc.returncode == 141, (proc.returncode, proc.stderr[-3000:])
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr[-3000:]
        assert PREFIX not in proc.stderr, proc.stderr[-3000:]
    elif fault == "closed":
        _one_line(proc, "stdout is closed")
    else:
        _one_line(proc, "stdout", "disk is full" if fault == "dev-full" else "ulimit -f")


@pytest.mark.slow  # a decode in a subprocess; the fast tier keeps the stdout and memory cases
def test_a_failing_results_file_names_results_path(small_bin, tmp_path):
    """The same fault on --results-path's file names that file (was: an OSError traceback)."""
    proc = _run(_generate(small_bin, "--results-path", str(tmp_path / "out")), stdout=subprocess.DEVNULL,
                preexec=_limit(resource.RLIMIT_FSIZE, 1024))
    _one_line(proc, "--results-path", "generate-test.txt", "ulimit -f")


# ---- the data loader ----

@pytest.mark.slow  # two decodes each, ~8 s
@pytest.mark.parametrize("limit", [(resource.RLIMIT_NOFILE, 24), (resource.RLIMIT_FSIZE, 512)],
                         ids=["open-files", "file-size"])
def test_a_data_loader_that_cannot_pass_batches_does_not_hang(small_bin, limit):
    """ulimit -n 24 / ulimit -f: fairseq's data-loader worker cannot hand its batch over (no descriptor left;
    its shared-memory file over the limit), prints a traceback and stays alive, and the run waited forever
    (stock --search beam too). Without --num-workers the data is now read in the main process."""
    for search in ("beam", "var-stream"):
        proc = _run(_generate(small_bin, "--search", search), stdout=subprocess.PIPE, preexec=_limit(*limit))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert sum(line.startswith("H-") for line in proc.stdout.splitlines()) == 12, proc.stdout[-2000:]


# ---- memory ----

OOM = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
       "allocate 297533440 bytes. Error code 12 (Cannot allocate memory)")


def test_an_allocation_that_fails_is_one_line_naming_the_options():
    from fairseq_stream.errors import memory_problem

    line = memory_problem(RuntimeError(OOM), argv=["--beam", "200", "--stream-capacity=512"])
    assert "0.28 GiB" in line and "--stream-capacity (512)" in line and "--beam (200)" in line, line
    assert "--max-tokens" in line and "--batch-size" in line, line
    assert format_error(RuntimeError(OOM)).startswith(PREFIX)
    assert memory_problem(RuntimeError("something else")) is None


def _under_memory_limit(script: str) -> subprocess.CompletedProcess:
    """``script`` in a fresh interpreter after its imports, with 0.8 GiB of address space more than they
    took (as ``ulimit -v`` would, but the limit is relative: the imports' own size differs by machine)."""
    prologue = textwrap.dedent("""
        import resource, sys
        import fairseq_cli.generate
        sys.path.insert(0, {repo!r})  # the working tree's fairseq_stream; imported by the script (after its argv)
        def limit_memory():
            with open("/proc/self/status") as f:
                size = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
            resource.setrlimit(resource.RLIMIT_AS, (size + 800 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
    """).format(repo=REPO)
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    try:
        return subprocess.run([sys.executable, "-c", prologue + textwrap.dedent(script)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no exit within {TIMEOUT} s")


def test_out_of_memory_while_decoding_is_one_line(demo_bin):
    """ulimit -v with --beam 200 --stream-capacity 512 (was: a DefaultCPUAllocator traceback)."""
    argv = _generate(demo_bin, "--search", "var-stream", "--prune-auto", "off", "--beam", "200",
                     "--stream-capacity", "512", "--max-len-b", "200")
    proc = _under_memory_limit(f"""
        sys.argv = ["fairseq-generate", *{argv[1:]!r}]
        limit_memory()
        fairseq_cli.generate.cli_main()
    """)
    _one_line(proc, "out of host memory", "while decoding", "--stream-capacity (512)", "--beam (200)", "ulimit -v")


@pytest.mark.slow  # a decode in a subprocess; the fast tier keeps the stdout and memory cases
def test_out_of_memory_in_a_python_session_is_one_error():
    """TranslationSession.translate under a memory limit (was: a raw RuntimeError)."""
    proc = _under_memory_limit(f"""
        from fairseq_stream.errors import FairseqStreamError
        from fairseq_stream.tools.session import TranslationSession
        session = TranslationSession.load({DEMO!r}, {CKPT!r}, bpe_codes={os.path.join(DEMO, "bpe.codes")!r},
                                          extra_args=["--source-lang", "es", "--target-lang", "en"])
        with open({os.path.join(DEMO, "test.es")!r}, encoding="utf-8") as f:
            sources = [line.rstrip("\\n") for line in f][:100]
        limit_memory()
        try:
            session.translate(session.encode(sources), search="var-stream", gen={{"beam": 200, "max_len_b": 200}},
                              opts={{"stream_capacity": 512, "prune_auto": "off"}})
        except FairseqStreamError as exc:
            print("ERROR", exc)
            sys.exit(3)
    """)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-3000:])
    assert "out of host memory" in proc.stdout and "--stream-capacity" in proc.stdout, proc.stdout


@pytest.mark.slow  # a decode in a subprocess; the fast tier keeps the stdout and memory cases
def test_a_capacity_above_the_input_costs_nothing(small_bin):
    """--stream-capacity 1000000 on 12 sentences: no more than 12 are ever in flight (was: a warning that the
    run "may need about 11444 GiB")."""
    proc = _run(_generate(small_bin, "--search", "var-stream", "--stream-capacity", "1000000"), stdout=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GiB" not in proc.stderr and "warning: the decoder caches" not in proc.stderr, proc.stderr[-3000:]


def test_sentences_in_flight_that_cannot_fit_are_refused_before_decoding():
    """A capacity whose sentences in flight exceed the machine's memory even with one hypothesis each is
    refused naming the largest capacity that fits; over the input's size, or with the input's size
    unknown (fairseq-interactive), it is not."""
    from helpers import gen_cfg, stream_opts
    from fairseq_stream.integration.runtime import decoding_memory_estimate, warn_about_resources

    model, cfg = torch.nn.Linear(4, 4), gen_cfg(max_len_b=200)
    opts = stream_opts(search="var-stream", stream_capacity=1000)
    memory = lambda on_cpu: (100 * 2**20, "physical memory")  # noqa: E731
    with pytest.raises(FairseqStreamError, match="--stream-capacity 1000 puts 1000 sentences") as info:
        warn_about_resources([model], cfg, opts=opts, sentences=5000, memory=memory)
    fits = int(str(info.value).rsplit(" ", 1)[1])
    assert decoding_memory_estimate([model], cfg, fits, fits) <= 100 * 2**20 < decoding_memory_estimate([model], cfg, fits + 1, fits + 1)
    warn_about_resources([model], cfg, opts=opts, sentences=10, memory=memory)  # 10 in flight fit
    warn_about_resources([model], cfg, opts=opts, sentences=None, memory=memory)  # input size unknown
