"""Device-agnostic cost proxies of a decoding run: host reads and aten operations per step.

On a GPU a decoder step is fast only if the host never waits for the device and launches few
kernels. Both can be counted on any machine, without a GPU:

* **host reads** — every operation that needs a device value on the host before it can go
  on: ``item``/``int``/``float``/``bool`` of a tensor (``aten::_local_scalar_dense``),
  ``tolist``/``numpy``, copies to the CPU, and the operations whose *output shape* depends on
  the data (``nonzero``, boolean-mask indexing, ``masked_select``, ``unique``,
  ``repeat_interleave`` without ``output_size``), which synchronise on CUDA;
* **aten ops** — operations that reach the dispatcher's kernels: each is (at least) one kernel
  launch on a GPU, so their number per step is what CUDA graphs or fusion must remove; those
  *outside* a static step's region (``--step-mode static``: what one graph replay does not hold)
  are the launches a GPU still issues around each replay.

:class:`CostCounter` counts both with a ``TorchFunctionMode`` (for ``tolist``/``numpy``, which
never dispatch) and a ``TorchDispatchMode``. It slows the run down; use it for counting, not
timing.
"""
from __future__ import annotations

import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten

#: aten overloads whose output shape depends on tensor values: a device→host sync on CUDA.
_DATA_DEPENDENT = {
    _aten._local_scalar_dense.default,
    _aten.nonzero.default,
    _aten.masked_select.default,
    _aten.unique_consecutive.default,
    _aten._unique2.default,
    _aten.unique_dim.default,
}

#: Tensor methods that read values on the host without reaching the dispatcher on CPU.
_HOST_METHODS = {torch.Tensor.tolist, torch.Tensor.numpy}

#: Operations that are bookkeeping of the dispatcher, not work (views, metadata).
_FREE = {
    _aten.view.default, _aten._unsafe_view.default, _aten.detach.default, _aten.alias.default,
    _aten.t.default, _aten.transpose.int, _aten.unsqueeze.default, _aten.squeeze.dim,
    _aten.squeeze.default, _aten.expand.default, _aten.permute.default, _aten.slice.Tensor,
    _aten.select.int, _aten.as_strided.default, _aten.split.Tensor, _aten.split_with_sizes.default,
    _aten.unbind.int, _aten.chunk.default, _aten.lift_fresh.default, _aten.empty.memory_format,
    _aten.empty_strided.default, _aten.unfold.default, _aten.narrow.default,
}


def _is_bool_index(func: Any, args: Any) -> bool:
    if func not in (_aten.index.Tensor, _aten.index_put_.default, _aten.index_put.default):
        return False
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ()))


def _is_repeat_interleave_without_size(func: Any, kwargs: Dict[str, Any]) -> bool:
    return func is _aten.repeat_interleave.Tensor and kwargs.get("output_size") is None


def _is_copy_to_device(func: Any, args: Any, kwargs: Dict[str, Any]) -> bool:
    if func is _aten._to_copy.default:
        device = kwargs.get("device")
        return device is not None and torch.device(device).type != "cpu" and args[0].device.type == "cpu"
    if func is _aten.copy_.default:
        return args[0].device.type != "cpu" and args[1].device.type == "cpu"
    return False


def _is_copy_to_host(func: Any, args: Any, kwargs: Dict[str, Any]) -> bool:
    if func is _aten._to_copy.default:
        device = kwargs.get("device")
        return device is not None and torch.device(device).type == "cpu" and args[0].device.type != "cpu"
    if func is _aten.copy_.default:
        return args[0].device.type == "cpu" and args[1].device.type != "cpu"
    return False


def _site(depth: int = 3) -> str:
    """The innermost ``depth`` frames of this package's code (this module's left out), innermost first."""
    frames = [f for f in traceback.extract_stack()
              if "fairseq_stream" in f.filename and not f.filename.endswith("profiling.py")][-depth:]
    return " < ".join(f"{f.filename.split('fairseq_stream/')[-1]}:{f.lineno} {f.name}" for f in reversed(frames))


@dataclass
class CostCounts:
    host_reads: int = 0
    host_writes: int = 0  # host→device copies
    ops: int = 0
    region_ops: int = 0  # of ``ops``, those inside a static step's region (count_decoder_steps marks it)
    in_region: int = 0  # >0 while a static step's region runs
    reads_by_op: Counter = field(default_factory=Counter)
    ops_by_name: Counter = field(default_factory=Counter)
    #: >0 while a host method runs: the device→host copy it dispatches is the same read, not a second one
    inside_host_method: int = 0
    #: where the reads happen, when a Counter is given: (op, "file:line function < caller < …") → count
    read_sites: "Counter | None" = None

    def note_read(self, op: str) -> None:
        self.host_reads += 1
        self.reads_by_op[op] += 1
        if self.read_sites is not None:
            self.read_sites[(op, _site())] += 1

    def per_step(self, steps: int) -> Dict[str, float]:
        steps = max(steps, 1)
        return {"host_reads_per_step": self.host_reads / steps, "host_writes_per_step": self.host_writes / steps,
                "ops_per_step": self.ops / steps, "ops_outside_region_per_step": (self.ops - self.region_ops) / steps}


class _FunctionCounter(TorchFunctionMode):
    def __init__(self, counts: CostCounts) -> None:
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in _HOST_METHODS:
            return func(*args, **(kwargs or {}))
        c = self.counts
        c.note_read(func.__name__)
        c.inside_host_method += 1  # on CUDA, tolist() copies to the host inside: one read, counted here
        try:
            return func(*args, **(kwargs or {}))
        finally:
            c.inside_host_method -= 1


class _DispatchCounter(TorchDispatchMode):
    def __init__(self, counts: CostCounts) -> None:
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        c = self.counts
        if not c.inside_host_method and (
                func in _DATA_DEPENDENT or _is_bool_index(func, args) or _is_repeat_interleave_without_size(func, kwargs)
                or _is_copy_to_host(func, args, kwargs)):
            c.note_read(str(func.overloadpacket.__name__))
        if _is_copy_to_device(func, args, kwargs):
            c.host_writes += 1
        if func not in _FREE:
            c.ops += 1
            c.region_ops += c.in_region > 0
            c.ops_by_name[str(func.overloadpacket.__name__)] += 1
        return func(*args, **kwargs)


class CostCounter:
    """``with CostCounter() as cc: ...`` then ``cc.counts``: host reads and aten ops inside."""

    def __init__(self, counts: "CostCounts | None" = None) -> None:
        self.counts = counts if counts is not None else CostCounts()
        self._modes = [_FunctionCounter(self.counts), _DispatchCounter(self.counts)]

    def __enter__(self) -> "CostCounter":
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)


@contextmanager
def count_decoder_steps(counts: CostCounts) -> Iterator[CostCounts]:
    """Count inside the streaming scheduler's steps only (decoder call, strategy step, cache
    reorder, and the read-out of finished hypotheses kept on the device); fairseq's batching and
    its encoder are left out. ``counts`` accumulates over every step run meanwhile; the operations
    of static steps' regions are counted apart too (``region_ops``)."""
    from fairseq_stream.engine.scheduler import StreamingScheduler
    from fairseq_stream.model.static.region import StaticStep

    step, finish, region = StreamingScheduler._step, StreamingScheduler._finish, StaticStep._body

    def counted_region(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts.in_region += 1
        try:
            return region(self, *args, **kwargs)
        finally:
            counts.in_region -= 1

    def counted_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        with CostCounter(counts):
            return step(self, *args, **kwargs)

    def counted_finish(self: Any, *args: Any, **kwargs: Any) -> Any:
        with CostCounter(counts):
            return finish(self, *args, **kwargs)

    StreamingScheduler._step, StreamingScheduler._finish = counted_step, counted_finish  # type: ignore[method-assign]
    StaticStep._body = counted_region  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        StreamingScheduler._step, StreamingScheduler._finish = step, finish  # type: ignore[method-assign]
        StaticStep._body = region  # type: ignore[method-assign]


class PeakMemory:
    """Peak memory of a block: ``torch.cuda.max_memory_allocated`` on a GPU, else the process's
    resident set high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs`` where Linux
    allows it; otherwise the process's peak so far). In MiB."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.mib: float = 0.0

    def __enter__(self) -> "PeakMemory":
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()
            self.mib = torch.cuda.max_memory_allocated() / 2**20
            return
        try:
            with open("/proc/self/status") as f:
                hwm = next(line for line in f if line.startswith("VmHWM:"))
            self.mib = int(hwm.split()[1]) / 1024
        except (OSError, StopIteration):
            import resource

            self.mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gpu_profile(run: Any) -> Dict[str, float]:
    """One profiled ``run()`` on CUDA (torch.profiler): ``gpu_busy``, the fraction of its wall time
    the GPU spends in kernels, and ``kernels``, the kernels it ran (copies and memsets left out)."""
    import time

    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    kernel_us, kernels = 0.0, 0
    for evt in prof.events():
        if getattr(evt, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        kernel_us += getattr(evt, "self_device_time_total", None) or getattr(evt, "self_cuda_time_total", 0.0)
        kernels += not str(evt.name).startswith(("Memcpy", "Memset"))
    return {"gpu_busy": kernel_us / 1e6 / wall if wall else 0.0, "kernels": float(kernels)}


def gpu_busy_fraction(run: Any) -> float:
    """Fraction of ``run()``'s wall time the GPU spends in kernels (torch.profiler)."""
    return gpu_profile(run)["gpu_busy"]
