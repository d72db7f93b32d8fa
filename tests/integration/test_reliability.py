"""Reliability, round 3: the catalogue of docs/reliability.md that is not in test_bad_input.py.

The command-line cases run in one process that imports fairseq once and forks per case
(``cli_cases.py``); the rest run in process on the demo model.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pytest
import torch

from conftest import DEMO, REPO, binarize, read_lines
from helpers import required_opts
from fairseq_stream.errors import FairseqStreamError

CKPT = os.path.join(DEMO, "checkpoint.pt")
PREFIX = "fairseq-stream: error: "
WARNING = "fairseq-stream: warning: "
TEXT = ["--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", os.path.join(DEMO, "bpe.codes")]
GOOD = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra."]
BLANK = ["", "   ", "\u00a0\u00a0", "\x00", "\t\x00 \u00a0"]  # empty, spaces, NBSP, NUL, a mix


@dataclass
class Case:
    argv: List[str]
    needles: List[str] = field(default_factory=list)  # in the one error line (or the warnings, with rc 0)
    stdin: Optional[str] = None
    rc: Optional[int] = None  # None: non-zero
    errors: int = 1
    warnings: List[str] = field(default_factory=list)  # each in some warning line


def _gen(data: str, *extra: str, path: str = CKPT) -> List[str]:
    return ["fairseq-generate", data, "--user-dir", "fairseq_stream", "--path", path, "--cpu", "--gen-subset", "test",
            "--max-len-b", "20", *extra]


def _interactive(*extra: str, path: str = CKPT) -> List[str]:
    return ["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", path, "--cpu", "--source-lang", "es",
            "--target-lang", "en", "--max-len-b", "20", *TEXT, *extra]


def reversed_checkpoint(dest: str) -> str:
    """The demo checkpoint, recorded as trained en→es (it is es→en): what a mixed-up run loads."""
    state = torch.load(CKPT, map_location="cpu", weights_only=False)
    state["cfg"]["model"].source_lang, state["cfg"]["model"].target_lang = "en", "es"
    torch.save(state, dest)
    return dest


def catalogue(root: str) -> Dict[str, Case]:
    data = binarize(os.path.join(root, "bin"), {"test": 3})
    a_file = os.path.join(root, "a-file")
    open(a_file, "w").close()
    reversed_ckpt = reversed_checkpoint(os.path.join(root, "en-es.pt"))
    blank_input = "\n".join([GOOD[0], *BLANK, GOOD[1]]) + "\n"
    return {
        # the same path refuses every NaN or out-of-range value (in process below, for each option)
        "unkpen-nan": Case(_gen(data, "--search", "var-stream", "--unkpen", "nan"), ["--unkpen is NaN"]),
        "results-path-a-file": Case(_gen(data, "--results-path", a_file), ["--results-path", "is a file"]),
        "results-path-unwritable": Case(_gen(data, "--results-path", "/proc/fairseq-stream-results"),
                                        ["--results-path /proc/fairseq-stream-results", "cannot write"]),
        "retain-iter-history": Case(_gen(data, "--search", "var-stream", "--retain-iter-history"),
                                    ["--retain-iter-history", "--search beam"]),
        "reversed-checkpoint": Case(_gen(data, "-s", "es", "-t", "en", path=reversed_ckpt), ["en→es", "es→en"]),
        "fp16-on-cpu-warns": Case(_gen(data, "--search", "var-stream", "--fp16"), rc=0, errors=0,
                                  warnings=["--fp16 on a CPU"]),
        # blank lines, and --nbest 3 under a tight δ: fewer hypotheses for some sentences, said once
        "blank-lines-var-stream": Case(_interactive("--search", "var-stream", "--beam", "4", "--nbest", "3",
                                                    "--prune-abs-threshold", "1"),
                                       stdin=blank_input, rc=0, errors=0, warnings=["got fewer than --nbest 3"]),
        "blank-lines-fairseq-beam": Case(_interactive("--beam", "3"), stdin=blank_input, rc=0, errors=0),
    }


CASE_IDS = ["unkpen-nan", "results-path-a-file", "results-path-unwritable", "retain-iter-history", "reversed-checkpoint",
            "fp16-on-cpu-warns", "blank-lines-var-stream", "blank-lines-fairseq-beam"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cases = catalogue(str(tmp_path_factory.mktemp("reliability")))
    payload = [{"argv": c.argv, "stdin": c.stdin} for c in cases.values()]
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "integration", "cli_cases.py")], cwd=REPO,
                          input=json.dumps(payload), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(zip(cases, zip(cases.values(), json.loads(proc.stdout))))


@pytest.mark.slow  # the catalogue runs fairseq-generate/-interactive subprocesses; test_bad_input.py's catalogue covers the fast tier
def test_the_list_names_every_case(results):
    assert sorted(results) == sorted(CASE_IDS)


@pytest.mark.slow  # the catalogue runs fairseq-generate/-interactive subprocesses; test_bad_input.py's catalogue covers the fast tier
@pytest.mark.parametrize("name", CASE_IDS)
def test_cli_case(results, name):
    case, got = results[name]
    stderr = got["stderr"]
    assert "Traceback" not in stderr + got["stdout"], stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith(PREFIX)]
    assert len(errors) == case.errors, stderr[-3000:]
    assert (got["rc"] != 0) if case.rc is None else (got["rc"] == case.rc), (got["rc"], stderr[-2000:])
    for needle in case.needles:
        assert needle in " ".join(errors), errors
    warnings = [line for line in stderr.splitlines() if line.startswith(WARNING)]
    for needle in case.warnings:
        assert sum(needle in line for line in warnings) == 1, warnings  # said once
    if case.rc is None:
        assert not re.search(r"^H-", got["stdout"], re.M)  # refused before decoding


@pytest.mark.slow  # the catalogue runs fairseq-generate/-interactive subprocesses; test_bad_input.py's catalogue covers the fast tier
@pytest.mark.parametrize("name", ["blank-lines-var-stream", "blank-lines-fairseq-beam"])
def test_blank_lines_get_the_empty_hypothesis_with_score_0(results, name):
    _, got = results[name]
    hypos: Dict[int, tuple] = {}
    for m in re.finditer(r"^H-(\d+)\t(\S+)\t(.*)$", got["stdout"], re.M):
        hypos.setdefault(int(m.group(1)), (float(m.group(2)), m.group(3)))  # the best of each n-best list
    assert sorted(hypos) == list(range(len(BLANK) + 2)), got["stdout"]  # none lost
    for i in range(1, len(BLANK) + 1):
        assert hypos[i] == (0.0, ""), (i, hypos[i])
    assert hypos[0][1] and hypos[len(BLANK) + 1][1] and hypos[0][0] < 0  # the others are translated as before


@pytest.mark.slow  # the catalogue runs fairseq-generate/-interactive subprocesses; test_bad_input.py's catalogue covers the fast tier
def test_fewer_than_nbest_warning_counts_the_sentences(results):
    _, got = results["blank-lines-var-stream"]
    counts = {}
    for m in re.finditer(r"^H-(\d+)\t", got["stdout"], re.M):
        counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
    short = sum(n < 3 for n in counts.values())
    line = next(line for line in got["stderr"].splitlines() if "fewer than --nbest" in line)
    assert short and line.startswith(f"{WARNING}{short} of {len(counts)} sentence(s)"), (counts, line)


# ---- in process ----------------------------------------------------------------------------------
def _searches() -> List[str]:
    from fairseq_stream.search.registry import search_names

    return [s for s in search_names() if s != "ib-beam"]  # ib-beam needs an IBDecoder checkpoint


@pytest.mark.parametrize("gen,opts,needle", [
    ({"unkpen": math.nan}, {}, "--unkpen is NaN"),
    ({"lenpen": math.nan}, {}, "--lenpen is NaN"),
    ({"max_len_a": math.nan}, {}, "--max-len-a is NaN"),
    ({"temperature": math.inf}, {}, "--temperature must be finite"),
    ({"lenpen": math.inf}, {}, "--lenpen must be finite"),
    ({"max_len_a": math.inf}, {}, "--max-len-a must be finite"),
    ({}, {"prune_abs_threshold": math.nan}, "--prune-abs-threshold is NaN"),
    ({}, {"prune_rel_threshold": math.nan}, "--prune-rel-threshold is NaN"),
    ({}, {"stream_epsilon": math.nan}, "--stream-epsilon is NaN"),
    ({}, {"prune_rules": "ap:nan"}, "--prune-rules ap:nan"),
    ({}, {"prune_rules": "ap:-1"}, "--prune-rules ap:-1"),
    ({}, {"prune_rules": "rp:0"}, "--prune-rules rp:0"),
    ({}, {"prune_rules": "rpl:1.5"}, "--prune-rules rpl:1.5"),
    ({"beam": 7000}, {}, "--beam 7000 is larger than the target vocabulary"),
    ({"print_step": True}, {}, "--print-step"),
    ({"iter_decode_max_iter": 3}, {}, "--iter-decode-max-iter"),
])
def test_impossible_values_are_refused_in_one_line(demo_session, gen, opts, needle):
    from fairseq_stream.errors import FairseqStreamError

    with pytest.raises(FairseqStreamError, match=re.escape(needle)):
        demo_session.build_generator("var-stream", gen, opts)


FAST_SEARCHES = ["beam", "var-stream", "gs-jacobi"]  # fairseq's generator, a beam and a Jacobi strategy of ours


@pytest.mark.parametrize("search", [s if s in FAST_SEARCHES else pytest.param(s, marks=pytest.mark.slow)
                                    for s in _searches()])
def test_blank_sources_get_the_empty_hypothesis_without_a_model_call(demo_session, search):
    from fairseq_stream.search.registry import get_search

    eos = demo_session.task.target_dictionary.eos()
    caps = get_search(search).capabilities
    gen = {"beam": 2, "nbest": 2, "max_len_b": 20} if caps.beam and caps.nbest else {"beam": 1, "max_len_b": 20}
    opts = required_opts(search)
    only_blank = demo_session.translate(demo_session.encode(BLANK), search=search, gen=gen, opts=opts)
    assert only_blank.stats.timesteps == 0  # no decoder call at all
    for nbest in only_blank.hypos:
        assert len(nbest) == 1 and nbest[0]["tokens"].tolist() == [eos] and nbest[0]["score"] == 0
    assert only_blank.strings == [""] * len(BLANK)
    mixed = demo_session.translate(demo_session.encode(["", GOOD[0], "\x00"]), search=search, gen=gen, opts=opts)
    alone = demo_session.translate(demo_session.encode(GOOD[:1]), search=search, gen=gen, opts=opts)
    assert mixed.strings == ["", alone.strings[0], ""]  # the other sentence: unchanged


def test_fewer_than_nbest_is_counted_in_the_statistics(demo_session):
    sources = read_lines(os.path.join(DEMO, "test.es"), 4)
    result = demo_session.translate(demo_session.encode(sources), search="var-stream",
                                    gen={"beam": 4, "nbest": 3, "max_len_b": 20}, opts={"prune_abs_threshold": 1.0})
    short = sum(len(h) < 3 for h in result.hypos)
    assert short and result.stats.extra["fewer_than_nbest"] == short
    assert all(1 <= len(h) <= 3 for h in result.hypos)


def test_a_sentence_with_zero_hypotheses_gets_the_empty_one_and_is_counted():
    # issue 38 item 5: it was an internal error that lost the whole run
    from fairseq_stream.engine.input_stream import InputStream
    from fairseq_stream.integration.generator import closing_warnings

    stream = InputStream(pad=1, eos=2, max_lengths=lambda lengths: lengths + 5)
    batch = stream.batch_for({"id": torch.tensor([41, 42]),
                              "net_input": {"src_tokens": torch.tensor([[5, 6, 2], [7, 8, 2]])}}, None)
    admission = stream.take(2)
    stream.deliver({_handle(admission.first + 1): []})
    assert batch.hypos[1][0]["tokens"].tolist() == [2] and batch.hypos[1][0]["score"] == 0.0
    assert stream.without_hypothesis == 1 and batch.missing == 1
    [line] = closing_warnings({"without_hypothesis": 1.0}, 2, 1)
    assert line.startswith(WARNING + "1 sentence(s) ended with no hypothesis left"), line


def test_the_fewer_than_nbest_warning_tells_blank_lines_from_pruned_beams():
    # issue 38 item 9: blank lines were counted as "pruned beams that ended with what they found"
    from fairseq_stream.integration.generator import closing_warnings

    [line] = closing_warnings({"fewer_than_nbest": 3.0, "empty_sources": 3.0}, 7, 2)
    assert "3 empty source line(s)" in line and "pruned" not in line, line
    [line] = closing_warnings({"fewer_than_nbest": 5.0, "empty_sources": 3.0}, 7, 2)
    assert line.startswith(WARNING + "5 of 7 sentence(s) got fewer than --nbest 2 hypotheses: 3 empty source line(s)")
    assert "2 pruned beam(s)" in line, line


@pytest.mark.parametrize("search", ["var-stream", "var-batch", "fixed-ours"])
def test_no_repeat_ngram_1_ends_every_sentence_with_a_hypothesis(demo_session, search):
    # issue 38 item 6: n = 1 bans BOS = EOS, so no candidate was left at the maximum length:
    # "internal error: sentence 16 ended with zero hypotheses", 0 of 20 sentences printed
    sources = read_lines(os.path.join(DEMO, "test.es"), 4)
    result = demo_session.translate(demo_session.encode(sources), search=search,
                                    gen={"beam": 2, "no_repeat_ngram_size": 1, "max_len_a": 0, "max_len_b": 8})
    assert all(h and h[0]["tokens"].numel() == 9 and h[0]["tokens"][-1] == 2 for h in result.hypos)
    for h in result.hypos:  # the blocker still acts before the end: no word repeats
        words = h[0]["tokens"][:-1].tolist()
        assert len(set(words)) == len(words) and math.isfinite(h[0]["score"]), words
    assert result.stats.extra["eos_forced_despite_blocking"] >= len(sources)


@pytest.mark.parametrize("backend", ["reference", "auto"])
@pytest.mark.parametrize("opts", [{"prune_abs_threshold": 0.0}, {"prune_rel_threshold": 1.0},
                                  {"prune_rel_local_threshold": 1.0}, {"prune_rules": "ap:0"}])
def test_pruning_everything_still_leaves_a_hypothesis(demo_session, opts, backend):
    """δ = 0, rp = 1, rpl = 1 prune even the best candidate: a sentence without a final hypothesis
    keeps it (every backend), so it ends with one (it used to end with none)."""
    result = demo_session.translate(demo_session.encode(GOOD[:2]), search="var-stream", gen={"beam": 2, "max_len_b": 12},
                                    opts=dict(opts, step_backend=backend))
    assert all(h and len(h[0]["tokens"]) >= 1 for h in result.hypos)


def _handle(serial: int) -> int:
    from fairseq_stream.model.encoder_slots import SLOT_MODULUS

    return serial * SLOT_MODULUS


def test_the_shipped_demo_checkpoint_records_its_languages():
    # issue 38 item 7: it recorded none, so --source-lang en --target-lang es on it gave fluent garbage
    from fairseq_stream.tools.session import TranslationSession

    state = torch.load(CKPT, map_location="cpu", weights_only=False)
    assert (state["cfg"]["model"].source_lang, state["cfg"]["model"].target_lang) == ("es", "en")
    with pytest.raises(FairseqStreamError, match="trained for es→en .its saved source_lang/target_lang.*asks for en→es"):
        TranslationSession.load(DEMO, CKPT, extra_args=["--source-lang", "en", "--target-lang", "es"])


def test_without_recorded_languages_the_training_data_names_the_direction(tmp_path):
    from argparse import Namespace

    from fairseq_stream.integration.task import check_direction

    (tmp_path / "train.es-en.es.bin").write_bytes(b"")
    old = Namespace(source_lang=None, target_lang=None, data=str(tmp_path))
    check_direction(old, "es", "en")
    with pytest.raises(FairseqStreamError, match="trained for es→en .the file names of its training data"):
        check_direction(old, "en", "es")
    check_direction(Namespace(source_lang=None, target_lang=None, data="/no/such/dir"), "en", "es")  # nothing to go by


def test_a_checkpoint_of_the_other_direction_is_refused(tmp_path):
    from fairseq_stream.errors import FairseqStreamError
    from fairseq_stream.tools.session import TranslationSession

    ckpt = reversed_checkpoint(str(tmp_path / "en-es.pt"))
    with pytest.raises(FairseqStreamError, match="trained for en→es .* asks for es→en"):
        TranslationSession.load(DEMO, ckpt, extra_args=["--source-lang", "es", "--target-lang", "en"])


def test_memory_estimate_over_the_free_memory_warns(capsys):
    from fairseq_stream.integration.runtime import warn_about_resources
    from helpers import gen_cfg

    model = torch.nn.Linear(4, 4)
    warn_about_resources([model], gen_cfg(max_len_b=200), rows=10**9)
    err = capsys.readouterr().err
    assert err.count(WARNING) == 1 and "an estimate" in err and "GiB" in err, err
    warn_about_resources([model.half()], gen_cfg(max_len_b=200), rows=1)
    err = capsys.readouterr().err
    assert err.count(WARNING) == 1 and "--fp16 on a CPU" in err, err


@pytest.mark.parametrize("path,needle", [("a-file", "is a file"), ("a-file/below", "cannot write")])
def test_results_path_problems(tmp_path, path, needle):
    from fairseq_stream.integration.compat import results_path_problem

    (tmp_path / "a-file").write_text("")
    assert needle in results_path_problem(str(tmp_path / path))
    assert results_path_problem(str(tmp_path / "new" / "folder")) is None
