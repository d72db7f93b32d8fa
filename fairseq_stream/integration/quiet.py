"""Silence third-party noise that is known to be harmless, before fairseq is imported.

A first fairseq-interactive run printed ~20 lines before its first useful one: hydra's
deprecation warnings about the API fairseq 0.12 uses, ``DEBUG:hydra`` lines, the whole config
dict, a tensorboardX hint from a speech task, a pin-memory warning on a CPU. Each is matched
here by its logger or category and its message, so anything else, and every line of ours,
still shows. ``FAIRSEQ_STREAM_VERBOSE=1`` keeps them all. This module imports no fairseq.
"""
from __future__ import annotations

import logging
import os
import warnings

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
    if os.environ.get("FAIRSEQ_STREAM_VERBOSE"):
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
