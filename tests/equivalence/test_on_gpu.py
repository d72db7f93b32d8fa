"""The exactness promises on a CUDA GPU: stream == batch, Jacobi == greedy, the fused output layer.

Marked ``gpu``: skipped where torch sees no CUDA device (``tests/conftest.py``). The other
tests load the models with ``--cpu``.
"""
import pytest
import torch

from conftest import _load_demo
from fairseq_stream.ops.fused_output import topk_with_normaliser

pytestmark = pytest.mark.gpu
N = 30


@pytest.fixture(scope="module")
def gpu_session64():
    """The demo model on the GPU, in float64 (ties broken the same way in every batch)."""
    return _load_demo(cpu=False, dtype=torch.float64)


def _nbest_tokens(result):
    return [[h["tokens"].tolist() for h in nbest] for nbest in result.hypos]


def test_var_stream_equals_var_batch_on_the_gpu(gpu_session64, demo_sources):
    assert all(p.is_cuda for m in gpu_session64.models for p in m.parameters())
    data = gpu_session64.encode(demo_sources[:N])
    gen = {"beam": 5, "nbest": 3, "max_len_a": 1.2, "max_len_b": 10}
    ref = gpu_session64.translate(data, search="var-batch", gen=gen, opts={"stream_capacity": N}, batch_size=N)
    out = gpu_session64.translate(data, search="var-stream", gen=gen,
                                  opts={"stream_capacity": 7, "stream_epsilon": 0.5, "prune_auto": "off"}, batch_size=N)
    assert _nbest_tokens(out) == _nbest_tokens(ref)
    assert out.stats.expansions == ref.stats.expansions


def test_gs_jacobi_equals_greedy_on_the_gpu(gpu_session64, demo_sources):
    data = gpu_session64.encode(demo_sources[:N])
    gen = {"beam": 1, "max_len_a": 1.2, "max_len_b": 10}
    greedy = gpu_session64.translate(data, search="fixed-ours", gen=gen, opts={"stream_capacity": 1})
    jacobi = gpu_session64.translate(data, search="gs-jacobi", gen=gen, opts={"jacobi_block": 3, "stream_capacity": 8})
    assert _nbest_tokens(jacobi) == _nbest_tokens(greedy)


@pytest.mark.parametrize("k", [1, 10])
def test_the_output_layer_on_cuda_equals_log_softmax(k):
    g = torch.Generator().manual_seed(k)
    x = (torch.randn(12, 32000, generator=g) * 4).cuda()
    x[3, ::2] = float("-inf")  # masked entries (forced EOS, min length)
    values, ids, lse = topk_with_normaliser(x, k)
    assert values.is_cuda and ids.is_cuda
    torch.testing.assert_close(lse, torch.logsumexp(x, -1))
    torch.testing.assert_close(values, x.topk(k, dim=-1).values)
    assert torch.equal(x.gather(1, ids), values)
