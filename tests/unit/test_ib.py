"""IBDecoder family: reordering, positions, masks (paper 003 Eqs. 4–12) and the multi-word decoder step."""
import math

import pytest
import torch

from fairseq_stream import ib_order
from fairseq_stream.model_step import ModelStep
from helpers import make_dictionary, tiny_ib_model

EOS, PAD = 2, 1


@pytest.mark.parametrize("h,c", [(2, 1), (2, 2), (2, 3), (4, 1), (6, 1)])
@pytest.mark.parametrize("n", list(range(0, 14)))
def test_reorder_and_restore_are_inverse_for_every_length(h, c, n):
    words = list(range(10, 10 + n))
    target = ib_order.reorder(words, h, c, EOS, PAD)
    assert ib_order.restore(target, h, c, EOS, PAD) == words
    assert target.count(EOS) == h // 2  # one EOS per segment, where its directions meet


def test_reorder_matches_eq6_and_eq9_by_hand():
    a, b, c_, d, e, f = 10, 11, 12, 13, 14, 15
    assert ib_order.reorder([a, b, c_, d], 2, 1, EOS, PAD) == [a, d, b, c_, EOS]  # "A B C D → A D B C"
    assert ib_order.reorder([a, b, c_], 2, 1, EOS, PAD) == [a, c_, b, EOS]
    assert ib_order.reorder([a], 2, 1, EOS, PAD) == [a, EOS]
    assert ib_order.reorder([a, b], 2, 1, EOS, PAD) == [a, b, EOS]
    # IMDecoder, h = 4: segments [a b c] and [d e f], each interleaved, a word pair of each per step.
    assert ib_order.reorder([a, b, c_, d, e, f], 4, 1, EOS, PAD) == [a, c_, d, f, b, EOS, e, EOS]


def test_positions_follow_eq7_and_eq10():
    slots = torch.arange(8)
    assert ib_order.slot_positions(slots, 2).tolist() == [1, -1, 2, -2, 3, -3, 4, -4]
    assert ib_order.slot_positions(slots, 2, "vanilla").tolist() == list(range(8))
    assert ib_order.slot_positions(slots, 4).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert ib_order.slot_directions(slots, 4).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def _allowed(m):
    return (m == 0).int().tolist()


def test_mask_equals_eq4_written_out():
    # M(2, 1) on 6 slots: steps of 2, each sees all earlier steps and itself.
    assert _allowed(ib_order.mask(6, 2, 1)) == [
        [1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1],
    ]
    # M(2, 2) = M(4, 1) on 5 slots: steps of 4.
    m = [[1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert _allowed(ib_order.mask(5, 2, 2)) == m == _allowed(ib_order.mask(5, 4, 1))
    # M(1, 1) is the causal mask; the independent-directions ablation keeps one direction.
    assert _allowed(ib_order.mask(3, 1, 1)) == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert _allowed(ib_order.mask(4, 2, 1, independent=True)) == [[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1]]


def test_eq4_formula_directly():
    n, h, c = 9, 2, 2
    m = ib_order.mask(n, h, c)
    for i in range(1, n + 1):
        for j in range(1, n + 1):
            expected = math.ceil(i / (h * c)) >= math.ceil(j / (h * c))
            assert (m[i - 1, j - 1] == 0) == expected


def test_dedup_removes_immediate_repeats():
    assert ib_order.dedup([5, 5, 6, 7, 6, 7, 8]) == [5, 6, 7, 8]


D = make_dictionary([f"w{i}" for i in range(30)])


@pytest.mark.parametrize("h,c,mask,independent", [(2, 1, "relaxed", False), (2, 2, "relaxed", False),
                                                  (4, 1, "relaxed", False), (2, 1, "vanilla", False),
                                                  (2, 1, "relaxed", True)])
def test_multi_word_incremental_steps_equal_the_masked_full_forward(h, c, mask, independent):
    from fairseq_stream.strategies.ib_beam import IBBeamSearch
    from fairseq_stream.models.transformer_ib import IBSpec

    model = tiny_ib_model(D, h=h, c=c, mask=mask, independent=independent)
    z = h * c
    src = torch.tensor([[5, 6, 7, 8, EOS], [PAD, PAD, 9, 10, EOS]])
    lengths = torch.tensor([5, 3])
    target = torch.randint(4, len(D), (2, 3 * z))
    prev = ib_order.shift_inputs(target, z, EOS, PAD)
    with torch.no_grad():
        ref = torch.log_softmax(model(src, lengths, prev)[0], dim=-1)
    spec = model.decoder.ib
    planner = IBBeamSearch(spec, None, beam=1, nbest=1, lenpen=1.0, eos=EOS, pad=PAD, bos=EOS, dedup=False,
                           dtype=torch.float64)
    step = ModelStep([model])
    pool = step.encode(src, lengths, PAD, EOS)
    state = step.initial_state(pool, torch.arange(2), EOS)
    with torch.no_grad():
        for k in range(3):
            feed = prev[:, k * z: (k + 1) * z]
            out, state = step.step(pool, state, feed, planner.block_mask(k * z, feed.device))
            torch.testing.assert_close(torch.log_softmax(out, -1), ref[:, k * z: (k + 1) * z], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["beam", "fixed-ours", "var-stream", "gs-jacobi"])
def test_ib_checkpoint_with_another_search_is_refused(name):
    from fairseq_stream.errors import FairseqStreamError
    import fairseq_stream  # noqa: F401  (registers the strategies)
    from fairseq_stream.registry import get_search
    from helpers import fake_task, gen_cfg, stream_opts

    model = tiny_ib_model(D).eval()
    with pytest.raises(FairseqStreamError, match="decode it with --search ib-beam") as err:
        get_search(name).build(fake_task(D), [model], gen_cfg(beam=1), stream_opts(search=name))
    assert "\n" not in str(err.value)
