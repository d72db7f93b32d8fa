"""The one validation of a decoding run: every option and combination, one line per refusal.

:func:`validate_run` is called by :func:`fairseq_stream.integration.build.build_generator` (so by
fairseq-generate, fairseq-interactive, the Python session and the benchmark harness alike). It
checks, in this order: the decoding options alone (:func:`check_options`, also called by the
task before any data is loaded), fairseq's generation options (:func:`check_generation`), what
``--search NAME`` cannot run from its registry capabilities (:func:`check_combinations`), the
strategy's own configuration (its dataclass checks its own fields) and the scheduler's, and the
combinations of scheduler and strategy. Errors are :class:`~fairseq_stream.errors.FairseqStreamError`
lines that say what is wrong and what to do.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import os
import sys
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from fairseq.dataclass.configs import GenerationConfig

from fairseq_stream.engine.options import INPUT_ORDERS, default_capacity
from fairseq_stream.search.defaults import (PRESETS, models_on_cuda, prune_auto_mode, prune_auto_on,
                                            prune_auto_problem, pruning_fixed_by)
from fairseq_stream.engine.options import StreamDecodingConfig
from fairseq_stream.engine.output_paths import check_output_path, data_files
from fairseq_stream.model.linear_kernels import check_choice as check_cpu_matmul
from fairseq_stream.model.quantize import check_choice as check_quantize
from fairseq_stream.search.registry import (SearchEntry, StrategyConfig, check_beam_and_nbest, get_search, search_names,
                                             stream_epsilon)
from fairseq_stream.engine.scheduler import SchedulerConfig
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model.static.modes import STEP_MODES
from fairseq_stream.search.registry import is_ib_model
from fairseq_stream.ops.backends import CHOICES as STEP_BACKENDS


@dataclass(frozen=True)
class RunPlan:
    """What a validated run decodes with: the registry entry, the strategy's and the scheduler's configuration."""

    entry: SearchEntry
    config: Optional[StrategyConfig]  # None for fairseq's own generator
    scheduler: Optional[SchedulerConfig]


def validate_run(name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = (), tgt_dict: Any = None,
                 extra_gen_cls_kwargs: Optional[Dict[str, Any]] = None) -> RunPlan:
    """Check everything ``--search name`` with these options would run, and build its configurations."""
    check_options(opts)
    check_generation(gen_cfg, models, tgt_dict)
    entry = get_search(name)
    check_combinations(entry, gen_cfg, opts, models, extra_gen_cls_kwargs)
    check_prune_auto(opts)
    if entry.build is not None:  # fairseq's own generator checks the rest itself
        return RunPlan(entry, None, None)
    config = entry.config.from_options(name, gen_cfg, opts, models)  # checks its own fields
    caps = entry.capabilities
    scheduler = SchedulerConfig(
        epsilon=stream_epsilon(name, opts.stream_epsilon), capacity=stream_capacity(opts, gen_cfg, models),
        max_candidates=int(opts.stream_max_candidates), selection=caps.selection, max_wait=int(opts.stream_max_wait),
        oversubscribe=bool(opts.stream_oversubscribe), native_loop=getattr(opts, "native_loop", "auto") == "auto",
    )
    if scheduler.oversubscribe and not (caps.beam and caps.models == "standard"):
        raise FairseqStreamError(f"--stream-oversubscribe splits beams under a candidate budget; --search {name} has "
                                 "no such beams: drop it or use a var-*/fixed-* strategy")
    if scheduler.max_candidates and scheduler.max_candidates < config.rows_per_sentence:
        raise FairseqStreamError(
            f"--stream-max-candidates {scheduler.max_candidates} is smaller than one beam "
            f"({config.rows_per_sentence} candidates); raise it or lower --beam"
        )
    return RunPlan(entry, config, scheduler)


def stream_capacity(opts: Any, gen_cfg: Any, models: Sequence[Any]) -> int:
    """--stream-capacity as given, else the default of the models' device (search/defaults.py)."""
    if opts.stream_capacity is not None:
        return int(opts.stream_capacity)
    return default_capacity(int(gen_cfg.beam), models_on_cuda(models))



def decoding_inputs(opts: Any) -> List[Tuple[str, str]]:
    """The files the decoding options themselves name (``(what, path)``): what no output may overwrite. The
    command line's own (``--path``, ``--input``, the results file) are added by the integration layer."""
    found = [("--draft-path's checkpoint", p) for p in (getattr(opts, "draft_path", None) or "").split(os.pathsep) if p]
    if getattr(opts, "lookahead_prior", None):
        found.append(("--lookahead-prior's file", opts.lookahead_prior))
    found += [("a file of the data", p) for p in data_files(getattr(opts, "data", None) or "")]
    return found


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _option_items(cfg: Any) -> Iterable[Tuple[str, Any]]:
    """(name, value) of a dataclass, an omegaconf node or an argparse namespace."""
    if hasattr(cfg, "__dataclass_fields__"):
        return [(f.name, getattr(cfg, f.name, None)) for f in fields(cfg)]
    if hasattr(cfg, "items"):
        return list(cfg.items())
    return list(vars(cfg).items())


def _refuse_nan(cfg: Any) -> None:
    # float("nan") parses as a number, and every range check (x < 0, 0 < x <= 1, ...) is False
    # for NaN: refused by name here, once, instead of silently poisoning every score.
    for name, value in _option_items(cfg):
        if isinstance(value, float) and math.isnan(value):
            raise FairseqStreamError(f"{_flag(name)} is NaN; give a number")


#: The built-in rules of --prune-rules, with the range of the flag they mirror (beam_rules
#: parses any float; what the flags refuse must not come in through the rule list).
_RULE_RANGES = {
    "ap": ("--prune-abs-threshold", lambda x: x >= 0, ">= 0 (inf = off)"),
    "rp": ("--prune-rel-threshold", lambda x: 0 < x <= 1, "in (0, 1]"),
    "rpl": ("--prune-rel-local-threshold", lambda x: 0 < x <= 1, "in (0, 1]"),
    "aps": ("--prune-abs-scale", lambda x: x >= 0, ">= 0"),
}


def _check_rule_arguments(spec: Optional[str]) -> None:
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        name, _, arg = item.partition(":")
        if name not in _RULE_RANGES or not arg:
            continue  # unknown names and missing numbers: refused by beam_rules with their own line
        try:
            value = float(arg)
        except ValueError:
            continue
        flag, ok, wanted = _RULE_RANGES[name]
        if math.isnan(value) or not ok(value):
            raise FairseqStreamError(f"--prune-rules {item}: {name} (as {flag}) must be {wanted}, got {arg}")


def check_preset(opts: Any) -> None:
    """``--prune-preset``: a known name, and no option given a value that contradicts it (the same
    value is fine; an option left unset takes the preset's, see ``search.beam.option_value``)."""
    name = getattr(opts, "prune_preset", None)
    if name is None:
        return
    if name not in PRESETS:
        raise FairseqStreamError(f"--prune-preset must be one of {', '.join(PRESETS)}, got {name!r}")
    source, values = PRESETS[name]
    for option, value in values:
        given = getattr(opts, option, None)
        if given is not None and given != value:
            raise FairseqStreamError(f"--prune-preset {name} sets {_flag(option)} {value} ({source}); "
                                     f"{_flag(option)} {given} contradicts it: drop one of them")


def check_prune_auto(opts: Any) -> None:
    """``--prune-auto on`` chooses δ and M itself: an explicit pruning setting with it is refused (not silently
    overridden); ``--prune-auto-tolerance`` means nothing where the steering is off (it is opt-in:
    :func:`~fairseq_stream.search.defaults.prune_auto_on`)."""
    problem = prune_auto_problem(getattr(opts, "prune_auto", None))
    if problem is not None:
        raise FairseqStreamError(f"--prune-auto {problem}")
    mode = prune_auto_mode(getattr(opts, "prune_auto", None))
    tolerance = getattr(opts, "prune_auto_tolerance", None)
    if tolerance is not None and not tolerance >= 0:
        raise FairseqStreamError(f"--prune-auto-tolerance must be >= 0 (a fraction of the fixed beam's mean |score|), got {tolerance}")
    fixed = pruning_fixed_by(opts)
    if mode == "on" and fixed:
        raise FairseqStreamError(f"--prune-auto chooses the pruning itself; {_flag(fixed[0])} fixes it: drop one of "
                                 "them (a fixed setting given explicitly decodes exactly as before)")
    if tolerance is not None and not prune_auto_on(opts):
        why = "--prune-auto off" if mode == "off" else "the run steers its pruning only when given --prune-auto"
        raise FairseqStreamError(f"--prune-auto-tolerance is the tolerance of --prune-auto, and {why}: add --prune-auto "
                                 "or drop --prune-auto-tolerance")


def check_options(opts: Any) -> None:
    """The decoding options alone, before any data or model is loaded (the task calls it up front too)."""
    get_search(opts.search)
    _refuse_nan(opts)
    _check_rule_arguments(opts.prune_rules)
    check_preset(opts)
    check_prune_auto(opts)
    if opts.stream_input_order not in INPUT_ORDERS:
        raise FairseqStreamError(f"--stream-input-order must be one of {', '.join(INPUT_ORDERS)}, "
                                 f"got {opts.stream_input_order!r}")
    if opts.output_layer not in ("fused", "full"):
        raise FairseqStreamError(f"--output-layer must be 'fused' or 'full', got {opts.output_layer!r}")
    if opts.step_backend not in STEP_BACKENDS:
        raise FairseqStreamError(f"--step-backend must be one of {', '.join(STEP_BACKENDS)}, got {opts.step_backend!r}")
    if opts.step_mode not in STEP_MODES:
        raise FairseqStreamError(f"--step-mode must be one of {', '.join(STEP_MODES)}, got {opts.step_mode!r}")
    if getattr(opts, "native_loop", "auto") not in NATIVE_LOOPS:
        raise FairseqStreamError(f"--native-loop must be one of {', '.join(NATIVE_LOOPS)}, got {opts.native_loop!r}")
    check_quantize(getattr(opts, "quantize", "none"))
    check_cpu_matmul(getattr(opts, "cpu_matmul", "auto"))
    if opts.stream_stats:  # checked now: it is written only at the end of the run
        check_output_path(opts.stream_stats, "--stream-stats", inputs=decoding_inputs(opts))


def check_generation(gen_cfg: Any, models: Sequence[Any] = (), tgt_dict: Any = None) -> None:
    """Reject fairseq generation options that no strategy can honour, for every ``--search``.

    fairseq itself answers these with an assertion, a division by zero or an IndexError after
    decoding (``--beam 0``, ``--nbest 0``, a length limit below ``--min-len``). The maximum
    length ``min(a·|x| + b, max positions − 1)`` must leave room for at least one token and for
    ``--min-len`` at the shortest source (|x| = 1, the EOS of an empty line), so no sentence can
    end up without a hypothesis. Refused as well: a ``--lenpen`` whose ``length ** lenpen``
    overflows (:func:`_check_lenpen`), ``--unkpen -inf``, a negative ``--no-repeat-ngram-size``
    (fairseq takes it as 0) and a non-integer value of an integer option (the Python session).
    """
    _refuse_nan(gen_cfg)
    _refuse_non_integers(gen_cfg)
    for name in ("lenpen", "temperature", "max_len_a"):  # inf: scores of 0 or inf, or no length limit at all
        if math.isinf(float(getattr(gen_cfg, name))):
            raise FairseqStreamError(f"{_flag(name)} must be finite, got {getattr(gen_cfg, name)}")
    if float(gen_cfg.unkpen) == -math.inf:  # +inf is fairseq's ban of <unk> (lprobs[:, unk] -= inf)
        raise FairseqStreamError("--unkpen -inf is an infinite bonus: <unk> would win every step and the scores "
                                 "would be infinite; give a finite number (--unkpen inf bans <unk>)")
    if gen_cfg.no_repeat_ngram_size < 0:
        raise FairseqStreamError(f"--no-repeat-ngram-size must be >= 0 (0 = off), got {gen_cfg.no_repeat_ngram_size}")
    if gen_cfg.beam < 1:
        raise FairseqStreamError(f"--beam must be >= 1, got {gen_cfg.beam}")
    if gen_cfg.nbest < 1:
        raise FairseqStreamError(f"--nbest must be >= 1, got {gen_cfg.nbest}")
    if tgt_dict is not None and gen_cfg.beam > len(tgt_dict):  # top-k over the vocabulary has no k-th word
        raise FairseqStreamError(f"--beam {gen_cfg.beam} is larger than the target vocabulary ({len(tgt_dict)} "
                                 "symbols); lower --beam")
    if not gen_cfg.temperature > 0:
        raise FairseqStreamError(f"--temperature must be > 0, got {gen_cfg.temperature}")
    if gen_cfg.max_len_a < 0:
        raise FairseqStreamError(f"--max-len-a must be >= 0, got {gen_cfg.max_len_a}")
    limits = [m.max_decoder_positions() for m in models if hasattr(m, "max_decoder_positions")]
    max_positions = min(limits) if limits else None
    min_len = max(int(gen_cfg.min_len), 1)
    by_flags = int(float(gen_cfg.max_len_a) * 1 + float(gen_cfg.max_len_b))  # at |x| = 1
    shortest = by_flags if max_positions is None else min(by_flags, max_positions - 1)
    if shortest < min_len:
        cause = (f"--max-len-a {gen_cfg.max_len_a} --max-len-b {gen_cfg.max_len_b}" if by_flags == shortest
                 else f"the model's {max_positions} positions")
        raise FairseqStreamError(
            f"the maximum output length (a·|x| + b, from {cause}) is {shortest} tokens for a one-token source, "
            f"below the minimum of {min_len} (--min-len {gen_cfg.min_len}); raise --max-len-b (fairseq's default "
            "is 200) or lower --min-len"
        )
    _check_lenpen(gen_cfg, max_positions)  # after the length checks: the longest output is >= 1 token


#: fairseq's integer generation options (--beam, --nbest, --max-len-b, ...): argparse parses them as
#: int on the command line, but the Python session takes any value (2.7 became beam 2 silently).
_INTEGER_OPTIONS = tuple(f.name for f in fields(GenerationConfig) if f.type in (int, "int"))


def _refuse_non_integers(gen_cfg: Any) -> None:
    for name, value in _option_items(gen_cfg):
        if name in _INTEGER_OPTIONS and value is not None and (
                isinstance(value, bool) or not isinstance(value, numbers.Integral)):
            raise FairseqStreamError(f"{_flag(name)} must be an integer, got {value!r}")


def _check_lenpen(gen_cfg: Any, max_positions: Optional[int]) -> None:
    """Every strategy (fairseq's too) divides a score by ``length ** lenpen`` in float64, length
    counting the EOS: a ``--lenpen`` for which that overflows at the run's longest output is an
    OverflowError after decoding (fairseq's: ``(step + 1) ** len_penalty``), so it is refused here
    with the bound ``log(float64 max) / log(longest)`` (102.39 at 1024 positions). A negative
    ``--lenpen`` of that size would divide by a number too small for float64 (infinite scores)."""
    lenpen = float(gen_cfg.lenpen)
    if gen_cfg.unnormalized or lenpen == 0:  # --unnormalized: no length normalisation at all
        return
    by_flags = math.inf if float(gen_cfg.max_len_a) > 0 else float(gen_cfg.max_len_b)
    tokens = by_flags if max_positions is None else min(by_flags, max_positions - 1)
    if math.isinf(tokens):
        return  # a > 0 and no model given: nothing bounds the length
    longest = int(tokens) + 1  # the EOS counts
    if not _power_fits(longest, abs(lenpen)):
        bound = math.floor(100 * math.log(sys.float_info.max) / math.log(longest)) / 100
        while not _power_fits(longest, bound):  # the logarithms round: the bound named must itself fit
            bound = round(bound - 0.01, 2)
        cause = (f"--max-len-b {gen_cfg.max_len_b}" if tokens == by_flags else f"the model's {max_positions} positions")
        raise FairseqStreamError(
            f"--lenpen {gen_cfg.lenpen} overflows: scores are divided by length ** lenpen, and outputs of this run "
            f"reach {longest} tokens (from {cause}), where that is beyond float64; |--lenpen| must be at most {bound} "
            "here (or add --unnormalized)")


def _power_fits(base: int, exponent: float) -> bool:
    try:
        return math.isfinite(float(base) ** exponent)
    except OverflowError:
        return False


#: fairseq generation options no strategy of ours honours: (is it set?, its flag)
_UNSUPPORTED = (
    (lambda g: g.sampling, "--sampling"),
    (lambda g: g.diverse_beam_groups > 0, "--diverse-beam-groups"),
    (lambda g: g.diversity_rate > -1, "--diversity-rate"),
    (lambda g: g.match_source_len, "--match-source-len"),
    (lambda g: g.prefix_size > 0, "--prefix-size"),
    (lambda g: bool(g.constraints), "--constraints"),
    (lambda g: bool(g.print_alignment), "--print-alignment"),
    (lambda g: g.lm_path is not None or g.lm_weight != 0, "--lm-path/--lm-weight"),
    (lambda g: g.score_reference, "--score-reference"),
    # fairseq's iterative refinement (fairseq-generate's NAT decoders) and its own generator's printing:
    # they would be accepted and silently ignored.
    (lambda g: getattr(g, "retain_iter_history", False), "--retain-iter-history"),
    (lambda g: getattr(g, "print_step", False), "--print-step"),
    (lambda g: getattr(g, "iter_decode_max_iter", 10) != 10, "--iter-decode-max-iter"),
    (lambda g: getattr(g, "iter_decode_eos_penalty", 0.0) != 0.0, "--iter-decode-eos-penalty"),
    (lambda g: getattr(g, "iter_decode_force_max_iter", False), "--iter-decode-force-max-iter"),
    (lambda g: getattr(g, "iter_decode_with_beam", 1) != 1, "--iter-decode-with-beam"),
    (lambda g: getattr(g, "iter_decode_with_external_reranker", False), "--iter-decode-with-external-reranker"),
    (lambda g: getattr(g, "retain_dropout", False), "--retain-dropout"),
)


#: --native-loop's values (engine/scheduler.py: the greedy beam's steps run ahead natively)
NATIVE_LOOPS = ("auto", "off")
#: Options that act for every --search, fairseq's own generator included: the task reads the input
#: in this order, and the engine prepares the models (int8 copies, the Linear layers' library).
EVERY_SEARCH_OPTIONS = frozenset({"search", "stream_input_order", "quantize", "cpu_matmul"})
#: Options our engine reads for each of its own strategies (the scheduler, the output layer, the
#: step operators, the statistics file); fairseq's generator reads none of them.
ENGINE_OPTIONS = frozenset({"stream_epsilon", "stream_capacity", "stream_max_candidates", "stream_oversubscribe",
                            "stream_max_wait", "stream_per_batch", "stream_stats", "output_layer", "step_backend",
                            "step_mode", "native_loop"})
#: fairseq's generation options its own generator accepts and then ignores or fails on (refused for it).
_UNSUPPORTED_BY_FAIRSEQ_BEAM = (
    # SequenceGenerator returns no "history": fairseq-generate then fails with KeyError after the first H- line.
    (lambda g: getattr(g, "retain_iter_history", False), "--retain-iter-history",
     "it is an option of fairseq's iterative refinement decoders (NAT models); drop it"),
)


def options_read_by(entry: SearchEntry) -> frozenset:
    """Every option of :class:`StreamDecodingConfig` that ``--search entry.name`` acts on."""
    if entry.build is not None:  # fairseq's own generator
        return EVERY_SEARCH_OPTIONS | entry.capabilities.reads
    return EVERY_SEARCH_OPTIONS | ENGINE_OPTIONS | entry.capabilities.reads


def check_combinations(entry: SearchEntry, gen_cfg: Any, opts: Any, models: Sequence[Any],
                       extra_gen_cls_kwargs: Optional[Dict[str, Any]] = None) -> None:
    """Refuse, in one line each, what ``--search entry.name`` cannot run (from its capabilities)."""
    name, caps = entry.name, entry.capabilities
    _check_models(name, caps.models, models)
    if entry.build is not None:  # fairseq's generator checks fairseq's options itself, but not ours
        # ... nor --nbest > --beam: it would print --beam hypotheses a sentence in silence.
        check_beam_and_nbest(int(gen_cfg.beam), int(gen_cfg.nbest))
        for is_set, flag, why in _UNSUPPORTED_BY_FAIRSEQ_BEAM:
            if is_set(gen_cfg):
                raise FairseqStreamError(f"--search {name} cannot be combined with {flag}: {why}")
        _check_unread_options(name, options_read_by(entry), opts)
        return
    _check_output_layers(name, caps, gen_cfg, models)
    _check_step_mode_device(opts.step_mode, models)
    for is_set, flag in _UNSUPPORTED:
        if is_set(gen_cfg):
            raise FairseqStreamError(f"--search {name} cannot be combined with {flag}; use --search beam for it")
    if (extra_gen_cls_kwargs or {}).get("lm_model") is not None:
        raise FairseqStreamError(f"--search {name} cannot be combined with --lm-path; use --search beam for it")
    if not caps.ngram_blocking and gen_cfg.no_repeat_ngram_size > 0:
        raise FairseqStreamError(f"--search {name} cannot be combined with --no-repeat-ngram-size; use --search beam for it")
    if not caps.beam and int(gen_cfg.beam) != 1:
        raise FairseqStreamError(f"--search {name} with --beam {gen_cfg.beam}: {caps.why_no_beam or 'use --beam 1'}")
    if not caps.nbest and int(gen_cfg.nbest) != 1:
        raise FairseqStreamError(f"--search {name} returns a single output per sentence; --nbest must be 1")
    _check_strategy_options(name, caps.reads, opts)


def _check_step_mode_device(mode: str, models: Sequence[Any]) -> None:
    """``--step-mode graph`` records CUDA graphs, ``native`` runs a C++ CPU operator: refused for models on
    another device."""
    devices = {p.device.type for m in models if hasattr(m, "parameters") for p in list(m.parameters())[:1]}
    if mode == "graph" and devices and devices != {"cuda"}:
        raise FairseqStreamError(f"--step-mode graph captures CUDA graphs and needs a CUDA device (the model is on "
                                 f"{', '.join(sorted(devices))}); use --step-mode static for the static step without "
                                 "capture, or eager")
    if mode == "native" and devices and devices != {"cpu"}:
        raise FairseqStreamError(f"--step-mode native runs the decoder step as one C++ call on a CPU (the model is "
                                 f"on {', '.join(sorted(devices))}); use --step-mode graph, static or eager")


def _check_output_layers(name: str, caps: Any, gen_cfg: Any, models: Sequence[Any]) -> None:
    """Models whose scores are more than a log-softmax of the decoder's output (an adaptive softmax,
    their own ``get_normalized_probs``) are scored through fairseq's normalisation by the generic
    backend; refused in one line where that cannot equal fairseq."""
    from fairseq_stream.model.model_step import normalizes_itself
    from fairseq_stream.model.block_decoder import check_supported

    for model in models:
        if not normalizes_itself(model):
            continue
        decoder = type(getattr(model, "decoder", None)).__name__
        if check_supported(getattr(model, "decoder", None)) is None:  # would run on our transformer step
            raise FairseqStreamError(
                f"{type(model).__name__} normalises its scores itself (its own get_normalized_probs), which "
                f"fairseq-stream's transformer step does not mirror; decode it with --search beam")
        if caps.block_steps:  # block steps run on the transformer step only
            raise FairseqStreamError(
                f"--search {name} feeds several tokens a step, which only fairseq-stream's transformer step can, and it "
                f"does not mirror this {decoder}'s output layer (adaptive softmax or its own get_normalized_probs); "
                "use --search fixed-ours, a var-* strategy or beam")
        if float(gen_cfg.temperature) != 1.0:  # fairseq divides the decoder's raw output, before normalising
            raise FairseqStreamError(
                f"--temperature {gen_cfg.temperature} with a {decoder} that normalises its scores itself (adaptive "
                f"softmax or its own get_normalized_probs): --search {name} applies it to the normalised scores, "
                "fairseq to the decoder's output; use --search beam or --temperature 1")


def _check_models(name: str, wanted: str, models: Sequence[Any]) -> None:
    ib = [m for m in models if is_ib_model(m)]
    if wanted == "standard" and ib:
        spec = ib[0].decoder.ib
        raise FairseqStreamError(
            f"this checkpoint is an {spec.describe()} model, which predicts {spec.z} words per step; "
            f"decode it with --search ib-beam, not --search {name}"
        )
    if wanted == "ib" and len(ib) != len(models):
        raise FairseqStreamError(
            f"--search {name} needs IBDecoder-family checkpoints (--arch transformer_ib); this is a standard "
            "model: use --search beam, var-stream, ... instead"
        )


def strategy_options() -> Dict[str, List[str]]:
    """Strategy-specific option → the strategies that read it (from the registry)."""
    out: Dict[str, List[str]] = {}
    for name in search_names():
        for option in sorted(get_search(name).capabilities.reads):
            out.setdefault(option, []).append(name)
    return out


def _check_unread_options(name: str, reads: frozenset, opts: Any) -> None:
    """Any of our options set away from its default that ``--search name`` does not read (fairseq's
    own beam search reads none of the strategies' and the engine's options)."""
    readers = strategy_options()
    for f in dataclasses.fields(StreamDecodingConfig):
        if f.name.startswith("_") or f.name in reads or getattr(opts, f.name, f.default) == f.default:
            continue
        whose = f"an option of {', '.join(readers[f.name])}" if f.name in readers else "an option of fairseq-stream's own strategies"
        raise FairseqStreamError(f"--search {name} (fairseq's own beam search) does not read {_flag(f.name)} "
                                 f"(it is {whose}); drop it or choose another --search")


def _check_strategy_options(name: str, reads: frozenset, opts: Any) -> None:
    """An option another strategy reads, set away from its default, would be silently ignored."""
    defaults = {f.name: f.default for f in dataclasses.fields(StreamDecodingConfig)}
    for option, readers in strategy_options().items():
        if option in reads or option not in defaults:
            continue
        if getattr(opts, option, defaults[option]) != defaults[option]:
            flag = "--" + option.replace("_", "-")
            raise FairseqStreamError(
                f"--search {name} does not read {flag} (it is an option of {', '.join(readers)}); drop it"
            )
