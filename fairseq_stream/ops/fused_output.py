"""Fused output layer: each row's best tokens with exact log-probabilities, without a full log-softmax.

Hoang2018 §3.1 (Algorithms 1–3): after the output multiplication, fairseq adds the bias,
writes a full ``(R, V)`` log-softmax, then searches it. Softmax is monotonic, so the best
classes can be found on the raw scores, and the normaliser of a row is one reduction over it
(the running max / rescaled sum of Algorithm 2, here ``torch.logsumexp``); only the winners
are normalised: ``log p = logit − logsumexp(logits)``. The bias is fused into the
multiplication (``addmm``). For beam search the per-row top-k comes first and the global
top-2k over beam × vocabulary is taken from those rows' winners (a candidate outside its
row's top-2k can never be in the global top-2k). Greedy Jacobi asks for the arg-max only and
normalises just the tokens it keeps (Algorithm 3).

The search side, :class:`fairseq_stream.search.output.OutputScorer`, applies fairseq's score
edits to the candidates and falls back to the full log-softmax where an edit needs whole rows.

Three implementations sit behind :func:`topk_with_normaliser`, chosen at run time:

* CPU: a small C++ kernel (``csrc/fused_topk.cpp``), built with ``torch.utils.cpp_extension``
  into ``~/.cache/fairseq_stream`` (~40 s) once per CPU feature set, compiler and torch version
  (:func:`kernel_cache_key`: a home shared by machines never runs a kernel built for another
  CPU's instruction set). One streaming pass per row, in blocks of 64: a block's maximum
  updates the running maximum (rescaling the running sum of exponentials), its exponentials
  join the sum (vectorised), and only a block that beats the current k-th best is scanned for
  candidates;
* CUDA: PyTorch's ``topk`` + ``logsumexp`` or one of two Triton paths
  (:mod:`fairseq_stream.ops.triton_output`, each a per-block top-k and normaliser, then a
  per-row merge): ``triton``, k unrolled max/argmax rounds, and ``triton-sort``, a bitonic
  top-K2 of (score, id) integer keys. :func:`pick_fastest` measures them once per (V, row
  class, k) and keeps the fastest. ``triton`` is measured only up to k = ``UNROLLED_MAX_K``: on
  an H100 (float16, V = 32000) it compiled for 35 s at k = 100 and then ran 2.6× slower than
  ``triton-sort`` (50 rows); at k = 10 it was the fastest from 1,600 rows up;
* everywhere else, or when a build fails (logged once; ``FAIRSEQ_STREAM_NO_KERNEL=1`` forces
  it): plain PyTorch ``topk`` + ``logsumexp``.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Set, Tuple

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops import extension
from fairseq_stream.ops.backends import device_choice
from fairseq_stream.ops.extension import cpu_features, log_once



def reference_topk_lse(scores: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor]:
    """PyTorch's ``topk`` + ``logsumexp``: the reference every kernel equals, and the fallback."""
    if scores.dtype in (torch.float16, torch.bfloat16):  # PyTorch's ops normalise in float32 (a copy)
        scores = scores.float()
    values, tokens = scores.topk(k, dim=-1)
    return values, tokens, torch.logsumexp(scores, dim=-1)


#: -march=native: the block maximum and the vectorised exp use the widest SIMD the CPU has.
#: A kernel built so may not run on another CPU (SIGILL), hence the CPU in the cache key.
KERNEL_FLAGS: Tuple[str, ...] = ("-O3", "-ffast-math", "-fopenmp", "-march=native")
_SOURCE = "fused_topk.cpp"


def kernel_build_dir() -> Tuple[str, str]:
    """(module name, build folder) of the kernel for this source, compiler, torch and CPU."""
    return extension.build_dir(_SOURCE, KERNEL_FLAGS, cpu_features())


def cpu_kernel() -> Any:
    """The compiled CPU kernel module (its op: ``torch.ops.fairseq_stream.topk_lse``), or None
    when it cannot be built here."""
    return extension.load(_SOURCE, KERNEL_FLAGS, "output-layer")


def cpu_topk_native() -> bool:
    """Whether :func:`topk_with_normaliser` runs the C++ operator for float rows on a CPU (so a native loop that
    calls the operator itself gets the same bits)."""
    return device_choice("output_layer", "cpu") == "cpp" and cpu_kernel() is not None


def topk_with_normaliser(scores: Tensor, k: int) -> Tuple[Tensor, Tensor, Tensor]:
    """Top-``k`` raw scores (best first), their ids and the rows' ``logsumexp``."""
    choice = device_choice("output_layer", scores.device.type)
    if choice == "cpp" and scores.dtype in (torch.float32, torch.float64) and scores.dim() == 2:
        if cpu_kernel() is not None:
            return torch.ops.fairseq_stream.topk_lse(scores, k)
    if choice == "fastest" and scores.dim() == 2 and scores.dtype != torch.float64:
        key = (int(scores.size(1)), _bucket(int(scores.size(0))), int(k))
        if key not in _cuda_choice:  # once per shape class: measured, or FAIRSEQ_STREAM_OUTPUT_KERNEL
            _cuda_choice[key] = _choose(cuda_candidates(), scores, k)
            log_once(f"fairseq-stream: output layer (V={key[0]}, rows<={key[1]}, k={k}) on the GPU: "
                      f"{_cuda_choice[key].__name__}")
        _cuda_used.add(key)
        return _cuda_choice[key](scores, k)
    return reference_topk_lse(scores, k)


_cuda_choice: Dict[Tuple[int, int, int], Callable[..., Any]] = {}
#: the shape classes run since the last ``take_cuda_kernels`` (each run's statistics name only its own)
_cuda_used: Set[Tuple[int, int, int]] = set()
#: FAIRSEQ_STREAM_OUTPUT_KERNEL=torch|triton|triton-sort overrides the measured choice on CUDA.
OVERRIDE_VARIABLE = "FAIRSEQ_STREAM_OUTPUT_KERNEL"
#: the unrolled kernel compiles k rounds in (slow to build, slow to run for large k): measured up to here
UNROLLED_MAX_K = 32


def _choose(candidates: Dict[str, Callable[..., Any]], scores: Tensor, k: int) -> Callable[..., Any]:
    forced = os.environ.get(OVERRIDE_VARIABLE)
    if forced:
        if forced not in candidates:
            raise FairseqStreamError(f"{OVERRIDE_VARIABLE}={forced}: choose one of {', '.join(sorted(candidates))}")
        return candidates[forced]
    measured = {name: fn for name, fn in candidates.items() if name != "triton" or k <= UNROLLED_MAX_K}
    return pick_fastest(measured, scores, k)


def cuda_choices() -> List[str]:
    """The output-layer kernels chosen so far on CUDA, ``V=…,rows<=…,k=…:name`` (for the statistics)."""
    names = _candidate_names()
    return [f"V={v},rows<={r},k={k}:{names.get(id(fn), getattr(fn, '__name__', '?'))}"
            for (v, r, k), fn in sorted(_cuda_choice.items())]


def _candidate_names() -> Dict[int, str]:
    """The name of each CUDA candidate kernel, by the id of its function."""
    return {id(fn): name for name, fn in _cuda_candidates_cache.items()}


def take_cuda_kernels() -> List[str]:
    """The names of the output-layer kernels run on CUDA since the last call (``torch``,
    ``triton``, ``triton-sort``), for a run's statistics; the per-shape choices are logged once each."""
    names = _candidate_names()
    used = sorted({names.get(id(_cuda_choice[key]), "?") for key in _cuda_used if key in _cuda_choice})
    _cuda_used.clear()
    return used


def _bucket(rows: int) -> int:
    """Row counts are measured in classes of powers of two."""
    return 1 << max(rows - 1, 0).bit_length()


_cuda_candidates_cache: Dict[str, Callable[..., Any]] = {}


def cuda_candidates() -> Dict[str, Callable[..., Any]]:
    """The CUDA output-layer candidates by name (``torch``; ``triton`` and ``triton-sort`` where Triton
    imports), among which :func:`pick_fastest` measures; the benchmark times each alone."""
    if _cuda_candidates_cache:
        return _cuda_candidates_cache
    out = _cuda_candidates_cache
    out["torch"] = reference_topk_lse
    try:
        from fairseq_stream.ops.triton_output import topk_lse as triton_topk_lse
        from fairseq_stream.ops.triton_output import topk_lse_sorted
    except Exception as exc:  # no Triton: PyTorch's ops are exact too
        log_once(f"fairseq-stream: Triton output-layer kernel unavailable ({type(exc).__name__}); using PyTorch ops")
    else:
        out["triton"] = triton_topk_lse
        out["triton-sort"] = topk_lse_sorted
    return out


def pick_fastest(candidates: Dict[str, Callable[..., Any]], scores: Tensor, k: int, *, repeats: int = 5,
                 clock: Callable[[], float] = time.perf_counter) -> Callable[..., Any]:
    """The fastest of ``candidates`` on ``scores`` (each warmed up once: a Triton kernel compiles
    then, and caches on disk across processes), by the median of ``repeats`` synchronised runs."""
    sync = torch.cuda.synchronize if scores.is_cuda else (lambda: None)
    best, best_time = None, float("inf")
    for fn in candidates.values():
        try:
            fn(scores, k)
        except Exception as exc:  # a kernel that fails here is not used
            log_once(f"fairseq-stream: output-layer candidate {getattr(fn, '__name__', fn)} failed ({type(exc).__name__})")
            continue
        times = []
        for _ in range(repeats):
            sync()
            start = clock()
            fn(scores, k)
            sync()
            times.append(clock() - start)
        median = sorted(times)[len(times) // 2]
        if median < best_time:
            best, best_time = fn, median
    return best if best is not None else reference_topk_lse
