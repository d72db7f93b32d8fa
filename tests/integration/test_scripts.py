"""The reproduction scripts run end to end on local files (the demo model and corpus)."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import DEMO, REPO, read_lines


def run_script(args, tmp_path, timeout=600):
    env = dict(os.environ, PYTHON=sys.executable, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    proc = subprocess.run(["bash", *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def fastbpe_codes(tmp_path):
    """The demo's subword-nmt v0.2 codes written as fastBPE writes codes: "a b count", no header."""
    codes = read_lines(os.path.join(DEMO, "bpe.codes"))[1:]
    path = tmp_path / "fastbpe.codes"
    path.write_text("".join(f"{line} {len(codes) - n}\n" for n, line in enumerate(codes)), encoding="utf-8")
    return str(path)


def local_args(tmp_path):
    return ["--pair", "es-en", "--models-dir", DEMO, "--bpe-codes", fastbpe_codes(tmp_path),
            "--src", os.path.join(DEMO, "test.es"), "--ref", os.path.join(DEMO, "test.en"), "--out", str(tmp_path / "out")]


@pytest.mark.slow  # runs the whole reproduction script (dry run)
def test_wmt19_dry_run_shows_the_subwords_of_fastbpe_codes(tmp_path):
    from fairseq_stream.integration.text import BpeCodes, tokenize

    out = run_script(["scripts/papers/wmt19_var_stream.sh", *local_args(tmp_path), "--dry-run"], tmp_path)
    shown = out.split("as the models will see them\n", 1)[1].splitlines()[:3]
    bpe = BpeCodes(os.path.join(DEMO, "bpe.codes"))  # the codes the demo model was trained with
    assert shown == [bpe.apply(tokenize(s, "es")) for s in read_lines(os.path.join(DEMO, "test.es"), 3)]
    # word-final merges applied: "tierra" stays whole (read as v0.1 codes: "ti@@ er@@ ra")
    assert " tierra " in shown[0] and "--pool-size 0" in out


@pytest.mark.slow  # the whole Table 1 script: seven strategies, each timed
def test_wmt19_var_stream_script_on_local_files(tmp_path):
    out = run_script(["scripts/papers/wmt19_var_stream.sh", *local_args(tmp_path), "--limit", "6", "--runs", "1",
                      "--beams", "3", "--capacity", "4", "--fixed-batch", "4", "--device", "cpu"], tmp_path)
    for label in ("GREEDY", "GREEDY (ours)", "FIXED (fairseq)", "VAR-BATCH", "VAR-STREAM", "FIXED-OURS",
                  "FIXED-STREAM", "VAR-STR-FIFO", "VAR-BATCH (ours: normalized δ)", "VAR-STREAM (ours: normalized δ)",
                  "± "):
        assert f"| {label}" in out or label == "± " and label in out
    import json

    rows = {r["label"]: r for r in json.loads((tmp_path / "out" / "table1_k3.json").read_text())["rows"]}
    assert rows["VAR-STREAM"]["opts"]["prune_reference"] == "final"  # the paper's rule (App. A.3)
    assert rows["VAR-STREAM (ours: normalized δ)"]["opts"]["prune_reference"] == "normalized"
    assert rows["FIXED-OURS"]["vs_ours"] == 1.0 and rows["GREEDY"]["vs_ours"] is not None  # GREEDY (ours) at k = 1


@pytest.mark.slow  # the whole Jacobi reproduction: six rows, each timed
def test_parallel_decoding_script_on_local_files(tmp_path):
    out = run_script(["scripts/papers/parallel_decoding.sh", *local_args(tmp_path), "--limit", "4", "--runs", "1",
                      "--device", "cpu"], tmp_path)
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ") and "BLEU" not in line}
    assert {"Greedy", "Beam search (beam=5)", "Greedy (ours)", "Beam search ours (beam=5)", "PJ", "PGJ (b=3)",
            "PGJ (b=5)", "HGJ (b=3)"} == set(rows)
    bleu = {label: row.split("|")[2].strip() for label, row in rows.items() if not label.startswith("Beam")}
    assert len(set(bleu.values())) == 1, bleu  # Jacobi decoding returns greedy's output


@pytest.mark.slow  # trains four models, translates the training set, averages checkpoints
def test_wmt14_ibdecoder_script_on_the_demo_corpus(tmp_path):
    """Transformer, IBDecoder, the teacher's KD data and both students, then BLEU and batch-1 latency."""
    data = tmp_path / "data"
    data.mkdir()
    for split, (start, n) in {"train": (100, 120), "valid": (0, 10), "test": (20, 6)}.items():
        for lang in ("es", "en"):
            lines = read_lines(os.path.join(DEMO, f"test.{lang}"))[start: start + n]
            (data / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tiny = ("--share-all-embeddings --encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 "
            "--decoder-embed-dim 16 --encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 "
            "--encoder-attention-heads 2 --decoder-attention-heads 2")
    out = run_script(["scripts/papers/wmt14_ibdecoder.sh", "--src", "es", "--tgt", "en", "--train-prefix", str(data / "train"),
                      "--valid-prefix", str(data / "valid"), "--test-prefix", str(data / "test"), "--bpe-merges", "200",
                      "--max-update", "3", "--max-tokens", "2000", "--update-freq", "1", "--arch-args", tiny,
                      "--device", "cpu", "--beams", "2 1", "--latency-sentences", "2", "--latency-runs", "1",
                      "--table2", "--table2-rows", "4 6", "--table3", "--out", str(tmp_path / "exp")], tmp_path)
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines() if line.startswith("| ")]
    table1 = rows[1: 1 + 12]
    assert [(r[0], r[1]) for r in table1] == [(m, b) for m in (
        "Transformer", "Transformer (ours)", "IBDecoder", "Transformer+KD", "Transformer+KD (ours)", "IBDecoder+KD")
        for b in ("2", "1")]
    assert all(float(r[2]) >= 0 and float(r[3]) > 0 for r in table1) and table1[0][4] == "1.00x"
    assert table1[2][5] == table1[3][5] == "1.00x"  # our engine's Transformer is its own baseline ("vs ours")
    table2 = [r for r in rows if r[0].startswith("T2-")]
    assert [(r[0], r[1]) for r in table2] == [("T2-4-+middle-to-side", "4"), ("T2-6-vanilla-SA-c2", "4")]
    assert all(float(r[2]) >= 0 for r in table2)
    table3 = {r[0]: r[1:] for r in rows if r[0] in ("Autoregressive", "Semi-Autoregressive")}
    assert all(float(p) > 1 for ppl in table3.values() for p in ppl) and len(table3) == 2, out
    exp = tmp_path / "exp"
    assert len(read_lines(str(exp / "kd" / "train.en"))) == 120  # the teacher translated every training source
    for name in ("transformer", "ib_h2_c1_paper", "transformer_kd", "ib_h2_c1_paper_kd", "table2_row2_paper",
                 "table2_row4_paper", "table2_row6_paper"):
        assert (exp / f"checkpoints_{name}" / "averaged.pt").exists()
    for name in ("ib_h2_c1_paper", "table2_row6_paper"):  # the paper's rule: one EOS after the target
        args = torch.load(exp / f"checkpoints_{name}" / "averaged.pt", weights_only=False)["cfg"]["task"]
        assert args["ib_eos"] == "single"
    assert json.loads((exp / "table1.json").read_text())["ib_finalize"] == "all"


WMT_SCRIPTS = ["scripts/papers/wmt19_var_stream.sh", "scripts/papers/parallel_decoding.sh", "scripts/papers/wmt14_ibdecoder.sh"]


@pytest.mark.parametrize("script", WMT_SCRIPTS)
def test_wmt_scripts_share_their_option_parsing(script):
    """scripts/papers/wmt_common.sh: --help prints the header; a bad option or value is one line, status 2."""
    def run(*args):
        return subprocess.run(["bash", script, *args], cwd=REPO, capture_output=True, text=True, timeout=60)

    help_ = run("--help")
    assert help_.returncode == 0 and "docs/papers.md" in help_.stdout.splitlines()[0]
    name = os.path.basename(script)
    for args, says in [(["--bogus"], "unknown option --bogus"), (["--out"], "--out needs a value"),
                       (["--device", "gpu"], "--device is cpu or cuda")]:
        proc = run(*args)
        assert proc.returncode == 2 and proc.stderr.startswith(f"{name}: {says}"), proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and not proc.stdout


@pytest.mark.slow  # runs the build script
def test_build_demo_model_needs_the_corpus_for_its_prep_stage(tmp_path):
    script = os.path.join(REPO, "scripts", "models", "build_demo_model.py")
    proc = subprocess.run([sys.executable, script, "--work", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "the prep stage needs --corpus DIR" in proc.stderr
    proc = subprocess.run([sys.executable, script, "--work", str(tmp_path), "--corpus", str(tmp_path), "--stages", "prep"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "lacks train.es, train.en, valid.es, valid.en" in proc.stderr


def run_python(args, timeout=300):
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow  # runs the whole benchmark script
def test_output_layer_micro_benchmark_prints_every_cell():
    out = run_python(["scripts/bench/bench_output_layer.py", "--vocab", "100", "300", "--beam", "1", "5", "--batch", "1", "2",
                      "--dim", "16", "--repeats", "1", "--threads", "1"])
    cells = [line for line in out.splitlines() if line.startswith("| 100 ") or line.startswith("| 300 ")]
    assert len(cells) == 8  # 2 vocabularies × 2 beams × 2 batches, each checked against log_softmax first
    assert all(len(line.split("|")) == 17 for line in cells)
    assert all(line.split("|")[-2].strip() == "cpp" for line in cells)  # the kernel that ran each cell (a CPU: C++)


def test_int8_product_benchmark_times_every_cell_and_checks_its_bits():
    from fairseq_stream.ops import int8_rows

    if int8_rows.kernel() is None:
        pytest.skip("the C++ int8 operator is not built here")
    out = run_python(["scripts/bench/int8_linear_time.py", "--shapes", "40x24,16x72", "--rows", "1,5", "--calls", "2",
                      "--repeats", "1"])
    cells = [line.split("|") for line in out.splitlines() if line.startswith("| 40 x") or line.startswith("| 16 x")]
    assert len(cells) == 4  # 2 shapes x 2 row counts
    assert all(float(cell[3]) > 0 and cell[-2].strip() == "yes" for cell in cells)  # a time, and the reference's bits
    assert any(int(cell[5]) > 0 for cell in cells)  # quantised as a model is: weights of -128 among them


@pytest.mark.slow  # loads the demo model and its draft in a process of its own
def test_speculative_benchmark_compares_the_drafts_weights():
    out = run_python(["scripts/bench/bench_speculative.py", "--limit", "3", "--gammas", "2", "--draft-quantize", "none,int8",
                      "--lookahead", "3", "--lookahead-prior", "user_dir_examples/demo/lookahead_prior.pt",
                      "--repeats", "2"])
    rows = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines() if line.startswith("| ")}
    for label in ("speculative --draft-tokens 2 --draft-quantize none", "speculative --draft-tokens 2 --draft-quantize int8",
                  "lookahead --lookahead-ngram 3 --lookahead-prior lookahead_prior.pt"):
        assert rows[label][5].strip() == "3/3"  # greedy's output whatever the draft's weights or the prior
    assert rows["greedy (fixed-ours --beam 1)"][4].strip() == "1.00×"  # paired with itself
    assert "greedy (fixed-ours --beam 1): runs " in out  # every run's time


def test_rung_outcomes_prints_every_rung_with_rows_metered_per_sentence(tmp_path):
    import json

    # the script stops with a message where the per-sentence rows do not add up to the run's expansions
    out = run_python(["scripts/experiments/rung_outcomes.py", "--limit", "8", "--beam", "4", "--model", "demo",
                      "--json", str(tmp_path / "out.json")])
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| demo | 4 | δ")]
    assert [r[3].strip() for r in rows] == ["δ 1, M 5", "δ 1.25, M 5", "δ 1.5, M 5", "δ 2, M 5", "δ 3, M 5"], out
    assert all(0 < float(r[10]) <= 1 for r in rows), out  # a rung expands at most the fixed beam's rows
    assert all(-100 < float(r[8].strip().rstrip("%")) < 100 for r in rows), out  # the lengths against the fixed beam's
    dump = json.loads((tmp_path / "out.json").read_text())["4"]
    fixed = dump["off (the fixed beam's width)"]
    assert len(fixed) == 8 and all(o["rows"] > 0 and o["tokens"][-1] == 2 for o in fixed.values())
    # the length rule's replay reads that dump: a row per rung decoded and per rule
    out = run_python(["scripts/experiments/length_rule_replay.py", str(tmp_path / "out.json"), "--ref",
                      "user_dir_examples/demo/test.en", "--probes", "4:4", "--draws", "2"])
    rules = [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| 4 |")]
    assert "δ 1.25, M 5, fixed" in rules and "score (the controller's)" in rules and len(rules) == 4 + 1 + 8, out


def test_length_rule_replay_moves_on_halved_outputs_that_the_score_does_not_see(tmp_path):
    import json

    # every sentence: the fastest rung's best hypothesis half the fixed beam's length at the same score
    eos = 2
    def outcome(n: int, rows: int) -> dict:
        return {"score": -1.0, "tokens": [7] * n + [eos], "text": " ".join(["the"] * n), "rows": rows}
    rungs = {"δ 1.25, M 5": 4, "δ 1.5, M 5": 12, "off (the fixed beam's width)": 20}
    dump = {"5": {label: {str(i): outcome(8 if label == "off (the fixed beam's width)" else 4, rows) for i in range(10)}
                  for label, rows in rungs.items()}}
    (tmp_path / "dump.json").write_text(json.dumps(dump))
    (tmp_path / "ref.txt").write_text("\n".join([" ".join(["the"] * 8)] * 10) + "\n")
    out = run_python(["scripts/experiments/length_rule_replay.py", str(tmp_path / "dump.json"), "--ref",
                      str(tmp_path / "ref.txt"), "--probes", "5:10", "--draws", "1", "--ratio", "0.8"])
    moved = {line.split("|")[2].strip(): line.split("|")[5].strip() for line in out.splitlines() if line.startswith("| 5 |")}
    assert moved["score (the controller's)"] == "0%", out  # the same score: the controller's rule sees nothing
    assert moved["length: 1 outside [0.8, 1.25] → one rung"] == "100%", out
    assert moved["length: 2 outside [0.8, 1.25] → the safest rung"] == "100%", out


def test_step_cost_fit_recovers_a_linear_cost(tmp_path):
    import json

    # ms = 2 + 0.5·rows + 0.01·rows·length exactly: the fit must return these coefficients
    trace = [{"step": i, "rows": r, "length": n, "sentences": r, "ms": 2 + 0.5 * r + 0.01 * r * n}
             for i, (r, n) in enumerate((r, n) for r in (1, 4, 9, 16) for n in (1, 5, 20))]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"search": "var-stream", "trace": trace}))
    out = run_python(["scripts/experiments/step_cost.py", str(path)])
    row = [cell.strip() for cell in out.splitlines()[-1].split("|")]
    assert row[1] == "var-stream" and row[2] == "12"
    assert (row[6], row[7], row[8]) == ("2.00", "500", "10000")


def test_ib_experiment_resumes_a_finished_run_asked_for_more_updates(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ib_experiment", os.path.join(REPO, "scripts", "papers", "ib_experiment.py"))
    exp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exp)
    log = tmp_path / "train.log"
    assert exp.trained_updates(log) == 0
    log.write_text("train_inner | num_updates=50\ntrain_inner | num_updates=100\n")
    assert exp.trained_updates(log) == 0  # interrupted: resume
    log.write_text(log.read_text() + "train | num_updates=120\ndone training in 10.0 seconds\n")
    assert exp.trained_updates(log) == 120  # finished at 120: --updates 120 skips, --updates 240 resumes


def test_ib_experiment_trains_each_layout_with_its_h_and_c(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ib_experiment", os.path.join(REPO, "scripts", "papers", "ib_experiment.py"))
    exp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exp)

    def layout(kind):
        cmd = exp.train_command(tmp_path, tmp_path / kind, kind, 100, 2)
        value = lambda flag: cmd[cmd.index(flag) + 1] if flag in cmd else None  # noqa: E731
        return value("--task"), value("--ib-h"), value("--ib-c"), value("--ib-order")

    assert layout("standard") == ("translation", None, None, None)
    assert layout("ib") == ("translation_ib", "2", "1", None)
    assert layout("im") == ("translation_ib", "4", "1", None)
    assert layout("sa") == ("translation_ib", "2", "2", None)
    assert layout("vsa") == ("translation_ib", "1", "2", None)
    assert layout("vsa4") == ("translation_ib", "1", "4", None)
    assert layout("m2s") == ("translation_ib", "2", "1", "middle-to-side")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "papers", "ib_experiment.py"), "--data", str(DEMO),
                           "--variants", "im,xx", "--work", str(tmp_path / "w")], capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown layout 'xx'" in proc.stderr


@pytest.mark.slow  # trains an IBDecoder with fairseq-train first
def test_ib_search_ablation_script_on_a_tiny_ib_model(tmp_path):
    """Train a tiny IBDecoder on 60 demo sentences (demo dictionaries), then print the ablation rows."""
    from fairseq_stream.integration.text import BpeCodes, tokenize

    bpe = BpeCodes(os.path.join(DEMO, "bpe.codes"))
    for lang in ("es", "en"):
        lines = bpe.apply_all(tokenize(line, lang) for line in read_lines(os.path.join(DEMO, f"test.{lang}"))[:60])
        (tmp_path / f"train.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    for cmd in (
        [os.path.join(bin_dir, "fairseq-preprocess"), "--source-lang", "es", "--target-lang", "en",
         "--trainpref", str(tmp_path / "train"), "--validpref", str(tmp_path / "train"), "--destdir", str(tmp_path / "bin"),
         "--srcdict", os.path.join(DEMO, "dict.es.txt"), "--tgtdict", os.path.join(DEMO, "dict.en.txt")],
        [os.path.join(bin_dir, "fairseq-train"), str(tmp_path / "bin"), "--user-dir", os.path.join(REPO, "fairseq_stream"),
         "--cpu", "--task", "translation_ib", "--arch", "transformer_ib", "--share-all-embeddings",
         "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
         "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
         "--decoder-attention-heads", "2", "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "2000",
         "--max-update", "3", "--save-dir", str(tmp_path / "ckpt"), "--no-epoch-checkpoints", "--no-save-optimizer-state"],
    ):
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = run_python(["scripts/experiments/ib_search_ablation.py", f"tiny={tmp_path / 'ckpt' / 'checkpoint_last.pt'}",
                      "--sentences", "5", "--beam", "2"])
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| tiny |")]
    assert [r[2].strip() for r in rows] == ["greedy", "beam, --ib-finalize all", "beam, --ib-finalize top",
                                            "beam, top + --ib-dedup"]
    assert all(float(r[3]) >= 0 and float(r[4]) > 0 for r in rows)


def test_var_width_quality_bootstrap_tells_chance_from_a_real_difference(demo_references):
    """scripts/experiments/var_width_quality.py's p-value: identical outputs are chance (p = 1), outputs
    with a word dropped from most sentences are not."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("var_width_quality", os.path.join(REPO, "scripts", "experiments", "var_width_quality.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    refs = demo_references[:100]
    assert script.paired_bootstrap_p(refs, refs, refs, samples=200) == pytest.approx(1.0, abs=0.01)
    worse = [" ".join(r.split()[1:]) if i % 4 else r for i, r in enumerate(refs)]
    assert script.paired_bootstrap_p(refs, worse, refs, samples=200) < 0.05


@pytest.mark.slow  # the whole GPU check on the CPU: the gpu tests (skipped), every table, the output layer
@pytest.mark.parametrize("args,message", [
    (["--dtypes", "float64"], "--dtypes: unknown dtype 'float64'"),
    (["--dtypes", " "], "--dtypes: give at least one dtype"),
])
def test_gpu_check_refuses_bad_dtypes_in_one_line(tmp_path, args, message):
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", "--out", str(tmp_path / "g"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_gpu_check_short_stops_the_gpu_tests_at_their_time_and_says_so(tmp_path, monkeypatch):
    """--short (a lease of ~15 device minutes) bounds the gpu tests; a stop is named in the report's part."""
    monkeypatch.setenv("TESTS_TIMEOUT", "1")
    run_script(["scripts/gpu_check.sh", "--dry-run", "--short", "--parts", "tests", "--out", str(tmp_path / "g")],
               tmp_path, timeout=120)
    assert "pytest exit status 124: stopped after 1 s (--short)" in (tmp_path / "g" / "gpu_tests.txt").read_text()


@pytest.mark.slow  # the GPU check's whole script (~30 s of CPU)
def test_gpu_check_dry_run_writes_one_report(tmp_path):
    """The GPU check's flow on the CPU (its rows, the output layer, the profile; the slow test below adds the
    training speed, the frontier and CTranslate2): every row of ours eager and static side by side."""
    run_script(["scripts/gpu_check.sh", "--dry-run", "--out", str(tmp_path / "gpu"), "--parts", "tests rows output profile"],
               tmp_path)
    report = (tmp_path / "gpu" / "gpu_report.md").read_text(encoding="utf-8")
    section = report.split("## rows", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| table")]
    tables = {r[0] for r in rows}
    assert tables == {f"{m} float32 {t}" for m in ("demo", "base32k") for t in ("batched", "batch1")} | {
        "ibbase float32 batch1", "demo float32 drafts", "base32k float32 beam4batched", "ibbase float32 beam4batched"}
    labels = {r[1].split(" (chose ")[0] for r in rows}
    ours = ["fixed-ours k=5", "var-stream k=5", "greedy-ours", "gs-jacobi b=3", "fixed-ours k=4", "ib-beam k=4",
            "speculative", "lookahead N=4"]
    assert {"fairseq-beam k=5", "fairseq-greedy", "fairseq-beam k=4", "var-stream k=5 cap=256 [static]",
            "var-stream k=5 cap=256 prune-auto [static]", "var-stream k=8 prune-auto [static]"} <= labels
    assert {f"{label} [{mode}]" for label in ours for mode in ("eager", "static")} <= labels
    assert all(float(r[4]) > 0 for r in rows)  # every ratio to stock fairseq is a number
    for r in rows:  # against our own fixed beam (greedy) of the same step mode: every strategy but the baselines
        assert (r[5] == "n/a") == r[1].startswith(("fairseq-", "fixed-ours", "greedy-ours")), r
    assert all("(chose δ" in r[1] for r in rows if "prune-auto" in r[1])  # the setting --prune-auto chose
    for r in rows:  # a static row: its time against its eager twin, and none of its steps replayed (no capture)
        if r[1].endswith("[static]") and "prune-auto" not in r[1]:
            assert float(r[6]) > 0 and r[7].startswith("0/"), r
    assert all(r[10] == "n/a" and r[11] == "n/a" for r in rows)  # GPU busy and kernels/step: not on a CPU
    for r in rows:  # host reads per step, counted on any device: one a step in our loop, fairseq's beam counted whole
        steps = int(r[7].split("/")[1]) if "/" in r[7] else 0  # of the timed run; its cost run decodes the same forced length
        if r[1].startswith("fairseq-"):
            assert float(r[12]) > 1, r  # fairseq's loop reads the host several times a step (10-14 here)
        elif r[1].startswith("ib-beam"):  # and one a pool, restoring the finished hypotheses' word order
            assert r[12] == f"{(steps + 1) / steps:.2f}", r
        else:
            assert r[12] == "1.00", r
    for r in rows:  # the ops outside the static region: fewer than all of a static row's (the output layer is inside)
        if r[1].endswith("[static]") and not r[1].startswith(("fairseq-", "ib-beam", "speculative", "lookahead")):
            assert 0 < float(r[14]) < 0.5 * float(r[13]), r
        elif r[1].endswith("[eager]"):
            assert r[14] == r[13], r
    assert "ib_float32_batched: no IBDecoder checkpoint given" in report
    assert "float16 runs on a GPU only" in report and "## output layer micro-benchmark, float32" in report
    profile = report.split("## profile of a k = 5 decode", 1)[1]
    assert "### var-stream [static]" in profile and "host reads: 1.00 per step" in profile and "ops/packets.py" in profile
    assert "steps: 0 replayed" in profile


@pytest.mark.slow  # two fairseq-train runs and a frontier sweep on top of the fast test's parts
def test_gpu_check_dry_run_runs_the_training_speed_and_frontier_parts(tmp_path):
    run_script(["scripts/gpu_check.sh", "--dry-run", "--out", str(tmp_path / "gpu"), "--parts", "train ct2 frontier"],
               tmp_path)
    report = (tmp_path / "gpu" / "gpu_report.md").read_text(encoding="utf-8")
    train = report.split("## IBDecoder training speed", 1)[1].split("\n## ", 1)[0]
    assert "| transformer |" in train and "IBDecoder / transformer: **" in train
    assert "## the k = 5 quality/speed frontier on the device" in report
    assert "## CTranslate2 on the same GPU" in report and "not run: a CPU dry run" in report


def test_bench_all_finds_fairseq_console_scripts_beside_any_interpreter_name(tmp_path):
    """PYTHON=.../python3 once gave ".../python3fairseq-preprocess"; the scripts sit beside the interpreter."""
    python3 = os.path.join(os.path.dirname(sys.executable), "python3")
    functions = "source <(sed -n '/^console()/,/^}/p;/^timed()/,/^}/p' scripts/bench/bench_all.sh)"
    proc = subprocess.run(["bash", "-c", f'{functions}; OUT="$1"; console fairseq-preprocess; timed "a b" true',
                           "bash", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHON=python3 if os.path.exists(python3) else sys.executable))
    assert proc.returncode == 0, proc.stderr
    found, timing = proc.stdout.splitlines()
    assert found == os.path.join(os.path.dirname(sys.executable), "fairseq-preprocess")
    assert timing.startswith("a b: ") and timing.endswith(" s")  # timed by the shell's clock, no /usr/bin/time


def test_ib_eval_times_each_model_against_our_own_fixed_beam():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ib_eval", os.path.join(REPO, "scripts", "papers", "ib_eval.py"))
    ib_eval = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ib_eval)
    rows = [dict(model=m, search=s, beam=b, latency_ms=ms) for m, s, b, ms in (
        ("T", "beam", 4, 10.0), ("T (ours)", "fixed-ours", 4, 8.0), ("IB", "ib-beam", 4, 4.0),
        ("T+KD (ours)", "fixed-ours", 4, 6.0), ("IB+KD", "ib-beam", 4, 3.0), ("IB", "ib-beam", 1, 2.0))]
    got = [ib_eval.own_speedup(rows, r) for r in rows]
    assert got[:5] == [0.8, 1.0, 2.0, 1.0, 2.0]  # each against the Transformer of its own training
    assert got[5] != got[5]  # no fixed-ours row at beam 1: NaN


def _dry_runs(script, *args):
    """The harness's --run specs a script would pass, per beam (its --dry-run; bash only, no Python)."""
    proc = subprocess.run(["bash", script, "--dry-run", *args], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("## would run: ")]
    return [line.split(" --run ")[1:] for line in lines]


def test_pruning_sweep_rows_run_freitag2017s_rule(tmp_path):
    k5, k14 = _dry_runs("scripts/papers/pruning_sweep.sh", "--beams", "5 14", "--out", str(tmp_path))
    ours = [r for r in k5 if not r.startswith("beam:")]
    assert all("beam_finalize=shrink" in r or "prune_preset=freitag2017" in r for r in ours if "beam=5" in r)
    assert all("prune_reference=active" in r for r in ours if r.startswith("var-batch:") and "preset" not in r)
    assert "label=rp=0.6 ap=2.5 rpl=0.02 mc=3" in k5[5] and "prune_preset=freitag2017," in k5[5]
    assert "prune_rel_threshold=0.3" in k14[1] and "prune_preset=freitag2017-k14," in k14[5]
    assert k5[0].startswith("fixed-ours:") and "label=no pruning" in k5[0]  # the speed reference comes first


def test_topup_script_compares_sorted_and_unsorted_input(tmp_path):
    (rows,) = _dry_runs("scripts/papers/topup_batching.sh", "--beams", "5", "--out", str(tmp_path))
    labels = [r.split("label=")[1] for r in rows]
    assert labels[:4] == ["batches (sorted)", "top-up (sorted)", "batches (unsorted)", "top-up (unsorted)"]
    assert all(("stream_input_order=as-given" in r) == ("(unsorted)" in r) for r in rows)
    assert {"var-stream (unsorted)", "fairseq (unsorted)"} <= set(labels)


@pytest.mark.slow  # runs the whole sweep on a few demo sentences: eight rows, each timed
def test_pruning_sweep_on_the_demo(tmp_path):
    out = run_script(["scripts/papers/pruning_sweep.sh", "--beams", "3", "--limit", "6", "--runs", "1", "--batch", "3",
                      "--out", str(tmp_path)], tmp_path)
    paper = out.split("| pruning | beam | speed up |", 1)[1]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in paper.splitlines() if line.startswith("| ") and "---" not in line}
    assert set(rows) == {"no pruning", "rp=0.6", "ap=2.5", "rpl=0.02", "mc=3", "rp=0.6 ap=2.5 rpl=0.02 mc=3",
                         "no pruning (beam 1)", "fairseq beam"}
    assert rows["no pruning"][1] == "+0%" and rows["no pruning (beam 1)"][2] == "1.00"  # greedy: one per step
    assert float(rows["rp=0.6 ap=2.5 rpl=0.02 mc=3"][3]) <= float(rows["no pruning"][3])  # pruning expands fewer


@pytest.mark.slow  # runs the whole top-up comparison on a few demo sentences: eight rows, each timed
def test_topup_batching_on_the_demo(tmp_path):
    out = run_script(["scripts/papers/topup_batching.sh", "--beams", "2", "--limit", "6", "--runs", "1", "--batch", "3",
                      "--out", str(tmp_path)], tmp_path)
    bleu = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.splitlines()
            if line.startswith("| ") and "BLEU" not in line and "---" not in line}
    assert len(bleu) == 8
    # the input order changes who shares a batch, never an output; top-up's searches are the batches'
    assert bleu["batches (sorted)"] == bleu["batches (unsorted)"] == bleu["top-up (sorted)"] == bleu["top-up (unsorted)"]
    assert bleu["var-stream (sorted)"] == bleu["var-stream (unsorted)"]


SCRIPTS = os.path.join(REPO, "scripts")


def _script_folders():
    """scripts/ and its sub-folders, each with the scripts (.py, .sh) it holds."""
    folders = [SCRIPTS] + sorted(os.path.join(SCRIPTS, n) for n in os.listdir(SCRIPTS)
                                 if os.path.isdir(os.path.join(SCRIPTS, n)) and not n.startswith((".", "__")))
    return [(folder, sorted(n for n in os.listdir(folder) if n.endswith((".py", ".sh")))) for folder in folders]


def test_scripts_top_level_holds_only_what_a_user_runs():
    """The top level of scripts/: at most 12 files (what a user runs, and the README); the rest in sub-folders."""
    files = [n for n in os.listdir(SCRIPTS) if os.path.isfile(os.path.join(SCRIPTS, n))]
    assert len(files) <= 12, sorted(files)
    assert {"install.sh", "demo.sh", "test.sh", "gpu_check.sh", "README.md"} <= set(files)
    assert not [n for n in files if n.endswith(".py")], "a Python script belongs in a sub-folder"


def test_every_script_is_listed_in_its_folders_readme_and_says_what_it_does():
    """Every script in scripts/ and its sub-folders has a row in that folder's README.md; a Python
    script's docstring has a first line that says what it does (e.g. what it measures)."""
    import ast

    for folder, scripts in _script_folders():
        where = os.path.relpath(folder, REPO)
        with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        assert scripts, f"{where} holds no script"
        for name in scripts:
            assert f"| `{name}` |" in readme, f"{name} is not listed in {where}/README.md"
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    doc = ast.get_docstring(ast.parse(f.read()))
                assert doc and doc.splitlines()[0].strip(), f"{where}/{name} has no header line"
        listed = re.findall(r"^\| `([^`/]+\.(?:py|sh))` \|", readme, flags=re.M)
        assert sorted(set(listed) - set(scripts)) == [], f"{where}/README.md lists scripts that are not there"


def test_no_script_imports_a_private_name_of_the_package():
    """Scripts use fairseq_stream's public names only: no ``from fairseq_stream.x import _y``, no
    ``fairseq_stream._x`` module, no ``module._y`` of an imported fairseq_stream module."""
    import ast

    bad = []
    for folder, scripts in _script_folders():
        for name in (n for n in scripts if n.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            modules = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "fairseq_stream":
                    private = [p for p in node.module.split(".") if p.startswith("_")]
                    private += [a.name for a in node.names if a.name.startswith("_")]
                    bad += [f"{os.path.relpath(path, REPO)}:{node.lineno} {p}" for p in private]
                    modules |= {a.asname or a.name for a in node.names}
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] == "fairseq_stream":
                            bad += [f"{os.path.relpath(path, REPO)}:{node.lineno} {p}" for p in a.name.split(".")
                                    if p.startswith("_")]
                            modules.add(a.asname or a.name.split(".")[0])
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                        and isinstance(node.value, ast.Name) and node.value.id in modules):
                    bad.append(f"{os.path.relpath(path, REPO)}:{node.lineno} {node.value.id}.{node.attr}")
    assert bad == []


@pytest.mark.slow  # distils 16 sentences and trains for a few seconds with fairseq-train
def test_train_draft_makes_a_draft_that_speculative_decoding_loads(tmp_path, demo_sources):
    sources = tmp_path / "train.es"
    sources.write_text("\n".join(demo_sources[:16]) + "\n", encoding="utf-8")
    draft = tmp_path / "draft.pt"
    env = dict(os.environ, PYTHON=sys.executable, WORK=str(tmp_path / "work"), KD_LINES="16", TRAIN_MINUTES="0.1",
               DIM="32", FFN="64", HEADS="2", OMP_NUM_THREADS="1")
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "train_draft.sh"), DEMO, os.path.join(DEMO, "checkpoint.pt"),
                           str(sources), str(draft)], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "distilled 16 pairs" in proc.stdout and draft.is_file()
    # INIT: trained on from the first draft's weights (the distilled sources kept), not from random ones
    more = tmp_path / "more.pt"
    again = subprocess.run(["bash", os.path.join(REPO, "scripts", "train_draft.sh"), DEMO, os.path.join(DEMO, "checkpoint.pt"),
                            str(sources), str(more)], capture_output=True, text=True, cwd=str(tmp_path),
                           env=dict(env, INIT=str(draft), STAGES="train,export", LR="0.001"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    log = (tmp_path / "work" / "train.log").read_text(encoding="utf-8")
    assert f"Loaded checkpoint {draft}" in log and more.is_file()
    missing = subprocess.run(["bash", os.path.join(REPO, "scripts", "train_draft.sh"), DEMO, os.path.join(DEMO, "checkpoint.pt"),
                              str(sources), str(more)], capture_output=True, text=True, cwd=str(tmp_path),
                             env=dict(env, INIT=str(tmp_path / "nope.pt"), STAGES="train"))
    assert missing.returncode == 2 and "INIT=" in missing.stderr and "no such file" in missing.stderr
    from conftest import _load_demo

    session = _load_demo()
    data = session.encode(demo_sources[:4])
    greedy = session.translate(data, search="fixed-ours", gen={"beam": 1})
    out = session.translate(data, search="speculative", gen={"beam": 1}, opts={"draft_path": str(draft)})
    assert [h[0]["tokens"].tolist() for h in out.hypos] == [h[0]["tokens"].tolist() for h in greedy.hypos]
