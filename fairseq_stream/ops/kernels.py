"""Every C++ kernel of the package, and building them all at once (what ``scripts/install.sh`` runs).

Apart from :mod:`fairseq_stream.ops.extension` (which builds one kernel on first use) because it
reads the kernels' flags from the modules that use them, which import the builder.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Dict, Tuple

from fairseq_stream.ops import decode_attention, extension, fused_output, int8_rows, native_step, ngram_pool, packed_linear


def all_kernels() -> Dict[str, Tuple[str, Tuple[str, ...], str]]:
    """Every C++ kernel of the package: source → (source, flags, what), the step operators' and the others'."""
    kernels = {"decode_attention.cpp": (decode_attention._SOURCE, tuple(decode_attention.KERNEL_FLAGS), "attention"),
               "fused_topk.cpp": (fused_output._SOURCE, tuple(fused_output.KERNEL_FLAGS), "output-layer"),
               int8_rows.KERNEL_SOURCE: (int8_rows.KERNEL_SOURCE, int8_rows.KERNEL_FLAGS, "int8"),
               native_step._SOURCE: (native_step._SOURCE, tuple(native_step.KERNEL_FLAGS), "native-step"),
               ngram_pool._SOURCE: (ngram_pool._SOURCE, tuple(ngram_pool.KERNEL_FLAGS), "n-gram pool"),
               packed_linear._SOURCE: (packed_linear._SOURCE, packed_linear.KERNEL_FLAGS, "packed-product"),
               extension.ROW_ARENA[0]: extension.ROW_ARENA}
    kernels.update({source: (source, flags, what) for source, flags, what in extension.OPERATORS.values()})
    return kernels


# The kernels need only torch, while the package's __init__ imports fairseq: the install builds them
# while fairseq itself is being built, from a bare ``fairseq_stream`` package (a module whose path
# is the package's folder and no __init__ run). Python that sets it up, for a fresh process.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BARE_PACKAGE = ("import sys, types; _p = types.ModuleType('fairseq_stream'); "
                f"_p.__path__ = [{PACKAGE_DIR!r}]; sys.modules.setdefault('fairseq_stream', _p); ")


def prebuild(jobs: int = 0, write: Any = print) -> int:
    """Build every kernel not built yet, ``jobs`` at a time (0: one per core), each in its own process.

    What ``scripts/install.sh`` runs, so that the first decoding run does not stop for ~40 s per
    kernel, one after the other, halfway through its first pass. Returns how many failed (their
    callers then use the PyTorch path, which is exact too). Each process loads the package bare
    (:data:`BARE_PACKAGE`), without fairseq: the install runs this while fairseq is being built.
    """
    if extension.disabled():
        write("C++ kernels: not built (FAIRSEQ_STREAM_NO_KERNEL is set)")
        return 0
    cpu, todo = extension.cpu_features(), []
    for source, (_, flags, what) in all_kernels().items():
        name, folder = extension.build_dir(source, flags, cpu)
        expected = dict(extension.build_facts(source, flags, cpu), module=name)
        # a library cut short or not this build is rebuilt here, not on the first decoding run
        if extension.cache_problem(os.path.join(folder, f"{name}.so"), expected) is not None:
            todo.append((source, what))
    running: Dict[str, Tuple[subprocess.Popen, float, str]] = {}
    failed, jobs = 0, jobs or os.cpu_count() or 1
    while todo or running:
        while todo and len(running) < jobs:
            source, what = todo.pop(0)
            code = (BARE_PACKAGE + "from fairseq_stream.ops import extension as e, kernels as k; "
                    f"sys.exit(None if e.load(*k.all_kernels()[{source!r}]) else e.failures.get({source!r}, 'not built'))")
            running[source] = (subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True),
                               time.perf_counter(), what)
        for source, (proc, start, what) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[source]
            err = proc.stderr.read().strip().splitlines() if proc.stderr else []
            failed += proc.returncode != 0
            why = "" if proc.returncode == 0 else f" FAILED ({err[-1] if err else 'no message'}; the PyTorch path is used)"
            write(f"C++ {what} kernel: built in {time.perf_counter() - start:.0f} s{why}")
        time.sleep(0.2)
    return failed
