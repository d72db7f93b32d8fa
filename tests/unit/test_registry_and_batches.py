"""The --search registry and the batches that never lose a sentence."""
import numpy as np
import pytest

import fairseq_stream  # noqa: F401
from fairseq_stream.errors import FairseqStreamError, format_error
from fairseq_stream.registry import get_search, search_names
from fairseq_stream.tasks.translation_stream import restore_dropped_batches


def test_registry_holds_the_baseline_and_rejects_unknown_names():
    assert "beam" in search_names()
    with pytest.raises(FairseqStreamError) as err:
        get_search("nope")
    message = format_error(err.value)
    assert message.startswith("fairseq-stream: error: unknown --search 'nope'")
    assert all(name in message for name in search_names())


@pytest.mark.parametrize("n,mult", [(100, 8), (13, 8), (1, 8), (16, 8), (7, 3)])
def test_dropped_tail_is_put_back_in_order(n, mult):
    indices = np.arange(n)[::-1].copy()
    batches = [indices[i: i + mult] for i in range(0, n, mult)]
    if len(batches[-1]) % mult:
        batches = batches[:-1]  # what fairseq-fixed's batch_by_size does
    restored = restore_dropped_batches(batches, indices)
    assert np.concatenate(restored).tolist() == indices.tolist()


def test_fairseq_batch_by_size_drops_and_we_restore():
    from fairseq.data import data_utils

    indices = np.arange(100, dtype=np.int64)
    sizes = np.full(100, 5, dtype=np.int64)
    batches = data_utils.batch_by_size(indices, lambda i: int(sizes[i]), max_sentences=16, required_batch_size_multiple=8)
    assert sum(len(b) for b in batches) == 96  # the fairseq-fixed behaviour this package guards against
    assert sum(len(b) for b in restore_dropped_batches(batches, indices)) == 100


def _help_epsilon_defaults():
    """``--search`` name → the --stream-epsilon default that ``--help`` states for it."""
    import dataclasses
    import re
    from fractions import Fraction

    from fairseq_stream.options import StreamDecodingConfig

    text = next(f.metadata["help"] for f in dataclasses.fields(StreamDecodingConfig) if f.name == "stream_epsilon")
    claims = {}
    for value, names in re.findall(r"(\d+(?:/\d+)?)(?: \(plain batches\))? for ([a-z, -]+?)(?:;| \()", text):
        for name in names.split(", "):
            claims[name] = float(Fraction(value))
    return claims


def test_stream_epsilon_help_states_what_each_strategy_uses():
    from fairseq_stream.strategies.streaming_beam import build_beam_family
    from fairseq_stream.strategies.jacobi import build_jacobi
    from helpers import TableModel, fake_task, gen_cfg, make_dictionary, stream_opts, tiny_transformer

    claims = _help_epsilon_defaults()
    assert set(claims) == {n for n in search_names() if get_search(n).capabilities.streaming}
    d = make_dictionary()
    built = {}
    for name in ("var-stream", "fixed-stream", "var-fifo", "topup", "var-batch", "fixed-ours"):
        g = build_beam_family(fake_task(d), [TableModel(d, {})], gen_cfg(beam=2), stream_opts(), name=name)
        built[name] = g.scheduler_cfg.epsilon
    model = tiny_transformer(d)
    for name in ("jacobi", "gs-jacobi", "hybrid-jacobi"):
        built[name] = build_jacobi(fake_task(d), [model], gen_cfg(beam=1), stream_opts(), name=name).scheduler_cfg.epsilon
    for name, epsilon in built.items():
        assert epsilon == pytest.approx(claims.get(name, 0.0)), name  # unlisted: plain batches
    assert built["var-batch"] == built["fixed-ours"] == 0.0
