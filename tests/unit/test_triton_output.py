"""The GPU output-layer kernels (Triton) equal the reference, checked on the CPU by Triton's
interpreter; the GPU picks between them and PyTorch's ops by measurement."""
import textwrap

import pytest
import torch

from fairseq_stream.ops import fused_output


CHECK = textwrap.dedent("""
    import torch
    from fairseq_stream.ops import triton_output
    from fairseq_stream.ops.triton_output import BLOCK, topk_lse, topk_lse_sorted

    def stable_topk(x, k):  # best first, ties by the lower id
        order = torch.sort(-x, dim=-1, stable=True).indices[:, :k]
        return x.gather(1, order), order

    def check(fn, vocab, k, dtype=torch.float32, rows=6, bitwise=True):
        g = torch.Generator().manual_seed(vocab + k)
        x = torch.randn(rows, vocab, generator=g) * 4
        x[0, ::7] = -0.0  # signed zeros tie with zeros: the lower id first, the value's own bits
        x[0, 3::7] = 0.0
        x[1] = torch.round(x[1])  # many exact ties
        x[2] = float("-inf")  # nothing finite
        x[3, 2:-1] = float("-inf")  # fewer finite scores than k
        if rows > 4:
            x[4, :] = 1.0  # a row of ties only
        x = x.to(dtype)
        values, ids, lse = fn(x)
        ref_v, ref_i = stable_topk(x.float(), min(k, vocab))
        finite = torch.isfinite(ref_v)
        if bitwise:  # -0.0 too (the unrolled kernel returns a block's maximum, which may be 0.0 for -0.0)
            assert torch.equal(values.view(torch.int32), ref_v.view(torch.int32)), (fn, vocab, k, dtype)
        assert torch.equal(values, ref_v), (fn, vocab, k, dtype)
        assert torch.equal(ids[finite], ref_i[finite]), (fn, vocab, k, dtype)
        assert bool(((ids >= 0) & (ids < vocab)).all()), (fn, vocab, k, dtype)
        assert torch.allclose(lse, torch.logsumexp(x.float(), -1), atol=1e-5, rtol=1e-6), (fn, vocab, k, dtype)

    for vocab, k in [(100, 1), (1000, 5), (2 * BLOCK + 37, 12), (50, 60)]:
        check(lambda x: topk_lse(x, k), vocab, k, bitwise=False)
    # the sorting path at the search's k = 2 * beam: small blocks, so a few thousand scores span several
    for vocab, k, dtype, block in [(100, 1, torch.float32, 2048), (50, 60, torch.float32, 2048),
                                   (2085, 100, torch.float32, 512), (1500, 128, torch.float16, 512),
                                   (1300, 100, torch.bfloat16, 256), (300, 200, torch.float32, 128)]:
        check(lambda x: topk_lse_sorted(x, k, block), vocab, k, dtype)
    triton_output._HAS_TOPK = False  # an older Triton: whole blocks sorted
    check(lambda x: topk_lse_sorted(x, 100, 128), 400, 100, rows=4)
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


def _stable_topk(x: torch.Tensor, k: int):
    order = torch.sort(-x, dim=-1, stable=True).indices[:, :k]  # best first, ties by the lower id
    return x.gather(1, order), order


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 50, 250])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("name", ["triton", "triton-sort"])
def test_the_triton_kernels_equal_the_reference_on_the_gpu(name, dtype, rows):
    pytest.importorskip("triton")
    fn = fused_output.cuda_candidates()[name]
    g = torch.Generator(device="cuda").manual_seed(rows)
    x = (torch.randn(rows, 32000, device="cuda", generator=g) * 4).to(dtype)
    x[0, :5000] = torch.round(x[0, :5000])  # exact ties across blocks
    if rows > 2:
        x[1] = float("-inf")  # nothing finite
        x[2, 30:] = float("-inf")  # fewer finite scores than k
    for k in (1, 10) if name == "triton" else (1, 10, 100, 128):  # unrolled: k rounds compiled in
        values, ids, lse = fn(x, k)
        ref_v, ref_i = _stable_topk(x.float(), k)
        finite = torch.isfinite(ref_v)
        assert torch.equal(values, ref_v), (name, k)
        assert torch.equal(ids[finite], ref_i[finite]), (name, k)
        assert bool(((ids >= 0) & (ids < x.size(1))).all()), (name, k)
        torch.testing.assert_close(lse, torch.logsumexp(x.float(), -1), atol=1e-4, rtol=1e-5)


def test_the_unrolled_kernel_is_measured_only_for_small_k_but_can_be_forced(monkeypatch):
    seen = []
    monkeypatch.setattr(fused_output, "pick_fastest", lambda candidates, scores, k: seen.append(sorted(candidates)))
    candidates = {"torch": None, "triton": "unrolled", "triton-sort": None}
    x = torch.zeros(2, 10)
    monkeypatch.delenv(fused_output.OVERRIDE_VARIABLE, raising=False)
    fused_output._choose(candidates, x, fused_output.UNROLLED_MAX_K)
    fused_output._choose(candidates, x, fused_output.UNROLLED_MAX_K + 1)
    assert seen == [["torch", "triton", "triton-sort"], ["torch", "triton-sort"]]
    monkeypatch.setenv(fused_output.OVERRIDE_VARIABLE, "triton")
    assert fused_output._choose(candidates, x, 100) == "unrolled"
