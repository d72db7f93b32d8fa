"""The beam-search family of Yang2020 (and Hoang2018's top-up), registered under ``--search``.

| name           | beam     | refill ε        | selection   | paper                             |
|----------------|----------|-----------------|-------------|-----------------------------------|
| ``var-stream`` | variable | 1/6             | min length  | Yang2020 Algorithm 1 (VAR-STREAM) |
| ``var-batch``  | variable | 0 (batches)     | min length  | Yang2020 VAR-BATCH                |
| ``var-fifo``   | variable | 1/6             | all, padded | Yang2020 App. A.2 (VAR-STR-FIFO)  |
| ``fixed-ours`` | fixed    | 0 (batches)     | min length  | Yang2020 App. A.1 (FIXED-OURS)    |
| ``fixed-stream``| fixed   | 1/6             | min length  | Yang2020 App. A.1 (FIXED-STREAM)  |
| ``topup``      | fixed    | 1/2             | all, padded | Hoang2018 Algorithms 5–6 (top-up) |

The heuristics of the variable beams default to Yang2020's δ = 1.5 and M = 5.
"""
from __future__ import annotations

from dataclasses import dataclass

from fairseq_stream.search.registry import Capabilities, register_search
from fairseq_stream.search.beam import BeamConfig, BeamSearch, VariableBeamConfig

DEFAULT_EPSILON = 1.0 / 6  # Yang2020 §4.1
BEAM_OPTIONS = frozenset({"beam_final_count", "beam_finalize"})
PRUNING_OPTIONS = frozenset({"prune_abs_threshold", "prune_abs_scale", "prune_max_cands_per_node", "prune_rel_threshold",
                             "prune_rel_local_threshold", "prune_reference", "prune_ended", "prune_rules", "prune_preset",
                             "prune_auto", "prune_auto_tolerance", "prune_final_per_token"})


@dataclass(frozen=True)
class Variant:
    variable: bool
    epsilon: float  # 0: the batched baseline, the user may not stream it
    selection: str
    summary: str


VARIANTS = {
    "var-stream": Variant(True, DEFAULT_EPSILON, "min-length",
                          "VAR-STREAM: variable-width beam, refill at ε·n, expand the shortest beams (Yang2020)"),
    "var-batch": Variant(True, 0.0, "min-length",
                         "VAR-BATCH: the same variable-width beam in plain batches (Yang2020 baseline)"),
    "var-fifo": Variant(True, DEFAULT_EPSILON, "all",
                        "VAR-STR-FIFO: streaming, every beam in flight steps, padded (Yang2020 App. A.2)"),
    "fixed-ours": Variant(False, 0.0, "min-length",
                          "FIXED-OURS: fixed width k, Yang2020's finalisation rule, plain batches"),
    "fixed-stream": Variant(False, DEFAULT_EPSILON, "min-length",
                            "FIXED-STREAM: fixed width k, Yang2020's finalisation rule, streamed"),
    "topup": Variant(False, 0.5, "all",
                     "top-up batching: refill when half empty, all sentences step together (Hoang2018)"),
}

for _name, _variant in VARIANTS.items():
    register_search(
        _name,
        summary=_variant.summary,
        config=VariableBeamConfig if _variant.variable else BeamConfig,
        capabilities=Capabilities(
            streaming=_variant.epsilon > 0, default_epsilon=_variant.epsilon, selection=_variant.selection,
            reads=BEAM_OPTIONS | (PRUNING_OPTIONS if _variant.variable else frozenset()),
            hooks=frozenset({"region", "rungs", "ahead"}),
        ),
    )(BeamSearch)
