"""``--step-mode static`` (shapes fixed per bucket, padding rows masked) gives the eager step's output.

The static step is what a CUDA graph captures (model/static/); on a CPU it runs without
capture, so these tests prove its arithmetic here, on the trained demo model: refills (capacity
below the input), finished sentences, variable beam widths (var-*), finals waiting on the beam
(rule ``ours``), Jacobi blocks, ensembles. float64: identical tokens and scores within 1e-9;
float32: identical tokens. ``graph`` ≡ ``eager`` is the gpu-marked part below.
"""
import os
from collections import defaultdict
from typing import Dict, List, Tuple

import pytest
import torch

from conftest import DEMO

N = 24
CASES = {  # name → (search, gen, opts); all with refills (capacity < N)
    "var-stream": ("var-stream", {"beam": 5, "nbest": 2}, {"stream_capacity": 8}),
    "fixed-ours": ("fixed-ours", {"beam": 5}, {"stream_capacity": 8}),
    "topup": ("topup", {"beam": 5}, {"stream_capacity": 8}),
    "gs-jacobi": ("gs-jacobi", {"beam": 1}, {"jacobi_block": 3, "stream_capacity": 8}),
    "var-fifo": ("var-fifo", {"beam": 5}, {"stream_capacity": 8}),
    "var-batch": ("var-batch", {"beam": 5}, {"stream_capacity": 8}),
    "fixed-stream": ("fixed-stream", {"beam": 4}, {"stream_capacity": 8}),
    "jacobi": ("jacobi", {"beam": 1}, {"stream_capacity": 8}),
    "hybrid-jacobi": ("hybrid-jacobi", {"beam": 1}, {"jacobi_max_parallel_len": 4, "stream_capacity": 8}),
    "greedy": ("fixed-ours", {"beam": 1}, {"stream_capacity": 8}),
    # over-subscription splits groups by a candidate budget: the parts get static buffers of their own
    "oversubscribed": ("var-stream", {"beam": 5}, {"stream_capacity": 8, "stream_max_candidates": 20,
                                                   "stream_oversubscribe": True}),
    "ngram-blocking": ("var-stream", {"beam": 5, "no_repeat_ngram_size": 2, "min_len": 3}, {"stream_capacity": 8}),
    # the verifier's ragged blocks; the draft steps static too (its own buckets)
    "speculative": ("speculative", {"beam": 1}, {"draft_path": os.path.join(DEMO, "draft.pt"), "stream_capacity": 8}),
    "lookahead": ("lookahead", {"beam": 1}, {"stream_capacity": 8}),
}
FAST = ("var-stream", "fixed-ours", "topup", "gs-jacobi", "speculative")  # the issue's; the others in the slow tier


def _params(names=tuple(CASES)):
    return [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in names]


def _run(session, data, case: str, mode: str, **extra):
    search, gen, opts = CASES[case]
    return session.translate(data, search=search, gen=gen, opts=dict(opts, step_mode=mode, **extra))


def assert_same(a, b, tol: float = 1e-9, *, scores: bool = True) -> None:
    assert len(a.hypos) == len(b.hypos)
    for i, (x, y) in enumerate(zip(a.hypos, b.hypos)):
        assert [h["tokens"].tolist() for h in x] == [h["tokens"].tolist() for h in y], f"sentence {i}"
        if scores:
            assert [h["score"] for h in x] == pytest.approx([h["score"] for h in y], abs=tol), f"sentence {i}"


def _count_output_layers(monkeypatch) -> Dict[str, int]:
    """Counts of the output layer's top-k (``topk_with_normaliser``) inside and outside a static step's region."""
    from fairseq_stream.model.static.region import StaticStep
    from fairseq_stream.search import output

    counts = {"inside": 0, "outside": 0}
    where = ["outside"]
    real, body = output.topk_with_normaliser, StaticStep._body

    def counted(scores, k):
        counts[where[0]] += 1
        return real(scores, k)

    def region(self, *args):
        where[0] = "inside"
        try:
            body(self, *args)
        finally:
            where[0] = "outside"

    from fairseq_stream.search.beam import BeamSearch

    searched = BeamSearch._search_natively

    def counted_search(self, state, scores, c):  # the output layer's top-k inside the step's one C++ search call
        out = searched(self, state, scores, c)
        if out is not None:
            counts[where[0]] += 1
        return out

    monkeypatch.setattr(output, "topk_with_normaliser", counted)
    monkeypatch.setattr(BeamSearch, "_search_natively", counted_search)
    monkeypatch.setattr(StaticStep, "_body", region)
    return counts


@pytest.fixture(scope="module")
def data64(demo_session64, demo_sources):
    return demo_session64.encode(demo_sources[:N])


@pytest.mark.parametrize("case", _params())
def test_static_equals_eager_in_float64(demo_session64, data64, case):
    eager = _run(demo_session64, data64, case, "eager")
    static = _run(demo_session64, data64, case, "static")
    assert_same(eager, static)
    modes = static.stats.step_mode
    assert modes["mode"] == "static" and modes["steps_eager"] == 0 and modes["steps_static"] == static.stats.timesteps
    assert eager.stats.step_mode["steps_eager"] == eager.stats.timesteps
    assert static.stats.expansions == eager.stats.expansions  # the same searches
    # every strategy's search step in the region, but after n-gram blocking's full output layer (not in the region)
    assert modes["search_in_step"] == (0 if case == "ngram-blocking" else static.stats.timesteps), modes
    if case == "speculative":  # the draft's steps: static as well, reported on a line of their own
        draft = static.stats.draft_step_mode
        assert draft["mode"] == "static" and draft["steps_eager"] == 0 and draft["steps_static"] > 0, draft
        assert eager.stats.draft_step_mode["steps_eager"] > 0
        assert "draft's step mode static" in static.stats.summary()


def test_the_row_ladder_pads_at_most_an_eighth_past_512_rows():
    from fairseq_stream.model.static.buckets import row_bucket

    assert [row_bucket(r) for r in (1, 9, 300, 512, 513, 577, 1025, 3200)] == [8, 16, 512, 512, 576, 640, 1152, 3328]
    for rows in range(1, 9000):
        bucket = row_bucket(rows)
        assert bucket >= rows and row_bucket(bucket) == bucket  # a bucket is its own bucket: buffers recur
        assert rows <= 512 or bucket <= rows * 1.125


def test_static_equals_eager_past_512_rows_in_float64(demo_session64, demo_sources):
    """A wide beam over a few sentences: 12 × 45 = 540 rows run in the 576-row bucket (a rung of the
    fine ladder), then smaller ones as sentences end."""
    case = ("fixed-ours", {"beam": 45}, {"stream_capacity": 12})
    data = demo_session64.encode(demo_sources[:12])
    eager = demo_session64.translate(data, search=case[0], gen=case[1], opts=dict(case[2], step_mode="eager"))
    static = demo_session64.translate(data, search=case[0], gen=case[1], opts=dict(case[2], step_mode="static"))
    assert_same(eager, static)
    assert static.stats.step_mode["steps_eager"] == 0


@pytest.mark.parametrize("case", _params(("var-stream", "fixed-ours", "topup", "gs-jacobi", "var-fifo")))
def test_static_gives_the_eager_tokens_in_float32(demo_session, demo_sources, case):
    data = demo_session.encode(demo_sources[:N])
    assert_same(_run(demo_session, data, case, "eager"), _run(demo_session, data, case, "static"), scores=False)


@pytest.mark.slow
def test_static_equals_eager_on_an_ensemble(demo_sources):
    import os

    from fairseq_stream.tools.session import TranslationSession
    from tests.conftest import DEMO

    ckpt = os.path.join(DEMO, "checkpoint.pt")
    session = TranslationSession.load(DEMO, f"{ckpt}:{ckpt}", bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"], dtype=torch.float64)
    data = session.encode(demo_sources[:12])
    for case in ("var-stream", "gs-jacobi"):
        assert_same(_run(session, data, case, "eager"), _run(session, data, case, "static"))


@pytest.mark.slow
def test_static_equals_eager_with_ib_beam(tiny_ib_ckpt, tiny_train_bin, demo_sources, monkeypatch):
    """ib-beam's steps carry the IBDecoder's block mask M(h, c) (a (b, b) or (b, L + b) mask); the
    output layer of every slot and the multi-word step (``ib_step``, over a bucket state) run inside the
    static step's region, with the same operators and shapes at every step of a bucket and no host read."""
    from fairseq_stream.model.static.region import StaticStep
    from fairseq_stream.tools.session import TranslationSession
    from tests.conftest import DEMO

    import os

    counts = _count_output_layers(monkeypatch)
    body = StaticStep._body  # the counting wrapper
    seen: Dict[Tuple[int, ...], List[list]] = defaultdict(list)

    def recorded(self, buf, io, memory, b, wq, tail=None, source=None, gather=None, search=None, from_rows=False):
        with _Recorder() as rec:
            body(self, buf, io, memory, b, wq, tail, source, gather, search, from_rows)
        seen[(buf.size(0), buf.size(3), b, wq, None if source is None else source.size(0),
              None if gather is None else gather[0].size(0), from_rows,
              None if search is None else search.key[:3])].append(rec.made)

    monkeypatch.setattr(StaticStep, "_body", recorded)

    session = TranslationSession.load(tiny_train_bin, tiny_ib_ckpt, bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"], dtype=torch.float64)
    data = session.encode(demo_sources[:12])
    runs = {m: session.translate(data, search="ib-beam", gen={"beam": 3}, opts={"step_mode": m, "stream_capacity": 5})
            for m in ("eager", "static")}
    assert_same(runs["eager"], runs["static"])
    steps = runs["static"].stats.timesteps
    assert runs["static"].stats.step_mode["steps_static"] == steps == runs["static"].stats.step_mode["search_in_step"]
    assert counts == {"outside": runs["eager"].stats.timesteps, "inside": steps}
    assert sum(len(v) for v in seen.values()) == steps
    repeated = [v for v in seen.values() if len(v) > 1]
    assert sum(len(v) for v in repeated) >= steps // 2  # most steps share a bucket with others
    for regions in repeated:
        assert all(r == regions[0] for r in regions[1:])
    for key, regions in seen.items():
        ops = [op for op, _ in regions[0]]
        assert key[-1] is not None and any("ib_step" in op for op in ops), key
        assert not [op for op in ops if any(r in op for r in HOST_READS)], key
    # the steps whose rows are the last step's next rows (nobody finished) read their z-word inputs in the region
    from_rows = sum(len(v) for key, v in seen.items() if key[-2])
    assert from_rows >= steps // 2, (from_rows, steps)


class _Recorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Every tensor the dispatched operators create: (operator, output shapes), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.made: List[Tuple[str, Tuple[Tuple[int, ...], ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        shapes = tuple(tuple(t.shape) for t in (out if isinstance(out, (tuple, list)) else [out])
                       if isinstance(t, torch.Tensor))
        self.made.append((str(func), shapes))
        return out


#: what reads a value on the host (a CUDA sync): none may run inside a step's region
HOST_READS = ("_local_scalar_dense", "nonzero", "masked_select", "unique")


@pytest.mark.parametrize("case", ["var-stream", "fixed-ours", "gs-jacobi", "speculative"])
def test_a_static_step_creates_the_same_shapes_at_every_step_of_its_bucket(demo_session, demo_sources, monkeypatch, case):
    """The step proper (what a graph captures: the decoder, the strategy's output layer — top-k,
    normaliser, score edits — and a beam's search step) makes the same tensors, shape for shape, at every
    step of a bucket (rows, slots, block width, output layer, bucket state): nothing in it follows the
    live rows, sentences or lengths, and nothing in it reads the host."""
    from fairseq_stream.model.static.region import StaticStep

    body = StaticStep._body
    seen: Dict[Tuple[int, ...], List[list]] = defaultdict(list)

    def recorded(self, buf, io, memory, b, wq, tail=None, source=None, gather=None, search=None, from_rows=False):
        with _Recorder() as rec:
            body(self, buf, io, memory, b, wq, tail, source, gather, search, from_rows)
        seen[(buf.size(0), buf.size(3), b, wq, None if tail is None else tail.key, tuple(memory.keys[0].shape),
              None if source is None else source.size(0),
              None if gather is None else (gather[0].size(0), gather[1] is not None),
              None if search is None else search.key[:3], from_rows)].append(rec.made)  # its kind and bucket state size

    monkeypatch.setattr(StaticStep, "_body", recorded)
    data = demo_session.encode(demo_sources[:N])
    out = _run(demo_session, data, case, "static")
    regions = sum(len(v) for v in seen.values())
    assert regions == out.stats.timesteps if case != "speculative" else regions > out.stats.timesteps  # + the draft's
    repeated = [steps for steps in seen.values() if len(steps) > 1]
    assert sum(len(s) for s in repeated) >= 0.8 * regions  # most steps share a bucket with others
    for steps in repeated:
        assert all(s == steps[0] for s in steps[1:])
        assert len(steps[0]) > 20  # the recorder saw the step's operators
    for key, steps in seen.items():
        ops = [op for op, _ in steps[0]]
        assert not [op for op in ops if any(r in op for r in HOST_READS)], key
        if key[4]:  # the target's steps: the output layer (fused top-k, the edits, the best k) ran in the region
            assert any("topk" in op for op in ops) and any("masked_fill" in op for op in ops), key
        if key[6] is not None:  # the last step's cache reorder: one copy into the whole stacked buffer
            op, shapes = next((op, shapes) for op, shapes in steps[0] if "index_select" in op and len(shapes[0]) == 5)
            assert shapes[0][0] == key[0], (key, op, shapes)
    assert any(key[4] for key in seen)
    if case in ("var-stream", "fixed-ours"):  # a beam reorders its rows at every step, and searches in the region
        assert sum(len(v) for key, v in seen.items() if key[6] is not None) > regions // 2
        assert all(key[8] is not None and any("beam_step" in op for op, _ in v[0]) for key, v in seen.items())
        # and most steps read their rows' inputs from the last search step's next rows, in the region
        assert sum(len(v) for key, v in seen.items() if key[9]) > regions // 2
    if case == "gs-jacobi":  # the iteration in the region too, its output layer's inputs made there from the bucket state
        assert all(key[8] is not None and any("jacobi_step" in op for op, _ in v[0]) for key, v in seen.items())
    if case == "speculative":  # the verification in the target's regions (the draft's steps have no output layer)
        target = [(key, v) for key, v in seen.items() if key[4]]
        assert target and all(key[8] is not None and any("jacobi_step" in op for op, _ in v[0]) for key, v in target)


@pytest.mark.parametrize("case", _params(["var-stream", "fixed-ours", "gs-jacobi", "speculative", "lookahead"]))
def test_the_output_layer_runs_inside_the_static_step(demo_session, demo_sources, monkeypatch, case):
    """Under --step-mode static the output layer after the product runs inside the step's region
    (``TopTail``): the output scorer computes no top-k of its own at any step (eager: every step),
    and the tokens are the eager step's."""
    counts = _count_output_layers(monkeypatch)
    data = demo_session.encode(demo_sources[:N])
    runs = {}
    for mode in ("eager", "static"):
        counts.update(inside=0, outside=0)
        runs[mode] = _run(demo_session, data, case, mode)
        runs[mode].counts = dict(counts)
    assert runs["eager"].counts == {"outside": runs["eager"].stats.timesteps, "inside": 0}
    assert runs["static"].counts == {"outside": 0, "inside": runs["static"].stats.timesteps}
    modes = runs["static"].stats.step_mode
    assert modes["steps_static"] == modes["output_layer_in_step"] == runs["static"].stats.timesteps
    assert not runs["eager"].stats.step_mode.get("output_layer_in_step")
    assert_same(runs["eager"], runs["static"], scores=False)


@pytest.mark.parametrize("case", _params(["var-stream", "fixed-ours", "gs-jacobi", "speculative", "topup"]))
def test_the_cache_reorder_runs_inside_the_next_static_step(demo_session, demo_sources, monkeypatch, case):
    """Under --step-mode static a reorder of a group's rows (``RowCache.select``: a beam's parents, finished
    sentences leaving) copies nothing when it is called: the next step's region copies the rows from the old
    buffer, so a graph replays the copy with the step. A copy outside a region (``RowCache.settle``) is left
    only where the rows are used otherwise first: a refill joins them, or their slots outgrow the bucket."""
    from fairseq_stream.model.row_cache import RowCache

    settle, outside = RowCache.settle, [0]

    def counted(self):
        outside[0] += self.pending is not None
        return settle(self)

    monkeypatch.setattr(RowCache, "settle", counted)
    data = demo_session.encode(demo_sources[:N])
    static = _run(demo_session, data, case, "static")
    inside = static.stats.step_mode["reorders_in_step"]
    assert inside > 0 and outside[0] <= inside // 2, (inside, outside[0])
    if case in ("var-stream", "fixed-ours", "topup"):  # a beam reorders at (almost) every step
        assert inside >= static.stats.timesteps // 2, (inside, static.stats.timesteps)
    eager = _run(demo_session, data, case, "eager")
    assert not eager.stats.step_mode.get("reorders_in_step")
    assert_same(eager, static, scores=False)


# oversubscribed: the two parts of a split group step the same row bucket in turn, so the second's chain is broken
@pytest.mark.parametrize("case", ["var-stream", "fixed-ours", "topup", "var-fifo", "oversubscribed", "greedy"])
def test_what_travels_with_a_row_is_gathered_inside_the_next_static_step(demo_session, demo_sources, monkeypatch,
                                                                         case):
    """A beam's reordered rows take their encoder slots and their output layer's inputs (tokens generated, maximum
    length: ``one_token_on``) from their parents inside the next step's region: the edits' row context is computed
    on the host only at the steps whose chain broke (a refill or a merge joined the rows, another group stepped
    the bucket in between, the first step), and the tokens are the eager step's."""
    from fairseq_stream.search.beam import BeamSearch

    real, computed = BeamSearch._row_context, [0]

    def counted(self, state, row_slot):
        computed[0] += 1
        return real(self, state, row_slot)

    monkeypatch.setattr(BeamSearch, "_row_context", counted)
    data = demo_session.encode(demo_sources[:N])
    fixed = {}  # each sentence's own pruning (no --prune-auto: its probes would widen a group's output layer)
    static = _run(demo_session, data, case, "static", **fixed)
    steps, gathered = static.stats.timesteps, static.stats.step_mode["inputs_in_step"]
    assert gathered >= steps // (4 if case == "oversubscribed" else 2), (gathered, steps)
    assert computed[0] == steps - gathered, (computed[0], steps, gathered)
    computed[0] = 0
    eager = _run(demo_session, data, case, "eager", **fixed)
    # each eager step's context on the host, but where its one C++ search call took the rows' steps itself
    searched = eager.stats.extra.get("native_search_steps", 0)
    assert computed[0] + searched == eager.stats.timesteps and not eager.stats.step_mode.get("inputs_in_step")
    assert_same(eager, static, scores=False)


#: ops outside the region per step (N sentences, capacity 8): var-stream 2.4, fixed-ours 2.8, greedy 1.7 (4.7 and 4.9
#: for the beams with their rows' inputs filled on the host), gs-jacobi 7.4 (11.9 with its iteration after the
#: region), lookahead 8.6 (11.7 with its verification after the region: the n-gram pool's proposal is written into
#: the bucket state's feed), speculative 53.1 (54.6; ~40 of them the draft's proposal)
OUTSIDE = {"var-stream": 4, "fixed-ours": 4, "greedy": 3, "gs-jacobi": 10, "lookahead": 10, "speculative": 56}


@pytest.mark.parametrize("case", list(OUTSIDE))
def test_a_step_leaves_few_operations_outside_the_static_region(demo_session, demo_sources, case):
    """What a GPU still launches around each replay (aten operations outside the region, views left out). A
    beam step: a group's copy into a bucket state where it changes, the finished sentences' hypotheses copied
    out, the rows' inputs where they are not the last search step's next rows (a refill, a merge: one ``cat``, one
    copy, the padding rows where live rows became padding) — else the region reads them from the bucket state's rows
    buffer; the rows' lengths (one length: a view of a shared table) and sentences (from the strategy's index, when
    a refill reads them) cost nothing, and the fused beam step runs inside the region (``search in N``); about 8.8
    before those two views and the padding rule, 19.5 before the region gathered the rows' inputs (docs/results.md).
    Jacobi: the iteration and its output layer's inputs in the region too; outside, the accepted lengths and a
    group's copy into a bucket state where its row bucket changes; its index's columns are views."""
    from fairseq_stream.engine.profiling import CostCounts, count_decoder_steps

    data = demo_session.encode(demo_sources[:N])
    _run(demo_session, data, case, "static")  # the stream's buffers made once
    with count_decoder_steps(CostCounts()) as counts:
        out = _run(demo_session, data, case, "static")
    outside = counts.per_step(out.stats.timesteps)["ops_outside_region_per_step"]
    assert outside <= OUTSIDE[case], (outside, counts.ops_by_name.most_common(12))
    assert out.stats.step_mode["search_in_step"] == out.stats.timesteps


def test_static_step_reads_the_host_at_most_once_per_step(demo_session, demo_sources):
    from fairseq_stream.engine.profiling import CostCounts, count_decoder_steps

    data = demo_session.encode(demo_sources[:N])
    # speculative: the draft's acceptance histogram is read when the stream drains, not in a step
    for case in ("var-stream", "gs-jacobi", "speculative"):
        with count_decoder_steps(CostCounts()) as counts:
            out = _run(demo_session, data, case, "static")
        assert out.stats.step_mode["steps_static"] == out.stats.timesteps > 20
        assert counts.host_reads <= out.stats.timesteps, (case, counts.host_reads, dict(counts.reads_by_op))


def test_the_step_mode_is_checked_and_reported(demo_session, demo_sources):
    from fairseq_stream.errors import FairseqStreamError

    data = demo_session.encode(demo_sources[:4])
    with pytest.raises(FairseqStreamError, match="--step-mode graph .* needs a CUDA device"):
        demo_session.translate(data, search="var-stream", gen={"beam": 5}, opts={"step_mode": "graph"})
    with pytest.raises(FairseqStreamError, match="--step-mode must be one of auto, eager, static, graph"):
        demo_session.translate(data, search="var-stream", gen={"beam": 5}, opts={"step_mode": "fast"})
    from fairseq_stream.model import native_decoder

    auto = demo_session.translate(data, search="var-stream", gen={"beam": 5})
    # auto on a CPU: the C++ step where it builds
    assert auto.stats.step_mode["mode"] == ("native" if native_decoder.kernel_available() is None else "eager")
    static = demo_session.translate(data, search="var-stream", gen={"beam": 5}, opts={"step_mode": "static"})
    line = static.stats.summary()
    assert f"step mode static: 0 replayed, {static.stats.timesteps} static, 0 eager" in line


# ---- on a GPU: the captured graphs -------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda_session():
    import os

    from fairseq_stream.tools.session import TranslationSession
    from tests.conftest import DEMO

    return TranslationSession.load(DEMO, os.path.join(DEMO, "checkpoint.pt"), bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                   extra_args=["--source-lang", "es", "--target-lang", "en"], cpu=False)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["var-stream", "fixed-ours", "topup", "gs-jacobi", "var-fifo", "greedy"])
def test_graph_equals_static_and_eager_on_cuda(cuda_session, demo_sources, case):
    """Replayed graphs compute what the same static step computes uncaptured (the same kernels:
    identical tokens; scores to 1e-4, as cuBLAS may pick another algorithm under capture), and in
    float32 the eager step's tokens for nearly every sentence (other attention kernels: last bits
    differ; the float64 test below holds graph ≡ eager exactly)."""
    data = cuda_session.encode(demo_sources[:N])
    eager = _run(cuda_session, data, case, "eager")
    static = _run(cuda_session, data, case, "static")
    graph = _run(cuda_session, data, case, "graph")
    graph_again = _run(cuda_session, data, case, "graph")  # the graphs of the first run, replayed
    assert_same(static, graph, tol=1e-4)
    assert_same(graph, graph_again, tol=1e-4)
    same = sum(x[0]["tokens"].tolist() == y[0]["tokens"].tolist() for x, y in zip(eager.hypos, graph.hypos))
    assert same >= 0.9 * N, (same, N)
    modes = graph_again.stats.step_mode
    assert modes["mode"] == "graph" and modes["steps_eager"] == 0
    assert modes["steps_replayed"] >= 0.95 * graph_again.stats.timesteps, modes


@pytest.mark.gpu
def test_graph_equals_eager_in_float64_on_cuda(demo_sources):
    import os

    from fairseq_stream.tools.session import TranslationSession
    from tests.conftest import DEMO

    session = TranslationSession.load(DEMO, os.path.join(DEMO, "checkpoint.pt"), bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"], cpu=False,
                                      dtype=torch.float64)
    data = session.encode(demo_sources[:N])
    for case in ("var-stream", "gs-jacobi"):
        assert_same(_run(session, data, case, "eager"), _run(session, data, case, "graph"))
