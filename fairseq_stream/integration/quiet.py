"""Silence third-party noise that is known to be harmless, before fairseq is imported.

A first fairseq-interactive run printed ~20 lines before its first useful one: hydra's
deprecation warnings about the API fairseq 0.12 uses, ``DEBUG:hydra`` lines, the whole config
dict, a tensorboardX hint from a speech task, a pin-memory warning on a CPU. Each is matched
here by its logger or category and its message, so anything else, and every line of ours,
still shows. ``FAIRSEQ_STREAM_VERBOSE=1`` keeps them all. This module imports no fairseq; it is
also where the package's yes/no environment variables are checked, as it is imported
(:func:`fairseq_stream.ops.env_flags.check_flags`).
"""
from __future__ import annotations

import logging
import os
import sys
import warnings

from fairseq_stream.errors import FairseqStreamError, format_error
from fairseq_stream.ops.env_flags import check_flags, env_flag

#: (category, message regex) of the warnings fairseq's use of hydra, torch.jit and pinned memory raise.
KNOWN_WARNINGS = (
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental"),
    (UserWarning, r"\s*The version_base parameter is not specified"),
    (UserWarning, r"In 'config'. Usage of deprecated keyword in package header"),
    (UserWarning, r"\s*'config' is validated against ConfigStore schema with the same name"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated"),
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found"),
    (DeprecationWarning, r"`torch\.jit\.script` is deprecated"),
)


class _DropKnownRecords(logging.Filter):
    """fairseq's config dump (a dict logged whole) and the tensorboardX hint of its speech tasks."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if record.name.startswith("fairseq_cli.") and not isinstance(msg, str):
            return False  # ``logger.info(cfg)``: hundreds of characters of every option
        if isinstance(msg, str) and msg.startswith("Please install tensorboardX"):
            return False
        return True


_FILTER = _DropKnownRecords()


def silence_known_noise() -> None:
    """Install the filters (idempotent); nothing when ``FAIRSEQ_STREAM_VERBOSE`` is set."""
    check_environment()
    if env_flag("FAIRSEQ_STREAM_VERBOSE"):
        return
    for category, message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name in ("fairseq.tasks.text_to_speech", "fairseq_cli.interactive", "fairseq_cli.generate"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    logging.getLogger("hydra").setLevel(logging.WARNING)  # its DEBUG lines while composing fairseq's config
    # matplotlib logs DEBUG lines as it is imported (ddgviz's picture): its data path, CONFIGDIR, ...
    logging.getLogger("matplotlib").setLevel(logging.WARNING)


def check_environment() -> None:
    """Refuse a yes/no variable set to neither (``FAIRSEQ_STREAM_NO_KERNEL=maybe``) as the package is imported.

    A command line gets the one error line and exit 1 here: no exception hook is installed yet (the
    package's import installs it), so raising would print a traceback. A Python session gets the exception.
    """
    try:
        check_flags()
    except FairseqStreamError as exc:
        if not _command_line():
            raise
        print(format_error(exc), file=sys.stderr)
        raise SystemExit(1) from None


def _command_line() -> bool:
    """This process is a console script of fairseq's or ours (``fairseq-generate``, ``fairseq-stream-shard``)
    or ``python -m`` one of their modules."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = getattr(spec, "name", None) or ""
    return (os.path.basename(sys.argv[0] if sys.argv else "").startswith("fairseq-")
            or module.startswith(("fairseq_cli.", "fairseq_stream.")))
