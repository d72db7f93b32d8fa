"""The user's command as the benchmark (tools/user_bench.py) on the demo folder: fresh fairseq-generate runs."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import DEMO, REPO

B1 = "--beam 1 --stream-capacity 1 --batch-size 1"


def user_bench(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "fairseq_stream.tools.user_bench", *args], cwd=REPO,
                          capture_output=True, text=True, env=env)


def table_rows(stdout: str) -> dict:
    """label → cells of the markdown table's body rows (the first table: the "why" table follows it)."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in stdout.split("\nwhy:")[0].splitlines()
            if line.startswith("| ") and not line.startswith("| row ")]
    return {cells[0]: cells[1:] for cells in rows}


@pytest.mark.slow
def test_three_rows_on_the_demo_folder(tmp_path):
    out = tmp_path / "rows.json"
    proc = user_bench("--model", DEMO, "--limit", "4", "--repeats", "1", "--json", str(out),
                      "--run", f"greedy=--search fixed-ours {B1}",
                      "--run", f"speculative=--search speculative --draft-path {DEMO}/draft.pt {B1}",
                      "--run", "fixed-ours k=5=--search fixed-ours --beam 5",
                      "--identical", "speculative=greedy")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"CPU: .+ \((AVX-512 VNNI|AVX-512|AVX2|no AVX2)\); torch threads in every run: 1", proc.stdout)
    rows = table_rows(proc.stdout)
    assert list(rows) == ["greedy", "speculative", "fixed-ours k=5"], proc.stdout
    for label, (decode, ratio, bleu, identical) in rows.items():
        assert float(decode) > 0 and float(bleu) >= 0, (label, decode, bleu)
        assert ratio.endswith("× greedy")
    assert rows["speculative"][3] == "identical to greedy (4/4)"
    meta = json.loads(out.read_text(encoding="utf-8"))
    assert meta["meta"]["omp_num_threads"] == 1 and meta["meta"]["cpu"]
    by = {r["label"]: r for r in meta["models"][0]["rows"]}
    assert "--draft-path" in by["speculative"]["command"] and "fairseq-generate" in by["greedy"]["command"]
    assert "--stream-capacity 1 --batch-size 1" in by["greedy"]["command"]
    assert "--required-batch-size-multiple 1" in by["greedy"]["command"]
    assert all(s > 0 for r in by.values() for s in r["seconds"])
    assert any(line.startswith("left out: CTranslate2 rows") for line in proc.stdout.splitlines()) is False  # no preset
    # why speculative's ratio is what it is: its calls, tokens a call and a call's cost against greedy's step
    why = meta["models"][0]["why"]
    assert [w["label"] for w in why] == ["speculative"], why
    assert why[0]["tokens_per_call"] >= 1 and why[0]["ratio"] == pytest.approx(by["speculative"]["ratio"], rel=1e-6)
    # (at batch 1 its gate, --jacobi-parallel auto, adds how many sentence runs took the draft's blocks to the label)
    why_table = proc.stdout.split("why:")[1]
    assert "why: ratio = a call's cost" in proc.stdout
    assert re.search(r"\| speculative( \(blocks in \d+ of \d+ runs\))? \| ", why_table), why_table


@pytest.mark.slow
def test_online_rows_through_fairseq_interactive(tmp_path):
    # issue 79 item 2: the online rows as a service runs them, fairseq-interactive one line a chunk at true batch 1
    out = tmp_path / "rows.json"
    proc = user_bench("--model", DEMO, "--limit", "4", "--repeats", "1", "--rows", "online", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = json.loads(out.read_text(encoding="utf-8"))
    by = {r["label"]: r for r in meta["models"][0]["rows"]}
    assert {"greedy online", "speculative online", "lookahead online"} <= set(by), list(by)
    for label in ("speculative online", "lookahead online"):
        assert by[label]["identical"] == 4 and by[label]["identical_to"] == "greedy online"
    greedy = by["greedy online"]
    assert "fairseq-interactive" in greedy["command"] and "--buffer-size 1" in greedy["command"]
    assert "--stream-capacity 1 --batch-size 1" in greedy["command"] and "--input" in greedy["command"]
    assert greedy["median"] > 0 and greedy["latency"] > 0 and greedy["bleu"] > 0
    assert "| latency ms |" in proc.stdout and "why: ratio" in proc.stdout


def test_a_bad_model_folder_is_one_line(tmp_path):
    proc = user_bench("--model", str(tmp_path), "--limit", "4")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"fairseq-stream: error: --model {tmp_path}: no checkpoint.pt in the folder; a model folder holds "
        "checkpoint.pt, dict.SRC.txt, dict.TGT.txt, bpe.codes, test.SRC and test.TGT"]
    assert proc.stdout == ""


def test_the_json_may_not_name_a_file_of_the_model_and_is_checked_first():
    proc = user_bench("--model", DEMO, "--json", os.path.join(DEMO, "bpe.codes"), "--rows", "k5")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--json" in proc.stderr and proc.stdout == ""


@pytest.mark.slow
def test_the_warmed_harness_says_its_figures_are_warmed(tmp_path):
    """tools/bench.py stays for A/B work; its table and JSON say that they are warmed, and name this harness."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "fairseq_stream.tools.bench", "--limit", "2", "--repeats", "1",
                           "--warmup", "0", "--no-progress", "--no-own-baselines", "--run", "beam:beam=1",
                           "--json", str(out)], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    above = proc.stdout.split("\n| ")[0]
    assert above.startswith("warmed:") and "fairseq_stream.tools.user_bench" in above
    assert json.loads(out.read_text(encoding="utf-8"))["meta"]["timing"] == "warmed"
