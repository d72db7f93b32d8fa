"""What a command-line run shows while it works: sentence progress, a thread default, and what memory it may need.

fairseq-generate's own progress bar counts *batches*; for our strategies a batch was the pool
the scheduler streams from (hundreds of sentences under the default ``--max-tokens``), so it
sat at 0/3 for a minute. :class:`SentenceProgress` counts sentences as they finish: a tqdm bar
on a terminal, one line every 30 s otherwise (CI logs get no carriage-return noise); both on
stderr, away from the hypotheses on stdout.

torch starts one thread per core. On a CPU that another process keeps busy, those threads
wait on each other: a run measured 11x slower with 2 threads than with 1 on 2 shared cores.
:func:`avoid_oversubscription` lowers the thread count to the idle cores and says so, once a
process, unless ``OMP_NUM_THREADS`` is set (the user's choice wins). Busy cores are measured
over a quarter second while this process sleeps (:func:`busy_cores`), not read from the load
average, which counts the process's own start-up.

Before decoding, :func:`warn_about_resources` estimates the decoder caches of the hypotheses in
flight: never more sentences than the input holds, whatever ``--stream-capacity`` says (buffers
grow with what is in flight, so a capacity above the input costs nothing). Sentences in flight
that cannot fit in the machine's memory (:func:`machine_memory`: physical memory, or what
``ulimit -v`` leaves) even with one hypothesis each are refused in one line naming the largest
capacity that fits; an estimate above the free memory only warns (pruning decides how many
hypotheses live). An allocation that fails anyway is one line too (:func:`fairseq_stream.errors.memory_problem`).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional, Tuple

import torch

from fairseq_stream.errors import address_space_limit, human_bytes
from fairseq_stream.integration.cli import fairseq_cli_name


class SentenceProgress:
    """Sentences done / total, on stderr."""

    def __init__(self, total: int, *, interval: float = 30.0) -> None:
        self.total, self.done, self.interval = total, 0, interval
        self.start = self.last_log = time.perf_counter()
        self.bar: Any = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="sent", desc="fairseq-stream", delay=1.0, leave=False,
                            dynamic_ncols=True, file=sys.stderr)

    def advance_to(self, done: int) -> None:
        done = min(done, self.total)
        if done <= self.done:
            return
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done = done
        now = time.perf_counter()
        if self.bar is None and now - self.last_log >= self.interval:
            self.last_log = now
            elapsed = now - self.start
            left = elapsed * (self.total - done) / done
            print(f"fairseq-stream: decoded {done}/{self.total} sentences in {elapsed:.0f} s, about {left:.0f} s left",
                  file=sys.stderr, flush=True)
        if done >= self.total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def wants_progress(argv: Optional[list] = None) -> bool:
    """Under fairseq-generate, unless ``--no-progress-bar`` (a fairseq option the task does not see)."""
    argv = sys.argv if argv is None else argv
    return fairseq_cli_name() == "generate" and "--no-progress-bar" not in argv


def _cpu_times(path: str = "/proc/stat") -> Optional[Tuple[int, int]]:
    """(busy, total) jiffies of all cores since boot, or None where /proc/stat is missing."""
    try:
        with open(path, encoding="ascii") as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def busy_cores(interval: float = 0.25, read: Callable[[], Optional[Tuple[int, int]]] = _cpu_times) -> Optional[float]:
    """Cores that other processes keep busy now, measured over ``interval`` seconds.

    This process sleeps while it measures, so its own start-up (imports, loading the model:
    seconds at 100% of a core) is not counted, as it would be in the 1-minute load average.
    """
    first = read()
    if first is None:
        return None
    time.sleep(interval)
    second = read()
    if second is None or second[1] <= first[1]:
        return None
    share = (second[0] - first[0]) / (second[1] - first[1])
    return share * (os.cpu_count() or 1)


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for (the C++ kernels' compiler)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class LoadMeter:
    """Cores that *other* processes kept busy while this one worked, on average over a stretch.

    :func:`busy_cores` looks once, for a quarter second; a benchmark's timings need the load
    during the whole measurement: the machine's busy time (``/proc/stat``) less this process's
    own CPU time, over the wall time. ``stop()`` gives None where ``/proc/stat`` is missing.
    """

    def __init__(self, read: Callable[[], Optional[Tuple[int, int]]] = _cpu_times,
                 own: Callable[[], float] = _own_cpu_seconds, clock: Callable[[], float] = time.perf_counter,
                 ticks_per_second: Optional[float] = None) -> None:
        self.read, self.own, self.clock = read, own, clock
        self.hz = ticks_per_second or float(os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
        self.start_at: Optional[Tuple[Optional[Tuple[int, int]], float, float]] = None

    def start(self) -> "LoadMeter":
        self.start_at = (self.read(), self.own(), self.clock())
        return self

    def stop(self) -> Optional[float]:
        if self.start_at is None:
            raise RuntimeError("LoadMeter.stop() before start()")
        (first, own0, t0), second = self.start_at, self.read()
        wall = self.clock() - t0
        if first is None or second is None or wall <= 0:
            return None
        machine = (second[0] - first[0]) / self.hz  # busy core-seconds of every process
        return max(machine - (self.own() - own0), 0.0) / wall


_threads_checked = False


def avoid_oversubscription(on_cpu: bool, measure: Callable[[], Optional[float]] = busy_cores) -> None:
    """Use only the cores other processes leave idle, unless ``OMP_NUM_THREADS`` says otherwise (once a process)."""
    global _threads_checked
    if not on_cpu or os.environ.get("OMP_NUM_THREADS") or _threads_checked:
        return
    _threads_checked = True
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = torch.get_num_threads()
    if threads <= 1:
        return
    measured = measure()
    if measured is None:
        return
    busy = min(int(measured + 0.5), cores)  # cores that other processes keep busy
    idle = max(cores - busy, 1)
    if threads <= idle:
        return
    torch.set_num_threads(idle)
    print(f"fairseq-stream: warning: other processes keep about {busy} of {cores} cores busy; using {idle} "
          f"torch thread(s) instead of {threads} (oversubscribed threads can run many times slower); "
          "set OMP_NUM_THREADS to choose", file=sys.stderr, flush=True)


def _address_space_left() -> Optional[int]:
    """Bytes this process may still map under ``ulimit -v`` (RLIMIT_AS less its VmSize), or None: no limit."""
    limit = address_space_limit()
    if limit is None:
        return None
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            used = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:")), 0)
    except OSError:
        used = 0
    return max(limit - used, 0)


def _meminfo(key: str) -> Optional[int]:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _free_memory(on_cpu: bool) -> Optional[int]:
    """Bytes free for decoding: the GPU's free memory, or the host's MemAvailable (and what ``ulimit -v``
    leaves, if less) (None: unknown)."""
    if not on_cpu:
        return int(torch.cuda.mem_get_info()[0])
    known = [v for v in (_meminfo("MemAvailable"), _address_space_left()) if v is not None]
    return min(known) if known else None


def machine_memory(on_cpu: bool) -> Optional[Tuple[int, str]]:
    """The most memory a run could ever get, and what bounds it: the GPU's total memory; the host's
    physical memory, or what ``ulimit -v`` leaves this process if less (None: unknown)."""
    if not on_cpu:
        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory), "GPU memory"
    physical = _meminfo("MemTotal")
    left = _address_space_left()
    if left is not None and (physical is None or left < physical):
        return left, "address space this process has left under ulimit -v"
    return (physical, "physical memory") if physical is not None else None


def decoding_memory_estimate(models: Any, gen_cfg: Any, rows: int, sentences: Optional[int] = None) -> int:
    """A rough upper bound, in bytes, of the decoder caches of ``rows`` hypotheses of ``sentences``
    sentences in flight (default: one sentence a row, as fairseq's beam search, which copies each
    sentence's encoder states to every hypothesis; ours keep one copy a sentence: encoder_slots).

    Each hypothesis: the self-attention keys and values, maximum target length × decoder layers ×
    embedding dim × bytes per value × 2; each sentence: the encoder-attention keys and values,
    as much again (the source taken as long as the target). An estimate only: it ignores the
    encoder states and the output layer.
    """
    sentences = rows if sentences is None else sentences
    total = 0
    for model in models:
        decoder = getattr(model, "decoder", None)
        layers = len(getattr(decoder, "layers", ()) or ()) or 1
        dim = int(getattr(decoder, "embed_dim", 0) or getattr(getattr(decoder, "embed_tokens", None), "embedding_dim", 0) or 512)
        positions = model.max_decoder_positions() if hasattr(model, "max_decoder_positions") else 1024
        length = min(int(float(gen_cfg.max_len_a) * positions + int(gen_cfg.max_len_b)), positions)
        param = next(model.parameters(), None)
        size = param.element_size() if param is not None else 4
        total += (rows + sentences) * length * layers * dim * size * 2
    return total


def _in_flight(models: Any, gen_cfg: Any, opts: Any, sentences: Optional[int]) -> Tuple[int, int]:
    """(sentences in flight at most, their hypotheses at most): ``--stream-capacity`` sentences, never more
    than the input holds (a capacity above it costs nothing: buffers grow with what is in flight)."""
    from fairseq_stream.engine.validation import stream_capacity

    capacity = stream_capacity(opts, gen_cfg, models)
    in_flight = min(capacity, sentences) if sentences else capacity
    return in_flight, in_flight * int(gen_cfg.beam)


def refuse_what_cannot_fit(models: Any, gen_cfg: Any, opts: Any, in_flight: int, memory: Tuple[int, str]) -> None:
    """Refuse, before decoding, a ``--stream-capacity`` whose sentences in flight cannot fit even with one
    hypothesis each: the least our engine holds for them (their encoder-attention keys and values and
    one row of caches). Above that, pruning decides how many hypotheses live: only a warning."""
    from fairseq_stream.errors import FairseqStreamError

    limit, what = memory
    least = decoding_memory_estimate(models, gen_cfg, rows=in_flight, sentences=in_flight)
    if least <= limit:
        return
    each = max(least // in_flight, 1)
    fits = limit // each
    fix = (f"the largest --stream-capacity that fits is {fits}" if fits >= 1 else
           "not even one sentence fits: lower --max-len-b (or --max-len-a)")
    given = f"--stream-capacity {opts.stream_capacity}" if opts.stream_capacity is not None else \
        "the default --stream-capacity"
    raise FairseqStreamError(
        f"{given} puts {in_flight} sentences in flight, which need at least about {human_bytes(least)} for their "
        f"decoder caches (an estimate: one hypothesis each at the maximum length × layers × embedding dim), more "
        f"than the {human_bytes(limit)} of {what}; {fix}")


def warn_about_resources(models: Any, gen_cfg: Any, rows: Optional[int] = None, *, opts: Any = None,
                         sentences: Optional[int] = None,
                         memory: Callable[[bool], Optional[Tuple[int, str]]] = machine_memory) -> None:
    """Before the run: one warning line each for fp16 on a CPU and a memory estimate over the free memory;
    one error line when the sentences in flight cannot fit in the machine's memory at all.

    ``opts`` (the stream options) and ``sentences`` (the input's size, None where unknown, as under
    fairseq-interactive) give the hypotheses in flight, ``rows`` when ``opts`` is None. The refusal
    needs a known input size (a capacity above it costs nothing) and one of our searches (fairseq's
    beam search has no capacity).
    """
    params = [p for m in models for p in m.parameters()]
    on_cpu = not any(p.is_cuda for p in params)
    if on_cpu and any(p.dtype == torch.float16 for p in params):
        print("fairseq-stream: warning: --fp16 on a CPU is slower than float32 (2.7x on the demo model) and "
              "changes the outputs; drop --fp16 unless you decode on a GPU", file=sys.stderr, flush=True)
    per_sentence = None  # fairseq's beam search: encoder states copied to every row
    if opts is not None:
        in_flight, rows = _in_flight(models, gen_cfg, opts, sentences)
        total = memory(on_cpu)
        if getattr(opts, "search", "beam") != "beam":
            per_sentence = in_flight
            if sentences and total is not None:
                refuse_what_cannot_fit(models, gen_cfg, opts, in_flight, total)
    free = _free_memory(on_cpu)
    need = decoding_memory_estimate(models, gen_cfg, rows or 1, sentences=per_sentence)
    if free is not None and need > free:
        where = "host" if on_cpu else "GPU"
        print(f"fairseq-stream: warning: the decoder caches may need about {need / 2**30:.1f} GiB "
              f"(an estimate: {rows} hypotheses in flight × the maximum length × layers × embedding dim), more than "
              f"the {free / 2**30:.1f} GiB of {where} memory free; lower --stream-capacity, --beam or --max-len-b",
              file=sys.stderr, flush=True)
