"""--prune-auto (issue 50): the run steers δ and M while it goes, by probes decoded beside the stream.

The contracts: every output is the stream's; blank and one-token sources are never probes; while
the setting holds, the output is the stream's at that setting (so var-stream ≡ var-batch where
nothing moved); a move reaches the stream; the moves are deterministic;
the probes' work is in the run's counts, within the budget; the copies take the places of sentences
(within the capacity); the statistics (and fairseq-generate's --stream-stats file) carry the setting,
every move and the probes; it is opt-in (issue 81: the default is a rule each sentence decides alone); an
explicit pruning setting next to --prune-auto, or a strategy without pruning, is refused in one line.
"""
import json
import math
import os

import pytest
import torch

from conftest import DEMO, run_cli
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.encoder_slots import SLOT_MODULUS
from fairseq_stream.search.defaults import DEFAULT_ABS_THRESHOLD, PRUNE_AUTO_BUDGET
from fairseq_stream.search.prune_controller import OFF, Setting, start

CKPT = os.path.join(DEMO, "checkpoint.pt")
N = 72
BATCH = 16


def _tokens(result):
    return [h[0]["tokens"].tolist() for h in result.hypos]


def _start_above_the_fastest_rung(monkeypatch):
    # the run starts at the fastest rung, where there is no faster one to try: these tests start one rung above it
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_START", (1.5, 5))


def _explicit(delta, max_cands):
    return {"prune_abs_threshold": delta, "prune_max_cands_per_node": max_cands or 10 ** 6}


def test_until_it_moves_the_output_is_the_streams_at_the_start_setting(demo_session64, demo_sources, monkeypatch):
    # probes all along, and no move (a move needs more outcomes than there are)
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_BUDGET", 1.0)
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_MIN_RELAX", 10 ** 6)
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_MIN_TIGHTEN", 10 ** 6)
    _start_above_the_fastest_rung(monkeypatch)
    session = demo_session64
    dataset = session.encode(demo_sources[:N])
    gen = {"beam": 4}
    # refills of 16: the first group goes to the helper, the later probes ride in the run's own stream as copies
    auto = session.translate(dataset, search="var-stream", gen=gen, opts={"prune_auto": True, "stream_capacity": 16},
                             batch_size=BATCH)
    info = auto.stats.prune_auto
    # each probe read twice: the trial's outcome and the current rung's
    assert info["steered"] and info["probed_ids"] and info["observed"] == 2 * len(info["probed_ids"])
    assert 0 < info["in_stream"] < len(info["probed_ids"]) and info["not_decoded"] == 0, info
    assert len(info["changes"]) == 1 and info["setting"] == Setting(*start(4)).label() == "δ 1.5, M 5"
    streamed = session.translate(dataset, search="var-stream", gen=gen, opts=dict(_explicit(*start(4)), stream_capacity=16),
                                 batch_size=BATCH)
    batched = session.translate(dataset, search="var-batch", gen=gen, opts=_explicit(*start(4)),
                                batch_size=BATCH)
    # the copies leave no output and count as no sentence; every sentence's output is the stream's
    assert _tokens(auto) == _tokens(streamed) == _tokens(batched) and auto.stats.sentences == N
    # the probes' decoder work (fixed beam and trial) is in the run's counts: the helper's steps, the copies' rows
    assert info["probe_work"] > 0 and auto.stats.timesteps > streamed.stats.timesteps
    assert auto.stats.expansions > streamed.stats.expansions


def test_the_probes_stay_within_the_budget(demo_session, demo_sources):
    auto = demo_session.translate(demo_session.encode(demo_sources[:200]), search="var-stream", gen={"beam": 4},
                                  opts={"prune_auto": True}, batch_size=BATCH)
    info = auto.stats.prune_auto
    assert info["probes"] > 0 and info["probe_share"] <= PRUNE_AUTO_BUDGET * 1.5, info


@pytest.mark.parametrize("opts", [{"stream_capacity": 12}, {"stream_max_candidates": 48}], ids=["capacity", "budget"])
def test_the_copies_take_the_places_of_sentences_within_the_capacity_and_the_budget(demo_session, demo_sources,
                                                                                  monkeypatch, opts):
    """A refill that takes in-stream probes takes one sentence fewer per copy: sentences and copies together stay
    within --stream-capacity and --stream-max-candidates (copies were added on top: 552 slots for a capacity of 500)."""
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_BUDGET", 1.0)  # many probes
    auto = demo_session.translate(demo_session.encode(demo_sources[:120]), search="var-stream", gen={"beam": 4},
                                  opts=dict(opts, prune_auto=True), batch_size=BATCH)
    info, stats = auto.stats.prune_auto, auto.stats
    assert info["in_stream"] > 0 and stats.sentences == 120
    assert stats.peak_in_flight <= opts.get("stream_capacity", 48 // 4), stats.peak_in_flight
    assert stats.encoder_slots <= opts.get("stream_capacity", 48 // 4)


def test_a_move_reaches_the_stream_and_the_moves_are_deterministic(demo_session, demo_sources, monkeypatch):
    # 72 sentences buy one probe under the run's budget; a budget of the whole run's work buys a probe a sentence
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_BUDGET", 1.0)
    _start_above_the_fastest_rung(monkeypatch)
    dataset = demo_session.encode(demo_sources[:N])

    def run():
        # an unbounded tolerance: the trial rung passes whenever at most half its outputs change, so the run tightens
        generator = demo_session.build_generator("var-stream", {"beam": 4}, {"prune_auto": True, "stream_capacity": 16,
                                                                              "prune_auto_tolerance": 1e9})
        out = []
        with torch.no_grad():
            for batch in demo_session.batches(dataset, None, BATCH, None):
                out += [h[0]["tokens"].tolist() for h in generator.generate(demo_session.models, batch)]
        return generator, out

    (first, out1), (second, out2) = run(), run()
    info = first.stats.prune_auto
    assert len(info["changes"]) > 1 and info["in_stream"] > 0, info
    # what the strategy keeps per pinned sentence is the copies still in flight at the end (they steer nothing now),
    # each counted as not decoded: every copy that left handed back its rung and its rows
    in_flight = {h // SLOT_MODULUS for h in first.strategy.pinned}
    assert in_flight == set(first.copy_of) and {h // SLOT_MODULUS for h in first.strategy.pinned_rows} == in_flight
    assert info["not_decoded"] == len({id(p) for p, _, _ in first.copy_of.values()})
    assert first.strategy.cfg.pruning.abs_threshold == info["delta"]  # the stream prunes at the rung it moved to
    assert first.strategy.per_row == min(4, info["max_cands"])
    assert info == second.stats.prune_auto and out1 == out2


def test_blank_and_one_token_sources_are_never_probes(demo_session, demo_sources, monkeypatch):
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_BUDGET", 1.0)
    monkeypatch.setattr("fairseq_stream.integration.prune_auto.PRUNE_AUTO_GROUP", 2)  # 20 eligible lines: small groups
    lines = [("" if i % 3 == 0 else "Dios" if i % 3 == 1 else demo_sources[i]) for i in range(60)]
    auto = demo_session.translate(demo_session.encode(lines), search="var-stream", gen={"beam": 4},
                                  opts={"prune_auto": True, "prune_auto_tolerance": 1e9}, batch_size=BATCH)
    info = auto.stats.prune_auto
    probed = info["probed_ids"]
    assert probed and all(i % 3 == 2 for i in probed), probed
    assert sum(int(n) for n in info["strata"].values()) == info["probes"] >= len(probed)


@pytest.mark.parametrize("search, opts, needle", [
    ("var-stream", {"prune_abs_threshold": 2.0}, "--prune-auto chooses the pruning itself; --prune-abs-threshold"),
    ("var-batch", {"prune_preset": "freitag2017"}, "--prune-preset fixes it"),
    ("var-stream", {"prune_abs_scale": 3.0}, "--prune-abs-scale fixes it"),
    ("fixed-ours", {}, "--search fixed-ours does not read --prune-auto"),
    ("beam", {}, "does not read --prune-auto"),
])
def test_an_explicit_setting_or_a_fixed_search_is_refused_in_one_line(demo_session, search, opts, needle):
    with pytest.raises(FairseqStreamError, match=needle) as exc:
        demo_session.build_generator(search, {"beam": 4}, dict(opts, prune_auto=True))
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("search, opts, steers", [
    ("var-stream", {}, False),  # issue 81: opt-in (issue 50 had made it var-stream's default on a CPU)
    ("var-stream", {"prune_auto": "on"}, True),
    ("var-stream", {"prune_auto": "off"}, False),
    ("var-stream", {"prune_abs_threshold": 1.5}, False),  # an explicit setting is fixed, not refused
    ("var-stream", {"prune_max_cands_per_node": 5}, False),
    ("var-stream", {"prune_preset": "freitag2017"}, False),
    ("var-batch", {}, False),
    ("var-fifo", {}, False),
    ("var-batch", {"prune_auto": True}, True),
])
def test_the_run_steers_only_when_given_prune_auto(demo_session, search, opts, steers):
    generator = demo_session.build_generator(search, {"beam": 4}, opts)
    assert hasattr(generator, "controller") == steers
    pruning = generator.config.pruning
    start = (1.25, 5) if steers else (opts.get("prune_abs_threshold", 2.5 if "prune_preset" in opts else DEFAULT_ABS_THRESHOLD),
                                      opts.get("prune_max_cands_per_node", 3 if "prune_preset" in opts else 5))
    assert (pruning.abs_threshold, pruning.max_cands_per_node) == start


def test_at_beam_one_every_setting_decodes_as_the_fixed_beam(demo_session, demo_sources):
    # a beam of one keeps its one best candidate whatever δ and M: the tightest setting decodes as the fixed beam
    enc = demo_session.encode(demo_sources[:N])
    fixed = demo_session.translate(enc, search="fixed-ours", gen={"beam": 1}, batch_size=BATCH)
    tight = demo_session.translate(enc, search="var-stream", gen={"beam": 1}, opts=_explicit(0.25, 1), batch_size=BATCH)
    assert _tokens(tight) == _tokens(fixed)
    assert not hasattr(demo_session.build_generator("var-stream", {"beam": 1}, {}), "controller")
    assert demo_session.build_generator("var-stream", {"beam": 1}, {"prune_auto": "on"}).controller


def test_copies_in_flight_when_the_input_ends_are_dropped_and_the_stream_drained(demo_session, demo_sources,
                                                                                monkeypatch):
    # in the input's order the last sentences are not the longest: a probe's copy outlives them (150 sentences at k = 5,
    # --prune-auto); its outcome would steer nothing, so the stream drops it rather than decode it for no one
    from fairseq_stream.model.model_step import ModelStep

    drained, original = [], ModelStep.drained
    monkeypatch.setattr(ModelStep, "drained", lambda self, store: (drained.append(store), original(self, store))[1])
    dataset = demo_session.encode(demo_sources[:150])
    auto = demo_session.translate(dataset, search="var-stream", gen={"beam": 5},
                                  opts={"stream_input_order": "as-given", "prune_auto": True}, batch_size=BATCH)
    info = auto.stats.prune_auto
    assert info["dropped_copies"] >= 1 and info["not_decoded"] >= 1, info
    assert drained, "the stream was not drained: what the static step lent it was not handed back"
    assert auto.stats.sentences == 150 and all(h and h[0]["tokens"].numel() for h in auto.hypos)


def test_the_steering_is_opt_in_on_every_device():
    from types import SimpleNamespace

    from fairseq_stream.search.defaults import prune_auto_on

    assert not prune_auto_on(SimpleNamespace()) and not prune_auto_on(SimpleNamespace(prune_auto="off"))
    assert prune_auto_on(SimpleNamespace(prune_auto=True)) and prune_auto_on(SimpleNamespace(prune_auto="on"))


def test_the_tolerance_needs_the_steering_on_and_a_number_at_least_zero(demo_session):
    assert demo_session.build_generator("var-stream", {"beam": 4}, {"prune_auto": True, "prune_auto_tolerance": 0.1}
                                        ).controller.tolerance == 0.1
    for search, opts, why in [("var-stream", {"prune_auto": "off"}, "--prune-auto off"),
                              ("var-stream", {}, "the run steers its pruning only when given --prune-auto"),
                              ("var-batch", {}, "the run steers its pruning only when given --prune-auto")]:
        with pytest.raises(FairseqStreamError, match=f"--prune-auto-tolerance is the tolerance of --prune-auto, and {why}"):
            demo_session.build_generator(search, {"beam": 4}, dict(opts, prune_auto_tolerance=0.1))
    with pytest.raises(FairseqStreamError, match=r"--prune-auto must be 'on' or 'off' \(or given alone, meaning on\), got 'sometimes'"):
        demo_session.build_generator("var-stream", {"beam": 4}, {"prune_auto": "sometimes"})
    with pytest.raises(FairseqStreamError, match="--prune-auto-tolerance must be >= 0"):
        demo_session.build_generator("var-stream", {"beam": 4}, {"prune_auto": True, "prune_auto_tolerance": -1.0})


@pytest.mark.parametrize("value", ["DATA", "sometimes"])
def test_a_bare_flag_before_data_is_one_line_naming_the_word_it_read(demo_bin, value):
    # argparse gives a bare --prune-auto the next word: DATA, and fairseq would say only that DATA is missing
    args = ["--prune-auto", demo_bin] if value == "DATA" else ["--prune-auto", value, demo_bin]
    proc = run_cli(["fairseq-generate", "--user-dir", "fairseq_stream", "--search", "var-stream"] + args
                   + ["--path", CKPT, "--cpu"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert f"argument --prune-auto: must be 'on' or 'off' (or given alone, meaning on), got {args[1]!r}" in last, proc.stderr[-2000:]
    assert "write --prune-auto on" in last and "Traceback" not in proc.stderr


def test_a_bare_flag_after_data_reads_nothing(demo_bin):
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--search", "var-stream",
                    "--prune-auto", "--path", os.path.join(os.path.dirname(CKPT), "missing.pt"), "--cpu"])
    assert proc.returncode != 0 and "missing.pt" in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
    assert "--prune-auto" not in proc.stderr.strip().splitlines()[-1]  # after DATA the bare flag reads nothing


def test_fairseq_generate_prints_the_setting_and_writes_it_to_the_stats_file(demo_bin, tmp_path):
    stats = tmp_path / "stats.json"
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "test", "--search", "var-stream", "--beam", "4", "--batch-size", "16",
                    "--prune-auto", "--stream-stats", str(stats)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("fairseq-stream: --prune-auto: ")]
    assert len(lines) == 1 and " probe(s) (" in lines[0] and "steered δ 1.25, M 5" in lines[0], proc.stderr[-2000:]
    # the probes' own decodes (the fixed beam, the trial) say nothing at the end: only the run's one statistics line
    both = (proc.stdout + proc.stderr).splitlines()
    summaries = [line for line in both if "fairseq-stream var-stream: " in line or "fairseq-stream fixed-ours: " in line]
    assert len(summaries) == 1 and "100 sentences" in summaries[0] and "--prune-auto δ" in summaries[0], summaries
    assert not [line for line in both if "fewer than --nbest" in line]
    info = json.loads(stats.read_text())["prune_auto"]
    assert info["steered"] and info["probes"] >= len(info["probed_ids"]) and info["changes"][0]["why"] == "start"
    assert len([line for line in proc.stdout.splitlines() if line.startswith("H-")]) == 100


@pytest.mark.slow  # a fairseq-interactive subprocess
def test_fairseq_interactive_steers_chunk_by_chunk():
    lines = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra."] * 40
    proc = run_cli(["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
                    "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--search", "var-stream", "--beam", "4",
                    "--buffer-size", "40", "--batch-size", "40", "--prune-auto"], stdin="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("fairseq-stream: --prune-auto: ")]
    assert len(said) == 1 and " probe(s) (" in said[0], proc.stderr[-2000:]
    assert len([line for line in proc.stdout.splitlines() if line.startswith("H-")]) == len(lines)


def test_probes_are_decoded_when_admitted_so_a_move_steers_their_own_refill(demo_session, demo_sources, monkeypatch):
    # 40 sentences are one refill: its probes are decoded before the stream's first step; the trial passes
    # (an unbounded tolerance) and the controller tightens there, so every sentence is decoded at the new rung
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_BUDGET", 1e6)
    _start_above_the_fastest_rung(monkeypatch)
    dataset = demo_session.encode(demo_sources[:40])
    auto = demo_session.translate(dataset, search="var-stream", gen={"beam": 4},
                                  opts={"prune_auto": True, "prune_auto_tolerance": 1e9}, batch_size=BATCH)
    info = auto.stats.prune_auto
    assert [c["setting"] for c in info["changes"]] == ["δ 1.5, M 5", "δ 1.25, M 5"] and info["changes"][1]["sentences"] == 0
    assert info["not_decoded"] == 0 and info["probes"] == len(info["probed_ids"]) > 0
    tightened = demo_session.translate(dataset, search="var-stream", gen={"beam": 4}, opts=_explicit(1.25, 5),
                                       batch_size=BATCH)
    assert _tokens(auto) == _tokens(tightened)


@pytest.mark.parametrize("beam", [5, 12])
def test_per_sentence_rungs_decode_each_sentence_as_its_rung_alone(demo_session, demo_sources, beam):
    """The building block of probes in the run's own steps: sentences of one stream pinned to their own rungs
    (BeamSearch.use_rungs) — the run's pruning, the fixed beam, a faster rung — each get the best hypothesis and score
    that the stream gives it when every sentence runs at that rung."""
    from fairseq_stream.model.encoder_slots import SLOT_MODULUS
    from fairseq_stream.search.beam import Rung

    dataset = demo_session.encode(demo_sources[:36])
    gen = {"beam": beam}
    rungs = [Rung(math.inf, None), Rung(1.0, 3)]  # the fixed beam (no δ, no M), a faster rung
    own = {"prune_abs_threshold": 1.5, "prune_max_cands_per_node": 5}

    def decode(opts, pinned=None):
        generator = demo_session.build_generator("var-stream", gen, opts)
        of = {}
        if pinned is not None:
            def pin(handles):
                rung = (handles // SLOT_MODULUS) % 3  # by serial: the run's, the fixed beam, the faster rung
                for h, r in zip(handles.tolist(), rung.tolist()):
                    of[generator.input.sentence_id(h // SLOT_MODULUS)] = r
                return rung
            generator.strategy.use_rungs(rungs, pin)
        out = {}
        with torch.no_grad():
            for batch in demo_session.batches(dataset, None, 16, None):
                for i, nbest in zip(batch["id"].tolist(), generator.generate(demo_session.models, batch)):
                    out[i] = (nbest[0]["tokens"].tolist(), float(nbest[0]["score"]))
        return out, of

    mixed, of = decode(own, pinned=True)
    assert sorted(set(of.values())) == [0, 1, 2] and len(of) == len(dataset)
    alone = [decode(own)[0], decode({"prune_abs_threshold": math.inf, "prune_max_cands_per_node": 10 ** 6})[0],
             decode({"prune_abs_threshold": 1.0, "prune_max_cands_per_node": 3})[0]]
    for i, rung in of.items():
        assert mixed[i] == alone[rung][i], (i, rung)
    # the rungs differ on this input: the test can tell a sentence decoded at the wrong one
    assert any(alone[0][i] != alone[1][i] for i in of) and any(alone[0][i] != alone[2][i] for i in of)


def test_an_unsure_model_is_moved_to_the_safest_rung_by_its_first_outputs(demo_session, demo_sources, monkeypatch):
    # the demo's outputs average -0.43 a token; with the threshold above that it reads as unsure
    monkeypatch.setattr("fairseq_stream.search.prune_controller.PRUNE_AUTO_UNSURE", -0.1)
    dataset = demo_session.encode(demo_sources[:48])
    runs = [demo_session.translate(dataset, search="var-stream", gen={"beam": 4}, opts={"prune_auto": True},
                                   batch_size=BATCH) for _ in range(2)]
    info = runs[0].stats.prune_auto
    assert info["unsure"] and info["outputs_mean"] < -0.1, info
    unsure = [c for c in info["changes"] if c["why"].startswith("an unsure model: its first 16 outputs average")]
    assert len(unsure) == 1 and unsure[0]["setting"] == "δ 3, M 5" and info["setting"] in ("δ 3, M 5", OFF.label()), info
    # moved at the 16th output, within the step that finished it (the run counts its finished sentences after)
    assert unsure[0]["sentences"] < 16 and runs[0].stats.sentences == 48
    assert _tokens(runs[0]) == _tokens(runs[1]) and runs[1].stats.prune_auto["changes"] == info["changes"]
    # the default threshold leaves the demo (a sure model) where the steering put it
    monkeypatch.undo()
    sure = demo_session.translate(dataset, search="var-stream", gen={"beam": 4}, opts={"prune_auto": True}, batch_size=BATCH)
    assert not sure.stats.prune_auto["unsure"] and sure.stats.prune_auto["outputs_mean"] > -0.7
    assert not any(c["why"].startswith("an unsure model") for c in sure.stats.prune_auto["changes"])
