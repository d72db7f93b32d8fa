"""IBDecoder family: reordering, positions, masks (Zhang2020 Eqs. 4–12) and the multi-word decoder step."""
import math

import pytest
import torch

from fairseq_stream.search import ib_order
from fairseq_stream.model.model_step import ModelStep
from helpers import make_dictionary, tiny_ib_model

EOS, PAD = 2, 1


@pytest.mark.parametrize("fill", ["step", "single"])
@pytest.mark.parametrize("h,c,order", [(1, 1, "side-to-middle"), (1, 2, "side-to-middle"), (1, 4, "side-to-middle"),
                                       (2, 1, "side-to-middle"), (2, 2, "side-to-middle"), (2, 3, "side-to-middle"),
                                       (4, 1, "side-to-middle"), (6, 1, "side-to-middle"), (2, 1, "middle-to-side"),
                                       (2, 2, "middle-to-side"), (4, 1, "middle-to-side")])
@pytest.mark.parametrize("n", list(range(0, 14)))
def test_reorder_and_restore_are_inverse_for_every_length(h, c, order, n, fill):
    words = list(range(10, 10 + n))
    target = ib_order.reorder(words, h, c, EOS, PAD, fill, order)
    assert ib_order.restore(target, h, c, EOS, PAD, order) == words
    if fill == "single":
        assert target.count(EOS) == ib_order.n_segments(h)  # one EOS per segment, where it ends
    elif h <= 2:
        assert len(target) % (h * c) == 0 and target[n:] == [EOS] * (len(target) - n)  # EOS fills the step
    else:  # each segment's last word pair is complete, PAD only after it
        for g in range(h // 2):
            toks = [t for i, t in enumerate(target) if (i % h) // 2 == g and t != PAD]
            assert toks.count(EOS) in (1, 2) and toks[-1] == EOS and len(toks) % 2 == 0


def test_reorder_matches_eq6_and_eq9_by_hand():
    a, b, c_, d, e, f = 10, 11, 12, 13, 14, 15
    assert ib_order.reorder([a, b, c_, d], 2, 1, EOS, PAD, "single") == [a, d, b, c_, EOS]  # "A B C D → A D B C"
    assert ib_order.reorder([a, b, c_], 2, 1, EOS, PAD, "single") == [a, c_, b, EOS]
    assert ib_order.reorder([a], 2, 1, EOS, PAD, "single") == [a, EOS]
    assert ib_order.reorder([a, b], 2, 1, EOS, PAD, "single") == [a, b, EOS]
    # The default fills the step where the directions meet: both directions learn to stop.
    assert ib_order.reorder([a, b, c_, d], 2, 1, EOS, PAD) == [a, d, b, c_, EOS, EOS]
    assert ib_order.reorder([a, b, c_], 2, 1, EOS, PAD) == [a, c_, b, EOS]  # middle word left, EOS right
    assert ib_order.reorder([a, b, c_], 2, 2, EOS, PAD) == [a, c_, b, EOS]
    assert ib_order.reorder([a, b, c_, d], 2, 2, EOS, PAD) == [a, d, b, c_, EOS, EOS, EOS, EOS]
    # IMDecoder, h = 4: segments [a b c] and [d e f], each interleaved, a word pair of each per step.
    assert ib_order.reorder([a, b, c_, d, e, f], 4, 1, EOS, PAD) == [a, c_, d, f, b, EOS, e, EOS]
    assert ib_order.reorder([a, b, c_, d, e], 4, 1, EOS, PAD) == [a, c_, d, e, b, EOS, EOS, EOS]
    assert ib_order.reorder([a, b, c_, d, e], 4, 1, EOS, PAD, "single") == [a, c_, d, e, b, EOS, EOS, PAD]
    with pytest.raises(ValueError):
        ib_order.reorder([a], 2, 1, EOS, PAD, "both")


def test_vanilla_sa_and_middle_to_side_orders_by_hand():
    a, b, c_, d, e, f = 10, 11, 12, 13, 14, 15
    # Vanilla SA (h = 1): left to right, c words per step, EOS filling the last step.
    assert ib_order.reorder([a, b, c_], 1, 2, EOS, PAD) == [a, b, c_, EOS]
    assert ib_order.reorder([a, b, c_, d], 1, 2, EOS, PAD) == [a, b, c_, d, EOS, EOS]
    assert ib_order.reorder([a, b, c_, d], 1, 2, EOS, PAD, "single") == [a, b, c_, d, EOS]
    assert ib_order.reorder([a, b, c_], 1, 4, EOS, PAD) == [a, b, c_, EOS]
    assert ib_order.reorder([a, b, c_, d, e], 1, 4, EOS, PAD) == [a, b, c_, d, e, EOS, EOS, EOS]
    # Middle-to-side: from the middle y⌈n/2⌉ out, the first slot of a step walking left.
    assert ib_order.reorder([a, b, c_, d, e, f], 2, 1, EOS, PAD, "single", "middle-to-side") == [c_, d, b, e, a, f, EOS]
    assert ib_order.reorder([a, b, c_, d, e], 2, 1, EOS, PAD, "single", "middle-to-side") == [c_, d, b, e, a, EOS]
    assert ib_order.reorder([a, b, c_, d], 2, 1, EOS, PAD, "step", "middle-to-side") == [b, c_, a, d, EOS, EOS]
    assert ib_order.reorder([a], 2, 1, EOS, PAD, "step", "middle-to-side") == [a, EOS]
    # Decoder outputs with words after the EOS: cut there, then put back in order.
    assert ib_order.restore([c_, d, b, e, a, EOS, f], 2, 1, EOS, PAD, "middle-to-side") == [a, b, c_, d, e]
    assert ib_order.restore([a, b, EOS, c_], 1, 2, EOS, PAD) == [a, b]


@pytest.mark.parametrize("h,c,order,independent,message", [
    (3, 1, "side-to-middle", False, "--ib-h must be 1 (left to right: vanilla SA) or an even number >= 2"),
    (0, 2, "side-to-middle", False, "--ib-h must be 1"),
    (1, 0, "side-to-middle", False, "--ib-c must be >= 1"),
    (1, 2, "middle-to-side", False, "--ib-order middle-to-side needs two directions"),
    (1, 2, "side-to-middle", True, "--ib-independent-directions needs two directions"),
    (2, 1, "outside-in", False, "--ib-order must be 'side-to-middle' or 'middle-to-side'"),
])
def test_unsupported_layouts_get_one_line_errors(h, c, order, independent, message):
    from argparse import Namespace

    from fairseq_stream.errors import FairseqStreamError
    from fairseq_stream.search.ib_order import IBSpec

    args = Namespace(ib_h=h, ib_c=c, ib_order=order, ib_independent_directions=independent)
    with pytest.raises(FairseqStreamError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        IBSpec.from_args(args)
    assert "\n" not in str(err.value)


def test_positions_follow_eq7_and_eq10():
    slots = torch.arange(8)
    assert ib_order.slot_positions(slots, 2).tolist() == [1, -1, 2, -2, 3, -3, 4, -4]
    assert ib_order.slot_positions(slots, 2, "vanilla").tolist() == list(range(8))
    assert ib_order.slot_positions(slots, 1).tolist() == list(range(8))  # vanilla SA: Eq. 5
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
                                                  (2, 1, "relaxed", True), (1, 2, "relaxed", False),
                                                  (1, 4, "relaxed", False)])
def test_multi_word_incremental_steps_equal_the_masked_full_forward(h, c, mask, independent):
    from fairseq_stream.search.ib_beam import IBBeamSearch
    from fairseq_stream.search.ib_order import IBSpec

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


def _step_scores(rows: int, z: int, entries) -> torch.Tensor:
    """Log-probabilities (rows, z, |D|): −20 everywhere except ``entries[(row, slot)] = {word: lp}``."""
    out = torch.full((rows, z, len(D)), -20.0, dtype=torch.float64)
    for (r, j), words in entries.items():
        for w, lp in words.items():
            out[r, j, w] = lp
    return out


@pytest.mark.parametrize("finalize", ["top", "all"])
def test_ib_finalize_top_ignores_ended_continuations_outside_the_beam(finalize):
    """--ib-finalize top (fairseq's rule) vs all (Algorithm 1 read literally), by hand, B = 2, z = 2."""
    from fairseq_stream.search.ib_beam import IBBeamSearch
    from fairseq_stream.search.ib_order import IBSpec
    from fairseq_stream.search.output import OutputScorer

    A, B_, C, D_, E, F_, G = 4, 5, 6, 7, 8, 9, 10
    search = IBBeamSearch(IBSpec(2, 1), OutputScorer([], fused=False, normalized_input=True), beam=2, nbest=1,
                          lenpen=1.0, eos=EOS, pad=PAD, bos=EOS, dedup=False, dtype=torch.float64, finalize=finalize)
    out = search.init_state(torch.tensor([0]), torch.tensor([50]), torch.tensor([5]))
    # Step 1: (A B) −0.2 and (A C) −0.6 are the beam.
    out = search.step(out.state, _step_scores(1, 2, {(0, 0): {A: -0.1}, (0, 1): {B_: -0.1, C: -0.5}}))
    assert not out.finished and out.state.tokens[0, :, :2].tolist() == [[A, B_], [A, C]]
    assert out.state.t == 2 and out.state.steps.tolist() == [2] and (out.state.tokens[0, :, 2:] == PAD).all()
    # Step 2: the sentence's candidates are (D E) −0.3, (D EOS) −0.4 [ends], (EOS G) −2.6 [ends], (F G) −2.65.
    scores = _step_scores(2, 2, {(0, 0): {D_: -0.05}, (0, 1): {E: -0.05, EOS: -0.15},
                                 (1, 0): {EOS: -1.0, F_: -1.05}, (1, 1): {G: -1.0}})
    out = search.step(out.state, scores)
    if finalize == "all":  # both ended continuations are final: B of them end the sentence already
        finished = out.finished.to_hypotheses()  # read from the device once the pool is done
        assert set(finished) == {0} and finished[0][0].tokens.tolist() == [A, D_, B_, EOS]
    else:  # only (D EOS) is final; the beam goes on with (D E) and (F G)
        st = out.state
        assert not out.finished and st.tokens[0, :, 2:4].tolist() == [[D_, E], [F_, G]]
        assert st.n_final.tolist() == [1]
        final = search._hypothesis(st.fin_tokens[0, 0, : int(st.fin_len[0, 0])].tolist(),
                                   st.fin_scores[0, 0, : int(st.fin_len[0, 0])].tolist(), float(st.fin_total[0, 0]))
        assert final.tokens.tolist() == [A, D_, B_, EOS]


@pytest.mark.parametrize("name", ["beam", "fixed-ours", "var-stream", "gs-jacobi"])
def test_ib_checkpoint_with_another_search_is_refused(name):
    from fairseq_stream.errors import FairseqStreamError
    import fairseq_stream  # noqa: F401  (registers the strategies)
    from fairseq_stream.integration.build import build_generator
    from helpers import fake_task, gen_cfg, stream_opts

    model = tiny_ib_model(D).eval()
    with pytest.raises(FairseqStreamError, match="decode it with --search ib-beam") as err:
        build_generator(name, fake_task(D), [model], gen_cfg(beam=1), stream_opts(search=name))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fill", ["step", "single"])
def test_task_rewrites_a_batch_with_its_eos_fill(fill):
    from fairseq_stream.integration.ib_task import TranslationIBConfig, TranslationIBTask

    task = TranslationIBTask(TranslationIBConfig(ib_eos=fill), D, D)
    target = torch.tensor([[10, 11, 12, 13, EOS], [10, 11, 12, EOS, PAD]])
    sample = {"target": target, "net_input": {"src_tokens": target, "prev_output_tokens": target}, "ntokens": 9}
    out = task.reorder_sample(sample)
    want = [ib_order.reorder(row, 2, 1, EOS, PAD, fill) for row in ([10, 11, 12, 13], [10, 11, 12])]
    width = max(map(len, want))
    assert out["target"].tolist() == [w + [PAD] * (width - len(w)) for w in want]
    assert out["net_input"]["prev_output_tokens"][:, :2].tolist() == [[EOS, EOS]] * 2  # shifted by z = 2
    assert out["ntokens"] == sum(map(len, want))


def test_task_rejects_an_unknown_eos_fill():
    from fairseq_stream.errors import FairseqStreamError
    from fairseq_stream.integration.ib_task import TranslationIBConfig, TranslationIBTask

    with pytest.raises(FairseqStreamError, match="--ib-eos must be 'step' or 'single'"):
        TranslationIBTask(TranslationIBConfig(ib_eos="both"), D, D)


@pytest.mark.parametrize("spec_args,want", [
    (dict(h=1, c=2), "A B C D"),  # vanilla SA: left to right, two words a step
    (dict(h=2, c=1), "A C D B"),  # IBDecoder: (A B) (C D) are y1 yn, y2 yn−1
    (dict(h=2, c=1, order="middle-to-side"), "C A B D"),  # (A B) (C D) are ym ym+1, ym−1 ym+2
])
def test_ib_beam_restores_each_order_by_hand(spec_args, want):
    """Greedy ib-beam over a scripted table, z = 2: the same decoder words, each layout's word order."""
    from fairseq_stream.search.ib_beam import IBBeamSearch
    from fairseq_stream.search.ib_order import IBSpec
    from fairseq_stream.search.output import OutputScorer

    A, B_, C, D_ = 4, 5, 6, 7
    search = IBBeamSearch(IBSpec(**spec_args), OutputScorer([], fused=False, normalized_input=True), beam=1, nbest=1,
                          lenpen=1.0, eos=EOS, pad=PAD, bos=EOS, dedup=False, dtype=torch.float64)
    out = search.init_state(torch.tensor([0]), torch.tensor([50]), torch.tensor([5]))
    for step in ({A: -0.1}, {B_: -0.1}), ({C: -0.1}, {D_: -0.1}), ({EOS: -0.1}, {EOS: -0.1}):
        out = search.step(out.state, _step_scores(1, 2, {(0, 0): step[0], (0, 1): step[1]}))
    hyp = out.finished.to_hypotheses()[0][0]
    names = {A: "A", B_: "B", C: "C", D_: "D", EOS: "EOS"}
    assert " ".join(names[t] for t in hyp.tokens.tolist()) == want + " EOS"
    assert hyp.positional_scores.sum().item() == pytest.approx(-0.6)
