"""fairseq-stream-shard under faults (issue 80): its own --stream-stats, an empty split, a damaged or busy
workdir, a finished shard cut short, signals to the parent, a closed or full stdout.

The refusals run ``main`` in this process with ``run_shards`` replaced by a tripwire (nothing may start);
the signals, the lock and stdout run the command as a user would, in a subprocess, on the demo model's
13 ``valid`` sentences (two shards of the tiny model).
"""
import errno
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from conftest import DEMO, REPO
from fairseq_stream.errors import FairseqStreamError

ENV = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
CHECKPOINT = os.path.join(DEMO, "checkpoint.pt")


def generate_args(data):
    return [data, "--user-dir", "fairseq_stream", "--path", CHECKPOINT, "--gen-subset", "valid", "--search",
            "var-stream", "--beam", "2", "--batch-size", "8", "--max-len-a", "1.2", "--max-len-b", "10",
            "--prune-auto", "off"]


def shard_cmd(workdir, data, *extra):
    return [sys.executable, "-m", "fairseq_stream.tools.shard", "--nprocs", "2", "--workdir", str(workdir),
            *generate_args(data), *extra]


@pytest.fixture
def no_shard_starts(monkeypatch, tmp_path):
    """``main`` in this process: no torchrun variables, temporary folders under tmp_path/tmp, and a
    tripwire instead of the shards' processes."""
    from fairseq_stream.tools.shard import cli

    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))

    def tripwire(shards):
        raise AssertionError("a shard was started")

    monkeypatch.setattr(cli, "run_shards", tripwire)
    return cli.main


def error_lines(capsys):
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("fairseq-stream: error:")]


# ---- the run's own --stream-stats -------------------------------------------------------------
@pytest.mark.parametrize("stats,message", [
    ("DIR", "--stream-stats {} is a directory"),
    ("DIR/missing/stats.json", "the directory '{}' does not exist"),
    (CHECKPOINT, "is an input of this run"),
    ("/dev/full", "--stream-stats /dev/full: cannot write there (No space left on device)"),
])
def test_the_runs_stream_stats_is_refused_before_any_shard_starts(demo_bin, no_shard_starts, capsys, tmp_path,
                                                                  stats, message):
    stats = stats.replace("DIR", str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        no_shard_starts(["--nprocs", "2", *generate_args(demo_bin), "--stream-stats", stats])
    errors = error_lines(capsys)
    shown = os.path.dirname(stats) if "missing" in stats else stats
    assert exit_.value.code == 1 and len(errors) == 1 and message.format(shown) in errors[0], errors
    assert os.listdir(tmp_path / "tmp") == []  # no temporary workdir left


def _fake_finished_shards(shards, sentences=(3, 2)):
    """Outputs, logs and statistics as two finished fairseq-generate shards leave them."""
    ids = iter(range(sum(sentences)))
    for shard, n in zip(shards, sentences):
        mine = [next(ids) for _ in range(n)]
        with open(shard.out, "w", encoding="utf-8") as f:
            f.writelines(f"S-{i}\tx\nH-{i}\t-1.0\ty\nD-{i}\t-1.0\ty\n" for i in mine)
        with open(shard.log, "w", encoding="utf-8") as f:
            f.write(f"INFO:fairseq_cli.generate:Translated {n} sentences (9 tokens) in 0.1s\n")
        with open(shard.stats, "w", encoding="utf-8") as f:
            json.dump({"sentences": n, "timesteps": 3}, f)
    return {shard.index: 0 for shard in shards}


def test_a_full_disk_under_the_runs_stream_stats_is_one_line_and_removes_the_temporary_workdir(
        demo_bin, no_shard_starts, monkeypatch, capsys, tmp_path):
    from fairseq_stream.tools.shard import cli

    monkeypatch.setattr(cli, "run_shards", _fake_finished_shards)
    real_fsync = os.fsync

    def full_disk(fd):  # the disk fills up as the run's statistics are written, not before
        if "/.stats.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    stats = tmp_path / "stats.json"
    with pytest.raises(SystemExit) as exit_:
        no_shard_starts(["--nprocs", "2", *generate_args(demo_bin), "--stream-stats", str(stats)])
    captured = capsys.readouterr()
    assert "S-4\tx" in captured.out  # the translations came first
    errors = [line for line in captured.err.splitlines() if line.startswith("fairseq-stream: error:")]
    assert exit_.value.code == 1 and errors == [
        f"fairseq-stream: error: --stream-stats {stats}: could not write the file (No space left on device); "
        "nothing was written there: free space or choose another path"]
    assert not stats.exists() and os.listdir(tmp_path / "tmp") == []


# ---- an input without sentences ----------------------------------------------------------------
@pytest.fixture(scope="module")
def empty_split(tmp_path_factory):
    """A binarized ``valid`` split with no sentences (what fairseq-preprocess makes of empty files)."""
    import shutil

    from fairseq.data import indexed_dataset

    folder = tmp_path_factory.mktemp("empty_bin")
    for lang in ("es", "en"):
        shutil.copy(os.path.join(DEMO, f"dict.{lang}.txt"), folder)
        prefix = str(folder / f"valid.es-en.{lang}")
        builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=100)
        builder.finalize(prefix + ".idx")
    return str(folder)


def test_an_empty_split_is_one_line_before_any_shard_starts(empty_split, no_shard_starts, capsys):
    with pytest.raises(SystemExit) as exit_:
        no_shard_starts(["--nprocs", "3", *generate_args(empty_split)])
    assert exit_.value.code == 1 and error_lines(capsys) == [
        f"fairseq-stream: error: the valid split of {empty_split} holds no sentences (valid.es-en.es.idx lists none): "
        "nothing to decode; binarize a split with sentences or choose another --gen-subset"]


# ---- the workdir ---------------------------------------------------------------------------------
def _truncated_manifest(work):
    work.mkdir()
    (work / "manifest.json").write_text('{\n "argv": [\n  "--nprocs",\n')


def _list_manifest(work):
    work.mkdir()
    (work / "manifest.json").write_text("[]")


def _a_file(work):
    work.write_text("not a folder\n")


def _read_only(work):
    work.mkdir()
    work.chmod(0o555)


@pytest.mark.parametrize("make,message", [
    (_truncated_manifest, "its manifest.json cannot be read (cut short or not JSON), so its shards cannot be matched "
                          "to this run; pass --fresh to start over there (every shard is decoded again) or choose "
                          "another --workdir"),
    (_list_manifest, "its manifest.json is not a manifest of fairseq-stream-shard"),
    (_a_file, "is a file, not a folder; choose another --workdir"),
    (_read_only, "is not writable (the shards write their outputs there); make it writable or choose another"),
])
def test_a_damaged_or_unusable_workdir_is_one_line(demo_bin, no_shard_starts, capsys, tmp_path, make, message):
    work = tmp_path / "work"
    make(work)
    try:
        with pytest.raises(SystemExit) as exit_:
            no_shard_starts(["--nprocs", "2", "--workdir", str(work), *generate_args(demo_bin)])
    finally:
        if work.is_dir():
            work.chmod(0o755)
    errors = error_lines(capsys)
    assert exit_.value.code == 1 and len(errors) == 1, errors
    assert errors[0].startswith(f"fairseq-stream: error: --workdir {work}") and message in errors[0], errors


def test_a_workdir_in_use_is_refused(demo_bin, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with open(work / "workdir.lock", "w") as held:  # as a running fairseq-stream-shard holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        held.write(f"{os.getpid()}\n")
        held.flush()
        proc = subprocess.run(shard_cmd(work, demo_bin), cwd=REPO, capture_output=True, text=True, env=ENV,
                              timeout=300)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == (
        f"fairseq-stream: error: --workdir {work} is in use by another fairseq-stream-shard (process {os.getpid()}); "
        "wait for it to finish (or stop it), or choose another --workdir")
    assert sorted(os.listdir(work)) == ["workdir.lock"]  # nothing written, no shard started


def test_the_lock_of_a_killed_run_is_released(tmp_path):
    from fairseq_stream.tools.shard.workdir import lock_workdir

    child = os.fork()
    if child == 0:  # a run that takes the lock and is killed, as by `kill -9`
        try:
            lock_workdir(str(tmp_path))
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(child, 0)
    assert os.WTERMSIG(status) == signal.SIGKILL and (tmp_path / "workdir.lock").exists()
    lock = lock_workdir(str(tmp_path))  # no stale lock: the kernel released it with the process
    with pytest.raises(FairseqStreamError, match=rf"is in use by another fairseq-stream-shard \(process {os.getpid()}\)"):
        lock_workdir(str(tmp_path))  # while held: refused
    lock.close()


# ---- a finished shard cut short later ------------------------------------------------------------
def test_a_finished_shard_cut_short_is_named_and_decoded_again(tmp_path, capsys):
    from fairseq_stream.tools.shard import plan_shards, print_merged
    from fairseq_stream.tools.shard.launch import reusable

    shards = plan_shards(2, ["data"], str(tmp_path), [])
    _fake_finished_shards(shards, (100, 100))
    whole = (tmp_path / "shard1.out").read_bytes()
    (tmp_path / "shard1.out").write_bytes(whole[: len(whole) * 72 // 100])  # cut in the middle of a line
    with pytest.raises(FairseqStreamError, match=r"^shard 1: shard1.out holds 72 sentences \(72 with a hypothesis\) "
                                                 r"but the shard translated 100 \(cut short or changed after it "
                                                 r"finished\); run the same command again: it decodes shard 1 again$"):
        print_merged(shards, str(tmp_path), ["data"])
    assert reusable(shards[0]) and not reusable(shards[1])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fairseq-stream-shard: shard 0: re-using {shards[0].out}",
                   "fairseq-stream-shard: shard 1: shard1.out holds 72 sentences (72 with a hypothesis) but the shard "
                   "translated 100 (cut short or changed after it finished): decoding shard 1 again"]
    assert not os.path.exists(shards[1].out) and not os.path.exists(shards[1].stats)  # to be decoded again
    (tmp_path / "shard0.out").write_bytes(whole[:-1])  # every sentence, the last line cut
    assert not reusable(shards[0]) and "shard0.out ends in the middle of a line" in capsys.readouterr().err


# ---- signals to the parent ---------------------------------------------------------------------
def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _stop_mid_run(work, data, signum):
    """Start a run, send ``signum`` to the parent once both shards run; (process, stderr, worker pids)."""
    proc = subprocess.Popen(shard_cmd(work, data), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    deadline = time.time() + 120
    while not all((work / f"shard{i}.pid").exists() for i in (0, 1)) and time.time() < deadline:
        time.sleep(0.05)
    workers = [int((work / f"shard{i}.pid").read_text()) for i in (0, 1)]
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return proc, out, err, workers


@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)])
def test_a_signal_to_the_parent_stops_its_workers_and_says_how_to_resume(demo_bin, tmp_path, signum):
    work = tmp_path / "work"
    proc, out, err, workers = _stop_mid_run(work, demo_bin, signum)
    assert proc.returncode == 128 + signum and out == "", err[-2000:]
    assert not any(_alive(pid) for pid in workers), "a worker is still decoding after its parent stopped"
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"fairseq-stream-shard: stopped by {signal.Signals(signum).name}: "), last
    assert "; resume (finished shards are re-used): " in last and f"--workdir {work}" in last
    assert not any((work / f"shard{i}.pid").exists() for i in (0, 1))


def test_the_workers_of_a_parent_killed_outright_stop_too(demo_bin, tmp_path):
    # kill -9 leaves the parent no time to stop them: the kernel sends them SIGTERM (PR_SET_PDEATHSIG)
    proc, _, _, workers = _stop_mid_run(tmp_path / "work", demo_bin, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.time() + 60  # a bound for a hang, not a timing
    while any(_alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), "a worker went on decoding after its parent was killed"


@pytest.mark.slow  # three fairseq-stream-shard runs decoding 13 sentences
def test_a_stopped_run_resumes_to_the_uninterrupted_output(demo_bin, tmp_path):
    whole = subprocess.run(shard_cmd(tmp_path / "whole", demo_bin), cwd=REPO, capture_output=True, text=True, env=ENV)
    assert whole.returncode == 0, whole.stderr[-2000:]
    work = tmp_path / "work"
    proc, _, err, _ = _stop_mid_run(work, demo_bin, signal.SIGTERM)
    resume = err.strip().splitlines()[-1].split("; resume (finished shards are re-used): ", 1)[1]
    again = subprocess.run(shlex.split(resume), cwd=REPO, capture_output=True, text=True, env=ENV)
    assert again.returncode == 0, again.stderr[-2000:]
    sentence_lines = lambda text: [line for line in text.splitlines() if line[:2] in ("S-", "H-", "D-")]  # noqa: E731
    assert sentence_lines(again.stdout) == sentence_lines(whole.stdout) and len(sentence_lines(whole.stdout)) == 39
    # A finished shard cut short later: the same command says so and decodes that shard again.
    out1 = work / "shard1.out"
    out1.write_bytes(out1.read_bytes()[:-200])
    third = subprocess.run(shlex.split(resume), cwd=REPO, capture_output=True, text=True, env=ENV)
    assert third.returncode == 0, third.stderr[-2000:]
    assert "shard 0: re-using" in third.stderr and "decoding shard 1 again" in third.stderr
    assert sentence_lines(third.stdout) == sentence_lines(whole.stdout)


# ---- stdout closed or full ------------------------------------------------------------------------
def _finished_workdir(work, data):
    """A workdir of this command's run whose two shards finished (no decoding needed to merge it)."""
    from fairseq_stream.tools.shard import claim_workdir, fingerprint, plan_shards

    work.mkdir()
    args = generate_args(data)
    claim_workdir(str(work), {"argv": ["--nprocs", "2", "--devices", "auto", *args], "inputs": fingerprint(args)},
                  fresh=False)
    _fake_finished_shards(plan_shards(2, args, str(work), []), (7, 6))


@pytest.mark.parametrize("stdout", ["closed pipe", "/dev/full"])
def test_a_closed_or_full_stdout_ends_the_merge_without_a_traceback(demo_bin, tmp_path, stdout):
    work = tmp_path / "work"
    _finished_workdir(work, demo_bin)
    if stdout == "closed pipe":  # as `| head -1` once head has exited
        proc = subprocess.Popen(shard_cmd(work, demo_bin), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=ENV)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=300)
        assert proc.returncode == 128 + signal.SIGPIPE and "Traceback" not in err, err[-2000:]
        assert "Error" not in err, err[-2000:]
    else:
        with open("/dev/full", "w") as full:
            done = subprocess.run(shard_cmd(work, demo_bin), cwd=REPO, stdout=full, stderr=subprocess.PIPE, text=True,
                                  env=ENV, timeout=300)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1] == (
            "fairseq-stream: error: could not write the merged output to standard output (No space left on device); "
            f"the shards' outputs stay in {work}: the same command prints them again")
