"""What a model holds between runs (issue 80, round 6): the memory its pools keep is given back on request
(``release_cached_memory``, ``TranslationSession.close()`` and ``with``), weights changed in place are decoded
with, never the stale copies made of them, and ``--step-mode auto`` names the model it could not run natively."""
from __future__ import annotations

import pytest
import torch

from conftest import _load_demo

from fairseq_stream.model import model_step
from fairseq_stream.model.model_step import release_cached_memory

N = 12


@pytest.fixture(scope="module")
def own_session():
    """A demo session of this module's own: its pools and its weights are changed here."""
    return _load_demo()


def _tokens(result):
    return [h[0]["tokens"].tolist() for h in result.hypos]


def _static_steps(session):
    """The static steps of the session's decoders (their copies' included)."""
    decoders = set(model_step._decoders_of(session.models))
    return [static for decoder, static in model_step._STATIC_STEPS.items() if decoder in decoders]


def _held(session):
    """What the session's static steps hold free: (free slab bytes, idle stream buffer sets, free bucket states)."""
    steps = _static_steps(session)
    return (sum(s.pool.free_bytes for s in steps), sum(len(s.streams.idle) for s in steps),
            sum(p.free_count for s in steps for p in s.strategy_pools.values() if hasattr(p, "free_count")))


def test_release_empties_the_pools_and_a_later_run_decodes_the_same(own_session, demo_sources):
    data = own_session.encode(demo_sources[:N])
    run = dict(search="var-stream", gen={"beam": 5}, opts={"step_mode": "static", "stream_capacity": 4})
    before = own_session.translate(data, **run)
    free_bytes, idle_sets, free_buckets = _held(own_session)
    assert free_bytes > 0 and idle_sets > 0 and free_buckets > 0  # the run left its peak behind
    assert release_cached_memory(own_session.models) >= free_bytes
    assert _held(own_session) == (0, 0, 0)
    assert all(s.pool.peak_lent == s.pool.lent == 0 for s in _static_steps(own_session))
    assert _tokens(own_session.translate(data, **run)) == _tokens(before)


def test_close_and_with_release_what_the_session_holds(own_session, demo_sources):
    data = own_session.encode(demo_sources[:4])
    run = dict(search="var-stream", gen={"beam": 5}, opts={"step_mode": "static"})
    with own_session as session:
        first = session.translate(data, **run)
        assert _held(session) != (0, 0, 0)
    assert _held(own_session) == (0, 0, 0)
    second = own_session.translate(data, **run)  # a closed session still translates (its pools fill again)
    own_session.close()
    assert _held(own_session) == (0, 0, 0) and _tokens(second) == _tokens(first)


def _scale_in_place(model, how):
    layer = model.decoder.layers[0]
    with torch.no_grad():
        for linear in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.fc1):
            if how == "data":
                linear.weight.data.mul_(0.5)  # no version counter moves
            else:
                linear.weight.copy_(linear.weight * 0.5)


@pytest.mark.parametrize("matmul,how", [("torch", "data"), ("torch", "copy"), ("auto", "data"), ("auto", "copy")])
def test_weights_changed_in_place_are_decoded_with(demo_sources, matmul, how):
    """A session that changes its weights in place between two runs decodes the second with the new ones: what a
    freshly loaded model with those weights gives (the stacked q/k/v copies and the native step follow)."""
    session, fresh = _load_demo(), _load_demo()
    data = session.encode(demo_sources[:N])
    run = dict(search="var-stream", gen={"beam": 4}, opts={"cpu_matmul": matmul})
    old = session.translate(data, **run)
    _scale_in_place(session.models[0], how)
    _scale_in_place(fresh.models[0], how)
    new = session.translate(data, **run)
    assert new.stats.step_mode["mode"] == "native"
    assert _tokens(new) == _tokens(fresh.translate(data, **run)) != _tokens(old)


def test_auto_names_the_model_it_runs_eager(demo_session64, demo_sources):
    """--step-mode auto on a CPU takes eager for a model the native step does not cover, and says so."""
    out = demo_session64.translate(demo_session64.encode(demo_sources[:2]), search="var-stream", gen={"beam": 2})
    why = "eager, not native (the decoder is not float32 on the CPU)"
    assert out.stats.step_mode["mode"] == "eager" and out.stats.fallbacks.get("step mode") == why
    assert f"step mode: {why}" in out.stats.summary()
