"""The bad-input catalogue: every way a user (or a hostile input) has broken a run, as a case.

Each command-line case asserts the exit status, exactly one ``fairseq-stream: error:`` line
naming the cause (no traceback), and, where the run can recover, that every valid sentence is
translated. The cases run in one process that imports fairseq once and forks per case
(``cli_cases.py``); the in-process tests check the up-front refusals for every strategy.
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pytest
import torch

from conftest import DEMO, REPO, binarize, read_lines
from helpers import required_opts

CKPT = os.path.join(DEMO, "checkpoint.pt")
DRAFT = os.path.join(DEMO, "draft.pt")
PREFIX = "fairseq-stream: error: "
N = 12  # sentences of the binarized split


@dataclass
class Case:
    argv: List[str]
    needles: List[str] = field(default_factory=list)  # must be in the error line
    forbidden: List[str] = field(default_factory=list)  # must not be
    stdin: Optional[str] = None
    module: Optional[str] = None
    errors: int = 1  # error lines expected
    rc: Optional[int] = None  # None: any non-zero status
    translated: Optional[List[int]] = None  # H- ids expected (None: no hypothesis at all)
    env: Dict[str, str] = field(default_factory=dict)  # set in the case's process
    skips_listed: bool = False  # every sentence is translated or listed as skipped (none silently lost)


class Paths:
    """Files the cases refer to, made once per module."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.data = binarize(os.path.join(root, "bin"), {"test": N})
        self.mismatch = os.path.join(root, "mismatch")  # a target dictionary of another size
        shutil.copytree(self.data, self.mismatch)
        with open(os.path.join(self.mismatch, "dict.en.txt"), "r+", encoding="utf-8") as f:
            lines = f.readlines()
            f.seek(0)
            f.writelines(lines[:5000])
            f.truncate()
        self.empty = os.path.join(root, "empty")
        os.makedirs(self.empty)
        self.random = os.path.join(root, "random.pt")
        with open(self.random, "wb") as f:
            f.write(random.Random(0).randbytes(200_000))  # seeded: the same garbage every run
        self.marker = os.path.join(root, "pwned")
        self.evil = os.path.join(root, "evil.pt")
        torch.save({"model": {}, "cfg": None, "payload": _Payload(self.marker)}, self.evil)
        self.drafts = bad_drafts(root)


def bad_drafts(root: str) -> Dict[str, str]:
    """Broken copies of the demo's draft (issue 52): cut in half, empty, without 'model' or fairseq's
    metadata ('optimizer_history', whose absence makes fairseq's loader ask for 'best_loss'), en→es."""
    with open(DRAFT, "rb") as f:
        raw = f.read()
    state = torch.load(DRAFT, map_location="cpu", weights_only=False)
    reversed_state = torch.load(DRAFT, map_location="cpu", weights_only=False)
    reversed_state["cfg"]["model"].source_lang, reversed_state["cfg"]["model"].target_lang = "en", "es"
    out = {name: os.path.join(root, f"draft-{name}.pt") for name in ("truncated", "empty", "no-model", "no-metadata", "en-es")}
    with open(out["truncated"], "wb") as f:
        f.write(raw[: len(raw) // 2])
    open(out["empty"], "wb").close()
    torch.save({k: v for k, v in state.items() if k != "model"}, out["no-model"])
    torch.save({k: v for k, v in state.items() if k != "optimizer_history"}, out["no-metadata"])
    torch.save(reversed_state, out["en-es"])
    return out


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # runs a command if anything unpickles it
        return (os.system, (f"touch {self.marker}",))


def _gen(p: Paths, *extra: str, data: Optional[str] = None, path: str = CKPT) -> List[str]:
    return ["fairseq-generate", data or p.data, "--user-dir", "fairseq_stream", "--path", path, "--cpu",
            "--gen-subset", "test", *extra]


def _spec(p: Paths, draft: str) -> List[str]:
    return _gen(p, "--search", "speculative", "--beam", "1", "--max-len-b", "5", "--draft-path", draft)


def _interactive(*extra: str) -> List[str]:
    return ["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
            "--source-lang", "es", "--target-lang", "en", *extra]


README_TEXT_FLAGS = ["--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", os.path.join(DEMO, "bpe.codes")]
GOOD = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra."]


def catalogue(p: Paths) -> Dict[str, Case]:
    bad_lines = [GOOD[0], "Y dijo \udcff\udcfe Dios.", "luz " * 5000, GOOD[1], GOOD[0], GOOD[1]]
    avg = ["python", "--inputs", "X", CKPT, "--output", os.path.join(p.empty, "avg.pt")]
    return {
        # 1. length limits that leave no room, for fairseq's beam and ours alike
        "max-len-b-0": Case(_gen(p, "--max-len-b", "0"), ["--max-len-b 0", "--min-len"]),
        "max-len-a-tiny": Case(_gen(p, "--max-len-a", "0.05", "--max-len-b", "0", "--search", "var-stream"), ["--max-len-a 0.05"]),
        "min-len-over-max-jacobi": Case(_gen(p, "--min-len", "20", "--max-len-b", "10", "--search", "gs-jacobi", "--beam", "1"), ["--min-len 20"]),
        "min-len-over-max-ib-beam": Case(_gen(p, "--min-len", "20", "--max-len-b", "10", "--search", "ib-beam"), ["--min-len 20"]),
        # 2. tracebacks where one line was promised
        "beam-0": Case(_gen(p, "--beam", "0"), ["--beam must be >= 1"]),
        "beam-negative": Case(_gen(p, "--beam", "-1", "--search", "var-batch"), ["--beam must be >= 1"]),
        "nbest-0": Case(_gen(p, "--nbest", "0"), ["--nbest must be >= 1"]),
        "sampling-nbest": Case(_gen(p, "--sampling", "--search", "var-stream"), ["--sampling", "--nbest"]),
        "sampling-our-strategy": Case(_gen(p, "--sampling", "--beam", "2", "--nbest", "2", "--search", "var-stream"),
                                      ["--sampling", "--search beam"]),
        "max-tokens-below-a-sentence": Case(_gen(p, "--max-tokens", "10", "--search", "var-stream"), ["--max-tokens 10"]),
        "stream-stats-unwritable": Case(_gen(p, "--search", "var-stream", "--stream-stats", "/nonexistent/x.json"),
                                        ["--stream-stats", "/nonexistent"]),
        "average-refused-pickle": Case(avg[:2] + [p.evil] + avg[3:], ["allow-list"], module="fairseq_stream.tools.average_checkpoints"),
        "average-corrupt": Case(avg[:2] + [p.random] + avg[3:], ["corrupt"], ["TORCH_FORCE"], module="fairseq_stream.tools.average_checkpoints"),
        # 3. messages that name the real cause
        "random-bytes-checkpoint": Case(_gen(p, path=p.random), ["corrupt", "--path"], ["TORCH_FORCE", "allow-list"]),
        "unsafe-pickle": Case(_gen(p, path=p.evil), ["system", "allow-list", "trust"]),
        "dictionary-mismatch": Case(_gen(p, data=p.mismatch), ["dictionaries", "do not match"], ["truncated", "--path"]),
        "missing-lm": Case(_gen(p, "--lm-path", "/nonexistent/lm.pt", "--lm-weight", "0.1"), ["/nonexistent/lm.pt", "--lm-path"]),
        # the README's "Bad input" paragraph (the catalogue: docs/reliability.md)
        "missing-checkpoint": Case(_gen(p, path="/nonexistent/ckpt.pt"), ["/nonexistent/ckpt.pt", "--path"]),
        "no-dictionaries": Case(_gen(p, data=p.empty), ["dict"]),
        "unknown-search": Case(_gen(p, "--search", "nonsense"), ["nonsense", "var-stream"]),
        "impossible-option": Case(_gen(p, "--search", "var-stream", "--stream-epsilon", "2"), ["--stream-epsilon", "[0, 1)"]),
        "over-long-sentence": Case(_gen(p, "--max-source-positions", "8", "--search", "var-stream"),
                                   ["too long", "--skip-invalid-size-inputs-valid-test"]),
        "tokenizer-without-languages": Case(_gen(p, "--tokenizer", "moses", "--remove-bpe"), ["--source-lang and --target-lang"]),
        "skip-flag-lists-what-it-skips": Case(
            _gen(p, "--max-source-positions", "30", "--search", "var-stream", "--skip-invalid-size-inputs-valid-test"),
            errors=0, rc=0, skips_listed=True),
        # issue 38: options fairseq's own beam search ignored, its KeyError, the unnamed broken ensemble member,
        # and --no-repeat-ngram-size 1, which lost every sentence of the run
        "fairseq-beam-prune-preset": Case(_gen(p, "--prune-preset", "freitag2017"), ["--search beam", "--prune-preset"]),
        "fairseq-beam-retain-iter-history": Case(_gen(p, "--retain-iter-history"), ["--retain-iter-history"]),
        "ensemble-broken-member": Case(_gen(p, path=CKPT + ":" + p.random), [p.random, "corrupt"]),
        "no-repeat-ngram-1": Case(_gen(p, "--search", "var-stream", "--beam", "2", "--no-repeat-ngram-size", "1",
                                       "--max-len-a", "0", "--max-len-b", "6"), errors=0, rc=0, translated=list(range(N))),
        # issue 52: length limits beyond int64 decode at the model's own limit (were an int64 overflow in our strategies)
        "max-len-a-huge": Case(_gen(p, "--search", "var-stream", "--beam", "2", "--max-len-a", "1e300"),
                               errors=0, rc=0, translated=list(range(N))),
        "max-len-b-beyond-int64": Case(_gen(p, "--search", "fixed-ours", "--beam", "2", "--max-len-b", str(2 ** 63 - 1)),
                                       errors=0, rc=0, translated=list(range(N))),
        # a --lenpen whose length ** lenpen overflows float64 (was an OverflowError after decoding, fairseq's beam too)
        "lenpen-overflow-fairseq-beam": Case(_gen(p, "--lenpen", "150"), ["--lenpen 150", "at most 133.83"]),
        "lenpen-overflow-ours": Case(_gen(p, "--search", "var-stream", "--lenpen", "1e308", "--max-len-a", "1"),
                                     ["--lenpen 1e+308", "1024 tokens", "at most 102.39"]),
        # --unkpen -inf: an infinite bonus for <unk> (inf bans it)
        "unkpen-minus-inf": Case(_gen(p, "--search", "gs-jacobi", "--beam", "1", "--unkpen=-inf"),
                                 ["--unkpen -inf", "<unk>"]),
        # a negative --no-repeat-ngram-size (was taken as 0)
        "no-repeat-ngram-negative": Case(_gen(p, "--search", "var-stream", "--no-repeat-ngram-size", "-1"),
                                         ["--no-repeat-ngram-size must be >= 0"]),
        # fairseq's beam under --nbest 10 --beam 5 (printed 5 hypotheses a sentence in silence)
        "fairseq-beam-nbest-over-beam": Case(_gen(p, "--nbest", "10", "--beam", "5"),
                                             ["--nbest must be between 1 and --beam (5), got 10"]),
        # a bad --draft-path: one line naming it and the file, as under --path (were torch's and fairseq's tracebacks)
        "draft-random-bytes": Case(_spec(p, p.random), ["corrupt", f"--draft-path: {p.random}"], ["weights_only", "(--path"]),
        "draft-truncated": Case(_spec(p, p.drafts["truncated"]), ["is truncated", "table of contents",
                                                                  f"check --draft-path: {p.drafts['truncated']}"],
                                ["PytorchStreamReader", "miniz"]),
        "draft-empty": Case(_spec(p, p.drafts["empty"]), ["is empty (0 bytes)", f"check --draft-path: {p.drafts['empty']}"]),
        "draft-without-model": Case(_spec(p, p.drafts["no-model"]), ["KeyError: 'model'", "check --draft-path"]),
        "draft-unsafe-pickle": Case(_spec(p, p.evil), ["allow-list", f"--draft-path: {p.evil}"]),
        # errors that named the wrong thing: --path for the draft's, the run's languages for a draft or an ensemble member
        "draft-without-metadata": Case(_spec(p, p.drafts["no-metadata"]), ["'best_loss'", "check --draft-path"],
                                       ["check --path"]),
        "draft-other-direction": Case(_spec(p, p.drafts["en-es"]), [
            f"--draft-path {p.drafts['en-es']}: the draft was trained for en→es", "the model translates es→en",
            "give a draft trained for es→en"], ["--source-lang"]),
        "ensemble-member-other-direction": Case(_gen(p, path=CKPT + ":" + p.drafts["en-es"]),
                                                [f"the ensemble member {p.drafts['en-es']} was trained for en→es",
                                                 f"drop {p.drafts['en-es']}"], ["--source-lang"]),
        # 4. fairseq-interactive: a bad line is reported by its line number, the rest translated
        "interactive-bad-lines": Case(
            _interactive(*README_TEXT_FLAGS, "--search", "var-stream", "--buffer-size", "4", "--batch-size", "4"),
            ["input line "], stdin="\n".join(bad_lines) + "\n", errors=2, rc=1, translated=[0, 3, 4, 5]),
        "interactive-skip-flag": Case(
            _interactive(*README_TEXT_FLAGS, "--skip-invalid-size-inputs-valid-test", "--buffer-size", "2"),
            stdin="\n".join([GOOD[0], "luz " * 5000, GOOD[1]]) + "\n", errors=0, rc=0, translated=[0, 2]),
        # 5. the console scripts, run as modules here (the installed lookup: tests/unit/test_runtime.py)
        "ddgviz-documented-command": Case(["fairseq-stream-ddgviz", "--sentence", "Y dijo Dios: Sea la luz: y fué la luz.",
                                           "--out", os.path.join(p.root, "ddg")], errors=0, rc=0,
                                          module="fairseq_stream.tools.ddgviz"),
        "demo-help": Case(["fairseq-stream-demo", "--help"], errors=0, rc=0, module="fairseq_stream.tools.demo"),
        "bench-help": Case(["fairseq-stream-bench", "--help"], errors=0, rc=0, module="fairseq_stream.tools.bench"),
        # fairseq's own tools list our options (an unescaped % in one help text once broke both)
        "generate-help": Case(["fairseq-generate", "--user-dir", "fairseq_stream", "--help"], errors=0, rc=0),
        "interactive-help": Case(["fairseq-interactive", "--user-dir", "fairseq_stream", "--help"], errors=0, rc=0),
        "demo-files-missing": Case(["fairseq-stream-demo"], ["FAIRSEQ_STREAM_DEMO_DIR"], module="fairseq_stream.tools.demo",
                                   env={"FAIRSEQ_STREAM_DEMO_DIR": p.empty}),
        # 6. first use: raw text without the tokenizer and BPE is warned about, not silently garbage
        "interactive-raw-text-without-bpe": Case(
            _interactive(), stdin="\n".join(read_lines(os.path.join(DEMO, "test.es"), 4)) + "\n",
            errors=0, rc=0, translated=[0, 1, 2, 3]),
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    paths = Paths(str(tmp_path_factory.mktemp("bad_input")))
    cases = catalogue(paths)
    payload = [{"argv": c.argv, "stdin": c.stdin, "module": c.module, "env": c.env} for c in cases.values()]
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "integration", "cli_cases.py")], cwd=REPO,
                          input=json.dumps(payload), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return paths, dict(zip(cases, zip(cases.values(), json.loads(proc.stdout))))


CASE_IDS = [  # the keys of catalogue() (which needs files), listed for parametrize
    "max-len-b-0", "max-len-a-tiny", "min-len-over-max-jacobi", "min-len-over-max-ib-beam", "beam-0", "beam-negative",
    "nbest-0", "sampling-nbest", "sampling-our-strategy", "max-tokens-below-a-sentence", "stream-stats-unwritable",
    "average-refused-pickle", "average-corrupt", "random-bytes-checkpoint", "unsafe-pickle", "dictionary-mismatch",
    "missing-lm", "missing-checkpoint", "no-dictionaries", "unknown-search", "impossible-option", "over-long-sentence",
    "tokenizer-without-languages", "skip-flag-lists-what-it-skips", "interactive-bad-lines", "interactive-skip-flag",
    "ddgviz-documented-command", "demo-help", "bench-help", "generate-help", "interactive-help", "demo-files-missing",
    "interactive-raw-text-without-bpe", "fairseq-beam-prune-preset",
    "fairseq-beam-retain-iter-history", "ensemble-broken-member", "no-repeat-ngram-1", "max-len-a-huge",
    "max-len-b-beyond-int64", "lenpen-overflow-fairseq-beam", "lenpen-overflow-ours", "unkpen-minus-inf",
    "no-repeat-ngram-negative", "fairseq-beam-nbest-over-beam", "draft-random-bytes", "draft-truncated", "draft-empty",
    "draft-without-model", "draft-unsafe-pickle", "draft-without-metadata", "draft-other-direction",
    "ensemble-member-other-direction",
]


def hypothesis_ids(stdout: str) -> List[int]:
    return sorted(int(m.group(1)) for m in re.finditer(r"^H-(\d+)\t", stdout, re.M))


@pytest.mark.quick_every_case  # every case is a CLI contract; all run in the one fixture above
@pytest.mark.parametrize("name", CASE_IDS)
def test_bad_input(results, name):
    paths, table = results
    case, got = table[name]
    stderr = got["stderr"]
    assert "Traceback" not in stderr and "Traceback" not in got["stdout"], stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith(PREFIX)]
    assert len(errors) == case.errors, stderr[-3000:]
    assert (got["rc"] != 0) if case.rc is None else (got["rc"] == case.rc), (got["rc"], stderr[-2000:])
    text = " ".join(errors)
    for needle in case.needles:
        assert needle in text, text
    for word in case.forbidden:
        assert word not in text, text
    if case.skips_listed:
        listed = re.search(r"skipping \d+ sentence\(s\) .*ids: \[([\d, ]+)\]", got["stdout"] + stderr)
        skipped = [int(i) for i in listed.group(1).split(",")]
        assert skipped and sorted(hypothesis_ids(got["stdout"]) + skipped) == list(range(N))
    else:
        assert hypothesis_ids(got["stdout"]) == (case.translated or [])
    assert not os.path.exists(paths.marker), "the refused pickle ran code"


def test_the_catalogue_lists_every_case(results):
    assert sorted(results[1]) == sorted(CASE_IDS)


def test_the_documented_ddgviz_command_writes_the_png_and_the_html(results):
    """The ddgviz command of docs/usage.md ("Jacobi decoding"; it was in the README until issue 46)."""
    paths, table = results
    for ext in ("png", "html"):
        assert os.path.getsize(os.path.join(paths.root, f"ddg.{ext}")) > 1000
    stderr = table["ddgviz-documented-command"][1]["stderr"]
    assert "DEBUG:" not in stderr, stderr  # matplotlib logs its import at DEBUG (integration/quiet.py)


@pytest.mark.parametrize("tool", ["generate", "interactive"])
def test_help_lists_the_search_option(results, tool):
    stdout = results[1][f"{tool}-help"][1]["stdout"]
    text = re.sub(r"-\n\s+", "-", stdout)  # argparse wraps help text at hyphens
    assert "--search SEARCH" in text and "var-stream" in text and "--stream-epsilon" in text, stdout[-2000:]


def test_interactive_reports_input_line_numbers(results):
    _, table = results
    errors = [l for l in table["interactive-bad-lines"][1]["stderr"].splitlines() if l.startswith(PREFIX)]
    assert "input line 2 is not valid UTF-8" in errors[0] and "input line 3 has 5001 tokens" in errors[1], errors


def test_interactive_skip_flag_turns_the_error_into_a_warning(results):
    stderr = results[1]["interactive-skip-flag"][1]["stderr"]
    assert "fairseq-stream: warning: input line 2 has 5001 tokens" in stderr, stderr[-2000:]


def test_raw_text_without_tokenizer_and_bpe_is_warned_about(results):
    _, table = results
    stderr = table["interactive-raw-text-without-bpe"][1]["stderr"]
    assert "fairseq-stream: warning:" in stderr and "--tokenizer moses --bpe subword_nmt" in stderr, stderr[-2000:]


# ---- in process: the same refusals for every registered strategy, and the smallest limit that works ----
def _all_searches() -> List[str]:
    from fairseq_stream.search.registry import search_names

    return search_names()


@pytest.mark.parametrize("search", _all_searches())
@pytest.mark.parametrize("gen,needle", [
    ({"max_len_b": 0}, "--max-len-b 0"),
    ({"max_len_a": 0.05, "max_len_b": 0}, "--max-len-a 0.05"),
    ({"min_len": 20, "max_len_b": 10}, "--min-len 20"),
    ({"max_len_a": -1.0}, "--max-len-a must be >= 0"),
    ({"beam": 0}, "--beam must be >= 1"),
    ({"nbest": 0}, "--nbest must be >= 1"),
    ({"temperature": 0.0}, "--temperature must be > 0"),
    # issue 52: 201 ** 150 overflows float64 (outputs of up to --max-len-b 200 tokens and the EOS)
    ({"lenpen": 150.0}, "--lenpen 150.0 overflows"),
    ({"lenpen": -1e308}, "--lenpen -1e+308 overflows"),
    ({"unkpen": -math.inf}, "--unkpen -inf is an infinite bonus"),
    ({"no_repeat_ngram_size": -1}, "--no-repeat-ngram-size must be >= 0"),
    ({"beam": 2.7}, "--beam must be an integer, got 2.7"),
    ({"max_len_b": 20.5}, "--max-len-b must be an integer, got 20.5"),
])
def test_impossible_generation_options_are_refused_for_every_strategy(demo_session, search, gen, needle):
    from fairseq_stream.errors import FairseqStreamError

    with pytest.raises(FairseqStreamError, match=re.escape(needle)):
        demo_session.build_generator(search, gen, {})


@pytest.mark.parametrize("search", [s for s in _all_searches() if s != "ib-beam"])  # ib-beam needs an IB model
def test_the_smallest_length_limit_gives_every_sentence_a_finite_hypothesis(demo_session, search):
    sources = read_lines(os.path.join(DEMO, "test.es"), 5)
    from fairseq_stream.search.registry import get_search

    gen = {"max_len_a": 0, "max_len_b": 1, "beam": 3 if get_search(search).capabilities.beam else 1}
    opts = required_opts(search)
    result = demo_session.translate(demo_session.encode(sources), search=search, gen=gen, opts=opts)
    assert len(result.hypos) == len(sources)
    for nbest in result.hypos:
        assert nbest and nbest[0]["tokens"].numel() <= 2 and torch.isfinite(torch.as_tensor(nbest[0]["score"]))


def test_a_bad_draft_is_one_line_in_the_python_session(demo_session, tmp_path):
    """The session raised torch's UnpicklingError (with its advice to load with weights_only=False) and KeyErrors."""
    from fairseq_stream.errors import FairseqStreamError

    drafts = dict(bad_drafts(str(tmp_path)), **{"random": str(tmp_path / "random.pt")})
    (tmp_path / "random.pt").write_bytes(random.Random(0).randbytes(20_000))
    needles = {"random": "corrupt", "truncated": "truncated", "empty": "empty", "no-model": "'model'",
               "no-metadata": "'best_loss'", "en-es": "give a draft trained for es→en"}
    data = demo_session.encode(read_lines(os.path.join(DEMO, "test.es"), 1))
    for name, path in drafts.items():
        with pytest.raises(FairseqStreamError) as refused:
            demo_session.translate(data, search="speculative", gen={"beam": 1, "max_len_b": 5}, opts={"draft_path": path})
        message = str(refused.value)
        assert needles[name] in message and re.search(rf"--draft-path:? {re.escape(path)}", message), message
        assert "\n" not in message and "weights_only" not in message and "--path" not in message.replace("--draft-path", "")


@pytest.mark.parametrize("h,c,limit", [(2, 1, 1), (2, 1, 2), (2, 2, 3), (4, 1, 1)])
def test_ib_beam_at_the_smallest_length_limit_gives_finite_hypotheses(h, c, limit):
    """ib-beam emits h·c words a step: a limit that is not a multiple still ends every sentence."""
    from helpers import fake_task, gen_cfg, make_dictionary, sample_for, stream_opts, tiny_ib_model

    from fairseq_stream.integration.build import build_generator

    d = make_dictionary([f"w{i}" for i in range(30)])
    model = tiny_ib_model(d, h=h, c=c)
    for min_len in (1, limit):
        generator = build_generator("ib-beam", fake_task(d), [model],
                                    gen_cfg(beam=2, max_len_a=0, max_len_b=limit, min_len=min_len),
                                    stream_opts(search="ib-beam"))
        hypos = generator.generate([model], sample_for(d, [5, 9]))
        assert len(hypos) == 2
        for nbest in hypos:
            assert nbest and all(torch.isfinite(torch.as_tensor(hyp["score"])) for hyp in nbest), nbest


# ---- issue 52: values at the edge of the number types decode, or are refused in one line ----
def _decode(session, search: str, gen: dict, n: int = 3):
    from fairseq_stream.search.registry import get_search

    gen = dict(gen, beam=2 if get_search(search).capabilities.beam else 1)
    opts = required_opts(search)
    return session.translate(session.encode(read_lines(os.path.join(DEMO, "test.es"), n)), search=search, gen=gen, opts=opts)


# ib-beam needs an IB model; jacobi iterates over the whole target, here 1024 positions (40 s; gs-jacobi and
# hybrid-jacobi run its code in blocks, and every strategy takes its limit from the one score_edits.max_lengths)
@pytest.mark.parametrize("search", [s for s in _all_searches() if s not in ("ib-beam", "jacobi")])
def test_length_limits_beyond_int64_decode_as_the_models_own_limit(demo_session, search):
    """a·|x| + b beyond int64 (was: SymIntArrayRef expected to contain only concrete integers) is capped at the
    model's positions before the cast, as fairseq caps it: the same hypotheses as that limit given directly."""
    cap = {"max_len_a": 0, "max_len_b": demo_session.models[0].max_decoder_positions() - 1}
    expected = [[h["tokens"].tolist() for h in nbest] for nbest in _decode(demo_session, search, cap).hypos]
    for gen in ({"max_len_a": 1e19}, {"max_len_a": 1e300}, {"max_len_b": 2 ** 63 - 1}):
        got = [[h["tokens"].tolist() for h in nbest] for nbest in _decode(demo_session, search, gen).hypos]
        assert got == expected, gen


@pytest.mark.parametrize("search", [s for s in _all_searches() if s != "ib-beam"])
def test_an_infinite_unk_penalty_bans_unk_in_every_strategy(demo_session, search):
    """--unkpen inf bans <unk>, as in fairseq's beam (was: only empty hypotheses under var-stream and fixed-ours,
    NaN scores under gs-jacobi and speculative: (tokens == unk) * inf is NaN for every other token)."""
    unk = demo_session.task.target_dictionary.unk()
    for nbest in _decode(demo_session, search, {"unkpen": math.inf, "max_len_b": 30}).hypos:
        for hyp in nbest:
            assert hyp["tokens"].numel() > 1 and unk not in hyp["tokens"].tolist(), hyp["tokens"]
            assert math.isfinite(float(hyp["score"])) and torch.isfinite(hyp["positional_scores"]).all()


def test_the_lenpen_bound_is_the_largest_that_float64_holds(demo_session):
    """The bound the --lenpen refusal names decodes; a little more is refused (outputs of up to 21 tokens)."""
    from fairseq_stream.errors import FairseqStreamError

    with pytest.raises(FairseqStreamError) as refused:
        demo_session.build_generator("var-stream", {"lenpen": 1000.0, "max_len_b": 20}, {})
    bound = float(re.search(r"at most ([\d.]+)", str(refused.value)).group(1))
    assert "reach 21 tokens" in str(refused.value) and 21.0 ** bound < math.inf
    for search in ("beam", "var-stream"):
        assert _decode(demo_session, search, {"lenpen": bound, "max_len_b": 20}).hypos
        with pytest.raises(FairseqStreamError, match="--lenpen"):
            demo_session.build_generator(search, {"lenpen": bound + 0.01, "max_len_b": 20}, {})


@pytest.mark.parametrize("search", ["beam", "var-stream", "fixed-ours"])
def test_nbest_above_beam_is_refused_by_fairseqs_beam_as_by_ours(demo_session, search):
    from fairseq_stream.errors import FairseqStreamError

    with pytest.raises(FairseqStreamError, match=re.escape("--nbest must be between 1 and --beam (5), got 10")):
        demo_session.build_generator(search, {"beam": 5, "nbest": 10}, {})
