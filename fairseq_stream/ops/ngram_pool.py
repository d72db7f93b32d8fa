"""Lookahead decoding's n-gram pool: learn the n-grams a verification completed, guess the next ones.

Fu et al. 2024 (Lookahead Decoding, §3): the pool maps a token to the ``N − 1`` tokens that most
recently followed it in the run's verified output; a verification's guess for a sentence is the
pool's continuation of its last verified token. :mod:`fairseq_stream.search.lookahead` owns the
pool (a device table ``(V + 1, N − 1)``, row ``V`` scratch) and calls :func:`propose` once per
verification. :func:`reference_collect`, :func:`reference_guesses` and :func:`reference_feed` are its
PyTorch definition
(any device, no host read); on a CPU the same runs as one C++ operator (``csrc/ngram_pool.cpp``,
equal results: ``tests/unit/test_ngram_pool.py``), because at batch 1 the reference's ~25 small
operations per verification cost more than their arithmetic (about a tenth of a verification's time
on the demo model). Where the kernel cannot be built the reference runs.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_stream.ops import extension
from fairseq_stream.ops.backends import device_choice

#: Integers only: the exact flags of the step operators suffice.
KERNEL_FLAGS: Tuple[str, ...] = extension.EXACT_FLAGS
_SOURCE = "ngram_pool.cpp"
#: The name of the statistics' line (``step operators: ...``) and of its entry in ``backends.DEVICE_TABLE``.
OPERATOR = "ngram_pool"

#: A prior's two-token table: its sorted keys ``prev · vocab + last`` (K,), their continuations
#: (K, N − 1), and ``vocab``.
Bigrams = Tuple[Tensor, Tensor, int]
_EMPTY = torch.empty(0, dtype=torch.long)  # no prior: the operator's empty two-token table


def cpu_kernel() -> Any:
    """The built kernel module (op ``torch.ops.fairseq_stream.ngram_pool_propose``), or None."""
    return extension.load(_SOURCE, KERNEL_FLAGS, "n-gram pool")


def runs_natively(pool: Tensor) -> bool:
    """Whether :func:`propose` runs the C++ operator for ``pool`` (a CPU pool, the kernel built and chosen)."""
    return pool.device.type == "cpu" and device_choice(OPERATOR, "cpu") == "cpp" and cpu_kernel() is not None


def propose(pool: Tensor, tokens: Tensor, verified: Tensor, feed: Tensor, width: Tensor, collect: int, *, bos: int,
            pad: int, bigrams: Optional[Bigrams] = None, native: bool = True) -> Tuple[Optional[Tensor], str]:
    """Write the n-grams of the ``collect`` keys before each row's newest complete one into ``pool``
    (in place), then guess: the next feed (S, b) — the last verified token, then the guesses, PAD from
    each row's window ``width`` on — or None where the feed has no room for a guess (``b < 2``).
    Returns it and the backend that ran (``cpp`` or ``reference``; ``native=False`` forces the
    reference, as ``--step-backend reference``).

    ``tokens`` (S, T): each row's verified tokens, ``verified`` (S,) how many, ``feed`` (S, b ≤ N): the
    last verified token, then the Jacobi iteration's own guesses.
    """
    if native and runs_natively(pool):
        keys, conts, vocab = bigrams if bigrams is not None else (_EMPTY, _EMPTY, 0)
        out = torch.ops.fairseq_stream.ngram_pool_propose(pool, tokens, verified, feed, width, keys, conts, collect,
                                                          bos, pad, vocab)
        return (out if feed.size(1) >= 2 else None), "cpp"
    reference_collect(pool, tokens, verified, collect, bos=bos)
    if feed.size(1) < 2:
        return None, "reference"
    guesses = reference_guesses(pool, tokens, verified, feed, bos=bos, pad=pad, bigrams=bigrams)
    return reference_feed(feed, guesses, width, pad=pad), "reference"


def reference_collect(pool: Tensor, tokens: Tensor, verified: Tensor, collect: int, *, bos: int) -> None:
    """Write into ``pool`` the key ``y_c`` (BOS = column 0) and its continuation ``y_{c+1}..y_{c+N−1}``
    for the ``collect`` keys before each row's newest complete one (some were written before: the
    same values); a key before BOS writes the scratch row."""
    g = pool.size(1)
    seq = F.pad(tokens, (1, 0), value=bos)  # (S, T + 1): BOS, y_1, y_2, ...
    c = verified.unsqueeze(1) - g - torch.arange(collect, device=seq.device)  # (S, collect) key columns
    valid = c >= 0
    c = c.clamp(min=0)
    keys = seq.gather(1, c).masked_fill(~valid, pool.size(0) - 1)  # invalid → the scratch row
    cols = c.unsqueeze(2) + torch.arange(1, g + 1, device=seq.device)  # (S, collect, g)
    conts = seq.gather(1, cols.view(cols.size(0), -1).clamp(max=seq.size(1) - 1)).view_as(cols)
    pool.index_put_((keys.reshape(-1),), conts.reshape(-1, g))


def reference_guesses(pool: Tensor, tokens: Tensor, verified: Tensor, feed: Tensor, *, bos: int, pad: int,
                      bigrams: Optional[Bigrams] = None) -> Tensor:
    """(S, N − 1) the prior's continuation of the last two verified tokens where ``bigrams`` has one,
    else the pool's of the last one where it has one, else the iteration's own guess ``feed[:, 1:]``."""
    last = feed[:, 0]  # (S,) the last verified token (BOS first)
    pooled = pool.index_select(0, last)  # (S, N − 1)
    if bigrams is not None:
        seq = F.pad(tokens, (1, 0), value=bos)  # BOS, y_1, ...: y_v is ``last``
        prev = seq.gather(1, (verified - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        two = bigram_lookup(bigrams, prev.masked_fill(verified < 1, -1), last, pad)
        pooled = torch.where(two[:, :1] != pad, two, pooled)
    own = F.pad(feed[:, 1:], (0, pool.size(1) + 1 - feed.size(1)), value=pad)
    return torch.where(pooled[:, :1] != pad, pooled, own)


def reference_feed(feed: Tensor, guesses: Tensor, width: Tensor, *, pad: int) -> Tensor:
    """The next feed: ``feed``'s first column (the last verified token), then ``guesses``, PAD from each
    row's window ``width`` on (``JacobiDecoding.with_guesses`` places a proposer's guesses by it)."""
    b = feed.size(1)
    out = torch.cat([feed[:, :1], guesses[:, : b - 1]], dim=1)
    return out.masked_fill(torch.arange(b, device=feed.device) >= width.unsqueeze(1), pad)


def bigram_lookup(bigrams: Bigrams, prev: Tensor, last: Tensor, pad: int) -> Tensor:
    """(S, N − 1) the continuation of each row's last two tokens ``prev``, ``last`` (S,), ``pad`` where the
    table has none (a row whose ``prev`` is negative has no two tokens yet)."""
    keys, conts, vocab = bigrams
    if keys.numel() == 0:
        return torch.full((last.size(0), conts.size(1)), pad, dtype=torch.long, device=last.device)
    query = prev * vocab + last
    at = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
    hit = (keys.index_select(0, at) == query) & (prev >= 0)
    return conts.index_select(0, at).masked_fill(~hit.unsqueeze(1), pad)
