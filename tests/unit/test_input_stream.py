"""The input stream (``engine/input_stream.py``): the whole run's sentences as one queue over fairseq's
batches, read ahead at refills, each n-best list filed back under its batch and row.

Driven directly, with hand-made batches and a fake read-ahead (the protocol is duck-typed: ``peek``
and ``ticket_of``); the stream over a real decoder is tests/unit/test_stream_input.py's.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import pytest
import torch
from fairseq.data import data_utils

from fairseq_stream.engine.input_stream import InputStream
from fairseq_stream.model.encoder_slots import SLOT_MODULUS
from fairseq_stream.search.interface import Hypothesis

PAD, EOS = 1, 2


def batch(ids: Sequence[int], sources: Sequence[Sequence[int]], *, left_pad: bool = True) -> Dict:
    """A collated fairseq sample: ``sources[i]`` + EOS, padded on the left (fairseq translation's default)."""
    tokens = data_utils.collate_tokens([torch.tensor(list(s) + [EOS]) for s in sources], PAD, left_pad=left_pad)
    return {"id": torch.tensor(list(ids)), "net_input": {"src_tokens": tokens, "src_lengths": tokens.ne(PAD).sum(1)}}


class FakeReadAhead:
    """fairseq's iterator, read ahead: ``peek(ticket)`` a batch not handed to the loop yet."""

    def __init__(self, batches: List[Dict]) -> None:
        self.batches, self.handed = batches, -1
        self.peeks: List[int] = []

    def __next__(self) -> Dict:
        self.handed += 1
        return self.batches[self.handed]

    def peek(self, ticket: int) -> Optional[Dict]:
        self.peeks.append(ticket)
        return self.batches[ticket] if self.handed < ticket < len(self.batches) else None

    def ticket_of(self, sample: Dict) -> Optional[int]:
        return self.handed if self.handed >= 0 and self.batches[self.handed] is sample else None


def stream(nbest: int = 1) -> InputStream:
    return InputStream(pad=PAD, eos=EOS, max_lengths=lambda lengths: 2 * lengths + 3, nbest=nbest)


def hypo(*tokens: int) -> List[Hypothesis]:
    t = torch.tensor(list(tokens) + [EOS])
    return [Hypothesis(tokens=t, score=-float(len(t)), positional_scores=torch.zeros(len(t)))]


def rows(admission) -> List[List[int]]:
    """The admitted sources without padding."""
    return [[t for t in row if t != PAD] for row in admission.src_tokens.tolist()]


def test_sentences_are_admitted_in_input_order_across_batches():
    s = stream()
    s.batch_for(batch([7, 8, 9], [[10], [11, 12], [13]]), None)
    s.batch_for(batch([3, 4], [[14, 15, 16], [17]]), None)
    first = s.take(2)
    second = s.take(2)
    assert (first.first, first.count, second.first, second.count) == (0, 2, 2, 2)
    assert rows(first) == [[10, EOS], [11, 12, EOS]]
    assert rows(second) == [[13, EOS], [14, 15, 16, EOS]]  # one table over two batches
    assert [s.sentence_id(serial) for serial in range(4)] == [7, 8, 9, 3]
    assert s.queued == 1 and s.in_flight == 4


def test_an_admission_holds_lengths_and_limits_and_is_padded_on_the_batches_side():
    s = stream()
    s.batch_for(batch([0, 1], [[10, 11, 12, 13], [14]]), None)
    a = s.take(2)
    assert a.left_pad and a.src_lengths.tolist() == [5, 2]  # EOS counted, padding not
    assert a.limits == [13, 7] and a.max_len.tolist() == a.limits  # max_lengths of the source lengths
    assert a.src_tokens[1].tolist() == [PAD, PAD, PAD, 14, EOS]
    r = stream()
    r.batch_for(batch([0, 1], [[10, 11], [12]], left_pad=False), None)
    b = r.take(2)
    assert not b.left_pad and b.src_tokens.tolist() == [[10, 11, EOS], [12, EOS, PAD]]


def test_a_refill_table_is_as_wide_as_its_longest_sentence_only():
    s = stream()
    s.batch_for(batch([0, 1], [[10], [11, 12, 13, 14, 15, 16]]), None)  # a long sentence widens the batch
    short = s.take(1)
    assert short.src_tokens.tolist() == [[10, EOS]]
    long = s.take(5)
    assert long.count == 1 and long.src_tokens.tolist() == [[11, 12, 13, 14, 15, 16, EOS]]


def test_take_at_the_inputs_end_gives_fewer_then_none():
    s = stream()
    s.batch_for(batch([0, 1, 2], [[10], [11], [12]]), None)
    assert s.take(2).count == 2
    last = s.take(5)
    assert last.count == 1 and last.first == 2
    assert s.take(5) is None and s.queued == 0
    assert not s.exhausted()  # without a read-ahead the end is unknown (interactive chunks)


def test_empty_sources_get_the_empty_hypothesis_at_once_and_are_never_admitted():
    s = stream(nbest=2)
    done: List[int] = []
    s.on_done = done.append
    tokens = torch.tensor([[PAD, EOS], [10, EOS], [PAD, EOS]])  # two empty lines around one sentence
    queued = s.batch_for({"id": torch.tensor([0, 1, 2]), "net_input": {"src_tokens": tokens}}, None)
    assert queued.missing == 1 and done == [2] and s.done == 2
    for row in (0, 2):
        assert queued.hypos[row][0]["tokens"].tolist() == [EOS] and queued.hypos[row][0]["score"] == 0.0
    assert s.empty_sources == 2 and s.fewer_than_nbest == 2  # one hypothesis, where --nbest 2 asked for two
    a = s.take(3)
    assert a.count == 1 and rows(a) == [[10, EOS]] and s.sentence_id(a.first) == 1
    only_empty = stream()
    only_empty.batch_for({"id": torch.tensor([5]), "net_input": {"src_tokens": torch.tensor([[EOS]])}}, None)
    assert only_empty.take(4) is None and only_empty.done == 1


def test_hypotheses_go_back_to_their_batch_and_row_in_any_order():
    s = stream()
    first = s.batch_for(batch([20, 21], [[10], [11]]), None)
    second = s.batch_for(batch([22, 23], [[12], [13]]), None)
    a = s.take(4)
    handles = [(a.first + i) * SLOT_MODULUS + slot for i, slot in enumerate([3, 0, 2, 1])]  # any slot
    s.deliver({handles[3]: hypo(43), handles[1]: hypo(41)})
    assert first.missing == 1 and second.missing == 1 and s.done == 2
    assert first.hypos[1][0]["tokens"].tolist() == [41, EOS] and second.hypos[1][0]["tokens"].tolist() == [43, EOS]
    finished: List[int] = []
    s.on_finish = lambda serial, hypos: finished.append(serial)
    s.deliver({handles[0]: hypo(40), handles[2]: hypo(42)})
    assert first.missing == second.missing == 0 and s.in_flight == 0 and sorted(finished) == [0, 2]
    assert [h[0]["tokens"].tolist()[0] for h in first.hypos + second.hypos] == [40, 41, 42, 43]
    assert set(first.hypos[0][0]) >= {"tokens", "score", "positional_scores", "alignment"}  # fairseq's dicts


def test_a_shorter_nbest_list_is_counted_and_an_empty_one_gets_the_empty_hypothesis():
    s = stream(nbest=2)
    queued = s.batch_for(batch([0, 1], [[10], [11]]), None)
    a = s.take(2)
    s.deliver({a.first * SLOT_MODULUS: hypo(4), (a.first + 1) * SLOT_MODULUS: []})
    assert s.fewer_than_nbest == 2 and s.without_hypothesis == 1
    assert queued.hypos[1][0]["tokens"].tolist() == [EOS]


def test_a_refill_reads_the_next_batches_ahead_and_the_loop_gets_them_queued_once():
    batches = [batch([0, 1], [[10], [11]]), batch([2, 3], [[12], [13]]), batch([4], [[14]])]
    ahead = FakeReadAhead(batches)
    s = stream()
    first = s.batch_for(next(ahead), ahead)
    a = s.take(4)  # more than the loop's batch holds: the next one is read ahead, not the one after
    assert a.count == 4 and rows(a) == [[t, EOS] for t in (10, 11, 12, 13)] and ahead.peeks == [1]
    assert not s.exhausted() and ahead.peeks == [1, 2]  # knowing it takes one more batch, read ahead
    second = s.batch_for(next(ahead), ahead)  # already queued: the same batch, its sentences not again
    assert s.queued == 1 and second.size == 2 and second.missing == 2
    s.deliver({(a.first + i) * SLOT_MODULUS: hypo(30 + i) for i in range(4)})
    assert first.missing == 0 and [h[0]["tokens"].tolist()[0] for h in second.hypos] == [32, 33]
    third = s.batch_for(next(ahead), ahead)
    last = s.take(4)
    assert last.count == 1 and s.take(4) is None and s.exhausted()
    s.deliver({last.first * SLOT_MODULUS: hypo(34)})
    assert third.missing == 0 and s.done == 5


def test_a_read_ahead_batch_without_net_input_is_skipped():
    batches = [batch([0], [[10]]), {"id": torch.tensor([], dtype=torch.long)}, batch([1], [[11]])]
    ahead = FakeReadAhead(batches)
    s = stream()
    s.batch_for(next(ahead), ahead)
    a = s.take(2)
    assert a.count == 2 and rows(a) == [[10, EOS], [11, EOS]] and s.sentence_id(a.first + 1) == 1


def test_on_admit_sees_every_refill_before_the_stream_decodes_it():
    s = stream()
    seen = []
    s.on_admit = lambda admission: seen.append((admission.first, admission.count))
    s.batch_for(batch([0, 1, 2], [[10], [11], [12]]), None)
    s.take(2)
    s.take(2)
    assert seen == [(0, 2), (2, 1)]


def test_copies_are_planned_only_from_the_rows_a_refill_keeps():
    s = stream()
    s.plan_copies = lambda lengths, last: [len(lengths) - 1]  # the last row: dropped to make room for the copy
    s.batch_for(batch([0, 1], [[10], [11]]), None)
    with pytest.raises(RuntimeError, match="plan_copies"):
        s.take(2)
    t = stream()
    t.batch_for(batch([0, 1, 2], [[10], [11], [12]]), None)
    old = t.take(1)
    t.take(1)
    with pytest.raises(RuntimeError, match="newest refill"):
        t.add_copies(old, [0])
