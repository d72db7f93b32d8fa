"""The ``--search`` registry: every decoding strategy of the package under one name.

A strategy registers a *builder* that turns (task, models, fairseq's generation config, our
decoding options) into an object with fairseq's generator interface
(``generate(models, sample, **kwargs)``). ``beam`` is fairseq's own ``SequenceGenerator``,
the baseline every other strategy is measured against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from fairseq_stream.errors import FairseqStreamError


@dataclass(frozen=True)
class Capabilities:
    """What a strategy declares it supports, for the conformance tests to check.

    Of the options, only ``--stream-epsilon`` reads them (its default, check and help:
    :func:`stream_epsilon`, :func:`epsilon_defaults_help`); each builder refuses the other
    options its strategy cannot run.
    """

    ensemble: bool = True
    streaming: bool = False  # accepts --stream-epsilon
    default_epsilon: float = 0.0  # its refill threshold without --stream-epsilon; 0 = plain batches
    nbest: bool = True
    beam: bool = True  # accepts --beam > 1
    non_transformer: bool = True
    prefix_tokens: bool = True


Builder = Callable[..., Any]


@dataclass(frozen=True)
class SearchEntry:
    name: str
    summary: str
    build: Builder
    capabilities: Capabilities = field(default_factory=Capabilities)


_REGISTRY: Dict[str, SearchEntry] = {}


def register_search(name: str, *, summary: str, capabilities: Capabilities = Capabilities()) -> Callable[[Builder], Builder]:
    """Decorator: register ``build(task, models, gen_cfg, opts, **fairseq_kwargs)`` as ``--search name``."""

    def wrap(build: Builder) -> Builder:
        if name in _REGISTRY:
            raise ValueError(f"search strategy {name!r} is already registered")
        _REGISTRY[name] = SearchEntry(name, summary, build, capabilities)
        return build

    return wrap


def search_names() -> List[str]:
    return sorted(_REGISTRY)


def stream_epsilon(name: str, value: Optional[float]) -> float:
    """The refill threshold ε of ``--search name`` given ``--stream-epsilon value`` (``None``: unset)."""
    caps = get_search(name).capabilities
    if value is None:
        return caps.default_epsilon
    if not caps.streaming:
        streaming = ", ".join(n for n in search_names() if _REGISTRY[n].capabilities.streaming)
        raise FairseqStreamError(
            f"--search {name} decodes plain batches (ε = 0); --stream-epsilon needs a streaming strategy ({streaming})"
        )
    return float(value)


def epsilon_defaults_help() -> str:
    """The per-strategy defaults of ``--stream-epsilon``, for its ``--help`` (from the registry)."""
    by_value: Dict[float, List[str]] = {}
    for name in search_names():
        caps = _REGISTRY[name].capabilities
        if caps.streaming:
            by_value.setdefault(caps.default_epsilon, []).append(name)
    parts = [f"{_fraction(v)} for {', '.join(names)}" for v, names in sorted(by_value.items(), reverse=True)]
    return "; ".join(parts)


def _fraction(value: float) -> str:
    if value == 0:
        return "0 (plain batches)"
    inverse = 1 / value
    return f"1/{round(inverse)}" if abs(inverse - round(inverse)) < 1e-9 else f"{value:g}"


def get_search(name: str) -> SearchEntry:
    """The entry for ``name``; an unknown name is a one-line error listing the valid ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise FairseqStreamError(
            f"unknown --search {name!r}; valid names: {', '.join(search_names())}"
        ) from None
