"""The one builder: ``--search NAME`` + fairseq's generation config + our options → a generator.

Every registered strategy is built here (:func:`build_generator`): the registry entry's
capabilities refuse what the strategy cannot run (:func:`check_combinations`, the one place
that checks combinations of options), its configuration dataclass reads and validates its
options, and the engine adds what every strategy shares: the output layer and logits
processors, the score dtype, the scheduler and fairseq's generator interface. Strategies sit
below this module and import none of it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence

import torch

from fairseq_stream.adapter import StreamGenerator
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.interface import StrategyContext
from fairseq_stream.ops.fused_output import OutputScorer
from fairseq_stream.options import StreamDecodingConfig
from fairseq_stream.quantize import prepare_models
from fairseq_stream.processors import build_processors, needs_history
from fairseq_stream.registry import SearchEntry, get_search, search_names, stream_epsilon
from fairseq_stream.scheduler import SchedulerConfig

import fairseq_stream.strategies  # noqa: F401,E402  (registers the package's strategies)


def build_generator(name: str, task: Any, models: List[Any], gen_cfg: Any, opts: Any, **fairseq_kwargs: Any) -> Any:
    """The fairseq generator of ``--search name`` (``opts``: the task's decoding options)."""
    entry = get_search(name)
    models = prepare_models(models, getattr(opts, "quantize", "none"))  # --quantize int8: int8 copies
    check_combinations(entry, gen_cfg, opts, models, fairseq_kwargs.get("extra_gen_cls_kwargs"))
    if entry.build is not None:  # fairseq's own generator
        return entry.build(task, models, gen_cfg, opts, **fairseq_kwargs)
    caps = entry.capabilities
    config = entry.config.from_options(name, gen_cfg, opts, models)  # validates itself
    scheduler = SchedulerConfig(
        epsilon=stream_epsilon(name, opts.stream_epsilon), capacity=int(opts.stream_capacity),
        max_candidates=int(opts.stream_max_candidates), selection=caps.selection, max_wait=int(opts.stream_max_wait),
        oversubscribe=bool(opts.stream_oversubscribe),
    )
    if scheduler.oversubscribe and not (caps.beam and caps.models == "standard"):
        raise FairseqStreamError(f"--stream-oversubscribe splits beams under a candidate budget; --search {name} has "
                                 "no such beams: drop it or use a var-*/fixed-* strategy")
    if scheduler.max_candidates and scheduler.max_candidates < config.rows_per_sentence:
        raise FairseqStreamError(
            f"--stream-max-candidates {scheduler.max_candidates} is smaller than one beam "
            f"({config.rows_per_sentence} candidates); raise it or lower --beam"
        )
    tgt_dict = task.target_dictionary
    processors = build_processors(gen_cfg, tgt_dict)
    scorer = OutputScorer(processors, fused=opts.output_layer == "fused", normalized_input=len(models) > 1)
    dtype, history = score_dtype(models), needs_history(processors)

    def make_strategy(stats: Any) -> Any:
        ctx = StrategyContext(scorer=scorer, eos=tgt_dict.eos(), pad=tgt_dict.pad(), bos=tgt_dict.eos(),
                              dtype=dtype, needs_history=history, stats=stats, step_backend=opts.step_backend)
        return entry.strategy.from_config(config, ctx)

    generator = StreamGenerator(models, tgt_dict, name=name, make_strategy=make_strategy, scheduler=scheduler,
                                gen_cfg=gen_cfg, rows_per_sentence=config.rows_per_sentence,
                                stats_path=opts.stream_stats, config=config)
    if caps.block_steps:
        generator.model.require_block_steps(f"--search {name}")
    return generator


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


def check_combinations(entry: SearchEntry, gen_cfg: Any, opts: Any, models: Sequence[Any],
                       extra_gen_cls_kwargs: Optional[Dict[str, Any]] = None) -> None:
    """Refuse, in one line each, what ``--search entry.name`` cannot run (from its capabilities)."""
    name, caps = entry.name, entry.capabilities
    _check_models(name, caps.models, models)
    if entry.build is not None:
        return  # fairseq's generator checks fairseq's options itself
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


def _check_models(name: str, wanted: str, models: Sequence[Any]) -> None:
    from fairseq_stream.models.transformer_ib import is_ib_model

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


def score_dtype(models: List[Any]) -> torch.dtype:
    """The dtype hypothesis scores are kept in: the models' (float32 for half precision)."""
    param = next(models[0].parameters(), None)
    dtype = torch.float32 if param is None else param.dtype
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
