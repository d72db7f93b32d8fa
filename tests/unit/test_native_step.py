"""The native decoder step (``csrc/decoder_step.cpp``) against the eager one on random transformers:
the same logits bit for bit, step after step (one token, causal blocks, rows of different lengths),
pre- and post-norm, sinusoidal and learned positions, ReLU and GELU; what it refuses is named."""
import shutil

import pytest
import torch

from fairseq_stream.model import native_decoder
from fairseq_stream.model.model_step import ModelStep
from fairseq_stream.ops import kernels
from helpers import make_dictionary, tiny_transformer

D = make_dictionary([f"w{i}" for i in range(40)])

needs_kernel = pytest.mark.skipif(native_decoder.kernel_available() is not None,
                                  reason="the native-step kernel cannot be built here")


def test_the_kernel_is_prebuilt_with_the_others_and_loads():
    assert kernels.all_kernels()["decoder_step.cpp"][2] == "native-step"
    if shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    assert native_decoder.kernel_available() is None
    assert hasattr(torch.classes.fairseq_stream, "NativeDecoder")


def _model(normalize_before: bool, learned_pos: bool, gelu: bool):
    model = tiny_transformer(D, normalize_before=normalize_before, learned_pos=learned_pos, dtype=torch.float32)
    if gelu:
        from fairseq import utils

        for layer in model.decoder.layers:
            layer.activation_fn = utils.get_activation_fn("gelu")
    return model


def _start(model, mode: str, seed: int, feed: int):
    """A model step over 4 random sources, its first state, and ``feed`` random tokens a row."""
    g = torch.Generator().manual_seed(seed)
    n = 4
    src = torch.randint(4, len(D), (n, 6), generator=g)
    src[:, -1] = D.eos()
    step = ModelStep([model], step_mode=mode)
    pool = step.encode(src, torch.full((n,), 6), D.pad(), D.eos())
    state = step.initial_state(pool, torch.arange(n), D.eos())
    return step, pool, state, torch.randint(4, len(D), (n, feed), generator=g)


def _steps(model, mode: str):
    """Logits of a sequence of steps: one token, a block of 3, rows kept at different lengths, one token."""
    step, pool, state, tokens = _start(model, mode, 3, 8)
    out = []
    with torch.no_grad():
        lp, state = step.step(pool, state, tokens[:, :1])
        out.append(lp)
        lp, state = step.step(pool, state, tokens[:, 1:4])  # a causal block, rows of one length
        out.append(lp)
        state = step.accept(state, torch.tensor([3, 1, 2, 3]), 3)  # rows of different lengths
        lp, state = step.step(pool, state, tokens[:, 4:6])  # a block at each row's own length
        out.append(lp)
        state = step.accept(state, torch.tensor([2, 1, 2, 1]), 2)
        lp, state = step.step(pool, state, tokens[:, 6:7])
        out.append(lp)
    return out, step.step_stats


@needs_kernel
@pytest.mark.parametrize("normalize_before,learned_pos,gelu", [(True, False, False), (False, True, False),
                                                                (False, False, True)])
def test_native_steps_give_the_eager_steps_bits(normalize_before, learned_pos, gelu):
    model = _model(normalize_before, learned_pos, gelu)
    eager, _ = _steps(model, "eager")
    native, stats = _steps(model, "native")
    assert stats.native == 4 and stats.eager == 0 and not stats.fallbacks
    for a, b in zip(eager, native):
        assert torch.equal(a, b)


@needs_kernel
def test_a_decoder_it_does_not_cover_runs_eager_with_the_reason_named():
    model = _model(True, False, False)
    model.decoder.layers[0].activation_fn = torch.tanh
    eager, _ = _steps(model, "eager")
    native, stats = _steps(model, "native")
    assert stats.native == 0 and stats.eager == 4
    assert stats.fallbacks == {"an activation other than ReLU or GELU": 4}
    assert all(torch.equal(a, b) for a, b in zip(eager, native))
    assert ModelStep([model], step_mode="auto").step_mode == "eager"  # auto: native only where it runs every step


def _greedy_states(model, mode: str, fused: bool):
    """Greedy continuations of 3 calls from rows of one length, from rows of different lengths, and
    from a block of 2 tokens: ``greedy_steps`` (one native call) or a loop of ``step`` and ``argmax``
    — tokens, and the logits of one more step over the caches they left."""
    step, pool, state, feed = _start(model, mode, 5, 4)

    def greedy(state, first):
        if fused:
            done = step.greedy_steps(pool, state, first, 3)
            assert done is not None
            return done
        out = []
        for _ in range(3):
            lp, state = step.step(pool, state, first if first.dim() == 2 else first.unsqueeze(1))
            first = lp[:, -1].argmax(-1)
            out.append(first)
        return torch.stack(out, 1), state

    out = []
    with torch.no_grad():
        a, state = greedy(state, feed[:, 0])
        out.append(a)
        _, state = step.step(pool, state, feed[:, 1:4])  # a block, then rows of different lengths
        state = step.accept(state, torch.tensor([3, 1, 2, 3]), 3)
        b, state = greedy(state, feed[:, 1])
        out.append(b)
        c, state = greedy(state, feed[:, 2:4])  # the draft's catch-up block of two, then its proposals
        out.append(c)
        lp, state = step.step(pool, state, c[:, -1:])
        out.append(lp)
    return out, step.step_stats


@needs_kernel
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_greedy_steps_in_one_native_call_equal_a_loop_of_steps(quantize):
    """Speculative decoding's draft proposes by ``greedy_steps``: its tokens, and the caches it leaves,
    are a Python loop's of single-token native steps and arg-max — in float32 and int8."""
    from fairseq_stream.model.quantize import prepare_models

    model = prepare_models([_model(True, False, False)], None if quantize == "none" else "int8")[0]
    loop, loop_stats = _greedy_states(model, "native", fused=False)
    fused, stats = _greedy_states(model, "native", fused=True)
    assert stats.native == loop_stats.native == 3 * 3 + 2 and stats.eager == 0 and not stats.fallbacks
    for a, b in zip(loop, fused):
        assert torch.equal(a, b)
    assert ModelStep([model], step_mode="eager").greedy_steps(None, None, torch.zeros(1), 3) is None  # loops then
