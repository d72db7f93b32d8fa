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
