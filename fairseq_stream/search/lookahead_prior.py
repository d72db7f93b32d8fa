"""A prior for lookahead decoding's n-gram pool: the model's own frequent continuations, counted offline.

Lookahead decoding (Fu et al. 2024, §3) guesses from a pool of n-grams that the model itself produced;
its pool starts empty and learns from the run's verified output. A translation model repeats its own
phrases across sentences, so the n-grams of its greedy output on *training* sources (e.g. the
translations ``scripts/train_draft.sh`` distils) are good guesses from the first sentence on. This is
the datastore idea of retrieval-based speculative decoding (He et al. 2023, REST) in lookahead's form:
for each key — the last verified token, and the last two — the continuation of ``N − 1`` tokens that
most often followed it. The guesses are verified like any other, so the output stays the model's
greedy output whatever the prior holds; a prior only changes how many tokens a call accepts.

A prior file (``torch.save`` of plain tensors, read with ``weights_only=True``) records the target
dictionary it was counted with (its size and a digest of its symbols) and ``N``; a run with another
dictionary or another ``--lookahead-ngram`` is refused with one line.
"""
from __future__ import annotations

import collections
import hashlib
import io
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Sequence

import torch
from torch import Tensor

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops.ngram_pool import Bigrams, bigram_lookup

FORMAT = "fairseq-stream lookahead prior"
VERSION = 1


def dictionary_digest(dictionary: Any) -> str:
    """A digest of a fairseq dictionary's symbols, in order (token ids mean the same only under it)."""
    return hashlib.sha1("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NgramPrior:
    """The most frequent continuation of ``ngram − 1`` tokens after one token and after two."""

    ngram: int
    vocab: int  # the target dictionary's size
    digest: str  # :func:`dictionary_digest` of it
    unigram: Tensor  # (K1, N) int64: the key token, then its continuation
    bigram_keys: Tensor  # (K2,) int64, sorted: previous token · vocab + last token
    bigram: Tensor  # (K2, N − 1) int64: each key's continuation

    def to(self, device: torch.device) -> "NgramPrior":
        return NgramPrior(self.ngram, self.vocab, self.digest, self.unigram.to(device), self.bigram_keys.to(device),
                          self.bigram.to(device))

    @property
    def bigrams(self) -> Bigrams:
        """The two-token table as :mod:`fairseq_stream.ops.ngram_pool` reads it."""
        return self.bigram_keys, self.bigram, self.vocab

    def bigram_guesses(self, prev: Tensor, last: Tensor, pad: int) -> Tensor:
        """(S, N − 1) the continuation of each row's last two tokens ``prev``, ``last`` (S,), ``pad`` where the
        prior has none (a row whose ``prev`` is negative has no two tokens yet)."""
        return bigram_lookup(self.bigrams, prev, last, pad)

    def as_dict(self) -> Dict[str, Any]:
        """What a file holds, in the narrowest integers that hold it (a shipped prior stays small)."""
        tokens = torch.int16 if self.vocab <= 2 ** 15 else torch.int32
        keys = torch.int32 if self.vocab ** 2 <= 2 ** 31 else torch.int64
        return {"format": FORMAT, "version": VERSION, "ngram": self.ngram, "vocab": self.vocab, "digest": self.digest,
                "unigram": self.unigram.to(tokens), "bigram_keys": self.bigram_keys.to(keys),
                "bigram": self.bigram.to(tokens)}


def count_prior(sentences: Iterable[Sequence[int]], *, ngram: int, dictionary: Any, bos: int,
                min_count: int = 1) -> NgramPrior:
    """The prior of ``sentences`` (token ids, EOS included; BOS is prepended as the decoder sees it):
    for each key seen at least ``min_count`` times with its most frequent continuation, that continuation
    (ties: the one seen first)."""
    if not 2 <= ngram <= 16:
        raise FairseqStreamError(f"--lookahead-ngram must be in [2, 16], got {ngram}")
    g, vocab = ngram - 1, len(dictionary)
    ones: Dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    twos: Dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for tokens in sentences:
        seq = [bos, *tokens]
        for c in range(len(seq) - g):
            cont = tuple(seq[c + 1:c + 1 + g])
            ones[seq[c]][cont] += 1
            if c >= 1:
                twos[seq[c - 1] * vocab + seq[c]][cont] += 1

    def best(counts: Dict[int, collections.Counter]) -> Dict[int, tuple]:
        out = {}
        for key, seen in counts.items():
            cont, n = seen.most_common(1)[0]
            if n >= min_count:
                out[key] = cont
        return out

    one, two = best(ones), best(twos)
    unigram = torch.tensor([[k, *c] for k, c in sorted(one.items())], dtype=torch.long).view(-1, ngram)
    keys = sorted(two)
    return NgramPrior(ngram, vocab, dictionary_digest(dictionary), unigram, torch.tensor(keys, dtype=torch.long),
                      torch.tensor([two[k] for k in keys], dtype=torch.long).view(-1, g))


def prior_bytes(prior: NgramPrior) -> bytes:
    """The file ``prior`` is written as (serialized in memory: the tool writes it whole or not at all)."""
    buffer = io.BytesIO()
    torch.save(prior.as_dict(), buffer)
    return buffer.getvalue()


def save_prior(prior: NgramPrior, path: str) -> int:
    """Write ``prior`` to ``path``; returns the file's size in bytes."""
    data = prior_bytes(prior)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def load_prior(path: str, *, ngram: int, dictionary: Any) -> NgramPrior:
    """The prior in ``path``, checked against the run's ``--lookahead-ngram`` and target ``dictionary``.

    Its contents are checked here, before the first decode: a token id out of the vocabulary was an
    IndexError inside the native step, a missing field a KeyError, a table of the wrong width a
    RuntimeError (issue 80)."""
    if os.path.isdir(path):
        raise FairseqStreamError(f"{_FLAG} {path} is a directory; give the prior file itself (built with python -m "
                                 f"fairseq_stream.tools.lookahead_prior)")
    if not os.path.isfile(path):
        raise FairseqStreamError(f"{_FLAG} {path}: no such file (build one with python -m "
                                 f"fairseq_stream.tools.lookahead_prior)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which, not torch's unpickling traceback
        raise FairseqStreamError(f"{_FLAG} {path}: not a readable lookahead prior ({type(err).__name__}); "
                                 f"rebuild it with python -m fairseq_stream.tools.lookahead_prior") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise FairseqStreamError(f"{_FLAG} {path}: not a lookahead prior (build one with python -m "
                                 f"fairseq_stream.tools.lookahead_prior)")
    if state.get("version") != VERSION:
        raise FairseqStreamError(f"{_FLAG} {path}: version {state.get('version')} of the format, this package reads "
                                 f"{VERSION}; rebuild it")
    _check_fields(state, path)
    if state["vocab"] != len(dictionary) or state["digest"] != dictionary_digest(dictionary):
        raise FairseqStreamError(f"{_FLAG} {path}: counted with another target dictionary ({state['vocab']} types, "
                                 f"the model's has {len(dictionary)}); rebuild it with the model's dict")
    if state["ngram"] != ngram:
        raise FairseqStreamError(f"{_FLAG} {path}: counted for --lookahead-ngram {state['ngram']}, the run has "
                                 f"{ngram}; use that or rebuild it with --ngram {ngram}")
    _check_tables(state, path)
    return NgramPrior(int(state["ngram"]), int(state["vocab"]), str(state["digest"]), state["unigram"].long(),
                      state["bigram_keys"].long(), state["bigram"].long())


_FLAG = "--lookahead-prior"
_REBUILD = "rebuild it with python -m fairseq_stream.tools.lookahead_prior"
#: a prior's fields and what each must be (:meth:`NgramPrior.as_dict`)
_FIELDS = {"ngram": "an integer", "vocab": "an integer", "digest": "a string", "unigram": "an integer tensor",
           "bigram_keys": "an integer tensor", "bigram": "an integer tensor"}


def _is_int_tensor(value: Any) -> bool:
    return isinstance(value, Tensor) and not value.dtype.is_floating_point and not value.dtype.is_complex \
        and value.dtype != torch.bool


def _check_fields(state: Dict[str, Any], path: str) -> None:
    """Every field there, of its type."""
    for name, kind in _FIELDS.items():
        if name not in state:
            raise FairseqStreamError(f"{_FLAG} {path}: the field {name!r} is missing; {_REBUILD}")
        value = state[name]
        ok = (_is_int_tensor(value) if kind.endswith("tensor") else isinstance(value, str) if kind == "a string"
              else isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            what = f"{value.dtype} tensor" if isinstance(value, Tensor) else type(value).__name__
            raise FairseqStreamError(f"{_FLAG} {path}: the field {name!r} must be {kind}, it is a {what}; {_REBUILD}")


def _check_tables(state: Dict[str, Any], path: str) -> None:
    """The tables' shapes (N and N − 1 columns, a key per continuation) and ids (tokens in the vocabulary,
    keys ``prev · vocab + last`` below vocab², sorted for the lookup's binary search)."""
    n, vocab = int(state["ngram"]), int(state["vocab"])
    unigram, keys, bigram = state["unigram"], state["bigram_keys"], state["bigram"]
    for name, table, width in (("unigram", unigram, n), ("bigram", bigram, n - 1)):
        if table.dim() != 2 or table.size(1) != width:
            raise FairseqStreamError(f"{_FLAG} {path}: the table {name!r} has shape {tuple(table.shape)}, expected "
                                     f"(rows, {width}) for N = {n}; {_REBUILD}")
    if keys.dim() != 1 or keys.numel() != bigram.size(0):
        raise FairseqStreamError(f"{_FLAG} {path}: 'bigram_keys' has shape {tuple(keys.shape)}, expected "
                                 f"({bigram.size(0)},), one key per row of 'bigram'; {_REBUILD}")
    for name, table, bound in (("unigram", unigram, vocab), ("bigram", bigram, vocab),
                               ("bigram_keys", keys, vocab * vocab)):
        wide = table.long()  # int16/int32 on file: a bound beyond their range would wrap
        bad = (wide < 0) | (wide >= bound)
        if bool(bad.any()):
            value = int(wide[bad][0])
            raise FairseqStreamError(f"{_FLAG} {path}: {name!r} holds {value}, outside [0, {bound}) for a "
                                     f"dictionary of {vocab} types; {_REBUILD}")
    wide = keys.long()
    if keys.numel() > 1 and not bool((wide[1:] > wide[:-1]).all()):
        raise FairseqStreamError(f"{_FLAG} {path}: 'bigram_keys' is not sorted (strictly increasing); {_REBUILD}")
