"""The demo (python -m fairseq_stream.tools.demo): a short default, progress, the thread rule, the busy note."""
import json
import os
import subprocess
import sys

from conftest import REPO
from fairseq_stream.tools import demo


def test_the_default_is_a_subset_of_the_full_table_and_every_row_is_one_line():
    assert demo.QUICK_RUNS and len(demo.QUICK_RUNS) < len(demo.DEMO_RUNS)
    assert all(run in demo.DEMO_RUNS for run in demo.QUICK_RUNS)
    assert len({run.label for run in demo.DEMO_RUNS}) == len(demo.DEMO_RUNS)
    assert demo.DEMO_RUNS[0].search == "beam"  # the ratio column is relative to fairseq's own beam
    assert demo.QUICK_LIMIT < demo.FULL_LIMIT


def test_the_busy_note_appears_only_past_the_threshold():
    assert demo.busy_note(None, 2) is None  # no /proc/stat: nothing claimed
    assert demo.busy_note(0.2, 2) is None
    note = demo.busy_note(1.4, 2)
    assert note.startswith("note: other processes kept about 1.4 of 2 cores busy") and "idle machine" in note


def test_each_pass_line_is_numbered_with_the_time_so_far():
    lines, clock = [], iter([0.0, 3.2, 7.9])
    log = demo.pass_logger(4, lines.append, clock=lambda: next(clock))
    log("  warm-up 1/1 fairseq beam k=5: 3.10s (not timed)")
    log("  repeat 1/1 fairseq beam k=5: 4.00s")
    assert lines == ["[1/4] warm-up 1/1 fairseq beam k=5: 3.10s (not timed) (elapsed 3 s)",
                     "[2/4] repeat 1/1 fairseq beam k=5: 4.00s (elapsed 8 s)"]


def test_the_demo_runs_its_default_rows_with_progress_and_a_table(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "fairseq_stream.tools.demo", "--limit", "3", "--warmup", "0",
                           "--examples", "1", "--outputs", str(tmp_path / "out.json")],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert rows == [run.label for run in demo.QUICK_RUNS]
    assert "torch threads 1" in proc.stdout  # OMP_NUM_THREADS, the user's choice, is kept
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in progress] == [f"[{i}/{len(rows)}" for i in range(1, len(rows) + 1)]
    # fairseq's batch_by_size drops a batch under 8 sentences and the task puts it back: said once a run (for the
    # example's sentence), not again for the rows' passes
    assert proc.stderr.count("put back") == 1 and "put back 1 sentence(s)" in proc.stderr, proc.stderr[-2000:]
    assert "%|" not in proc.stderr and "\r" not in proc.stderr  # no bar in a log (only on a terminal)
    outputs = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))  # --outputs: every row's lines
    assert list(outputs) == rows and all(len(lines) == 3 and all(lines) for lines in outputs.values())


def test_the_sentence_bar_is_drawn_on_a_terminal_only():
    from fairseq_stream.tools.session import _progress

    bar = _progress(10)  # pytest captures stderr: not a terminal
    assert bar.disable
    bar.close()


def test_the_demo_applies_the_command_line_thread_rule_before_it_measures(monkeypatch, capsys):
    """The CLIs drop to the idle cores' worth of torch threads on a busy CPU; the demo measured with all of them."""
    from fairseq_stream.integration import runtime

    calls = []
    monkeypatch.setattr(runtime, "avoid_oversubscription", lambda on_cpu: calls.append(("threads", on_cpu)))

    def benchmark(*args, **kwargs):
        calls.append(("benchmark", len(args[3])))
        return []

    monkeypatch.setattr(demo, "run_benchmark", benchmark)
    monkeypatch.setattr(demo, "format_table", lambda rows: "")
    demo.main(["--limit", "2", "--examples", "1"])
    assert calls == [("threads", True), ("benchmark", len(demo.QUICK_RUNS))]
