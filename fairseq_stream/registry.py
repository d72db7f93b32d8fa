"""The ``--search`` registry: every decoding strategy of the package under one name.

A strategy registers a *builder* that turns (task, models, fairseq's generation config, our
decoding options) into an object with fairseq's generator interface
(``generate(models, sample, **kwargs)``). ``beam`` is fairseq's own ``SequenceGenerator``,
the baseline every other strategy is measured against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

from fairseq_stream.errors import FairseqStreamError


@dataclass(frozen=True)
class Capabilities:
    """What a strategy supports; the conformance tests and option validation read these."""

    ensemble: bool = True
    streaming: bool = False
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


def get_search(name: str) -> SearchEntry:
    """The entry for ``name``; an unknown name is a one-line error listing the valid ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise FairseqStreamError(
            f"unknown --search {name!r}; valid names: {', '.join(search_names())}"
        ) from None
