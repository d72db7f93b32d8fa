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
* **stream buffers** — what one stream writes between steps (its encoder slots, each bucket's
  input and output buffers, the logits of every row bucket in one buffer) is a :class:`StreamBuffers`
  set the stream holds while it has sentences in flight and hands back when it drains
  (:class:`StreamBufferSets`), so that two streams stepping one model alternately never share one,
  and the next run reuses the last one's;
* **graphs** — :class:`StepGraphs` captures the step of each key once (buffers, bucket, block
  width) into one shared memory pool and replays it afterwards, at most ``limit`` graphs (least
  recently used evicted); a step it cannot capture runs the same static code eagerly, with one
  warning line a run saying why. Captures and evictions count in the statistics of the
  generator whose step made them (:class:`StepModeStats`).

What is kept on the model (the pool, the idle buffer sets, the graphs) is bounded by LRU rules, so
a long-running session decoding inputs of many sizes does not grow without bound.

The changes of the live set (refill, finished sentences, a beam changing its width, Jacobi
accepting a block) happen between steps as index operations on these buffers
(``RowCache.select``/``concat``/``accept``), outside the captured region.
"""
from __future__ import annotations

import logging
import math
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

import torch
from torch import Tensor

from fairseq_stream.ops.backends import device_choice

logger = logging.getLogger("fairseq_stream")

#: --step-mode values: eager = the dynamic step; static = fixed shapes, no capture (any device);
#: graph = the static step captured as CUDA graphs; native = the eager step as one C++ call (CPU,
#: model/native_step.py); auto = graph on CUDA, native on a CPU (eager where native does not run every model).
STEP_MODES = ("auto", "eager", "static", "graph", "native")

MIN_ROWS = 8  # the smallest row bucket: tiny groups share one
MIN_SLOTS = 16  # the smallest cache-length bucket (the eager cache's first allocation, too)


class StepTail(Protocol):
    """What a strategy runs inside a static step's region after the decoder, so that a CUDA graph
    replays it with the step: a function of the step's ``(N, V)`` scores (N = row bucket × block
    width; the model's logits, half precision read in float32) and of per-row inputs, whose
    operations follow the shapes only (no host read, no branch on a value). The output layer after
    the product is one (``search/output.TopTail``).
    """

    #: what fixes its operations besides the shapes: the step's buffers and graphs are keyed by it
    key: Tuple[Any, ...]
    #: the live rows' inputs, each ``(n, ...)`` with n = live rows × block width; the step copies them
    #: into buffers of N rows (the padding rows keep stale, finite values: they are never read back)
    inputs: Tuple[Tensor, ...]

    def outputs(self, vocab: int, dtype: torch.dtype) -> List[Tuple[Tuple[int, ...], torch.dtype]]:
        """Each returned tensor's shape past the row dimension and dtype, for scores of ``dtype``."""
        ...

    def __call__(self, scores: Tensor, *inputs: Tensor) -> Tuple[Tensor, ...]:
        ...

    #: optional (None: the inputs are given at every step): ``follow(*parents_inputs)`` → the inputs of rows that
    #: are the last step's rows reordered, from their parents' inputs at that step, in tensor operations only;
    #: the static step then gathers them inside its region (``inputs`` is not read)
    follow: "Optional[Callable[..., Tuple[Tensor, ...]]]"

    #: optional (None: the strategy runs its search step after the region): ``search(outputs)``, run in the region
    #: after this tail with its outputs over every row of the row bucket, in tensor operations on buffers its
    #: ``search.key`` names by address and ``search.tensors`` holds; ``search.fits(rows)`` says whether it can take
    #: a bucket of ``rows`` rows (``search/sentence_buckets.RegionSearch``); the step's ``LiveRows.searched`` says
    #: it ran
    search: Any


class LiveRows(tuple):
    """What a step's :class:`StepTail` returned for the live rows (views of the outputs over the row bucket,
    whose padding rows' values are stale); ``searched``: the tail's search step ran in the region over the
    whole bucket (``StepTail.search``, ``search/sentence_buckets.py``)."""

    searched: bool

    def __new__(cls, live: Tuple[Tensor, ...], searched: bool = False) -> "LiveRows":
        made = super().__new__(cls, live)
        made.searched = searched
        return made


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
    output_in_step: int = 0  # steps whose output layer (a StepTail) ran in the static step's region
    reorders_in_step: int = 0  # steps that did the last step's cache reorder inside their region (RowCache.select)
    inputs_in_step: int = 0  # of those, steps that gathered the rows' encoder slots (and tail inputs) there too
    search_in_step: int = 0  # steps whose search step (StepTail.search) ran in the region after the output layer
    fallbacks: Dict[str, int] = field(default_factory=dict)  # why a step left the static path → count
    warned: bool = field(default=False, repr=False)  # the run's one warning line about uncaptured steps

    def fallback(self, why: str) -> None:
        self.fallbacks[why] = self.fallbacks.get(why, 0) + 1

    def count(self, how: str) -> None:
        """One decoder step ran ``how``: ``replayed``, ``static``, ``native`` or ``eager``."""
        setattr(self, how, getattr(self, how) + 1)

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


class Lease:
    """A stacked cache buffer lent by a :class:`StaticCachePool` (a view at the start of one of its
    arenas); the arena is back in the pool when no cache holds the lease."""

    __slots__ = ("buffer", "__weakref__")

    def __init__(self, pool: "StaticCachePool", family: Tuple[Any, ...], arena: Tensor, ordinal: int,
                 shape: Tuple[int, ...]) -> None:
        self.buffer = arena[: math.prod(shape)].view(shape)
        weakref.finalize(self, pool.release, family, arena, ordinal)

    @property
    def rows(self) -> int:
        return self.buffer.size(0)


class StaticCachePool:
    """Stacked self-attention buffers ``(rows, 2·layers, H, slots, hd)`` of every bucket, lent as views
    at the start of a few arenas.

    A buffer is lent as a :class:`Lease`, a view at offset 0 of a free arena of its family (layers,
    heads, head size, dtype, device): a step graph binds its cache buffer by address, and every bucket
    a run visits (row rungs as sentences finish, slot rungs as they grow: dozens) then has the same
    few addresses, one per arena. Arenas are as many as leases were ever held at once (a beam holds
    two across a reorder: the old cache and the new), each as large as the largest bucket it was lent
    for; one too small for its next bucket is replaced by one that fits (its graphs go, ``on_evict``).
    Before, each bucket had buffers of its own, and the free ones were bounded by the bytes lent at
    once: a run dropped many of its own buckets' buffers (and their graphs) and its repeats replayed
    no more steps than the run (the demo, 16 sentences: 63-80%).

    Each arena has an ordinal (0, 1, … in the order made) and the free one of the lowest ordinal is
    lent first: which arena a step takes depends only on which are held, not on the order earlier
    runs gave them back, so a repeat of a run meets the keys of the run (lent last-freed-first, a
    beam's two arenas swapped roles after an odd stay: 15-26% of a repeat's steps captured anew on an
    H200). A recycled arena keeps stale values: every element of it has been written with finite
    numbers (new arenas are zeros), and attention masks what a row has not written. Leases are
    exclusive, so streams stepping alternately share the pool safely. At most ``limit`` arenas are
    kept free, and at most as many bytes as were ever lent at once (``peak_lent``, or ``min_bytes``),
    the highest ordinal of the least recently used family dropped first.
    """

    def __init__(self, *, limit: int = 64, min_bytes: int = 256 * 2 ** 20,
                 on_evict: "Callable[[Tensor], None] | None" = None) -> None:
        self.limit = limit
        self.min_bytes = min_bytes
        self.on_evict = on_evict  # told of every arena dropped (the step graphs bound to it go too)
        # per family, its free arenas and their ordinals, lowest first; the least recently used family first
        self.free: "OrderedDict[Tuple[Any, ...], List[Tuple[int, Tensor]]]" = OrderedDict()
        self.ordinals: Dict[Tuple[Any, ...], set] = {}  # the ordinals of each family's arenas, lent or free
        self.free_bytes = 0
        self.lent = 0  # bytes of the arenas lent now
        self.peak_lent = 0

    def acquire(self, rows: int, capacity: int, like: Tensor, layers: int, heads: int, head_dim: int) -> Lease:
        family = (layers, heads, head_dim, like.dtype, like.device)
        shape = (rows, 2 * layers, heads, capacity, head_dim)
        spare = self.free.get(family)
        if spare:
            ordinal, arena = spare.pop(0)
            if not spare:
                del self.free[family]
            self.free_bytes -= _nbytes(arena)
            if arena.numel() < math.prod(shape):  # too small: one that fits takes its ordinal
                if self.on_evict is not None:
                    self.on_evict(arena)
                arena = like.new_zeros(math.prod(shape))
        else:
            made = self.ordinals.setdefault(family, set())
            ordinal = next(n for n in range(len(made) + 1) if n not in made)
            made.add(ordinal)
            # the bucket's own size, not the largest the pool has seen: a k = 5 run after a k = 50 one
            # zeroed two 1.1 GB arenas it did not need (2.2 s each on a CPU)
            arena = like.new_zeros(math.prod(shape))
        self.lent += _nbytes(arena)
        self.peak_lent = max(self.peak_lent, self.lent)
        return Lease(self, family, arena, ordinal, shape)

    def release(self, family: Tuple[Any, ...], arena: Tensor, ordinal: int) -> None:
        self.lent -= _nbytes(arena)
        spare = self.free.setdefault(family, [])
        spare.append((ordinal, arena))
        spare.sort(key=lambda entry: entry[0])
        self.free.move_to_end(family)
        self.free_bytes += _nbytes(arena)
        budget = max(self.min_bytes, self.peak_lent)
        while self.free and (sum(len(v) for v in self.free.values()) > self.limit or self.free_bytes > budget):
            oldest, spare = next(iter(self.free.items()))
            gone, dropped = spare.pop()  # the highest ordinal: the one a run takes last
            self.ordinals[oldest].discard(gone)
            self.free_bytes -= _nbytes(dropped)
            if not spare:
                del self.free[oldest]
            if self.on_evict is not None:
                self.on_evict(dropped)


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


class StreamBuffers:
    """What one stream writes between its static steps: its encoder slots and each bucket's input
    and output buffers. A stream holds its set while it has sentences in flight (another stream
    stepping the same model meanwhile gets a set of its own), then hands it back to the model's
    :class:`StreamBufferSets`, where the next stream finds it: a session's later calls reuse the
    same tensors, so the graphs bound to them replay.
    """

    def __init__(self, *, memory_per_name: int = 2, io_limit: int = 64,
                 on_evict: "Callable[[Tensor], None] | None" = None) -> None:
        self.memory_per_name = memory_per_name  # encoder-slot buffers of this many shapes per name (LRU)
        self.io_limit = io_limit  # input/output buffers of this many buckets (LRU)
        self.on_evict = on_evict  # told of a shared buffer replaced by a larger one (its step graphs go)
        self.memory: "OrderedDict[Tuple[Any, ...], Tensor]" = OrderedDict()
        self.io: "OrderedDict[Tuple[Any, ...], Any]" = OrderedDict()
        self.shared: Dict[Tuple[Any, ...], Tensor] = {}  # one buffer per kind, for every row bucket

    @property
    def memory_limit(self) -> int:
        return self.memory_per_name * len({key[0] for key in self.memory})

    def memory_buffer(self, name: str, shape: Tuple[int, ...], like: Tensor, fill: Any) -> Tensor:
        """The encoder-slot buffer ``name`` of ``shape``, filled with ``fill``: the same tensor whenever
        this set's stream (or a later one) asks again, so step graphs bound to it replay."""
        key = (name, tuple(shape), like.dtype, like.device)
        buf = self.memory.get(key)
        if buf is None:
            buf = self.memory[key] = like.new_empty(shape)
            same_name = [k for k in self.memory if k[0] == name]
            for old in same_name[: max(0, len(same_name) - self.memory_per_name)]:
                del self.memory[old]  # a stream that grew its slots no longer reads the narrower ones
        self.memory.move_to_end(key)
        return buf.fill_(fill)

    def rows_of_shared(self, key: Tuple[Any, ...], rows: int, make: Callable[[int], Tensor]) -> Tensor:
        """The buffer ``key`` that every row bucket of this stream shares, with at least ``rows`` rows
        (``make(n)`` makes one of ``n``): a stream steps one bucket at a time and reads a step's
        output before its next step, so the buckets' outputs (the logits, ``(rows, b, V)``: the large
        buffers) need one buffer, not one each (a 100-sentence k = 50 run held 0.8 GB of them). It
        doubles when a bucket needs more rows; the one it replaces goes to ``on_evict``."""
        buf = self.shared.get(key)
        if buf is None or buf.size(0) < rows:
            old = buf
            buf = self.shared[key] = make(rows if old is None else max(rows, 2 * old.size(0)))
            if old is not None and self.on_evict is not None:
                self.on_evict(old)
        return buf

    def io_for(self, key: Tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """The input/output buffers of bucket ``key``, made by ``make()`` the first time."""
        io = self.io.get(key)
        if io is None:
            io = self.io[key] = make()
            while len(self.io) > self.io_limit:
                self.io.popitem(last=False)
        self.io.move_to_end(key)
        return io


class StreamBufferSets:
    """A model's :class:`StreamBuffers` not held by a stream, most recently handed back last (at most ``limit``)."""

    def __init__(self, *, limit: int = 2, on_evict: "Callable[[Tensor], None] | None" = None) -> None:
        self.limit = limit
        self.on_evict = on_evict  # each set's (StreamBuffers.on_evict)
        self.idle: List[StreamBuffers] = []

    def acquire(self) -> StreamBuffers:
        """A set no stream holds: the one handed back last (its tensors are those of the last run), or a new one."""
        return self.idle.pop() if self.idle else StreamBuffers(on_evict=self.on_evict)

    def release(self, buffers: StreamBuffers) -> None:
        self.idle.append(buffers)
        del self.idle[: max(0, len(self.idle) - self.limit)]


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
