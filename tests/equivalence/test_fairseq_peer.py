"""Our strategies against fairseq's own ``SequenceGenerator``, token for token and score for score.

Two parts (issue 38, item 3):

* **fairseq's generator test cases, rewritten.** fairseq's ``tests/test_sequence_generator.py``
  decodes two sentences on a hand-made probability table and checks hand-computed beams (beam 2:
  with and without length normalisation, a length penalty for short and for long outputs, a
  maximum length). The same distributions are written here as a table keyed by the prefix (our
  ``TableModel``), and the expected beams and scores are the ones computed by hand there.
  ``fixed-ours --beam-finalize fairseq`` must return them; greedy strategies must return fairseq's
  greedy output.
* **A seeded sweep on tiny random transformers** (float64): beam, lenpen, unkpen (negative too),
  min/max length, nbest, unnormalized, against ``SequenceGenerator``. A few settings run in the
  fast tier; the whole sweep is marked ``slow``. Jacobi strategies are compared with fairseq's greedy.

fairseq's maximum length uses the batch's padded source width, ours each sentence's own length
(search/score_edits.py): fairseq decodes one sentence per batch here, where the two agree.
"""
from __future__ import annotations

import itertools
import math
import random
from typing import Any, Dict, List, Sequence

import pytest
import torch
from fairseq.data import data_utils
from fairseq.sequence_generator import SequenceGenerator

from fairseq_stream.integration.build import build_generator
from helpers import TableModel, fake_task, gen_cfg, make_dictionary, stream_opts, tiny_transformer

D = make_dictionary(("w1", "w2", "s1", "s2"))
EOS, W1, W2, S1, S2 = D.eos(), D.index("w1"), D.index("w2"), D.index("s1"), D.index("s2")

# fairseq's sequence_generator_setup, by prefix instead of by beam row (the same distributions).
PEER_TABLE = {
    (S1, ()): {W1: 0.9, W2: 0.1},
    (S1, (W1,)): {EOS: 1.0},
    (S1, (W2,)): {W1: 0.9, W2: 0.1},
    (S1, (W2, W1)): {W1: 0.1, W2: 0.9},
    (S1, (W2, W2)): {EOS: 0.6, W1: 0.2, W2: 0.2},
    (S1, (W2, W1, W2)): {EOS: 1.0},
    (S1, (W2, W1, W1)): {EOS: 1.0},
    (S2, ()): {W1: 0.7, W2: 0.3},
    (S2, (W1,)): {EOS: 0.25, W1: 0.35, W2: 0.4},
    (S2, (W2,)): {W1: 0.1, W2: 0.9},
    (S2, (W1, W2)): {EOS: 0.6, W1: 0.4},
    (S2, (W2, W2)): {EOS: 0.01, W2: 0.99},
    (S2, (W2, W2, W2)): {EOS: 0.1, W1: 0.5, W2: 0.4},
    (S2, (W1, W2, W1)): {EOS: 1.0},
}
# The hand-computed beams of fairseq's tests: per case, per sentence, (tokens, positional probabilities)
S1_SHORT, S1_LONG = ([W1, EOS], [0.9, 1.0]), ([W2, W1, W2, EOS], [0.1, 0.9, 0.9, 1.0])
S2_SHORT, S2_LONG = ([W1, W2, EOS], [0.7, 0.4, 0.6]), ([W1, W2, W1, EOS], [0.7, 0.4, 0.4, 1.0])
HAND_CASES = {
    "normalized": ({}, [[S1_SHORT, S1_LONG], [S2_LONG, S2_SHORT]]),
    "unnormalized": ({"unnormalized": True}, [[S1_SHORT, S1_LONG], [S2_SHORT, S2_LONG]]),
    "lenpen-0.6": ({"lenpen": 0.6}, [[S1_SHORT, S1_LONG], [S2_SHORT, S2_LONG]]),
    "lenpen-5": ({"lenpen": 5.0}, [[S1_LONG, S1_SHORT], [S2_LONG, S2_SHORT]]),
    "max-len-2": ({"max_len_b": 2}, [[S1_SHORT, ([W2, W2, EOS], [0.1, 0.1, 0.6])],
                                     [S2_SHORT, ([W2, W2, EOS], [0.3, 0.9, 0.01])]]),
}


def _table_sample(sources: Sequence[int]) -> Dict[str, Any]:
    src = torch.tensor([[W1, s, EOS] for s in sources])
    return {"id": torch.arange(len(sources)),
            "net_input": {"src_tokens": src, "src_lengths": torch.full((len(sources),), 3)}}


def _expected_score(probs: List[float], gen: Dict[str, Any]) -> float:
    total = sum(math.log(p) for p in probs)
    return total if gen.get("unnormalized") else total / len(probs) ** gen.get("lenpen", 1.0)


@pytest.mark.parametrize("case", sorted(HAND_CASES))
def test_fairseq_generator_cases_by_hand(case):
    """fairseq's hand-computed beams, from fixed-ours with fairseq's finalisation rule (beam 2, nbest 2)."""
    gen, expected = HAND_CASES[case]
    model = TableModel(D, PEER_TABLE).eval()
    settings = dict({"beam": 2, "nbest": 2, "max_len_b": 200}, **gen)
    ours = build_generator("fixed-ours", fake_task(D), [model], gen_cfg(**settings),
                           stream_opts(beam_finalize="fairseq")).generate([model], _table_sample([S1, S2]))
    theirs = SequenceGenerator([model], D, beam_size=2, max_len_b=settings["max_len_b"],
                               normalize_scores=not gen.get("unnormalized"), len_penalty=gen.get("lenpen", 1.0),
                               ).forward(_table_sample([S1, S2]))
    for sentence, want in enumerate(expected):
        for rank, (tokens, probs) in enumerate(want):
            for got in (ours[sentence][rank], theirs[sentence][rank]):
                assert got["tokens"].tolist() == tokens, (case, sentence, rank, got["tokens"])
                torch.testing.assert_close(got["positional_scores"].double(),
                                           torch.tensor(probs, dtype=torch.float64).log(), atol=1e-4, rtol=0)
                assert float(got["score"]) == pytest.approx(_expected_score(probs, settings), abs=1e-4)


@pytest.mark.parametrize("search", ["fixed-ours", "fixed-stream"])
def test_greedy_on_fairseq_table_equals_fairseq_greedy(search):
    model = TableModel(D, PEER_TABLE).eval()
    opts = {"beam_finalize": "fairseq"}
    ours = build_generator(search, fake_task(D), [model], gen_cfg(beam=1), stream_opts(**opts)
                           ).generate([model], _table_sample([S1, S2]))
    theirs = SequenceGenerator([model], D, beam_size=1).forward(_table_sample([S1, S2]))
    assert [h[0]["tokens"].tolist() for h in ours] == [h[0]["tokens"].tolist() for h in theirs]
    assert [h[0]["tokens"].tolist() for h in ours] == [[W1, EOS], [W1, W2, EOS]]  # greedy, by hand


# ---- the sweep on tiny random transformers ---------------------------------------------------------
WORDS = [f"t{i}" for i in range(40)]
TD = make_dictionary(WORDS)


def _sources(n: int, seed: int) -> List[torch.Tensor]:
    rng = random.Random(seed)
    words = list(range(TD.nspecial, len(TD)))
    return [torch.tensor([rng.choice(words) for _ in range(rng.randint(2, 9))] + [TD.eos()]) for _ in range(n)]


def _batch(sources: List[torch.Tensor]) -> Dict[str, Any]:
    return {"id": torch.arange(len(sources)),
            "net_input": {"src_tokens": data_utils.collate_tokens(sources, TD.pad(), left_pad=True),
                          "src_lengths": torch.tensor([s.numel() for s in sources])}}


def _fairseq(model: Any, sources: List[torch.Tensor], gen: Dict[str, Any]) -> List[List[Dict[str, Any]]]:
    generator = SequenceGenerator(
        [model], TD, beam_size=gen.get("beam", 5), max_len_a=gen.get("max_len_a", 0.0),
        max_len_b=gen.get("max_len_b", 200), min_len=gen.get("min_len", 1),
        normalize_scores=not gen.get("unnormalized", False), len_penalty=gen.get("lenpen", 1.0),
        unk_penalty=gen.get("unkpen", 0.0))
    return [generator.forward(_batch([s]))[0] for s in sources]  # one per batch: fairseq's max length per sentence


def _ours(search: str, model: Any, sources: List[torch.Tensor], gen: Dict[str, Any],
          opts: Dict[str, Any]) -> List[List[Dict[str, Any]]]:
    settings = dict({"beam": 5, "max_len_b": 200}, **gen)
    generator = build_generator(search, fake_task(TD), [model], gen_cfg(**settings), stream_opts(**opts))
    return generator.generate([model], _batch(sources))


#: fairseq normalises in float32 even for a float64 model (``utils.log_softmax(..., dtype=float32)``):
#: its scores carry float32 rounding (about 1e-7 per token), ours are float64
SCORE_TOLERANCE = 1e-5


def _differences(ours: List[List[Dict[str, Any]]], theirs: List[List[Dict[str, Any]]], nbest: int) -> List[str]:
    out = []
    for i, (mine, ref) in enumerate(zip(ours, theirs)):
        for rank in range(nbest):
            a, b = mine[rank], ref[rank]
            if a["tokens"].tolist() != b["tokens"].tolist():
                out.append(f"sentence {i} rank {rank}: {a['tokens'].tolist()} != {b['tokens'].tolist()}")
            elif abs(float(a["score"]) - float(b["score"])) > SCORE_TOLERANCE or not torch.allclose(
                    a["positional_scores"].double(), b["positional_scores"].double(), atol=SCORE_TOLERANCE, rtol=0):
                out.append(f"sentence {i} rank {rank}: score {float(a['score'])} != {float(b['score'])}")
    return out


_MODELS: Dict[int, Any] = {}


def _model(seed: int) -> Any:
    if seed not in _MODELS:
        _MODELS[seed] = tiny_transformer(TD, seed=seed, dim=32)
    return _MODELS[seed]


def _check(search: str, gen: Dict[str, Any], n: int = 12, seed: int = 0) -> None:
    model, sources = _model(seed), _sources(n, seed)
    opts = {"beam_finalize": "fairseq"} if search == "fixed-ours" else {}
    ref_gen = dict(gen, beam=1, nbest=1) if search != "fixed-ours" else gen
    theirs = _fairseq(model, sources, ref_gen)
    ours = _ours(search, model, sources, ref_gen, opts)
    diffs = _differences(ours, theirs, int(gen.get("nbest", 1)) if search == "fixed-ours" else 1)
    assert not diffs, f"--search {search} {gen}: {len(diffs)} difference(s): {diffs[:3]}"


#: beam × unkpen at float64 with the fused output layer (issue 38, item 1: negative unkpen)
UNKPEN = [dict(beam=b, unkpen=u, max_len_b=12) for b in (1, 2, 5, 10) for u in (-1.0, -2.0, -3.0)]
SWEEP = UNKPEN + [
    dict(beam=b, lenpen=lp, max_len_b=15) for b in (1, 2, 5, 10) for lp in (0.6, 1.0, 2.0)
] + [
    dict(beam=4, unkpen=2.0, max_len_b=10), dict(beam=4, min_len=6, max_len_b=10),
    dict(beam=4, max_len_a=1.5, max_len_b=2), dict(beam=5, nbest=5, max_len_b=10),
    dict(beam=3, nbest=2, unnormalized=True, max_len_b=10), dict(beam=2, unkpen=-2.0, min_len=4, max_len_b=8),
]
FAST = [dict(beam=1, unkpen=-2.0, max_len_b=10), dict(beam=5, unkpen=-3.0, max_len_b=10),
        dict(beam=3, nbest=2, lenpen=0.6, min_len=3, max_len_b=8)]


@pytest.mark.parametrize("gen", FAST, ids=lambda g: ",".join(f"{k}={v}" for k, v in g.items()))
@pytest.mark.parametrize("search", ["fixed-ours", "gs-jacobi"])
def test_tiny_transformer_equals_fairseq(search, gen):
    _check(search, gen, n=6)


def _greedy_settings() -> List[Dict[str, Any]]:
    """The sweep's settings at beam 1 (what fairseq's greedy reads), each once."""
    seen, out = set(), []
    for gen in SWEEP:
        greedy = {k: v for k, v in gen.items() if k not in ("beam", "nbest")}
        if tuple(sorted(greedy.items())) not in seen:
            seen.add(tuple(sorted(greedy.items())))
            out.append(greedy)
    return out


def _ids(gen: Dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in gen.items()) or "defaults"


@pytest.mark.slow  # the whole sweep: ~40 settings × 30 sentences
@pytest.mark.parametrize("gen", SWEEP, ids=_ids)
def test_sweep_fixed_ours_equals_fairseq(gen):
    _check("fixed-ours", gen, n=30, seed=1)


@pytest.mark.slow  # every setting of the sweep at beam 1, against fairseq's greedy
@pytest.mark.parametrize("gen", _greedy_settings(), ids=_ids)
@pytest.mark.parametrize("search", ["gs-jacobi", "hybrid-jacobi", "jacobi"])
def test_sweep_jacobi_equals_fairseq_greedy(search, gen):
    _check(search, gen, n=30, seed=1)


# ---- models fairseq normalises itself (issue 38, item 2) ------------------------------------------
def _probability_model(table):
    """fairseq's TestIncrementalDecoder idea: ``forward`` returns probabilities (zeros included) and
    ``get_normalized_probs`` takes their log; unknown prefixes end (EOS)."""
    from helpers import _TableDecoder

    class ProbabilityDecoder(_TableDecoder):
        def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
            src = encoder_out["src_tokens"][0]
            bsz, tlen = prev_output_tokens.shape
            probs = torch.zeros(bsz, tlen, len(self.dictionary), dtype=torch.float64)
            for b in range(bsz):
                key = (int(src[b, -2]), tuple(prev_output_tokens[b, 1:].tolist()))
                for tok, p in self.table.get(key, {self.dictionary.eos(): 1.0}).items():
                    probs[b, -1, tok] = p
            return probs, {"attn": [None]}

        def get_normalized_probs(self, net_output, log_probs, _):
            return net_output[0].log() if log_probs else net_output[0]

    model = TableModel(D, table)
    model.decoder = ProbabilityDecoder(D, table)
    return model.eval()


@pytest.mark.parametrize("search", ["fixed-ours", "var-batch"])
def test_a_probability_returning_decoder_gives_fairseqs_hand_computed_beams(search):
    # the decoder's probabilities were taken as logits: positional scores -1.124, -1.044 instead of
    # log .9 = -0.105 and log 1 = 0, and BOS (probability 0) could be emitted as a word
    model = _probability_model(PEER_TABLE)
    opts = {"beam_finalize": "fairseq"} if search == "fixed-ours" else {"prune_abs_threshold": math.inf,
                                                                        "prune_max_cands_per_node": 2,
                                                                        "beam_finalize": "fairseq"}
    ours = build_generator(search, fake_task(D), [model], gen_cfg(beam=2, nbest=2), stream_opts(**opts)
                           ).generate([model], _table_sample([S1, S2]))
    for sentence, want in enumerate(HAND_CASES["normalized"][1]):
        for rank, (tokens, probs) in enumerate(want):
            got = ours[sentence][rank]
            assert got["tokens"].tolist() == tokens, (sentence, rank, got["tokens"])
            torch.testing.assert_close(got["positional_scores"].double(),
                                       torch.tensor(probs, dtype=torch.float64).log(), atol=1e-6, rtol=0)


def _adaptive_transformer(seed: int = 0) -> Any:
    from argparse import Namespace

    from fairseq.models.transformer import TransformerModel, base_architecture

    torch.manual_seed(seed)
    args = Namespace(
        encoder_embed_dim=32, decoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
        encoder_layers=1, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        dropout=0.0, max_source_positions=256, max_target_positions=256, adaptive_softmax_cutoff="10,25",
        adaptive_softmax_dropout=0.0,
    )
    base_architecture(args)
    return TransformerModel.build_model(args, fake_task(TD)).to(torch.float64).eval()


@pytest.mark.parametrize("gen", [{"beam": 1}, {"beam": 4}, pytest.param({"beam": 5, "nbest": 3, "lenpen": 0.6}, marks=pytest.mark.slow),
                                 pytest.param({"beam": 2, "unkpen": -2.0, "min_len": 3}, marks=pytest.mark.slow),
                                 pytest.param({"beam": 3, "unnormalized": True}, marks=pytest.mark.slow)], ids=_ids)
def test_an_adaptive_softmax_transformer_decodes_as_fairseq(gen):
    # its 32-dimensional features were arg-maxed as if they were the vocabulary (garbage, or an IndexError)
    model = _adaptive_transformer()
    assert model.decoder.adaptive_softmax is not None
    sources = _sources(6, 3)
    gen = dict(gen, max_len_b=10)
    theirs = _fairseq(model, sources, gen)
    ours = _ours("fixed-ours", model, sources, gen, {"beam_finalize": "fairseq"})
    assert not _differences(ours, theirs, int(gen.get("nbest", 1)))


def test_an_adaptive_softmax_transformer_is_refused_where_it_cannot_equal_fairseq():
    from fairseq_stream.errors import FairseqStreamError

    model = _adaptive_transformer()
    with pytest.raises(FairseqStreamError, match="gs-jacobi feeds several tokens a step.*does not mirror this Transformer"):
        build_generator("gs-jacobi", fake_task(TD), [model], gen_cfg(beam=1), stream_opts())
    with pytest.raises(FairseqStreamError, match=r"--temperature 0.5 with a TransformerDecoder\w* that normalises"):
        build_generator("fixed-ours", fake_task(TD), [model], gen_cfg(beam=2, temperature=0.5), stream_opts())


def test_extra_encoder_inputs_are_refused_not_dropped():
    # fairseq passes the whole net_input; ours passed src_tokens and src_lengths only, silently
    from fairseq_stream.errors import FairseqStreamError

    model = TableModel(D, PEER_TABLE).eval()
    sample = _table_sample([S1])
    sample["net_input"]["fancy_other_input"] = sample["net_input"]["src_tokens"]
    generator = build_generator("fixed-ours", fake_task(D), [model], gen_cfg(beam=2), stream_opts())
    with pytest.raises(FairseqStreamError, match="fancy_other_input besides src_tokens and src_lengths"):
        generator.generate([model], sample)
    del sample["net_input"]["fancy_other_input"]
    sample["net_input"]["prev_output_tokens"] = sample["net_input"]["src_tokens"]  # teacher forcing: not an input
    assert generator.generate([model], sample)[0][0]["tokens"].tolist() == [W1, EOS]


def test_max_cands_per_node_equals_fairseq_at_2k_not_at_k():
    """fairseq takes the best 2k candidates whatever their parent: after "w1" (k = 2) the best four
    are w1's EOS, w1 and w2, and w2's w1: "w1 EOS" is final and both of w1's words stay on
    fairseq's beam, where "w1 w2" ends best. M = k keeps only two candidates of "w1" (EOS and
    one word), so "w2 w1" takes the other place and "w1 w2 EOS" is never found; M = 2k equals fairseq."""
    table = {(S1, ()): {W1: 0.9, W2: 0.1}, (S1, (W1,)): {EOS: 0.4, W1: 0.3, W2: 0.29},
             (S1, (W2,)): {W1: 0.6, W2: 0.4}, (S1, (W1, W2)): {EOS: 1.0}, (S1, (W1, W1)): {W1: 0.99, EOS: 0.01}}
    model = TableModel(D, table).eval()
    theirs = SequenceGenerator([model], D, beam_size=2).forward(_table_sample([S1]))[0]
    assert [h["tokens"].tolist() for h in theirs] == [[W1, W2, EOS], [W1, EOS]]

    def var_batch(m: int) -> List[List[int]]:
        opts = stream_opts(prune_abs_threshold=math.inf, prune_max_cands_per_node=m, beam_finalize="fairseq")
        out = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=2, nbest=2), opts)
        return [h["tokens"].tolist() for h in out.generate([model], _table_sample([S1]))[0]]

    assert var_batch(4) == [[W1, W2, EOS], [W1, EOS]]
    assert var_batch(2) == [[W1, EOS], [W2, W1, EOS]]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ngram_blocking_equals_fairseqs_blocker_given_only_the_filled_tokens(n):
    """fairseq's CPU blocker reads the padded tail of its token buffer (fairseq issue 4709), so the
    comparison that holds is with the tokens filled so far (BOS first), which is what ours reads."""
    from fairseq.ngram_repeat_block import NGramRepeatBlock

    from fairseq_stream.search.score_edits import NoRepeatNgram, RowContext

    gen = torch.Generator().manual_seed(n)
    blocker = NGramRepeatBlock(n, use_extension=False)
    banned = 0
    for step in range(0, 12):
        rows = 6
        tokens = torch.cat([torch.full((rows, 1), EOS), torch.randint(4, 6, (rows, step), generator=gen)], 1)
        lprobs = torch.randn(rows, 10, generator=gen, dtype=torch.float64)
        theirs = blocker(tokens, lprobs.clone(), rows, 1, step)
        ctx = RowContext(steps=torch.full((rows,), step), max_len=torch.full((rows,), 100), history=tokens)
        ours = NoRepeatNgram(n, EOS).full(lprobs.clone(), ctx)
        assert torch.equal(torch.isinf(ours), torch.isinf(theirs)), (n, step)
        banned += int(torch.isinf(ours).sum())
    assert banned > 10  # the histories (two words) repeat: the blockers had work to do
