"""User-facing errors: one line that says what is wrong and what to do.

Exceptions of :class:`FairseqStreamError` (a ``ValueError``) carry a message meant for the
command line. When the package is loaded as a fairseq user dir, :func:`install_excepthook`
makes an uncaught one print as a single ``fairseq-stream: error: ...`` line (exit status 1)
instead of a traceback from deep inside fairseq. Failures to read a checkpoint inside
fairseq's own loader are reported the same way. ``FAIRSEQ_STREAM_TRACEBACK=1`` restores
the full traceback for debugging.
"""
from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Optional, Type

PREFIX = "fairseq-stream: error: "


class FairseqStreamError(ValueError):
    """A problem with the user's input, options or files; the message says how to fix it."""


def _frames(tb: Optional[TracebackType]):
    while tb is not None:
        yield tb.tb_frame.f_code
        tb = tb.tb_next


def _checkpoint_problem(exc: BaseException, tb: Optional[TracebackType]) -> Optional[str]:
    """A one-line explanation when ``exc`` was raised while fairseq read a checkpoint."""
    loaders = {"load_checkpoint_to_cpu", "load_model_ensemble_and_task"}
    if not any(code.co_name in loaders and "checkpoint_utils" in code.co_filename for code in _frames(tb)):
        return None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, (FileNotFoundError, IOError)) and "not found" in text.lower():
        return f"{text} (check --path; several models are separated by ':')"
    if "weights only load failed" in text.lower() or "unsupported global" in str(exc).lower():
        return (
            "the checkpoint holds Python objects outside the allow-list of safe checkpoint "
            "classes, so it was not unpickled. If you trust its source, re-run with "
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"
        )
    return (
        f"could not read the checkpoint ({type(exc).__name__}: {text}); "
        "it may be truncated or not a fairseq checkpoint (check --path)"
    )


def format_error(exc: BaseException, tb: Optional[TracebackType] = None) -> Optional[str]:
    """The single line to print for ``exc``, or ``None`` when it is not a user-facing error."""
    if isinstance(exc, FairseqStreamError):
        return PREFIX + str(exc)
    problem = _checkpoint_problem(exc, tb)
    return PREFIX + problem if problem else None


def _excepthook(exc_type: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
    line = None if os.environ.get("FAIRSEQ_STREAM_TRACEBACK") else format_error(exc, tb)
    if line is None:
        _previous_hook(exc_type, exc, tb)
    else:
        print(line, file=sys.stderr)


_previous_hook = sys.excepthook


def install_excepthook() -> None:
    """Print :class:`FairseqStreamError` and checkpoint failures as one line (idempotent)."""
    global _previous_hook
    if sys.excepthook is not _excepthook:
        _previous_hook = sys.excepthook
        sys.excepthook = _excepthook
