"""What one run shares between the task (or the Python session) and its generator.

fairseq builds the batch iterator and the generator at different times: fairseq-generate the
iterator first, fairseq-interactive one iterator per ``--buffer-size`` chunk, after the
generator. A :class:`RunContext` is the one place both sides meet: the task records each new
:class:`~fairseq_stream.integration.read_ahead.ReadAhead` (or fairseq-interactive's read-ahead
over chunks is current), the generator asks it for the input to read ahead from, and the
progress bar lives here, advanced once, by the generator's input stream.
"""
from __future__ import annotations

from typing import Any, Optional

from fairseq_stream.integration import interactive_input
from fairseq_stream.integration.read_ahead import ReadAhead
from fairseq_stream.integration.runtime import SentenceProgress


class RunContext:
    """The input a generator reads ahead from, and the run's progress bar (both optional)."""

    def __init__(self, reader: Optional[ReadAhead] = None, progress: Optional[SentenceProgress] = None,
                 interactive: bool = False) -> None:
        self.reader = reader  # the iterator fairseq-generate's (or the session's) batches come from
        self.progress = progress
        self.interactive = interactive  # fairseq-interactive: the chunked read-ahead of interactive_input

    def attach(self, reader: ReadAhead) -> None:
        """A new iterator: the batches the generator is given from now on come from it."""
        self.reader = reader

    def source(self) -> Optional[Any]:
        """What refills read ahead from now (``peek``/``ticket_of``): None decodes each batch on its own."""
        chunked = interactive_input.current() if self.interactive else None
        return chunked if chunked is not None else self.reader
