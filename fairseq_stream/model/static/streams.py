"""What one stream writes between its static steps (:class:`StreamBuffers`), and the sets no stream holds."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, List, Tuple

from torch import Tensor


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

    def release_idle(self) -> int:
        """Drop the sets no stream holds (the graphs bound to their buffers go first: ``on_evict``); their bytes."""
        freed = 0
        for buffers in self.idle:
            tensors = list(buffers.memory.values()) + list(buffers.shared.values())
            tensors += [t for io in buffers.io.values() for t in _tensors_of(io)]
            for t in tensors:
                if self.on_evict is not None:
                    self.on_evict(t)
            storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
            freed += sum(storages.values())  # (a bucket's logits are a view of the shared buffer: counted once)
        self.idle.clear()
        return freed


def _tensors_of(io: Any) -> List[Tensor]:
    """The tensors a bucket's input/output buffers hold (a :class:`~fairseq_stream.model.static.inputs.StaticIO`)."""
    found: List[Tensor] = []
    for value in vars(io).values() if hasattr(io, "__dict__") else ():
        if isinstance(value, Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found += [t for t in value if isinstance(t, Tensor)]
    return found
