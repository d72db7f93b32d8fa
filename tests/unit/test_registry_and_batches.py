"""The --search registry and the batches that never lose a sentence."""
import numpy as np
import pytest

import fairseq_stream  # noqa: F401
from fairseq_stream.errors import FairseqStreamError, format_error
from fairseq_stream.search.registry import get_search, search_names
from fairseq_stream.integration.task import restore_dropped_batches


def test_registry_holds_the_baseline_and_rejects_unknown_names():
    assert "beam" in search_names()
    with pytest.raises(FairseqStreamError) as err:
        get_search("nope")
    message = format_error(err.value)
    assert message.startswith("fairseq-stream: error: unknown --search 'nope'")
    assert all(name in message for name in search_names())


@pytest.mark.parametrize("n,mult", [(100, 8), (13, 8), (1, 8), (16, 8), (7, 3)])
def test_dropped_tail_is_put_back_in_order(n, mult):
    indices = np.arange(n)[::-1].copy()
    batches = [indices[i: i + mult] for i in range(0, n, mult)]
    if len(batches[-1]) % mult:
        batches = batches[:-1]  # what fairseq-fixed's batch_by_size does
    restored = restore_dropped_batches(batches, indices)
    assert np.concatenate(restored).tolist() == indices.tolist()


def test_fairseq_batch_by_size_drops_and_we_restore():
    from fairseq.data import data_utils

    indices = np.arange(100, dtype=np.int64)
    sizes = np.full(100, 5, dtype=np.int64)
    batches = data_utils.batch_by_size(indices, lambda i: int(sizes[i]), max_sentences=16, required_batch_size_multiple=8)
    assert sum(len(b) for b in batches) == 96  # the fairseq-fixed behaviour this package guards against
    assert sum(len(b) for b in restore_dropped_batches(batches, indices)) == 100


def _help_epsilon_defaults():
    """``--search`` name → the --stream-epsilon default that ``--help`` states for it."""
    import dataclasses
    import re
    from fractions import Fraction

    from fairseq_stream.engine.options import StreamDecodingConfig

    text = next(f.metadata["help"] for f in dataclasses.fields(StreamDecodingConfig) if f.name == "stream_epsilon")
    claims = {}
    for value, names in re.findall(r"(\d+(?:/\d+)?)(?: \(plain batches\))? for ([a-z, -]+?)(?:;| \()", text):
        for name in names.split(", "):
            claims[name] = float(Fraction(value))
    return claims


def test_stream_epsilon_help_states_what_each_strategy_uses():
    from fairseq_stream.integration.build import build_generator
    from helpers import TableModel, fake_task, gen_cfg, make_dictionary, stream_opts, tiny_transformer

    claims = _help_epsilon_defaults()
    assert set(claims) == {n for n in search_names() if get_search(n).capabilities.streaming}
    d = make_dictionary()
    built = {}
    for name in ("var-stream", "fixed-stream", "var-fifo", "topup", "var-batch", "fixed-ours"):
        g = build_generator(name, fake_task(d), [TableModel(d, {})], gen_cfg(beam=2), stream_opts())
        built[name] = g.scheduler_cfg.epsilon
    model = tiny_transformer(d)
    for name in ("jacobi", "gs-jacobi", "hybrid-jacobi"):
        built[name] = build_generator(name, fake_task(d), [model], gen_cfg(beam=1), stream_opts()).scheduler_cfg.epsilon
    for name, epsilon in built.items():
        assert epsilon == pytest.approx(claims.get(name, 0.0)), name  # unlisted: plain batches
    assert built["var-batch"] == built["fixed-ours"] == 0.0


def _stated_default(option: str, name: str):
    """The default of ``--option`` for ``--search name`` as ``--help`` states it: a per-strategy
    "default V for var-*" in the help text, else the field's default (which fairseq prints)."""
    import dataclasses
    import re

    from fairseq_stream.engine.options import StreamDecodingConfig

    f = next(f for f in dataclasses.fields(StreamDecodingConfig) if f.name == option)
    steered = re.search(r"var-stream steers it from ([0-9.]+)", f.metadata["help"])  # --prune-auto's start
    if steered and _stated_default("prune_auto", name) == "on":
        return float(steered.group(1))
    per_strategy = re.search(r"default ([0-9.]+) for var-\*", f.metadata["help"])
    if per_strategy and name.startswith("var-"):
        return float(per_strategy.group(1))
    tolerance = re.search(r"\(default ([0-9.]+)\)", f.metadata["help"])  # where the steering is on
    if f.default is None and tolerance:
        return float(tolerance.group(1)) if _stated_default("prune_auto", name) == "on" else None
    steers = re.search(r"not given: on for ([\w-]+)", f.metadata["help"])  # --prune-auto: on for one search
    if f.default is None and steers:
        return "on" if name == steers.group(1) else "off"
    stated = re.search(r"default '([\w-]+)'", f.metadata["help"])  # an option left unset (None) by default
    if f.default is None and stated:
        return stated.group(1)
    per_search = dict((search, value) for value, search in re.findall(r"(\d+) for ([\w-]+)", f.metadata["help"]))
    if f.default is None and "not given:" in f.metadata["help"] and name in per_search:  # --draft-tokens
        return per_search[name]
    on_cpu = re.search(r"default (\d+) on a CPU", f.metadata["help"])  # a device-dependent default (these run on a CPU)
    if f.default is None and on_cpu:
        return int(on_cpu.group(1))
    return f.default


def _preset_in_effect(config):
    """The --prune-preset whose every value the built configuration has, else None."""
    from fairseq_stream.search.defaults import PRESETS

    have = {"prune_rel_threshold": config.pruning.rel_threshold, "prune_abs_threshold": config.pruning.abs_threshold,
            "prune_rel_local_threshold": config.pruning.rel_local_threshold,
            "prune_max_cands_per_node": config.pruning.max_cands_per_node, "prune_reference": config.pruning.reference,
            "beam_finalize": config.finalize}
    return next((name for name, (_, values) in PRESETS.items() if all(have[k] == v for k, v in values)), None)


# option → what the built generator does with it, for the strategies that read it
_EFFECTIVE = {
    "stream_capacity": lambda g, s: g.scheduler_cfg.capacity,
    "stream_max_candidates": lambda g, s: g.scheduler_cfg.max_candidates,
    "stream_max_wait": lambda g, s: g.scheduler_cfg.max_wait,
    "stream_oversubscribe": lambda g, s: g.scheduler_cfg.oversubscribe,
    "native_loop": lambda g, s: "auto" if g.scheduler_cfg.native_loop else "off",
    "stream_stats": lambda g, s: g.stats_path,
    "output_layer": lambda g, s: "fused" if s.scorer.fused else "full",
    "step_backend": lambda g, s: s.runner.preference if hasattr(s, "runner") else "auto",  # a toy strategy has no operator
    "prune_abs_threshold": lambda g, s: g.config.pruning.abs_threshold,
    "prune_abs_scale": lambda g, s: g.config.pruning.abs_scale,
    "prune_final_per_token": lambda g, s: g.config.pruning.final_per_token,
    "prune_max_cands_per_node": lambda g, s: g.config.pruning.max_cands_per_node,
    "prune_rel_threshold": lambda g, s: g.config.pruning.rel_threshold,
    "prune_rel_local_threshold": lambda g, s: g.config.pruning.rel_local_threshold,
    "prune_reference": lambda g, s: g.config.pruning.reference,
    "prune_ended": lambda g, s: g.config.pruning.ended,
    "prune_rules": lambda g, s: g.config.pruning.extra or None,
    "beam_final_count": lambda g, s: 0 if s.done_at == g.config.beam else s.done_at,  # "0 = --beam"
    "beam_finalize": lambda g, s: s.finalizer.name,
    "prune_preset": lambda g, s: _preset_in_effect(g.config),
    "prune_auto": lambda g, s: "on" if hasattr(g, "controller") else "off",  # integration/prune_auto.AutoPruneGenerator
    "prune_auto_tolerance": lambda g, s: g.controller.tolerance if hasattr(g, "controller") else None,
    "jacobi_block": lambda g, s: g.config.block,
    "jacobi_max_parallel_len": lambda g, s: g.config.max_parallel_len,
    "jacobi_init": lambda g, s: g.config.init,
    "jacobi_parallel": lambda g, s: g.config.parallel,  # gs-/hybrid-jacobi's JacobiConfig, lookahead's LookaheadConfig
    "draft_path": lambda g, s: g.config.draft_path or None,
    "draft_tokens": lambda g, s: str(g.config.draft_tokens),
    "draft_quantize": lambda g, s: g.config.draft_quantize,
    "lookahead_ngram": lambda g, s: g.config.ngram,
    "lookahead_prior": lambda g, s: g.config.prior,
    "ib_dedup": lambda g, s: s.dedup,
    "ib_finalize": lambda g, s: s.finalize,
}
_EVERY_STRATEGY = {"stream_capacity", "stream_max_candidates", "stream_max_wait", "stream_oversubscribe", "stream_stats", "output_layer",
                   "step_backend", "native_loop"}
# stated elsewhere: --search (the registry test), --stream-epsilon (the test above),
# --stream-per-batch (the task's reading of fairseq's iterator: test_cli_stream_across_batches),
# --quantize (none = the models as loaded: test_quantize), --cpu-matmul (the Linear kernels: test_linear_kernels), --prune-preset (unset: the flags' own
# defaults: checked above through _preset_in_effect), --stream-input-order (fairseq's sorting: test_stream_input_order),
# --step-mode (auto = eager on a CPU: tests/equivalence/test_static_step.py)
_ELSEWHERE = {"search", "stream_epsilon", "stream_per_batch", "quantize", "cpu_matmul", "stream_input_order", "step_mode"}


def test_help_defaults_are_what_every_strategy_does():
    """Each option's default, as --help states it, is what every strategy built with the
    defaults uses; a new option must be added to the table above (no silent drift)."""
    import dataclasses

    from fairseq_stream.integration.build import build_generator
    from fairseq_stream.engine.options import StreamDecodingConfig
    from helpers import TableModel, fake_task, gen_cfg, make_dictionary, stream_opts, tiny_ib_model, tiny_transformer

    options = {f.name for f in dataclasses.fields(StreamDecodingConfig) if not f.name.startswith("_")}
    assert options == set(_EFFECTIVE) | _ELSEWHERE
    d = make_dictionary()
    models = {"jacobi": tiny_transformer(d, layers=1), "ib": tiny_ib_model(d)}
    for name in search_names():
        if get_search(name).build is not None:
            continue  # fairseq's own beam reads none of our options
        if "draft_path" in get_search(name).capabilities.reads:  # no draft by default (one is required): below
            continue
        block = "jacobi" in name or name == "lookahead"
        model = models["ib"] if name == "ib-beam" else models["jacobi"] if block else TableModel(d, {})
        g = build_generator(name, fake_task(d), [model], gen_cfg(beam=2 if get_search(name).capabilities.beam else 1),
                            stream_opts())
        strategy = g.make_strategy(g.stats)
        reads = _EVERY_STRATEGY | get_search(name).capabilities.reads
        assert reads <= set(_EFFECTIVE), name
        for option in reads:
            assert _EFFECTIVE[option](g, strategy) == _stated_default(option, name), (name, option)
    from fairseq_stream.search.speculative import SpeculativeConfig

    spec = SpeculativeConfig.from_options("speculative", gen_cfg(beam=1), stream_opts(draft_path=__file__))
    assert str(spec.draft_tokens) == _stated_default("draft_tokens", "speculative")
    assert spec.draft_quantize == _stated_default("draft_quantize", "speculative")
    from fairseq_stream.search.speculative_beam import SpeculativeBeamConfig

    beam = SpeculativeBeamConfig.from_options("speculative-beam", gen_cfg(beam=4), stream_opts(draft_path=__file__))
    assert str(beam.draft_tokens) == _stated_default("draft_tokens", "speculative-beam")
    assert beam.draft_quantize == _stated_default("draft_quantize", "speculative-beam")


# ---- issue 52: what --help states against what the parser and the checks do ----
#: options whose quoted words are not a list of their values: the registry's names are stated as a list the
#: help builds from the registry (test_registry_holds_the_baseline_and_rejects_unknown_names), and
#: --beam-final-count's 'ours' names a --beam-finalize rule
_QUOTES_ARE_NOT_CHOICES = {"search", "beam_final_count"}


def _stated(help_text: str):
    """(the default --help states without a qualifier, or None; the values it quotes; the integer ranges it names)."""
    import re

    default = None
    for match in re.finditer(r"\bdefault ('[\w.-]+'|[\w.]+)(.{0,6})", help_text):
        if not match.group(2).startswith((" for", " on a", ", or", " when")):
            default = match.group(1).strip("'")
    return default, set(re.findall(r"'([\w.-]+)'", help_text)), set(re.findall(r"\[\d+, \d+\]", help_text))


def _refusal(option: str) -> str:
    """The one line the checks give ``option`` set to a value it cannot take, under a search that reads it."""
    from fairseq_stream.engine.validation import EVERY_SEARCH_OPTIONS, validate_run
    from helpers import TableModel, gen_cfg, make_dictionary, stream_opts, tiny_ib_model, tiny_transformer

    name = next((n for n in search_names() if option in get_search(n).capabilities.reads), "var-stream")
    if option in EVERY_SEARCH_OPTIONS:
        name = "var-stream"
    d = make_dictionary()
    model = (tiny_ib_model(d) if name == "ib-beam" else tiny_transformer(d, layers=1)
             if "jacobi" in name or name in ("speculative", "speculative-beam", "lookahead") else TableModel(d, {}))
    drafted = "draft_path" in get_search(name).capabilities.reads
    opts = stream_opts(**{option: "not-a-choice"}, **({"draft_path": __file__} if drafted else {}))
    with pytest.raises(FairseqStreamError) as refused:
        validate_run(name, gen_cfg(beam=2 if get_search(name).capabilities.beam else 1), opts, [model], d)
    return str(refused.value)


def test_help_states_the_parsers_defaults_and_the_values_the_checks_accept():
    """For every option we add: a default --help states plainly is the parser's (a per-strategy or per-device one is
    checked above); the values it quotes are those the checks accept (the parser takes any string: the checks are
    the real choices), read from their refusal of another value."""
    import dataclasses
    import re

    import fairseq.options

    from fairseq_stream.engine.options import StreamDecodingConfig

    actions = {a.dest: a for a in fairseq.options.get_generation_parser()._actions}
    checked = []
    for f in dataclasses.fields(StreamDecodingConfig):
        if f.name.startswith("_"):
            continue
        default, quoted, ranges = _stated(f.metadata["help"])
        action = actions[f.name]
        assert action.default == f.default, f.name
        if default is not None and action.default is not None:
            assert default == str(action.default), (f.name, default, action.default)
        if not quoted or f.name in _QUOTES_ARE_NOT_CHOICES:
            continue
        named = re.search(r"must be (?:one of )?(.+?), got", _refusal(f.name)).group(1)
        accepted = set(re.findall(r"'([\w.-]+)'", named)) or {v.strip() for v in named.split(",")}
        assert quoted == accepted and ranges == set(re.findall(r"\[\d+, \d+\]", named)), (f.name, quoted, named)
        checked.append(f.name)
    assert checked == ["stream_input_order", "prune_reference", "prune_ended", "beam_finalize", "prune_preset",
                       "prune_auto", "output_layer", "step_backend", "step_mode", "native_loop", "quantize", "cpu_matmul", "jacobi_parallel", "jacobi_init", "draft_tokens",
                       "draft_quantize", "ib_finalize"]  # every option with a list of values (a new one: add it here)


def test_help_texts_say_what_the_code_does():
    """--quantize's activation bits (ops/int8_rows.activation_bits), --draft-tokens' measurements (docs/results.md:
    3 faster than 2 and 4 since the draft's calls are one native call; it once called 2 "the fastest"),
    --prune-auto's start, budget and rule (search/defaults.py, search/prune_controller.py)."""
    import dataclasses

    from fairseq_stream.engine.options import StreamDecodingConfig
    from fairseq_stream.search.defaults import PRUNE_AUTO_BUDGET, PRUNE_AUTO_START

    text = {f.name: f.metadata["help"] for f in dataclasses.fields(StreamDecodingConfig) if f.name != "_name"}
    assert "one scale per output channel" in text["quantize"] and "one scale per row" in text["quantize"]
    assert "8-bit; FAIRSEQ_STREAM_INT8_ACTIVATION_BITS=7 forces 7" in text["quantize"]
    assert "the same bits on every CPU kind" in text["quantize"]
    assert "fastest" not in text["draft_tokens"] and "3 measured faster than 2 and 4" in text["draft_tokens"]
    auto = text["prune_auto"]
    assert f"starts at δ {PRUNE_AUTO_START[0]:g}, M {PRUNE_AUTO_START[1]};" in auto
    assert f"at most {100 * PRUNE_AUTO_BUDGET:g}%% of the run's decoder work" in auto
    assert "without reading the input ahead" in auto and "fairseq-interactive steers the same way" in auto
