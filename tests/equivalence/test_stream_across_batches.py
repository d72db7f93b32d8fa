"""One stream over the whole input (paper 000 Algorithm 1 over all of X, not per fairseq batch)
changes which sentences share a step, never a sentence's search: float64 on trained models."""
import os

import pytest
import torch

from conftest import DEMO

N = 40
BATCH = {"batch_size": 8, "required_batch_size_multiple": 1}  # five fairseq batches
GEN = {"beam": 5, "nbest": 3, "max_len_a": 1.2, "max_len_b": 10}


def assert_same(per_batch, across):
    assert len(across.hypos) == len(per_batch.hypos)
    for i, (x, y) in enumerate(zip(per_batch.hypos, across.hypos)):
        assert [h["tokens"].tolist() for h in x] == [h["tokens"].tolist() for h in y], f"sentence {i}"
        assert [h["score"] for h in x] == pytest.approx([h["score"] for h in y], abs=1e-9), f"sentence {i}"


def both(session, data, search, gen, opts):
    """(each fairseq batch streamed on its own, one stream over all of them)."""
    per_batch = session.translate(data, search=search, gen=gen, opts=dict(opts, stream_per_batch=True), **BATCH)
    across = session.translate(data, search=search, gen=gen, opts=opts, **BATCH)
    return per_batch, across


@pytest.fixture(scope="module")
def data64(demo_session64, demo_sources):
    return demo_session64.encode(demo_sources[:N])


@pytest.mark.parametrize("search,gen,opts", [
    ("var-stream", GEN, {"stream_capacity": 6}),
    ("var-stream", GEN, {"stream_epsilon": 0.3, "stream_max_candidates": 20}),
    ("fixed-stream", GEN, {"stream_capacity": 7, "stream_max_wait": 4}),
    ("var-fifo", GEN, {"stream_capacity": 5}),
    ("topup", GEN, {"stream_capacity": 6}),
    ("var-batch", GEN, {"stream_capacity": 6}),  # batches of 6 sentences cut across fairseq's batches
    ("fixed-ours", GEN, {"stream_capacity": 10}),
    ("gs-jacobi", {"beam": 1, "max_len_a": 1.2, "max_len_b": 10}, {"stream_capacity": 6}),
])
def test_across_batches_equals_per_batch_in_float64(demo_session64, data64, search, gen, opts):
    per_batch, across = both(demo_session64, data64, search, gen, opts)
    assert_same(per_batch, across)
    assert across.stats.expansions == per_batch.stats.expansions  # the same searches
    assert across.stats.encoder_slots <= (opts.get("stream_capacity") or opts["stream_max_candidates"])


def test_jacobi_across_batches_is_greedy(demo_session64, data64):
    greedy = demo_session64.translate(data64, search="beam", gen={"beam": 1, "max_len_b": 30})
    jacobi = demo_session64.translate(data64, search="gs-jacobi", gen={"beam": 1, "max_len_b": 30},
                                      opts={"stream_capacity": 5}, **BATCH)
    assert [h[0]["tokens"].tolist() for h in jacobi.hypos] == [h[0]["tokens"].tolist() for h in greedy.hypos]


def _session(data_dir, checkpoint):
    from fairseq_stream.session import TranslationSession

    return TranslationSession.load(data_dir, checkpoint, bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                   extra_args=["--source-lang", "es", "--target-lang", "en"], dtype=torch.float64)


def test_ensembles_lstm_and_ib_models_across_batches(demo_sources, tiny_transformer_ckpt, tiny_lstm_ckpt,
                                                      tiny_ib_ckpt, tiny_train_bin):
    """An ensemble, an LSTM (the generic backend: sources re-encoded in their slots) and an
    IBDecoder (finished hypotheses read from the device in bulk) stream across batches too."""
    cases = [
        (_session(DEMO, f"{os.path.join(DEMO, 'checkpoint.pt')}:{tiny_transformer_ckpt}"), "var-stream",
         {"beam": 3, "nbest": 2, "max_len_b": 12}, {"stream_capacity": 5}),
        (_session(tiny_train_bin, tiny_lstm_ckpt), "var-stream", {"beam": 4, "nbest": 2, "max_len_b": 12},
         {"stream_capacity": 5}),
        (_session(tiny_train_bin, tiny_lstm_ckpt), "var-fifo", {"beam": 3, "max_len_b": 12}, {"stream_capacity": 6}),
        (_session(tiny_train_bin, tiny_ib_ckpt), "ib-beam", {"beam": 4, "nbest": 2, "max_len_b": 20},
         {"stream_capacity": 5}),
    ]
    for session, search, gen, opts in cases:
        data = session.encode(demo_sources[:24])
        per_batch, across = both(session, data, search, gen, opts)
        assert_same(per_batch, across)
        assert across.stats.expansions == per_batch.stats.expansions, search
