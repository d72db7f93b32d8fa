"""User-facing errors: one line that says what is wrong and what to do.

Exceptions of :class:`FairseqStreamError` (a ``ValueError``) carry a message meant for the
command line. Under fairseq's command-line tools and ours,
:func:`fairseq_stream.integration.compat.install_excepthook` makes an uncaught one print as the
single ``fairseq-stream: error: ...`` line of :func:`format_error` (exit status 1) instead of a
traceback from deep inside fairseq. Failures inside fairseq that are the
user's input are reported the same way, naming the real cause: a checkpoint that is missing
(``--path`` or ``--lm-path``), corrupt, an unsafe pickle, or does not fit the dictionaries;
fairseq_cli's own option assertions; hydra's refusal of a missing value. ``FAIRSEQ_STREAM_TRACEBACK=1`` restores
the full traceback for debugging.
"""
from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from types import TracebackType
from typing import Iterator, Optional, Tuple

PREFIX = "fairseq-stream: error: "


class FairseqStreamError(ValueError):
    """A problem with the user's input, options or files; the message says how to fix it."""


def _frames(tb: Optional[TracebackType]):
    while tb is not None:
        yield tb.tb_frame.f_code
        tb = tb.tb_next


def _missing_model_flag(text: str) -> str:
    """``--lm-path`` when the missing file is the language model given there, else ``--path``."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        value = arg.split("=", 1)[1] if arg.startswith("--lm-path=") else (
            argv[i + 1] if arg == "--lm-path" and i + 1 < len(argv) else None)
        if value and value in text:
            return "--lm-path"
    return "--path"


def unpickling_problem(exc: BaseException) -> Optional[str]:
    """torch's refusal of an unsafe pickle, told apart from a file that is simply corrupt."""
    full = str(exc)
    if "weights only load failed" not in full.lower():
        return None
    unsafe = re.search(r"unsupported GLOBAL ([\w.]+)", full, re.IGNORECASE)
    if unsafe:
        return (
            f"the checkpoint names the Python object {unsafe.group(1)}, which is not on the allow-list of "
            "safe checkpoint classes, so it was not unpickled (it could run code). Load it only if you "
            "trust its source: re-run with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"
        )
    return ("could not read the checkpoint: the file is corrupt or not a torch checkpoint (its pickle data "
            "cannot be read); copy or download it again")


def _dictionary_problem(exc: BaseException) -> Optional[str]:
    """A model whose embeddings do not fit the data directory's dictionaries."""
    full = str(exc)
    mismatch = re.search(r"size mismatch for ([\w.]+): copying a param with shape torch.Size\((\[[^\]]*\])\) "
                         r"from checkpoint, the shape in current model is torch.Size\((\[[^\]]*\])\)", full)
    if mismatch:
        name, ckpt, data = mismatch.groups()
        detail = f"{name} is {ckpt} in the checkpoint but {data} with these dictionaries"
    elif "requires a joined dictionary" in full:
        detail = "the model shares one vocabulary between source and target, but dict.SRC.txt and dict.TGT.txt differ"
    else:
        return None
    return (f"the dictionaries of the data directory do not match the checkpoint ({detail}); use the "
            "dict.SRC.txt and dict.TGT.txt the model was trained with (fairseq-preprocess --srcdict/--tgtdict)")


def _checkpoint_file(tb: Optional[TracebackType]) -> Optional[str]:
    """The file fairseq was reading when it failed (its loaders' own local names), so that the
    one line names which file of an ensemble ``--path a.pt:b.pt`` is broken."""
    found = None
    while tb is not None:
        code, local = tb.tb_frame.f_code, tb.tb_frame.f_locals
        if "checkpoint_utils" in code.co_filename:
            value = local.get("path") if code.co_name == "load_checkpoint_to_cpu" else local.get("filename")
            if isinstance(value, str):
                found = value  # the innermost wins
        tb = tb.tb_next
    return found


def checkpoint_problem(exc: BaseException, tb: Optional[TracebackType], flag: Optional[str] = None) -> Optional[str]:
    """A one-line explanation when ``exc`` was raised while fairseq read a checkpoint.

    ``flag`` names the option that gave the file (``--draft-path`` for a speculative draft); by
    default ``--path``, or ``--lm-path`` for a missing language model named there."""
    loaders = {"load_checkpoint_to_cpu", "load_model_ensemble_and_task"}
    if not any(code.co_name in loaders and "checkpoint_utils" in code.co_filename for code in _frames(tb)):
        return None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, (FileNotFoundError, IOError)) and "not found" in text.lower():
        flag = flag or _missing_model_flag(text)
        return f"{text} (check {flag}" + ("; several models are separated by ':')" if flag == "--path" else ")")
    path = _checkpoint_file(tb)
    where = f"{flag or '--path'}: {path}" if path else (flag or "--path")
    problem = unpickling_problem(exc)
    if problem:
        return f"{problem} ({where})"
    problem = _dictionary_problem(exc)
    if problem:
        return problem + (f" ({path})" if path else "")
    if path and os.path.isfile(path) and os.path.getsize(path) == 0:
        return f"the checkpoint {path} is empty (0 bytes); copy or download it again (check {where})"
    if "PytorchStreamReader" in text and "central directory" in text:  # torch's zip format, cut short
        return (f"the checkpoint {path + ' ' if path else ''}is truncated: its zip archive ends before its "
                f"table of contents (a copy or a save that stopped early); copy or download it again (check {where})")
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return (
        f"could not read the checkpoint {path + ' ' if path else ''}({detail}); "
        f"the file is corrupt, truncated or not a fairseq checkpoint (check {where})"
    )


def _fairseq_cli_assertion(exc: BaseException, tb: Optional[TracebackType]) -> Optional[str]:
    """fairseq_cli checks its options with ``assert cond, message``: that message is for the user."""
    codes = list(_frames(tb))
    if isinstance(exc, AssertionError) and str(exc).strip() and codes and "fairseq_cli" in codes[-1].co_filename:
        return str(exc).strip().splitlines()[0]
    return None


def _config_problem(exc: BaseException) -> Optional[str]:
    """hydra's refusal of a missing value, e.g. ``--tokenizer moses`` without ``--source-lang``."""
    missing = re.search(r"Error merging override (\w+)\.(\w+)=null", str(exc))
    if type(exc).__name__ != "ConfigCompositionException" or not missing:
        return None
    group, name = missing.groups()
    flag = "--source-lang and --target-lang" if name.endswith("_lang") else "--" + name.replace("_", "-")
    return f"--{group} needs {flag}, which fairseq does not infer for it; pass {flag}"


def format_error(exc: BaseException, tb: Optional[TracebackType] = None) -> Optional[str]:
    """The single line to print for ``exc``, or ``None`` when it is not a user-facing error."""
    if isinstance(exc, FairseqStreamError):
        return PREFIX + str(exc)
    problem = checkpoint_problem(exc, tb) or _fairseq_cli_assertion(exc, tb) or _config_problem(exc)
    return PREFIX + problem if problem else None


class DirectionMismatch(FairseqStreamError):
    """A checkpoint trained for another language pair than the run's (``saved`` and ``given``:
    (source, target)); ``path`` is the file, where known. A speculative draft rewords it."""

    def __init__(self, message: str, *, saved: Tuple[str, str], given: Tuple[str, str], where: str,
                 path: Optional[str]) -> None:
        super().__init__(message)
        self.saved, self.given, self.where, self.path = saved, given, where, path


class UsageError(FairseqStreamError):
    """A bad command-line argument, found before any work starts: reported by :func:`usage_errors`
    as one line with argparse's exit status 2."""


@contextmanager
def usage_errors() -> Iterator[None]:
    """Turn a :class:`UsageError` raised inside into the one ``fairseq-stream: error:`` line and exit 2.

    An uncaught exception always exits 1 (whatever ``sys.excepthook`` prints), so the command-line
    checks that argparse cannot express run inside this block instead."""
    try:
        yield
    except UsageError as exc:
        print(PREFIX + str(exc), file=sys.stderr)
        raise SystemExit(2) from None
