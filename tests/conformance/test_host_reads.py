"""A decoder step is the device's work: at most one host read per step (docs/architecture.md).

Host reads (``item``/``tolist``/``bool`` of a tensor, ``nonzero``, boolean-mask indexing,
``unique``, copies to the CPU) stall a GPU until its queue drains; they are counted with
:class:`fairseq_stream.engine.profiling.CostCounter` on any machine, here on the CPU. Counted: every
call of the scheduler's step (decoder call, strategy step, cache reorder) and the read-out of
the finished hypotheses; not counted: fairseq's batching and the encoder calls of refills
(once per refill, fairseq's code). The steps run eager (the step a GPU runs, but for its graphs); and on
the defaults a CPU user gets (``--step-mode auto``: native; the default pruning): there a reorder of the
caches that never move reads one more time — how many rows branch and how many buffer rows are free for
them (model/row_arena.py) — so a step reads at most twice (a CPU's, where a read stalls no queue).
"""
import os

import pytest

from conftest import DEMO

from fairseq_stream.engine.profiling import CostCounter, CostCounts, count_decoder_steps

N = 24
DRAFT = os.path.join(DEMO, "draft.pt")


def _count_steps(session, data, search, gen, opts):
    with count_decoder_steps(CostCounts()) as counts:
        out = session.translate(data, search=search, gen=gen, opts=dict({"step_mode": "eager"}, **opts),
                                postprocess=False)
    return out, counts


@pytest.mark.parametrize("search,gen,opts", [
    ("var-stream", {"beam": 5}, {"stream_capacity": 8}),
    ("fixed-ours", {"beam": 5}, {"stream_capacity": 8}),
    ("var-fifo", {"beam": 5}, {"stream_capacity": 8}),
    pytest.param("gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 8}, marks=pytest.mark.slow),
    ("gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 1}),
    ("speculative", {"beam": 1}, {"draft_path": DRAFT, "stream_capacity": 8}),
    ("speculative", {"beam": 1}, {"draft_path": DRAFT, "stream_capacity": 1, "draft_tokens": "auto"}),
    ("lookahead", {"beam": 1}, {"stream_capacity": 8}),
])
def test_at_most_one_host_read_per_step_on_the_demo_model(demo_session, demo_sources, search, gen, opts):
    data = demo_session.encode(demo_sources[:N])
    out, counts = _count_steps(demo_session, data, search, gen, opts)
    steps = out.stats.timesteps
    assert steps > 20 and len(out.hypos) == N
    # speculative decoding reads its acceptance histogram once per batch when batches have several rows
    allowed = steps + (out.stats.refills if search == "speculative" and opts["stream_capacity"] > 1 else 0)
    assert counts.host_reads <= allowed, (counts.host_reads, steps, dict(counts.reads_by_op))


@pytest.mark.parametrize("search,gen", [("var-stream", {"beam": 5}), ("fixed-ours", {"beam": 5}),
                                        ("gs-jacobi", {"beam": 1}), ("lookahead", {"beam": 1})])
def test_host_reads_on_the_cpu_defaults(demo_session, demo_sources, search, gen):
    """No option pinned: the native step and the default pruning (var-stream's) read once per step and once per
    reorder of their caches (a table copy), so at most twice a step."""
    data = demo_session.encode(demo_sources[:N])
    with count_decoder_steps(CostCounts()) as counts:
        out = demo_session.translate(data, search=search, gen=gen, postprocess=False)
    steps, modes = out.stats.timesteps, out.stats.step_mode
    assert modes["mode"] == "native" and modes["steps_eager"] == 0 and steps > 20
    assert not out.stats.prune_auto and bool(out.stats.pruned_widths()) == (search == "var-stream")  # its own pruning
    reorders = modes["reorders_by_table"]
    assert counts.host_reads <= steps + reorders <= 2 * steps, (counts.host_reads, steps, dict(counts.reads_by_op))


def test_the_counter_sees_host_reads():
    """The counter itself: each kind of read counts once, and plain arithmetic not at all."""
    import torch

    x = torch.arange(6.0)
    with CostCounter() as cc:
        y = x * 2 + 1
        y.sum().item()
        int(y.max())
        y.tolist()
        y[y > 3]
        torch.nonzero(y)
    assert cc.counts.host_reads == 5, dict(cc.counts.reads_by_op)
    assert cc.counts.ops >= 8 and cc.counts.host_writes == 0


def test_the_counter_can_say_where_the_reads_happen():
    """``read_sites`` (scripts/gpu/gpu_profile.py's table): one entry per read, by op and call site."""
    from collections import Counter

    import torch

    from fairseq_stream.ops import packets

    counts = CostCounts(read_sites=Counter())
    spec = packets.JACOBI_STEP
    packet = torch.zeros(spec.starts(1)[-1], dtype=torch.float64)
    with CostCounter(counts):
        spec.read(packet, 1)
        torch.arange(3.0).sum().item()
    assert counts.host_reads == 2 and sum(counts.read_sites.values()) == 2
    sites = dict(counts.read_sites)
    assert any(op == "tolist" and where.startswith("ops/packets.py:") and " read" in where for op, where in sites)
    assert ("_local_scalar_dense", "") in sites  # no frame of the package: no site


@pytest.mark.gpu
def test_a_read_from_the_gpu_counts_once():
    """``tolist()`` of a CUDA tensor copies it to the host inside: one read, not two (the first
    GPU run counted 2.00 reads per step for the step's one packet read)."""
    import torch

    x = torch.arange(6.0, device="cuda")
    with CostCounter() as cc:
        x.tolist()
    assert cc.counts.host_reads == 1, dict(cc.counts.reads_by_op)
    with CostCounter() as cc:
        x.cpu()
        x.sum().item()
    assert cc.counts.host_reads == 2, dict(cc.counts.reads_by_op)


def test_the_counter_sees_host_to_device_copies():
    """A copy from the host to a device (here the meta device, which every machine has) counts
    as a host write, not as a read."""
    import torch

    x = torch.arange(6.0)
    with CostCounter() as cc:
        x.to("meta")
        torch.empty(6, device="meta").copy_(x)
    assert cc.counts.host_writes == 2 and cc.counts.host_reads == 0


#: aten operations per decoder step of ``var-stream`` k = 5 on the demo model before the fused
#: beam step (commit 949fa6b, ``python scripts/experiments/engine_counts.py --phases``: 272.6); the
#: target is at most half.
OPS_BEFORE_FUSED_STEP = 272.6


@pytest.mark.parametrize("search", ["var-stream", "fixed-ours"])
def test_a_beam_step_issues_at_most_half_the_operations_it_used_to(demo_session, demo_sources, search):
    import os
    import shutil

    from fairseq_stream.ops import extension

    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler: the fused beam-step operator cannot be built here")
    assert extension.load_operator("beam_step") is not None
    data = demo_session.encode(demo_sources[:N])
    out, counts = _count_steps(demo_session, data, search, {"beam": 5}, {"stream_capacity": 8})
    per_step = counts.ops / out.stats.timesteps
    assert per_step <= OPS_BEFORE_FUSED_STEP / 2, (per_step, counts.ops_by_name.most_common(10))
    # one operator per step (called from the step's one C++ search call, searched_beam_step, where that runs it)
    assert counts.ops_by_name["beam_step"] + counts.ops_by_name["searched_beam_step"] == out.stats.timesteps


def test_the_counter_counts_the_static_regions_operations_apart(demo_session, demo_sources):
    """``region_ops``: the operations inside static steps' regions (what one graph replay holds): none
    under the eager step; under ``--step-mode static`` most of a step's, the rest outside."""
    data = demo_session.encode(demo_sources[:8])
    out, eager = _count_steps(demo_session, data, "var-stream", {"beam": 5}, {"stream_capacity": 8})
    assert eager.region_ops == 0 and eager.ops > 0
    out, static = _count_steps(demo_session, data, "var-stream", {"beam": 5}, {"stream_capacity": 8, "step_mode": "static"})
    per_step = static.per_step(out.stats.timesteps)
    assert 0 < per_step["ops_outside_region_per_step"] < 0.5 * per_step["ops_per_step"]
    assert static.in_region == 0
