"""``--step-mode``: its values, how ``auto`` resolves, and how a generator's steps ran (:class:`StepModeStats`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

import torch

from fairseq_stream.ops.backends import device_choice

#: --step-mode values: eager = the dynamic step; static = fixed shapes, no capture (any device);
#: graph = the static step captured as CUDA graphs; native = the eager step as one C++ call (CPU,
#: model/native_decoder.py); auto = graph on CUDA, native on a CPU (eager where native does not run every model).
STEP_MODES = ("auto", "eager", "static", "graph", "native")


def resolve_step_mode(mode: str, device: torch.device) -> str:
    """``auto`` → ``graph`` on CUDA, ``native`` on a CPU (the static step without capture is slower
    than the eager one on a CPU: it computes the padding rows and slots; ModelStep takes eager where
    native does not run every model); others as given."""
    return device_choice("step_mode", device.type) if mode == "auto" else mode


@dataclass
class StepModeStats:
    """How one generator's decoder steps ran: replayed graphs, static steps run eagerly, eager steps.

    A generator's own: the model's :class:`StepGraphs` count a capture or an eviction in the
    statistics of the step that made it (``--prune-auto``'s helpers add theirs to the run's).
    """

    replayed: int = 0
    static: int = 0
    native: int = 0  # --step-mode native: steps run by the C++ operator
    eager: int = 0
    captured: int = 0
    capture_seconds: float = 0.0
    graph_bytes: int = 0
    evicted: int = 0  # graphs dropped by the LRU bound of StepGraphs, or with a cache buffer the pool dropped
    table_reorders: int = 0  # reorders of caches that never move (model/row_arena.py): tables copied, not keys
    output_in_step: int = 0  # steps whose output layer (a RegionTail) ran in the static step's region
    reorders_in_step: int = 0  # steps that did the last step's cache reorder inside their region (RowCache.select)
    inputs_in_step: int = 0  # of those, steps that gathered the rows' encoder slots (and tail inputs) there too
    search_in_step: int = 0  # steps whose search step (RegionTail.search) ran in the region after the output layer
    fallbacks: Dict[str, int] = field(default_factory=dict)  # why a step left the static path → count
    warned: bool = field(default=False, repr=False)  # the run's one warning line about uncaptured steps

    def fallback(self, why: str) -> None:
        self.fallbacks[why] = self.fallbacks.get(why, 0) + 1

    def count(self, how: str, steps: int = 1) -> None:
        """``steps`` decoder steps ran ``how``: ``replayed``, ``static``, ``native`` or ``eager``."""
        setattr(self, how, getattr(self, how) + steps)

    _COUNTS = ("replayed", "static", "native", "eager", "captured", "capture_seconds", "graph_bytes", "evicted",
               "table_reorders", "output_in_step", "reorders_in_step", "inputs_in_step", "search_in_step")

    def add(self, other: "StepModeStats") -> None:
        """``other``'s steps counted in these (a helper decode of the run's: ``--prune-auto``'s probes)."""
        for name in self._COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for why, n in other.fallbacks.items():
            self.fallbacks[why] = self.fallbacks.get(why, 0) + n

    def since(self, before: "StepModeStats") -> "StepModeStats":
        """The steps counted here after ``before`` (an earlier copy of these)."""
        out = StepModeStats(**{name: getattr(self, name) - getattr(before, name) for name in self._COUNTS})
        out.fallbacks = {why: n - before.fallbacks.get(why, 0) for why, n in self.fallbacks.items()
                         if n != before.fallbacks.get(why, 0)}
        return out

    def as_dict(self) -> Dict[str, Any]:
        return {"steps_replayed": self.replayed, "steps_static": self.static, "steps_native": self.native,
                "steps_eager": self.eager,
                "graphs_captured": self.captured, "graph_capture_s": round(self.capture_seconds, 4),
                "graph_pool_mib": round(self.graph_bytes / 2 ** 20, 2), "graphs_evicted": self.evicted,
                "reorders_by_table": self.table_reorders, "output_layer_in_step": self.output_in_step,
                "reorders_in_step": self.reorders_in_step, "inputs_in_step": self.inputs_in_step,
                "search_in_step": self.search_in_step,
                "fallbacks": dict(self.fallbacks)}
