"""Lookahead decoding's n-gram pool (ops/ngram_pool.py): the C++ operator equals the PyTorch reference —
the pool it writes and the feed it returns — on random states with repeated keys, rows at BOS, feeds
narrower than the pool and a prior's two-token table; and the reference does what its docstring says."""
from __future__ import annotations

import os
import shutil

import pytest
import torch

from fairseq_stream.ops import ngram_pool

HAVE_CXX = shutil.which(os.environ.get("CXX", "c++")) is not None
BOS, PAD = 0, 1


def _state(seed: int, s: int, ngram: int, vocab: int, width: int):
    """A group of ``s`` rows as lookahead's Jacobi state has them: verified tokens, then PAD; the feed
    starts with the last verified token (BOS for a row with none)."""
    gen = torch.Generator().manual_seed(seed)
    t = 12
    verified = torch.randint(0, t - 2, (s,), generator=gen)
    verified[0] = 0  # a row at BOS
    verified[1] = max(int(verified[1]), 1)  # a row with two tokens (below: its key in the prior)
    tokens = torch.randint(2, vocab, (s, t), generator=gen)  # a small vocabulary: keys repeat
    tokens = tokens.masked_fill(torch.arange(t) >= verified.unsqueeze(1), PAD)
    seq = torch.nn.functional.pad(tokens, (1, 0), value=BOS)
    feed = torch.randint(2, vocab, (s, width), generator=gen)
    feed[:, 0] = seq.gather(1, verified.unsqueeze(1)).squeeze(1)
    window = torch.full((s,), width)
    window[-1] = max(width // 2, 1)  # a row whose window is narrower than the block
    feed = feed.masked_fill(torch.arange(width) >= window.unsqueeze(1), PAD)
    pool = torch.randint(2, vocab, (vocab + 1, ngram - 1), generator=gen)
    pool[torch.randint(0, vocab + 1, (vocab // 2,), generator=gen), 0] = PAD  # tokens the pool has no n-gram for
    # the prior's two-token table: keys seen in the tokens and some that are not, one continuation PAD-first
    pairs = torch.stack([seq[:, :-1].reshape(-1), seq[:, 1:].reshape(-1)], 1)
    # row 1's own (prev, last) key is in the table with a PAD-first continuation (no guess: the pool's comes)
    own = seq[1, verified[1] - 1] * vocab + seq[1, verified[1]]
    keys = torch.unique(torch.cat([pairs[::2, 0] * vocab + pairs[::2, 1], own.view(1),
                                   torch.randint(0, vocab * vocab, (7,), generator=gen)]))
    conts = torch.randint(2, vocab, (keys.numel(), ngram - 1), generator=gen)
    conts[keys == own, 0] = PAD
    pool[seq[1, verified[1]], 0] = 2
    return pool, tokens, verified, feed, window, (keys, conts, vocab)


@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")
@pytest.mark.quick_every_case
@pytest.mark.parametrize("ngram", [2, 3, 5])
def test_cpp_equals_the_reference(ngram):
    assert ngram_pool.cpu_kernel() is not None  # where a compiler is, it builds: a fallback would hide a broken kernel
    runs = 0
    for seed in range(6):
        for width in range(1, ngram + 1):
            for collect in (0, 1, ngram):
                for prior in (False, True):
                    pool, tokens, verified, feed, window, bigrams = _state(seed, 5, ngram, 9, width)
                    pools, outs = [], []
                    for native in (True, False):
                        p = pool.clone()
                        guesses, backend = ngram_pool.propose(p, tokens, verified, feed, window, collect, bos=BOS,
                                                              pad=PAD, bigrams=bigrams if prior else None,
                                                              native=native)
                        assert backend == ("cpp" if native else "reference")
                        pools.append(p)
                        outs.append(guesses)
                    assert torch.equal(pools[0], pools[1])
                    assert (outs[0] is None) == (outs[1] is None) == (width < 2)
                    if outs[0] is not None:
                        assert torch.equal(outs[0], outs[1])
                    runs += 1
    assert runs == 6 * ngram * 3 * 2


def test_the_reference_learns_and_guesses_in_its_order():
    """Key ``y_c`` gets ``y_{c+1}..y_{c+N−1}``; the prior's two-token continuation comes before the
    pool's, the pool's before the iteration's own guess; the next feed is PAD past a row's window."""
    vocab, a, b, c, d = 9, 2, 3, 4, 5
    pool = torch.full((vocab + 1, 2), PAD)
    tokens = torch.tensor([[a, b, c, PAD, PAD]])
    verified, width = torch.tensor([3]), torch.tensor([3])
    feed = torch.tensor([[c, d, d]])  # the last verified token, then the iteration's own guesses

    def next_feed(collect, bigrams=None, feed=feed, width=width):
        return ngram_pool.propose(pool, tokens, verified, feed, width, collect, bos=BOS, pad=PAD, bigrams=bigrams,
                                  native=False)[0]

    assert next_feed(2).tolist() == [[c, d, d]]  # nothing followed c yet: the iteration's own
    assert pool[a].tolist() == [b, c] and pool[BOS].tolist() == [a, b]  # the two keys before the newest
    pool[c] = torch.tensor([a, a])
    assert next_feed(0).tolist() == [[c, a, a]]  # the pool's
    assert next_feed(0, width=torch.tensor([2])).tolist() == [[c, a, PAD]]  # a window of two
    bigrams = (torch.tensor([b * vocab + c]), torch.tensor([[d, b]]), vocab)
    assert next_feed(0, bigrams).tolist() == [[c, d, b]]  # the prior's continuation of (b, c)
    assert next_feed(0, feed=feed[:, :1]) is None  # no room for a guess
