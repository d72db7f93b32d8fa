"""The user-command harness's pieces without a model: fairseq's closing line, the run order, the table's cells."""
import sys

import pytest
import torch

from fairseq_stream.errors import UsageError
from fairseq_stream.tools import user_bench as ub

# Lines as fairseq-generate 0.12 prints them (logging on stderr), the first from a real demo run.
REAL = "INFO:fairseq_cli.generate:Translated 4 sentences (107 tokens) in 0.1s (27.93 sentences/s, 747.08 tokens/s)"
THOUSANDS = ("2026-12-05 10:00:01 | INFO | fairseq_cli.generate | Translated 1,000 sentences (23,456 tokens) in 12.3s "
             "(81.30 sentences/s, 1907.00 tokens/s)")
NOTHING = "INFO:fairseq_cli.generate:Translated 0 sentences (0 tokens) in 0.0s (0.00 sentences/s, 0.00 tokens/s)"


def test_the_closing_line_gives_the_timer_sum_to_four_digits():
    found = ub.parse_closing_line("INFO:fairseq_cli.generate:NOTE: ...\n" + REAL + "\nWARNING: BLEU on BPE tokens\n")
    assert (found.sentences, found.tokens) == (4, 107)
    assert found.seconds == pytest.approx(107 / 747.08)  # 0.1432 s, where the printed figure says 0.1 s
    big = ub.parse_closing_line(THOUSANDS)
    assert (big.sentences, big.tokens) == (1000, 23456)
    assert big.seconds == pytest.approx(12.3, abs=0.05)


def test_nothing_translated_reads_zero_and_no_line_reads_none():
    found = ub.parse_closing_line(NOTHING)
    assert (found.sentences, found.tokens, found.seconds) == (0, 0, 0.0)
    assert ub.parse_closing_line("INFO:fairseq_cli.generate:loading model(s)\n") is None


def test_a_line_without_rates_and_the_last_of_several():
    assert ub.parse_closing_line("Translated 3 sentences (9 tokens) in 0.4s\n").seconds == pytest.approx(0.4)
    assert ub.parse_closing_line(REAL + "\n" + THOUSANDS).sentences == 1000


def test_sentence_lines_are_read_by_id():
    out = "S-1\tsrc\nH-1\t-0.5\tHe said@@ s\nD-1\t-0.5\tHe says\nH-0\t-0.1\tYes .\nP-0\t-0.1 -0.2\n"
    assert ub.sentence_lines(out, "H") == {0: "Yes .", 1: "He said@@ s"}
    assert ub.sentence_lines(out, "D") == {1: "He says"}


def test_runs_are_round_robin_over_the_rows():
    assert ub.interleaved(3, 2) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert ub.interleaved(2, 1) == [(0, 0), (0, 1)]


def test_the_median_ratio_and_identity_of_a_table():
    rows = [ub.Row("greedy", reference="greedy"), ub.Row("spec", reference="greedy", identical_to="greedy"),
            ub.Row("other", reference="greedy", identical_to="greedy")]
    runs = [[ub.RunResult(s, ["a b", "c"], ["a b", "c"]) for s in (3.0, 1.0, 2.0)],
            [ub.RunResult(s, ["a b", "c"], ["a b", "c"]) for s in (1.0, 9.0, 0.5)],
            [ub.RunResult(1.0, ["a b", "d"], ["a b", "d"])]]
    table = ub.summarise(rows, [["cmd", "x y"]] * 3, runs, ["a b", "c"])
    assert [r["median"] for r in table] == [2.0, 1.0, 1.0]
    assert table[1]["ratio"] == pytest.approx(0.5)
    assert table[0]["command"] == "cmd 'x y'"
    assert (table[1]["identical"], table[2]["identical"]) == (2, 1)
    text = ub.format_table(ub.ModelDir("/m/demo", "es", "en"), table, 3)
    assert "| spec | 1.000 | 0.50× greedy |" in text and "identical to greedy (2/2)" in text
    assert "**NOT identical** to greedy (1/2)" in text


def _model(tmp_path, draft=True):
    return ub.ModelDir(str(tmp_path), "es", "en", draft=str(tmp_path / "draft.pt") if draft else None)


def test_presets_mark_what_must_be_identical_and_say_what_is_left_out(tmp_path):
    rows, skipped = ub.rows_for(_model(tmp_path, draft=False), ["batch1", "k5"], [], "ctranslate2 is not importable")
    by = {r.label: r for r in rows}
    assert "speculative" not in by and any("draft.pt" in s for s in skipped)
    assert any(s.startswith("CTranslate2 rows: ctranslate2 is not importable") for s in skipped)
    assert by["gs-jacobi"].identical_to == "greedy" and by["gs-jacobi"].options[-6:] == ub.BATCH1
    assert by["fixed-ours --beam-finalize fairseq k=5"].identical_to == "fairseq beam k=5"
    (tmp_path / "ct2").mkdir()
    rows, _ = ub.rows_for(_model(tmp_path), ["k5"], [], str(tmp_path / "ct2"))
    ct2 = [r for r in rows if r.ct2]
    assert [r.label for r in ct2] == ["CTranslate2 float32 k5", "CTranslate2 int8 k5"] and ct2[0].ct2["k"] == 5


def test_speculative_beam_rows_need_a_draft_and_must_equal_the_fixed_beam(tmp_path):
    rows, _ = ub.rows_for(_model(tmp_path), ["k5", "k5b1"], [], None)
    by = {r.label: r for r in rows}
    assert by["speculative-beam k=5"].identical_to == "fixed-ours k=5"
    assert by["speculative-beam k=5 b1"].identical_to == by["speculative-beam k=5 b1"].reference == "fixed-ours k=5 b1"
    assert by["fixed-ours k=5 b1"].options[-4:] == ["--stream-capacity", "1", "--batch-size", "1"]
    rows, skipped = ub.rows_for(_model(tmp_path, draft=False), ["k5b1"], [], None)
    assert [r.label for r in rows] == ["fixed-ours k=5 b1"] and any("draft.pt" in s for s in skipped)


def test_skip_leaves_a_preset_row_out_and_says_so(tmp_path):
    (tmp_path / "ct2").mkdir()
    skip = ["speculative-beam k=50", "CTranslate2 int8 k50"]
    rows, skipped = ub.rows_for(_model(tmp_path), ["k50"], [], str(tmp_path / "ct2"), (), skip)
    assert not {r.label for r in rows} & set(skip) and "fixed-ours k=50" in {r.label for r in rows}
    assert [s for s in skipped if s.endswith(": --skip")] == [f"{label}: --skip" for label in skip]
    ub.rows_for(_model(tmp_path), ["k50"], [], None, (), ["CTranslate2 int8 k50"])  # checked before conversion
    # an unknown label, and a row others are timed against or must equal, are refused before any run
    for bad in (["speculative-beam k=5"], ["fairseq beam k=50"], ["fixed-ours k=50"]):
        with pytest.raises(UsageError, match="--skip"):
            ub.rows_for(_model(tmp_path), ["k50"], [], None, (), bad)
    rows, _ = ub.rows_for(_model(tmp_path), ["k50"], [], None, (), ["fixed-ours k=50", "speculative-beam k=50"])
    assert "fixed-ours k=50" not in {r.label for r in rows}


def test_custom_rows_and_their_mistakes(tmp_path):
    rows, _ = ub.rows_for(_model(tmp_path), [], ["g=--search fixed-ours --beam 1", "s=--search speculative --beam 1"],
                          None, ["s=g"])
    assert rows[1].options == ["--search", "speculative", "--beam", "1"] and rows[1].identical_to == "g"
    assert rows[1].reference == "g" and rows[0].env == {}
    # environment assignments before the options, as in a shell command: the row's runs get them
    row = ub.custom_row("f32 panels=FAIRSEQ_STREAM_NO_HALF_PANELS=1 X_Y= --search fixed-ours --beam 1")
    assert (row.label, row.env) == ("f32 panels", {"FAIRSEQ_STREAM_NO_HALF_PANELS": "1", "X_Y": ""})
    assert row.options == ["--search", "fixed-ours", "--beam", "1"]
    assert ub.custom_row("k=5=--beam 5").label == "k=5"  # a label may hold an '='
    for runs, identical in ((["no label"], []), (["a=--beam 1", "a=--beam 2"], []), (["a=--beam 1"], ["a=b"]),
                            (["a=--beam '1"], []), (["a=lower=1 --beam 1"], [])):
        with pytest.raises(UsageError):
            ub.rows_for(_model(tmp_path), [], runs, None, identical)


def test_a_ctranslate2_run_is_read_from_its_process():
    cmd = [sys.executable, "-c", "import json; print(json.dumps({'seconds': 0.25, 'outputs': ['He said@@ s .']}))"]
    result = ub.run_ct2(cmd, {}, "ct2", "en")
    assert (result.seconds, result.hypotheses, result.detokenised) == (0.25, ["He said@@ s ."], ["He saids."])


def test_a_bad_model_folder_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="not a folder"):
        ub.load_model_dir(str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="no checkpoint.pt"):
        ub.load_model_dir(str(tmp_path))
    (tmp_path / "bpe.codes").write_text("#version: 0.2\n")
    torch.save({"cfg": {"task": {}, "model": {}}}, tmp_path / "checkpoint.pt")
    with pytest.raises(UsageError, match="records no language pair"):
        ub.load_model_dir(str(tmp_path))
    (tmp_path / "checkpoint.pt").write_text("not a checkpoint")
    with pytest.raises(UsageError, match="cannot be read") as err:
        ub.load_model_dir(str(tmp_path))
    assert "\n" not in str(err.value)


def test_the_cpu_is_named_with_its_instructions():
    name = ub.cpu_name()
    assert name.endswith(")") and any(isa in name for isa in ("AVX-512 VNNI", "AVX-512", "AVX2", "no AVX2"))


FAKE_CT2 = '''
class _Result:
    def __init__(self, tokens):
        self.hypotheses = [list(tokens)]


class Translator:
    def __init__(self, model_dir, device="cpu", compute_type="default", **threads):
        assert threads == {"intra_threads": 1, "inter_threads": 1}

    def translate_batch(self, source, beam_size=1, max_batch_size=0, **kwargs):
        assert beam_size == 5 and max_batch_size == 64
        return [_Result(reversed(tokens)) for tokens in source]
'''


def test_a_ctranslate2_row_runs_bench_vs_ctranslate2s_row_in_its_own_process(tmp_path):
    """The child process imports the script's row (a stand-in ctranslate2 here: it reverses the tokens)."""
    (tmp_path / "ctranslate2.py").write_text(FAKE_CT2)
    row = ub.Row("CTranslate2 float32 k5", ct2={"model": str(tmp_path), "compute_type": "float32", "k": 5, "batch": 64})
    cmds = ub.row_commands(ub.ModelDir(str(tmp_path), "es", "en"), "data", [row], [["wor@@", "ld", "Hello"]],
                           str(tmp_path))
    env = dict(__import__("os").environ, PYTHONPATH=str(tmp_path), PYTHONWARNINGS="ignore")
    result = ub.run_ct2(cmds[0], env, row.label, "en")
    assert result.hypotheses == ["Hello ld wor@@"] and result.detokenised == ["Hello ld wor"]
    assert result.seconds >= 0


def test_the_revision_says_when_the_tree_differs_from_its_commit(tmp_path, monkeypatch):
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "f.txt").write_text("a\n")
    git("add", "f.txt")
    git("commit", "-qm", "one")
    monkeypatch.setattr(ub, "REPO_DIR", str(tmp_path))
    clean = ub._revision()
    assert clean and "+" not in clean
    (tmp_path / "new.txt").write_text("untracked files are not what ran\n")
    assert ub._revision() == clean
    (tmp_path / "f.txt").write_text("b\n")
    assert ub._revision() == clean + "+dirty"
    monkeypatch.setattr(ub, "REPO_DIR", str(tmp_path / "absent"))
    assert ub._revision() is None


# Our closing statistics as fairseq-generate logs them (a real demo run, 20 sentences, batch 1; shortened in the middle).
GREEDY_STATS = ("INFO:fairseq_stream:fairseq-stream fixed-ours: 20 sentences, 621 timesteps, 621 expansions (1.0/step), "
                "mean active sentences 1.0, step mode native: 621 native, 0 eager, 601 steps searched in the native loop")
SPEC_STATS = ("INFO:fairseq_stream:fairseq-stream speculative: 20 sentences, 226 timesteps, 226 expansions (1.0/step), "
              "draft's weights int8 (s8 x per-row 8-bit activations), per-sentence iterations 226 vs greedy steps 621 "
              "(2.75x), 2.75 tokens accepted per iteration, speculative: 2.75 tokens accepted per verification "
              "(1:53 2:49 3:26 4:98), mean γ 3.00, draft 11% and verification 47% of the time")
JACOBI_STATS = ("INFO:fairseq_stream:fairseq-stream gs-jacobi: 20 sentences, 594 timesteps, 594 expansions (1.0/step), "
                "per-sentence iterations 594 vs greedy steps 621 (1.05x), 1.05 tokens accepted per iteration")


def test_the_statistics_line_gives_calls_acceptance_and_shares():
    assert ub.parse_stream_stats("INFO:x\n" + GREEDY_STATS + "\n" + REAL) == {"timesteps": 621.0}
    spec = ub.parse_stream_stats(SPEC_STATS)
    assert spec == {"timesteps": 226.0, "iterations": 226.0, "greedy_steps": 621.0, "draft_share": 0.11,
                    "verify_share": 0.47}
    assert ub.parse_stream_stats(JACOBI_STATS + "\n" + SPEC_STATS)["timesteps"] == 226.0  # the last line
    assert ub.parse_stream_stats(REAL) == {}


def test_why_splits_a_ratio_into_tokens_a_call_and_a_calls_cost():
    rows = [ub.Row("greedy", reference="greedy"), ub.Row("spec", reference="greedy"),
            ub.Row("gs-jacobi", reference="greedy"), ub.Row("k5", reference="greedy")]
    stats = [ub.parse_stream_stats(line) for line in (GREEDY_STATS, SPEC_STATS, JACOBI_STATS)] + [
        {"timesteps": 40.0, "iterations": 40.0, "greedy_steps": 300.0}]  # not greedy's tokens: left out
    runs = [[ub.RunResult(s, ["a"], ["a"], st)] for s, st in zip((6.21, 4.52, 6.9, 1.0), stats)]
    table = ub.summarise(rows, [["cmd"]] * 4, runs, ["a"])
    why = ub.why_rows(table)
    assert [w["label"] for w in why] == ["spec", "gs-jacobi"]
    spec = why[0]
    assert spec["calls"] == 226 and spec["tokens_per_call"] == pytest.approx(621 / 226)
    assert spec["reference_step_us"] == pytest.approx(1e4) and spec["call_us"] == pytest.approx(4.52e6 / 226)
    assert spec["call_ratio"] == pytest.approx(2.0)
    assert spec["ratio"] == pytest.approx(table[1]["ratio"])  # the identity the table explains
    assert spec["draft_us"] == pytest.approx(0.11 * 2e4) and spec["verify_us"] == pytest.approx(0.47 * 2e4)
    assert "draft_us" not in why[1]
    text = ub.format_why(why)
    assert spec["rest_us"] == pytest.approx(0.42 * 2e4)
    assert "| spec | 226 | 2.75 | 20000 | 2.00× greedy (10000) | 2200 / 9400 / 8400 | 0.73× |" in text
    assert ub.format_why([]) == ""


# --jacobi-parallel auto's clause (a real demo run under load, 30 sentences, batch 1; shortened in the middle)
GATED_STATS = ("INFO:fairseq_stream:fairseq-stream gs-jacobi: 30 sentences, 942 timesteps, 942 expansions (1.0/step), "
               "912 steps searched in the native loop, per-sentence iterations 942 vs greedy steps 951 (1.01x), 1.01 "
               "tokens accepted per iteration, --jacobi-parallel auto: 3 sentence runs in blocks, 27 one position a "
               "call (2083 vs 1053 µs a verified token)")


def test_why_says_how_many_runs_the_gate_gave_blocks():
    stats = ub.parse_stream_stats(GATED_STATS)
    assert stats == {"timesteps": 942.0, "iterations": 942.0, "greedy_steps": 951.0, "block_runs": 3.0,
                     "single_runs": 27.0}
    rows = [ub.Row("greedy", reference="greedy"), ub.Row("gs-jacobi", reference="greedy")]
    runs = [[ub.RunResult(9.51, ["a"], ["a"], {"timesteps": 951.0})], [ub.RunResult(9.6, ["a"], ["a"], stats)]]
    why = ub.why_rows(ub.summarise(rows, [["cmd"]] * 2, runs, ["a"]))
    assert why[0]["block_runs"] == 3 and why[0]["gated_runs"] == 30
    assert "| gs-jacobi (blocks in 3 of 30 runs) | 942 | 1.01 |" in ub.format_why(why)


# fairseq-interactive's lines (fairseq 0.12's interactive.py), the closing one from a real demo run
INTERACTIVE = ("S-0\tEntonces dijo\nW-0\t0.010\tseconds\nH-0\t-0.26\tThe ser@@ pent said\nD-0\t-0.26\tThe serpent said\n"
               "P-0\t-0.1 -0.2\nS-1\tY\nW-1\t0.006\tseconds\nH-1\t-0.4\tAnd\nD-1\t-0.4\tAnd\n")
INTERACTIVE_END = "INFO:fairseq_cli.interactive:Total time: 0.560 seconds; translation time: 0.052"


def test_fairseq_interactives_translation_time_and_sentence_times():
    assert ub.parse_interactive_closing(INTERACTIVE + INTERACTIVE_END + "\n") == pytest.approx(0.052)
    assert ub.parse_interactive_closing(INTERACTIVE) is None
    assert ub.sentence_times(INTERACTIVE) == {0: 0.010, 1: 0.006}
    assert ub.sentence_lines(INTERACTIVE, "H") == {0: "The ser@@ pent said", 1: "And"}


def test_online_rows_run_fairseq_interactive_at_true_batch_1(tmp_path):
    rows, skipped = ub.rows_for(_model(tmp_path, draft=False), ["online"], [], None)
    assert [r.label for r in rows] == ["greedy online", "lookahead online (no prior)"] and all(r.interactive for r in rows)
    assert rows[1].identical_to == rows[1].reference == "greedy online" and rows[0].options[-6:] == ub.BATCH1
    assert any(s.startswith("speculative online: ") for s in skipped)
    cmd = ub.interactive_command(_model(tmp_path), "DATA", "IN.es", rows[0])
    assert cmd[0].endswith("fairseq-interactive") and cmd[1] == "DATA"
    assert cmd[cmd.index("--input") + 1] == "IN.es" and cmd[cmd.index("--buffer-size") + 1] == "1"
    # a run of the row: the translation time, every sentence's H-/D-/W- line; a missing one is one error
    script = [sys.executable, "-c", f"import sys; sys.stdout.write({INTERACTIVE!r}); print({INTERACTIVE_END!r})"]
    got = ub.run_interactive(script, {}, 2, "greedy online")
    assert (got.seconds, got.hypotheses, got.latencies) == (0.052, ["The ser@@ pent said", "And"], [0.010, 0.006])
    with pytest.raises(ub.FairseqStreamError, match="translated 2 of 3 sentences"):
        ub.run_interactive(script, {}, 3, "greedy online")
    table = ub.summarise(rows[:1], [cmd], [[got, got]], ["The serpent said", "And"])
    assert table[0]["latency"] == pytest.approx(0.008)  # the median over sentences of each one's median time
    text = ub.format_table(_model(tmp_path), table, 2)
    assert "| latency ms |" in text and "| 8.0 |" in text and "fairseq-interactive runs" in text


def test_isa_avx2_limits_every_rows_libraries_and_a_rows_own_environment_still_applies(monkeypatch):
    """--isa avx2: our kernels, PyTorch, MKL, oneDNN and CTranslate2 are told AVX2 in every run of every row kind."""
    seen = []
    fake = ub.RunResult(1.0, ["x"], ["x"])
    monkeypatch.setattr(ub, "run_generate", lambda cmd, env, n, label: seen.append((label, env)) or fake)
    monkeypatch.setattr(ub, "run_interactive", lambda cmd, env, n, label: seen.append((label, env)) or fake)
    monkeypatch.setattr(ub, "run_ct2", lambda cmd, env, label, lang: seen.append((label, env)) or fake)
    rows = [ub.Row("ours", ["--beam", "1"], env={"FAIRSEQ_STREAM_NO_HALF_PANELS": "1"}),
            ub.Row("online", ["--beam", "1"], interactive=True), ub.Row("ct2", ct2={"compute_type": "int8"})]
    model = ub.ModelDir("m", "es", "en")
    ub.measure(model, rows, [["a"], ["b"], ["c"]], 1, 1, 1, lambda m: None, "avx2")
    assert [label for label, _ in seen] == ["ours", "online", "ct2"]
    for label, env in seen:
        assert {k: env.get(k) for k in ub.ISA_ENV["avx2"]} == ub.ISA_ENV["avx2"], label
        assert env["OMP_NUM_THREADS"] == "1"
    assert seen[0][1]["FAIRSEQ_STREAM_NO_HALF_PANELS"] == "1"
    seen.clear()
    for name in ub.ISA_ENV["avx2"]:
        monkeypatch.delenv(name, raising=False)
    ub.measure(model, rows[:1], [["a"]], 1, 1, 1, lambda m: None)  # native: nothing added
    assert not set(ub.ISA_ENV["avx2"]) & set(seen[0][1])
    with pytest.raises(SystemExit):
        ub._parser().parse_args(["--isa", "sse"])


def test_isa_kernels_are_built_before_the_first_timed_run_and_a_failed_build_is_one_line(monkeypatch):
    """A kernel built at its first use would be built inside a run's generation timer; one that cannot be built
    would leave the rows timing PyTorch's paths: refused."""
    calls, returncodes = [], [0, 1]  # the prebuild's exit status: built, then failed

    def fake_run(cmd, capture_output, text, env):
        calls.append(env)
        return ub.subprocess.CompletedProcess(cmd, returncodes.pop(0), "C++ int8 kernel: built in 17 s\n", "")
    monkeypatch.setattr(ub.subprocess, "run", fake_run)
    logged = []
    ub.prebuild_kernels(dict(ub.ISA_ENV["avx2"]), logged.append)
    assert calls[0]["FAIRSEQ_STREAM_KERNEL_ISA"] == "avx2" and logged == ["C++ int8 kernel: built in 17 s"]
    with pytest.raises(UsageError, match="could not be built for --isa"):
        ub.prebuild_kernels(dict(ub.ISA_ENV["avx2"]), logged.append)
