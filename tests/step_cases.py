"""Shared cases of the step-backend test matrix (tests/unit/test_step_backends.py).

Every fused step operator is driven over whole random searches from a reference strategy and a
strategy on the backend under test, stepping both from the same state each time: every output
the scheduler sees and every meaningful part of the new state must be identical. Importable
from a subprocess (Triton's interpreter must be switched on before Triton is imported).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import torch
from torch import Tensor

from fairseq_stream.search.ib_order import IBSpec
from fairseq_stream.engine.stats import DecodeStats
from fairseq_stream.search.beam import BeamConfig, BeamSearch, Pruning, Rung
from fairseq_stream.search.ib_beam import FinishedIB, IBBeamSearch
from fairseq_stream.search.jacobi import JacobiConfig, JacobiDecoding

EOS, PAD, BOS, V = 2, 1, 0, 12

# ---- cases: every finalisation rule, every pruning rule and reference, boundary values (δ = 0
# and rp = 1 prune even the best: the sentence keeps it), one sentence, sizes that are not powers of two
BEAM_CASES: List[Dict[str, Any]] = [
    dict(beam=4),
    dict(beam=4, finalize="fairseq"),
    # Freitag2017's preset: rp, ap, rpl and mc from the best active candidate, the shrinking beam
    dict(beam=5, finalize="shrink", rel_threshold=0.6, abs_threshold=2.5, rel_local_threshold=0.02,
         max_cands_per_node=3, reference="active"),
    dict(beam=3, final_count=1),
    dict(beam=5, abs_threshold=1.5, max_cands_per_node=3),
    dict(beam=5, abs_threshold=1.0, reference="final", lenpen=0.6),
    dict(beam=5, abs_threshold=1.0, reference="active"),
    dict(beam=5, abs_threshold=0.8, reference="normalized", lenpen=1.3, ended="keep"),
    dict(beam=6, rel_threshold=0.3, rel_local_threshold=0.05, max_cands_per_node=4),
    dict(beam=4, abs_threshold=0.0, finalize="fairseq"),
    dict(beam=3, rel_threshold=1.0, reference="active"),
    dict(beam=5, abs_threshold=1e-12, reference="normalized", sentences=1),
    dict(beam=7, abs_threshold=2.0, sentences=7),
    dict(beam=5, abs_threshold=0.5, abs_scale=1.5, max_cands_per_node=3),  # δ per sentence: max(0.5, 1.5 · ū)
    dict(beam=6, abs_threshold=0.0, abs_scale=0.7, reference="final", lenpen=0.6, ended="keep"),
    # the final margin a token (the CPU default, issue 81): max(δ, β·|c|^lenpen) against the best final only
    dict(beam=5, abs_threshold=0.5, final_per_token=0.3, lenpen=0.6),
    dict(beam=4, abs_threshold=1.0, final_per_token=0.05, ended="keep", rel_local_threshold=0.05, sentences=7),
    # per-sentence rungs (--prune-auto's probes in the run's steps): sentence i at rung i mod 3 — the run's
    # pruning, the fixed beam, a faster rung — and under another reference, a rung with δ and no M
    dict(beam=5, abs_threshold=1.5, max_cands_per_node=3, rungs=((math.inf, None), (1.0, 2)), sentences=7),
    dict(beam=4, abs_threshold=2.0, reference="active", ended="keep", rel_local_threshold=0.05,
         rungs=((0.5, None), (math.inf, 2))),
]
JACOBI_CASES: List[Dict[str, Any]] = [
    dict(block=None), dict(block=3), dict(block=4, init="tail"), dict(block=3, max_parallel_len=4), dict(block=1),
    dict(block=2, sentences=1), dict(block=3, sentences=7),
]
IB_CASES: List[Dict[str, Any]] = [
    dict(h=2, c=1, beam=4, finalize="top"), dict(h=2, c=1, beam=4, finalize="all"), dict(h=2, c=1, beam=1),
    dict(h=2, c=2, beam=3), dict(h=4, c=1, beam=4), dict(h=4, c=1, beam=2, finalize="all"),
    dict(h=2, c=1, beam=3, sentences=1), dict(h=1, c=2, beam=3), dict(h=1, c=4, beam=2, finalize="all"),
]


def case_id(case: Dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items())


# ---- the beam step --------------------------------------------------------------------------
def beam_search(case: Dict[str, Any], dtype: torch.dtype, backend: str) -> Tuple[BeamSearch, int]:
    case = dict(case)
    sentences = case.pop("sentences", 6)
    beam, final_count = case.pop("beam"), case.pop("final_count", 0)
    finalize, lenpen = case.pop("finalize", "ours"), case.pop("lenpen", 1.0)
    rungs = case.pop("rungs", None)
    cfg = BeamConfig(beam=beam, nbest=min(2, final_count or beam), final_count=final_count, lenpen=lenpen,
                     finalize=finalize, pruning=Pruning(**case))
    search = BeamSearch(cfg, None, eos=EOS, pad=PAD, bos=BOS, dtype=dtype, stats=DecodeStats(), step_backend=backend)
    if rungs is not None:  # the i-th sentence (its handle's rank) at rung i mod (rungs + 1)
        search.use_rungs([Rung(d, m) for d, m in rungs],
                         lambda handles: torch.arange(len(handles), device=handles.device) % (len(rungs) + 1))
    return search, sentences


def beam_candidates(g: torch.Generator, state: Any, search: BeamSearch, dtype: torch.dtype) -> Tuple[Any, Any]:
    """Each row's best c tokens of a random distribution; EOS forced at the maximum length."""
    rows = state.row_slot.numel()
    logits = torch.randn(rows, V, generator=g, dtype=torch.float64)
    logits[:, PAD] = -math.inf
    logits[:, EOS] += 0.5
    if rows % 3 == 0:  # ties between candidates of different rows and tokens
        logits = torch.round(logits * 2) / 2
    lp = torch.log_softmax(logits, dim=-1).to(dtype)
    c = min(search.row_width(state), V)
    top_lp, top_tok = lp.topk(c, dim=-1)
    row_s = (state.row_slot // search.k).cpu()
    at_max = (state.steps.cpu().index_select(0, row_s) >= state.max_len.cpu().index_select(0, row_s)).unsqueeze(1)
    first = torch.arange(c) == 0
    top_lp = torch.where(at_max & first, lp[:, EOS:EOS + 1], top_lp.masked_fill(at_max, -math.inf))
    top_tok = top_tok.masked_fill(at_max & first, EOS)
    dev = state.scores.device
    return top_lp.to(dev), top_tok.to(dev)


def same_beam_outcome(a: Any, b: Any) -> None:
    assert torch.equal(a.parents, b.parents) and torch.equal(a.feed, b.feed)
    assert torch.equal(a.index.local, b.index.local) and torch.equal(a.index.slot, b.index.slot)
    assert a.index.width == b.index.width and a.row_counts == b.row_counts
    assert sorted(a.finished) == sorted(b.finished)
    for sid, hyps in a.finished.items():
        other = b.finished[sid]
        assert [h.score for h in hyps] == [h.score for h in other]
        for h, o in zip(hyps, other):
            assert torch.equal(h.tokens, o.tokens) and torch.equal(h.positional_scores, o.positional_scores)
    x, y = a.state, b.state
    for name in ("sentences", "scores", "ended", "steps", "max_len", "n_final", "best_final", "best_final_norm",
                 "src_lengths", "row_slot"):
        assert torch.equal(getattr(x, name), getattr(y, name)), name
    on = torch.isfinite(x.scores)  # slots with a hypothesis
    assert torch.equal(x.ended_len[x.ended], y.ended_len[y.ended])
    w = min(x.tokens.size(-1), y.tokens.size(-1))  # a bucket state's token columns may be wider (padding past them)
    assert torch.equal(x.tokens[on][:, :w], y.tokens[on][:, :w])
    assert torch.equal(x.token_scores[on][:, :w], y.token_scores[on][:, :w])
    for t, pad in ((x.tokens, PAD), (x.token_scores, 0.0), (y.tokens, PAD), (y.token_scores, 0.0)):
        assert bool((t[on][:, w:] == pad).all())
    for s in range(x.size):
        for j in range(min(int(x.n_final[s]), x.fin_len.size(1) - 1)):  # the scratch slot is not read
            n = int(x.fin_len[s, j])
            assert n == int(y.fin_len[s, j]) and x.fin_total[s, j] == y.fin_total[s, j]
            assert torch.equal(x.fin_tokens[s, j, :n], y.fin_tokens[s, j, :n])
            assert torch.equal(x.fin_scores[s, j, :n], y.fin_scores[s, j, :n])


def run_beam(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype, device: str = "cpu") -> Dict[str, int]:
    """Whole searches, each step by the reference and by ``backend`` from the same state."""
    ref, got_search, sentences = _pair(beam_search, case, dtype, backend)
    g = torch.Generator().manual_seed(seed)
    ids, state = _start(ref, g, sentences, (2, 9), 7, 3, device)
    finished: Dict[int, Any] = {}
    seen = dict(steps=0, waiting=0, empty=0)
    while state.size:
        top_lp, top_tok = beam_candidates(g, state, ref, dtype)
        seen["waiting"] += int(state.ended.sum())  # ended candidates waiting on the beam (rule ours)
        expected = ref.search_step(clone_state(state), top_lp, top_tok)
        got = got_search.search_step(state, top_lp, top_tok)
        same_beam_outcome(got, expected)
        seen["empty"] += sum(1 for hyps in got.finished.values() if not hyps)
        finished.update(got.finished)
        state, seen["steps"] = got.state, seen["steps"] + 1
    assert sorted(finished) == ids.tolist()
    seen["backend"] = got_search.stats.step_backends["beam_step"]
    return seen


def run_beam_in_bucket(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype,
                      device: str = "cpu") -> Dict[str, int]:
    """Whole searches, each step by the reference and by ``backend`` as a static step's region runs it
    (``BeamSearch.output_tail``'s search, search/region.py): over the group's bucket state of sentences
    (inert ones after the live, finished ones made inert), every row of a row bucket (padding rows with
    garbage scores and slot −1 after the live ones), its packet read after; every third step searched after the
    region instead (a row bucket the bucket state's slots do not hold), on the bucket state's views; the same outcome at every
    step."""
    from fairseq_stream.model.static.buckets import row_bucket

    ref, got_search, sentences = _pair(beam_search, case, dtype, backend)
    g = torch.Generator().manual_seed(seed)
    ids, state = _start(ref, g, sentences, (2, 9), 7, 3, device)
    finished: Dict[int, Any] = {}
    seen = dict(steps=0, buckets=0)
    while state.size:
        top_lp, top_tok = beam_candidates(g, state, ref, dtype)
        expected = ref.search_step(clone_state(state), top_lp, top_tok)
        search = got_search._region_search(state)
        if seen["steps"] % 3 == 2:
            got = got_search.search_step(state, top_lp, top_tok)
        else:
            rows = row_bucket(top_lp.size(0))
            garbage = torch.randn(rows - top_lp.size(0), top_lp.size(1), generator=g, dtype=top_lp.dtype)
            search((torch.cat([top_lp, garbage.to(top_lp.device)]),
                    torch.cat([top_tok, top_tok.new_full(garbage.shape, EOS)])))
            got = got_search._searched(state)
        same_beam_outcome(got, expected)
        finished.update(got.finished)
        state, seen["steps"] = got.state, seen["steps"] + 1
    assert sorted(finished) == ids.tolist()
    seen["buckets"] = got_search.buckets.made
    seen["backend"] = got_search.stats.step_backends["beam_step"]
    return seen


# ---- the Jacobi iteration ---------------------------------------------------------------------
def jacobi_search(case: Dict[str, Any], dtype: torch.dtype, backend: str) -> Tuple[JacobiDecoding, int]:
    case = dict(case)
    sentences = case.pop("sentences", 5)
    return JacobiDecoding(JacobiConfig(**case), None, eos=EOS, pad=PAD, bos=BOS, stats=DecodeStats(), dtype=dtype,
                          step_backend=backend), sentences


def jacobi_predictions(g: torch.Generator, state: Any, eos_rate: float) -> Any:
    """Each position repeats the next fed token (the draft is confirmed) with probability 0.7."""
    feed = state.feed.cpu()
    s, b = feed.shape
    guess = torch.cat([feed[:, 1:], feed.new_full((s, 1), PAD)], dim=1)
    fresh = torch.randint(4, V, (s, b), generator=g)
    pred = torch.where((torch.rand(s, b, generator=g) < 0.7) & (guess > PAD), guess, fresh)
    return pred.masked_fill(torch.rand(s, b, generator=g) < eos_rate, EOS).to(state.feed.device)


def same_jacobi_outcome(a: Any, b: Any, score_tolerance: float = 0.0) -> None:
    assert torch.equal(a.accept, b.accept) and a.max_length == b.max_length
    assert (a.parents is None) == (b.parents is None) and (a.parents is None or torch.equal(a.parents, b.parents))
    assert torch.equal(a.feed, b.feed)
    assert sorted(a.finished) == sorted(b.finished)
    for sid, (h,) in a.finished.items():
        (o,) = b.finished[sid]
        assert abs(h.score - o.score) <= score_tolerance and torch.equal(h.tokens, o.tokens)
        assert torch.equal(h.positional_scores, o.positional_scores)
    x, y = a.state, b.state
    for name in ("sentences", "verified", "max_len", "iterations", "width", "draft", "feed"):
        assert torch.equal(getattr(x, name), getattr(y, name)), name
    assert (x.low, x.high, x.shortest) == (y.low, y.high, y.shortest)
    # the last column is scratch for rejected predictions (the reference writes it, the operator does not)
    assert torch.equal(x.tokens[:, :-1], y.tokens[:, :-1]) and torch.equal(x.token_scores[:, :-1], y.token_scores[:, :-1])


def _jacobi_start(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype, device: str) -> Tuple[Any, ...]:
    """The reference and ``backend``'s strategies, the generator, the sentence ids and their initial state."""
    ref, got_search, sentences = _pair(jacobi_search, case, dtype, backend)
    g = torch.Generator().manual_seed(seed)
    ids, state = _start(ref, g, sentences, (3, 12), 5, 1, device)
    return ref, got_search, g, ids, state


def jacobi_inputs(g: torch.Generator, state: Any, dtype: torch.dtype, device: str) -> Tuple[Tensor, Tensor]:
    """An iteration's predictions (:func:`jacobi_predictions`) and their log-probabilities."""
    pred = jacobi_predictions(g, state, eos_rate=0.04)
    return pred, torch.log(torch.rand(pred.shape, generator=g, dtype=torch.float64)).to(dtype).to(device)


def run_jacobi(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype, device: str = "cpu",
               score_tolerance: float = 0.0) -> Dict[str, Any]:
    ref, got_search, g, ids, state = _jacobi_start(case, backend, seed, dtype, device)
    finished: Dict[int, Any] = {}
    steps = 0
    while state.size:
        pred, score = jacobi_inputs(g, state, dtype, device)
        expected = ref.iterate(clone_state(state), pred, score)
        got = got_search.iterate(state, pred, score)
        same_jacobi_outcome(got, expected, score_tolerance)
        finished.update(got.finished)
        state, steps = got.state, steps + 1
    assert sorted(finished) == ids.tolist()
    return dict(steps=steps, backend=got_search.stats.step_backends["jacobi_step"])


def run_jacobi_in_bucket(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype,
                        device: str = "cpu") -> Dict[str, Any]:
    """Whole decodes, each iteration by the reference and by ``backend`` as a static step's region runs it
    (``JacobiDecoding.output_tail``'s search): over a bucket state of as many sentences as the row bucket has rows,
    inert ones after the live (garbage predictions and scores on their rows), finished ones made inert from the
    last packet; every third iteration after the region instead, on the bucket state's views; the same outcome at every
    iteration, and the output layer's inputs the region computes equal to the eager step's for the live rows."""
    from fairseq_stream.model.static.buckets import row_bucket
    from fairseq_stream.search.region import in_bucket

    ref, got_search, g, ids, state = _jacobi_start(case, backend, seed, dtype, device)
    finished: Dict[int, Any] = {}
    steps = 0
    while state.size:
        s, b = state.feed.shape
        pred, score = jacobi_inputs(g, state, dtype, device)
        expected = ref.iterate(clone_state(state), pred, score)
        context = ref._context(state, b)
        search = got_search._region_search(state)
        if steps % 3 == 2:
            got = got_search.iterate(state, pred, score)
        else:
            junk = (row_bucket(s) - s, b)
            garbage_pred = torch.randint(0, V, junk, generator=g).to(device)
            garbage_score = torch.log(torch.rand(junk, generator=g, dtype=torch.float64)).to(dtype).to(device)
            steps_in, max_len_in = search.tail_inputs()
            assert torch.equal(steps_in[: s * b], context.steps) and torch.equal(max_len_in[: s * b], context.max_len)
            search((torch.cat([score, garbage_score]).reshape(-1, 1), torch.cat([pred, garbage_pred]).reshape(-1, 1)))
            got = got_search._searched(state)
            if got.state.size and row_bucket(got.state.size) == row_bucket(s):  # the next iteration: the same bucket state
                assert in_bucket(got.state, got.state.bucket, row_bucket(s))
        same_jacobi_outcome(got, expected)
        finished.update(got.finished)
        state, steps = got.state, steps + 1
    assert sorted(finished) == ids.tolist()
    return dict(steps=steps, backend=got_search.stats.step_backends["jacobi_step"], buckets=got_search.buckets.made,
                accepted=got_search.stats.accepted_tokens, expected_accepted=ref.stats.accepted_tokens)


# ---- the IBDecoder step -----------------------------------------------------------------------
FIN = ("fin_tokens", "fin_scores", "fin_len", "fin_total")
WIDE = ("tokens", "token_scores", "fin_tokens", "fin_scores")  # (S, ·, L): the token columns


def ib_search(case: Dict[str, Any], dtype: torch.dtype, backend: str) -> Tuple[IBBeamSearch, int]:
    case = dict(case)
    sentences = case.pop("sentences", 6)
    beam = case.pop("beam")
    return IBBeamSearch(IBSpec(h=case.pop("h"), c=case.pop("c")), None, beam=beam, nbest=beam, lenpen=1.0, eos=EOS,
                        pad=PAD, bos=BOS, dedup=False, dtype=dtype, finalize=case.pop("finalize", "top"),
                        stats=DecodeStats(), step_backend=backend), sentences


def ib_candidates(g: torch.Generator, search: IBBeamSearch, state: Any, dtype: torch.dtype, eos_rate: float) -> Any:
    """Each row's top-Bc per slot, best first, on a grid of 0.5 (ties); EOS forced at max_len."""
    r, z, bc = state.row_slot.numel(), search.z, search.beam
    vals = -torch.round(torch.rand(r, z, bc, generator=g, dtype=torch.float64) * 8) / 2
    vals = vals.sort(dim=2, descending=True).values.to(dtype)
    toks = torch.stack([torch.randperm(V - 3, generator=g)[:bc] + 3 for _ in range(r * z)]).view(r, z, bc)
    toks = toks.masked_fill(torch.rand(r, z, bc, generator=g) < eos_rate, EOS)
    slot = state.t + torch.arange(z)
    row_max = state.max_len.cpu().index_select(0, (state.row_slot // search.beam).cpu())
    at_max = slot.unsqueeze(0) >= row_max.unsqueeze(1)  # (R, z)
    toks[..., 0] = torch.where(at_max, EOS, toks[..., 0])
    vals[..., 1:] = vals[..., 1:].masked_fill(at_max.unsqueeze(2), -math.inf)
    dev = state.scores.device
    return vals.to(dev), toks.to(dev)


def same_ib_outcome(a: Any, b: Any, views: bool = False) -> None:
    """``views``: ``a``'s state may be views of a bucket state (its transient ``bucket`` is not compared)."""
    for name in ("parents", "feed", "block_mask"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None) and (x is None or torch.equal(x, y)), name
    ia, ib = a.index, b.index
    assert torch.equal(ia.sentences, ib.sentences) and torch.equal(ia.local, ib.local)
    assert torch.equal(ia.slot, ib.slot) and ia.width == ib.width
    for name, x in vars(a.state).items():
        y = getattr(b.state, name)
        if name == "bucket" and views:
            continue
        if views and name in WIDE:  # a bucket state's token columns are rounded up to a power of two (PAD, 0 after)
            x = x[..., : y.size(-1)]
        if name in FIN:  # the last slot is the reference's scratch for candidates that did not end
            x, y = x[:, :-1], y[:, :-1]
        assert (torch.equal(x, y) if torch.is_tensor(x) else x == y), name
    assert isinstance(a.finished, FinishedIB) == isinstance(b.finished, FinishedIB)
    if isinstance(a.finished, FinishedIB):
        fa, fb = a.finished, b.finished
        for name in ("sentences", "length", "total", "n_final", "tokens", "scores"):
            x, y = getattr(fa, name), getattr(fb, name)
            if name in ("tokens", "scores", "length", "total"):
                x, y = x[:, :-1], y[:, :-1]
            if views and name in ("tokens", "scores"):
                x = x[..., : y.size(-1)]
            assert torch.equal(x, y), name
        ha, hb = fa.to_hypotheses(), fb.to_hypotheses()
        assert sorted(ha) == sorted(hb)
        for sid in ha:
            assert [(h.score, h.tokens.tolist()) for h in ha[sid]] == [(h.score, h.tokens.tolist()) for h in hb[sid]]


def run_ib(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype, device: str = "cpu") -> Dict[str, Any]:
    ref, got_search, sentences = _pair(ib_search, case, dtype, backend)
    # per word, so that a step of z words ends about as often; "all" takes every ending (fewer)
    eos_rate = (0.24 if got_search.finalize == "top" else 0.06) / got_search.z
    g = torch.Generator().manual_seed(seed)
    ids, state = _start(ref, g, sentences, (2, 14), 3, 1, device)
    steps, done = 0, []
    while state.sentences.numel():
        vals, toks = ib_candidates(g, ref, state, dtype, eos_rate)
        expected = ref.search_step(clone_state(state), vals, toks)
        got = got_search.search_step(state, vals, toks)
        same_ib_outcome(got, expected)
        if isinstance(got.finished, FinishedIB):
            done += got.finished.sentences.tolist()
        state, steps = got.state, steps + 1
    assert sorted(done) == ids.tolist()
    return dict(steps=steps, backend=got_search.stats.step_backends["ib_step"])


def run_ib_in_bucket(case: Dict[str, Any], backend: str, seed: int, dtype: torch.dtype,
                    device: str = "cpu") -> Dict[str, Any]:
    """Whole decodes, each step by the reference and by ``backend`` as a static step's region runs it
    (``IBBeamSearch.output_tail``'s search): over a bucket state (inert sentences after the live ones) and
    every row of the row bucket (padding rows, slot −1, with garbage candidates); every third step after the
    region instead, on the bucket state's views; the same outcome at every step, and the output layer's inputs the
    region computes equal to the eager step's for the live rows."""
    from fairseq_stream.model.static.buckets import row_bucket
    from fairseq_stream.search.region import in_bucket

    ref, got_search, sentences = _pair(ib_search, case, dtype, backend)
    eos_rate = (0.24 if got_search.finalize == "top" else 0.06) / got_search.z
    g = torch.Generator().manual_seed(seed)
    ids, state = _start(ref, g, sentences, (2, 14), 3, 1, device)
    steps, done, z = 0, [], got_search.z
    while state.sentences.numel():
        vals, toks = ib_candidates(g, ref, state, dtype, eos_rate)
        expected = ref.search_step(clone_state(state), vals, toks)
        r = state.row_slot.numel()
        context = ref._context(state, r, z)
        search = got_search._region_search(state)
        if steps % 3 == 2:
            got = got_search.search_step(state, vals, toks)
        else:
            pad_rows = row_bucket(r) - r
            junk_vals = -torch.rand(pad_rows, z, vals.size(2), generator=g, dtype=torch.float64).to(dtype).to(device)
            junk_toks = torch.randint(0, V, (pad_rows, z, vals.size(2)), generator=g).to(device)
            steps_in, max_len_in = search.tail_inputs()
            assert torch.equal(steps_in[: r * z], context.steps) and torch.equal(max_len_in[: r * z], context.max_len)
            bc = vals.size(2)
            search((torch.cat([vals, junk_vals]).reshape(-1, bc), torch.cat([toks, junk_toks]).reshape(-1, bc)))
            got = got_search._searched(state)
            if got.state.size and not got.finished:  # the next step: the same bucket state
                assert in_bucket(got.state, got.state.bucket, got.state.bucket.size)
        same_ib_outcome(got, expected, views=True)
        if isinstance(got.finished, FinishedIB):
            done += got.finished.sentences.tolist()
        state, steps = got.state, steps + 1
    assert sorted(done) == ids.tolist()
    return dict(steps=steps, backend=got_search.stats.step_backends["ib_step"], buckets=got_search.buckets.made)


def _pair(make: Any, case: Dict[str, Any], dtype: torch.dtype, backend: str) -> Tuple[Any, Any, int]:
    """The reference strategy, the one on ``backend``, and the case's sentence count."""
    ref, sentences = make(case, dtype, "reference")
    return ref, make(case, dtype, backend)[0], sentences


def _start(search: Any, g: torch.Generator, sentences: int, lengths: Tuple[int, int], id_step: int, first: int,
           device: str) -> Tuple[Any, Any]:
    """Sentence ids ``first + id_step·i`` (not 0..S-1, as a stream's) with random maximum lengths
    in ``lengths``, and their initial state on ``device``."""
    max_len = torch.randint(*lengths, (sentences,), generator=g)
    ids = torch.arange(sentences) * id_step + first
    return ids, search.init_state(ids.to(device), max_len.to(device), (max_len + 1).to(device)).state


RUNNERS = {"beam_step": (run_beam, BEAM_CASES), "jacobi_step": (run_jacobi, JACOBI_CASES), "ib_step": (run_ib, IB_CASES)}


def clone_state(state: Any) -> Any:
    """A strategy state with every tensor copied (a step updates its input in place)."""
    return type(state)(**{f: (v.clone() if torch.is_tensor(v) else v) for f, v in vars(state).items()})
