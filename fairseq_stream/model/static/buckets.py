"""The buckets of a static step: how many rows and cache slots its buffers have for a group.

Rows go on a geometric ladder, finer past :data:`FINE_ROWS` (:func:`row_bucket`), cache slots on a doubling
one (:func:`length_bucket`); rows past the live ones are padding rows (masked, never read back).
"""
from __future__ import annotations

MIN_ROWS = 8  # the smallest row bucket: tiny groups share one
MIN_SLOTS = 16  # the smallest cache-length bucket (the eager cache's first allocation, too)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


#: Above this many rows the row ladder has FINE_STEPS rungs per doubling instead of one: such a step
#: is compute-bound, so its padding costs its share of the time (3,200 rows ran as 4,096, 28% waste:
#: docs/history/results-2026-11.md, "On a GPU, round 2"); below, a step is launch-bound and fewer buckets (graphs) win.
FINE_ROWS = 512
FINE_STEPS = 8


def row_bucket(rows: int) -> int:
    """The row bucket of ``rows`` live rows: 8, 16, ..., 512, then steps of 1/8 of the power of two
    below (576, 640, ..., 1024, 1152, ...): past 8 rows under half of a step is padding, past 512
    rows at most 12.5% (one row in a bucket of 8 is 7/8)."""
    if rows <= FINE_ROWS:
        return max(MIN_ROWS, next_pow2(rows))
    step = next_pow2(rows) // (2 * FINE_STEPS)
    return -(-rows // step) * step


def length_bucket(slots: int) -> int:
    """The cache-length bucket holding ``slots`` slots: 16, 32, 64, ..."""
    return max(MIN_SLOTS, next_pow2(slots))
