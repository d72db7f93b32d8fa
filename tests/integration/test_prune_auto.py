"""--prune-auto (issue 41): the run calibrates δ and M on its first sentences against the fixed beam.

The contracts: the calibration sample's output is the fixed beam's (fixed-ours at the same k); the
rest is decoded by the chosen setting, and var-stream ≡ var-batch holds for it (float64); the choice
is deterministic; an input too small to calibrate takes the conservative setting and says so; the
statistics (and fairseq-generate's --stream-stats file) carry the setting and the measured loss; an
explicit pruning setting next to --prune-auto, or a strategy without pruning, is refused in one line.
"""
import json
import math
import os

import pytest

from conftest import DEMO, run_cli
from fairseq_stream.search.defaults import PRUNE_AUTO_CONSERVATIVE
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.integration.prune_auto import OFF, Setting, ladder, sample_size

CKPT = os.path.join(DEMO, "checkpoint.pt")
N = 72  # > twice the 32-sentence sample: calibrated
BATCH = 16  # the sample spans two fairseq batches


def _tokens(result):
    return [h[0]["tokens"].tolist() for h in result.hypos]


def _engine_order(session, dataset, batch_size):
    """Sentence ids in the order the engine sees them (fairseq's length-sorted batches)."""
    return [i for sample in session.batches(dataset, None, batch_size, None) for i in sample["id"].tolist()]


def _explicit(setting: Setting):
    return {"prune_abs_threshold": setting.delta, "prune_max_cands_per_node": setting.max_cands or 10 ** 6}


def test_ladder_is_fastest_first_and_drops_rungs_equal_at_this_k():
    assert ladder(50)[0] == Setting(1.0, 5) and ladder(50)[-1] == Setting(3.0, 10)
    assert ladder(5) == [Setting(1.0, 5), Setting(1.5, 5), Setting(2.0, 5), Setting(3.0, 5)]  # M 10 = M 5 at k = 5
    assert sample_size(300) == 32 and sample_size(5000) == 100 and sample_size(10 ** 6) == 256
    assert OFF.label() == "off (the fixed beam's width)"


def test_the_sample_is_the_fixed_beams_and_the_rest_the_chosen_settings(demo_session64, demo_sources):
    session = demo_session64
    dataset = session.encode(demo_sources[:N])
    gen = {"beam": 4}
    auto = session.translate(dataset, search="var-stream", gen=gen, opts={"prune_auto": True}, batch_size=BATCH)
    fixed = session.translate(dataset, search="fixed-ours", gen=gen, batch_size=BATCH)
    info = auto.stats.prune_auto
    assert info["calibrated"] and info["sample"] == 32 and info["fallback"] is None
    order = _engine_order(session, dataset, BATCH)
    sample, rest = order[:32], order[32:]
    got, want = _tokens(auto), _tokens(fixed)
    assert [got[i] for i in sample] == [want[i] for i in sample]
    # the rest: the chosen setting, given explicitly, streamed and batched (issue 41 item 3)
    chosen = Setting(info["delta"], info["max_cands"])
    rest_set = session.encode([demo_sources[i] for i in rest])
    streamed = session.translate(rest_set, search="var-stream", gen=gen, opts=_explicit(chosen), batch_size=BATCH)
    batched = session.translate(rest_set, search="var-batch", gen=gen, opts=_explicit(chosen), batch_size=BATCH)
    assert _tokens(streamed) == _tokens(batched)
    assert [got[i] for i in rest] == _tokens(batched)
    # the calibration's decoder work is in the run's counts
    assert auto.stats.expansions > streamed.stats.expansions + info["fixed_expansions"]
    assert info["tried"][-1]["setting"] == info["setting"] or info["setting"] == OFF.label()


def test_the_choice_is_deterministic(demo_session, demo_sources):
    dataset = demo_session.encode(demo_sources[:N])
    runs = [demo_session.translate(dataset, search="var-batch", gen={"beam": 4}, opts={"prune_auto": True},
                                   batch_size=BATCH) for _ in range(2)]
    assert runs[0].stats.prune_auto == runs[1].stats.prune_auto
    assert _tokens(runs[0]) == _tokens(runs[1])


def test_a_small_input_takes_the_conservative_setting_and_says_so(demo_session, demo_sources, capsys):
    dataset = demo_session.encode(demo_sources[:20])
    auto = demo_session.translate(dataset, search="var-stream", gen={"beam": 4}, opts={"prune_auto": True})
    info = auto.stats.prune_auto
    assert not info["calibrated"] and "20 sentences, fewer than twice the calibration sample (32)" in info["fallback"]
    assert (info["delta"], info["max_cands"]) == PRUNE_AUTO_CONSERVATIVE
    assert "--prune-auto δ 3, M 5 (not calibrated" in auto.stats.summary()
    assert "fairseq-stream: --prune-auto: δ 3, M 5, not calibrated" in capsys.readouterr().err
    explicit = demo_session.translate(dataset, search="var-stream", gen={"beam": 4},
                                      opts=_explicit(Setting(*PRUNE_AUTO_CONSERVATIVE)))
    assert _tokens(auto) == _tokens(explicit)


def test_a_tolerance_nothing_meets_turns_pruning_off():
    from fairseq_stream.integration.prune_auto import Choice, Measured

    measured = Measured(Setting(1.0, 5), sentences=32, expansions=40, score_loss=0.64, changed=4)  # 0.02 a sentence
    choice = Choice(OFF, True, "", sample=32, tolerance=0.015, fixed_expansions=100, fixed_mean_score=-1.0,
                    measured=[measured])
    assert not measured.passes(0.015, -1.0) and measured.passes(0.015, -2.0)  # relative to the scores' scale
    assert not Measured(Setting(1.0, 5), sentences=32, changed=17).passes(0.015, -1.0)  # more than half changed
    assert ("off (the fixed beam's width): no setting was within --prune-auto-tolerance 0.015 on 32 sentences "
            "(mean score loss δ 1, M 5: 2.00%, 4 changed)") in choice.line()
    assert choice.as_dict()["mean_score_loss"] is None and choice.as_dict()["tried"][0]["expansions_vs_fixed"] == 0.4
    assert choice.as_dict()["tried"][0]["relative_loss"] == 0.02
    assert math.isinf(choice.as_dict()["delta"])


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


def test_the_tolerance_needs_prune_auto_and_a_number_at_least_zero(demo_session):
    with pytest.raises(FairseqStreamError, match="--prune-auto-tolerance is the tolerance of --prune-auto"):
        demo_session.build_generator("var-stream", {"beam": 4}, {"prune_auto_tolerance": 0.1})
    with pytest.raises(FairseqStreamError, match="--prune-auto-tolerance must be >= 0"):
        demo_session.build_generator("var-stream", {"beam": 4}, {"prune_auto": True, "prune_auto_tolerance": -1.0})


def test_fairseq_generate_prints_the_choice_and_writes_it_to_the_stats_file(demo_bin, tmp_path):
    stats = tmp_path / "stats.json"
    proc = run_cli(["fairseq-generate", demo_bin, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--gen-subset", "test", "--search", "var-stream", "--beam", "4", "--batch-size", "16",
                    "--prune-auto", "--stream-stats", str(stats)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("fairseq-stream: --prune-auto: ")]
    assert len(lines) == 1 and "calibrated on 32 sentences" in lines[0], proc.stderr[-2000:]
    # issue 52 item 7: the calibration's own decodes (the fixed beam, each rung) say nothing at the end; only
    # the run's one statistics line (it was followed by one line per helper, and their --nbest warnings)
    both = (proc.stdout + proc.stderr).splitlines()
    summaries = [line for line in both if "fairseq-stream var-stream: " in line or "fairseq-stream fixed-ours: " in line]
    assert len(summaries) == 1 and "100 sentences" in summaries[0], summaries
    assert not [line for line in both if "fewer than --nbest" in line]
    info = json.loads(stats.read_text())["prune_auto"]
    assert info["calibrated"] and info["sample"] == 32 and info["mean_score_loss"] is not None
    assert len([line for line in proc.stdout.splitlines() if line.startswith("H-")]) == 100


@pytest.mark.slow  # a fairseq-interactive subprocess; the fallback's statistics are held by the small-input test
def test_fairseq_interactive_takes_the_conservative_setting_and_says_so():
    lines = ["Y dijo Dios: Sea la luz.", "En el principio crió Dios los cielos y la tierra."] * 40
    proc = run_cli(["fairseq-interactive", DEMO, "--user-dir", "fairseq_stream", "--path", CKPT, "--cpu",
                    "--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
                    "--bpe-codes", os.path.join(DEMO, "bpe.codes"), "--search", "var-stream", "--beam", "4",
                    "--buffer-size", "80", "--batch-size", "80", "--prune-auto"], stdin="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("fairseq-stream: --prune-auto: ")]
    assert said == ["fairseq-stream: --prune-auto: δ 3, M 5, not calibrated: fairseq-interactive reads its input "
                    "in chunks"], proc.stderr[-2000:]
    assert len([line for line in proc.stdout.splitlines() if line.startswith("H-")]) == len(lines)
