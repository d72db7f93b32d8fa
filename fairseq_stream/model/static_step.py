"""The static decoder step: shapes fixed per bucket, so that a step can be one CUDA graph replay.

The first GPU run found the engine host-bound (docs/results.md, "On a GPU: the first run"): a
decoder step was ~130 kernel launches and ~100 allocations issued from Python, ~8 ms of host
time for ~0.8 ms of GPU work. A CUDA graph replays a recorded sequence of kernels in one launch,
but only over the *same* buffers and shapes. This module holds what makes a step's shapes depend
on a bucket only (:mod:`fairseq_stream.model.decoder_step` runs the step itself):

* **buckets** — rows on a geometric ladder, finer past 512 rows (:func:`row_bucket`), cache slots on a doubling one
  (:func:`length_bucket`); rows past the live ones are padding rows (masked, never read back);
* **slot caches** — every layer's self-attention keys and values of a group in one stacked
  buffer ``(rows bucket, 2·layers, heads, slots bucket, head dim)`` taken from a
  :class:`StaticCachePool` and given back when no cache refers to it (a :class:`Lease`), so that
  the few buffers of each bucket recur and their captured graphs are replayed again and again;
* **graphs** — :class:`StepGraphs` captures the step of each key once (buffers, bucket, block
  width) into one shared memory pool and replays it afterwards; a step it cannot capture runs
  the same static code eagerly, with one warning line saying why.

The changes of the live set (refill, finished sentences, a beam changing its width, Jacobi
accepting a block) happen between steps as index operations on these buffers
(``RowCache.select``/``concat``/``accept``), outside the captured region.
"""
from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops.backends import device_choice

logger = logging.getLogger("fairseq_stream")

#: --step-mode values: eager = the dynamic step; static = fixed shapes, no capture (any device);
#: graph = the static step captured as CUDA graphs; auto = graph on CUDA, eager on a CPU.
STEP_MODES = ("auto", "eager", "static", "graph")

MIN_ROWS = 8  # the smallest row bucket: tiny groups share one
MIN_SLOTS = 16  # the smallest cache-length bucket (the eager cache's first allocation, too)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


#: Above this many rows the row ladder has FINE_STEPS rungs per doubling instead of one: such a step
#: is compute-bound, so its padding costs its share of the time (3,200 rows ran as 4,096, 28% waste:
#: docs/results.md, "On a GPU, round 2"); below, a step is launch-bound and fewer buckets (graphs) win.
FINE_ROWS = 512
FINE_STEPS = 8


def row_bucket(rows: int) -> int:
    """The row bucket of ``rows`` live rows: 8, 16, ..., 512, then steps of 1/8 of the power of two
    below (576, 640, ..., 1024, 1152, ...): past 8 rows under half of a step is padding, past 512
    rows at most 12.5% (one row in a bucket of 8 is 7/8)."""
    if rows <= FINE_ROWS:
        return max(MIN_ROWS, next_pow2(rows))
    step = next_pow2(rows) // (2 * FINE_STEPS)
    return -(-rows // step) * step


def length_bucket(slots: int) -> int:
    """The cache-length bucket holding ``slots`` slots: 16, 32, 64, ..."""
    return max(MIN_SLOTS, next_pow2(slots))


def resolve_step_mode(mode: str, device: torch.device) -> str:
    """``auto`` → ``graph`` on CUDA, ``eager`` elsewhere (the static step without capture is slower
    than the eager one on a CPU: it computes the padding rows and slots); others as given."""
    return device_choice("step_mode", device.type) if mode == "auto" else mode


@dataclass
class StepModeStats:
    """How the run's decoder steps ran: replayed graphs, static steps run eagerly, eager steps."""

    replayed: int = 0
    static: int = 0
    eager: int = 0
    captured: int = 0
    capture_seconds: float = 0.0
    graph_bytes: int = 0
    fallbacks: Dict[str, int] = field(default_factory=dict)  # why a step left the static path → count

    def fallback(self, why: str) -> None:
        self.fallbacks[why] = self.fallbacks.get(why, 0) + 1

    def count(self, how: str) -> None:
        """One decoder step ran ``how``: ``replayed``, ``static`` or ``eager``."""
        setattr(self, how, getattr(self, how) + 1)

    def as_dict(self) -> Dict[str, Any]:
        return {"steps_replayed": self.replayed, "steps_static": self.static, "steps_eager": self.eager,
                "graphs_captured": self.captured, "graph_capture_s": round(self.capture_seconds, 4),
                "graph_pool_mib": round(self.graph_bytes / 2 ** 20, 2), "fallbacks": dict(self.fallbacks)}


class Lease:
    """A stacked cache buffer lent by a :class:`StaticCachePool`; back in the pool when no cache holds it."""

    __slots__ = ("buffer", "__weakref__")

    def __init__(self, pool: "StaticCachePool", key: Tuple[Any, ...], buffer: Tensor) -> None:
        self.buffer = buffer
        weakref.finalize(self, pool.release, key, buffer)

    @property
    def rows(self) -> int:
        return self.buffer.size(0)


class StaticCachePool:
    """Stacked self-attention buffers ``(rows, 2·layers, H, slots, hd)``, recycled per bucket.

    A buffer is lent as a :class:`Lease`; when the last cache holding the lease is gone (CPython
    frees it at once), the buffer is free again. A recycled buffer keeps its stale values: every
    slot of it has been written with finite numbers (new buffers are zeros), and attention masks
    what a row has not written.
    """

    def __init__(self) -> None:
        self.free: Dict[Tuple[Any, ...], List[Tensor]] = {}

    def acquire(self, rows: int, capacity: int, like: Tensor, layers: int, heads: int, head_dim: int) -> Lease:
        key = (rows, capacity, layers, heads, head_dim, like.dtype, like.device)
        spare = self.free.get(key)
        if spare:
            buffer = spare.pop()
        else:
            buffer = like.new_zeros(rows, 2 * layers, heads, capacity, head_dim)
        return Lease(self, key, buffer)

    def release(self, key: Tuple[Any, ...], buffer: Tensor) -> None:
        self.free.setdefault(key, []).append(buffer)


class StepGraphs:
    """CUDA graphs of the static step, one per key, in one shared memory pool.

    :meth:`run` runs ``body`` (which reads and writes only buffers fixed for its key) the first
    time a key is seen — eagerly, on a side stream, as the warm-up capture needs — then captures
    it; later steps of the key replay the graph. ``keep`` are the tensors the graph reads and
    writes: held by the graph so that they outlive it.
    """

    def __init__(self, stats: StepModeStats, *, limit: int = 256) -> None:
        self.stats = stats
        self.limit = limit  # graphs at most; steps of further keys run static, uncaptured
        self.graphs: Dict[Tuple[Any, ...], Tuple[Any, List[Tensor]]] = {}
        self.pool: Any = None
        self.refused: Dict[Tuple[Any, ...], str] = {}
        self._warned = False
        self._side: Any = None  # one side stream for every warm-up (its freed blocks serve the next)

    def run(self, key: Tuple[Any, ...], body: Callable[[], None], keep: List[Tensor]) -> str:
        """Replay ``key``'s graph, or run ``body`` and capture it; how the step ran: ``replayed``/``static``."""
        entry = self.graphs.get(key)
        if entry is not None:
            entry[0].replay()
            return "replayed"
        if self._side is None:
            self._side = torch.cuda.Stream()
        side = self._side
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the step itself, and the warm-up of its capture
            body()
        torch.cuda.current_stream().wait_stream(side)
        if key not in self.refused:
            if len(self.graphs) >= self.limit:
                self._refuse(key, f"more than {self.limit} step graphs")
            else:
                self._capture(key, body, keep)
        return "static"

    def _capture(self, key: Tuple[Any, ...], body: Callable[[], None], keep: List[Tensor]) -> None:
        start = time.perf_counter()
        before = torch.cuda.memory_reserved()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                body()
        except Exception as error:  # an operator that cannot be captured: this key runs static
            try:
                torch.cuda.synchronize()
            except RuntimeError:
                pass
            self._refuse(key, f"capture failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
            return
        self.graphs[key] = (graph, keep)
        self.stats.captured += 1
        self.stats.capture_seconds += time.perf_counter() - start
        self.stats.graph_bytes += max(0, torch.cuda.memory_reserved() - before)

    def _refuse(self, key: Tuple[Any, ...], why: str) -> None:
        self.refused[key] = why
        self.stats.fallback(why)
        if not self._warned:
            self._warned = True
            logger.warning("fairseq-stream: --step-mode graph: a step runs uncaptured (static shapes, eager "
                           "launches): %s", why)
