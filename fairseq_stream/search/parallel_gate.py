"""``--jacobi-parallel auto``: a sentence's Jacobi blocks only where they cost less per verified token.

A Jacobi iteration over a block of ``b`` positions (Santilli2023 §3.3, Algorithm 2; lookahead's
verification, Fu et al. 2024 §3) verifies ``t ≥ 1`` tokens in one decoder call of cost ``c_b``;
greedy's call of one position costs ``c_1``. The papers count iterations, which is the speed-up only
where ``c_b = c_1`` (a memory-bound step on a GPU). On a CPU whose cache holds a small model's weights a
block's multiply-adds are not free (``c_b`` 1.2–2× ``c_1`` at b = 3–4), so with few accepted tokens a
call the blocks are slower than greedy. The iteration pays where

    c_b / t  <  c_1                                                   (cost per verified token)

The gate measures both sides in the run itself — the native verification loop's seconds over its
calls, the tokens its iterations accepted — and decides before each native run (one sentence's
iterations at batch 1): **parallel** (the configured blocks) or **sequential** (windows of one
position from the current one: HGJ's second phase, Algorithm 3, with ``L`` the position reached).
Either way the output is greedy's (Proposition 1); only the time differs. Each side is measured on
``WARMUP`` runs first (parallel first), after one run of it that is not measured (a process's first
calls of a shape pay one-off costs); after that the cheaper side runs, and the other is tried again
once every ``explore_interval`` runs, rarer the larger the measured gap (a costly side is retried less).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from fairseq_stream.errors import FairseqStreamError

#: ``--jacobi-parallel``: auto (the gate), always (the papers' blocks), never (one position a call: HGJ with L = 0)
PARALLEL_MODES = ("auto", "always", "never")
#: runs measured on each side before the gate compares them
WARMUP = 3
#: the memory of the estimates: a run's weight decays by this factor with every later run of its side
DECAY = 0.9


def check_mode(mode: str) -> None:
    """``--jacobi-parallel``'s value, checked where a configuration takes it (Jacobi's and lookahead's)."""
    if mode not in PARALLEL_MODES:
        raise FairseqStreamError(f"--jacobi-parallel must be one of {', '.join(PARALLEL_MODES)}, got {mode!r}")


def seconds_per_token(seconds: float, calls: float, tokens: float, iterations: float) -> float:
    """``c / t``: a call's seconds (``seconds / calls``) over the tokens an iteration verifies (``tokens / iterations``)."""
    return seconds / calls * iterations / tokens if calls and tokens else math.inf


@dataclass
class _Side:
    """One side's decayed sums: seconds and calls of its native runs, tokens and iterations they verified."""

    seconds: float = 0.0
    calls: float = 0.0
    tokens: float = 0.0
    iterations: float = 0.0
    runs: int = 0  # measured
    seen: int = 0  # runs, the unmeasured first one included

    def add(self, seconds: float, calls: int, tokens: int, iterations: int) -> None:
        self.seconds = DECAY * self.seconds + seconds
        self.calls = DECAY * self.calls + calls
        self.tokens = DECAY * self.tokens + tokens
        self.iterations = DECAY * self.iterations + iterations
        self.runs += 1

    @property
    def per_token(self) -> float:
        return seconds_per_token(self.seconds, self.calls, self.tokens, self.iterations)


def explore_interval(gap: float) -> int:
    """Runs between two tries of the side that measured slower, ``gap`` = its cost per token over the other's − 1:
    every 16th run at no gap, every 48th at a gap of 0.2 (a try costs the gap on one sentence)."""
    return 16 + int(160 * min(max(gap, 0.0), 1.0))


class ParallelGate:
    """Decides, before each native run of one sentence's iterations, whether its blocks are parallel (see the
    module's docstring). ``mode`` is ``--jacobi-parallel``; only ``auto`` measures. ``stats`` gets each side's
    totals (``jacobi_parallel_*``: the closing statistics line, ``engine/stats.py``'s ``jacobi_parallel_summary``)."""

    def __init__(self, mode: str, stats: Any = None) -> None:
        self.mode = mode
        self.stats = stats
        self.sides = {True: _Side(), False: _Side()}
        self.decided = 0  # decisions made after both sides' warm-up
        self.last_try = 0  # the decision that last tried the slower side

    @property
    def measures(self) -> bool:
        return self.mode == "auto"

    def parallel(self) -> bool:
        """The next native run's side."""
        if self.mode != "auto":
            return self.mode == "always"
        par, seq = self.sides[True], self.sides[False]
        if par.runs < WARMUP:
            return True
        if seq.runs < WARMUP:
            return False
        self.decided += 1
        faster = par.per_token <= seq.per_token
        slow, fast = (seq, par) if faster else (par, seq)
        if self.decided - self.last_try >= explore_interval(slow.per_token / fast.per_token - 1):
            self.last_try = self.decided
            return not faster
        return faster

    def observe(self, parallel: bool, seconds: float, accepted: Sequence[int]) -> None:
        """What a native run on side ``parallel`` did: its seconds over ``len(accepted) + 1`` calls (the last call's
        scores go back to the Python step), the tokens each of its iterations accepted."""
        if not self.measures or not accepted or seconds <= 0:
            return
        side = self.sides[parallel]
        side.seen += 1
        name = "parallel" if parallel else "sequential"
        if self.stats is not None:
            self.stats.add_extra(f"jacobi_parallel_{name}_runs")
        if side.seen == 1:  # its shapes' first calls in this process: one-off costs
            return
        run = {"seconds": seconds, "calls": len(accepted) + 1, "tokens": sum(accepted), "iterations": len(accepted)}
        side.add(**run)
        if self.stats is not None:
            for what, value in run.items():
                self.stats.add_extra(f"jacobi_parallel_{name}_{what}", value)  # sums: they merge across shards

