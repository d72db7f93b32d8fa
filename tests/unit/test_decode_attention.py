"""The CPU attention kernel of a decoder step (one query per row) against its PyTorch definition."""
from __future__ import annotations

import os

import pytest
import torch
from helpers import outputs_of_builds

from fairseq_stream.ops import decode_attention as da

pytestmark = pytest.mark.skipif(da.cpu_kernel() is None, reason="the C++ attention kernel cannot be built here")


def _inputs(rows: int, n: int, length: int, capacity: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, 4, 16, generator=g)
    keys = torch.randn(n, 4, capacity, 16, generator=g)[:, :, :length]  # a cache's filled slots (strided)
    values = torch.randn(n, 4, capacity, 16, generator=g)[:, :, :length]
    return q, keys, values


@pytest.mark.parametrize("rows,length", [(1, 1), (7, 5), (33, 40)])
def test_own_rows_equal_the_reference(rows, length):
    q, k, v = _inputs(rows, rows, length, length + 9)
    torch.testing.assert_close(da.attend(q, k, v, 0.25), da.reference(q, k, v, 0.25), rtol=1e-5, atol=1e-6)


def test_lengths_padding_and_shared_keys_equal_the_reference():
    q, k, v = _inputs(12, 3, 9, 9)
    g = torch.Generator().manual_seed(1)
    kv_row = torch.randint(0, 3, (12,), generator=g)  # rows of three sentences share their keys
    last = torch.randint(0, 9, (12,), generator=g)
    padding = torch.rand(3, 9, generator=g) > 0.6
    padding[:, 0] = False  # every row sees at least one key
    for kwargs in ({"kv_row": kv_row}, {"kv_row": kv_row, "key_padding": padding}):
        torch.testing.assert_close(da.attend(q, k, v, 0.3, **kwargs), da.reference(q, k, v, 0.3, **kwargs),
                                   rtol=1e-5, atol=1e-6)
    q, k, v = _inputs(12, 12, 9, 12)
    torch.testing.assert_close(da.attend(q, k, v, 0.3, last=last), da.reference(q, k, v, 0.3, last=last),
                               rtol=1e-5, atol=1e-6)


def test_a_row_does_not_depend_on_the_rows_beside_it():
    # What keeps var-stream = var-batch exact: bit-identical results in any batch.
    q, k, v = _inputs(40, 40, 17, 20)
    whole = da.attend(q, k, v, 0.125)
    for lo, hi in ((0, 1), (3, 8), (11, 40)):
        assert torch.equal(da.attend(q[lo:hi], k[lo:hi], v[lo:hi], 0.125), whole[lo:hi])


def test_bad_shapes_are_refused():
    q, k, v = _inputs(3, 3, 4, 4)
    with pytest.raises(RuntimeError, match="without kv_row"):
        da.attend(q, k[:2], v[:2], 0.1)
    with pytest.raises(RuntimeError, match="float32"):
        da.attend(q.double(), k.double(), v.double(), 0.1)


def test_a_query_depends_on_its_visible_keys_only():
    # Where a sentence's keys sit in a slot buffer (left padding, a wider buffer) and how many
    # queries share a block must not change a bit: the kernel reads the visible span from its start.
    q, k, v = _inputs(1, 1, 6, 6, seed=3)
    alone = da.attend(q, k, v, 0.2)
    for before, after in ((0, 3), (5, 0), (2, 9), (7, 1)):
        pad_k = torch.randn(1, 4, before + 6 + after, 16)
        pad_v = torch.randn(1, 4, before + 6 + after, 16)
        pad_k[:, :, before: before + 6], pad_v[:, :, before: before + 6] = k, v
        padding = torch.ones(1, before + 6 + after, dtype=torch.bool)
        padding[:, before: before + 6] = False
        assert torch.equal(da.attend(q, pad_k, pad_v, 0.2, key_padding=padding), alone), (before, after)


def test_a_block_query_equals_the_single_query_step_at_its_position():
    # Jacobi and speculative blocks: query j of a row, with `last`, gets the bits of the
    # one-query step over the keys up to its own position.
    q, k, v = _inputs(5, 1, 13, 13, seed=4)
    block = da.attend(q, k, v, 0.3, kv_row=torch.zeros(5, dtype=torch.long), last=torch.arange(8, 13))
    for j in range(5):
        step = da.attend(q[j: j + 1], k[:, :, : 8 + j + 1], v[:, :, : 8 + j + 1], 0.3)
        assert torch.equal(block[j: j + 1], step), j


@pytest.mark.parametrize("with_last", [False, True])
def test_keys_read_through_a_row_table_are_the_gathered_layouts_bits(with_last):
    # Caches that never move (model/row_arena.py): key j of row r lies in buffer row table[r, j].
    # The kernel reads it with the same instructions as the same keys gathered into rows of their
    # own, so the outputs are equal bit for bit (the native step's exactness rests on it).
    g = torch.Generator().manual_seed(5)
    rows, buffer_rows, length = 9, 14, 11
    q = torch.randn(rows, 4, 16, generator=g)
    keys = torch.randn(buffer_rows, 4, length + 3, 16, generator=g)
    values = torch.randn(buffer_rows, 4, length + 3, 16, generator=g)
    table = torch.randint(0, buffer_rows, (rows, length + 3), generator=g)
    last = torch.randint(0, length, (rows,), generator=g) if with_last else None
    slots = torch.arange(length + 3).expand_as(table)
    own_k = keys[table, :, slots].transpose(1, 2).contiguous()[:, :, :length]
    own_v = values[table, :, slots].transpose(1, 2).contiguous()[:, :, :length]
    through = da.attend(q, keys[:, :, :length], values[:, :, :length], 0.25, last=last, row_table=table)
    assert torch.equal(through, da.attend(q, own_k, own_v, 0.25, last=last))
    torch.testing.assert_close(through, da.reference(q, keys[:, :, :length], values[:, :, :length], 0.25, last=last,
                                                     row_table=table), rtol=1e-5, atol=1e-6)
    bad = table.clone()
    bad[0, 0] = buffer_rows  # a buffer row that is not there
    with pytest.raises(RuntimeError, match="row_table out of range"):
        da.attend(q, keys[:, :, :length], values[:, :, :length], 0.25, row_table=bad)


@pytest.mark.parametrize("head_dim", [16, 64, 24])
def test_rows_of_one_sentence_attend_together_with_the_bits_of_each_alone(head_dim):
    # Consecutive rows with one kv_row (a sentence's beam) are attended as a group, chunk by chunk, so what the first
    # row reads the others find in cache; each row's arithmetic is its own, so its bits are those of the row alone.
    # Runs of 11 rows (two groups), spans over several chunks, odd lengths, own `last`s and padding.
    g = torch.Generator().manual_seed(7)
    sentences, length = 4, 37
    kv_row = torch.tensor([0] * 11 + [1] * 3 + [2] + [3] * 5)
    rows = kv_row.numel()
    q = torch.randn(rows, 4, head_dim, generator=g)
    keys = torch.randn(sentences, 4, length, head_dim, generator=g)
    values = torch.randn(sentences, 4, length, head_dim, generator=g)
    last = torch.randint(0, length, (rows,), generator=g)
    padding = torch.rand(sentences, length, generator=g) > 0.8
    padding[:, 0] = False
    for kwargs in ({}, {"last": last}, {"key_padding": padding}, {"last": last, "key_padding": padding}):
        together = da.attend(q, keys, values, 0.2, kv_row=kv_row, **kwargs)
        for r in range(rows):
            alone = {name: t[r: r + 1] for name, t in kwargs.items() if name == "last"}
            if "key_padding" in kwargs:
                alone["key_padding"] = padding[kv_row[r]: kv_row[r] + 1]
            one = da.attend(q[r: r + 1], keys[kv_row[r]: kv_row[r] + 1], values[kv_row[r]: kv_row[r] + 1], 0.2,
                            **alone)
            assert torch.equal(together[r: r + 1], one), (kwargs.keys(), r)
        torch.testing.assert_close(together, da.reference(q, keys, values, 0.2, kv_row=kv_row, **kwargs),
                                   rtol=1e-5, atol=1e-5)


_ISA_RULES = r"""
import sys, torch
from torch.utils.cpp_extension import load
load(name="decode_attention_isa_" + sys.argv[2], sources=[sys.argv[1]], extra_cflags=sys.argv[3].split(),
     build_directory=sys.argv[4], verbose=False)
sys.path.insert(0, sys.argv[6])
from fairseq_stream.ops.decode_attention import reference
attend = torch.ops.fairseq_stream.decode_attention
g = torch.Generator().manual_seed(3)
out = {}
for hd in (16, 64, 24):
    kv_row = torch.tensor([0] * 9 + [1] * 2)
    q = torch.randn(11, 4, hd, generator=g)
    k = torch.randn(2, 4, 37, hd, generator=g)
    v = torch.randn(2, 4, 37, hd, generator=g)
    last = torch.randint(0, 37, (11,), generator=g)
    pad = torch.rand(2, 37, generator=g) > 0.8
    pad[:, 0] = False
    together = attend(q, k, v, kv_row, last, pad, 0.2, None)
    out[f"close {hd}"] = bool(torch.allclose(together, reference(q, k, v, 0.2, kv_row=kv_row, last=last,
                                                                 key_padding=pad), rtol=1e-5, atol=1e-5))
    out[f"alone {hd}"] = all(torch.equal(together[r: r + 1], attend(q[r: r + 1], k[kv_row[r]: kv_row[r] + 1],
                             v[kv_row[r]: kv_row[r] + 1], None, last[r: r + 1], pad[kv_row[r]: kv_row[r] + 1], 0.2,
                             None)) for r in range(11))
    block = attend(q[:5], k[:1], v[:1], torch.zeros(5, dtype=torch.long), torch.arange(20, 25), None, 0.3, None)
    out[f"block {hd}"] = all(torch.equal(block[j: j + 1], attend(q[j: j + 1], k[:1, :, : 21 + j], v[:1, :, : 21 + j],
                             None, None, None, 0.3, None)) for j in range(5))
torch.save(out, sys.argv[5])
"""


@pytest.mark.slow
def test_avx2_and_scalar_builds_keep_the_kernels_rules(tmp_path):
    """Built for AVX2 (+FMA; 8-float groups) and for no AVX at all, the kernel still equals its PyTorch definition, a
    row's bits do not depend on the rows attended with it, and a block's query has the bits of the single-query step
    at its position (the bits themselves may differ from this CPU's build: another lane tree). ~1 min: two builds."""
    source = os.path.join(os.path.dirname(da.__file__), "csrc", da._SOURCE)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(da.__file__)))
    script = _ISA_RULES.replace("sys.argv[6]", repr(repo))
    for checks in outputs_of_builds(tmp_path, source, script, (
            ("avx2", "-O3 -ffast-math -fopenmp -mavx2 -mfma -mno-avx512f"),
            ("noavx", "-O2 -ffast-math -fopenmp -mno-avx -mno-avx2 -mno-fma -mno-avx512f"))):
        assert all(checks.values()), {name: ok for name, ok in checks.items() if not ok}
