"""Progress, the thread default and the demo-file lookup: what a command-line run shows and finds."""
import os

import pytest
import torch

from fairseq_stream.integration import runtime
from fairseq_stream.tools import demo_files
from fairseq_stream.errors import FairseqStreamError
from conftest import REPO


def test_progress_off_a_terminal_prints_sentences_done_and_time_left(capsys):
    progress = runtime.SentenceProgress(10, interval=0.0)
    assert progress.bar is None  # pytest's stderr is not a terminal: no carriage-return bar in logs
    progress.advance_to(4)
    progress.advance_to(3)  # never backwards
    progress.advance_to(10)
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert out.out == "" and len(lines) == 2
    assert lines[0].startswith("fairseq-stream: decoded 4/10 sentences") and "left" in lines[0]
    assert progress.done == 10


def test_progress_is_counted_once_as_hypotheses_leave_empty_sources_included():
    from fairseq_stream.model.encoder_slots import SLOT_MODULUS
    from fairseq_stream.engine.input_stream import InputStream
    from fairseq_stream.search.interface import Hypothesis

    progress = runtime.SentenceProgress(3, interval=1e9)
    stream = InputStream(pad=1, eos=2, max_lengths=lambda lengths: lengths + 5)
    stream.on_done = progress.advance_to
    tokens = torch.tensor([[1, 1, 2], [5, 6, 2], [1, 7, 2]])  # left-padded: an empty source, two sentences
    batch = stream.batch_for({"id": torch.arange(3), "net_input": {"src_tokens": tokens}}, None)
    assert progress.done == 1 and batch.missing == 2  # the empty source has its hypothesis at once
    admitted = stream.take(2)
    hypo = Hypothesis(tokens=torch.tensor([4, 2]), score=-1.0, positional_scores=torch.zeros(2))
    stream.deliver({admitted.first * SLOT_MODULUS: [hypo]})
    assert progress.done == 2 and stream.done == 2
    stream.deliver({(admitted.first + 1) * SLOT_MODULUS: [hypo]})
    assert progress.done == 3 and batch.missing == 0


def test_a_copy_is_decoded_like_its_sentence_and_leaves_no_output_and_no_progress():
    # --prune-auto's in-stream probes: copies appended to a refill, delivered to on_copy only
    from fairseq_stream.model.encoder_slots import SLOT_MODULUS
    from fairseq_stream.engine.input_stream import InputStream
    from fairseq_stream.search.interface import Hypothesis

    stream = InputStream(pad=1, eos=2, max_lengths=lambda lengths: lengths + 5)
    copied = []
    stream.on_admit = lambda admission: copied.extend(stream.add_copies(admission, [1, 1]))
    stream.on_copy = lambda handle, hypos: copied.append((handle, hypos[0]["tokens"].tolist()))
    tokens = torch.tensor([[1, 5, 2], [6, 7, 2]])
    batch = stream.batch_for({"id": torch.tensor([10, 11]), "net_input": {"src_tokens": tokens}}, None)
    admitted = stream.take(2)
    assert copied == [admitted.first + 2, admitted.first + 3] and admitted.count == 4
    assert admitted.src_tokens[2:].tolist() == [[6, 7, 2]] * 2 and admitted.limits[2:] == [8, 8]
    assert stream.sentence_id(admitted.first + 3) == 11 and stream.copies_in_flight == 2 and stream.in_flight == 2
    hypo = Hypothesis(tokens=torch.tensor([4, 2]), score=-1.0, positional_scores=torch.zeros(2))
    stream.deliver({(admitted.first + 2) * SLOT_MODULUS + 3: [hypo], admitted.first * SLOT_MODULUS: [hypo]})
    assert copied[2] == ((admitted.first + 2) * SLOT_MODULUS + 3, [4, 2])
    assert stream.done == 1 and batch.missing == 1 and stream.copies_in_flight == 1
    assert stream.take(1) is None  # a copy is no sentence of the input


def test_threads_drop_to_the_idle_cores_when_the_cpu_is_busy(monkeypatch, capsys):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "_threads_checked", False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    chosen = []
    monkeypatch.setattr(torch, "set_num_threads", chosen.append)
    runtime.avoid_oversubscription(on_cpu=True, measure=lambda: 3.2)
    assert chosen == [1] and capsys.readouterr().err.count("fairseq-stream: warning:") == 1
    runtime.avoid_oversubscription(on_cpu=True, measure=lambda: 3.2)  # said once a process
    assert chosen == [1] and capsys.readouterr().err == ""
    monkeypatch.setattr(runtime, "_threads_checked", False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the user's choice wins
    runtime.avoid_oversubscription(on_cpu=True, measure=lambda: 3.2)
    assert chosen == [1] and torch.get_num_threads() == 4


def test_an_idle_machine_keeps_its_threads_whatever_the_process_itself_did(monkeypatch, capsys):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "_threads_checked", False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    chosen = []
    monkeypatch.setattr(torch, "set_num_threads", chosen.append)
    # /proc/stat readings a quarter second apart on an idle machine: 1 busy jiffy of 50.
    readings = iter([(10_000, 40_000), (10_001, 40_050)])
    assert runtime.busy_cores(interval=0.0, read=lambda: next(readings)) == pytest.approx(0.04)
    runtime.avoid_oversubscription(on_cpu=True, measure=lambda: 0.04)
    assert chosen == [] and capsys.readouterr().err == ""


def test_busy_cores_reads_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n")
    assert runtime._cpu_times(str(stat)) == (150, 1000)
    assert runtime._cpu_times(str(tmp_path / "missing")) is None


def test_demo_files_env_override_is_exact_and_a_missing_folder_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.setenv(demo_files.ENV_VAR, str(tmp_path))
    assert demo_files.find_demo_dir() == str(tmp_path)
    with pytest.raises(FairseqStreamError, match=demo_files.ENV_VAR):
        demo_files.require_demo_dir(str(tmp_path))
    monkeypatch.delenv(demo_files.ENV_VAR)
    assert os.path.isfile(os.path.join(demo_files.find_demo_dir(), "checkpoint.pt"))


def test_an_installed_package_finds_the_demo_files_under_its_prefix(monkeypatch, tmp_path):
    """pip install puts the demo files in <prefix>/share/fairseq-stream/demo (setup.py data_files)."""
    installed = tmp_path / "prefix" / "share" / "fairseq-stream" / "demo"
    installed.mkdir(parents=True)
    (installed / "checkpoint.pt").write_bytes(b"")
    monkeypatch.delenv(demo_files.ENV_VAR, raising=False)
    monkeypatch.setattr(demo_files, "_REPO_DIR", str(tmp_path / "site-packages"))  # no checkout around it
    monkeypatch.setattr(demo_files.sys, "prefix", str(tmp_path / "prefix"))
    assert demo_files.find_demo_dir() == str(installed)


def test_a_checkout_finds_its_own_demo_files_without_an_install(monkeypatch):
    """The checkout's user_dir_examples/demo comes first after the variable (an offline GPU machine
    imports the package from a checkout with nothing installed under sys.prefix)."""
    monkeypatch.delenv(demo_files.ENV_VAR, raising=False)
    here = os.path.join(REPO, "user_dir_examples", "demo")
    assert demo_files.candidates()[0] == here
    assert demo_files.find_demo_dir() == here


def test_the_load_meter_counts_other_processes_only():
    """The machine's busy time less this process's own CPU time, over the wall time."""
    reads = iter([(1_000, 10_000), (1_000 + 300, 10_400)])  # 300 busy ticks = 3 core-seconds at 100 Hz
    own = iter([5.0, 6.0])  # of which this process used 1 s
    clock = iter([0.0, 2.0])
    meter = runtime.LoadMeter(read=lambda: next(reads), own=lambda: next(own), clock=lambda: next(clock),
                              ticks_per_second=100).start()
    assert meter.stop() == pytest.approx(1.0)  # (3 − 1) core-seconds over 2 s: one other core busy
    missing = runtime.LoadMeter(read=lambda: None, own=lambda: 0.0, ticks_per_second=100).start()
    assert missing.stop() is None
