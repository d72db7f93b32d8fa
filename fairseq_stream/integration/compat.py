"""Every hook fairseq-stream puts into fairseq, torch and the interpreter, in one module.

Importing the package calls :func:`install`. For every process (library use included) it

* allow-lists the plain-data classes fairseq checkpoints hold, so that torch ≥ 2.6's
  ``torch.load(weights_only=True)`` reads them (https://github.com/facebookresearch/fairseq/issues/5610) while a pickle naming
  anything else is still refused (:func:`fairseq_stream.integration.checkpoints.register_safe_globals`);
* routes ``--task translation`` to :class:`~fairseq_stream.integration.task.TranslationStreamTask`
  (:func:`route_translation_task`): fairseq builds its task options from
  ``TASK_REGISTRY[--task]`` after importing the user dir and ``--task`` defaults to
  ``translation``, so without it the short form ``fairseq-generate --user-dir fairseq_stream
  --search X`` would need ``--task translation_stream``. The subclass behaves as stock with
  ``--search beam`` except that no batch loses sentences; checkpoints saved under either name
  load under either name;
* lists ``--search`` and the strategy options in ``fairseq-generate --help`` and
  ``fairseq-interactive --help`` (:func:`show_options_in_help`): fairseq parses task options
  only after a first parse that already answers ``--help``, so it wraps
  ``fairseq.options.add_generation_args``; the task's ``add_args`` then skips the options
  already on the parser (:func:`~fairseq_stream.integration.cli.add_dataclass_args`).

Only when the process runs one of fairseq's command-line tools (:func:`fairseq_cli_name`),
never when the package is imported as a library, it also

* makes an uncaught user error print as one ``fairseq-stream: error: ...`` line
  (:func:`install_excepthook`; the message comes from :func:`fairseq_stream.errors.format_error`);
* makes fairseq-generate check ``--results-path`` before anything else
  (:func:`check_results_path_first`): fairseq creates the folder and opens the file itself,
  with a traceback when it cannot;
* makes fairseq-interactive exit with status 1 after a run that skipped input lines
  (:func:`exit_nonzero_after_skipped_lines`);
* checks ``--stream-stats`` against the run's files before any work and writes it at the end of
  fairseq-generate's and fairseq-interactive's ``main`` (:func:`check_and_write_statistics`);
* makes fairseq-generate and fairseq-interactive end as a unix tool does when stdout fails
  (:func:`guard_output_and_workers`): a closed stdout is refused before any work, a reader that
  went away (``| head``) ends the run quietly with status 141, a full disk is one line; and
  makes fairseq-generate read its data in the main process unless ``--num-workers`` is given
  (a data-loader worker that fails under ``ulimit -f``/``-n`` would leave the run waiting forever);
* routes fairseq-interactive's ``buffered_read`` and ``make_batches`` through
  :mod:`fairseq_stream.integration.interactive_input` (:func:`read_interactive_input_ahead`), so that a
  generator of ours can take the next chunks' sentences into its stream; with read-ahead off
  (``--search beam``, ``--stream-per-batch``) they are fairseq's own.

Our own command-line tools (bench, demo, ddgviz, average_checkpoints) call
:func:`install_excepthook` from their ``main``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from types import TracebackType
from typing import Any, List, Optional, Type

import fairseq.options

from fairseq_stream.integration import input_checks
from fairseq_stream.integration.checkpoints import register_safe_globals
from fairseq_stream.errors import format_error
from fairseq_stream.ops.env_flags import env_flag
from fairseq_stream.integration.cli import add_dataclass_args, fairseq_cli_name

def install() -> None:
    """The hooks of the module docstring (idempotent); called when the package is imported."""
    register_safe_globals()
    route_translation_task()
    show_options_in_help()
    cli = fairseq_cli_name()
    if cli is not None:
        install_excepthook()
        if cli == "generate":
            check_results_path_first()
        if cli == "interactive":
            exit_nonzero_after_skipped_lines()
            read_interactive_input_ahead()
        if cli in ("generate", "interactive"):
            check_and_write_statistics(cli)
            guard_output_and_workers(cli)  # last: the outermost wrapper, around the statistics too


# ---- fairseq: the task registry and the generation parsers ----

def route_translation_task() -> None:
    """Make ``--task translation`` resolve to ``TranslationStreamTask`` (idempotent)."""
    from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY
    from hydra.core.config_store import ConfigStore

    from fairseq_stream.integration.task import TranslationStreamConfig, TranslationStreamTask

    if TASK_REGISTRY.get("translation") is TranslationStreamTask:
        return
    TASK_REGISTRY["translation"] = TranslationStreamTask
    TASK_DATACLASS_REGISTRY["translation"] = TranslationStreamConfig
    # hydra keeps its own copy of each task's config node: point it at ours too.
    node = TranslationStreamConfig()
    node._name = "translation"
    ConfigStore.instance().store(name="translation", group="task", node=node, provider="fairseq")


def add_stream_decoding_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--search`` and the strategy options to ``parser`` unless it has them already."""
    from fairseq_stream.engine.options import StreamDecodingConfig

    if "--search" in parser._option_string_actions:
        return
    add_dataclass_args(parser.add_argument_group("fairseq-stream decoding"), StreamDecodingConfig())


def show_options_in_help() -> None:
    """Make fairseq's generation parsers (generate, interactive) list our options (idempotent)."""
    original = fairseq.options.add_generation_args
    if getattr(original, "_fairseq_stream", False):
        return

    def add_generation_args(parser: argparse.ArgumentParser) -> Any:
        group = original(parser)
        add_stream_decoding_args(parser)
        return group

    add_generation_args._fairseq_stream = True  # type: ignore[attr-defined]
    fairseq.options.add_generation_args = add_generation_args


# ---- the command-line tools only ----

def results_path_problem(path: str) -> Optional[str]:
    """Why fairseq-generate could not write its output under ``--results-path path``, or None.

    Does what fairseq does next (create the folder) and writes a probe file there: permission
    bits say nothing for root or a read-only file system.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        return f"--results-path {path} is a file; it must be a folder (fairseq writes generate-SUBSET.txt into it)"
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        return f"--results-path {path}: cannot write there ({exc.strerror or exc}); choose another folder"
    return None


def check_results_path_first() -> None:
    """fairseq-generate: refuse an unwritable ``--results-path`` in one line, before any work (idempotent)."""
    from fairseq_stream.errors import FairseqStreamError

    module = sys.modules.get("fairseq_cli.generate")
    original = getattr(module, "main", None)
    if original is None or getattr(original, "_fairseq_stream", False):
        return

    def main(cfg: Any) -> Any:
        path = getattr(cfg, "results_path", None) if isinstance(cfg, argparse.Namespace) else cfg.common_eval.results_path
        problem = results_path_problem(path) if path else None
        if problem:
            raise FairseqStreamError(problem)
        return original(cfg)

    main._fairseq_stream = True  # type: ignore[attr-defined]
    module.main = main


def exit_nonzero_after_skipped_lines() -> None:
    """fairseq-interactive: exit with status 1, after translating the rest, when lines were skipped.

    A line it cannot translate is reported and skipped (:mod:`fairseq_stream.integration.input_checks`)
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


def check_and_write_statistics(cli: str) -> None:
    """fairseq-generate / fairseq-interactive: check ``--stream-stats`` against the run's files before any
    work, and write it at the end of ``main``, where a failure still makes the exit status 1 (an atexit
    callback's cannot); :mod:`fairseq_stream.integration.generator` does both (idempotent)."""
    from fairseq_stream.integration.generator import check_stats_path, report_pending

    for module in _main_modules(cli):
        original = module.main
        if getattr(original, "_fairseq_stream_stats", False):
            continue

        def main(cfg: Any, _original: Any = original) -> Any:
            check_stats_path(cfg, cli)
            try:
                result = _original(cfg)
            except SystemExit:  # fairseq-interactive's status 1 after skipped lines: the statistics still count
                report_pending()
                raise
            report_pending()
            return result

        main._fairseq_stream_stats = True  # type: ignore[attr-defined]
        if getattr(original, "_fairseq_stream", False):  # the hooks inside stay installed once
            main._fairseq_stream = True  # type: ignore[attr-defined]
        module.main = main


def _main_modules(cli: str) -> List[Any]:
    """The modules whose ``main`` runs fairseq's ``cli`` tool: ``fairseq_cli.<cli>``, and ``__main__``
    under ``python -m fairseq_cli.<cli>`` (``cli_main`` looks ``main`` up in its own module)."""
    main_module = sys.modules.get("__main__")
    found = [sys.modules.get(f"fairseq_cli.{cli}")]
    if getattr(getattr(main_module, "__spec__", None), "name", None) == f"fairseq_cli.{cli}":
        found.append(main_module)
    return [m for m in found if m is not None and getattr(m, "main", None) is not None]


def _read_data_in_process(cfg: Any) -> None:
    """fairseq-generate's ``--num-workers`` defaults to 1: a worker process whose batch cannot reach
    the main one (its shared-memory file over ``ulimit -f``, no descriptor left under ``ulimit -n``)
    only prints a traceback and stays alive, so the main process waits for that batch forever.
    Collating a batch costs far less than decoding it (our generators also read ahead), so
    the data is read in the main process, where such a failure is raised, unless the user asked
    for workers."""
    if _flag_given("--num-workers"):
        return
    if isinstance(cfg, argparse.Namespace):
        cfg.num_workers = 0
    else:
        cfg.dataset.num_workers = 0


def _flag_given(flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in sys.argv[1:])


def _prints_to_stdout(cli: str, cfg: Any) -> bool:
    """fairseq-interactive prints to stdout; fairseq-generate too, unless ``--results-path`` names a folder."""
    if cli != "generate":
        return True
    path = getattr(cfg, "results_path", None) if isinstance(cfg, argparse.Namespace) else cfg.common_eval.results_path
    return not path


def guard_output_and_workers(cli: str) -> None:
    """fairseq-generate / fairseq-interactive: refuse a closed stdout before any work, end the run as a
    unix tool does when stdout fails (:func:`~fairseq_stream.errors.stdout_faults`), and read
    fairseq-generate's data in the main process (:func:`_read_data_in_process`) (idempotent)."""
    from fairseq_stream.errors import FairseqStreamError, stdout_closed_problem, stdout_faults

    for module in _main_modules(cli):
        original = module.main
        if getattr(original, "_fairseq_stream_stdout", False):
            continue

        def main(cfg: Any, _original: Any = original) -> Any:
            problem = stdout_closed_problem() if _prints_to_stdout(cli, cfg) else None
            if problem:
                raise FairseqStreamError(problem)
            if cli == "generate":
                _read_data_in_process(cfg)
            with stdout_faults():
                return _original(cfg)

        for mark in ("_fairseq_stream", "_fairseq_stream_stats"):  # the other wrappers' idempotence marks
            setattr(main, mark, getattr(original, mark, False))
        main._fairseq_stream_stdout = True  # type: ignore[attr-defined]
        module.main = main


def _interactive_modules() -> List[Any]:
    """fairseq-interactive's module: ``fairseq_cli.interactive``, or ``__main__`` under ``python -m``."""
    return [m for m in _main_modules("interactive") if hasattr(m, "buffered_read")]


def read_interactive_input_ahead() -> None:
    """Route fairseq-interactive's input through :mod:`fairseq_stream.integration.interactive_input` (idempotent).

    ``main`` looks both functions up when it calls them, after the user dir is imported.
    """
    from fairseq_stream.integration import interactive_input

    for module in _interactive_modules():
        if getattr(module.buffered_read, "_fairseq_stream", False):
            continue
        original_read, original_batches = module.buffered_read, module.make_batches

        def buffered_read(input: str, buffer_size: int, _read: Any = original_read, _batches: Any = original_batches) -> Any:
            chunked = interactive_input.start(input, buffer_size, _batches)
            return original_read(input, buffer_size) if chunked is None else chunked.chunks()

        def make_batches(lines: List[str], *args: Any, _batches: Any = original_batches) -> Any:
            chunked = interactive_input.current()
            return _batches(lines, *args) if chunked is None else chunked.batches(lines, *args)

        buffered_read._fairseq_stream = True  # type: ignore[attr-defined]
        module.buffered_read, module.make_batches = buffered_read, make_batches


def _excepthook(exc_type: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
    line = None if env_flag("FAIRSEQ_STREAM_TRACEBACK", strict=False) else format_error(exc, tb)  # checked at import
    if line is None:
        _previous_hook(exc_type, exc, tb)
    else:
        print(line, file=sys.stderr)


_previous_hook = sys.excepthook


def install_excepthook() -> None:
    """Print user errors (:func:`~fairseq_stream.errors.format_error`) as one line (idempotent)."""
    global _previous_hook
    if sys.excepthook is not _excepthook:
        _previous_hook = sys.excepthook
        sys.excepthook = _excepthook
