"""The one builder: ``--search NAME`` + fairseq's generation config + our options → a generator.

Every registered strategy is built here (:func:`build_generator`): the run is validated once
(:func:`fairseq_stream.engine.validation.validate_run`: every option, every combination, the
strategy's and the scheduler's configurations), and the engine adds what every strategy
shares: the output layer and logits processors, the score dtype, the scheduler and fairseq's
generator interface. Strategies (search/) and the engine sit below this module and import none of
it. It lives in ``integration/`` because what it builds is the generator fairseq calls
(:class:`~fairseq_stream.integration.generator.StreamGenerator`) around a registered strategy.
"""
from __future__ import annotations

from typing import Any, Dict, List

import torch

from fairseq_stream.search.interface import StrategyContext
from fairseq_stream.search.score_edits import build_processors, needs_history
from fairseq_stream.engine.validation import validate_run
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.model import linear_kernels
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.model.quantize import activation_bits_of, count_linears, prepare_models
from fairseq_stream.ops.int8_rows import kernel_name as int8_kernel_name


def build_generator(name: str, task: Any, models: List[Any], gen_cfg: Any, opts: Any, **fairseq_kwargs: Any) -> Any:
    """The fairseq generator of ``--search name`` (``opts``: the task's decoding options)."""
    plan = validate_run(name, gen_cfg, opts, models, task.target_dictionary, fairseq_kwargs.get("extra_gen_cls_kwargs"))
    entry, config = plan.entry, plan.config
    quantize = getattr(opts, "quantize", "none")
    models = prepare_models(models, quantize)  # --quantize int8: int8 copies
    if quantize == "none":  # --cpu-matmul: float32 Linear layers on oneDNN (copies) or as loaded
        library = linear_kernels.resolve(getattr(opts, "cpu_matmul", "auto"), models, fairseq_search=entry.build is not None)
        models = linear_kernels.prepare(models, library)
    if entry.build is not None:  # fairseq's own generator
        return entry.build(task, models, gen_cfg, opts, **fairseq_kwargs)
    if getattr(opts, "prune_auto", False):  # the run calibrates its own δ and M (integration/prune_auto.py)
        from fairseq_stream.integration.prune_auto import AutoPruneGenerator

        return AutoPruneGenerator.build(lambda config, cls=StreamGenerator, **kw: _generator(
            name, plan, config, task, models, gen_cfg, opts, cls=cls, **kw), plan.config, opts)
    return _generator(name, plan, config, task, models, gen_cfg, opts)


def _generator(name: str, plan: Any, config: Any, task: Any, models: List[Any], gen_cfg: Any, opts: Any, *,
               cls: type = StreamGenerator, stats_path: Any = "", **extra: Any) -> Any:
    """``cls`` (a StreamGenerator) decoding ``plan``'s strategy with ``config`` over the prepared ``models``
    (``stats_path=None``: no statistics file, for the calibration's own decodes)."""
    entry = plan.entry
    tgt_dict = task.target_dictionary
    processors = build_processors(gen_cfg, tgt_dict)
    scorer = OutputScorer(processors, fused=opts.output_layer == "fused", normalized_input=len(models) > 1)
    dtype, history = score_dtype(models), needs_history(processors)

    def make_strategy(stats: Any, config: Any = config) -> Any:
        for proc in processors:  # edits that count what they do (n-gram blocking at the maximum length)
            if hasattr(proc, "bind_stats"):
                proc.bind_stats(stats)
        if scorer.note:  # a score edit that can raise a token: how the output layer honours it, said once
            stats.note_backend("output_layer", scorer.note)
        ctx = StrategyContext(scorer=scorer, eos=tgt_dict.eos(), pad=tgt_dict.pad(), bos=tgt_dict.eos(),
                              dtype=dtype, needs_history=history, stats=stats, step_backend=opts.step_backend,
                              task=task, load_models=lambda paths: load_models_like(paths, task, models, opts),
                              step_mode=getattr(opts, "step_mode", "auto"))
        return entry.strategy.from_config(config, ctx)

    generator = cls(models, tgt_dict, name=name, make_strategy=make_strategy, scheduler=plan.scheduler,
                    gen_cfg=gen_cfg, rows_per_sentence=config.rows_per_sentence,
                    stats_path=opts.stream_stats if stats_path == "" else stats_path, config=config,
                    step_mode=getattr(opts, "step_mode", "auto"), **extra)
    if entry.capabilities.block_steps:
        generator.model.require_block_steps(f"--search {name}")
    generator.stats.settings.update(run_settings(models, opts))
    return generator


def load_models_like(paths: str, task: Any, like: List[Any], opts: Any) -> List[Any]:
    """Checkpoints ``paths`` (``a.pt:b.pt``) loaded with ``task`` and prepared as the run's models
    ``like``: their device and dtype, ``--quantize`` and ``--cpu-matmul`` (a speculative draft)."""
    from fairseq_stream.integration.checkpoints import load_draft

    loaded = load_draft(paths, task)  # read as --path is; one line naming --draft-path for any problem
    param = next(like[0].parameters())
    for model in loaded:
        model.eval()
        model.to(device=param.device, dtype=param.dtype)
    quantize = getattr(opts, "quantize", "none")
    loaded = prepare_models(loaded, quantize)
    if quantize == "none":
        loaded = linear_kernels.prepare(loaded, linear_kernels.resolve(getattr(opts, "cpu_matmul", "auto"), loaded,
                                                                       fairseq_search=False))
    return loaded


def run_settings(models: List[Any], opts: Any) -> Dict[str, str]:
    """The settings the closing statistics line confirms: int8 weights where the models carry them
    (counted in the copies decoded), the input's own order where asked for."""
    settings: Dict[str, str] = {}
    bits = sorted({b for model in models for b in activation_bits_of(model)})
    if bits:  # the width the layers were made with (7 and 8 give different hypotheses)
        settings["quantize"] = "int8 (" + "; ".join(int8_kernel_name(b) for b in bits) + ")"
    if opts.stream_input_order != "sorted":
        settings["input order"] = str(opts.stream_input_order)
    return settings


def score_dtype(models: List[Any]) -> torch.dtype:
    """The dtype hypothesis scores are kept in: the models' (float32 for half precision)."""
    param = next(models[0].parameters(), None)
    dtype = torch.float32 if param is None else param.dtype
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
