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

import os
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch

from fairseq_stream.search.interface import StrategyContext
from fairseq_stream.search.defaults import prune_auto_on
from fairseq_stream.search.score_edits import build_processors, needs_history
from fairseq_stream.engine.validation import validate_run
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.integration.generator import StreamGenerator
from fairseq_stream.model import linear_kernels
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.model.quantize import count_linears, int8_weights, prepare_models, why_no_int8
from fairseq_stream.ops import env_flags, int8_rows


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
    if prune_auto_on(opts):  # the run steers its own δ and M (integration/prune_auto.py; opt-in)
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
                              task=task,
                              load_models=lambda paths, **kw: load_models_like(paths, task, models, opts, **kw),
                              step_mode=getattr(opts, "step_mode", "auto"))
        return entry.strategy.from_config(config, ctx)

    generator = cls(models, tgt_dict, name=name, make_strategy=make_strategy, scheduler=plan.scheduler,
                    gen_cfg=gen_cfg, rows_per_sentence=config.rows_per_sentence,
                    stats_path=opts.stream_stats if stats_path == "" else stats_path, config=config,
                    step_mode=getattr(opts, "step_mode", "auto"), hooks=entry.capabilities.hooks, **extra)
    if entry.capabilities.block_steps:
        generator.model.require_block_steps(f"--search {name}")
    generator.stats.settings.update(run_settings(models, opts))
    return generator


def load_models_like(paths: str, task: Any, like: List[Any], opts: Any, *, quantize: Optional[str] = None) -> List[Any]:
    """Checkpoints ``paths`` (``a.pt:b.pt``) loaded with ``task`` and prepared as the run's models
    ``like``: their device and dtype, and ``--cpu-matmul``; ``quantize`` (a speculative draft's
    ``--draft-quantize``: ``auto``, ``none``, ``int8``) in place of the run's ``--quantize`` where given."""
    from fairseq_stream.integration.checkpoints import load_draft

    param = next(like[0].parameters())
    key = _draft_key(paths, quantize, opts, param)
    kept = _drafts.get(like[0], {}).get(key)
    if kept is not None:  # a session builds a generator per call: the same files, prepared once
        return list(kept)
    loaded = load_draft(paths, task)  # read as --path is; one line naming --draft-path for any problem
    for model in loaded:
        model.eval()
        model.to(device=param.device, dtype=param.dtype)
    if quantize is None:
        quantize = getattr(opts, "quantize", "none")
    elif quantize == "auto":  # a draft only proposes: its fastest weights, wherever they run
        quantize = "int8" if why_no_int8(loaded) is None else "none"
    elif quantize == "int8" and why_no_int8(loaded) is not None:
        raise FairseqStreamError(f"--draft-quantize int8 needs float32 weights on the CPU and PyTorch's x86 int8 "
                                 f"kernels (the draft has {param.dtype} on {param.device}); use --draft-quantize auto")
    loaded = prepare_models(loaded, quantize)
    if quantize == "none":
        loaded = linear_kernels.prepare(loaded, linear_kernels.resolve(getattr(opts, "cpu_matmul", "auto"), loaded,
                                                                       fairseq_search=False))
    _drafts.setdefault(like[0], {})[key] = list(loaded)
    return loaded


#: models loaded by :func:`load_models_like`, per run model (dropped with it): a ``TranslationSession`` builds a
#: generator per call, and loading and preparing a draft again costs ~0.1 s each time (the demo's, int8, a CPU)
_drafts: "weakref.WeakKeyDictionary[Any, Dict[Tuple[Any, ...], List[Any]]]" = weakref.WeakKeyDictionary()


def _draft_key(paths: str, quantize: Optional[str], opts: Any, like: torch.Tensor) -> Tuple[Any, ...]:
    """What the prepared models depend on: the files as they are now, the run model's device and dtype
    (``like``, one of its parameters), and how they are prepared."""
    files = []
    for path in paths.split(":"):
        try:
            st = os.stat(path)
            files.append((os.path.abspath(path), st.st_mtime_ns, st.st_size))
        except OSError:
            files.append((path, None, None))  # load_draft says what is wrong
    return (tuple(files), str(like.device), like.dtype, quantize, getattr(opts, "quantize", "none"),
            getattr(opts, "cpu_matmul", "auto"), int8_rows.bits_setting())  # checked only where int8 is used


def run_settings(models: List[Any], opts: Any) -> Dict[str, str]:
    """The settings the closing statistics line confirms: int8 weights where the models carry them
    (counted in the copies decoded), the input's own order where asked for, the kernels' instruction set where it
    is not all the CPU has (``FAIRSEQ_STREAM_KERNEL_ISA``)."""
    settings: Dict[str, str] = {}
    if env_flags.kernel_isa() != "native":
        settings["C++ kernels"] = f"{env_flags.kernel_isa()} build ({env_flags.KERNEL_ISA})"
    weights = int8_weights(models)
    if weights is not None:
        settings["quantize"] = weights
    if opts.stream_input_order != "sorted":
        settings["input order"] = str(opts.stream_input_order)
    return settings


def score_dtype(models: List[Any]) -> torch.dtype:
    """The dtype hypothesis scores are kept in: the models' (float32 for half precision)."""
    param = next(models[0].parameters(), None)
    dtype = torch.float32 if param is None else param.dtype
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
