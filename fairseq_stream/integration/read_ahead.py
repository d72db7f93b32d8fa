"""fairseq's batch iterator, readable ahead by the generator.

fairseq-generate asks the generator for one batch's hypotheses at a time; Algorithm 1 of
Yang2020 streams over the whole input, so when a refill wants more sentences than the
current batch has left, the stream takes them from the batches that come next. A
:class:`ReadAhead` is fairseq's own epoch iterator (a ``CountingIterator``, so progress bars,
``len`` and ``n`` are unchanged) that can also :meth:`peek` at batches it has not handed out
yet; a peeked batch is later handed to fairseq's loop unchanged, and :meth:`ticket_of` tells
the generator which batch the loop is asking about.
"""
from __future__ import annotations

import weakref
from collections import deque
from typing import Any, Callable, Deque, Optional, Tuple

from fairseq.data.iterators import CountingIterator

from fairseq_stream.engine.input_stream import Batch  # noqa: F401  (a collated fairseq sample)


def same_batch(a: Batch, b: Batch) -> bool:
    """Whether ``b`` can be batch ``a``, perhaps moved to the GPU, from shapes alone.

    fairseq's loops hand the generator the batch they took from the iterator last, so which
    batch it is follows from the order; the shapes only guard against a caller's own loop
    feeding other samples. No tensor is compared: that would read the device at every batch.
    """
    if a is b:
        return True
    x, y = a.get("net_input", {}).get("src_tokens"), b.get("net_input", {}).get("src_tokens")
    if x is None or y is None or x.shape != y.shape:
        return False
    return ("id" not in a or "id" not in b) or a["id"].shape == b["id"].shape


class ReadAhead(CountingIterator):
    """A ``CountingIterator`` over fairseq batches with read-ahead; batch ``t`` (0-based) is ticket ``t``."""

    def __init__(self, itr: CountingIterator) -> None:
        super().__init__(itr, start=itr.n, total=itr.total)  # reads through ``itr`` itself
        self._ahead: Deque[Batch] = deque()  # read from ``itr``, not handed out yet
        self._handed = 0  # batches handed out = the ticket of the next one
        self._current: Optional[Tuple[int, Batch]] = None

    def __next__(self) -> Batch:
        if not self.has_next():
            raise StopIteration
        batch = self._ahead.popleft() if self._ahead else next(self._itr)
        self._current = (self._handed, batch)
        self._handed += 1
        self.n += 1
        return batch

    def peek(self, ticket: int) -> Optional[Batch]:
        """Batch ``ticket`` if it is not handed out yet (reading ahead as far as needed); None past the end."""
        if ticket < self._handed:
            return None
        while self._handed + len(self._ahead) <= ticket:
            if self.n + len(self._ahead) >= self.total:
                return None
            try:
                self._ahead.append(next(self._itr))
            except (StopIteration, IndexError):
                return None
        return self._ahead[ticket - self._handed]

    def ticket_of(self, sample: Batch) -> Optional[int]:
        """The ticket of the batch handed out last, if ``sample`` is it."""
        if self._current is None or not same_batch(self._current[1], sample):
            return None
        return self._current[0]


_READING_AHEAD: "weakref.WeakSet[Any]" = weakref.WeakSet()


def read_ahead(epoch_itr: Any, on_new: Callable[[ReadAhead], None]) -> None:
    """Make ``epoch_itr.next_epoch_itr`` return a :class:`ReadAhead`, handed to ``on_new`` first.

    fairseq-generate builds its iterator before the generator, so the task keeps the last
    :class:`ReadAhead` for the generator it builds next (see the task's ``build_generator``).
    """
    if epoch_itr in _READING_AHEAD:  # fairseq reuses a dataset's epoch iterator
        return
    _READING_AHEAD.add(epoch_itr)
    original = epoch_itr.next_epoch_itr

    def next_epoch_itr(*args: Any, **kwargs: Any) -> ReadAhead:
        itr = ReadAhead(original(*args, **kwargs))
        on_new(itr)
        return itr

    epoch_itr.next_epoch_itr = next_epoch_itr
