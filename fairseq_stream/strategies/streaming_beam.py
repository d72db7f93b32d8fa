"""The beam-search family of paper 000 (and paper 002's top-up), registered under ``--search``.

| name           | beam     | refill ε        | selection   | paper                          |
|----------------|----------|-----------------|-------------|--------------------------------|
| ``var-stream`` | variable | 1/6             | min length  | 000 Algorithm 1 (VAR-STREAM)   |
| ``var-batch``  | variable | 0 (batches)     | min length  | 000 VAR-BATCH                  |
| ``var-fifo``   | variable | 1/6             | all, padded | 000 App. A.2 (VAR-STR-FIFO)    |
| ``fixed-ours`` | fixed    | 0 (batches)     | min length  | 000 App. A.1 (FIXED-OURS)      |
| ``fixed-stream``| fixed   | 1/6             | min length  | 000 App. A.1 (FIXED-STREAM)    |
| ``topup``      | fixed    | 1/2             | all, padded | 002 Algorithms 5–6 (top-up)    |

The heuristics of the variable beams default to paper 000's δ = 1.5 and M = 5.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from fairseq_stream.adapter import StreamGenerator, reject_ib_models, reject_unsupported, score_dtype
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops.fused_output import OutputScorer
from fairseq_stream.processors import build_processors, needs_history
from fairseq_stream.registry import Capabilities, register_search, stream_epsilon
from fairseq_stream.scheduler import SchedulerConfig
from fairseq_stream.strategies.beam import BeamConfig, BeamSearch, Pruning

DEFAULT_ABS_THRESHOLD = 1.5  # δ, paper 000 §4.1
DEFAULT_MAX_CANDS_PER_NODE = 5  # M, paper 000 §4.1
DEFAULT_EPSILON = 1.0 / 6  # paper 000 §4.1
DEFAULT_REFERENCE = "final"  # what δ and rp measure from (see beam.Pruning)


@dataclass(frozen=True)
class Variant:
    variable: bool
    epsilon: float  # 0: the batched baseline, the user may not stream it
    selection: str
    summary: str


VARIANTS = {
    "var-stream": Variant(True, DEFAULT_EPSILON, "min-length",
                          "VAR-STREAM: variable-width beam, refill at ε·n, expand the shortest beams (paper 000)"),
    "var-batch": Variant(True, 0.0, "min-length",
                         "VAR-BATCH: the same variable-width beam in plain batches (paper 000 baseline)"),
    "var-fifo": Variant(True, DEFAULT_EPSILON, "all",
                        "VAR-STR-FIFO: streaming, every beam in flight steps, padded (paper 000 App. A.2)"),
    "fixed-ours": Variant(False, 0.0, "min-length",
                          "FIXED-OURS: fixed width k, paper 000's finalisation rule, plain batches"),
    "fixed-stream": Variant(False, DEFAULT_EPSILON, "min-length",
                            "FIXED-STREAM: fixed width k, paper 000's finalisation rule, streamed"),
    "topup": Variant(False, 0.5, "all",
                     "top-up batching: refill when half empty, all sentences step together (paper 002)"),
}


def _pruning(name: str, variant: Variant, opts: Any) -> Pruning:
    given = {
        "--prune-abs-threshold": opts.prune_abs_threshold,
        "--prune-max-cands-per-node": opts.prune_max_cands_per_node,
        "--prune-rel-threshold": opts.prune_rel_threshold,
        "--prune-rel-local-threshold": opts.prune_rel_local_threshold,
        "--prune-reference": opts.prune_reference if opts.prune_reference != DEFAULT_REFERENCE else None,
    }
    if not variant.variable:
        used = [flag for flag, value in given.items() if value is not None]
        if used:
            raise FairseqStreamError(f"--search {name} is a fixed-width beam; {used[0]} needs a var-* strategy")
        return Pruning()
    ap = DEFAULT_ABS_THRESHOLD if opts.prune_abs_threshold is None else opts.prune_abs_threshold
    mc = DEFAULT_MAX_CANDS_PER_NODE if opts.prune_max_cands_per_node is None else opts.prune_max_cands_per_node
    return Pruning(
        abs_threshold=None if math.isinf(ap) else float(ap),
        rel_threshold=opts.prune_rel_threshold,
        rel_local_threshold=opts.prune_rel_local_threshold,
        max_cands_per_node=int(mc),
        reference=opts.prune_reference,
    )


def build_beam_family(task: Any, models: Any, gen_cfg: Any, opts: Any, *, name: str, **fairseq_kwargs: Any) -> StreamGenerator:
    variant = VARIANTS[name]
    reject_unsupported(gen_cfg, name, fairseq_kwargs.get("extra_gen_cls_kwargs"))
    reject_ib_models(models, name)
    tgt_dict = task.target_dictionary
    cfg = BeamConfig(
        beam=int(gen_cfg.beam),
        nbest=int(gen_cfg.nbest),
        final_count=int(opts.beam_final_count),
        lenpen=0.0 if gen_cfg.unnormalized else float(gen_cfg.lenpen),
        finalize=opts.beam_finalize,
        pruning=_pruning(name, variant, opts),
    )
    cfg.validate()
    processors = build_processors(gen_cfg, tgt_dict)
    scorer = OutputScorer(processors, fused=opts.output_layer == "fused", normalized_input=len(models) > 1)
    dtype = score_dtype(models)

    def make_strategy(stats) -> BeamSearch:
        return BeamSearch(cfg, scorer, eos=tgt_dict.eos(), pad=tgt_dict.pad(), bos=tgt_dict.eos(),
                          needs_history=needs_history(processors), dtype=dtype)

    scheduler = SchedulerConfig(
        epsilon=stream_epsilon(name, opts.stream_epsilon),
        capacity=int(opts.stream_capacity),
        max_candidates=int(opts.stream_max_candidates),
        selection=variant.selection,
        max_wait=int(opts.stream_max_wait),
    )
    return StreamGenerator(models, tgt_dict, name=name, make_strategy=make_strategy, scheduler=scheduler,
                           gen_cfg=gen_cfg, rows_per_sentence=cfg.beam, stats_path=opts.stream_stats)


for _name, _variant in VARIANTS.items():
    register_search(
        _name,
        summary=_variant.summary,
        capabilities=Capabilities(streaming=_variant.epsilon > 0, default_epsilon=_variant.epsilon),
    )(functools.partial(build_beam_family, name=_name))
