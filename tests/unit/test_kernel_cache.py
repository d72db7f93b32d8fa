"""A damaged kernel cache is found before it is loaded, then rebuilt or skipped and named (issue 80).

Loading a damaged library is not an error Python can catch: a file cut short is a Bus error that
kills the process, another kernel's library under this one's name aborts it. So each case loads in
a child process, from a copy of this machine's built kernels (their object files make a rebuild a
relink of about a second), and asserts it exits 0 with the kernel loaded or named.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, Tuple

import pytest

from fairseq_stream.ops import extension, kernels

#: small kernels (the beam step and the Jacobi step are built with -O2; attention with -march=native)
SOURCES = ("beam_step.cpp", "jacobi_step.cpp", "decode_attention.cpp")
#: loads the kernels named in argv, in order, from a bare package (no fairseq: a second per child)
CHILD = kernels.BARE_PACKAGE + """
import json, os
from fairseq_stream.ops import extension as e, kernels as k
if os.environ.get("TEST_CACHE_CANNOT_REMOVE"):  # a folder whose files cannot be removed (read-only)
    def refuse(path, *a, **kw):
        raise PermissionError(13, "Permission denied", path)
    os.remove = refuse
loaded = {s: e.load(*k.all_kernels()[s]) is not None for s in sys.argv[1:]}
print(json.dumps({"loaded": loaded, "failures": e.failures, "fallbacks": e.unavailable()}))
"""


def load_in_child(cache: str, *sources: str, **env: str) -> Tuple[subprocess.CompletedProcess, Dict[str, Any]]:
    environ = dict(os.environ, FAIRSEQ_STREAM_KERNEL_DIR=cache, **env)
    environ.pop("FAIRSEQ_STREAM_NO_KERNEL", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, *sources], capture_output=True, text=True, env=environ,
                          timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built() -> Dict[str, Tuple[str, str]]:
    """source → (module name, build folder) of this machine's kernel cache, each built and with its manifest."""
    cache = os.path.dirname(extension.build_dir("beam_step.cpp", extension.EXACT_FLAGS, extension.cpu_features())[1])
    _, result = load_in_child(cache, *SOURCES)
    if not all(result["loaded"].values()):
        pytest.skip(f"the kernels cannot be built here: {result['failures']}")
    cpu = extension.cpu_features()
    return {s: extension.build_dir(s, kernels.all_kernels()[s][1], cpu) for s in SOURCES}


@pytest.fixture
def cache(built, tmp_path) -> str:
    """A copy of the built kernels' folders: each test damages its own."""
    for _, folder in built.values():
        shutil.copytree(folder, tmp_path / os.path.basename(folder), ignore=shutil.ignore_patterns("*.flock"))
    return str(tmp_path)


def library(built, cache: str, source: str) -> str:
    name, _ = built[source]
    return os.path.join(cache, name, f"{name}.so")


def cut_short(path: str, fraction: float) -> int:
    size = int(os.path.getsize(path) * fraction)
    os.truncate(path, size)
    return size


@pytest.mark.parametrize("fraction", [0.5, 0.1])
def test_a_library_cut_short_is_rebuilt_before_it_is_loaded(built, cache, fraction):
    so = library(built, cache, "beam_step.cpp")
    whole = os.path.getsize(so)
    size = cut_short(so, fraction)
    proc, result = load_in_child(cache, "beam_step.cpp")
    assert result["loaded"] == {"beam_step.cpp": True} and result["failures"] == {}
    assert f"is {size} bytes, not the {whole} it was built with; rebuilding it" in proc.stderr
    manifest = json.load(open(extension.manifest_path(so)))
    assert (manifest["size"], manifest["sha256"]) == extension.file_digest(so) and manifest["size"] > size


def test_the_attention_kernel_cut_short_is_rebuilt_too(built, cache):
    so = library(built, cache, "decode_attention.cpp")
    cut_short(so, 0.5)
    proc, result = load_in_child(cache, "decode_attention.cpp")
    assert result["loaded"] == {"decode_attention.cpp": True}, proc.stderr[-2000:]
    assert "rebuilding it" in proc.stderr


def test_a_library_cut_short_without_a_manifest_is_tried_in_a_child_and_rebuilt(built, cache):
    so = library(built, cache, "beam_step.cpp")
    os.remove(extension.manifest_path(so))  # a cache built before manifests
    cut_short(so, 0.5)
    proc, result = load_in_child(cache, "beam_step.cpp")
    assert result["loaded"] == {"beam_step.cpp": True}
    assert "kills the process that loads it (SIGBUS); rebuilding it" in proc.stderr
    assert os.path.exists(extension.manifest_path(so))


def test_a_whole_library_without_a_manifest_is_adopted_not_rebuilt(built, cache):
    so = library(built, cache, "beam_step.cpp")
    os.remove(extension.manifest_path(so))
    before = os.stat(so)
    proc, result = load_in_child(cache, "beam_step.cpp")
    assert result["loaded"] == {"beam_step.cpp": True} and "rebuilding" not in proc.stderr
    assert os.stat(so).st_ino == before.st_ino and os.stat(so).st_mtime_ns == before.st_mtime_ns
    assert json.load(open(extension.manifest_path(so)))["sha256"] == extension.file_digest(so)[1]


@pytest.mark.parametrize("with_manifest", [True, False])
def test_another_kernels_library_under_this_name_is_rebuilt_and_loaded(built, cache, with_manifest):
    """The Jacobi step's library, its operators registered already, copied over the beam step's: loading it
    aborted the process ("Tried to register an operator ... multiple times")."""
    so = library(built, cache, "beam_step.cpp")
    shutil.copyfile(library(built, cache, "jacobi_step.cpp"), so)
    if not with_manifest:
        os.remove(extension.manifest_path(so))
    proc, result = load_in_child(cache, "jacobi_step.cpp", "beam_step.cpp")
    assert result["loaded"] == {"jacobi_step.cpp": True, "beam_step.cpp": True}, proc.stderr[-2000:]
    assert "rebuilding it" in proc.stderr


def test_two_runs_on_one_damaged_library_rebuild_it_once_and_both_load_it(built, cache):
    so = library(built, cache, "beam_step.cpp")
    cut_short(so, 0.5)
    environ = dict(os.environ, FAIRSEQ_STREAM_KERNEL_DIR=cache)
    environ.pop("FAIRSEQ_STREAM_NO_KERNEL", None)
    runs = [subprocess.Popen([sys.executable, "-c", CHILD, "beam_step.cpp"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=environ) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert [json.loads(out.splitlines()[-1])["loaded"] for out, _ in outputs] == [{"beam_step.cpp": True}] * 2
    assert sum(err.count("rebuilding it") for _, err in outputs) == 1  # the second found it rebuilt


def test_a_damaged_library_that_cannot_be_removed_is_skipped_and_named(built, cache):
    so = library(built, cache, "beam_step.cpp")
    size = cut_short(so, 0.5)
    proc, result = load_in_child(cache, "beam_step.cpp", TEST_CACHE_CANNOT_REMOVE="1")
    assert result["loaded"] == {"beam_step.cpp": False}
    why = result["fallbacks"]["kernel beam_step.cpp"]
    assert why.startswith("PyTorch ops (DamagedKernelCache: the cached library ") and so in why
    assert f"is {size} bytes" in why and "cannot be rebuilt there (Permission denied)" in why
    assert os.path.getsize(so) == size  # left as it was, never loaded


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_damaged_library_in_a_read_only_folder_is_skipped_and_named(built, cache):
    so = library(built, cache, "beam_step.cpp")
    cut_short(so, 0.1)
    folder = os.path.dirname(so)
    os.chmod(folder, 0o555)
    try:
        _, result = load_in_child(cache, "beam_step.cpp")
    finally:
        os.chmod(folder, 0o755)
    assert result["loaded"] == {"beam_step.cpp": False}
    assert "DamagedKernelCache" in result["fallbacks"]["kernel beam_step.cpp"]


# ---- the manifest, in process (nothing is loaded) ----------------------------------------------
def _facts(**change: Any) -> Dict[str, Any]:
    return dict(extension.build_facts("beam_step.cpp", extension.EXACT_FLAGS, ""), module="m", **change)


def test_a_manifest_of_another_build_or_unreadable_is_not_trusted(tmp_path):
    so = str(tmp_path / "m.so")
    open(so, "wb").write(b"\x7fELF library bytes")
    assert extension.cache_problem(so, _facts()) == extension.NO_MANIFEST
    extension.write_manifest(so, _facts())
    assert extension.cache_problem(so, _facts()) is None
    assert extension.cache_problem(so, _facts(torch="0.0.1")) == "is not this build (its manifest's torch differs)"
    assert extension.cache_problem(so, _facts(kernel="jacobi_step.cpp")) == \
        "is not this build (its manifest's kernel differs)"
    open(so, "r+b").write(b"\x7fELF LIBRARY")  # same size, other bytes
    assert extension.cache_problem(so, _facts()) == "does not hold the bytes it was built with (its sha256 differs)"
    open(extension.manifest_path(so), "w").write('{"format": 1, "kern')  # cut short
    assert extension.cache_problem(so, _facts()) == "has a manifest that cannot be read"
    assert extension.cache_problem(str(tmp_path / "none.so"), _facts()) == extension.ABSENT


def test_a_rebuild_whose_link_fails_starts_from_scratch(monkeypatch, tmp_path):
    """A damaged library's object files may be damaged too: a failed relink removes them and builds again."""
    name = "fairseq_stream_damaged"
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.so").write_bytes(b"cut")
    (folder / "beam_step.o").write_bytes(b"cut")
    extension.write_manifest(str(folder / f"{name}.so"), {"kernel": "another.cpp"})
    calls = []

    def build(**kw):
        calls.append((folder / "beam_step.o").exists())
        if len(calls) == 1:
            raise RuntimeError("Error building extension: undefined reference")
        return "module"

    monkeypatch.setattr("torch.utils.cpp_extension.load", build)
    assert extension._import_or_build("beam_step.cpp", ("-O2",), name, str(folder), "test") == "module"
    assert calls == [True, False] and not (folder / f"{name}.so").exists()
