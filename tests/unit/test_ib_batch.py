"""The IBDecoder family's per-batch training work (Zhang2020): the whole-batch target rewrite
equals the per-sentence one it replaced, cached masks and position encodings equal the ones
built per batch, and none of it runs Python per token or per sentence."""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch

from fairseq_stream.search import ib_order
from helpers import make_dictionary, tiny_ib_model

D = make_dictionary([f"w{i}" for i in range(40)])
EOS, PAD = D.eos(), D.pad()
LAYOUTS = [(2, 1), (2, 2), (2, 3), (4, 1), (6, 1), (1, 2), (1, 4)]  # IBDecoder, +SA (c = 2, 3), IMDecoder (h = 4, 6), vanilla SA


def reference_reorder_sample(sample: Dict[str, Any], h: int, c: int, fill: str,
                             order: str = "side-to-middle") -> Tuple[List[List[int]], int]:
    """The per-sentence rewrite the task used before (a Python loop over rows): reordered target, ntokens."""
    rows = []
    for row in sample["target"].tolist():
        words = [t for t in row if t != PAD]
        if words and words[-1] == EOS:
            words = words[:-1]
        rows.append(ib_order.reorder(words, h, c, EOS, PAD, fill, order))
    width = max(len(r) for r in rows)
    padded = [r + [PAD] * (width - len(r)) for r in rows]
    return padded, sum(t != PAD for r in padded for t in r)


def random_batch(g: torch.Generator, sentences: int, width: int, *, left_pad: bool = False) -> Dict[str, Any]:
    """A collated batch: sentences of 0 … width tokens ending in EOS (mostly), padded to width."""
    target = torch.randint(4, len(D), (sentences, width), generator=g)
    for b in range(sentences):
        n = int(torch.randint(0, width + 1, (1,), generator=g))
        target[b, n:] = PAD
        if n and torch.rand(1, generator=g) < 0.8:
            target[b, n - 1] = EOS
        if n > 2 and torch.rand(1, generator=g) < 0.1:
            target[b, 0] = EOS  # an EOS among the words stays a word
        if left_pad:
            target[b] = torch.cat([target[b, n:], target[b, :n]])
    return {"target": target, "net_input": {"src_tokens": target, "prev_output_tokens": target}, "ntokens": 0}


def make_task(h: int, c: int, fill: str, order: str = "side-to-middle"):
    from fairseq_stream.integration.ib_task import TranslationIBConfig, TranslationIBTask

    return TranslationIBTask(TranslationIBConfig(ib_h=h, ib_c=c, ib_eos=fill, ib_order=order), D, D)


@pytest.mark.parametrize("fill", ib_order.EOS_FILLS)
@pytest.mark.parametrize("h,c,order", [(h, c, "side-to-middle") for h, c in LAYOUTS] + [(2, 1, "middle-to-side")])
@pytest.mark.parametrize("left_pad", [False, True])
def test_batch_rewrite_equals_the_per_sentence_reference(h, c, order, fill, left_pad):
    task = make_task(h, c, fill, order)
    g = torch.Generator().manual_seed(100 * h + 10 * c + left_pad)
    for sentences, width in [(1, 1), (1, 7), (3, 12), (16, 33), (40, 70), (5, 130)]:
        sample = random_batch(g, sentences, width, left_pad=left_pad)
        want, ntokens = reference_reorder_sample(sample, h, c, fill, order)
        out = task.reorder_sample(sample)
        assert out["target"].tolist() == want
        assert out["ntokens"] == ntokens and isinstance(out["ntokens"], int)
        assert torch.equal(out["net_input"]["prev_output_tokens"],
                           ib_order.shift_inputs(torch.tensor(want), h * c, EOS, PAD))
        assert out["target"].dtype == sample["target"].dtype


@pytest.mark.parametrize("fill", ib_order.EOS_FILLS)
@pytest.mark.parametrize("h,c,order", [(h, c, "side-to-middle") for h, c in LAYOUTS]
                         + [(2, 1, "middle-to-side"), (2, 2, "middle-to-side"), (4, 1, "middle-to-side")])
def test_reorder_index_is_reorder_for_every_length(h, c, order, fill):
    lengths = torch.arange(0, 150)
    index = ib_order.reorder_index(lengths, ib_order.reorder_width(149, h, c, fill), h, c, fill, order)
    for n in lengths.tolist():
        want = ib_order.reorder(list(range(n)), h, c, ib_order.EOS_CODE, ib_order.PAD_CODE, fill, order)
        assert ib_order.reorder_width(n, h, c, fill) == len(want)
        assert index[n, : len(want)].tolist() == want and (index[n, len(want):] == ib_order.PAD_CODE).all()


@pytest.mark.parametrize("h,c,vanilla,independent", [(1, 1, False, False), (2, 1, False, False), (2, 2, False, False),
                                                     (4, 1, False, False), (2, 1, True, False), (2, 1, False, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_cached_mask_equals_the_mask_built_per_batch(h, c, vanilla, independent, dtype):
    for n in [1, 5, 64, 65, 200, 7, 130]:  # grows past the rounding, then shrinks
        built = ib_order.mask(n, h, c, vanilla=vanilla, independent=independent, dtype=dtype)
        cached = ib_order.cached_mask(n, h, c, vanilla=vanilla, independent=independent, dtype=dtype)
        assert cached.shape == (n, n) and cached.dtype == dtype and torch.equal(cached, built)


@pytest.mark.parametrize("h,c,positions", [(2, 1, "bidirectional"), (2, 2, "bidirectional"), (4, 1, "bidirectional"),
                                           (2, 1, "vanilla")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_target_embeddings_equal_the_per_slot_ones_values_and_gradients(h, c, positions, dtype):
    """embed_target (cached encodings) vs embed_block at slots 0 … n−1 as the decoder fed them before."""
    dec = tiny_ib_model(D, h=h, c=c, positions=positions, dtype=dtype).decoder
    for bsz, n in [(3, 9), (5, 70), (2, 9)]:
        tokens = torch.randint(4, len(D), (bsz, n), generator=torch.Generator().manual_seed(n))
        slots = torch.arange(n).unsqueeze(0).expand(bsz, n)
        grads = []
        for fn in (lambda: dec.embed_block(tokens, slots), lambda: dec.embed_target(tokens)):
            dec.zero_grad()
            out = fn()
            (out * torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)).sum().backward()
            grads.append((out.detach(), [p.grad.clone() for p in dec.parameters() if p.grad is not None]))
        (ref, ref_grads), (got, got_grads) = grads
        assert torch.equal(ref, got)
        assert len(ref_grads) == len(got_grads) and all(torch.equal(a, b) for a, b in zip(ref_grads, got_grads))


def test_prefix_cache_is_bounded_and_grows_in_steps():
    built: List[int] = []

    def build(size: int, key: int) -> torch.Tensor:
        built.append(size)
        return torch.arange(size)

    cache = ib_order.PrefixCache(build, max_keys=3, step=64)
    assert cache.get(10, (0,)).numel() == 64 and cache.get(64, (0,)).numel() == 64 and built == [64]
    assert cache.get(65, (0,)).numel() == 128 and built == [64, 128]
    for key in range(1, 6):
        cache.get(5, (key,))
    assert len(cache.tables) == 3 and list(cache.tables) == [(3,), (4,), (5,)]


# ---- the per-batch work stays vectorised ---------------------------------------------------------
def python_lines(fn: Callable[[], Any]) -> int:
    """Python line events while ``fn`` runs (its own frames and every Python function it calls)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def _right_padded(sentences: int, width: int) -> Dict[str, Any]:
    g = torch.Generator().manual_seed(width)
    target = torch.randint(4, len(D), (sentences, width), generator=g)
    lengths = torch.randint(1, width + 1, (sentences,), generator=g)
    lengths[0] = width
    for b, n in enumerate(lengths.tolist()):
        target[b, n - 1], target[b, n:] = EOS, PAD
    return {"target": target, "net_input": {"src_tokens": target, "prev_output_tokens": target}, "ntokens": 0}


@pytest.mark.parametrize("h,c", [(2, 1), (2, 2), (4, 1)])
def test_target_rewrite_runs_no_python_per_token_or_sentence(h, c):
    task = make_task(h, c, "step")
    batches = [_right_padded(4, 10), _right_padded(64, 10), _right_padded(4, 400), _right_padded(64, 400)]
    ib_order._PLANS.tables.clear()  # cold: the first batch of a size also builds its order table
    cold = []
    for sample in batches:
        cold.append(python_lines(lambda: task.reorder_sample(sample)))
        ib_order._PLANS.tables.clear()
    for sample in batches:
        task.reorder_sample(sample)
    warm = [python_lines(lambda: task.reorder_sample(sample)) for sample in batches]
    assert len(set(cold)) == 1 and len(set(warm)) == 1, (cold, warm)
    assert warm[0] < cold[0] < 400  # a few dozen lines, never one per token


@pytest.mark.parametrize("h,c,independent", [(2, 1, False), (2, 2, False), (4, 1, False), (2, 1, True)])
def test_mask_and_positions_run_no_python_per_token(h, c, independent):
    dec = tiny_ib_model(D, h=h, c=c, independent=independent, dtype=torch.float32).decoder
    like = torch.zeros(1)
    counts = {}
    for n in (10, 400):
        ib_order._MASKS.tables.clear()
        ib_order._ENCODINGS.tables.clear()
        cold = python_lines(lambda: (dec.ib_mask(n, like), dec.target_slot_embeddings(n, like)))
        warm = python_lines(lambda: (dec.ib_mask(n, like), dec.target_slot_embeddings(n, like)))
        counts[n] = (cold, warm)
    assert counts[10] == counts[400], counts
    assert counts[10][1] < counts[10][0]  # warm batches skip the build
    # The whole embedding of a batch: 4 × 10 tokens and 64 × 400 run the same Python.
    small, large = torch.randint(4, len(D), (4, 10)), torch.randint(4, len(D), (64, 400))
    with torch.no_grad():
        dec.embed_target(small), dec.embed_target(large)
        assert python_lines(lambda: dec.embed_target(small)) == python_lines(lambda: dec.embed_target(large))
