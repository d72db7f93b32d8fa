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

from dataclasses import dataclass

from fairseq_stream.core.registry import Capabilities, register_search
from fairseq_stream.strategies.beam import BeamConfig, BeamSearch, VariableBeamConfig

DEFAULT_EPSILON = 1.0 / 6  # paper 000 §4.1
BEAM_OPTIONS = frozenset({"beam_final_count", "beam_finalize"})
PRUNING_OPTIONS = frozenset({"prune_abs_threshold", "prune_max_cands_per_node", "prune_rel_threshold",
                             "prune_rel_local_threshold", "prune_reference", "prune_ended", "prune_rules", "prune_preset"})


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

for _name, _variant in VARIANTS.items():
    register_search(
        _name,
        summary=_variant.summary,
        config=VariableBeamConfig if _variant.variable else BeamConfig,
        capabilities=Capabilities(
            streaming=_variant.epsilon > 0, default_epsilon=_variant.epsilon, selection=_variant.selection,
            reads=BEAM_OPTIONS | (PRUNING_OPTIONS if _variant.variable else frozenset()),
        ),
    )(BeamSearch)
