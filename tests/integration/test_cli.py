"""fairseq-generate / fairseq-interactive with --user-dir fairseq_stream, as a user runs them."""
import os
import re

import pytest

from conftest import DEMO, REPO, run_cli

CKPT = os.path.join(DEMO, "checkpoint.pt")


def hypothesis_ids(stdout: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^H-(\d+)\t", stdout, re.M)]


def assert_one_line_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq-stream: error: "), last
    for needle in needles:
        assert needle in last, last


# beam (fairseq's own generator through our task) is slow: var-stream covers the task in the fast tier
@pytest.mark.parametrize("search", [pytest.param("beam", marks=pytest.mark.slow), "var-stream"])
@pytest.mark.parametrize("subset,n,batching", [
    ("test", 100, ["--batch-size", "16"]),
    # slow: tests/unit/test_registry_and_batches.py puts back 13 mod 8 dropped sentences in the fast tier
    pytest.param("valid", 13, ["--max-tokens", "300"], marks=pytest.mark.slow),
])
def test_every_sentence_gets_a_hypothesis(demo_bin, search, subset, n, batching):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", subset, "--search", search, "--beam", "4", *batching])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(hypothesis_ids(proc.stdout)) == list(range(n))


@pytest.mark.slow  # a fairseq CLI subprocess (~8 s); the fast tier runs var-stream through fairseq-generate and -interactive
def test_stock_fairseq_drops_the_tail_we_guard_against(demo_bin):
    """fairseq-fixed without our task loses 100 mod 8 = 4 sentences (the bug the task fixes).

    Greedy, 3 tokens, one thread: only the count of hypotheses matters (beam 5 in full took 90 s of CPU).
    """
    proc = run_cli(["fairseq-generate", demo_bin, "--path", CKPT, "--cpu", "--gen-subset", "test", "--batch-size", "16",
                    "--beam", "1", "--max-len-a", "0", "--max-len-b", "3"],
                   env_extra={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(hypothesis_ids(proc.stdout)) == 96


@pytest.mark.slow  # two more fairseq-generate processes; every fast-tier CLI test runs the short form
def test_long_task_form_equals_short_form(demo_bin):
    common = [demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu", "--gen-subset", "valid", "--beam", "4"]
    short = run_cli(["fairseq-generate", *common, "--search", "var-batch"])
    long = run_cli(["fairseq-generate", *common, "--task", "translation_stream", "--search", "var-batch"])
    assert short.returncode == 0 and long.returncode == 0, long.stderr[-2000:]
    grab = lambda out: sorted(l for l in out.splitlines() if l.startswith("H-"))  # noqa: E731
    assert grab(short.stdout) == grab(long.stdout) and len(grab(short.stdout)) == 13


def test_missing_checkpoint(demo_bin):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", "/nonexistent/ckpt.pt", "--cpu"])
    assert_one_line_error(proc, "/nonexistent/ckpt.pt", "--path")


@pytest.mark.slow  # the same case runs in the fast tier in test_bad_input.py's catalogue (forked, not a fresh process)
def test_corrupt_checkpoint(demo_bin, tmp_path):
    bad = tmp_path / "corrupt.pt"
    bad.write_bytes(b"this is not a checkpoint")
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", str(bad), "--cpu"])
    assert_one_line_error(proc, "could not read the checkpoint")


@pytest.mark.slow  # the same case runs in the fast tier in test_bad_input.py's catalogue (forked, not a fresh process)
def test_data_directory_without_dictionaries(tmp_path):
    proc = run_cli(["fairseq-generate", str(tmp_path), "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu"])
    assert_one_line_error(proc, "dict")


@pytest.mark.slow  # the same case runs in the fast tier in test_bad_input.py's catalogue (forked, not a fresh process)
def test_unknown_search_lists_valid_names(demo_bin):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--search", "nonsense"])
    assert_one_line_error(proc, "nonsense", "var-stream", "beam")


@pytest.mark.slow  # the same case runs in the fast tier in test_bad_input.py's catalogue (forked, not a fresh process)
def test_over_long_sentences_are_reported_not_dropped(demo_bin):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "valid", "--max-source-positions", "8", "--search", "var-stream"])
    assert_one_line_error(proc, "too long to decode", "--skip-invalid-size-inputs-valid-test")


@pytest.mark.slow  # a fairseq CLI subprocess (~8 s); the fast tier runs var-stream through fairseq-generate and -interactive
def test_user_dir_resolves_from_any_directory_after_install(demo_bin, tmp_path):
    """After a regular ``pip install .``, fairseq finds ``--user-dir fairseq_stream`` in site-packages."""
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "valid", "--search", "beam"], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(hypothesis_ids(proc.stdout)) == 13


# slow for beam: test_bad_input.py's catalogue runs fairseq-interactive cases in the fast tier
@pytest.mark.parametrize("search", [pytest.param("beam", marks=pytest.mark.slow), "var-stream"])
def test_interactive_translates_every_line_including_empty_ones(search):
    lines = ["Y dijo Dios: Sea la luz.", "", "En el principio crió Dios los cielos y la tierra."] * 4
    proc = run_cli(["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
                    "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--search", search, "--beam", "4",
                    "--buffer-size", "5", "--batch-size", "5"], stdin="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(hypothesis_ids(proc.stdout)) == list(range(len(lines)))
    assert "light" in proc.stdout
    # Known third-party noise is silenced (integration/quiet.py); fairseq's own INFO lines stay.
    for noise in ("UserWarning", "DEBUG:hydra", "{'_name'", "version_base", "pin_memory"):
        assert noise not in proc.stderr, noise
    assert "loading model(s)" in proc.stderr


def test_interactive_beam_at_batch_1_runs_the_native_beam_loop():
    """fairseq-interactive --beam 5 one line at a time, as a service runs it: a fresh process's first steps are the
    native beam loop's, whose C++ calls the row arena's operator before any Python step loaded it (that failed once),
    and its hypotheses are --native-loop off's, scores to every digit printed. var-stream's pruned beam: its rows
    change in number inside the loop."""
    lines = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra.", "Y vió Dios que era bueno."]
    outputs = []
    for extra in ([], ["--native-loop", "off"]):
        proc = run_cli(["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                        "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
                        "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--search", "var-stream", "--beam", "5",
                        "--buffer-size", "1", "--batch-size", "1", "--stream-capacity", "1", *extra],
                       stdin="\n".join(lines) + "\n")
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append([line for line in proc.stdout.splitlines() if line.startswith(("H-", "P-"))])
        searched = re.search(r"(\d+) steps searched in the native loop", proc.stderr)
        assert (searched is not None and int(searched.group(1)) > 10) == (not extra), proc.stderr[-1500:]
    assert len(outputs[0]) == 2 * len(lines) and outputs[0] == outputs[1]


@pytest.mark.slow  # a fairseq CLI subprocess (~8 s); the fast tier runs var-stream through fairseq-generate and -interactive
def test_statistics_are_printed_and_written_with_the_trace(demo_bin, tmp_path):
    import json
    import subprocess
    import sys

    stats = tmp_path / "stats.json"
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "valid", "--search", "var-stream", "--beam", "4", "--stream-capacity", "4",
                    "--stream-stats", str(stats)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"fairseq-stream var-stream: 13 sentences, \d+ timesteps, \d+ expansions", proc.stdout + proc.stderr)
    data = json.loads(stats.read_text())
    assert data["sentences"] == 13 and data["timesteps"] == len(data["trace"]) > 0
    assert max(e["sentences"] for e in data["trace"]) <= 4 and data["refills"] >= 4
    out = tmp_path / "occ.png"
    plot = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "papers", "plot_occupancy.py"), str(stats), "--out", str(out)],
                          capture_output=True, text=True)
    assert plot.returncode == 0, plot.stderr[-2000:]
    assert out.stat().st_size > 1000


@pytest.mark.slow  # four fairseq-generate processes on the held-out demo lines
@pytest.mark.parametrize("search,extra", [("var-stream", ["--beam", "5"]), ("gs-jacobi", ["--beam", "1"])])
def test_the_reference_and_cpp_step_backends_print_the_same_hypotheses(demo_bin, search, extra):
    common = [demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu", "--gen-subset", "valid",
              "--search", search, *extra]
    runs = {be: run_cli(["fairseq-generate", *common, "--step-backend", be]) for be in ("reference", "cpp")}
    grab = lambda out: sorted(l for l in out.splitlines() if l[:2] in ("H-", "P-"))  # noqa: E731
    for be, proc in runs.items():
        assert proc.returncode == 0, proc.stderr[-2000:]
        op = "jacobi_step" if "jacobi" in search else "beam_step"
        assert f"step operators: {op}={be}" in proc.stdout + proc.stderr
    assert grab(runs["reference"].stdout) == grab(runs["cpp"].stdout) and len(grab(runs["cpp"].stdout)) == 26


@pytest.mark.slow  # a fairseq CLI subprocess (~8 s); the fast tier runs var-stream through fairseq-generate and -interactive
def test_an_unknown_step_backend_is_refused_in_one_line(demo_bin):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "valid", "--search", "var-stream", "--step-backend", "cuda"])
    assert_one_line_error(proc, "--step-backend")


@pytest.mark.slow  # three fairseq-generate processes on the 13 validation lines
def test_step_mode_static_prints_the_eager_hypotheses_and_says_how_steps_ran(demo_bin):
    common = [demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu", "--gen-subset", "valid",
              "--search", "var-stream", "--beam", "5"]
    runs = {mode: run_cli(["fairseq-generate", *common, "--step-mode", mode]) for mode in ("eager", "static")}
    # (id, score, hypothesis) of every H- line; float32 scores differ in the last bits (other layouts)
    grab = lambda out: sorted(l.split("\t") for l in out.splitlines() if l[:2] == "H-")  # noqa: E731
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr[-2000:]
    eager, static = grab(runs["eager"].stdout), grab(runs["static"].stdout)
    assert [(i, h) for i, _, h in eager] == [(i, h) for i, _, h in static] and len(static) == 13
    assert [float(s) for _, s, _ in eager] == pytest.approx([float(s) for _, s, _ in static], abs=1e-4)
    closing = runs["static"].stdout + runs["static"].stderr
    found = re.search(r"step mode static: 0 replayed, (\d+) static, 0 eager, output layer in (\d+), reorder in (\d+)",
                      closing)
    assert found and found.group(1) == found.group(2), closing[-1500:]  # the output layer inside every step
    assert 0 < int(found.group(3)) <= int(found.group(1))  # the beam's reorders, copied inside the next step
    graph = run_cli(["fairseq-generate", *common, "--step-mode", "graph"])
    assert_one_line_error(graph, "--step-mode graph", "needs a CUDA device")
