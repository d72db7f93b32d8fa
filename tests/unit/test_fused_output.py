"""The fused output layer (Hoang2018 §3.1) equals the full log-softmax path; its kernel is cached per CPU."""
import logging
import math
import os

import pytest
import torch

from fairseq_stream.ops import extension, fused_output
from fairseq_stream.search.output import OutputScorer
from fairseq_stream.ops.fused_output import cpu_kernel, topk_with_normaliser
from fairseq_stream.search.score_edits import ForceEosAtMaxLen, MinLength, NeverPad, RowContext, UnkPenalty


def stable_topk(x: torch.Tensor, k: int):
    """Reference: best first, ties by lower id (a stable sort)."""
    order = torch.sort(-x, dim=-1, stable=True).indices[:, :k]
    return x.gather(1, order), order


@pytest.mark.parametrize("vocab", [100, 1000, 50000])
@pytest.mark.parametrize("k", [1, 5, 100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_topk_and_normaliser_equal_log_softmax(vocab, k, dtype):
    g = torch.Generator().manual_seed(vocab + k)
    x = (torch.randn(7, vocab, generator=g) * 4).to(dtype)
    x[3] = torch.round(x[3])  # many exact ties
    x[5, :] = 1.0  # a row of ties only
    x[6, ::3] = float("-inf")  # masked entries (forced EOS, min length)
    x[4, 2:-1] = float("-inf")  # fewer finite scores than k
    values, ids, lse = topk_with_normaliser(x, k)
    ref_lp = torch.log_softmax(x, dim=-1)
    torch.testing.assert_close(lse, torch.logsumexp(x, -1), rtol=1e-5, atol=1e-5)
    ref_v, ref_i = stable_topk(x, min(k, vocab))
    torch.testing.assert_close(values, ref_v)
    torch.testing.assert_close(values - lse.unsqueeze(1), ref_lp.gather(1, ids), rtol=1e-5, atol=1e-5)
    if cpu_kernel() is not None:
        assert torch.equal(ids, ref_i)  # the kernel breaks ties by the lower id
    else:
        assert torch.equal(x.gather(1, ids), values)


def _ctx(r):
    return RowContext(steps=torch.tensor([0, 1, 2, 5, 9, 3][:r]), max_len=torch.tensor([9, 9, 9, 9, 9, 9][:r]))


@pytest.mark.parametrize("k", [1, 4, 12])
def test_score_edits_on_candidates_equal_edits_on_full_rows(k):
    pad, unk, eos = 1, 3, 2
    procs = [NeverPad(pad), UnkPenalty(unk, 2.5), ForceEosAtMaxLen(eos), MinLength(eos, 2)]
    g = torch.Generator().manual_seed(k)
    scores = torch.randn(6, 40, generator=g, dtype=torch.float64) * 3
    scores[:, pad] += 10  # pad, unk and EOS are among the best, so the edits matter
    scores[:, unk] += 8
    scores[:, eos] += 6
    full = OutputScorer(procs, fused=False, normalized_input=False).top(scores.clone(), k, _ctx(6))
    fused = OutputScorer(procs, fused=True, normalized_input=False).top(scores.clone(), k, _ctx(6))
    torch.testing.assert_close(fused[0], full[0], rtol=1e-9, atol=1e-9)
    finite = torch.isfinite(full[0])
    assert torch.equal(fused[1][finite], full[1][finite])


@pytest.mark.parametrize("penalty", [2.5, -1.5])
def test_the_layer_a_static_step_runs_in_its_region_gives_the_scorers_values(penalty):
    """``TopTail``: the edits always run (the host bounds that let ``top`` skip them are left out),
    and give the same bits; its key is the same for scorers of the same options, and an edit that
    is not fairseq's own keeps the layer out of the region."""
    pad, unk, eos = 1, 3, 2
    procs = lambda: [NeverPad(pad), UnkPenalty(unk, penalty), ForceEosAtMaxLen(eos), MinLength(eos, 2)]  # noqa: E731
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(6, 40, generator=g) * 3
    scores[:, [pad, unk, eos]] += torch.tensor([10.0, 8.0, 6.0])
    scorer = OutputScorer(procs(), fused=True, normalized_input=False)
    for ctx in (_ctx(6), RowContext(steps=torch.full((6,), 4), max_len=torch.full((6,), 9), may_reach_max=False,
                                    min_steps=4)):  # no row near its bounds: top skips the two length edits
        tail = scorer.tail(5, ctx)
        values, tokens = tail(scores.clone(), *tail.inputs)
        want = scorer.top(scores.clone(), 5, ctx)
        assert torch.equal(values, want[0]) and torch.equal(tokens, want[1])
        assert [tuple(v.shape[1:]) for v in (values, tokens)] == [s for s, _ in tail.outputs(40, torch.float32)]
    assert tail.key == OutputScorer(procs(), fused=True, normalized_input=False).tail(5, _ctx(6)).key
    assert tail.key != OutputScorer(procs()[:3], fused=True, normalized_input=False).tail(5, _ctx(6)).key

    class Own(NeverPad):  # a user's edit: its constants are not known to the key
        pass

    assert OutputScorer([Own(pad)], fused=True, normalized_input=False).tail(5, _ctx(6)) is None
    assert OutputScorer(procs(), fused=False, normalized_input=False).tail(5, _ctx(6)) is None


@pytest.mark.parametrize("k", [1, 4])
def test_an_infinite_unk_penalty_bans_unk_without_nan(k):
    # issue 52 item 3: the candidate path multiplied (tokens == unk) * inf, 0 * inf = NaN for every
    # other token: --unkpen inf left var-stream and fixed-ours only empty hypotheses
    pad, unk, eos = 1, 3, 2
    procs = [NeverPad(pad), UnkPenalty(unk, math.inf), ForceEosAtMaxLen(eos), MinLength(eos, 2)]
    g = torch.Generator().manual_seed(k)
    scores = torch.randn(6, 40, generator=g, dtype=torch.float64) * 3
    scores[:, unk] += 20  # <unk> is every row's best raw score
    full = OutputScorer(procs, fused=False, normalized_input=False).top(scores.clone(), k, _ctx(6))
    fused = OutputScorer(procs, fused=True, normalized_input=False).top(scores.clone(), k, _ctx(6))
    for values, tokens in (full[:2], fused[:2]):
        assert not torch.isnan(values).any() and torch.isfinite(values[:, 0]).all(), values
        assert not (tokens[torch.isfinite(values)] == unk).any(), tokens
    torch.testing.assert_close(fused[0], full[0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("penalty", [-1.0, -2.0, -3.0, -8.0])
@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("normalize", [True, False])
def test_a_negative_unk_penalty_raises_unk_into_the_window(penalty, k, normalize):
    # issue 38 item 1: the fused top-k took the k best raw scores, so <unk>, raised by the bonus from
    # well below them, never entered the window
    pad, unk, eos = 1, 3, 2
    procs = [NeverPad(pad), UnkPenalty(unk, penalty), ForceEosAtMaxLen(eos), MinLength(eos, 2)]
    g = torch.Generator().manual_seed(k)
    scores = torch.randn(6, 40, generator=g, dtype=torch.float64) * 3
    ranks = torch.argsort(torch.argsort(-scores, dim=1), dim=1)
    scores[:, unk] = scores.gather(1, (ranks == 8).nonzero()[:, 1:]).squeeze(1)  # ranked 9th raw
    scores[0, unk] = scores[0].max() + 1  # in the window already: it must not come twice
    full = OutputScorer(procs, fused=False, normalized_input=False).top(scores.clone(), k, _ctx(6))
    scorer = OutputScorer(procs, fused=True, normalized_input=False)
    assert scorer.fused and scorer.raised == [unk] and scorer.note == f"fused+raised:{unk}"
    values, tokens, lse = scorer.top(scores.clone(), k, _ctx(6), normalize=normalize)
    if not normalize:
        values = values - scorer.normaliser(scores).unsqueeze(1)
    torch.testing.assert_close(values, full[0], rtol=1e-9, atol=1e-9)
    finite = torch.isfinite(full[0])
    assert torch.equal(tokens[finite], full[1][finite])
    for row in tokens.tolist():
        assert len(set(row)) == len(row)


def test_an_edit_that_does_not_say_what_it_raises_turns_the_fused_layer_off():
    class Bonus:  # a new edit without a declaration: it might raise any token
        extra = 0

        def full(self, lprobs, ctx):
            return lprobs + 1

        def candidates(self, cand, ctx):
            return cand

    scorer = OutputScorer([NeverPad(1), Bonus()], fused=True, normalized_input=False)
    assert not scorer.fused and scorer.note == "full:raising-edit"
    assert OutputScorer([NeverPad(1), UnkPenalty(3, 2.0)], fused=True, normalized_input=False).note is None


def test_ensembles_and_ngram_blocking_fall_back_and_say_so(caplog):
    from fairseq_stream.search.score_edits import NoRepeatNgram

    extension._warned.clear()
    with caplog.at_level(logging.INFO, logger="fairseq_stream"):
        assert not OutputScorer([NeverPad(1), NoRepeatNgram(3)], fused=True, normalized_input=False).fused
        assert not OutputScorer([NeverPad(1)], fused=True, normalized_input=True).fused
        OutputScorer([NeverPad(1)], fused=True, normalized_input=True)
    messages = [r.getMessage() for r in caplog.records if "fused output layer off" in r.getMessage()]
    assert len(messages) == 2  # each reason once
    assert any("NoRepeatNgram" in m for m in messages) and any("ensemble" in m for m in messages)


def test_greedy_argmax_without_normaliser():
    x = torch.randn(5, 300, dtype=torch.float64)
    scorer = OutputScorer([NeverPad(1)], fused=True, normalized_input=False)
    raw, ids, lse = scorer.top(x.clone(), 1, RowContext(steps=torch.zeros(5, dtype=torch.long), max_len=torch.full((5,), 9)),
                               normalize=False)
    assert lse is None
    ref = x.clone()
    ref[:, 1] = -math.inf
    assert torch.equal(ids[:, 0], ref.argmax(-1))
    torch.testing.assert_close(raw[:, 0] - scorer.normaliser(x), torch.log_softmax(x, -1).gather(1, ids)[:, 0])


def test_a_row_of_minus_infinity_only():
    x = torch.full((2, 50), float("-inf"))
    x[1, 7] = 0.0
    values, ids, lse = topk_with_normaliser(x, 3)
    assert lse[0] == float("-inf") and lse[1] == 0.0
    assert values[0].tolist() == [float("-inf")] * 3 and values[1, 0] == 0.0
    if cpu_kernel() is not None:
        assert ids.tolist() == [[0, 1, 2], [7, 0, 1]]


def test_kernel_cache_key_changes_with_the_cpu_only_under_march_native():
    """A home shared by machines must not hand one CPU a kernel built for another (SIGILL)."""
    from fairseq_stream.ops.fused_output import KERNEL_FLAGS
    from fairseq_stream.ops.extension import kernel_cache_key

    base = dict(torch_version="2.13.0", compiler="gcc 12.2", cpu="x86_64 avx2 fma sse4_2")
    key = kernel_cache_key(b"src", KERNEL_FLAGS, **base)
    assert key == kernel_cache_key(b"src", KERNEL_FLAGS, **base) and len(key) == 16
    for change in ({"cpu": "x86_64 avx512f avx2 fma sse4_2"}, {"compiler": "gcc 13.1"}, {"torch_version": "2.14.0"}):
        assert kernel_cache_key(b"src", KERNEL_FLAGS, **{**base, **change}) != key, change
    assert kernel_cache_key(b"src2", KERNEL_FLAGS, **base) != key
    portable = ["-O3", "-fopenmp"]
    assert kernel_cache_key(b"src", portable, **base) == kernel_cache_key(b"src", portable, **{**base, "cpu": "aarch64"})


def test_the_kernel_build_folder_names_this_cpu(monkeypatch, tmp_path):
    monkeypatch.setenv("FAIRSEQ_STREAM_KERNEL_DIR", str(tmp_path))
    features = fused_output.cpu_features()
    assert features.split()[0] and (len(features.split()) > 1 or not os.path.exists("/proc/cpuinfo"))
    name, folder = fused_output.kernel_build_dir()
    assert folder == os.path.join(str(tmp_path), name)
    monkeypatch.setattr(fused_output, "cpu_features", lambda: features + " a_new_instruction_set")
    assert fused_output.kernel_build_dir()[0] != name


def test_a_kernel_build_finds_the_ninja_beside_the_interpreter(monkeypatch):
    """pip's ninja lies in the venv's bin, which is not on PATH when the venv was never activated."""
    from fairseq_stream.ops import extension

    monkeypatch.setattr(extension.sys, "executable", "/opt/venv/bin/python")
    monkeypatch.setenv("PATH", "/usr/bin")
    extension.interpreter_bin_on_path()
    extension.interpreter_bin_on_path()
    assert os.environ["PATH"] == "/usr/bin:/opt/venv/bin"  # appended once: a system ninja still comes first
