"""Yes/no environment variables (``FAIRSEQ_STREAM_NO_KERNEL``, ``..._TRACEBACK``, ``..._VERBOSE``), read one way;
and the one with a choice of values, ``FAIRSEQ_STREAM_KERNEL_ISA`` (:func:`kernel_isa`).

A flag read as "set when not empty" made ``FAIRSEQ_STREAM_NO_KERNEL=0`` switch the kernels off and
``FAIRSEQ_STREAM_TRACEBACK=0`` print tracebacks (issue 80). Every such flag is read here: 1, true,
yes, on (any case) set it; empty, 0, false, no, off leave it unset; anything else is one error line
naming the variable and the accepted values. The lowest layer (imports only ``errors``), so every
layer may read a flag through it.
"""
from __future__ import annotations

import os
from typing import Tuple

from fairseq_stream.errors import FairseqStreamError

#: Every yes/no variable the package reads (:func:`check_flags` reads them all as a process starts).
FLAGS: Tuple[str, ...] = ("FAIRSEQ_STREAM_NO_KERNEL", "FAIRSEQ_STREAM_NO_RAW_STEP", "FAIRSEQ_STREAM_TRACEBACK",
                          "FAIRSEQ_STREAM_VERBOSE", "FAIRSEQ_STREAM_NO_HALF_PANELS")
SET = ("1", "true", "yes", "on")
#: ``FAIRSEQ_STREAM_KERNEL_ISA``: the instruction set the ``-march=native`` C++ kernels are built for
#: (:data:`fairseq_stream.ops.extension.ISA_FLAGS`); not a yes/no variable, checked with them.
KERNEL_ISA = "FAIRSEQ_STREAM_KERNEL_ISA"
KERNEL_ISAS: Tuple[str, ...] = ("native", "avx2")
UNSET = ("", "0", "false", "no", "off")


def env_flag(name: str, *, strict: bool = True) -> bool:
    """Whether the environment variable ``name`` is set to a yes value (module docstring).

    ``strict=False`` reads an unknown value as unset instead of raising: for readers that run while
    an error is already being reported (the exception hook), where a second error would hide the first.
    """
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in SET:
        return True
    if value in UNSET or not strict:
        return False
    raise FairseqStreamError(f"{name}={raw!r} is neither yes nor no: use 1, true, yes or on to set it, "
                             f"0, false, no, off or nothing to leave it unset")


def check_flags() -> None:
    """Refuse a value that is neither yes nor no in any of :data:`FLAGS` now, before any work (a kernel is
    first loaded halfway through a run's first batch; the traceback flag is read while reporting an error)."""
    for name in FLAGS:
        env_flag(name)
    kernel_isa()


def kernel_isa() -> str:
    """``FAIRSEQ_STREAM_KERNEL_ISA``'s value: ``native`` (unset: all this CPU has) or ``avx2``; any other value is one
    error line naming the values."""
    raw = os.environ.get(KERNEL_ISA, "")
    value = raw.strip().lower() or "native"
    if value not in KERNEL_ISAS:
        raise FairseqStreamError(f"{KERNEL_ISA}={raw!r} is not an instruction set the kernels are built for: use "
                                 f"{' or '.join(KERNEL_ISAS)}, or leave it unset (native)")
    return value
