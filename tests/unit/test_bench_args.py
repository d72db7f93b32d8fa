"""The benchmark harness and the demo refuse bad arguments up front (one line, exit 2), warm up
untimed, and report each row's step backends; all checked without decoding a sentence."""
from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

from conftest import DEMO
from fairseq_stream.tools import bench, demo
from fairseq_stream.tools.bench import RunSpec, format_costs, format_table, parse_run, run_benchmark
from fairseq_stream.errors import PREFIX, UsageError

GEN = {"beam": "int", "max_len_a": "float", "lenpen": "float", "max_len_b": "int"}
OPTS = {"stream_capacity": "int", "stream_per_batch": "bool", "prune_rules": "str", "step_backend": "str"}


def usage_error(main: Any, argv: List[str], capsys: pytest.CaptureFixture) -> str:
    """Run ``main(argv)``; it must exit 2 with one ``fairseq-stream: error:`` line last on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(PREFIX)
    return last


@pytest.mark.parametrize("argv, needle", [
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--warmup", "-1"], "--warmup must be >= 0"),
    (["--limit", "0"], "--limit must be >= 1"),
    (["--limit", "-3"], "--limit must be >= 1"),
    (["--src", "/no/such/test.es"], "--src '/no/such/test.es': no such file"),
    (["--ref", "/no/such/test.en"], "--ref '/no/such/test.en': no such file"),
    (["--json", "/no/such/dir/rows.json"], "the directory '/no/such/dir' does not exist"),
    (["--json", DEMO], "is a directory"),
])
def test_bench_refuses_bad_arguments_before_loading(argv, needle, capsys):
    assert needle in usage_error(bench.main, argv, capsys)


def test_bench_refuses_an_empty_source_file(tmp_path, capsys):
    # issue 38 item 8: an empty --src used to end in an IndexError at hyps[0] after loading the model
    empty = tmp_path / "empty.es"
    empty.write_text("")
    assert f"--src '{empty}' is empty" in usage_error(bench.main, ["--src", str(empty)], capsys)


@pytest.mark.parametrize("runs, needle", [
    # issue 52: the first row was decoded and timed, then the second's value ended the run (exit 1)
    (["beam:beam=5", "var-stream:beam=0"], "--run 'var-stream:beam=0': --beam must be >= 1, got 0"),
    (["beam:beam=5", "var-stream:prune_abs_threshold=-1"], "--prune-abs-threshold must be >= 0"),
    (["beam:beam=5", "gs-jacobi:beam=1,draft_path=x.pt"], "--search gs-jacobi does not read --draft-path"),
    (["beam:beam=5", "var-stream:length_from=later", "beam:label=later"], "length_from='later' must name an earlier"),
    (["beam:beam=5", "speculative:beam=1,draft_path=RANDOM"], "corrupt"),
    # task options were accepted and ignored (the data and the languages are loaded once)
    (["beam:beam=5", "beam:source_lang=fr"], "--run 'beam:source_lang=fr': source_lang is a task option"),
    (["beam:data=/nonexistent"], "data is a task option"),
    (["var-stream:search=beam"], "the search is the part before ':'"),
])
def test_every_row_is_checked_before_the_first_decode(runs, needle, demo_session, monkeypatch, tmp_path, capsys):
    from fairseq_stream.tools.session import TranslationSession

    random_bytes = tmp_path / "random.pt"
    random_bytes.write_bytes(os.urandom(4096))
    monkeypatch.setattr(TranslationSession, "load", classmethod(lambda cls, *args, **kwargs: demo_session))
    decoded: List[str] = []
    monkeypatch.setattr(TranslationSession, "translate", lambda self, data, *, search, **kw: decoded.append(search))
    argv = ["--limit", "2", "--repeats", "1", "--warmup", "0", "--no-progress", "--no-own-baselines"]
    for run in runs:
        argv += ["--run", run.replace("RANDOM", str(random_bytes))]
    assert needle in usage_error(bench.main, argv, capsys)
    assert decoded == []


@pytest.mark.parametrize("argv, needle", [
    (["--limit", "0"], "--limit must be >= 1"),
    (["--repeats", "0"], "--repeats must be >= 1"),
])
def test_demo_refuses_bad_counts(argv, needle, capsys):
    assert needle in usage_error(demo.main, argv, capsys)


def test_run_values_are_checked_against_the_option_types():
    run = parse_run("var-stream:beam=5,max_len_a=1,stream_per_batch=true,prune_rules=3", GEN, OPTS)
    assert run.gen == {"beam": 5, "max_len_a": 1.0} and run.opts == {"stream_per_batch": True, "prune_rules": "3"}
    with pytest.raises(UsageError, match="beam='abc' must be an integer"):
        parse_run("var-stream:beam=abc", GEN, OPTS)
    with pytest.raises(UsageError, match="stream_per_batch='yes' must be true or false"):
        parse_run("var-stream:stream_per_batch=yes", GEN, OPTS)


def test_unknown_run_key_is_a_clear_error():
    with pytest.raises(UsageError, match="unknown option 'stream_capacty'.*did you mean 'stream_capacity'"):
        parse_run("var-stream:beam=5,stream_capacty=4", GEN, OPTS)
    # without the decoding options' list every other key is passed on (the old behaviour)
    assert parse_run("var-stream:whatever=1", GEN).opts == {"whatever": 1}


def test_a_comma_in_a_label_is_a_clear_error():
    with pytest.raises(UsageError, match="got 'k5'; a label cannot contain ','"):
        parse_run("var-stream:beam=5,label=vs,k5", GEN, OPTS)
    with pytest.raises(UsageError, match="got 'beam5'$"):  # no label before it: no hint
        parse_run("var-stream:beam5", GEN, OPTS)


def test_step_backend_is_passed_to_the_decoding_options():
    run = parse_run("var-stream:beam=5,step_backend=reference", GEN, OPTS)
    assert run.gen == {"beam": 5} and run.opts == {"step_backend": "reference"}


def test_option_kinds_read_the_task_config():
    from fairseq_stream.engine.options import StreamDecodingConfig

    names = [f.name for f in dataclasses.fields(StreamDecodingConfig)]
    kinds = bench.option_kinds(StreamDecodingConfig, names + ["not_a_field"])
    assert kinds["stream_capacity"] == "int" and kinds["stream_epsilon"] == "float"  # Optional[float]
    assert kinds["search"] == "str" and kinds["not_a_field"] is None
    if "step_backend" in names:  # being added to the config: then a --run key like any other
        assert parse_run("var-stream:step_backend=reference", {}, kinds).opts == {"step_backend": "reference"}


class FakeSession:
    """Records the passes; the warm-up pass takes 'long' (a compile) and must not be timed."""

    def __init__(self) -> None:
        self.calls: List[str] = []

    def encode(self, sources: List[str]) -> List[str]:
        return sources

    def translate(self, dataset: List[str], *, search: str, **kwargs: Any) -> Any:
        self.calls.append(search)
        first = self.calls.count(search) == 1
        stats: Dict[str, Any] = {"timesteps": 3, "step_backends": {"beam_step": "cpp"} if search != "beam" else {}}
        return SimpleNamespace(strings=list(dataset), stats=SimpleNamespace(
            wall_seconds=100.0 if first else 1.0, to_dict=lambda: dict(stats)))


def test_warm_up_passes_are_not_timed_and_backends_are_reported():
    session = FakeSession()
    runs = [RunSpec("fairseq", "beam"), RunSpec("ours", "var-stream")]
    rows = run_benchmark(session, ["a b c"], ["a b c"], runs, repeats=3, warmup=1, progress=False, log=lambda m: None)
    assert session.calls == ["beam", "var-stream"] * 4  # one warm-up round, then three timed, round-robin
    assert [r["walls"] for r in rows] == [[1.0] * 3] * 2
    assert rows[1]["step_backends"] == {"beam_step": "cpp"} and rows[0]["step_backends"] == {}
    assert "| beam_step=cpp |" in format_table(rows) and "| — |" in format_table(rows)
    assert "| 1.00 ± 0.00 |" in format_table(rows)
    once = run_benchmark(FakeSession(), ["a"], ["a"], runs[:1], repeats=1, warmup=0, progress=False, log=lambda m: None)
    assert once[0]["walls"] == [100.0]  # --warmup 0: the first pass is timed
    assert "| 100.00 | 100.00 |" in format_table(once) and "±" not in format_table(once).splitlines()[-1]  # one run: no sd


def test_costs_a_cpu_cannot_measure_are_not_applicable():
    costs = {"host_reads_per_step": 1.0, "run_reads_per_step": 2.0, "ops_per_step": 90.0,
             "ops_outside_region_per_step": 21.5, "peak_mib": 500.0, "gpu_busy": None, "kernels_per_step": None}
    line = format_costs([{"label": "ours", "costs": costs}]).splitlines()[-1]
    assert line == "| ours | 1.00 | 2.00 | 90.0 | 21.5 | n/a | 500 | n/a |"


def test_every_beam_width_gets_our_own_baseline_beside_fairseqs():
    from fairseq_stream.tools.bench import own_baselines

    runs = [parse_run(spec, ["beam"]) for spec in (
        "beam:beam=1,label=fairseq-greedy", "beam:beam=5,label=fairseq-beam", "gs-jacobi:beam=1,stream_capacity=1",
        "var-stream:beam=5,stream_capacity=32", "fixed-ours:beam=50", "var-stream:beam=50", "var-batch")]
    added = own_baselines(runs, default_beam=4)[len(runs):]
    # k = 1 and 5 get fixed-ours (with the first of our rows' capacity); k = 50 has one; k = 4 is the default --beam
    assert [(r.label, r.search, r.gen, r.opts) for r in added] == [
        ("ours greedy (fixed-ours k=1)", "fixed-ours", {"beam": 1}, {"stream_capacity": 1}),
        ("ours fixed (fixed-ours k=5)", "fixed-ours", {"beam": 5}, {"stream_capacity": 32}),
        ("ours fixed (fixed-ours k=4)", "fixed-ours", {"beam": 4}, {}),
    ]
    assert own_baselines([parse_run("ib-beam:beam=4", ["beam"])], 5) == [parse_run("ib-beam:beam=4", ["beam"])]


def test_the_vs_ours_column_divides_by_our_fixed_beam_at_the_same_width():
    runs = [RunSpec("fairseq", "beam", gen={"beam": 5}), RunSpec("vs", "var-stream", gen={"beam": 5}),
            RunSpec("fs1", "beam", gen={"beam": 1}), RunSpec("ours5", "fixed-ours", gen={"beam": 5})]
    walls = {"beam": 4.0, "var-stream": 1.0, "fixed-ours": 2.0}

    class Timed(FakeSession):
        def translate(self, dataset, *, search, **kwargs):
            out = super().translate(dataset, search=search, **kwargs)
            out.stats.wall_seconds = walls[search]
            return out

    rows = run_benchmark(Timed(), ["a"], ["a"], runs, repeats=1, warmup=0, progress=False, log=lambda m: None)
    assert [r["vs_ours"] for r in rows] == [2.0, 0.5, None, 1.0]  # no fixed-ours row at k = 1: n/a
    table = format_table(rows)
    assert "| ratio | vs ours |" in table and "| 0.25 | 0.50 |" in table and "| 1.00 | n/a |" in table
