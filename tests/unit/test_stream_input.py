"""One stream over the whole input (Yang2020 Algorithm 1 over all of X): fairseq's batches
read ahead, hypotheses routed back per batch, encoder memory bounded by the capacity."""
import time

import torch
from fairseq.data import data_utils
from fairseq.data.iterators import CountingIterator

from fairseq_stream.integration.run_context import RunContext
from fairseq_stream.integration.read_ahead import ReadAhead
from fairseq_stream.integration.build import build_generator
from helpers import TableModel, fake_task, gen_cfg, make_dictionary, stream_opts, tiny_transformer

D = make_dictionary([f"w{i}" for i in range(40)])


def batches(sources, size):
    """fairseq-style collated batches (left-padded sources, ``id``) of ``size`` sentences."""
    for first in range(0, len(sources), size):
        part = sources[first: first + size]
        tokens = data_utils.collate_tokens([torch.tensor(s + [D.eos()]) for s in part], D.pad(), left_pad=True)
        yield {"id": torch.arange(first, first + len(part)),
               "net_input": {"src_tokens": tokens, "src_lengths": tokens.ne(D.pad()).sum(1)}}


def random_batches(n, size, longest, seed):
    """``n`` random sources of 1..longest words (+ EOS) in batches of ``size``, built in bulk."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, longest + 1, (n,), generator=gen) + 1
    words = torch.randint(4, 44, (n, longest + 1), generator=gen)
    cols = torch.arange(longest + 1)
    tokens = torch.where(cols >= longest + 1 - lengths.unsqueeze(1), words, D.pad())  # left-padded
    tokens[:, -1] = D.eos()
    for first in range(0, n, size):
        part = tokens[first: first + size]
        yield {"id": torch.arange(first, first + len(part)), "net_input": {"src_tokens": part,
                                                                         "src_lengths": lengths[first: first + size]}}


def read_ahead_over(sources, size):
    n = -(-len(sources) // size)
    return ReadAhead(CountingIterator(batches(sources, size), total=n))


def decode(generator, model, itr, *, read_ahead=True):
    """fairseq-generate's loop over ``itr``: one generate call per batch, in order; n-best lists by id."""
    if read_ahead:
        generator.attach(RunContext(itr))
    out = {}
    for sample in itr:
        hypos = generator.generate([model], sample)
        assert len(hypos) == len(sample["id"])
        out.update(zip(sample["id"].tolist(), hypos))
    return [out[i] for i in range(len(out))]


def test_read_ahead_hands_every_batch_to_the_loop_unchanged():
    sources = [[4 + i % 7] * (1 + i % 3) for i in range(10)]
    itr = read_ahead_over(sources, 3)
    assert len(itr) == 4
    first = next(itr)
    assert itr.ticket_of(first) == 0 and itr.n == 1
    ahead = itr.peek(2)  # read two batches ahead
    assert ahead["id"].tolist() == [6, 7, 8] and itr.peek(9) is None and itr.peek(0) is None
    rest = list(itr)
    assert [b["id"].tolist() for b in rest] == [[3, 4, 5], [6, 7, 8], [9]]
    assert rest[1] is ahead and itr.n == 4 and itr.ticket_of(rest[-1]) == 3
    moved = {"id": rest[-1]["id"].clone(), "net_input": dict(rest[-1]["net_input"])}  # as after move_to_cuda
    assert itr.ticket_of(moved) == 3 and itr.ticket_of(first) is None


def table_for(sources):
    """p(next | source word): a short, source-specific output, so sentences finish at different steps."""
    words = [D.index(f"w{i}") for i in range(40)]
    table = {}
    for w in {s[-1] for s in sources}:
        out = words[w % 5: w % 5 + 1 + w % 4]
        for j in range(len(out) + 1):
            table[(w, tuple(out[:j]))] = {out[j]: 0.6, words[(w + j) % 40]: 0.4} if j < len(out) else {D.eos(): 0.9, w: 0.1}
    return table


def test_generic_models_across_batches_equal_per_batch():
    """The generic backend (a probability-table model; sources re-encoded in slots) and several
    batches per refill: hypotheses and scores as decoded batch by batch."""
    torch.manual_seed(0)
    sources = [[int(w) for w in torch.randint(4, 44, (int(torch.randint(1, 5, ())),))] for _ in range(37)]
    model = TableModel(D, table_for(sources)).eval()
    for name in ("var-stream", "fixed-stream", "var-batch", "fixed-ours"):
        build = lambda: build_generator(name, fake_task(D), [model], gen_cfg(beam=3, nbest=2, max_len_b=6),  # noqa: E731
                                        stream_opts(stream_capacity=5))
        across = build()
        per_batch = decode(build(), model, read_ahead_over(sources, 4), read_ahead=False)
        assert [[(h["tokens"].tolist(), h["score"]) for h in x] for x in decode(across, model, read_ahead_over(sources, 4))] == \
               [[(h["tokens"].tolist(), h["score"]) for h in x] for x in per_batch], name
        assert across.stats.sentences == len(sources) and across.stats.encoder_slots <= 5


def test_memory_is_bounded_by_the_capacity_not_the_input():
    """100,000 short random sentences through one stream (greedy, max length 2, a tiny random
    transformer): the encoder states alive at once never exceed a few capacities' worth.

    Every tensor of encoder states the stream creates (each refill's keys/values, the slot
    buffers) is weakref-counted while alive (``DecodeStats.peak_encoder_bytes``); keeping the
    encodings of finished sentences would grow it by ~1 KiB a sentence, ~100 MB here."""
    n, capacity, dim, size = 100_000, 500, 16, 250
    model = tiny_transformer(D, layers=1, dim=dim, dtype=torch.float32)
    generator = build_generator("var-stream", fake_task(D), [model], gen_cfg(beam=1, max_len_a=0, max_len_b=2),
                                stream_opts(stream_capacity=capacity))
    start = time.perf_counter()
    itr = ReadAhead(CountingIterator(random_batches(n, size, longest=6, seed=1), total=n // size))
    with torch.no_grad():
        hypos = decode(generator, model, itr)
    stats = generator.stats
    assert len(hypos) == n and all(h for h in hypos) and stats.sentences == n
    # One slot holds keys and values of every layer for the longest source (7 tokens, rounded to 8).
    per_slot = 2 * 1 * 8 * dim * 4 + 8
    assert stats.encoder_slots == capacity and stats.peak_in_flight <= capacity
    assert stats.peak_encoder_bytes <= 3 * capacity * per_slot, stats.peak_encoder_bytes
    assert generator._scheduler.memory.meter.current <= 2 * capacity * per_slot
    print(f"{n} sentences, {stats.timesteps} timesteps, peak encoder states {stats.peak_encoder_bytes / 2**10:.0f} KiB "
          f"({stats.encoder_slots} slots), {time.perf_counter() - start:.1f} s")


# ---- fairseq-interactive: the stream reads ahead across --buffer-size chunks ----

def _fake_make_batches(made):
    """fairseq-interactive's ``make_batches``: one batch per two lines, each line's words as ids."""
    from collections import namedtuple

    Batch = namedtuple("Batch", "ids src_tokens src_lengths constraints")

    def make_batches(lines, cfg, task, max_positions, encode_fn):
        made.append(list(lines))
        for first in range(0, len(lines), 2):
            part = [[4 + len(w) for w in line.split()] + [D.eos()] for line in lines[first: first + 2]]
            tokens = data_utils.collate_tokens([torch.tensor(p) for p in part], D.pad(), left_pad=True)
            yield Batch(torch.arange(first, first + len(part)), tokens, tokens.ne(D.pad()).sum(1), None)

    return make_batches


def _loop_sample(batch):
    return {"net_input": {"src_tokens": batch.src_tokens, "src_lengths": batch.src_lengths}}


def test_interactive_chunks_are_batched_ahead_only_when_their_lines_are_all_here(tmp_path):
    import os

    from fairseq_stream.integration.interactive_input import ChunkedInput, LineReader

    path = tmp_path / "in.txt"
    path.write_text("".join(f"{'a ' * (i + 1)}\n" for i in range(7)))
    made = []
    chunked = ChunkedInput(LineReader(str(path)), 3, _fake_make_batches(made))
    chunks = chunked.chunks()
    first = next(chunks)
    assert first == ["a", "a a", "a a a"]
    loop_batches = list(chunked.batches(first, None, None, None, None))  # the loop batches chunk 0
    assert chunked.ticket_of(_loop_sample(loop_batches[0])) == 0
    assert chunked.peek(1) is not None and chunked.chunks_read_ahead == 0  # chunk 0's second batch
    ahead = chunked.peek(3)  # chunk 1's second batch: chunk 1 is batched now, before the loop reads it
    assert ahead is not None and chunked.chunks_read_ahead == 1 and len(made) == 2
    second = next(chunks)
    assert second == ["a a a a", "a a a a a", "a a a a a a"]
    again = list(chunked.batches(second, None, None, None, None))
    assert len(made) == 2  # the loop gets the batches made ahead, not new ones
    assert torch.equal(again[1].src_tokens, ahead["net_input"]["src_tokens"])
    assert chunked.ticket_of(_loop_sample(loop_batches[1])) == 1
    assert chunked.ticket_of(_loop_sample(again[0])) == 2
    assert chunked.peek(9) is None  # past the end: the last chunk (one line) is batched, nothing more
    assert next(chunks) == ["a a a a a a a"] and next(chunks, None) is None

    # A pipe: a chunk whose lines have not all arrived is not waited for.
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as writer, open(read_fd) as reader_end:
        writer.write("a\na a\na a a\na a a a\n")
        writer.flush()
        reader = LineReader(f"/dev/fd/{reader_end.fileno()}")
        made = []
        piped = ChunkedInput(reader, 3, _fake_make_batches(made))
        chunks = piped.chunks()
        list(piped.batches(next(chunks), None, None, None, None))
        deadline = time.time() + 5
        while not reader.ready(1) and time.time() < deadline:  # the thread reads the fourth line
            time.sleep(0.01)
        assert piped.peek(2) is None and len(made) == 1  # chunk 1 has one line of three
        writer.write("a a a a a\na a a a a a\n")
        writer.flush()
        while not reader.ready(3) and time.time() < deadline:
            time.sleep(0.01)
        assert piped.peek(2) is not None and len(made) == 2


def test_interactive_reader_thread_reads_only_a_bounded_way_ahead():
    """A pipe's lines are read ahead on a thread, at most ``max_queued`` of them: memory does
    not grow with the input, and every line still arrives, in order."""
    import os
    import threading

    from fairseq_stream.integration.interactive_input import LineReader

    read_fd, write_fd = os.pipe()
    lines = [f"line {i}" for i in range(50)]

    def write():
        with os.fdopen(write_fd, "w") as writer:
            writer.write("".join(f"{line}\n" for line in lines))

    writer = threading.Thread(target=write)
    writer.start()
    with open(read_fd) as reader_end:
        reader = LineReader(f"/dev/fd/{reader_end.fileno()}", max_queued=3)
        time.sleep(0.2)
        assert reader._queue.qsize() <= 3
        assert reader.take(20) == lines[:20] and reader.take(100) == lines[20:]
    writer.join(timeout=5)
