"""Speculative decoding returns the target's greedy output whatever the draft proposes
(Leviathan et al. 2023 Algorithm 1 with greedy acceptance), on the trained demo model, in float64."""
import os

import pytest
import torch

from conftest import DEMO
from helpers import random_weights, write_checkpoint_variant
from fairseq_stream.errors import FairseqStreamError

N = 12  # held-out sentences
GEN = {"beam": 1, "max_len_a": 1.2, "max_len_b": 10}
SHIPPED_DRAFT = os.path.join(DEMO, "draft.pt")


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    """Drafts made from the demo checkpoint: random weights (acceptance near zero), the demo's
    weights plus noise (a distinct model, also an ensemble member), and one with a smaller dictionary."""
    folder = tmp_path_factory.mktemp("drafts")
    demo = os.path.join(DEMO, "checkpoint.pt")

    def noisy(name, t, gen):
        return t + 0.02 * torch.randn(t.shape, generator=gen) if t.is_floating_point() else t

    def smaller(name, t, gen):
        return t[:-7] if "embed_tokens" in name or "output_projection" in name else t

    return {
        "random": write_checkpoint_variant(demo, str(folder / "random.pt"), random_weights),
        "noisy": write_checkpoint_variant(demo, str(folder / "noisy.pt"), noisy),
        "smaller": write_checkpoint_variant(demo, str(folder / "smaller.pt"), smaller),
    }


@pytest.fixture(scope="module")
def data64(demo_session64, demo_sources):
    return demo_session64.encode(demo_sources[:N])


def _greedy(session, data, gen=GEN):
    return session.translate(data, search="fixed-ours", gen=gen, opts={"stream_capacity": 1})


def _same(greedy, out) -> None:
    for i, (g, s) in enumerate(zip(greedy.hypos, out.hypos)):
        assert s[0]["tokens"].tolist() == g[0]["tokens"].tolist(), f"sentence {i}"
        assert s[0]["score"] == pytest.approx(g[0]["score"], abs=1e-9)
        assert torch.allclose(s[0]["positional_scores"].double(), g[0]["positional_scores"].double(), atol=1e-9)


@pytest.fixture(scope="module")
def greedy64(demo_session64, data64):
    return _greedy(demo_session64, data64)


@pytest.mark.parametrize("opts", [
    {"draft_tokens": "4", "stream_capacity": 1},
    {"draft_tokens": "1", "stream_capacity": 1},
    {"draft_tokens": "auto", "stream_capacity": 1},
    {"draft_tokens": "3", "stream_capacity": 5, "stream_epsilon": 0.5},  # batched, streaming, ragged acceptance
])
def test_identical_to_greedy_with_the_shipped_draft(demo_session64, data64, greedy64, opts):
    out = demo_session64.translate(data64, search="speculative", gen=GEN, opts=dict(opts, draft_path=SHIPPED_DRAFT))
    _same(greedy64, out)
    extra = out.stats.extra
    assert out.stats.accepted_tokens == out.stats.autoregressive_steps == sum(len(h[0]["tokens"]) for h in greedy64.hypos)
    # The draft helps: more than one token per verification, and the histogram adds up.
    assert extra["verify_accepted"] / extra["verify_rows"] > 1.2
    assert sum(v for k, v in extra.items() if k.startswith("accepted_")) == extra["verify_rows"]


def test_identical_to_greedy_with_a_random_draft(demo_session64, data64, greedy64, drafts):
    out = demo_session64.translate(data64, search="speculative", gen=GEN,
                                   opts={"draft_path": drafts["random"], "stream_capacity": 4})
    _same(greedy64, out)
    extra = out.stats.extra
    assert extra["verify_accepted"] / extra["verify_rows"] < 1.1  # acceptance near zero: one token per verification


def test_batched_equals_batch_one(demo_session64, data64, drafts):
    opts = {"draft_path": drafts["noisy"], "draft_tokens": "5"}
    one = demo_session64.translate(data64, search="speculative", gen=GEN, opts=dict(opts, stream_capacity=1))
    many = demo_session64.translate(data64, search="speculative", gen=GEN, opts=dict(opts, stream_capacity=8))
    _same(one, many)


@pytest.mark.parametrize("gen", [
    dict(GEN, min_len=9),
    dict(GEN, unkpen=5.0),
    dict(GEN, max_len_a=0.0, max_len_b=6),  # many sentences end at the length limit, inside a block
])
def test_greedys_options(demo_session64, data64, gen):
    greedy = _greedy(demo_session64, data64, gen)
    out = demo_session64.translate(data64, search="speculative", gen=gen,
                                   opts={"draft_path": SHIPPED_DRAFT, "draft_tokens": "4", "stream_capacity": 3})
    _same(greedy, out)


def test_ensemble_target(demo_sources, drafts):
    from fairseq_stream.tools.session import TranslationSession

    session = TranslationSession.load(
        DEMO, f"{os.path.join(DEMO, 'checkpoint.pt')}:{drafts['noisy']}", bpe_codes=os.path.join(DEMO, "bpe.codes"),
        extra_args=["--source-lang", "es", "--target-lang", "en"], dtype=torch.float64)
    data = session.encode(demo_sources[:6])
    greedy = _greedy(session, data)
    out = session.translate(data, search="speculative", gen=GEN, opts={"draft_path": SHIPPED_DRAFT, "stream_capacity": 3})
    _same(greedy, out)


def test_a_draft_with_another_dictionary_is_one_clear_error(demo_session, drafts):
    with pytest.raises(FairseqStreamError, match="dictionary has 6017 symbols, the model's 6024"):
        demo_session.build_generator("speculative", {"beam": 1}, {"draft_path": drafts["smaller"]})


def test_a_draft_whose_dictionary_files_differ_is_one_clear_error(demo_session, tmp_path):
    """Same sizes, other words (two swapped): found by the dictionary files beside the draft."""
    os.symlink(SHIPPED_DRAFT, tmp_path / "draft.pt")
    for lang in ("es", "en"):
        lines = open(os.path.join(DEMO, f"dict.{lang}.txt"), encoding="utf-8").read().splitlines()
        if lang == "en":
            lines[10], lines[11] = lines[11], lines[10]
        (tmp_path / f"dict.{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(FairseqStreamError, match="its en dictionary .* is not the model's"):
        demo_session.build_generator("speculative", {"beam": 1}, {"draft_path": str(tmp_path / "draft.pt")})


@pytest.mark.parametrize("gen,opts,message", [
    ({"beam": 1}, {}, "needs --draft-path"),
    ({"beam": 1}, {"draft_path": "/nonexistent/draft.pt"}, "no such file"),
    ({"beam": 1}, {"draft_path": SHIPPED_DRAFT, "draft_tokens": "0"}, "--draft-tokens must be"),
    ({"beam": 1}, {"draft_path": SHIPPED_DRAFT, "draft_tokens": "many"}, "--draft-tokens must be"),
    ({"beam": 4}, {"draft_path": SHIPPED_DRAFT}, "--beam 4"),
    ({"beam": 1}, {"draft_path": SHIPPED_DRAFT, "draft_quantize": "int4"}, "--draft-quantize must be one of auto, none, int8"),
])
def test_bad_options(demo_session, gen, opts, message):
    with pytest.raises(FairseqStreamError, match=message):
        demo_session.build_generator("speculative", gen, opts)


# ---- --draft-quantize: the draft's weights (a draft only proposes) ----
@pytest.mark.parametrize("draft_quantize", ["none", "int8", "auto"])
def test_the_drafts_weights_leave_the_output_alone(demo_session, demo_sources, draft_quantize):
    """In float32 a float or an int8 draft proposes (``auto``: int8 on a CPU); the output is greedy's, bit for
    bit, and the closing statistics line says which weights proposed."""
    data = demo_session.encode(demo_sources[:N])
    greedy = _greedy(demo_session, data)
    out = demo_session.translate(data, search="speculative", gen=GEN,
                                 opts={"draft_path": SHIPPED_DRAFT, "draft_quantize": draft_quantize,
                                       "stream_capacity": 3})
    for i, (g, s) in enumerate(zip(greedy.hypos, out.hypos)):
        assert s[0]["tokens"].tolist() == g[0]["tokens"].tolist(), f"sentence {i}"
        assert torch.equal(s[0]["positional_scores"], g[0]["positional_scores"]), f"sentence {i}"
    int8 = "draft's weights int8 (s8 x per-row" in out.stats.summary()
    assert int8 == (draft_quantize != "none")
    assert ("draft's weights float" in out.stats.summary()) == (draft_quantize == "none")
    assert out.stats.extra["verify_accepted"] / out.stats.extra["verify_rows"] > 1.2  # an int8 draft still helps


def test_an_int8_draft_where_it_cannot_run_is_one_clear_error(demo_session64):
    """A float64 run: ``auto`` keeps the draft's float weights, ``int8`` is refused in one line."""
    g = demo_session64.build_generator("speculative", {"beam": 1}, {"draft_path": SHIPPED_DRAFT})
    assert g.make_strategy(g.stats).proposer.weights == "float"
    with pytest.raises(FairseqStreamError, match="--draft-quantize int8 needs float32 weights on the CPU"):
        demo_session64.build_generator("speculative", {"beam": 1}, {"draft_path": SHIPPED_DRAFT, "draft_quantize": "int8"})


def test_a_session_prepares_its_draft_once(demo_session, tmp_path):
    """Each call of a session builds a generator; the draft is loaded and quantised once per file and choice
    (~0.1 s a call saved), and loaded again when the file changes."""
    import shutil

    path = str(tmp_path / "draft.pt")
    shutil.copy(SHIPPED_DRAFT, path)

    def draft_models(**opts):
        g = demo_session.build_generator("speculative", {"beam": 1}, dict(opts, draft_path=path))
        return g.make_strategy(g.stats).proposer.draft.models

    first = draft_models()
    assert draft_models()[0] is first[0]
    assert draft_models(draft_quantize="none")[0] is not first[0]
    os.utime(path, ns=(0, 0))  # the file changed (as far as its time says)
    assert draft_models()[0] is not first[0]


def test_other_strategies_refuse_the_draft(demo_session):
    with pytest.raises(FairseqStreamError, match="does not read --draft-path"):
        demo_session.build_generator("gs-jacobi", {"beam": 1}, {"draft_path": SHIPPED_DRAFT})


# ---- lookahead decoding (Fu et al. 2024): no draft model, guesses from an n-gram pool ----
@pytest.mark.parametrize("opts", [
    {"lookahead_ngram": 4, "stream_capacity": 1, "jacobi_parallel": "always"},  # (auto may choose single steps)
    {"lookahead_ngram": 3, "stream_capacity": 5, "stream_epsilon": 0.5},
])
def test_lookahead_identical_to_greedy(demo_session64, data64, greedy64, opts):
    out = demo_session64.translate(data64, search="lookahead", gen=GEN, opts=opts)
    _same(greedy64, out)
    assert out.stats.extra["sentence_iterations"] < out.stats.autoregressive_steps  # guesses were accepted


def test_lookahead_with_a_prior_identical_to_greedy_and_accepting_more(demo_session64, data64, greedy64):
    """The shipped prior (the demo model's greedy output on training verses) guesses: greedy's output, more
    tokens a call than the run's own pool (batch 1 and batched)."""
    prior = os.path.join(DEMO, "lookahead_prior.pt")
    for capacity in (1, 5):
        plain = demo_session64.translate(data64, search="lookahead", gen=GEN,
                                         opts={"stream_capacity": capacity, "lookahead_ngram": 3, "jacobi_parallel": "always"})
        out = demo_session64.translate(data64, search="lookahead", gen=GEN,
                                       opts={"stream_capacity": capacity, "lookahead_ngram": 3, "lookahead_prior": prior,
                                             "jacobi_parallel": "always"})
        _same(greedy64, out)
        assert out.stats.extra["sentence_iterations"] < plain.stats.extra["sentence_iterations"]
        assert "lookahead prior=lookahead_prior.pt (3094 one-token, 23768 two-token keys)" in out.stats.summary()


def test_lookahead_prior_of_another_n_is_one_clear_error(demo_session):
    prior = os.path.join(DEMO, "lookahead_prior.pt")
    with pytest.raises(FairseqStreamError, match="counted for --lookahead-ngram 3, the run has 4"):
        demo_session.build_generator("lookahead", {"beam": 1}, {"lookahead_prior": prior, "lookahead_ngram": 4})
    with pytest.raises(FairseqStreamError, match="does not read --lookahead-prior"):
        demo_session.build_generator("gs-jacobi", {"beam": 1}, {"lookahead_prior": prior})


def test_lookahead_bad_ngram(demo_session):
    with pytest.raises(FairseqStreamError, match="--lookahead-ngram must be in"):
        demo_session.build_generator("lookahead", {"beam": 1}, {"lookahead_ngram": 1})
