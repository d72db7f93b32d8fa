"""CUDA graphs of the static step (:class:`StepGraphs`): captured once per key, replayed afterwards."""
from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any, Callable, List, Tuple

import torch
from torch import Tensor

from fairseq_stream.model.static.modes import StepModeStats

logger = logging.getLogger("fairseq_stream")


#: A step graph's key begins with the addresses of the buffers it binds: the slot cache, the cache its
#: reorder copies from (None: no reorder), the stream's input buffer of the bucket and its shared logits
#: (:meth:`StepGraphs.forget`).
BOUND_ADDRESSES = 4


class StepGraphs:
    """CUDA graphs of the static step, one per key, in one shared memory pool (one per model).

    :meth:`run` runs ``body`` (which reads and writes only buffers fixed for its key) the first
    time a key is seen — eagerly, on a side stream, as the warm-up capture needs — then captures
    it; later steps of the key replay the graph. ``keep`` are the tensors the graph reads and
    writes: held by the graph so that they outlive it (and no other tensor takes their address,
    which keys read). At most ``limit`` graphs are kept, the least recently replayed evicted
    first (captured again if its key recurs). Captures, evictions and refusals are counted in the
    ``stats`` of the step that made them: the generator that ran it, not the model.
    """

    def __init__(self, *, limit: int = 256) -> None:
        self.limit = limit
        self.graphs: "OrderedDict[Tuple[Any, ...], Tuple[Any, List[Tensor]]]" = OrderedDict()  # least recent first
        self.pool: Any = None
        self.refused: "OrderedDict[Tuple[Any, ...], str]" = OrderedDict()  # keys that cannot be captured (bounded too)
        self._side: Any = None  # one side stream for every warm-up (its freed blocks serve the next)
        self._forgotten = 0  # graphs dropped with their cache buffer, counted at the next step's run

    def forget(self, buffer_address: int) -> None:
        """Drop the graphs bound to the buffer at ``buffer_address`` (a cache buffer the pool dropped,
        a stream's shared output buffer it replaced: its memory goes only when no graph holds it; the
        next buffer has another address). A key's first :data:`BOUND_ADDRESSES` entries are the
        addresses of the buffers its graph is bound to."""
        stale = [key for key in self.graphs if buffer_address in key[:BOUND_ADDRESSES]]
        for key in stale:
            del self.graphs[key]
        self._forgotten += len(stale)

    def clear(self) -> int:
        """Drop every graph (the tensors they keep alive go with them, their memory pool with the last); how many."""
        dropped = len(self.graphs)
        self.graphs.clear()
        self.pool = None
        self._forgotten += dropped
        return dropped

    def run(self, key: Tuple[Any, ...], body: Callable[[], None], keep: List[Tensor], stats: StepModeStats) -> str:
        """Replay ``key``'s graph, or run ``body`` and capture it; how the step ran: ``replayed``/``static``."""
        stats.evicted += self._forgotten
        self._forgotten = 0
        entry = self.graphs.get(key)
        if entry is not None:
            self.graphs.move_to_end(key)
            entry[0].replay()
            return "replayed"
        self._warm_up(body)
        why = self.refused.get(key)
        if why is not None:
            if why not in stats.fallbacks:  # said once in every run that meets the key
                self._refuse(key, why, stats)
            return "static"
        start = time.perf_counter()
        try:
            graph, grown = self._capture_graph(body)
        except Exception as error:  # an operator that cannot be captured: this key runs static
            self._refuse(key, f"capture failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}", stats)
            return "static"
        while len(self.graphs) >= self.limit:
            self.graphs.popitem(last=False)  # its tensors go with it (those no other graph or stream holds)
            stats.evicted += 1
        self.graphs[key] = (graph, keep)
        stats.captured += 1
        stats.capture_seconds += time.perf_counter() - start
        stats.graph_bytes += grown
        return "static"

    def _warm_up(self, body: Callable[[], None]) -> None:
        """The step itself, on the side stream (also the warm-up a capture needs)."""
        if self._side is None:
            self._side = torch.cuda.Stream()
        side = self._side
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream().wait_stream(side)

    def _capture_graph(self, body: Callable[[], None]) -> Tuple[Any, int]:
        """``body`` captured into the shared pool, and the bytes the pool grew by; raises if it cannot be."""
        before = torch.cuda.memory_reserved()
        if self.pool is None or not self.graphs:
            # a pool that no live graph holds may not be captured into again: PyTorch keeps it (use count
            # 0) while a tensor made in it lives, and a capture into it fails an internal assert (on an H200
            # every capture of the demo model's benchmark rows failed so: "use_count > 0 INTERNAL ASSERT")
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                body()
        except Exception:
            try:
                torch.cuda.synchronize()
            except RuntimeError:
                pass
            raise
        return graph, max(0, torch.cuda.memory_reserved() - before)

    def _refuse(self, key: Tuple[Any, ...], why: str, stats: StepModeStats) -> None:
        self.refused[key] = why
        self.refused.move_to_end(key)
        while len(self.refused) > self.limit:
            self.refused.popitem(last=False)
        stats.fallback(why)
        if not stats.warned:  # one line per run
            stats.warned = True
            logger.warning("fairseq-stream: --step-mode graph: a step runs uncaptured (static shapes, eager "
                           "launches): %s", why)
