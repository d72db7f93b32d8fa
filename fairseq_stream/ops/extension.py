"""Build and load the package's C++ CPU kernels (``ops/csrc/*.cpp``), once per machine.

Each kernel registers its operators with the dispatcher (``TORCH_LIBRARY(fairseq_stream, ...)``),
so a call is one aten-level operation, visible to :mod:`fairseq_stream.engine.profiling` like any
other (a GPU would launch it as one kernel). Sources are built with
``torch.utils.cpp_extension`` into ``~/.cache/fairseq_stream`` (``FAIRSEQ_STREAM_KERNEL_DIR``
elsewhere; ~40 s) under a name that changes with its source and every header under ``csrc/`` (what it
may include; another source's edit rebuilds only that one), the flags, torch's version, the Python ABI, the compiler and, for
``-march=native`` builds, the CPU's features (:func:`kernel_cache_key`): a home shared by
machines never runs a kernel built for another CPU's instruction set or another torch. A cached
library that fails to import is rebuilt. A build that fails (no compiler, no ninja) is logged
once and the caller uses its PyTorch path; ``FAIRSEQ_STREAM_NO_KERNEL=1`` forces that everywhere.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import subprocess
import sys
import sysconfig
from typing import Any, Dict, Iterator, Sequence, Tuple

import torch

logger = logging.getLogger("fairseq_stream")
_warned: set = set()
CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
_loaded: Dict[str, Any] = {}  # source file → module, or False when it cannot be built
failures: Dict[str, str] = {}  # source file → why it could not be built


def disabled() -> bool:
    """``FAIRSEQ_STREAM_NO_KERNEL`` is set: no kernel is built or loaded, every PyTorch path runs."""
    return bool(os.environ.get("FAIRSEQ_STREAM_NO_KERNEL"))


def log_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.info(message)


def cpu_features() -> str:
    """The machine and its CPU's feature flags: what ``-march=native`` compiles for."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):  # x86, ARM
                    flags = " ".join(sorted(value.split()))
                    break
    except OSError:  # not Linux: the processor's name is the best we have
        flags = platform.processor()
    return f"{platform.machine()} {flags}"


def compiler_version() -> str:
    """The first line of ``$CXX --version`` (torch's extension builder uses ``$CXX``, else ``c++``)."""
    cxx = os.environ.get("CXX", "c++")
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return cxx  # no compiler: a build fails anyway, a cached kernel still loads
    return out.splitlines()[0] if out else cxx


def python_abi() -> str:
    """The extension-module ABI of this Python (``.cpython-311-x86_64-linux-gnu.so``)."""
    return str(sysconfig.get_config_var("EXT_SUFFIX") or sysconfig.get_config_var("SOABI") or "")


def sources_digest(source: str) -> bytes:
    """The source and every header under ``csrc/`` (what it may include), by name and content: another
    source's edit does not rebuild this one."""
    digest = hashlib.sha256()
    names = [source] + sorted(n for n in os.listdir(CSRC) if n != source and n.endswith((".h", ".hpp")))
    for name in names:
        with open(os.path.join(CSRC, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.digest()


def kernel_cache_key(source: bytes, flags: Sequence[str], *, torch_version: str, compiler: str, cpu: str,
                     abi: str = "") -> str:
    """A name for the built kernel: it changes with anything that changes the binary or where it runs."""
    parts = [source, " ".join(flags).encode(), torch_version.encode(), compiler.encode(), abi.encode()]
    if "-march=native" in flags:  # the binary is only valid on CPUs with these features
        parts.append(cpu.encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def build_dir(source: str, flags: Sequence[str], cpu: str) -> Tuple[str, str]:
    """(module name, build folder) of ``csrc/<source>`` for these flags, compiler, torch and CPU."""
    key = kernel_cache_key(sources_digest(source), flags, torch_version=torch.__version__, compiler=compiler_version(),
                           cpu=cpu, abi=python_abi())
    name = f"fairseq_stream_{os.path.splitext(source)[0]}_{key}"
    cache = os.environ.get("FAIRSEQ_STREAM_KERNEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fairseq_stream")
    return name, os.path.join(cache, name)


def load(source: str, flags: Sequence[str], what: str) -> Any:
    """The built module of ``csrc/<source>`` (its operators registered), or None where it cannot be built.

    Its :func:`build_dir` is found on the first load only (it runs the compiler and reads the
    CPU's features).
    """
    if source in _loaded:
        return _loaded[source] or None
    _loaded[source] = False
    if disabled():
        return None
    try:
        _loaded[source] = _import_or_build(source, flags, *build_dir(source, flags, cpu_features()), what)
    except Exception as exc:  # no compiler, no ninja: the PyTorch path is exact too
        failures[source] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        log_once(f"fairseq-stream: CPU {what} kernel unavailable ({failures[source]}); using PyTorch ops")
    return _loaded[source] or None


def _import_or_build(source: str, flags: Sequence[str], name: str, folder: str, what: str) -> Any:
    """Import the built module directly when it exists (fast); build it once otherwise (~40 s).
    A cached library that does not import (truncated, built against another library) is rebuilt."""
    import importlib.machinery
    import importlib.util

    built = os.path.join(folder, f"{name}.so")
    if os.path.exists(built):
        try:
            spec = importlib.util.spec_from_file_location(name, built,
                                                          loader=importlib.machinery.ExtensionFileLoader(name, built))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)  # type: ignore[union-attr]
            return module
        except ImportError as exc:
            logger.warning(f"fairseq-stream: the cached CPU {what} kernel does not import ({exc}); rebuilding it")
            os.remove(built)
    from torch.utils.cpp_extension import load as build  # slow to import: only when building

    log_once(f"fairseq-stream: building the CPU {what} kernel (once per CPU and compiler, ~40 s)")
    interpreter_bin_on_path()
    os.makedirs(folder, exist_ok=True)
    with build_lock(folder):
        return build(name=name, sources=[os.path.join(CSRC, source)], verbose=False, extra_cflags=list(flags),
                     build_directory=folder)


def interpreter_bin_on_path() -> None:
    """Put the interpreter's own ``bin`` on ``PATH`` (last): torch's builder runs ``ninja`` from
    ``PATH``, and pip's ninja (which the install puts in the venv) lies beside the interpreter of
    a venv that was never activated; on a machine without a system ninja every build failed."""
    here = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if here and here not in path.split(os.pathsep):
        os.environ["PATH"] = path + os.pathsep + here if path else here


@contextlib.contextmanager
def build_lock(folder: str) -> Iterator[None]:
    """Hold the build folder exclusively, and clear a ``lock`` file that a killed build left behind.

    torch's builder marks a build with a ``lock`` file and waits, forever, while one exists: a
    build killed half-way (Ctrl-C, a test timeout) hung every later run. Every build of ours
    holds this ``flock`` first, which the kernel releases when its process dies, so a ``lock``
    file found while holding it belongs to no running build.
    """
    import fcntl

    with open(os.path.join(folder, "fairseq_stream.flock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            stale = os.path.join(folder, "lock")
            if os.path.exists(stale):
                logger.warning(f"fairseq-stream: removing {stale}, left by a kernel build that did not finish")
                os.remove(stale)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: The C++ step operators of :mod:`fairseq_stream.ops.backends`: operator → (source, flags, what).
#: Exact float arithmetic: no fast-math (it may assume no infinities), no fused multiply-adds.
EXACT_FLAGS: Tuple[str, ...] = ("-O2", "-ffp-contract=off")
OPERATORS: Dict[str, Tuple[str, Tuple[str, ...], str]] = {
    "beam_step": ("beam_step.cpp", EXACT_FLAGS, "beam-step"),
    "jacobi_step": ("jacobi_step.cpp", EXACT_FLAGS, "Jacobi-step"),
    "ib_step": ("ib_step.cpp", EXACT_FLAGS, "IB-step"),
}


def load_operator(name: str) -> Any:
    """The built module of a step operator (its operator registered), or None where it cannot be built."""
    source, flags, what = OPERATORS[name]
    return load(source, flags, what)


def unavailable() -> Dict[str, str]:
    """The kernels this process could not load, and why (their PyTorch paths ran): the closing statistics."""
    if disabled():
        return {"C++ kernels": "PyTorch ops (FAIRSEQ_STREAM_NO_KERNEL is set)"}
    return {f"kernel {source}": f"PyTorch ops ({why})" for source, why in failures.items()}


def operator_failure(name: str) -> str:
    """Why the operator's module could not be loaded (after :func:`load_operator` returned None)."""
    source = OPERATORS[name][0]
    if disabled():
        return "FAIRSEQ_STREAM_NO_KERNEL is set"
    return failures.get(source, "unknown reason")
