"""Plain helpers of the fairseq glue: which fairseq command-line tool runs, and dataclass options on a parser.

They patch nothing, so every module of the package may import them; the hooks that change
fairseq's behaviour live in :mod:`fairseq_stream.integration.compat` alone.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Optional

from fairseq.dataclass.utils import gen_parser_from_dataclass

#: fairseq's console scripts, as ``fairseq_cli`` module names (``fairseq-eval-lm`` → ``eval_lm``).
FAIRSEQ_CLIS = frozenset({"eval_lm", "generate", "hydra_train", "interactive", "preprocess", "score", "train", "validate"})


def fairseq_cli_name(argv0: Optional[str] = None, main_spec: Optional[str] = None) -> Optional[str]:
    """The fairseq command-line tool this process runs (``"generate"``, ...), or None.

    A console script has ``sys.argv[0]`` ending in ``fairseq-generate``; ``python -m
    fairseq_cli.generate`` has ``__main__.__spec__.name == "fairseq_cli.generate"``. Which
    modules happen to be imported says nothing: a library may import ``fairseq_cli``.
    """
    if argv0 is None:
        argv0 = sys.argv[0] if sys.argv else ""
    if main_spec is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        main_spec = getattr(spec, "name", None) or ""
    base = os.path.basename(argv0)
    if base.startswith("fairseq-") and base[len("fairseq-"):].replace("-", "_") in FAIRSEQ_CLIS:
        return base[len("fairseq-"):].replace("-", "_")
    package, _, module = main_spec.partition(".")
    if package == "fairseq_cli" and module in FAIRSEQ_CLIS:
        return module
    return None


def add_dataclass_args(parser: "argparse.ArgumentParser | argparse._ArgumentGroup", config: object) -> None:
    """Add the fields of ``config`` to ``parser``, skipping options the parser already has. A field's
    ``argparse_type`` metadata (fairseq's generator knows none) checks its value as the line is parsed."""
    scratch = argparse.ArgumentParser(add_help=False)
    gen_parser_from_dataclass(scratch, config)
    set_arg_types(scratch, config)
    have_dests = {a.dest for a in parser._actions}
    for action in scratch._actions:
        if action.option_strings:
            if any(opt in parser._option_string_actions for opt in action.option_strings):
                continue
        elif action.dest in have_dests:
            continue
        parser._add_action(action)


def set_arg_types(parser: "argparse.ArgumentParser | argparse._ArgumentGroup", config: object) -> None:
    """Give the options of ``config``'s fields on ``parser`` their ``argparse_type`` metadata (a check of the
    value as the line is parsed, with argparse's one-line error; fairseq's generator knows no such key)."""
    checks = {f.name: f.metadata["argparse_type"] for f in dataclasses.fields(config)  # type: ignore[arg-type]
              if "argparse_type" in f.metadata}
    for action in parser._actions:
        if action.option_strings and action.dest in checks:
            action.type = checks[action.dest]
