"""User-facing errors: one line that says what is wrong and what to do.

Exceptions of :class:`FairseqStreamError` (a ``ValueError``) carry a message meant for the
command line. Under fairseq's command-line tools and ours,
:func:`fairseq_stream.integration.compat.install_excepthook` makes an uncaught one print as the
single ``fairseq-stream: error: ...`` line of :func:`format_error` (exit status 1) instead of a
traceback from deep inside fairseq. Failures inside fairseq that are the
user's input are reported the same way, naming the real cause: a checkpoint that is missing
(``--path`` or ``--lm-path``), corrupt, an unsafe pickle, or does not fit the dictionaries;
fairseq_cli's own option assertions; hydra's refusal of a missing value; an allocation that
failed (:func:`memory_problem`: the options that size the run, and the size it tried).
``FAIRSEQ_STREAM_TRACEBACK=1`` restores the full traceback for debugging.

A write to stdout that fails ends the run as a unix tool's would (:func:`stdout_faults`).
"""
from __future__ import annotations

import errno
import os
import re
import sys
from contextlib import contextmanager
from types import TracebackType
from typing import Iterator, Optional, Sequence, Tuple

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


#: The options that size what a run holds at once: sentences in flight, hypotheses per sentence, a batch.
SIZING_OPTIONS = ("--stream-capacity", "--beam", "--max-tokens", "--batch-size")


def _argv_value(flag: str, argv: Sequence[str]) -> Optional[str]:
    """The value ``flag`` has on the command line ``argv`` (``--flag V`` or ``--flag=V``), or None."""
    value = None
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
        elif arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def human_bytes(nbytes: float) -> str:
    """``nbytes`` in GiB, or in MiB below an eighth of a GiB."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**27 else f"{nbytes / 2**20:.1f} MiB"


def address_space_limit() -> Optional[int]:
    """This process's ``ulimit -v`` (RLIMIT_AS) in bytes, or None when there is none."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    if "could not create a primitive" in text:  # oneDNN's word for a failed allocation, among other causes
        return address_space_limit() is not None
    return (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM)
            or "can't allocate memory" in text or "CUDA out of memory" in text)


def memory_problem(exc: BaseException, tb: Optional[TracebackType] = None,
                   argv: Optional[Sequence[str]] = None) -> Optional[str]:
    """One line for an allocation that failed (torch's "DefaultCPUAllocator: can't allocate memory",
    CUDA's out of memory, Python's MemoryError): the size it tried, ``ulimit -v`` where one is set,
    and what to lower: the options that size a decode when it failed decoding (fairseq's
    ``inference_step`` on the stack, or no stack known), else the limit itself (loading the model
    or the data); None for any other exception."""
    if not _is_out_of_memory(exc):
        return None
    argv = sys.argv[1:] if argv is None else argv
    text = str(exc)
    tried = re.search(r"tried to allocate (\d+) bytes", text, re.IGNORECASE)
    cuda = re.search(r"tried to allocate ([\d.]+ [KMGT]?i?B)", text, re.IGNORECASE)
    size = f" of {human_bytes(int(tried.group(1)))}" if tried else (f" of {cuda.group(1)}" if cuda else "")
    where = "GPU" if "CUDA" in text else "host"
    limit = address_space_limit() if where == "host" else None
    limited = f"; this process may use at most {human_bytes(limit)} of address space (ulimit -v)" if limit else ""
    if tb is not None and not any(code.co_name == "inference_step" for code in _frames(tb)):
        return (f"out of {where} memory before decoding: an allocation{size} failed{limited}; loading the model "
                f"and the data needs more: {'raise ulimit -v' if limit else 'free memory'} or use a smaller model")
    named = [f"{flag} ({_argv_value(flag, argv)})" if _argv_value(flag, argv) else flag for flag in SIZING_OPTIONS]
    options = ", ".join(named[:-1]) + " or " + named[-1]
    return (f"out of {where} memory: an allocation{size} failed while decoding{limited}; lower {options}: "
            "they size the sentences and hypotheses held at once")


class OutOfMemory(FairseqStreamError):
    """An allocation failed while decoding (:func:`memory_problem` says which options to lower)."""


@contextmanager
def memory_errors() -> Iterator[None]:
    """Raise an allocation that fails inside as :class:`OutOfMemory`, one line naming the options to
    lower (for the Python session, which has no excepthook; the command lines get the same line
    from :func:`format_error`)."""
    try:
        yield
    except (RuntimeError, MemoryError, OSError) as exc:
        problem = memory_problem(exc, exc.__traceback__, argv=())
        if problem is None:
            raise
        raise OutOfMemory(problem) from None


def format_error(exc: BaseException, tb: Optional[TracebackType] = None) -> Optional[str]:
    """The single line to print for ``exc``, or ``None`` when it is not a user-facing error."""
    if isinstance(exc, FairseqStreamError):
        return PREFIX + str(exc)
    problem = (memory_problem(exc, tb)  # first: an allocation that fails reading a checkpoint is no corrupt file
               or checkpoint_problem(exc, tb) or _fairseq_cli_assertion(exc, tb) or _config_problem(exc))
    return PREFIX + problem if problem else None


# ---- stdout: the hypotheses' way out ----

#: What a failed write's errno means for the user, and what to do besides writing elsewhere.
_WRITE_CAUSES = {errno.ENOSPC: ("the disk is full", "free space"), errno.EDQUOT: ("the disk quota is exceeded", "free space"),
                 errno.EFBIG: ("the file size limit is reached (ulimit -f)", "raise ulimit -f")}


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null: the interpreter flushes stdout again at exit, and a second failure
    there prints "Exception ignored ... BrokenPipeError" (the recipe of Python's ``signal`` docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout already closed or not a file
        pass


def _failed_output(exc: OSError) -> Optional[str]:
    """What a failed write was writing: ``"stdout"``, fairseq-generate's results file, or None (another
    file, not ours to explain). fairseq_cli prints every hypothesis itself, to its ``output_file``
    (stdout, or the file under ``--results-path``); our own last flush of stdout is marked."""
    if getattr(exc, "fairseq_stream_stdout", False):
        return "stdout"
    frame, tb = None, exc.__traceback__
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
    if frame is None or "fairseq_cli" not in frame.f_code.co_filename:
        return None
    # fairseq-generate's _main writes to ``output_file``; its main closes the results file ``h``
    output = frame.f_locals.get("output_file", frame.f_locals.get("h", sys.stdout))
    return "stdout" if output is sys.stdout else f"--results-path's file {getattr(output, 'name', '')}".rstrip()


def _flush_stdout() -> None:
    """Flush stdout now, while a failure can still be reported (at interpreter exit it can only be ignored)."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except OSError as exc:
        exc.fairseq_stream_stdout = True  # type: ignore[attr-defined]
        raise


def stdout_closed_problem() -> Optional[str]:
    """Why a run that prints its hypotheses cannot start: stdout closed (``>&-``) makes Python's
    ``print`` write nowhere, so the run would exit 0 with every translation lost."""
    if sys.stdout is None:
        return ("stdout is closed (>&-), so the translations would be lost; redirect stdout to a file "
                "(> out.txt) or to /dev/null")
    return None


@contextmanager
def stdout_faults() -> Iterator[None]:
    """Run a command line's work; end it as a unix tool would when stdout fails.

    A reader that went away (``| head -1``) ends the run quietly with status 141 (128 + SIGPIPE),
    as a tool killed by SIGPIPE does; any other failed write of the translations (a full disk,
    ``ulimit -f``; to stdout or to ``--results-path``'s file) is one :class:`FairseqStreamError`
    line with its cause. Stdout is flushed before the block
    ends, so that a failure surfaces here rather than at interpreter exit.
    """
    try:
        try:
            yield
        except SystemExit:  # fairseq-interactive's status 1 after skipped lines: its output still counts
            _flush_stdout()
            raise
        _flush_stdout()
    except OSError as exc:
        output = _failed_output(exc)
        if output is None:
            raise
        if output == "stdout":
            _silence_stdout()
            if isinstance(exc, BrokenPipeError):  # the reader went away: not an error for a unix tool
                raise SystemExit(141) from None
        cause, fix = _WRITE_CAUSES.get(exc.errno or 0, (exc.strerror or str(exc), ""))
        elsewhere = "redirect stdout elsewhere" if output == "stdout" else "choose another --results-path"
        raise FairseqStreamError(f"could not write the translations to {output}: {cause}, so the output is "
                                 f"incomplete; {fix + ' or ' if fix else ''}{elsewhere}, then run again") from None


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
