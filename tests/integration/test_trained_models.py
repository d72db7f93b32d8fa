"""Tiny models trained in the session by stock ``fairseq-train`` (``tests/conftest.py``).

What the shipped demo model cannot show: a checkpoint with optimizer state as fairseq-train
writes it, an ensemble of two models, a non-Transformer (LSTM) model and an IBDecoder. Each
fixture trains once per session (10-30 updates, one torch thread). The exactness checks here
(stream == batch on the LSTM, our beam == fairseq's on the ensemble) are in the default tier;
the IBDecoder's host-read count, whose model needs 30 updates, is ``slow``.
"""
import os

import pytest
import torch
from fairseq import checkpoint_utils

from conftest import DEMO
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.engine.profiling import CostCounts, count_decoder_steps
from fairseq_stream.search.registry import get_search
from fairseq_stream.tools.session import TranslationSession

CODES = os.path.join(DEMO, "bpe.codes")
LANGS = ["--source-lang", "es", "--target-lang", "en"]


@pytest.mark.slow  # its fixture trains a tiny model with fairseq-train (the integration tier)
def test_stock_training_checkpoint_loads_with_weights_only(tiny_transformer_ckpt):
    # A checkpoint written by stock fairseq-train, optimizer state and all.
    state = checkpoint_utils.load_checkpoint_to_cpu(tiny_transformer_ckpt)
    assert "model" in state and state["cfg"]["model"] is not None
    assert os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD") is None


@pytest.mark.slow  # its fixture trains a tiny model with fairseq-train (the integration tier)
def test_ensembles_of_two_models(demo_sources, tiny_transformer_ckpt):
    session = TranslationSession.load(DEMO, f"{os.path.join(DEMO, 'checkpoint.pt')}:{tiny_transformer_ckpt}",
                                      bpe_codes=CODES, extra_args=LANGS)
    assert len(session.models) == 2
    data = session.encode(demo_sources[:5])
    ref = session.translate(data, search="beam", gen={"beam": 3, "max_len_b": 20})
    for name in ("var-stream", "fixed-ours", "gs-jacobi"):
        beam = 3 if get_search(name).capabilities.beam else 1
        out = session.translate(data, search=name, gen={"beam": beam, "max_len_b": 20, "max_len_a": 0})
        assert len(out.hypos) == 5
    # Our beam with fairseq's finalisation rule is fairseq's beam search, ensembles included.
    same = session.translate(data, search="fixed-ours", gen={"beam": 3, "max_len_b": 20}, opts={"beam_finalize": "fairseq"})
    assert [h[0]["tokens"].tolist() for h in same.hypos] == [h[0]["tokens"].tolist() for h in ref.hypos]


@pytest.mark.slow  # its fixture trains a tiny model with fairseq-train (the integration tier)
def test_lstm_models(demo_sources, tiny_lstm_ckpt, tiny_train_bin):
    session = TranslationSession.load(tiny_train_bin, tiny_lstm_ckpt, bpe_codes=CODES, extra_args=LANGS,
                                      dtype=torch.float64)
    data = session.encode(demo_sources[:12])
    gen = {"beam": 4, "nbest": 2, "max_len_b": 12}
    ref = session.translate(data, search="var-batch", gen=gen, opts={"stream_capacity": 12})
    off = {}  # the var-* default, each sentence's own pruning (issue 81)
    for name, opts in [("var-stream", dict(off, stream_capacity=5)), ("var-fifo", {"stream_capacity": 5}),
                       ("var-stream", dict(off, stream_capacity=8, stream_max_candidates=6, stream_oversubscribe=True))]:
        out = session.translate(data, search=name, gen=gen, opts=opts)
        assert [[h["tokens"].tolist() for h in x] for x in out.hypos] == [[h["tokens"].tolist() for h in x] for x in ref.hypos]
        assert out.stats.extra.get("oversubscribed_steps", 0) > 0 or not opts.get("stream_oversubscribe")
    with pytest.raises(FairseqStreamError, match="transformer"):
        session.build_generator("gs-jacobi", {"beam": 1}, {})


@pytest.mark.slow  # its fixture trains an IBDecoder for 30 updates (ib-beam needs real steps)
def test_at_most_one_host_read_per_step_with_ib_beam(tiny_ib_ckpt, tiny_train_bin, demo_sources):
    """The IBDecoder side of ``tests/conformance/test_host_reads.py``."""
    session = TranslationSession.load(tiny_train_bin, tiny_ib_ckpt, bpe_codes=CODES, extra_args=LANGS)
    data = session.encode(demo_sources[:24])
    with count_decoder_steps(CostCounts()) as counts:
        out = session.translate(data, search="ib-beam", gen={"beam": 4, "max_len_b": 30}, opts={"stream_capacity": 8},
                                postprocess=False)
    assert out.stats.timesteps > 10 and len(out.hypos) == 24
    # One read per step, plus one per pool that restores the word order of the finished
    # hypotheses on the host (a permutation that depends on where EOS fell); one pool here.
    pools = 1
    assert counts.host_reads <= out.stats.timesteps + pools, (counts.host_reads, out.stats.timesteps,
                                                              dict(counts.reads_by_op))
