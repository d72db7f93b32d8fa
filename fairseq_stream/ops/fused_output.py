"""Fused output layer: each row's best tokens with exact log-probabilities, without a full log-softmax.

Paper 002 §3.1 (Algorithms 1–3): after the output multiplication, fairseq adds the bias,
writes a full ``(R, V)`` log-softmax, then searches it. Softmax is monotonic, so the best
classes can be found on the raw scores, and the normaliser of a row is one reduction over it
(the running max / rescaled sum of Algorithm 2, here ``torch.logsumexp``); only the winners
are normalised: ``log p = logit − logsumexp(logits)``. The bias is fused into the
multiplication (``addmm``). For beam search the per-row top-k comes first and the global
top-2k over beam × vocabulary is taken from those rows' winners (a candidate outside its
row's top-2k can never be in the global top-2k). Greedy Jacobi asks for the arg-max only and
normalises just the tokens it keeps (Algorithm 3).

fairseq's score edits (pad, unknown-word penalty, min/max length) act on the candidates
(:mod:`fairseq_stream.processors`); an edit that needs the whole row (n-gram blocking) or an
ensemble (whose average of probabilities needs every row in full) falls back to the full
log-softmax, logged once.

Three implementations sit behind :func:`topk_with_normaliser`, chosen at run time:

* CPU: a small C++ kernel (``csrc/fused_topk.cpp``), built with ``torch.utils.cpp_extension``
  into ``~/.cache/fairseq_stream`` (~40 s) once per CPU feature set, compiler and torch version
  (:func:`kernel_cache_key`: a home shared by machines never runs a kernel built for another
  CPU's instruction set). One streaming pass per row, in blocks of 16: a block's maximum
  updates the running maximum (rescaling the running sum of exponentials), its exponentials
  join the sum (vectorised), and only a block that beats the current k-th best is scanned for
  candidates;
* CUDA: the PyTorch ops under ``torch.compile``;
* everywhere else, or when a build fails (logged once; ``FAIRSEQ_STREAM_NO_KERNEL=1`` forces
  it): plain PyTorch ``topk`` + ``logsumexp``.
"""
from __future__ import annotations

import hashlib
import logging
import os
import platform
import subprocess
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from fairseq_stream.processors import Candidates, RowContext, apply_full

logger = logging.getLogger("fairseq_stream")
_warned: set = set()


def _log_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.info(message)


def _topk_lse(scores: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor]:
    values, tokens = scores.topk(k, dim=-1)
    return values, tokens, torch.logsumexp(scores, dim=-1)


_compiled = None
_cpu_kernel: Any = None  # None: not tried yet; False: unavailable


def cpu_kernel() -> Any:
    """The compiled CPU kernel module, or None when it cannot be built here."""
    global _cpu_kernel
    if _cpu_kernel is None:
        _cpu_kernel = False
        if os.environ.get("FAIRSEQ_STREAM_NO_KERNEL"):
            return None
        try:
            _cpu_kernel = _load_kernel()
        except Exception as exc:  # no compiler, no ninja: the PyTorch path is exact too
            _log_once(f"fairseq-stream: CPU output-layer kernel unavailable ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}); using PyTorch ops")
    return _cpu_kernel or None


#: -march=native: the block maximum and the vectorised exp use the widest SIMD the CPU has.
#: A kernel built so may not run on another CPU (SIGILL), hence the CPU in the cache key.
KERNEL_FLAGS: Tuple[str, ...] = ("-O3", "-ffast-math", "-fopenmp", "-march=native")
_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "fused_topk.cpp")


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


def kernel_cache_key(source: bytes, flags: Sequence[str], *, torch_version: str, compiler: str, cpu: str) -> str:
    """A name for the built kernel: it changes with anything that changes the binary or where it runs."""
    parts = [source, " ".join(flags).encode(), torch_version.encode(), compiler.encode()]
    if "-march=native" in flags:  # the binary is only valid on CPUs with these features
        parts.append(cpu.encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def kernel_build_dir() -> Tuple[str, str]:
    """(module name, build folder) of the kernel for this source, compiler, torch and CPU."""
    with open(_SOURCE, "rb") as f:
        source = f.read()
    key = kernel_cache_key(source, KERNEL_FLAGS, torch_version=torch.__version__, compiler=compiler_version(),
                           cpu=cpu_features())
    name = f"fairseq_stream_fused_topk_{key}"
    cache = os.environ.get("FAIRSEQ_STREAM_KERNEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fairseq_stream")
    return name, os.path.join(cache, name)


def _load_kernel() -> Any:
    """Import the built kernel directly when it exists (fast); build it once otherwise (~40 s)."""
    import importlib.machinery
    import importlib.util

    name, build_dir = kernel_build_dir()
    built = os.path.join(build_dir, f"{name}.so")
    if os.path.exists(built):
        spec = importlib.util.spec_from_file_location(name, built, loader=importlib.machinery.ExtensionFileLoader(name, built))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    from torch.utils.cpp_extension import load  # slow to import: only when building

    _log_once("fairseq-stream: building the CPU output-layer kernel (once per CPU and compiler, ~40 s)")
    os.makedirs(build_dir, exist_ok=True)
    return load(name=name, sources=[_SOURCE], verbose=False, extra_cflags=list(KERNEL_FLAGS), build_directory=build_dir)


def topk_with_normaliser(scores: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor]:
    """Top-``k`` raw scores (best first), their ids and the rows' ``logsumexp``."""
    global _compiled
    if not scores.is_cuda and scores.dtype in (torch.float32, torch.float64) and scores.dim() == 2:
        kernel = cpu_kernel()
        if kernel is not None:
            values, tokens, lse = kernel.topk_lse(scores, k)
            return values, tokens, lse
    if scores.is_cuda:
        if _compiled is None:
            try:
                _compiled = torch.compile(_topk_lse, dynamic=True)
            except Exception as exc:  # no compiler: the eager path is exact too
                _log_once(f"fairseq-stream: torch.compile unavailable ({exc}); fused output layer runs eagerly")
                _compiled = _topk_lse
        try:
            return _compiled(scores, k)
        except Exception as exc:
            _log_once(f"fairseq-stream: compiled output layer failed ({type(exc).__name__}); running eagerly")
            _compiled = _topk_lse
    return _topk_lse(scores, k)


class OutputScorer:
    """A step's raw scores → each row's best candidates after fairseq's score edits."""

    def __init__(self, processors: List[Any], *, fused: bool, normalized_input: bool) -> None:
        self.processors = processors
        self.normalized_input = normalized_input
        blockers = [type(p).__name__ for p in processors if p.candidates is None]
        self.fused = fused and not blockers and not normalized_input
        if fused and not self.fused:
            reason = f"{', '.join(blockers)} needs full rows" if blockers else "an ensemble averages full rows"
            _log_once(f"fairseq-stream: fused output layer off ({reason}); using the full log-softmax")
        self.extra = sum(p.extra for p in processors)

    def top(self, scores: Tensor, k: int, ctx: RowContext, *, normalize: bool = True) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """(values, tokens, lse) of each row's ``k`` best candidates, best first.

        Values are log-probabilities, or raw logits (same ranking) when ``normalize`` is False
        on the fused path; then ``lse`` is None and :meth:`normaliser` gives it on demand.
        """
        if scores.dtype in (torch.float16, torch.bfloat16):
            scores = scores.float()
        k = min(k, scores.size(-1))
        if not self.fused:
            lprobs = scores.clone() if self.normalized_input else torch.log_softmax(scores, dim=-1)
            lprobs = apply_full(self.processors, lprobs, ctx)
            values, tokens = lprobs.topk(k, dim=-1)
            return values, tokens, torch.zeros_like(values[:, 0])
        width = min(k + self.extra, scores.size(-1))
        if normalize:
            raw, tokens, lse = topk_with_normaliser(scores, width)
            values = raw - lse.unsqueeze(1)
        else:
            values, tokens = scores.topk(width, dim=-1)
            lse = None
        cand = Candidates(values, tokens, scores, lse)
        for proc in self.processors:
            cand = proc.candidates(cand, ctx)
        values, order = cand.scores.topk(k, dim=-1)
        return values, cand.tokens.gather(1, order), (lse if lse is not None else None)

    def normaliser(self, scores: Tensor) -> Tensor:
        """``logsumexp`` of rows (zero for already-normalised input and on the full path)."""
        if not self.fused:
            return scores.new_zeros(scores.shape[:-1], dtype=torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype)
        return torch.logsumexp(scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores, dim=-1)
