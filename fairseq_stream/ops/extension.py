"""Build and load the package's C++ CPU kernels (``ops/csrc/*.cpp``), once per machine.

Each kernel registers its operators with the dispatcher (``TORCH_LIBRARY(fairseq_stream, ...)``),
so a call is one aten-level operation, visible to :mod:`fairseq_stream.engine.profiling` like any
other (a GPU would launch it as one kernel). Sources are built with
``torch.utils.cpp_extension`` into ``~/.cache/fairseq_stream`` (``FAIRSEQ_STREAM_KERNEL_DIR``
elsewhere; ~40 s) under a name that changes with its source and every header under ``csrc/`` (what it
may include; another source's edit rebuilds only that one), the flags, torch's version, the Python ABI, the compiler and, for
``-march=native`` builds, the CPU's features (:func:`kernel_cache_key`): a home shared by
machines never runs a kernel built for another CPU's instruction set or another torch.

A cached library is checked before it is loaded: loading a damaged one is not an error Python can
catch (a file cut short is a "Bus error" that kills the process; another kernel's library under
this one's name aborts it, its operators registered twice). Each build writes a manifest beside
its library, atomically, after it succeeds (:func:`write_manifest`: size, sha256, kernel, module,
source digest, flags, torch, compiler, ABI); a library whose bytes or facts differ from its
manifest is never loaded but rebuilt, or, where its folder cannot be written, skipped and named in
the closing statistics (:data:`failures`). A library without a manifest (built before manifests)
is loaded first in a child process, which may die in its place, and adopted if it imports there.
A build that fails (no compiler, no ninja) is logged once and the caller uses its PyTorch path;
``FAIRSEQ_STREAM_NO_KERNEL=1`` forces that everywhere.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import sysconfig
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import torch

from fairseq_stream.ops.env_flags import env_flag, kernel_isa

logger = logging.getLogger("fairseq_stream")
_warned: set = set()
CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
_loaded: Dict[str, Any] = {}  # source file → module, or False when it cannot be built
failures: Dict[str, str] = {}  # source file → why it could not be built


def disabled() -> bool:
    """``FAIRSEQ_STREAM_NO_KERNEL`` is set: no kernel is built or loaded, every PyTorch path runs."""
    return env_flag("FAIRSEQ_STREAM_NO_KERNEL")


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


#: ``FAIRSEQ_STREAM_KERNEL_ISA`` (:func:`~fairseq_stream.ops.env_flags.kernel_isa`) → what a ``-march=native`` build
#: adds: ``avx2`` keeps AVX2, FMA and F16C and drops every AVX-512 extension and AVX-VNNI, so an AVX-512 machine runs
#: the code an AVX2-only CPU would (``user_bench --isa avx2`` times it; the products give the same bits either way,
#: the attention's and output layer's vector sums may differ in their last bits: docs/usage.md).
ISA_FLAGS: Dict[str, Tuple[str, ...]] = {"native": (), "avx2": ("-mno-avx512f", "-mno-avxvnni")}


def isa_flags(flags: Sequence[str]) -> Tuple[str, ...]:
    """``flags`` for the chosen instruction set: a ``-march=native`` build gets its limits after that flag (so the
    cache key, which holds the flags, keeps the builds apart); other builds are unchanged."""
    flags = tuple(flags)
    if "-march=native" not in flags:
        return flags
    return flags + tuple(f for f in ISA_FLAGS[kernel_isa()] if f not in flags)  # idempotent


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


def build_facts(source: str, flags: Sequence[str], cpu: str) -> Dict[str, Any]:
    """What the binary of ``csrc/<source>`` depends on: its name hashes them, its manifest holds them (the flags
    with :func:`kernel_isa`'s limits)."""
    flags = isa_flags(flags)
    return {"kernel": source, "source_sha256": sources_digest(source).hex(), "flags": list(flags),
            "torch": torch.__version__, "compiler": compiler_version(), "python_abi": python_abi(),
            "cpu": cpu if "-march=native" in flags else ""}


def build_dir(source: str, flags: Sequence[str], cpu: str) -> Tuple[str, str]:
    """(module name, build folder) of ``csrc/<source>`` for these flags (and :func:`kernel_isa`), compiler, torch and
    CPU."""
    return _place(build_facts(source, flags, cpu))


def _place(facts: Dict[str, Any]) -> Tuple[str, str]:
    key = kernel_cache_key(bytes.fromhex(facts["source_sha256"]), facts["flags"], torch_version=facts["torch"],
                           compiler=facts["compiler"], cpu=facts["cpu"], abi=facts["python_abi"])
    name = f"fairseq_stream_{os.path.splitext(facts['kernel'])[0]}_{key}"
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
        facts = build_facts(source, flags, cpu_features())
        _loaded[source] = _import_or_build(source, facts["flags"], *_place(facts), what, facts=facts)
    except Exception as exc:  # no compiler, no ninja: the PyTorch path is exact too
        failures[source] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        log_once(f"fairseq-stream: CPU {what} kernel unavailable ({failures[source]}); using PyTorch ops")
    return _loaded[source] or None


class DamagedKernelCache(RuntimeError):
    """A cached kernel library that must not be loaded and cannot be rebuilt here: its PyTorch path runs."""


#: Why a cached library is not simply loaded: not built yet; built before manifests (checked in a child).
ABSENT, NO_MANIFEST = "is not built", "has no manifest"
MANIFEST_FORMAT = 1
#: Loads a library alone, in a process that may die in our place (:func:`imports_alone`).
_IMPORT_ALONE = ("import sys, torch, importlib.machinery as m, importlib.util as u\n"
                 "name, path = sys.argv[1:]\n"
                 "loader = m.ExtensionFileLoader(name, path)\n"
                 "loader.exec_module(u.module_from_spec(u.spec_from_file_location(name, path, loader=loader)))\n")


def _import_or_build(source: str, flags: Sequence[str], name: str, folder: str, what: str, *,
                     facts: Optional[Dict[str, Any]] = None) -> Any:
    """Import the cached module when its manifest vouches for its bytes (fast); build it once otherwise (~40 s).

    A library that is cut short, another kernel's or built for another torch is never loaded
    (module docstring): it is rebuilt, or :class:`DamagedKernelCache` where its folder cannot be written.
    """
    expected = dict(facts or build_facts(source, flags, cpu_features()), module=name)
    flags = expected["flags"]  # what the manifest records: the instruction set's limits included (build_facts)
    built = os.path.join(folder, f"{name}.so")
    why = cache_problem(built, expected)
    if why == NO_MANIFEST:
        why = adopt(built, expected)
    if why is None:
        return _import_checked(built, name)
    try:
        return _build(source, flags, name, folder, what, expected, why)
    except OSError as exc:
        if why == ABSENT:
            raise  # an unwritable folder, as before manifests: the caller names it
        raise DamagedKernelCache(f"the cached library {built} {why}, and cannot be rebuilt there "
                                 f"({exc.strerror or exc}); remove it or make its folder writable") from exc


def _build(source: str, flags: Sequence[str], name: str, folder: str, what: str, expected: Dict[str, Any],
           why: str) -> Any:
    """Build the module under the folder's lock, unless another process built it while we waited; a damaged
    library (``why``) is removed first (its object files are reused; if the build then fails, it starts from
    scratch)."""
    from torch.utils.cpp_extension import load as build  # slow to import: only when building

    built = os.path.join(folder, f"{name}.so")
    interpreter_bin_on_path()
    os.makedirs(folder, exist_ok=True)
    with build_lock(folder):
        now = cache_problem(built, expected)
        if now is None:
            return _import_checked(built, name)
        why = why if now == NO_MANIFEST else now  # the child's verdict on one without a manifest
        if now != ABSENT:
            logger.warning(f"fairseq-stream: the cached CPU {what} kernel {built} {why}; rebuilding it")
            discard(built)
        log_once(f"fairseq-stream: building the CPU {what} kernel (once per CPU and compiler, ~40 s)")
        args = dict(name=name, sources=[os.path.join(CSRC, source)], verbose=False, extra_cflags=list(flags),
                    build_directory=folder)
        try:
            module = build(**args)
        except Exception:
            if now == ABSENT:
                raise
            clear_build(folder)  # the damage may reach the object files the link reused
            module = build(**args)
        try:
            write_manifest(built, expected)
        except OSError as exc:  # loaded all the same: the next run checks it in a child and writes it
            logger.warning(f"fairseq-stream: cannot write the manifest of {built} ({exc})")
        return module


def _import_checked(built: str, name: str) -> Any:
    """Import a library whose bytes were checked. One that still does not import (a library it links to
    changed) loses its manifest, so that the next run checks it afresh, and is skipped in this one: a
    rebuild at the same path would not load in this process (its first load is kept)."""
    import importlib.machinery
    import importlib.util

    try:
        loader = importlib.machinery.ExtensionFileLoader(name, built)
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, built, loader=loader))
        loader.exec_module(module)
        return module
    except ImportError as exc:
        with contextlib.suppress(OSError):
            os.remove(manifest_path(built))
        raise DamagedKernelCache(f"the cached library {built} does not import ({exc}); "
                                 "the next run checks it again and rebuilds it") from exc


def manifest_path(built: str) -> str:
    """The manifest beside a built library: what it was built from and the bytes it holds."""
    return built + ".manifest.json"


def file_digest(path: str) -> Tuple[int, str]:
    """(size, sha256) of a file."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def write_manifest(built: str, expected: Dict[str, Any], digest: Optional[Tuple[int, str]] = None) -> None:
    """Write the manifest of a library that was just built (or checked): a temporary file, synced, renamed,
    so that a manifest is whole or absent."""
    size, sha256 = digest or file_digest(built)
    record = {"format": MANIFEST_FORMAT, **expected, "file": os.path.basename(built), "size": size, "sha256": sha256}
    path = manifest_path(built)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.remove(temporary)


def cache_problem(built: str, expected: Dict[str, Any]) -> Optional[str]:
    """Why the library ``built`` must not be loaded (None: its manifest names this build and its bytes)."""
    if not os.path.exists(built):
        return ABSENT
    try:
        with open(manifest_path(built), encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return NO_MANIFEST
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        return "has a manifest that cannot be read"
    for key, value in expected.items():
        if manifest.get(key) != value:
            return f"is not this build (its manifest's {key} differs)"
    size, sha256 = file_digest(built)
    if size != manifest.get("size"):
        return f"is {size} bytes, not the {manifest.get('size')} it was built with"
    if sha256 != manifest.get("sha256"):
        return "does not hold the bytes it was built with (its sha256 differs)"
    return None


def adopt(built: str, expected: Dict[str, Any]) -> Optional[str]:
    """Check a library built before manifests by loading it in a child process (:func:`imports_alone`);
    write its manifest when it imports there and its bytes did not change meanwhile. Why not, or None."""
    before = file_digest(built)
    why = imports_alone(built, expected["module"])
    if why is None and file_digest(built) != before:
        why = "changed while it was checked"
    if why is None:
        try:
            write_manifest(built, expected, before)
        except OSError:  # a read-only cache: checked again by the next run
            log_once(f"fairseq-stream: {built} was checked, but its folder cannot hold its manifest")
    return why


def imports_alone(built: str, name: str) -> Optional[str]:
    """Why the library does not import in a process of its own (None: it does)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _IMPORT_ALONE, name, built], capture_output=True, text=True,
                              timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not be checked ({type(exc).__name__})"
    if proc.returncode == 0:
        return None
    if proc.returncode < 0:
        return f"kills the process that loads it ({signal.Signals(-proc.returncode).name})"
    lines = proc.stderr.strip().splitlines()
    return f"does not import ({lines[-1] if lines else f'exit status {proc.returncode}'})"


def discard(built: str) -> None:
    """Remove a damaged library, its manifest first (a manifest never names missing bytes)."""
    for path in (manifest_path(built), built):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def clear_build(folder: str) -> None:
    """Remove every file of a build folder but the lock held (a build from scratch follows)."""
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if entry != "fairseq_stream.flock" and os.path.isfile(path):
            os.remove(path)


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


#: The beam reorder of a cache over a row arena (model/row_arena.py's ``select``): integers only.
ROW_ARENA: Tuple[str, Tuple[str, ...], str] = ("row_arena.cpp", EXACT_FLAGS, "row-arena")


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
