"""Caches that never move (``model/row_arena.py``) hold what the copying caches hold.

A random life of a stream's caches — steps that write a block at each row's length, beam reorders
with repetition, splits and joins, refills with new rows, rejected block tokens — is played on a
copying :class:`RowCache` and on one over a :class:`RowArena`; after every operation each row's
filled slots read through the table equal the copying cache's, and a reorder never copies keys.
"""
from __future__ import annotations

from typing import Optional

import pytest
import torch

from fairseq_stream.model import row_arena
from fairseq_stream.model.row_cache import RowCache

H, HD, LAYERS = 2, 3, 2


def _empty(rows: int, fixed: bool, capacity: int = 4, slots: Optional[int] = None) -> RowCache:
    """A new cache; a fixed one over buffers of ``capacity`` positions with a table of ``slots`` columns."""
    shape = (rows, H, capacity, HD)
    keys, values = [torch.zeros(shape) for _ in range(LAYERS)], [torch.zeros(shape) for _ in range(LAYERS)]
    lens = torch.zeros(rows, dtype=torch.long)
    return RowCache.fixed(keys, values, lens, 0, slots=slots) if fixed else RowCache.of(keys, values, lens, 0)


def _write(cache: RowCache, block: torch.Tensor) -> RowCache:
    """What a step writes: ``block`` (R, 2·layers, H, b, hd) at each row's own length."""
    r, b = cache.rows, block.size(3)
    cache.reserve(b)
    cache.write_slots(b)
    rows = cache.home if cache.table is not None else torch.arange(r)
    slots = cache.lens.unsqueeze(1) + torch.arange(b)
    for i, buf in enumerate(cache.keys + cache.values):
        buf.index_put_((rows.view(r, 1, 1), torch.arange(H).view(1, H, 1), slots.view(r, 1, b)), block[:, i])
    return cache.advanced(b)


def _same(plain: RowCache, fixed: RowCache) -> None:
    assert torch.equal(plain.lens, fixed.lens) and plain.width == fixed.width
    seen = fixed.gathered()
    for a, b in zip(plain.keys + plain.values, seen.keys + seen.values):
        for r, n in enumerate(plain.lens.tolist()):
            assert torch.equal(a[r, :, :n], b[r, :, :n]), f"row {r}"


@pytest.mark.parametrize("path", ["operator", "reference"])
@pytest.mark.parametrize("capacity, slots", [(4, None), (12, 2)])
def test_a_streams_life_reads_the_same_keys_through_the_table(capacity, slots, path, monkeypatch):
    # (12, 2): the table doubles within buffers of 12 positions, which grow only past them (FIRST_SLOTS' way)
    if path == "reference":
        monkeypatch.setattr(row_arena, "_kernel", lambda: None)
    elif row_arena._kernel() is None:
        pytest.skip("the C++ row-arena operator cannot be built here")
    g = torch.Generator().manual_seed(0)
    plain, fixed = _empty(4, False), _empty(4, True, capacity, slots)
    grew = []
    for step in range(40):
        r = plain.rows
        op = step % 5
        if op in (0, 4):  # a step of one token
            block = torch.randn(r, 2 * LAYERS, H, 1, HD, generator=g)
            plain, fixed = _write(plain, block), _write(fixed, block)
        elif op == 1:  # a block of 3, then rejected block tokens: each row keeps 1 to 3 (rows of their own lengths)
            block = torch.randn(r, 2 * LAYERS, H, 3, HD, generator=g)
            plain, fixed = _write(plain, block), _write(fixed, block)
            _same(plain, fixed)
            keep = torch.randint(1, 4, (r,), generator=g)
            width = int((plain.lens - 3 + keep).max())
            plain, fixed = plain.accept(keep, 3, width), fixed.accept(keep, 3, width)
        elif op == 2:  # a beam reorder: rows repeated, some dropped
            rows = torch.randint(0, r, (max(1, r + int(torch.randint(-2, 3, (1,), generator=g))),), generator=g)
            rows = rows.sort().values
            keys_before = fixed.keys[0]
            plain, fixed = plain.select(rows), fixed.select(rows)
            assert fixed.keys[0] is keys_before or fixed.arena.rows > keys_before.size(0)  # no copy but a growth
        elif op == 3:  # split, then join with a refill's new rows
            cut = r // 2
            new_plain, new_fixed = _empty(2, False), _empty(2, True, capacity, slots)
            plain = RowCache.concat([plain.narrow(0, cut), plain.narrow(cut, r - cut), new_plain])
            fixed = RowCache.concat([fixed.narrow(0, cut), fixed.narrow(cut, r - cut), new_fixed])
        _same(plain, fixed)
        assert fixed.capacity <= fixed.arena.capacity
        grew.append((fixed.capacity, fixed.arena.capacity))
    assert max(arena for _, arena in grew) > capacity  # the buffers grew too
    assert slots is None or any(table < arena for table, arena in grew)  # a table narrower than its buffers


def test_the_operator_reorders_as_the_reference_does():
    # ops/csrc/row_arena.cpp against reference_select: two caches driven alike (steps, reorders with repetition in any
    # order, rows of their own lengths), the same tables, homes and buffer rows after every reorder, growths included
    if row_arena._kernel() is None:
        pytest.skip("the C++ row-arena operator cannot be built here")
    g = torch.Generator().manual_seed(3)
    caches = [_empty(3, True), _empty(3, True)]
    grew = 0
    for step in range(80):
        r = caches[0].rows
        block = torch.randn(r, 2 * LAYERS, H, 2, HD, generator=g)
        caches = [_write(c, block) for c in caches]
        if step % 3 == 0:  # rejected block tokens: rows of their own lengths
            keep = torch.randint(1, 3, (r,), generator=g)
            width = int((caches[0].lens - 2 + keep).max())
            caches = [c.accept(keep, 2, width) for c in caches]
        n = max(1, min(12, r + int(torch.randint(-2, 4, (1,), generator=g))))
        rows = torch.randint(0, r, (n,), generator=g)
        before = caches[0].arena.rows
        lens = caches[0].lens.index_select(0, rows)
        outs = [row_arena.select(caches[0].arena, caches[0].table, caches[0].home, lens, caches[0].width, rows, caches[0]),
                row_arena.reference_select(caches[1].arena, caches[1].table, caches[1].home, lens, caches[1].width, rows,
                                           caches[1])]
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1]), f"step {step}"
        assert caches[0].arena.rows == caches[1].arena.rows
        grew += caches[0].arena.rows > before
        caches = [RowCache.on_arena(c.arena, t, h, lens, c.width, c.uniform) for c, (t, h) in zip(caches, outs)]
    assert grew  # the buffers grew on the way


def test_a_beams_reorders_keep_the_buffers_bounded():
    # First children continue their parent's buffer row; the others take rows nobody reads.
    g = torch.Generator().manual_seed(1)
    k = 5
    fixed = _empty(k, True)
    for _ in range(60):
        fixed = _write(fixed, torch.randn(k, 2 * LAYERS, H, 1, HD, generator=g))
        fixed = fixed.select(torch.randint(0, k, (k,), generator=g).sort().values)
    assert fixed.arena.rows <= 2 * k, fixed.arena.rows


def test_buffers_with_spare_rows_are_taken_before_growing_and_the_rows_reached_are_kept():
    # A new CPU arena starts with the rows its decoder's arenas grew to (RowsReached): its spare buffer rows are free
    # from the start, taken by branching rows before any growth, and the keys read the same as a copying cache's.
    from fairseq_stream.model.row_arena import RowsReached

    g = torch.Generator().manual_seed(2)
    reached = RowsReached()
    small = RowCache.fixed(*_buffers(3), torch.zeros(3, dtype=torch.long), 0, reached=reached)
    for _ in range(6):  # every row branches into two: the 3-row buffers grow
        small = _write(small, torch.randn(small.rows, 2 * LAYERS, H, 1, HD, generator=g))
        small = small.select(torch.arange(small.rows).repeat_interleave(2)[: 2 * small.rows][:12])
    assert reached.rows == small.arena.rows > 3
    plain = _empty(3, False)
    roomy = RowCache.fixed(*_buffers(reached.rows), torch.zeros(3, dtype=torch.long), 0, reached=reached)
    assert roomy.rows == 3 and roomy.arena.rows == reached.rows
    buffers = roomy.keys[0]
    for _ in range(4):
        block = torch.randn(plain.rows, 2 * LAYERS, H, 1, HD, generator=g)
        plain, roomy = _write(plain, block), _write(roomy, block)
        rows = torch.arange(plain.rows).repeat_interleave(2)[:12]
        plain, roomy = plain.select(rows), roomy.select(rows)
        _same(plain, roomy)
    assert roomy.keys[0] is buffers and roomy.arena.rows == reached.rows  # no growth: the spare rows sufficed


def _buffers(rows: int, capacity: int = 8):
    shape = (rows, H, capacity, HD)
    return [torch.zeros(shape) for _ in range(LAYERS)], [torch.zeros(shape) for _ in range(LAYERS)]


def test_buffers_are_told_not_to_take_huge_pages_where_the_kernel_would_always_use_them(monkeypatch):
    # under transparent huge pages "always", one written position of a 256-position buffer would take 2 MiB
    from fairseq_stream.model import row_arena

    big = torch.empty(4, 2, 256, 64)  # 512 KiB: whole pages inside
    assert row_arena.no_huge_pages(big) == 0  # madvise accepted the page-aligned range
    assert row_arena.no_huge_pages(torch.empty(3)) == -1  # no whole page: nothing asked
    told = []
    monkeypatch.setattr(row_arena, "no_huge_pages", lambda t: told.append(t.shape))
    monkeypatch.setattr(row_arena, "THP_ALWAYS", False)
    row_arena.untouched(big, (2, 2, 8, 4))
    monkeypatch.setattr(row_arena, "THP_ALWAYS", True)
    out = row_arena.untouched(big, (2, 2, 8, 4))
    assert told == [(2, 2, 8, 4)] and out.shape == (2, 2, 8, 4)


def test_where_the_address_space_is_refused_the_arena_starts_small_and_translates_alike(demo_session, demo_sources,
                                                                                        monkeypatch):
    # strict overcommit may refuse 256 positions' worth of address space: the buffers then start at 16 and grow
    from fairseq_stream.model import block_decoder, native_decoder, row_arena

    if native_decoder.kernel_available() is not None:
        pytest.skip(native_decoder.kernel_available())

    data = demo_session.encode(demo_sources[:12])
    run = lambda: demo_session.translate(data, search="var-stream", gen={"beam": 4}, opts={"step_mode": "native"})  # noqa: E731
    expected = [h[0]["tokens"].tolist() for h in run().hypos]
    asked = []

    def refuse_large(like, shape):
        asked.append(shape[2])
        if shape[2] >= row_arena.FIRST_SLOTS:
            raise RuntimeError("DefaultCPUAllocator: not enough memory")
        return row_arena.untouched(like, shape)

    monkeypatch.setattr(block_decoder, "untouched", refuse_large)
    out = run()
    assert row_arena.FIRST_SLOTS in asked and min(asked) < row_arena.FIRST_SLOTS
    assert [h[0]["tokens"].tolist() for h in out.hypos] == expected and out.stats.step_mode["steps_native"] > 0


def test_a_decoders_new_cpu_arena_starts_with_the_rows_its_arenas_grew_to():
    from helpers import make_dictionary, tiny_transformer

    from fairseq_stream.model.block_decoder import BlockDecoder

    model = tiny_transformer(make_dictionary(), dtype=torch.float32, seed=1)  # held: the block decoder's is weak
    block = BlockDecoder(model.decoder)
    like = torch.zeros(1)
    assert block.empty_cache(2, like, fixed=True).arena.rows == 2
    block.rows_reached.saw(40)  # what a growth tells it (RowArena._grow_rows)
    cache = block.empty_cache(2, like, fixed=True)
    assert cache.rows == 2 and cache.arena.rows == 40 and cache.arena.reached is block.rows_reached
