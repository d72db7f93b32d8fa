"""The fused beam-step operator (C++) equals the PyTorch reference, bit for bit, step after step.

Random groups of sentences run both implementations of :meth:`BeamSearch.search_step` from
the same state: every output the scheduler sees (next rows, parents, tokens to feed, the
sentences' layout, finished n-best lists) and every meaningful part of the new state must be
identical, over whole searches, for both finalisation rules, every pruning rule and
reference, ``--prune-ended keep``, small ``Z`` and both float dtypes.
"""
import math

import os
import shutil

import pytest
import torch

from fairseq_stream.ops import beam_step as fused
from fairseq_stream.strategies.beam import BeamConfig, BeamSearch, Pruning
from helpers import clone_state

# Where a C++ compiler is, the operator must build (a silent fallback would hide a broken kernel).
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")


def test_the_operator_builds():
    assert fused.kernel() is not None

EOS, PAD, BOS, V = 2, 1, 0, 12


def _search(beam, *, finalize="ours", final_count=0, lenpen=1.0, dtype=torch.float32, **pruning):
    cfg = BeamConfig(beam=beam, nbest=min(2, final_count or beam), final_count=final_count, lenpen=lenpen, finalize=finalize,
                     pruning=Pruning(**pruning))
    return BeamSearch(cfg, None, eos=EOS, pad=PAD, bos=BOS, dtype=dtype)


def _candidates(g, state, search, dtype):
    """Each row's best c tokens of a random distribution; EOS forced at the maximum length."""
    rows = state.row_slot.numel()
    logits = torch.randn(rows, V, generator=g, dtype=torch.float64)
    logits[:, PAD] = -math.inf
    logits[:, EOS] += 0.5
    if rows % 3 == 0:  # ties between candidates of different rows and tokens
        logits = torch.round(logits * 2) / 2
    lp = torch.log_softmax(logits, dim=-1).to(dtype)
    c = min(search.per_row, V)
    top_lp, top_tok = lp.topk(c, dim=-1)
    row_s = state.row_slot // search.k
    at_max = (state.steps.index_select(0, row_s) >= state.max_len.index_select(0, row_s)).unsqueeze(1)
    first = torch.arange(c) == 0
    top_lp = torch.where(at_max & first, lp[:, EOS:EOS + 1], top_lp.masked_fill(at_max, -math.inf))
    top_tok = top_tok.masked_fill(at_max & first, EOS)
    return top_lp, top_tok


def _assert_same_state(a, b, k):
    for name in ("sentences", "scores", "ended", "steps", "max_len", "n_final", "best_final", "best_final_norm",
                 "src_lengths", "row_slot"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    on = torch.isfinite(a.scores)  # slots with a hypothesis
    assert torch.equal(a.ended_len[a.ended], b.ended_len[b.ended])
    assert torch.equal(a.tokens[on], b.tokens[on]) and torch.equal(a.token_scores[on], b.token_scores[on])
    for s in range(a.size):
        for j in range(min(int(a.n_final[s]), a.fin_len.size(1) - 1)):  # the scratch slot is not read
            n = int(a.fin_len[s, j])
            assert n == int(b.fin_len[s, j]) and a.fin_total[s, j] == b.fin_total[s, j]
            assert torch.equal(a.fin_tokens[s, j, :n], b.fin_tokens[s, j, :n])
            assert torch.equal(a.fin_scores[s, j, :n], b.fin_scores[s, j, :n])


def _assert_same_outcome(a, b, k):
    assert torch.equal(a.parents, b.parents) and torch.equal(a.feed, b.feed)
    assert torch.equal(a.index.local, b.index.local) and torch.equal(a.index.slot, b.index.slot)
    assert a.index.width == b.index.width and a.row_counts == b.row_counts
    assert sorted(a.finished) == sorted(b.finished)
    for sid, hyps in a.finished.items():
        other = b.finished[sid]
        assert [h.score for h in hyps] == [h.score for h in other]
        for h, o in zip(hyps, other):
            assert torch.equal(h.tokens, o.tokens) and torch.equal(h.positional_scores, o.positional_scores)
    _assert_same_state(a.state, b.state, k)


def _run(search, seed, dtype, sentences=6):
    g = torch.Generator().manual_seed(seed)
    max_len = torch.randint(2, 9, (sentences,), generator=g)
    out = search.init_state(torch.arange(sentences) * 7 + 3, max_len, max_len + 1)
    state, finished, steps = out.state, {}, 0
    while state.size:
        top_lp, top_tok = _candidates(g, state, search, dtype)
        ref = search.search_step(clone_state(state), top_lp, top_tok, kernel=False)
        got = search.search_step(state, top_lp, top_tok, kernel=True)
        _assert_same_outcome(got, ref, search.k)
        finished.update(got.finished)
        state, steps = got.state, steps + 1
    assert sorted(finished) == [s * 7 + 3 for s in range(sentences)] and steps >= 1
    return steps


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", [
    dict(beam=4),
    dict(beam=4, finalize="fairseq"),
    dict(beam=3, final_count=1),
    dict(beam=5, abs_threshold=1.5, max_cands_per_node=3),
    dict(beam=5, abs_threshold=1.0, reference="final", lenpen=0.6),
    dict(beam=5, abs_threshold=1.0, reference="active"),
    dict(beam=5, abs_threshold=0.8, reference="normalized", lenpen=1.3, ended="keep"),
    dict(beam=6, rel_threshold=0.3, rel_local_threshold=0.05, max_cands_per_node=4),
    dict(beam=4, abs_threshold=0.0, finalize="fairseq"),
])
def test_the_operator_equals_the_reference_over_whole_searches(case, dtype):
    case = dict(case)
    search = _search(case.pop("beam"), dtype=dtype, **case)
    assert search.kernel_rules is not None
    steps = [_run(search, seed, dtype) for seed in range(4)]
    assert max(steps) > (0 if case.get("abs_threshold") == 0.0 else 4)  # δ = 0 prunes even the best at once


def test_a_rule_the_operator_does_not_know_runs_the_reference(monkeypatch):
    class KeepTwo:
        def prune(self, view, keep):
            return keep & (torch.cumsum(keep.long(), dim=1) <= 2)

    search = _search(5, abs_threshold=1.5, extra=(KeepTwo(),))
    assert search.kernel_rules is None
    calls = []
    monkeypatch.setattr(fused, "fused_step", lambda *a, **kw: calls.append(1))
    _run(search, 0, torch.float32)
    assert not calls


def test_every_per_sentence_field_is_permuted_by_the_operator():
    """A new BeamState field must be added to the operator's list, or compaction would skip it."""
    import dataclasses

    from fairseq_stream.strategies.beam import BeamState

    per_sentence = [f.name for f in dataclasses.fields(BeamState) if f.metadata.get("kind", "sentence") == "sentence"]
    assert sorted(per_sentence) == sorted(fused.FIELDS)


# ---- the GPU kernels (Triton): under the interpreter on the CPU, and on CUDA where there is one ----
TRITON_CHECK = """
import sys
import torch
sys.path.insert(0, {here!r})
import test_beam_step as T
from fairseq_stream.ops import beam_step as fused
from fairseq_stream.ops.triton_beam_step import triton_step

def run(search, seed, dtype, sentences=4):
    g = torch.Generator().manual_seed(seed)
    max_len = torch.randint(2, 7, (sentences,), generator=g)
    state = search.init_state(torch.arange(sentences) * 7 + 3, max_len, max_len + 1).state
    while state.size:
        top_lp, top_tok = T._candidates(g, state, search, dtype)
        ref = search.search_step(T.clone_state(state), top_lp, top_tok, kernel=False)
        res = triton_step([getattr(state, n) for n in fused.FIELDS], top_lp, top_tok, state.row_slot,
                          search._length_penalties(state), k=search.k, width=search.final_width,
                          final_count=search.done_at, eos=T.EOS, pad=T.PAD, ours=search.finalizer.name == "ours",
                          track_best=bool(search.rules), rules=search.kernel_rules)
        got = search._outcome(state, res)
        T._assert_same_outcome(got, ref, search.k)
        state = got.state

for i, case in enumerate(T.TRITON_CASES):
    case = dict(case)
    dtype = torch.float64 if i % 2 else torch.float32
    search = T._search(case.pop("beam"), dtype=dtype, **case)
    for seed in range(2):
        run(search, seed, dtype)
print("ok")
"""
TRITON_CASES = [
    dict(beam=3),
    dict(beam=3, finalize="fairseq"),
    dict(beam=4, abs_threshold=1.0, reference="final", lenpen=0.6),
    dict(beam=4, abs_threshold=0.8, reference="normalized", lenpen=1.3, ended="keep", max_cands_per_node=3),
    dict(beam=4, rel_threshold=0.3, rel_local_threshold=0.05, reference="active"),
    dict(beam=2, final_count=1),
]


def test_the_triton_kernels_equal_the_reference_under_the_interpreter():
    pytest.importorskip("triton")
    from helpers import run_under_triton_interpreter

    proc = run_under_triton_interpreter(TRITON_CHECK.format(here=os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("case", TRITON_CASES)
def test_the_triton_kernels_equal_the_reference_on_cuda(case):
    case = dict(case)
    search = _search(case.pop("beam"), **case)
    g = torch.Generator().manual_seed(0)
    max_len = torch.randint(2, 9, (6,), generator=g)
    state = search.init_state((torch.arange(6) * 7 + 3).cuda(), max_len.cuda(), (max_len + 1).cuda()).state
    used = []
    while state.size:
        top_lp, top_tok = _candidates(g, _on_cpu(state), search, torch.float32)
        top_lp, top_tok = top_lp.cuda(), top_tok.cuda()
        ref = search.search_step(clone_state(state), top_lp, top_tok, kernel=False)
        got = search.search_step(state, top_lp, top_tok, kernel=True)
        used.append(not fused._gpu_failed)
        _assert_same_outcome(got, ref, search.k)
        state = got.state
    assert all(used), fused._gpu_failed  # the Triton kernels ran, not the reference


def _on_cpu(state):
    return type(state)(**{f: (v.cpu() if torch.is_tensor(v) else v) for f, v in vars(state).items()})
