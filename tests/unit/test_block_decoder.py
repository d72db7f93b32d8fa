"""Our block-incremental decoder step against fairseq's own full forward pass."""
import pytest
import torch

from fairseq_stream.model.model_step import ModelStep
from fairseq_stream.model.row_cache import RowCache
from helpers import make_dictionary, tiny_transformer

D = make_dictionary([f"w{i}" for i in range(40)])


def _src(n: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 9, (n,), generator=g)
    width = int(lengths.max())
    src = torch.full((n, width), D.pad())
    for i, n_tok in enumerate(lengths.tolist()):  # left-padded, EOS last, as fairseq batches are
        src[i, width - n_tok:] = torch.cat([torch.randint(4, len(D), (n_tok - 1,), generator=g), torch.tensor([D.eos()])])
    return src, lengths


# fairseq computes attention softmax in float32 even for float64 models: compare to 1e-6.
TOL = dict(rtol=1e-6, atol=1e-6)


def _reference(model, src, lengths, prev):
    with torch.no_grad():
        logits, _ = model(src, lengths, prev)
    return torch.log_softmax(logits, dim=-1)


def _start(model, n: int, steps: int):
    """n random sources and target prefixes of ``steps`` tokens after BOS: fairseq's log-probs, our step, its state."""
    src, lengths = _src(n)
    prev = torch.cat([torch.full((n, 1), D.eos()), torch.randint(4, len(D), (n, steps))], dim=1)
    step = ModelStep([model])
    pool = step.encode(src, lengths, D.pad(), D.eos())
    return prev, _reference(model, src, lengths, prev), step, pool, step.initial_state(pool, torch.arange(n), D.eos())


@pytest.mark.parametrize("normalize_before,learned_pos", [(False, False), (True, False), (False, True)])
def test_one_token_steps_equal_full_forward(normalize_before, learned_pos):
    model = tiny_transformer(D, normalize_before=normalize_before, learned_pos=learned_pos)
    prev, ref, step, pool, state = _start(model, 5, 6)
    with torch.no_grad():
        for t in range(prev.size(1)):
            lp, state = step.step(pool, state, prev[:, t: t + 1])
            lp = torch.log_softmax(lp, -1)
            torch.testing.assert_close(lp[:, 0], ref[:, t], **TOL)


def test_block_step_and_truncation_equal_full_forward():
    model = tiny_transformer(D, normalize_before=True)
    prev, ref, step, pool, state = _start(model, 4, 7)
    with torch.no_grad():
        lp, state = step.step(pool, state, prev[:, :4])  # a block of 4 tokens, causal inside
        lp = torch.log_softmax(lp, -1)
        torch.testing.assert_close(lp, ref[:, :4], **TOL)
        # Keep a different number of the block's tokens per row; decoding each row on from its
        # kept prefix must match the full forward again.
        keep = torch.tensor([4, 2, 3, 1])
        state = step.accept(state, keep, 4)
        for r in range(4):
            sub = step.select(state, torch.tensor([r]))
            k = int(keep[r])
            lp_r, _ = step.step(pool, sub, prev[r: r + 1, k: k + 3])
            torch.testing.assert_close(torch.log_softmax(lp_r[0], -1), ref[r, k: k + 3], **TOL)


def test_rows_of_different_lengths_share_a_step():
    model = tiny_transformer(D)
    src, lengths = _src(3)
    prev = torch.cat([torch.full((3, 1), D.eos()), torch.randint(4, len(D), (3, 5))], dim=1)
    ref = _reference(model, src, lengths, prev)
    step = ModelStep([model])
    pool = step.encode(src, lengths, D.pad(), D.eos())
    with torch.no_grad():
        old = step.initial_state(pool, torch.tensor([0, 1]), D.eos())
        _, old = step.step(pool, old, prev[:2, :3])  # rows 0, 1 have 3 tokens
        new = step.initial_state(pool, torch.tensor([2]), D.eos())
        _, new = step.step(pool, new, prev[2:, :1])  # row 2 has 1 token
        both = step.concat([old, new])
        assert isinstance(both.caches[0], RowCache) and not both.caches[0].uniform  # rows keep their own lengths
        feed = torch.stack([prev[0, 3], prev[1, 3], prev[2, 1]]).unsqueeze(1)
        lp, _ = step.step(pool, both, feed)
        lp = torch.log_softmax(lp, -1)
        torch.testing.assert_close(lp[0, 0], ref[0, 3], **TOL)
        torch.testing.assert_close(lp[1, 0], ref[1, 3], **TOL)
        torch.testing.assert_close(lp[2, 0], ref[2, 1], **TOL)


def test_variable_rows_per_sentence_share_encoder_keys():
    model = tiny_transformer(D)
    src, lengths = _src(3)
    step = ModelStep([model])
    pool = step.encode(src, lengths, D.pad(), D.eos())
    with torch.no_grad():
        state = step.initial_state(pool, torch.arange(3), D.eos())
        _, state = step.step(pool, state, torch.full((3, 1), D.eos()))
        rows = torch.tensor([0, 0, 0, 2, 2])  # 3 beams of sentence 0, none of 1, 2 of sentence 2
        sel = step.select(state, rows)
        tok = torch.randint(4, len(D), (5, 1))
        lp, _ = step.step(pool, sel, tok)
        for i, r in enumerate(rows.tolist()):
            alone = step.select(state, torch.tensor([r]))
            lp_alone, _ = step.step(pool, alone, tok[i: i + 1])
            torch.testing.assert_close(lp[i], lp_alone[0], **TOL)


def test_ensemble_averages_probabilities():
    m1, m2 = tiny_transformer(D, seed=1), tiny_transformer(D, seed=2)
    src, lengths = _src(2)
    prev = torch.full((2, 1), D.eos())
    ref = torch.logsumexp(torch.stack([_reference(m1, src, lengths, prev), _reference(m2, src, lengths, prev)]), 0) - torch.log(torch.tensor(2.0, dtype=torch.float64))
    step = ModelStep([m1, m2])
    pool = step.encode(src, lengths, D.pad(), D.eos())
    with torch.no_grad():
        lp, _ = step.step(pool, step.initial_state(pool, torch.arange(2), D.eos()), prev)
    torch.testing.assert_close(lp[:, 0], ref[:, 0], **TOL)


@pytest.mark.parametrize("uniform", [True, False])
def test_reorders_reuse_the_spare_buffers_and_keep_the_rows(uniform):
    g = torch.Generator().manual_seed(3)
    keys = [torch.randn(6, 2, 10, 4, generator=g) for _ in range(2)]
    values = [torch.randn(6, 2, 10, 4, generator=g) for _ in range(2)]
    lens = torch.full((6,), 7) if uniform else torch.tensor([7, 5, 6, 7, 2, 7])
    cache = RowCache.of(keys, values, lens, 7, uniform)
    expected, expected_lens = [k.clone() for k in keys], lens
    first_buffers = {k.data_ptr() for k in keys}
    for i, rows in enumerate((torch.tensor([2, 2, 0, 5, 1, 3]), torch.tensor([1, 0, 4]), torch.tensor([2, 2, 1, 0]))):
        cache = cache.select(rows)
        expected, expected_lens = [e.index_select(0, rows) for e in expected], expected_lens.index_select(0, rows)
        assert torch.equal(cache.lens, expected_lens)
        for got, want in zip(cache.keys, expected):  # the filled slots move with their rows
            end = 7 if uniform else 10
            assert torch.equal(got[:, :, :end], want[:, :, :end])
            assert torch.isfinite(got).all()  # stale slots stay finite (masked keys meet zero weights)
        if i == 1:  # the second reorder wrote into the first cache's buffers: no allocation per step
            assert {k.data_ptr() for k in cache.keys} == first_buffers


def test_rows_added_step_after_step_and_a_growth_keep_every_slot_finite():
    # variable-width beams add rows at most steps: the buffers get room to grow into, and each
    # buffer a cache owns (its spare rows too) holds finite values only, however it was made
    g = torch.Generator().manual_seed(4)
    keys = [torch.randn(2, 2, 4, 3, generator=g) for _ in range(2)]
    values = [torch.randn(2, 2, 4, 3, generator=g) for _ in range(2)]
    cache = RowCache.of(keys, values, torch.full((2,), 3), 3)
    expected = [k[:, :, :3].clone() for k in keys]
    for n in (3, 5, 6, 7, 12):
        rows = torch.arange(n) % cache.rows
        cache = cache.select(rows)
        expected = [e.index_select(0, rows) for e in expected]
        if n == 5:  # outgrew the spare while adding rows: half as many rows again
            assert cache.owned[0][0].size(0) == 7
        if n == 6:
            cache.reserve(2)  # past the capacity (4): a growth
            assert cache.capacity > 4
        for got, want in zip(cache.keys, expected):
            assert torch.equal(got[:, :, :3], want)
        for t in cache.owned[0] + cache.owned[1] + (cache.spare[0] + cache.spare[1] if cache.spare else []):
            assert torch.isfinite(t).all()


def test_a_step_without_rows_returns_nothing():
    # var-batch can prune every row of a group: the step must still run (0 rows), on every path
    model = tiny_transformer(D, dtype=torch.float32)
    _, _, step, pool, state = _start(model, 3, 2)
    with torch.no_grad():
        empty = step.select(state, torch.zeros(0, dtype=torch.long))
        lp, _ = step.step(pool, empty, torch.zeros(0, 1, dtype=torch.long))
    assert lp.shape[0] == 0


def test_a_static_steps_input_fill_writes_the_padding_rows_it_must_and_gives_a_full_fills_buffer():
    # the padding rows of a bucket's input buffer are written once per columns key and again only where live
    # rows of a bigger fill became padding: the buffer then equals one written whole, fill after fill
    from fairseq_stream.model.static.inputs import INPUT_COLS, StaticIO, fill_inputs

    g = torch.Generator().manual_seed(5)
    b, R = 2, 8
    kept = StaticIO(torch.zeros(R, b + INPUT_COLS, dtype=torch.long), None, torch.zeros(0, b, 1))
    written = []
    for r, wq, kv in ((5, 4, True), (7, 4, True), (3, 4, True), (6, 4, True), (6, 2, True), (2, 2, False),
                      (4, 2, False), (1, 2, True)):
        ints = torch.randint(0, 9, (r, b + INPUT_COLS), generator=g)
        args = (ints[:, :b], ints[:, b], ints[:, b + 1], wq, ints[:, b + 2], ints[:, b + 3] if kv else None)
        whole = StaticIO(kept.ints.clone(), None, kept.out)  # no record of earlier fills: every padding row
        fill_inputs(whole, *args)
        writes = []
        real_copy = torch.Tensor.copy_
        try:
            torch.Tensor.copy_ = lambda t, src, *a: writes.append(t.size(0)) or real_copy(t, src, *a)
            fill_inputs(kept, *args)
        finally:
            torch.Tensor.copy_ = real_copy
        assert torch.equal(kept.ints, whole.ints), (r, wq, kv)
        assert (kept.ints[r:, b + 1] == wq).all()  # every padding row's query column is the spare one
        written.append(sum(writes) - r)  # padding rows written by this fill
    # first fill: 3 padding rows; growing fills none; shrinking ones the rows that were live; other columns all
    assert written == [3, 0, 4, 0, 2, 6, 0, 7]


def test_the_inputs_read_from_a_search_steps_next_rows_equal_the_hosts_fill():
    # a beam step whose rows are its last search step's next rows: the region writes their inputs from the
    # bucket state's rows buffer (live rows first, then −1 slots) and the last step's input buffer — the same buffer as
    # the host's fill of those rows (cache length: the parent's plus the token fed there), padding rows included
    from fairseq_stream.model.static.inputs import INPUT_COLS, KV_COL, LENS_COL, StaticIO, fill_inputs, inputs_from_rows

    g = torch.Generator().manual_seed(7)
    R, r_old, wq = 8, 6, 4
    for b, r in ((1, 5), (1, 8), (1, 1), (3, 5), (3, 2)):  # one token (a beam) or a block (ib-beam's z words)
        src = torch.randint(0, 9, (R, b + INPUT_COLS), generator=g)
        src[:, LENS_COL + b] = 11  # the last step's rows, of one length
        rows = torch.randint(0, 30, (5, 12), generator=g)  # (5, S_b·k): parents, feed, place, sentence, slot
        rows[0] = torch.randint(0, r_old, (12,), generator=g)
        rows[4, :r] = torch.arange(r)
        rows[4, r:] = -1
        rows[0, r:] = 99  # stale past the live rows: never an index
        feed = torch.randint(0, 30, (12, b), generator=g)
        host = StaticIO(torch.randint(0, 9, (R, b + INPUT_COLS), generator=g), None, torch.zeros(0, b, 1))
        region = StaticIO(host.ints.clone(), None, host.out)
        fill_inputs(host, feed[:r], torch.full((r,), 11 + b), rows[2, :r], wq, rows[0, :r])
        r_rows = rows[:, :R]
        inputs_from_rows(region.ints, (feed[:R], r_rows[2], r_rows[0], r_rows[4] >= 0), src, b, wq)
        cols = slice(0, b + KV_COL)  # the encoder slot is gathered from the parents after either
        assert torch.equal(region.ints[:, cols], host.ints[:, cols]), (b, r)


def test_a_block_mask_placed_in_the_region_equals_the_hosts_fill():
    # ib-beam's (b, b) block mask is copied into a step's buffers once and placed after the rows' cached slots
    # inside the region (their length from the input buffer): the mask the host's fill writes for that length
    from fairseq_stream.model.static.inputs import fill_block_mask, region_block_mask

    g = torch.Generator().manual_seed(3)
    for b, slots, width in ((2, 8, 0), (2, 8, 6), (4, 16, 5), (1, 4, 3)):
        block = torch.where(torch.rand(b, b, generator=g) < 0.5, 0.0, float("-inf")).double()
        host = torch.empty(1, 1, b, slots, dtype=torch.float64)
        fill_block_mask(host, block, width, b)
        lens = torch.tensor([width, 0, 0])  # row 0 live, padding rows after
        assert torch.equal(region_block_mask(block, lens, slots, b), host), (b, slots, width)


def test_a_reorder_by_the_strategys_index_gathers_the_rows_sentences_only_when_read():
    # a beam's reorder passes its own index: the rows' sentences are computed from it when a refill reads them
    model = tiny_transformer(D, dtype=torch.float32)
    _, _, step, pool, state = _start(model, 3, 2)
    from fairseq_stream.model.row_cache import SentenceIndex

    rows = torch.tensor([0, 0, 2, 2, 2])
    index = SentenceIndex(torch.tensor([0, 2]), torch.tensor([0, 0, 1, 1, 1]), torch.tensor([0, 1, 0, 1, 2]), 3)
    with torch.no_grad():
        lazy, eager = step.select(state, rows, index), step.select(state, rows)
        assert lazy.handles is None and lazy.rows == 5
        assert torch.equal(lazy.row_sentence, eager.row_sentence) and torch.equal(lazy.row_sentence, rows)
        feed = torch.randint(4, len(D), (5, 1))
        assert torch.allclose(step.step(pool, lazy, feed)[0], step.step(pool, eager, feed)[0], **TOL)
