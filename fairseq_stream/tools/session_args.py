"""The arguments of :class:`~fairseq_stream.tools.session.TranslationSession`, checked at the call.

On the command line argparse gives every option its type; a Python caller can pass anything, and a
wrong type used to surface deep inside fairseq or torch (``TypeError: '<' not supported``, numpy's
``UFuncTypeError``), exit the interpreter through argparse (``extra_args`` given as one string was
split into characters), or decode nonsense (``encode("a string")`` translated 8 one-letter
sentences, one a character). Each check here raises one
:class:`~fairseq_stream.errors.FairseqStreamError` line naming the argument, the type expected and
the value given.
"""
from __future__ import annotations

import dataclasses
import enum
import numbers
import os
import typing
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from fairseq_stream.errors import FairseqStreamError


def _given(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}..." if len(text) > 60 else text


def refuse(where: str, expected: str, value: Any) -> FairseqStreamError:
    return FairseqStreamError(f"TranslationSession.{where}: expected {expected}, got {_given(value)} "
                              f"({type(value).__name__})")


def check_path(where: str, value: Any, *, optional: bool = False) -> Optional[str]:
    """A file or folder name (``str`` or ``os.PathLike``), as a ``str``."""
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise refuse(where, "a path (str)" + (" or None" if optional else ""), value)
    return value


def check_extra_args(value: Any) -> Tuple[str, ...]:
    """``extra_args``: command-line words, e.g. ``["--source-lang", "es"]``; one string would be read
    character by character."""
    if isinstance(value, (str, bytes)):
        raise refuse("load(extra_args=...)", "a list of command-line words such as ['--source-lang', 'es'] "
                      "(a single string would be split into characters; use shlex.split)", value)
    if not isinstance(value, Sequence) or not all(isinstance(word, str) for word in value):
        raise refuse("load(extra_args=...)", "a list of str", value)
    return tuple(value)


def check_lines(lines: Any) -> Sequence[str]:
    """``encode(lines)``: a list of source sentences, each a ``str``."""
    if isinstance(lines, (str, bytes)):
        raise refuse("encode(lines)", "a list of source lines, not one string (pass [text], or "
                      "text.splitlines() for one sentence a line)", lines)
    if not isinstance(lines, typing.Iterable):
        raise refuse("encode(lines)", "a list of source lines (str)", lines)
    lines = list(lines)  # a generator is read once
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise refuse(f"encode(lines): line {i}", "a str", line)
    return lines


def check_dataset(dataset: Any) -> None:
    """``translate(dataset)``: what :meth:`encode` returns (a fairseq dataset)."""
    from fairseq.data import FairseqDataset

    if not isinstance(dataset, FairseqDataset):
        hint = " (pass session.encode(lines))" if dataset is None or isinstance(dataset, (str, list, tuple)) else ""
        raise refuse("translate(dataset)", f"the dataset session.encode(lines) returns{hint}", dataset)


def check_count(where: str, value: Any) -> Optional[int]:
    """``max_tokens``, ``batch_size``, ``required_batch_size_multiple``: None or an integer >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise refuse(where, "None or an integer >= 1", value)
    return int(value)


def check_options(where: str, values: Any, config_class: Optional[type]) -> Dict[str, Any]:
    """``gen``/``opts``: a dict of option names (``str``) to values of the option's type (from the fairseq
    dataclass the options come from, where it is known): ``{"beam": None}`` or ``{"stream_capacity": 2.5}``
    were taken and failed later, or decoded with ``int(2.5)``."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        example = "{'beam': 5}" if "gen=" in where else "{'stream_capacity': 16}"
        raise refuse(where, f"a dict of option names to values, e.g. {example}", values)
    hints = _field_types(config_class)
    for key, value in values.items():
        if not isinstance(key, str):
            raise refuse(f"{where}: option name {_given(key)}", "a str such as 'beam'", key)
        expected = hints.get(key)
        if expected is not None and not _fits(value, expected):
            flag = "--" + key.replace("_", "-")  # as the command line and the run's own checks name it
            raise FairseqStreamError(f"TranslationSession.{where}: {flag} must be {_describe(expected)}, got "
                                     f"{_given(value)} ({type(value).__name__})")
    return dict(values)


def _field_types(config_class: Optional[type]) -> Dict[str, Any]:
    if config_class is None or not dataclasses.is_dataclass(config_class):
        return {}
    try:
        hints = typing.get_type_hints(config_class)
    except Exception:  # a config with annotations that do not resolve: no type checks, the run's own stay
        return {}
    return {f.name: hints.get(f.name) for f in dataclasses.fields(config_class)}


def _fits(value: Any, expected: Any) -> bool:
    args = typing.get_args(expected)
    if typing.get_origin(expected) is typing.Union:
        return any(_fits(value, arg) for arg in args)
    if expected is type(None):
        return value is None
    if expected is bool:  # 0 and 1 as well (a flag from a config file)
        return isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1))
    if expected is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if expected is str or (isinstance(expected, type) and issubclass(expected, enum.Enum)):
        # Lenient: the API takes True/False for --prune-auto, paths as os.PathLike, and the run's own
        # checks name a bad word; a missing value or a container is what failed as a raw exception.
        return value is not None and not isinstance(value, (Mapping, list, tuple, set, bytes))
    return True  # Any, lists, ...: left to the run's own checks


def _describe(expected: Any) -> str:
    if typing.get_origin(expected) is typing.Union:
        parts = [_describe(arg) for arg in typing.get_args(expected)]
        return " or ".join(dict.fromkeys(parts))
    names = {type(None): "None", bool: "a bool", int: "an integer", float: "a number", str: "a str"}
    return names.get(expected, "a str")  # an enum of fairseq's is given by its name
