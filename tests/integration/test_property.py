"""Property: over the option space of every strategy, a combination the validator accepts gives
every sentence exactly ``--nbest`` hypotheses (or fewer, counted as ``fewer_than_nbest``); a
combination it refuses is one line (``FairseqStreamError`` in process; one error line and a
non-zero exit on the command line), never a traceback or a lost sentence.

The option space is one table (:data:`SPACE`): each option of ``StreamDecodingConfig`` and the
fairseq generation options we read, with values beside the default: valid ones, boundary ones
and impossible ones (NaN, inf, out of range). Most options keep their default in an example
(else nearly every draw would be refused for naming another strategy's option).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import DEMO, REPO

nan, inf = math.nan, math.inf
SOURCES = ["Y dijo Dios: Sea la luz.", "", "Y la tierra."]  # a blank line among them
BASE_GEN = {"beam": 2, "max_len_b": 12}  # short limits: each example decodes in well under a second

#: option → (valid values, impossible values), beside the default. fairseq's generation options:
GEN_SPACE: Dict[str, Tuple[List[Any], List[Any]]] = {
    "lenpen": ([0.5, 2.0, -1.0], [nan, inf]),
    "unkpen": ([2.0, -1.0], [nan]),
    "temperature": ([0.5, 1.5], [0.0, nan, inf]),
    "max_len_a": ([0.5], [-1.0, nan]),
    "max_len_b": ([1, 5, 30], [0]),
    "min_len": ([2], [30]),
    "no_repeat_ngram_size": ([2], []),
    "unnormalized": ([True], []),
    "sampling": ([], [True]),
}

#: every option of StreamDecodingConfig but --search and --stream-stats (a file)
OPT_SPACE: Dict[str, Tuple[List[Any], List[Any]]] = {
    "stream_epsilon": ([0.0, 0.5, 0.99], [1.0, -0.1, nan]),
    "stream_capacity": ([1, 2], [0]),
    "stream_max_candidates": ([4, 16], [-1, 1]),
    "stream_oversubscribe": ([True], []),
    "stream_max_wait": ([1, 3], [-1]),
    "stream_per_batch": ([True], []),
    # δ = 0, rp = 1 and rpl = 1 prune even the best candidate: the sentence keeps it (beam step)
    "prune_abs_threshold": ([0.0, 0.5, 1.5, inf], [-1.0, nan]),
    "prune_abs_scale": ([0.0, 2.0], [-1.0, nan]),
    "prune_final_per_token": ([0.0, 0.2], [-1.0, nan]),
    "prune_max_cands_per_node": ([1, 2], [0]),
    "prune_rel_threshold": ([0.1, 0.9, 1.0], [0.0, 1.5, nan]),
    "prune_rel_local_threshold": ([0.1, 0.9, 1.0], [0.0, nan]),
    "prune_reference": (["active", "final", "normalized"], ["bogus"]),
    "prune_ended": (["keep"], ["bogus"]),
    "prune_rules": (["ap:1", "rp:0.5,rpl:0.2", "ap:0", "rp:1"], ["rp:nan", "ap:-1", "bogus"]),
    "beam_final_count": ([1], [-1, 9]),
    "beam_finalize": (["ours", "fairseq", "shrink"], ["bogus"]),
    "prune_preset": (["freitag2017", "freitag2017-k14"], ["bogus"]),
    "prune_auto": ([True], []),
    "prune_auto_tolerance": ([0.0, 0.01], [-1.0, nan]),
    "stream_input_order": (["as-given"], ["shuffled"]),
    "output_layer": (["full"], ["bogus"]),
    "step_backend": (["reference", "cpp", "triton"], ["bogus", "cuda"]),  # triton on a CPU: a warned fallback
    "step_mode": (["eager", "static", "native", "auto"], ["graph", "bogus"]),  # graph: CUDA only
    "native_loop": (["off", "auto"], ["bogus"]),
    "quantize": (["int8"], ["int4", "bogus"]),
    "cpu_matmul": (["torch"], ["mkl", "bogus"]),  # onednn: float32 models only (test_linear_kernels)
    "draft_path": ([os.path.join(DEMO, "draft.pt")], ["/nonexistent/draft.pt"]),
    "draft_tokens": (["2", "auto"], ["0", "bogus"]),
    "draft_quantize": (["none", "int8", "auto"], ["int4", "bogus"]),
    "lookahead_ngram": ([2, 6], [1]),
    "lookahead_prior": ([os.path.join(DEMO, "lookahead_prior.pt")], ["/nonexistent/prior.pt"]),
    "jacobi_block": ([1, 2], [0]),
    "jacobi_max_parallel_len": ([0, 4], [-1]),
    "jacobi_init": (["tail"], ["bogus"]),
    "jacobi_parallel": (["always", "never", "auto"], ["bogus"]),
    "ib_dedup": ([True], []),
    "ib_finalize": (["all"], ["bogus"]),
}
SHARED = {"stream_capacity", "stream_max_candidates", "stream_max_wait", "stream_per_batch", "output_layer",
          "stream_oversubscribe", "step_backend", "quantize", "cpu_matmul", "stream_input_order", "step_mode",
          "native_loop"}  # read by every strategy of ours (the scheduler's, the output layer)


def test_the_option_space_covers_every_decoding_option():
    from fairseq_stream.engine.options import StreamDecodingConfig

    names = {f.name for f in dataclasses.fields(StreamDecodingConfig)} - {"search", "stream_stats", "_name"}
    assert names == set(OPT_SPACE)  # a new option must be added to the property's space


def _searches() -> List[str]:
    from fairseq_stream.search.registry import search_names

    return search_names()


def _readable(search: str) -> List[str]:
    """The options of OPT_SPACE that ``--search search`` reads (the registry's capabilities)."""
    from fairseq_stream.search.registry import get_search

    entry = get_search(search)
    if entry.build is not None:
        return []  # fairseq's own generator reads none of ours
    caps = entry.capabilities
    return sorted((SHARED | set(caps.reads) | ({"stream_epsilon"} if caps.streaming else set())) & set(OPT_SPACE))


class Draw:
    """Draws one combination from a chooser ``pick(values)`` / ``coin(p)`` (hypothesis or random)."""

    def __init__(self, pick: Any, coin: Any) -> None:
        self.pick, self.coin = pick, coin

    def combination(self) -> Tuple[str, Dict[str, Any], Dict[str, Any]]:
        from fairseq_stream.search.registry import get_search

        search = self.pick(_searches())
        caps = get_search(search).capabilities
        beam = self.pick([1, 2, 3, 5] if caps.beam else [1])
        gen = dict(BASE_GEN, beam=beam, nbest=self.pick(list(range(1, beam + 1))) if caps.nbest else 1)
        gen.update({k: self.pick(valid) for k, (valid, _) in GEN_SPACE.items() if valid and self.coin(0.2)})
        if not caps.ngram_blocking:
            gen.pop("no_repeat_ngram_size", None)
        opts = {k: self.pick(OPT_SPACE[k][0]) for k in _readable(search) if self.coin(0.3)}
        if self.coin(0.4):  # one impossible value, or an option of another strategy
            name = self.pick(sorted(GEN_SPACE) + sorted(OPT_SPACE) + ["beam", "nbest"])
            valid, bad = GEN_SPACE.get(name) or OPT_SPACE.get(name) or ([], [])
            bad = {"beam": [0, -1, 100000], "nbest": [0, beam + 1]}.get(name) or bad
            value = self.pick(bad) if bad else self.pick(valid)  # no impossible value: maybe another strategy's
            (gen if name in GEN_SPACE or name in ("beam", "nbest") else opts)[name] = value
        return search, gen, opts


@st.composite
def combinations(draw: Any) -> Tuple[str, Dict[str, Any], Dict[str, Any]]:
    return Draw(lambda values: draw(st.sampled_from(values)), lambda p: draw(st.floats(0, 1)) < p).combination()


def random_combination(rng: random.Random) -> Tuple[str, Dict[str, Any], Dict[str, Any]]:
    """The same space drawn with ``random`` (for the command-line runs, which run in one batch)."""
    return Draw(rng.choice, lambda p: rng.random() < p).combination()


def check_in_process(session: Any, search: str, gen: Dict[str, Any], opts: Dict[str, Any]) -> bool:
    """The property for one combination; True when it was accepted (and decoded)."""
    from fairseq_stream.errors import FairseqStreamError

    try:
        session.build_generator(search, gen, opts)
    except FairseqStreamError as exc:
        assert str(exc) and "\n" not in str(exc), str(exc)  # one line
        return False
    result = session.translate(session.encode(SOURCES), search=search, gen=gen, opts=opts)
    nbest = int(gen.get("nbest", 1))
    assert len(result.hypos) == len(SOURCES)
    # fairseq's own generator returns --beam hypotheses; fairseq-generate prints the first --nbest
    got = [min(len(h), nbest) for h in result.hypos]
    assert all(n >= 1 for n in got), got
    assert sum(n < nbest for n in got) == int(result.stats.extra.get("fewer_than_nbest", 0)), (got, result.stats.extra)
    return True


ACCEPTED: List[bool] = []


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(combinations())
@example(("var-stream", dict(BASE_GEN, beam=3), {}))  # an accepted one whatever the draws (most are refused)
def test_accepted_combinations_give_nbest_hypotheses_refused_ones_one_line(demo_session, combination):
    ACCEPTED.append(check_in_process(demo_session, *combination))


def test_the_examples_were_not_all_refused():
    # Runs after the property (file order): a space that the validator always refuses would test nothing.
    if ACCEPTED:
        assert any(ACCEPTED) and not all(ACCEPTED), ACCEPTED


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(combinations())
def test_accepted_combinations_give_nbest_hypotheses_many_examples(demo_session, combination):
    check_in_process(demo_session, *combination)


# ---- the same property on the command line -----------------------------------------------------
def flags(search: str, gen: Dict[str, Any], opts: Dict[str, Any]) -> List[str]:
    out = ["--search", search]
    for name, value in [*gen.items(), *opts.items()]:
        flag = "--" + name.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is not False:
            out += [flag, str(value)]
    return out


def cli_cases(data: Optional[str], count: int, seed: int) -> List[Dict[str, Any]]:
    """``count`` runs, every other one fairseq-generate on ``data`` (None: fairseq-interactive only)."""
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        combination = random_combination(rng)
        common = ["--user-dir", "fairseq_stream", "--path", os.path.join(DEMO, "checkpoint.pt"), "--cpu",
                  *flags(*combination)]
        if n % 2 or data is None:  # fairseq-interactive on raw text, a blank line included
            argv = ["fairseq-interactive", DEMO, "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses",
                    "--bpe", "subword_nmt", "--bpe-codes", os.path.join(DEMO, "bpe.codes"), *common]
            cases.append({"argv": argv, "stdin": "\n".join(SOURCES) + "\n", "combination": combination})
        else:
            cases.append({"argv": ["fairseq-generate", data, "--gen-subset", "test", *common], "combination": combination})
    return cases


def run_cli_property(data: Optional[str], count: int, seed: int) -> None:
    cases = cli_cases(data, count, seed)
    payload = [{"argv": c["argv"], "stdin": c.get("stdin")} for c in cases]
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "integration", "cli_cases.py")], cwd=REPO,
                          input=json.dumps(payload), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for case, got in zip(cases, json.loads(proc.stdout)):
        what = (case["combination"], got["rc"], got["stderr"][-1500:])
        assert "Traceback" not in got["stderr"] + got["stdout"], what
        errors = [line for line in got["stderr"].splitlines() if line.startswith("fairseq-stream: error: ")]
        if got["rc"] != 0:
            assert len(errors) == 1, what
            continue
        assert not errors, what
        counts: Dict[int, int] = {}
        for m in re.finditer(r"^H-(\d+)\t", got["stdout"], re.M):
            counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
        nbest = int(case["combination"][1].get("nbest", 1))
        assert sorted(counts) == list(range(len(SOURCES))), what  # every sentence, once
        short = sum(n < nbest for n in counts.values())
        assert all(1 <= n <= nbest for n in counts.values()), what
        if short and case["combination"][0] != "beam":  # ours say so once (fairseq's generator: a blank line only)
            warned = [line for line in got["stderr"].splitlines() if "fewer than --nbest" in line]
            assert len(warned) == 1 and warned[0].startswith(f"fairseq-stream: warning: {short} of "), what


@pytest.fixture(scope="module")
def property_bin(tmp_path_factory):
    """The three SOURCES, binarized (the blank line as an empty source)."""
    from conftest import _write
    from fairseq_stream.integration.text import BpeCodes, tokenize

    root = str(tmp_path_factory.mktemp("property_bin"))
    bpe = BpeCodes(os.path.join(DEMO, "bpe.codes"))
    for lang, lines in (("es", SOURCES), ("en", ["x" if s else "" for s in SOURCES])):
        _write(os.path.join(root, f"test.{lang}"), [bpe.apply(tokenize(s, lang)) for s in lines])
    from conftest import run_cli

    proc = run_cli(["fairseq-preprocess", "--source-lang", "es", "--target-lang", "en", "--destdir", root,
                    "--srcdict", os.path.join(DEMO, "dict.es.txt"), "--tgtdict", os.path.join(DEMO, "dict.en.txt"),
                    "--workers", "1", "--testpref", os.path.join(root, "test")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


@pytest.mark.slow  # fairseq-generate subprocesses; the in-process property stays fast
def test_the_property_on_the_command_line():
    run_cli_property(None, count=2, seed=1)  # fairseq-interactive: no data to binarize (fairseq-generate: below)


@pytest.mark.slow
def test_the_property_on_the_command_line_many_runs(property_bin):
    run_cli_property(property_bin, count=16, seed=11)
