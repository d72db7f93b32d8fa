"""The one validation of a run (``engine/validation.py``), called directly: each impossible combination is one
:class:`FairseqStreamError` line naming the flag and what to do, and an accepted run gets the plan it decodes with.

Complements tests/integration/test_bad_input.py (fairseq's generation options, through the CLI and the
session), tests/unit/test_beam_table.py (beam options and presets), tests/unit/test_options_act_or_are_refused.py
(options a strategy does not read) and tests/integration/test_prune_auto.py (``--prune-auto``).
"""
from __future__ import annotations

import math
from typing import Any, Dict

import pytest
import torch

from fairseq_stream.engine.options import default_capacity
from fairseq_stream.engine.validation import strategy_options, validate_run
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.registry import get_search, search_names
from helpers import TableModel, gen_cfg, make_dictionary, stream_opts, tiny_ib_model

D = make_dictionary([f"w{i}" for i in range(8)])


class SelfNormalizing(TableModel):
    """A model whose scores are its own ``get_normalized_probs`` (as an adaptive softmax's are)."""

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return torch.log_softmax(net_output[0], dim=-1) if log_probs else torch.softmax(net_output[0], dim=-1)


class OnMeta(torch.nn.Module):
    """A model whose parameters live on another device than the CPU (``meta``: no memory, no GPU needed)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(2, 2, device="meta")


def refusal(name: str, gen: Dict[str, Any] = None, opts: Dict[str, Any] = None, model: Any = None, **kwargs) -> str:
    """The one line ``validate_run`` refuses this run with."""
    models = [model if model is not None else TableModel(D, {})]
    with pytest.raises(FairseqStreamError) as err:
        validate_run(name, gen_cfg(**(gen or {})), stream_opts(search=name, **(opts or {})), models, D, **kwargs)
    message = str(err.value)
    assert "\n" not in message, message
    return message


# ---- refusals --------------------------------------------------------------------------------
@pytest.mark.parametrize("opts,needles", [
    ({"output_layer": "dense"}, ["--output-layer must be 'fused' or 'full'", "'dense'"]),
    ({"step_backend": "cuda-only"}, ["--step-backend must be one of", "auto", "'cuda-only'"]),
    ({"step_mode": "compiled"}, ["--step-mode must be one of", "eager", "'compiled'"]),
])
def test_an_unknown_choice_names_its_flag_and_the_choices(opts, needles):
    message = refusal("var-stream", opts=opts)
    assert all(n in message for n in needles), message


def test_a_stats_file_that_cannot_be_written_is_refused_before_decoding(tmp_path):
    message = refusal("var-stream", opts={"stream_stats": str(tmp_path)})  # a directory, not a file
    assert f"--stream-stats {tmp_path}" in message and "choose another path" in message


def test_the_checkpoint_family_must_match_the_search():
    ib = tiny_ib_model(D, dim=16)
    message = refusal("var-stream", model=ib)
    assert "predicts 2 words per step" in message and "--search ib-beam, not --search var-stream" in message
    message = refusal("ib-beam")
    assert "--search ib-beam needs IBDecoder-family checkpoints" in message and "--search beam, var-stream" in message


@pytest.mark.parametrize("mode,needle", [
    ("native", "--step-mode native runs the decoder step as one C++ call on a CPU (the model is on meta)"),
    ("graph", "--step-mode graph captures CUDA graphs and needs a CUDA device (the model is on meta)"),
])
def test_a_step_mode_is_refused_for_models_on_another_device(mode, needle):
    message = refusal("var-stream", opts={"step_mode": mode}, model=OnMeta())
    assert needle in message and "eager" in message, message


@pytest.mark.parametrize("gen,flag", [
    ({"match_source_len": True}, "--match-source-len"),
    ({"prefix_size": 1}, "--prefix-size"),
    ({"print_step": True}, "--print-step"),
    ({"iter_decode_max_iter": 3}, "--iter-decode-max-iter"),
    ({"retain_dropout": True}, "--retain-dropout"),
])
def test_fairseq_options_no_strategy_of_ours_honours_point_to_search_beam(gen, flag):
    message = refusal("fixed-ours", gen=gen)
    assert message == f"--search fixed-ours cannot be combined with {flag}; use --search beam for it"


def test_a_language_model_points_to_search_beam():
    message = refusal("var-stream", extra_gen_cls_kwargs={"lm_model": object()})
    assert "--search var-stream cannot be combined with --lm-path; use --search beam" in message


def test_a_strategy_refuses_what_its_capabilities_exclude():
    assert "--search ib-beam cannot be combined with --no-repeat-ngram-size" in refusal(
        "ib-beam", gen={"no_repeat_ngram_size": 2}, model=tiny_ib_model(D, dim=16))
    message = refusal("lookahead", gen={"beam": 3})
    assert message.startswith("--search lookahead with --beam 3: lookahead decoding verifies") and "--beam 1" in message
    assert "--search speculative returns a single output per sentence; --nbest must be 1" in refusal(
        "speculative", gen={"beam": 1, "nbest": 2})


def test_a_self_normalizing_model_is_refused_where_our_step_cannot_equal_fairseq():
    model = SelfNormalizing(D, {})
    message = refusal("gs-jacobi", gen={"beam": 1}, model=model)
    assert "--search gs-jacobi feeds several tokens a step" in message and "--search fixed-ours" in message
    message = refusal("var-stream", gen={"temperature": 0.5}, model=model)
    assert "--temperature 0.5 with a _TableDecoder that normalises its scores itself" in message
    assert "--temperature 1" in message
    validate_run("var-stream", gen_cfg(beam=2), stream_opts(search="var-stream"), [model], D)  # at temperature 1: fine


def test_a_candidate_budget_below_one_beam_names_both_flags():
    message = refusal("var-stream", gen={"beam": 4}, opts={"stream_max_candidates": 3})
    assert "--stream-max-candidates 3 is smaller than one beam (4 candidates)" in message and "--beam" in message


# ---- accepted runs ---------------------------------------------------------------------------
def test_fairseqs_own_beam_gets_no_configuration_of_ours():
    plan = validate_run("beam", gen_cfg(beam=3), stream_opts(search="beam"), [TableModel(D, {})], D)
    assert plan.entry.name == "beam" and plan.config is None and plan.scheduler is None


def test_the_scheduler_takes_the_strategys_defaults_unless_given():
    model = TableModel(D, {})
    plan = validate_run("var-stream", gen_cfg(beam=4), stream_opts(search="var-stream"), [model], D)
    caps = get_search("var-stream").capabilities
    s = plan.scheduler
    assert (s.epsilon, s.capacity, s.selection) == (caps.default_epsilon, default_capacity(4, False), "min-length")
    assert (s.max_candidates, s.max_wait, s.oversubscribe) == (0, 0, False)
    assert plan.config.rows_per_sentence == 4
    given = stream_opts(search="var-stream", stream_epsilon=0.5, stream_capacity=7, stream_max_candidates=8,
                        stream_oversubscribe=True, stream_max_wait=9)
    s = validate_run("var-stream", gen_cfg(beam=4), given, [model], D).scheduler
    assert (s.epsilon, s.capacity, s.max_candidates, s.oversubscribe, s.max_wait) == (0.5, 7, 8, True, 9)


def test_a_search_stepping_rows_of_different_lengths_selects_all():
    plan = validate_run("gs-jacobi", gen_cfg(beam=1), stream_opts(search="gs-jacobi"), [TableModel(D, {})], D)
    assert plan.scheduler.selection == "all" and plan.scheduler.epsilon == 0.0


def test_a_writable_stats_file_and_finite_settings_are_accepted(tmp_path):
    opts = stream_opts(search="var-stream", stream_stats=str(tmp_path / "stats.json"), prune_abs_threshold=math.inf)
    validate_run("var-stream", gen_cfg(beam=2), opts, [TableModel(D, {})], D)
    assert not (tmp_path / "stats.json").exists()  # checked, not written


def test_strategy_options_lists_each_option_with_the_searches_that_read_it():
    options = strategy_options()
    for option, readers in options.items():
        assert readers and all(option in get_search(name).capabilities.reads for name in readers), option
    for name in search_names():
        assert all(name in options[o] for o in get_search(name).capabilities.reads), name
    assert options["jacobi_block"] == ["gs-jacobi", "hybrid-jacobi"]
