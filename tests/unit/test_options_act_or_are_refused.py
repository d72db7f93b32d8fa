"""Every option of ours × every ``--search``: it acts, or the run is refused in one line (issue 38, item 4).

The walk sets each field of :class:`StreamDecodingConfig` away from its default, one at a time, and
validates the run as the engine does (:func:`validate_run`). Accepted means acting, checked where it
can be: an option read into the strategy's or the scheduler's configuration must change that
configuration (an option declared as read but dropped on the way fails here); the few that act
outside it (read by the task, the engine or the generator directly) are listed by name.
"""
from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace

import pytest
from fairseq.dataclass.configs import GenerationConfig
from omegaconf import OmegaConf

from fairseq_stream.engine.options import StreamDecodingConfig
from fairseq_stream.search.registry import get_search, search_names
from fairseq_stream.engine.validation import options_read_by, validate_run
from fairseq_stream.errors import FairseqStreamError
from conftest import DEMO

#: a valid value away from the default for every option (a new option must be added here)
AWAY = {
    "stream_epsilon": 0.25, "stream_capacity": 8, "stream_max_candidates": 16, "stream_oversubscribe": True,
    "stream_max_wait": 5, "stream_per_batch": True, "stream_input_order": "as-given", "stream_stats": "STATS",
    "prune_abs_threshold": 0.5, "prune_abs_scale": 3.0, "prune_final_per_token": 0.3, "prune_max_cands_per_node": 2, "prune_rel_threshold": 0.5,
    "prune_rel_local_threshold": 0.1, "prune_reference": "final", "prune_ended": "keep", "prune_rules": "ap:1",
    "beam_final_count": 1, "beam_finalize": "shrink", "prune_preset": "freitag2017", "output_layer": "full",
    "step_backend": "reference", "quantize": "int8", "cpu_matmul": "torch", "jacobi_block": 4,
    "jacobi_max_parallel_len": 32, "jacobi_init": "tail", "jacobi_parallel": "never", "ib_dedup": True, "ib_finalize": "all",
    "step_mode": "static", "native_loop": "off", "draft_path": "DRAFT", "draft_tokens": "4", "draft_quantize": "none",
    "lookahead_ngram": 4, "lookahead_prior": "PRIOR",
    "prune_auto": True, "prune_auto_tolerance": 0.05,
}
#: where an option's default differs by search, the value away from that search's (none since issue 81:
#: --prune-auto is opt-in for every search)
AWAY_FOR: dict = {}
#: what a strategy needs to be built at all (speculative: a draft; the walk then changes it to DRAFT)
BASE = {"speculative": {"draft_path": "CHECKPOINT"}, "speculative-beam": {"draft_path": "CHECKPOINT"}}
#: options set together with the one walked (they mean nothing alone)
TOGETHER = {"stream_oversubscribe": {"stream_max_candidates": 16}, "prune_auto_tolerance": {"prune_auto": True}}
#: options that act outside the strategy's and the scheduler's configuration, and where
OUTSIDE_THE_PLAN = {
    "stream_input_order": "the task's batch iterator (integration/task.py)",
    "quantize": "the engine's int8 copies of the models (integration/build.py)",
    "cpu_matmul": "the engine's Linear layers (integration/build.py)",
    "stream_per_batch": "the task attaches the generator per batch (integration/task.py)",
    "stream_stats": "the generator writes the statistics file (integration/generator.py)",
    "output_layer": "the engine's OutputScorer (integration/build.py)",
    "step_backend": "the strategy context (integration/build.py)",
    "prune_auto_tolerance": "the controller's moves between settings of δ and M (search/prune_controller.py; tests/unit/test_prune_controller.py)",
    "step_mode": "the generator's ModelStep (integration/generator.py; tests/equivalence/test_static_step.py)",
}


def _fields():
    return [f for f in dataclasses.fields(StreamDecodingConfig) if not f.name.startswith("_") and f.name != "search"]


def _configs(search: str, changes: dict, tmp_path):
    caps = get_search(search).capabilities
    gen = OmegaConf.structured(GenerationConfig(beam=4 if caps.beam else 1, max_len_b=20))
    opts = StreamDecodingConfig(search=search)
    named = {"STATS": str(tmp_path / "stats.json"), "DRAFT": os.path.join(DEMO, "draft.pt"),
             "PRIOR": os.path.join(DEMO, "lookahead_prior.pt"),
             "CHECKPOINT": os.path.join(DEMO, "checkpoint.pt")}
    for name, value in dict(BASE.get(search, {}), **changes).items():
        setattr(opts, name, named.get(value, value) if isinstance(value, str) else value)
    return gen, opts


def test_the_walk_covers_every_option():
    assert sorted(AWAY) == sorted(f.name for f in _fields())
    for f in _fields():
        assert AWAY[f.name] != f.default, f.name


def _models(search: str, monkeypatch):
    """ib-beam's configuration reads the IBDecoder layout from its model: a stand-in with one."""
    if get_search(search).capabilities.models != "ib":
        return ()
    from fairseq_stream.engine import validation
    from fairseq_stream.search.ib_order import IBSpec

    monkeypatch.setattr(validation, "is_ib_model", lambda model: True)
    return (SimpleNamespace(decoder=SimpleNamespace(ib=IBSpec(2, 1))),)


@pytest.mark.parametrize("search", search_names())
def test_every_option_acts_or_is_refused(search, tmp_path, monkeypatch):
    entry = get_search(search)
    models = _models(search, monkeypatch)
    gen, opts = _configs(search, {}, tmp_path)
    base = validate_run(search, gen, opts, models)
    read = options_read_by(entry)
    for option, value in AWAY.items():
        value = AWAY_FOR.get((search, option), value)
        gen, opts = _configs(search, dict(TOGETHER.get(option, {}), **{option: value}), tmp_path)
        flag = "--" + option.replace("_", "-")
        named = [flag] + ["--" + o.replace("_", "-") for o in TOGETHER.get(option, {})]
        try:
            plan = validate_run(search, gen, opts, models)
        except FairseqStreamError as exc:
            assert "\n" not in str(exc) and any(f in str(exc) for f in named), (search, option, str(exc))
            assert option not in read or _refused_for_its_value(search, option), (search, option, exc)
            continue
        assert option in read, f"--search {search} accepts {flag} but does not read it"
        if option in OUTSIDE_THE_PLAN:
            continue
        assert (plan.config, plan.scheduler) != (base.config, base.scheduler), \
            f"--search {search} declares {flag} as read, but it changes nothing in its configuration"


def _refused_for_its_value(search: str, option: str) -> bool:
    """Read, but refused in this combination for a stated reason (checked by the strategies' own tests)."""
    return (search, option) in {("var-batch", "stream_epsilon"), ("fixed-ours", "stream_epsilon"),
                                ("jacobi", "stream_oversubscribe"), ("gs-jacobi", "stream_oversubscribe"),
                                ("hybrid-jacobi", "stream_oversubscribe"), ("ib-beam", "stream_oversubscribe"),
                                ("speculative", "stream_oversubscribe"), ("lookahead", "stream_oversubscribe")}


@pytest.mark.parametrize("option", ["prune_preset", "prune_abs_threshold", "beam_finalize", "beam_final_count",
                                    "prune_abs_scale", "ib_finalize", "stream_capacity", "output_layer"])
def test_fairseq_beam_refuses_our_options_in_one_line(option, tmp_path):
    # issue 38 item 5: these ran plain beam at exit 0
    gen, opts = _configs("beam", {option: AWAY[option]}, tmp_path)
    with pytest.raises(FairseqStreamError, match="--search beam .* does not read --" + option.replace("_", "-")):
        validate_run("beam", gen, opts)


def test_fairseq_beam_refuses_retain_iter_history(tmp_path):
    # issue 38 item 8: fairseq-generate printed one H- line, then KeyError: 'history'
    gen, opts = _configs("beam", {}, tmp_path)
    gen.retain_iter_history = True
    with pytest.raises(FairseqStreamError, match="--search beam cannot be combined with --retain-iter-history"):
        validate_run("beam", gen, opts)


def test_fairseq_beam_still_takes_the_options_it_reads(tmp_path):
    for option in ("stream_input_order", "quantize", "cpu_matmul"):
        gen, opts = _configs("beam", {option: AWAY[option]}, tmp_path)
        assert validate_run("beam", gen, opts).config is None
