"""The one hook into fairseq: the short form ``fairseq-generate --user-dir fairseq_stream --search X``.

fairseq builds its task options from ``TASK_REGISTRY[--task]`` after importing the user dir,
and ``--task`` defaults to ``translation``. Without a hook the short form would need
``--task translation_stream``. So, when the package is imported, the registry entry
``translation`` (and its dataclass, and hydra's config node) point to
:class:`~fairseq_stream.tasks.translation_stream.TranslationStreamTask`, a subclass of
fairseq's ``TranslationTask`` whose behaviour with ``--search beam`` (the default) is the
stock one except that no batch loses sentences. Checkpoints saved under either name load
under either name.

fairseq parses task options only after a first parse that already answers ``--help``, so task
options never appear in ``fairseq-generate --help``. To show ``--search`` and the strategy
options there (and in ``fairseq-interactive --help``), :func:`show_options_in_help` wraps
``fairseq.options.add_generation_args`` so that it also adds our option group; the task's
``add_args`` then skips the options that are already on the parser. Nothing else in fairseq
is touched, except that fairseq-interactive exits non-zero after a run that skipped input
lines (:func:`exit_nonzero_after_skipped_lines`).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

import fairseq.options
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY
from hydra.core.config_store import ConfigStore

from fairseq_stream import input_checks
from fairseq_stream.options import StreamDecodingConfig
from fairseq_stream.tasks.translation_stream import TranslationStreamConfig, TranslationStreamTask


def route_translation_task() -> None:
    """Make ``--task translation`` resolve to ``TranslationStreamTask`` (idempotent)."""
    if TASK_REGISTRY.get("translation") is TranslationStreamTask:
        return
    TASK_REGISTRY["translation"] = TranslationStreamTask
    TASK_DATACLASS_REGISTRY["translation"] = TranslationStreamConfig
    node = TranslationStreamConfig()
    node._name = "translation"
    ConfigStore.instance().store(name="translation", group="task", node=node, provider="fairseq")


def add_dataclass_args(parser: argparse.ArgumentParser, config: object) -> None:
    """Add the fields of ``config`` to ``parser``, skipping options the parser already has."""
    scratch = argparse.ArgumentParser(add_help=False)
    gen_parser_from_dataclass(scratch, config)
    have_dests = {a.dest for a in parser._actions}
    for action in scratch._actions:
        if action.option_strings:
            if any(opt in parser._option_string_actions for opt in action.option_strings):
                continue
        elif action.dest in have_dests:
            continue
        parser._add_action(action)


def add_stream_decoding_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--search`` and the strategy options to ``parser`` unless it has them already."""
    if "--search" in parser._option_string_actions:
        return
    group = parser.add_argument_group("fairseq-stream decoding")
    gen_parser_from_dataclass(group, StreamDecodingConfig())


def show_options_in_help() -> None:
    """Make fairseq's generation parsers (generate, interactive) list our options (idempotent)."""
    original = fairseq.options.add_generation_args
    if getattr(original, "_fairseq_stream", False):
        return

    def add_generation_args(parser: argparse.ArgumentParser):
        group = original(parser)
        add_stream_decoding_args(parser)
        return group

    add_generation_args._fairseq_stream = True  # type: ignore[attr-defined]
    fairseq.options.add_generation_args = add_generation_args


def exit_nonzero_after_skipped_lines() -> None:
    """fairseq-interactive: exit with status 1, after translating the rest, when lines were skipped.

    A line it cannot translate is reported and skipped (:mod:`fairseq_stream.input_checks`)
    rather than ending the run; the exit status still tells a script that input was lost.
    ``cli_main`` looks ``main`` up when it calls it, after the user dir is imported.
    """
    module = sys.modules.get("fairseq_cli.interactive")
    original = getattr(module, "main", None)
    if original is None or getattr(original, "_fairseq_stream", False):
        return

    def main(cfg: Any) -> Any:
        result = original(cfg)
        if input_checks.skipped_lines:
            sys.exit(1)
        return result

    main._fairseq_stream = True  # type: ignore[attr-defined]
    module.main = main
