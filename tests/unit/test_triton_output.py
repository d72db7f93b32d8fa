"""The GPU output-layer kernels (Triton) equal the reference, checked on the CPU by Triton's
interpreter; the GPU picks between them and PyTorch's ops by measurement."""
import textwrap

import pytest
import torch

from fairseq_stream.ops import fused_output


CHECK = textwrap.dedent("""
    import torch
    from fairseq_stream.ops.triton_output import BLOCK, topk_lse

    def stable_topk(x, k):  # best first, ties by the lower id
        order = torch.sort(-x, dim=-1, stable=True).indices[:, :k]
        return x.gather(1, order), order

    for vocab, k in [(100, 1), (1000, 5), (2 * BLOCK + 37, 12), (50, 60)]:
        g = torch.Generator().manual_seed(vocab + k)
        x = torch.randn(6, vocab, generator=g) * 4
        x[3] = torch.round(x[3])  # many exact ties
        x[5, :] = 1.0  # a row of ties only
        x[4, 2:-1] = float("-inf")  # fewer finite scores than k
        x[2] = float("-inf")  # nothing finite
        values, ids, lse = topk_lse(x, k)
        ref_v, ref_i = stable_topk(x, min(k, vocab))
        finite = torch.isfinite(ref_v)
        assert torch.equal(values, ref_v), (vocab, k)
        assert torch.equal(ids[finite], ref_i[finite]), (vocab, k)
        assert torch.allclose(lse, torch.logsumexp(x, -1), atol=1e-5, rtol=1e-6), (vocab, k)
    print("ok")
""")


@pytest.mark.slow  # the Triton interpreter
def test_the_triton_kernels_equal_the_reference_under_the_interpreter():
    pytest.importorskip("triton")
    from helpers import run_under_triton_interpreter

    proc = run_under_triton_interpreter(CHECK, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_the_faster_candidate_is_chosen_and_a_failing_one_is_skipped():
    ticks = iter(range(1000))
    cost = {"slow": 5, "fast": 1}

    def make(name):
        def fn(scores, k):
            for _ in range(cost[name] - 1):
                next(ticks)
        fn.__name__ = name
        return fn

    def broken(scores, k):
        raise RuntimeError("no kernel for this shape")

    x = torch.zeros(2, 10)
    chosen = fused_output.pick_fastest({"slow": make("slow"), "broken": broken, "fast": make("fast")}, x, 3,
                                       clock=lambda: next(ticks))
    assert chosen.__name__ == "fast"
    assert fused_output.pick_fastest({"broken": broken}, x, 3) is fused_output.reference_topk_lse
    assert [fused_output._bucket(n) for n in (1, 2, 3, 64, 65)] == [1, 2, 4, 64, 128]


def test_the_choice_can_be_forced_and_is_recorded(monkeypatch):
    from fairseq_stream.errors import FairseqStreamError

    def torch_ops(scores, k):
        return "torch"

    def triton_ops(scores, k):
        return "triton"

    candidates = {"torch": torch_ops, "triton": triton_ops}
    x = torch.zeros(2, 10)
    monkeypatch.setenv(fused_output.OVERRIDE_VARIABLE, "torch")
    assert fused_output._choose(candidates, x, 3) is torch_ops  # no measurement when forced
    monkeypatch.setenv(fused_output.OVERRIDE_VARIABLE, "cuda-magic")
    with pytest.raises(FairseqStreamError, match="torch, triton"):
        fused_output._choose(candidates, x, 3)
    monkeypatch.setattr(fused_output, "_cuda_choice", {(32000, 64, 10): triton_ops})
    monkeypatch.setattr(fused_output, "_cuda_candidates_cache", candidates)
    assert fused_output.cuda_choices() == ["V=32000,rows<=64,k=10:triton"]
    monkeypatch.setattr(fused_output, "_cuda_used", {(32000, 64, 10)})
    assert fused_output.take_cuda_kernels() == ["triton"]  # the run's statistics: names, not shapes
    assert fused_output.take_cuda_kernels() == []  # taken: the next run names only its own


def test_half_scores_are_normalised_in_float32_by_the_torch_candidate():
    x = (torch.randn(3, 50) * 4).half()
    values, ids, lse = fused_output.reference_topk_lse(x, 4)
    assert values.dtype == lse.dtype == torch.float32
    assert torch.allclose(lse, torch.logsumexp(x.float(), -1))
