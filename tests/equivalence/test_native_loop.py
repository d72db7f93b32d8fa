"""``--native-loop auto``: the greedy beam's steps searched in one C++ call give the Python steps' bits.

Where a group has few rows, one token a row and the native step (engine/scheduler.py, the ``"ahead"`` hook),
``decoder_greedy_search`` (ops/csrc/decoder_step.cpp) runs the decoder steps and searches each as
``BeamSearch.step`` does — the fused top-k and normaliser, fairseq's score edits, the best candidate — while no
sentence may end; the step where one may is the Python step's. So on the trained demo model the tokens, the
scores and every positional score are EXACTLY equal to ``--native-loop off`` (and to the eager step), in float32
and int8, with refills, under either finalisation rule and with every score edit it takes; the step counts are
the same, and the statistics say how many steps the loop searched. A wider beam's steps of one sentence likewise
(``decoder_beam_search``: searched and reordered in the call until a step finishes the sentence), and the Jacobi
iterations of one sentence at batch 1 (``decoder_jacobi``, ``decoder_speculate``: the second half of this file).
"""
import os
from typing import Any, Dict, Tuple

import pytest
import torch

from conftest import DEMO
from helpers import random_weights, write_checkpoint_variant
from test_native_equals_eager import assert_identical

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.model import native_decoder
from fairseq_stream.search.defaults import PRUNED_WIDTH_KEY
from fairseq_stream.search.parallel_gate import WARMUP

N = 16
CASES: Dict[str, Dict[str, Any]] = {  # name → (gen, opts) of fixed-ours
    "batch1": ({"beam": 1}, {"stream_capacity": 1}),
    "refills": ({"beam": 1}, {"stream_capacity": 5}),  # sentences end and join while others run ahead
    "fairseq-rule": ({"beam": 1}, {"stream_capacity": 4, "beam_finalize": "fairseq"}),  # 2 candidates a row
    "edits": ({"beam": 1, "unkpen": 2.5, "min_len": 9, "max_len_a": 0.5, "max_len_b": 10}, {"stream_capacity": 4}),
    "bonus-unk": ({"beam": 1, "unkpen": -1.5}, {"stream_capacity": 4}),  # a raised token: the loop declines
    "int8": ({"beam": 1}, {"stream_capacity": 4, "quantize": "int8"}),
    "as-given": ({"beam": 1}, {"stream_capacity": 3, "stream_input_order": "as-given"}),
}
SLOW = ("as-given",)
DECLINES = ("bonus-unk",)  # what the loop does not take: every step is the Python step's

pytestmark = pytest.mark.skipif(native_decoder.kernel_available() is not None,
                                reason="the native-step kernel cannot be built here")


@pytest.fixture(scope="module")
def data(demo_session, demo_sources):
    return demo_session.encode(demo_sources[:N])


def _run(session: Any, data: Any, case: str, **extra: Any) -> Any:
    gen, opts = CASES[case]
    return session.translate(data, search="fixed-ours", gen=gen, opts=dict(opts, **extra))


@pytest.mark.parametrize("case", [pytest.param(n, marks=pytest.mark.slow if n in SLOW else ()) for n in CASES])
def test_native_loop_equals_python_steps(demo_session, data, case):
    python = _run(demo_session, data, case, native_loop="off")
    loop = _run(demo_session, data, case)  # --native-loop auto, the default
    assert_identical(python, loop)
    for stats in (python, loop):
        assert stats.stats.step_mode["steps_native"] == stats.stats.timesteps
    assert (loop.stats.timesteps, loop.stats.expansions) == (python.stats.timesteps, python.stats.expansions)
    assert "native_loop_steps" not in python.stats.extra
    searched = loop.stats.extra.get("native_loop_steps", 0)
    if case in DECLINES:
        assert searched == 0
        return
    # every step but those where a sentence may end (about one a sentence) and the first of a run ahead
    assert loop.stats.timesteps > searched > loop.stats.timesteps / 2
    assert f"{int(searched)} steps searched in the native loop" in loop.stats.summary()


def test_native_loop_equals_the_eager_step(demo_session, data):
    """The loop against the Python step on the eager decoder step (the reference of the native step)."""
    eager = _run(demo_session, data, "refills", step_mode="eager")
    assert eager.stats.step_mode["steps_eager"] == eager.stats.timesteps
    assert_identical(eager, _run(demo_session, data, "refills"))


def test_native_greedy_loop_leaves_pruning_alone(demo_session, data):
    """var-stream's pruning rules at k = 1: the greedy loop does not search them (the wider beam's loop does)."""
    pruned = demo_session.translate(data, search="var-stream", gen={"beam": 1}, opts={"stream_capacity": 2})
    assert "native_loop_steps" not in pruned.stats.extra


# ---- a wider beam's steps of one sentence (``decoder_beam_search``) ----
# Where a group is one sentence (batch 1, the end of a stream), the loop runs the beam's steps: each decoder call's
# step searched as the Python step searches it (``searched_beam_step``: the fused output layer's candidates with
# fairseq's edits, then the beam operator), the rows reordered over the row arena as RowCache.select does, while no
# sentence finishes; the step where one does is read by the Python step. The tokens, the scores and every
# positional score are the Python steps', and so are the steps and expansions. A pruned beam's (var-stream) rows
# change in number from step to step inside the loop; how wide each sentence ran is metered as the Python steps do.
# A group of several sentences (at most AHEAD_ROWS rows) runs in the loop until one of them finishes.
BEAM_CASES: Dict[str, Tuple[str, Dict[str, Any], Dict[str, Any]]] = {  # name → (search, gen, opts)
    "k5": ("fixed-ours", {"beam": 5}, {"stream_capacity": 1}),
    "k5-fairseq-rule": ("fixed-ours", {"beam": 5}, {"stream_capacity": 1, "beam_finalize": "fairseq"}),
    # sentences held short of --min-len, others cut at their maximum length
    "k4-edits": ("fixed-ours", {"beam": 4, "unkpen": 2.5, "min_len": 9, "max_len_a": 0.5, "max_len_b": 10},
                 {"stream_capacity": 1}),
    "k5-int8": ("fixed-ours", {"beam": 5}, {"stream_capacity": 1, "quantize": "int8"}),
    # two sentences a group (6 rows): the loop runs them until one finishes, then the one left, then the refill's
    "k3-refills": ("fixed-ours", {"beam": 3}, {"stream_capacity": 2}),
    "var-k5": ("var-stream", {"beam": 5}, {"stream_capacity": 1}),  # the default rule: δ by each sentence's surprisal
    "var-k4-pairs": ("var-stream", {"beam": 4}, {"stream_capacity": 2}),  # two sentences' widths metered
    # Freitag2017's rules together: widths from 1 to 8 (rp, rpl, mc), int8
    "var-k8-rules-int8": ("var-stream", {"beam": 8}, {"stream_capacity": 1, "prune_rel_threshold": 0.02,
                                                      "prune_rel_local_threshold": 0.05,
                                                      "prune_max_cands_per_node": 3, "quantize": "int8"}),
}


@pytest.mark.parametrize("case", list(BEAM_CASES))
def test_native_beam_loop_equals_python_steps(demo_session, data, case):
    search, gen, opts = BEAM_CASES[case]
    python = demo_session.translate(data, search=search, gen=gen, opts=dict(opts, native_loop="off"))
    loop = demo_session.translate(data, search=search, gen=gen, opts=opts)
    assert_identical(python, loop)
    assert (loop.stats.timesteps, loop.stats.expansions) == (python.stats.timesteps, python.stats.expansions)
    assert "native_loop_steps" not in python.stats.extra
    widths = lambda result: {k: v for k, v in result.stats.extra.items() if k.startswith(PRUNED_WIDTH_KEY)}  # noqa: E731
    assert widths(loop) == widths(python)
    assert bool(widths(loop)) == (search == "var-stream")
    searched = loop.stats.extra.get("native_loop_steps", 0)
    # every step but a sentence's first, those where it may finish and those near its maximum length
    assert loop.stats.timesteps > searched > loop.stats.timesteps / 2
    assert f"{int(searched)} steps searched in the native loop" in loop.stats.summary()


def test_a_lone_wide_beam_runs_ahead_past_the_few_rows_bound(data):
    """One sentence's beam of k = 20 (rows past the scheduler's AHEAD_ROWS): where a loop stops for the row arena to
    grow, the loop goes on after it — one or two loops a sentence — and gives the Python steps' bits. A fresh session,
    so that the arena starts small (the module's session has grown its arena in the tests above)."""
    from fairseq_stream.tools.session import TranslationSession

    session = TranslationSession.load(DEMO, os.path.join(DEMO, "checkpoint.pt"), bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    gen, opts = {"beam": 20}, {"stream_capacity": 1}
    loop = session.translate(data, search="fixed-ours", gen=gen, opts=opts)
    python = session.translate(data, search="fixed-ours", gen=gen, opts=dict(opts, native_loop="off"))
    assert_identical(python, loop)
    assert (loop.stats.timesteps, loop.stats.expansions) == (python.stats.timesteps, python.stats.expansions)
    assert loop.stats.extra["native_loop_steps"] >= loop.stats.timesteps - 2 * N


@pytest.fixture(scope="module")
def unk_session(demo_session, tmp_path_factory):
    """The demo with <unk>'s output row (tied to its embedding) made 1.3× "the"'s: <unk> is often the best token,
    so --unkpen decides steps (on the demo itself <unk> is never near the top and the edit changes nothing)."""
    from fairseq_stream.tools.session import TranslationSession

    vocab = demo_session.task.target_dictionary
    unk, the = vocab.unk(), vocab.index("the")

    def favour_unk(name: str, weight: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        if name in ("decoder.embed_tokens.weight", "decoder.output_projection.weight"):
            weight = weight.clone()
            weight[unk] = 1.3 * weight[the]
        return weight

    path = write_checkpoint_variant(os.path.join(DEMO, "checkpoint.pt"),
                                    str(tmp_path_factory.mktemp("unk") / "unk.pt"), favour_unk)
    return TranslationSession.load(DEMO, path, bpe_codes=os.path.join(DEMO, "bpe.codes"),
                                   extra_args=["--source-lang", "es", "--target-lang", "en"])


@pytest.mark.parametrize("search,opts,k", [("fixed-ours", {}, 1), ("lookahead", {"lookahead_prior": os.path.join(DEMO, "lookahead_prior.pt")}, 1),
                                           ("fixed-ours", {}, 5)])
def test_the_loops_apply_the_unknown_word_penalty_as_python(unk_session, demo_sources, search, opts, k):
    """Where <unk> is often the best token, --unkpen 2.5 changes the output, and the native loops (the greedy
    search; a sentence's verifications; a beam's steps) apply it as the Python steps do."""
    data = unk_session.encode(demo_sources[:N])
    opts = dict(opts, stream_capacity=1)
    penalised = {"beam": k, "unkpen": 2.5}
    plain = unk_session.translate(data, search=search, gen={"beam": k}, opts=opts)
    python = unk_session.translate(data, search=search, gen=penalised, opts=dict(opts, native_loop="off"))
    loop = unk_session.translate(data, search=search, gen=penalised, opts=opts)
    assert_identical(python, loop)
    unk = unk_session.task.target_dictionary.unk()
    count = lambda result: sum(int((hypos[0]["tokens"] == unk).sum()) for hypos in result.hypos)  # noqa: E731
    assert count(plain) > count(loop) > 0  # the edit bites, and <unk> still wins where it leads by more


def test_native_loop_value_is_checked(demo_session, data):
    with pytest.raises(FairseqStreamError, match="--native-loop must be one of auto, off"):
        _run(demo_session, data, "batch1", native_loop="sometimes")


# ---- the Jacobi verifications of one sentence (the "ahead" hook of the Jacobi family, lookahead and speculative) ----
# At batch 1 ``decoder_jacobi`` / ``decoder_speculate`` do a sentence's iterations as JacobiDecoding does them (the
# block's predictions with fairseq's edits, the accepted prefix, the next window) and guess the next block as the
# strategy does — Jacobi's own unverified predictions, lookahead's n-gram pool, speculative decoding's draft (its
# catch-up and proposals) — while no iteration may end the sentence; the iteration where one may (an EOS accepted,
# a position at the maximum length) is the Python step's. So the output is the Python loop's bit for bit — and
# greedy's tokens and positional scores — and every statistic of the iterations is the same.
SHIPPED_DRAFT = os.path.join(DEMO, "draft.pt")
PRIOR = os.path.join(DEMO, "lookahead_prior.pt")
EDITS = {"beam": 1, "unkpen": 2.5, "min_len": 5, "max_len_a": 0.5, "max_len_b": 6}  # sentences end at the limit
VERIFY: Dict[str, Tuple[str, Dict[str, Any], Dict[str, Any]]] = {  # name → (search, gen, opts)
    "speculative": ("speculative", {"beam": 1}, {}),
    "speculative-gamma1": ("speculative", {"beam": 1}, {"draft_tokens": "1"}),
    "speculative-gamma5": ("speculative", {"beam": 1}, {"draft_tokens": "5"}),
    "speculative-edits": ("speculative", EDITS, {}),
    "speculative-int8": ("speculative", {"beam": 1}, {"quantize": "int8"}),
    "speculative-random-draft": ("speculative", {"beam": 1}, {"draft_path": "random"}),  # one token a verification
    "gs-jacobi": ("gs-jacobi", {"beam": 1}, {}),  # aligned blocks, PAD guesses at a fresh one
    "gs-jacobi-tail": ("gs-jacobi", {"beam": 1}, {"jacobi_block": 4, "jacobi_init": "tail"}),
    "hybrid-jacobi": ("hybrid-jacobi", EDITS, {"jacobi_max_parallel_len": 6}),
    "lookahead": ("lookahead", {"beam": 1}, {}),
    "lookahead-prior": ("lookahead", EDITS, {"lookahead_prior": PRIOR}),
    "lookahead-int8": ("lookahead", {"beam": 1}, {"lookahead_prior": PRIOR, "quantize": "int8"}),
    # one position a call (HGJ with L = 0) in both; the gate's own choices (--jacobi-parallel auto, the default,
    # which the other cases set to always: its choices follow the measured times, and so do the iterations)
    "gs-jacobi-never": ("gs-jacobi", {"beam": 1}, {"jacobi_parallel": "never"}),
    "gs-jacobi-auto": ("gs-jacobi", {"beam": 1}, {"jacobi_parallel": "auto"}),
    "lookahead-auto-int8": ("lookahead", {"beam": 1}, {"jacobi_parallel": "auto", "quantize": "int8"}),
    # each sentence with the draft or one position a call (no draft call): the gate's choice per sentence
    "speculative-gated": ("speculative", {"beam": 1}, {"jacobi_parallel": "auto"}),
    # γ follows each verification's measured time: a run keeps the γ chosen before it
    "speculative-auto": ("speculative", {"beam": 1}, {"draft_tokens": "auto"}),
    # the loop declines: PJ's window is the whole rest of the target
    "jacobi": ("jacobi", {"beam": 1}, {}),
}
VERIFY_DECLINES = ("jacobi",)
# the loop runs, on the side the gate chose for each sentence
GATED = ("gs-jacobi-auto", "lookahead-auto-int8", "speculative-gated")
SPECULATIVE_STATS = ("verify_steps", "verify_rows", "verify_accepted", "draft_calls", "draft_tokens_proposed",
                     "draft_proposals")


@pytest.fixture(scope="module")
def random_draft(tmp_path_factory):
    return write_checkpoint_variant(os.path.join(DEMO, "checkpoint.pt"),
                                    str(tmp_path_factory.mktemp("draft") / "random.pt"), random_weights)


def _verify(session: Any, data: Any, case: str, random_draft: str, **extra: Any) -> Any:
    search, gen, opts = VERIFY[case]
    if search == "speculative":
        opts = dict(opts, draft_path=random_draft if opts.get("draft_path") == "random" else SHIPPED_DRAFT)
    if search != "jacobi":
        opts = dict({"jacobi_parallel": "always"}, **opts)
    return session.translate(data, search=search, gen=gen, opts=dict(opts, stream_capacity=1, **extra))


@pytest.mark.parametrize("case", list(VERIFY))
def test_verification_loop_equals_python_iterations(demo_session, data, random_draft, case):
    python = _verify(demo_session, data, case, random_draft, native_loop="off")
    loop = _verify(demo_session, data, case, random_draft)
    assert_identical(python, loop)
    search, gen, opts = VERIFY[case]
    greedy = demo_session.translate(data, search="fixed-ours", gen=gen,
                                    opts={"stream_capacity": 1, "quantize": opts.get("quantize", "none")})
    for i, (g, s) in enumerate(zip(greedy.hypos, loop.hypos)):  # greedy's output (its score sums another way)
        assert s[0]["tokens"].tolist() == g[0]["tokens"].tolist(), f"sentence {i}"
        assert torch.equal(s[0]["positional_scores"], g[0]["positional_scores"]), f"sentence {i}"
    searched = loop.stats.extra.get("native_loop_steps", 0)
    if case in VERIFY_DECLINES:
        assert searched == 0
        return
    if case == "speculative-auto":  # its γ, and so its iterations, follow the measured times: greedy's output above
        extra = loop.stats.extra
        assert searched > loop.stats.timesteps / 2 and extra["verify_steps"] == loop.stats.timesteps
        assert extra["draft_tokens_proposed"] >= extra["draft_proposals"] >= extra["verify_steps"]
        assert "mean γ" in loop.stats.summary()
        return
    if case in GATED:  # both sides measured (WARMUP runs each after one that is not, blocks first), then the cheaper
        extra = loop.stats.extra
        assert min(extra["jacobi_parallel_parallel_runs"], extra["jacobi_parallel_sequential_runs"]) > WARMUP
        # one position a call but a run's first, the block the Python step planned (3 positions by default)
        single, runs = extra["jacobi_parallel_sequential_iterations"], extra["jacobi_parallel_sequential_runs"]
        assert single <= extra["jacobi_parallel_sequential_tokens"] <= single + 2 * runs
        assert "sentence runs in blocks" in loop.stats.summary() and searched > 0
        assert "jacobi_parallel_parallel_runs" not in python.stats.extra  # the Python steps: the blocks
        return
    assert (loop.stats.timesteps, loop.stats.accepted_tokens) == (python.stats.timesteps, python.stats.accepted_tokens)
    assert loop.stats.extra["sentence_iterations"] == python.stats.extra["sentence_iterations"]
    # every iteration but a sentence's first, its last and those that reach its maximum length
    assert loop.stats.timesteps > searched > loop.stats.timesteps / 2
    assert f"{int(searched)} steps searched in the native loop" in loop.stats.summary()
    if search != "speculative":
        return
    hist = {k: v for k, v in python.stats.extra.items() if k.startswith("accepted_")}
    assert {k: v for k, v in loop.stats.extra.items() if k.startswith("accepted_")} == hist
    for name in SPECULATIVE_STATS:
        assert loop.stats.extra[name] == python.stats.extra[name], name
    assert loop.stats.draft_step_mode["steps_native"] == python.stats.draft_step_mode["steps_native"]
    # the draft's and the verification's shares of the time, measured inside the loop too
    extra = loop.stats.extra
    assert extra["draft_seconds"] > 0 and extra["verify_seconds"] > 0
    assert extra["draft_seconds"] + extra["verify_seconds"] < loop.stats.wall_seconds


@pytest.mark.parametrize("search,opts", [("speculative", {"draft_path": SHIPPED_DRAFT}), ("lookahead", {})])
def test_verification_loop_leaves_batches_to_python(demo_session, data, search, opts):
    """Several sentences in flight: their iterations are the Python step's until one sentence is left."""
    both = [demo_session.translate(data, search=search, gen={"beam": 1},
                                   opts=dict(opts, stream_capacity=4, native_loop=loop)) for loop in ("off", "auto")]
    assert_identical(*both)
    assert both[1].stats.extra.get("native_loop_steps", 0) < both[1].stats.timesteps / 4
