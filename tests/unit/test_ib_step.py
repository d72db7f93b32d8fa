"""The fused ib-beam step (C++) equals the PyTorch reference, bit for bit, step after step.

Random groups run both implementations of :meth:`IBBeamSearch.search_step` from the same state,
with slot candidates drawn on a coarse grid (so equal scores, and the tie order of every
selection, are exercised) and EOS often enough that hypotheses end early, late and at the
maximum length: the next rows, the finished sentences' buffers and the new state must be
identical for IBDecoder, IBDecoder+SA and IMDecoder, both ending rules and both float dtypes.
"""
import math
import os
import shutil

import pytest
import torch

from fairseq_stream.models.transformer_ib import IBSpec
from fairseq_stream.ops import ib_step as fused
from fairseq_stream.strategies.ib_beam import FinishedIB, IBBeamSearch
from helpers import clone_state

# Where a C++ compiler is, the operator must build (a silent fallback would hide a broken kernel).
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")

EOS, PAD, BOS, V = 2, 1, 0, 12
FIN = ("fin_tokens", "fin_scores", "fin_len", "fin_total")


def test_the_operator_builds():
    assert fused.kernel() is not None


def _candidates(g, search, state, dtype, eos_rate):
    """Each row's top-Bc per slot, best first, on a grid of 0.5 (ties); EOS forced at max_len."""
    r, z, bc = state.row_slot.numel(), search.z, search.beam
    vals = -torch.round(torch.rand(r, z, bc, generator=g, dtype=torch.float64) * 8) / 2
    vals = vals.sort(dim=2, descending=True).values.to(dtype)
    toks = torch.stack([torch.randperm(V - 3, generator=g)[:bc] + 3 for _ in range(r * z)]).view(r, z, bc)
    toks = toks.masked_fill(torch.rand(r, z, bc, generator=g) < eos_rate, EOS)
    slot = state.tokens.size(2) + torch.arange(z)
    at_max = slot.unsqueeze(0) >= state.max_len.index_select(0, state.row_slot // search.beam).unsqueeze(1)  # (R, z)
    toks[..., 0] = torch.where(at_max, EOS, toks[..., 0])
    vals[..., 1:] = vals[..., 1:].masked_fill(at_max.unsqueeze(2), -math.inf)
    return vals, toks


def _assert_same_state(x, y):
    for name, a in vars(x).items():
        b = getattr(y, name)
        if name in FIN:  # the last slot is the reference's scratch for candidates that did not end
            a, b = a[:, :-1], b[:, :-1]
        assert (torch.equal(a, b) if torch.is_tensor(a) else a == b), name


def _assert_same(a, b):
    for name in ("parents", "feed", "block_mask"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None) and (x is None or torch.equal(x, y)), name
    ia, ib = a.index, b.index
    assert torch.equal(ia.sentences, ib.sentences) and torch.equal(ia.local, ib.local)
    assert torch.equal(ia.slot, ib.slot) and ia.width == ib.width
    _assert_same_state(a.state, b.state)
    assert isinstance(a.finished, FinishedIB) == isinstance(b.finished, FinishedIB)
    if isinstance(a.finished, FinishedIB):
        fa, fb = a.finished, b.finished
        for name in ("sentences", "length", "total", "n_final", "tokens", "scores"):
            x, y = getattr(fa, name), getattr(fb, name)
            if name in ("tokens", "scores", "length", "total"):
                x, y = x[:, :-1], y[:, :-1]
            assert torch.equal(x, y), name
        ha, hb = fa.to_hypotheses(), fb.to_hypotheses()
        assert sorted(ha) == sorted(hb)
        for sid in ha:
            assert [(h.score, h.tokens.tolist()) for h in ha[sid]] == [(h.score, h.tokens.tolist()) for h in hb[sid]]


def _run(search, seed, dtype, sentences=6, eos_rate=0.12):
    g = torch.Generator().manual_seed(seed)
    max_len = torch.randint(2, 14, (sentences,), generator=g)
    ids = torch.arange(sentences) * 3 + 1
    state, steps, done = search.init_state(ids, max_len, max_len + 2).state, 0, []
    while state.sentences.numel():
        vals, toks = _candidates(g, search, state, dtype, eos_rate)
        ref = search.search_step(clone_state(state), vals, toks, kernel=False)
        got = search.search_step(state, vals, toks, kernel=True)
        _assert_same(got, ref)
        if isinstance(got.finished, FinishedIB):
            done += got.finished.sentences.tolist()
        state, steps = got.state, steps + 1
    assert sorted(done) == ids.tolist()
    return steps


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("h,c,beam,finalize", [
    (2, 1, 4, "top"), (2, 1, 4, "all"), (2, 1, 1, "top"), (2, 2, 3, "top"), (4, 1, 4, "top"), (4, 1, 2, "all"),
])
def test_the_operator_equals_the_reference_over_whole_searches(h, c, beam, finalize, dtype):
    search = IBBeamSearch(IBSpec(h=h, c=c), None, beam=beam, nbest=beam, lenpen=1.0, eos=EOS, pad=PAD, bos=BOS,
                          dedup=False, dtype=dtype, finalize=finalize)
    # per word, so that a step of z words ends about as often; "all" takes every ending (fewer)
    eos_rate = (0.24 if finalize == "top" else 0.06) / search.z
    assert max(_run(search, seed, dtype, eos_rate=eos_rate) for seed in range(4)) > 3


def test_the_reference_runs_where_the_operator_does_not_fit():
    search = IBBeamSearch(IBSpec(), None, beam=2, nbest=1, lenpen=1.0, eos=EOS, pad=PAD, bos=BOS, dedup=False,
                          dtype=torch.float32)
    state = search.init_state(torch.tensor([1]), torch.tensor([5]), torch.tensor([7])).state
    vals, toks = _candidates(torch.Generator().manual_seed(0), search, state, torch.float16, 0.0)
    assert not fused.fits([getattr(state, f) for f in fused.FIELDS], vals)  # half candidates: the reference
    assert fused.fits([getattr(state, f) for f in fused.FIELDS], vals.float())
