"""A beam step's search as one C++ call gives the Python search's bits.

Where a beam's output layer is the fused one on the C++ top-k and its step the C++ beam operator,
``BeamSearch._search_natively`` runs both as ``searched_beam_step`` (ops/csrc/decoder_step.cpp): the
``c`` best candidates a row with fairseq's score edits (``best_of_window``: OutputScorer.top's aten calls),
then ``fairseq_stream::beam_step`` with the operands the Python step passes it. So on the trained demo model
the tokens, the scores and every positional score are EXACTLY those of the Python search (the same steps with
``_search_natively`` switched off), at k = 5 at batch 1 and batched, under both finalisation rules, with
``--min-len`` and ``--unkpen``, in float32 and int8; the statistics count the steps it searched.
"""
from typing import Any, Dict, Tuple

import pytest

from test_native_equals_eager import assert_identical

from fairseq_stream.model import native_decoder
from fairseq_stream.search.beam import BeamSearch
from fairseq_stream.search.defaults import NATIVE_SEARCH_KEY

N = 12
CASES: Dict[str, Tuple[str, Dict[str, Any], Dict[str, Any]]] = {  # name → (search, gen, opts)
    "k5-batch1-fairseq-rule": ("fixed-ours", {"beam": 5}, {"stream_capacity": 1, "beam_finalize": "fairseq"}),
    "k5-batched": ("fixed-ours", {"beam": 5}, {"stream_capacity": 4}),
    # an edit the call makes itself: EOS forbidden short of --min-len (past where most sentences would end); --unkpen
    # is passed on (its <unk> is not among these candidates: the greedy loop's tests, same function, cover that edit)
    "k4-min-len-unkpen": ("fixed-ours", {"beam": 4, "min_len": 40, "unkpen": 2.5}, {"stream_capacity": 3}),
    "k5-int8": ("fixed-ours", {"beam": 5}, {"stream_capacity": 1, "quantize": "int8"}),
    # pruning rules the operator knows (var-stream's default): the call passes them on
    "var-stream": ("var-stream", {"beam": 5}, {"stream_capacity": 4}),
}

pytestmark = pytest.mark.skipif(native_decoder.kernel_available() is not None,
                                reason="the native-step kernel cannot be built here")


@pytest.fixture(scope="module")
def data(demo_session, demo_sources):
    return demo_session.encode(demo_sources[:N])


@pytest.mark.parametrize("case", list(CASES))
def test_searched_beam_step_equals_python_search(demo_session, data, monkeypatch, case):
    search, gen, opts = CASES[case]
    opts = dict(opts, native_loop="off")  # every step a Python step (the beam loop calls searched_beam_step itself)
    native = demo_session.translate(data, search=search, gen=gen, opts=opts)
    with monkeypatch.context() as m:
        m.setattr(BeamSearch, "_search_natively", lambda self, state, scores, c: None)
        python = demo_session.translate(data, search=search, gen=gen, opts=opts)
    assert_identical(python, native)
    assert native.stats.timesteps == python.stats.timesteps
    assert NATIVE_SEARCH_KEY not in python.stats.extra
    # every step (none of these sentences reach its maximum length, whose steps would stay Python's)
    assert native.stats.extra[NATIVE_SEARCH_KEY] == native.stats.timesteps
