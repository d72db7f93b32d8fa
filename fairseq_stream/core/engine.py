"""The old path of :mod:`fairseq_stream.integration.engine`, for callers outside the package only.

``build_generator`` builds the generator fairseq calls around a registered strategy, so it moved
up to ``integration/``; nothing in the package imports this name. Resolved on first use (PEP 562),
so importing ``fairseq_stream.core`` never imports integration.
"""
from typing import Any


def __getattr__(name: str) -> Any:
    from fairseq_stream.integration import engine  # the one allowed back-import (docs/architecture.md)

    return getattr(engine, name)
