"""scripts/models/zoo.py (issue 79): the table keeps its promises, and the tiny zoo builds through every
stage into folders that decode, then a second run skips every stage."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import DEMO, REPO, read_lines, run_cli

SCRIPT = os.path.join(REPO, "scripts", "models", "zoo.py")


def load_zoo():
    spec = importlib.util.spec_from_file_location("zoo_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_zoo(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, SCRIPT, "--threads", "1", *args], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=timeout)


def test_the_table_keeps_the_promises_of_issue_79():
    zoo = load_zoo()
    table = zoo.TABLE
    zoo.check_table(table)
    names = [s.name for s in table]
    assert len(names) >= 6 and len(set(names)) == len(names)
    assert {(s.src, s.tgt) for s in table} == {("es", "en"), ("en", "es")}
    shapes = {(s.layers, s.dim) for s in table}
    assert ((3, 3), 256) in shapes and any(s.layers == (6, 2) for s in table)
    base = [s for s in table if (s.layers, s.dim, s.heads, s.ffn) == ((6, 6), 512, 8, 2048)]
    assert base and all(s.minutes >= 90 and s.half == "held-out" for s in base)
    joint = {s.bpe[0] for s in table if s.joint}
    separate = {s.bpe for s in table if not s.joint}
    assert len(joint) >= 2 and len(separate) >= 2 and any(a != b for a, b in separate)
    assert {0.0, 0.1} <= {s.label_smoothing for s in table}
    weak = [s for s in table if s.of_run]
    assert weak and all(w.of_run in names and 0 < w.at_update for w in weak)
    halves = {h: [s for s in table if s.half == h] for h in zoo.HALVES}
    assert all(halves.values()) and sum(map(len, halves.values())) == len(table)
    assert all(s.minutes > 0 for s in table if not s.of_run)


@pytest.mark.parametrize("bad", ["repeated-name", "weak-without-run", "weak-other-half"])
def test_a_table_that_breaks_a_promise_is_refused(bad):
    zoo = load_zoo()
    run = zoo.TINY[1]
    table = {"repeated-name": [run, run],
             "weak-without-run": [zoo.weak(run, 10)],
             "weak-other-half": [run, zoo.replace(zoo.weak(run, 10), half="tuning")]}[bad]
    with pytest.raises(zoo.FairseqStreamError):
        zoo.check_table(table)


def test_list_prints_every_model_and_a_stage_needs_the_ones_before(tmp_path, capsys):
    zoo = load_zoo()  # in this process: a fresh one spends seconds importing torch
    zoo.main(["--list", "--root", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    for spec in zoo.TABLE:
        assert any(line.startswith(f"| {spec.name} | {spec.half} |") and line.endswith("| — | — |")
                   for line in lines), lines
    with pytest.raises(zoo.FairseqStreamError, match="the train stage needs prep first: add prep to --stages"):
        zoo.main(["--tiny", "--root", str(tmp_path), "--stages", "train"])
    with pytest.raises(zoo.FairseqStreamError, match="the prep stage needs --corpus DIR"):
        zoo.main(["--tiny", "--root", str(tmp_path), "--stages", "prep"])
    assert not list(tmp_path.iterdir())  # refused before anything was written


def tiny_corpus(folder) -> str:
    """The demo's held-out verses as a corpus: 300 training pairs (10 of them become the test split), 20 valid."""
    folder.mkdir()
    for lang in ("es", "en"):
        lines = read_lines(os.path.join(DEMO, f"test.{lang}"))
        (folder / f"train.{lang}").write_text("".join(s + "\n" for s in lines[:300]), encoding="utf-8")
        (folder / f"valid.{lang}").write_text("".join(s + "\n" for s in lines[300:320]), encoding="utf-8")
    return str(folder)


def generate(model, src: str, tgt: str, *extra: str) -> list:
    proc = run_cli(["fairseq-generate", str(model / "bin"), "--path", str(model / "checkpoint.pt"), "--user-dir",
                    "fairseq_stream", "--cpu", "--gen-subset", "test", "--source-lang", src, "--target-lang", tgt,
                    "--beam", "1", "--max-len-b", "10", *extra])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sorted(line for line in proc.stdout.splitlines() if line.startswith("H-"))


@pytest.mark.slow  # trains three tiny models, their drafts and priors (minutes), in bfloat16
def test_the_tiny_zoo_builds_decodes_and_resumes(tmp_path):
    zoo = load_zoo()
    root = tmp_path / "zoo"
    corpus = tiny_corpus(tmp_path / "corpus")
    # bfloat16 products whatever the CPU (train_autocast.py; emulated where it has no bf16 instructions)
    proc = run_zoo("--tiny", "--corpus", corpus, "--root", str(root), "--train-precision", "bf16")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    states = {}
    for spec in zoo.TINY:
        model = root / spec.name
        for name in ("checkpoint.pt", "draft.pt", "lookahead_prior.pt", "bpe.codes", f"dict.{spec.src}.txt",
                     f"dict.{spec.tgt}.txt", f"test.{spec.src}", f"test.{spec.tgt}"):
            assert (model / name).is_file(), f"{spec.name} lacks {name}"
        assert len(read_lines(str(model / f"test.{spec.src}"))) == 10  # every 30th of 300 pairs
        states[spec.name] = json.loads((model / "state.json").read_text(encoding="utf-8"))
        assert list(states[spec.name]["stages"]) == list(zoo.STAGES)
        assert states[spec.name]["stages"]["train"]["precision"] == states[spec.name]["stages"]["draft"]["precision"] \
            == "bf16"
        hypos = generate(model, spec.src, spec.tgt)
        assert len(hypos) == 10
        assert len(generate(model, spec.src, spec.tgt, "--search", "speculative",
                            "--draft-path", str(model / "draft.pt"))) == 10
        assert len(generate(model, spec.src, spec.tgt, "--search", "lookahead", "--lookahead-ngram", "3",
                            "--lookahead-prior", str(model / "lookahead_prior.pt"))) == 10
    weak, run = zoo.TINY[2], zoo.TINY[1]
    assert states[weak.name]["stages"]["train"]["updates"] == weak.at_update
    assert states[run.name]["stages"]["train"]["updates"] == run.max_update
    assert (root / weak.name / "checkpoint.pt").read_bytes() != (root / run.name / "checkpoint.pt").read_bytes()
    joint = root / zoo.TINY[0].name
    assert (joint / "dict.es.txt").read_bytes() == (joint / "dict.en.txt").read_bytes()
    separate = root / run.name
    assert (separate / "dict.es.txt").read_bytes() != (separate / "dict.en.txt").read_bytes()
    assert (separate / "bpe.codes").read_bytes() == (separate / f"bpe.{run.src}.codes").read_bytes() \
        != (separate / f"bpe.{run.tgt}.codes").read_bytes()

    again = run_zoo("--tiny", "--corpus", corpus, "--root", str(root))
    assert again.returncode == 0, again.stderr[-3000:]
    skipped = [line for line in again.stdout.splitlines() if line.endswith(", skipped")]
    assert len(skipped) == len(zoo.TINY) * len(zoo.STAGES), again.stdout[-3000:]
    assert all(json.loads((root / n / "state.json").read_text(encoding="utf-8")) == s for n, s in states.items())
    listed = run_zoo("--tiny", "--list", "--root", str(root)).stdout
    assert sum(" prep train draft prior export |" in line for line in listed.splitlines()) == len(zoo.TINY)
