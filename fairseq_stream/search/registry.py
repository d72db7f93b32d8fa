"""The ``--search`` registry: every decoding strategy of the package under one name.

A strategy registers its class, its configuration dataclass and its :class:`Capabilities`;
:func:`fairseq_stream.integration.build.build_generator` turns them into an object with fairseq's
generator interface (``generate(models, sample, **kwargs)``). ``beam`` is fairseq's own
``SequenceGenerator``, the baseline every other strategy is measured against. This module
sits below the strategies and the engine: it imports neither.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Protocol, Sequence, TypeVar

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.interface import HOOKS


@dataclass(frozen=True)
class Capabilities:
    """What a strategy can run. The engine's one check of option combinations
    (:func:`fairseq_stream.engine.validation.check_combinations`) reads them to refuse the rest."""

    streaming: bool = False  # accepts --stream-epsilon
    default_epsilon: float = 0.0  # its refill threshold without --stream-epsilon; 0 = plain batches
    beam: bool = True  # accepts --beam > 1
    why_no_beam: str = ""  # the reason given when it does not
    nbest: bool = True  # accepts --nbest > 1
    ngram_blocking: bool = True  # accepts --no-repeat-ngram-size
    models: str = "standard"  # the checkpoints it decodes: "standard" or "ib" (IBDecoder family)
    block_steps: bool = False  # feeds several tokens per row in one step (transformer decoders only)
    selection: str = "min-length"  # which groups step together: "min-length" (VAR-STREAM) or "all"
    reads: FrozenSet[str] = frozenset()  # the strategy-specific options it reads (others are refused)
    # the optional hooks it has, each a protocol of search/interface.py (HOOKS: "admit", "drained", "region",
    # "rungs", "ahead"); the scheduler and the engine call a hook only where it is declared here
    hooks: FrozenSet[str] = frozenset()


#: A model's decoder class names its family (what ``Capabilities.models`` matches) with this class
#: attribute; ``"standard"`` where it has none. A capability the model declares, so that the
#: validation in core needs no import of a model class (``integration/ib_model.py`` sets ``"ib"``).
MODEL_FAMILY = "stream_model_family"


def model_family(model: Any) -> str:
    """``"ib"`` for an IBDecoder-family model, ``"standard"`` for every other."""
    family = getattr(type(getattr(model, "decoder", None)), MODEL_FAMILY, "standard")
    return family if isinstance(family, str) else "standard"


def is_ib_model(model: Any) -> bool:
    return model_family(model) == "ib"


class StrategyConfig(Protocol):
    """A strategy's configuration: built from the options, validated in ``__post_init__``."""

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any]) -> "StrategyConfig":
        ...

    @property
    def rows_per_sentence(self) -> int:
        ...


def check_beam_and_nbest(beam: int, nbest: int) -> None:
    """The invariant every strategy configuration with a beam shares: 1 <= --nbest <= --beam
    (``--beam >= 1`` alone is checked for every ``--search`` by engine/validation.py)."""
    if not 1 <= nbest <= beam:
        raise FairseqStreamError(f"--nbest must be between 1 and --beam ({beam}), got {nbest}")


def lenpen_of(gen_cfg: Any) -> float:
    """fairseq's length penalty exponent: ``--lenpen``, or 0 under ``--unnormalized``."""
    return 0.0 if gen_cfg.unnormalized else float(gen_cfg.lenpen)


@dataclass(frozen=True)
class BasicConfig:
    """The configuration of a strategy that reads only fairseq's own ``--beam``, ``--nbest``
    and ``--lenpen`` (the default of :func:`register_search`)."""

    beam: int = 1
    nbest: int = 1
    lenpen: float = 1.0

    def __post_init__(self) -> None:
        check_beam_and_nbest(self.beam, self.nbest)

    @property
    def rows_per_sentence(self) -> int:
        return self.beam

    @classmethod
    def from_options(cls, name: str, gen_cfg: Any, opts: Any, models: Sequence[Any] = ()) -> "BasicConfig":
        return cls(beam=int(gen_cfg.beam), nbest=int(gen_cfg.nbest), lenpen=lenpen_of(gen_cfg))


@dataclass(frozen=True)
class SearchEntry:
    name: str
    summary: str
    capabilities: Capabilities = field(default_factory=Capabilities)
    strategy: Optional[type] = None  # ``strategy.from_config(config, context)`` → a SearchStrategy
    config: Optional[type] = None  # a StrategyConfig
    build: Optional[Callable[..., Any]] = None  # only fairseq's own generator: built by fairseq


_REGISTRY: Dict[str, SearchEntry] = {}
T = TypeVar("T")


def register_search(name: str, *, summary: str, config: Optional[type] = None,
                    capabilities: Capabilities = Capabilities()) -> Callable[[T], T]:
    """Decorator: register a strategy class (with its ``config``) as ``--search name``.

    The class answers the scheduler's calls (:class:`~fairseq_stream.search.interface.SearchStrategy`)
    and has ``from_config(config, context)``; the engine does the rest (scorer, scheduler,
    generator, refusals). ``config`` defaults to :class:`BasicConfig`. A decorated *function*
    builds a whole fairseq generator itself (``build(task, models, gen_cfg, opts,
    **fairseq_kwargs)``): fairseq's own beam search.
    """

    def wrap(target: T) -> T:
        if name in _REGISTRY:
            raise ValueError(f"search strategy {name!r} is already registered")
        if isinstance(target, type):
            check_hooks(name, target, capabilities.hooks)
            _REGISTRY[name] = SearchEntry(name, summary, capabilities, strategy=target, config=config or BasicConfig)
        else:
            _REGISTRY[name] = SearchEntry(name, summary, capabilities, build=target)  # type: ignore[arg-type]
        return target

    return wrap


def check_hooks(name: str, strategy: type, hooks: FrozenSet[str]) -> None:
    """Each hook ``hooks`` declares is a known one and ``strategy`` has its methods (``ValueError`` otherwise:
    a programming error of the strategy's author, said when it registers, not in the middle of a run)."""
    for hook in sorted(hooks):
        if hook not in HOOKS:
            raise ValueError(f"--search {name}: unknown hook {hook!r} in Capabilities.hooks; known: {', '.join(HOOKS)}")
        missing = [m for m in HOOKS[hook] if not callable(getattr(strategy, m, None))]
        if missing:
            raise ValueError(f"--search {name} declares the hook {hook!r} but {strategy.__name__} has no "
                             f"{', '.join(missing)}")


def unregister_search(name: str) -> None:
    """Remove ``--search name`` (tests that register a toy strategy clean up with it)."""
    _REGISTRY.pop(name, None)


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
