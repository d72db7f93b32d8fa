"""fairseq-interactive's input, read ahead across ``--buffer-size`` chunks.

fairseq-interactive reads ``--buffer-size`` lines (a *chunk*), batches them, translates the
batches and prints the chunk before it reads the next one. Our generators keep sentences in
flight across fairseq's batches (:mod:`fairseq_stream.engine.input_stream`, Yang2020 Algorithm 1
over the whole input); across chunks they need the next chunk's batches before fairseq's loop
asks for them. :class:`ChunkedInput` reads the input on a thread. When a refill runs out of
queued sentences it batches the next chunk with fairseq's own ``make_batches``, but only if
every line of that chunk has arrived: it never waits for input, so a person typing at a
terminal gets each line translated as soon as it is entered, as before. The loop later
receives those same batches. Output order and format are fairseq's: a chunk is printed once
its sentences are done, while sentences of later chunks may still be in flight.

The hooks that route fairseq-interactive's ``buffered_read`` and ``make_batches`` here are
in :mod:`fairseq_stream.integration.compat`; the task turns read-ahead on (:func:`enable`) only
for a generator of ours that streams across batches.
"""
from __future__ import annotations

import io
import os
import queue
import stat
import sys
import threading
from collections import deque
from typing import IO, Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

from fairseq_stream.engine.input_stream import Batch
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.integration.read_ahead import same_batch

_END = object()


def _is_regular_file(path: str) -> bool:
    try:
        if path == "-":
            return stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)
        return os.path.isfile(path)
    except (OSError, ValueError, AttributeError):  # no real stdin (a library's replaced sys.stdin)
        return False


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_BOM = "\ufeff"


def open_input(path: str) -> IO[str]:
    """``--input`` (``-`` = stdin) as text: UTF-8 whatever the locale, and bytes that are not UTF-8
    kept as lone surrogates (``surrogateescape``), so that a bad line is reported by its line
    number and the others translated (:func:`~fairseq_stream.integration.input_checks.undecodable`)
    — fairseq's ``fileinput`` stopped the run at the first bad byte of a file. A missing, unreadable
    or closed input is one line, not a traceback."""
    if path == "-":
        return _stdin()
    if os.path.isdir(path):
        raise FairseqStreamError(f"--input {path} is a directory; give a text file with one sentence a line "
                                 "(or - for standard input)")
    try:
        return open(path, encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise FairseqStreamError(f"--input {path}: cannot read it ({exc.strerror}); give a readable text "
                                 "file (or - for standard input)") from None


def _stdin() -> IO[str]:
    closed = FairseqStreamError("fairseq-interactive: standard input is closed; pipe the sentences in or give "
                                "--input FILE")
    stdin = sys.stdin
    if stdin is None:  # `<&-`: Python starts without sys.stdin
        raise closed
    try:
        fd = stdin.fileno()
    except (AttributeError, io.UnsupportedOperation):  # a library's text stream (io.StringIO): read as it is
        return stdin
    except (OSError, ValueError):
        raise closed from None
    try:
        os.fstat(fd)
    except OSError:
        raise closed from None
    # A reader of its own on the descriptor (never closing it), not sys.stdin's: that one is
    # strict UTF-8 in a UTF-8 locale other than C.UTF-8, and one bad byte would end the run.
    return open(fd, encoding="utf-8", errors="surrogateescape", closefd=False)


class LineReader:
    """The lines of ``path`` (``-`` = stdin), stripped, as fairseq's ``buffered_read`` reads
    them, but from :func:`open_input` (a leading UTF-8 byte-order mark is dropped: it made line
    1's first word ``<unk>``). A regular file is read directly (it never makes a reader
    wait); a pipe or a terminal is read on a daemon thread, so that :meth:`ready` can tell
    which lines have arrived without waiting for more. The thread holds at most ``max_queued``
    lines it has read ahead (then it waits), so memory does not grow with the input."""

    def __init__(self, path: str, max_queued: int = 4096) -> None:
        self._lines: Deque[str] = deque()  # read, not handed out yet
        self._ended = False
        self._queue: "Optional[queue.Queue[Any]]" = None
        self._first = True  # the next line read is line 1 (its BOM is dropped)
        stream = open_input(path)  # before the thread: a bad --input is refused here, in one line
        self._file: Optional[IO[str]] = stream if _is_regular_file(path) else None
        if self._file is None:
            self._queue = queue.Queue(maxsize=max(1, max_queued))
            threading.Thread(target=self._run, args=(stream,), daemon=True, name="fairseq-stream-input").start()

    def _clean(self, line: str) -> str:
        if self._first:
            self._first = False
            line = line[1:] if line.startswith(_BOM) else line
        return line.strip()

    def _run(self, stream: IO[str]) -> None:
        assert self._queue is not None
        try:
            for line in stream:
                self._queue.put(self._clean(line))
            if stream is not sys.stdin:  # ours (a file, or stdin's descriptor, never closed by this)
                stream.close()
        except BaseException as exc:  # raised in the main thread, where fairseq would have raised it
            self._queue.put(_Failure(exc))
        self._queue.put(_END)

    def _pull(self, block: bool) -> bool:
        """Read one more line; False when none is there now (or the input ended)."""
        if self._ended:
            return False
        if self._file is not None:
            line = self._file.readline()
            if not line:
                self._ended = True
                self._file.close()
                return False
            self._lines.append(self._clean(line))
            return True
        assert self._queue is not None
        try:
            item = self._queue.get(block=block)
        except queue.Empty:
            return False
        if item is _END:
            self._ended = True
            return False
        if isinstance(item, _Failure):
            self._ended = True
            raise item.exc
        self._lines.append(item)
        return True

    def ready(self, n: int) -> bool:
        """Whether ``n`` lines (or all that remain, at least one) can be taken without waiting."""
        while len(self._lines) < n and self._pull(block=False):
            pass
        return len(self._lines) >= n or (self._ended and bool(self._lines))

    def take(self, n: int) -> List[str]:
        """Up to ``n`` lines, waiting for them (fewer only at the end of the input)."""
        while len(self._lines) < n and self._pull(block=True):
            pass
        return [self._lines.popleft() for _ in range(min(n, len(self._lines)))]


MakeBatches = Callable[..., Iterator[Any]]


class ChunkedInput:
    """fairseq-interactive's chunks and their batches, with a :class:`~fairseq_stream.integration.read_ahead.ReadAhead`'s
    ``peek``/``ticket_of`` over every chunk's batches: batch ``t`` of the run is ticket ``t``."""

    def __init__(self, lines: LineReader, buffer_size: int, make_batches: MakeBatches) -> None:
        self.lines = lines
        self.buffer_size = max(1, int(buffer_size))
        self._make_batches = make_batches  # fairseq's own
        self._args: Optional[Tuple[Any, ...]] = None  # (cfg, task, max_positions, encode_fn) of the loop
        # chunks batched early with their batches, not handed to the loop yet; then the one handed last
        self._read_ahead: Deque[Tuple[List[str], List[Any]]] = deque()
        self._handed_chunk: Optional[Tuple[List[str], List[Any]]] = None
        self._samples: Dict[int, Batch] = {}  # ticket → sample, until the generator is given it
        self._tickets = 0  # batches made so far
        self._handed = 0  # batches given to the generator so far
        self.chunks_read_ahead = 0

    # ---- fairseq's loop -----------------------------------------------------------------------
    def chunks(self) -> Iterator[List[str]]:
        """What fairseq's ``buffered_read`` yields: chunks of ``--buffer-size`` lines, in order."""
        while True:
            self._handed_chunk = self._read_ahead.popleft() if self._read_ahead else None
            chunk = self._handed_chunk[0] if self._handed_chunk else self.lines.take(self.buffer_size)
            if not chunk:
                return
            yield chunk

    def batches(self, lines: List[str], *args: Any) -> Iterator[Any]:
        """What fairseq's ``make_batches(lines, cfg, task, max_positions, encode_fn)`` yields."""
        self._args = args
        made, self._handed_chunk = self._handed_chunk, None
        return iter(made[1] if made is not None and made[0] is lines else self._batch(lines))

    def _batch(self, lines: List[str]) -> List[Any]:
        assert self._args is not None
        made = list(self._make_batches(lines, *self._args))
        for batch in made:
            self._samples[self._tickets] = {"net_input": {"src_tokens": batch.src_tokens,
                                                          "src_lengths": batch.src_lengths}}
            self._tickets += 1
        return made

    # ---- the generator's read-ahead -----------------------------------------------------------
    def peek(self, ticket: int) -> Optional[Batch]:
        """Batch ``ticket``, batching the next chunks if their lines are all here; None otherwise."""
        while ticket >= self._tickets and self._args is not None and self.lines.ready(self.buffer_size):
            chunk = self.lines.take(self.buffer_size)
            self._read_ahead.append((chunk, self._batch(chunk)))
            self.chunks_read_ahead += 1
        return self._samples.get(ticket) if ticket >= self._handed else None

    def ticket_of(self, sample: Batch) -> Optional[int]:
        """The ticket of ``sample``: the loop hands the batches over in the order they were made."""
        ticket = self._handed
        expected = self._samples.get(ticket)
        if expected is None or not same_batch(expected, sample):
            return None
        del self._samples[ticket]
        self._handed += 1
        return ticket


_enabled = False
_current: Optional[ChunkedInput] = None


def enable() -> None:
    """Read fairseq-interactive's input ahead (the task calls this for a generator that streams)."""
    global _enabled
    _enabled = True


def start(path: str, buffer_size: int, make_batches: MakeBatches) -> ChunkedInput:
    """The run's :class:`ChunkedInput`. Its lines are read by :class:`LineReader` even with
    read-ahead off (fairseq's own batching, :func:`current` is None then): fairseq's reader
    ended the run with a traceback at a byte that is not UTF-8, a directory or a closed stdin."""
    global _current
    # the thread may read a few chunks ahead, not the whole input
    chunked = ChunkedInput(LineReader(path, max_queued=max(4 * int(buffer_size), 4096)), buffer_size, make_batches)
    _current = chunked if _enabled else None
    return chunked


def current() -> Optional[ChunkedInput]:
    return _current
