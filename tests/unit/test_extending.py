"""Extending the package: a strategy in one class and one registration, a user's pruning rule
from a --user-dir, and the package's own rule that no function grows past 60 lines."""
import ast
import math
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import Tensor

import fairseq_stream  # noqa: F401  (registers the strategies)
from fairseq_stream.integration.build import build_generator
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.interface import Hypothesis, StepOutcome
from fairseq_stream.search.score_edits import RowContext
from fairseq_stream.search.registry import Capabilities, register_search, unregister_search
from fairseq_stream.search.state import PAD, StateOps, StrategyState, per_sentence
from helpers import fake_task, gen_cfg, make_dictionary, sample_for, stream_opts, tiny_transformer

REPO = Path(__file__).resolve().parents[2]
D = make_dictionary([f"w{i}" for i in range(40)])
SOURCES = [5 + (7 * i) % 30 for i in range(11)]


@dataclass
class GreedyState(StrategyState):
    sentences: Tensor
    tokens: Tensor = per_sentence(pad=PAD)  # (S, t)
    token_scores: Tensor = per_sentence(pad=0.0)  # (S, t)
    max_len: Tensor = per_sentence()


class ToyGreedy(StateOps):
    """Greedy search written against the interface only (host reads allowed: it is a toy)."""

    rows_per_sentence = 1

    def __init__(self, cfg, ctx) -> None:
        self.cfg, self.ctx, self.pad = cfg, ctx, ctx.pad

    @classmethod
    def from_config(cls, cfg, ctx) -> "ToyGreedy":
        return cls(cfg, ctx)

    def init_state(self, sentences, max_len, src_lengths, *, longest=None, shortest=None) -> StepOutcome:
        s = len(sentences)
        state = GreedyState(sentences, sentences.new_zeros(s, 0), torch.zeros(s, 0, dtype=self.ctx.dtype), max_len)
        return StepOutcome(state=state, parents=None, feed=sentences.new_full((s, 1), self.ctx.bos))

    def length(self, state: GreedyState) -> int:
        return state.tokens.size(1)

    def step(self, state: GreedyState, scores: Tensor) -> StepOutcome:
        steps = torch.full_like(state.max_len, state.tokens.size(1))
        lp, tok, _ = self.ctx.scorer.top(scores[:, -1], 1, RowContext(steps, state.max_len))
        state.tokens = torch.cat([state.tokens, tok], dim=1)
        state.token_scores = torch.cat([state.token_scores, lp.to(state.token_scores)], dim=1)
        done = (tok[:, 0] == self.ctx.eos).tolist()
        finished = {int(state.sentences[i]): [Hypothesis(state.tokens[i], float(state.token_scores[i].sum())
                                                         / state.tokens.size(1) ** self.cfg.lenpen, state.token_scores[i])]
                    for i, d in enumerate(done) if d}
        keep = torch.tensor([i for i, d in enumerate(done) if not d], dtype=torch.long)
        return StepOutcome(state=state.select(keep), parents=keep, feed=tok.index_select(0, keep), finished=finished)


@pytest.fixture
def toy_registered():
    register_search("toy-greedy", summary="test: greedy written against the interface",
                    capabilities=Capabilities(streaming=True, default_epsilon=0.25, beam=False, nbest=False))(ToyGreedy)
    yield "toy-greedy"
    unregister_search("toy-greedy")


def _decode(name, model, gen=None, **opts):
    g = build_generator(name, fake_task(D), [model], gen_cfg(**{"beam": 1, "max_len_a": 0, "max_len_b": 8, **(gen or {})}),
                        stream_opts(stream_capacity=3, **opts))
    return [[(h["tokens"].tolist(), round(float(h["score"]), 6)) for h in x] for x in g.generate([model], sample_for(D, SOURCES))]


def test_a_toy_strategy_is_one_class_and_one_registration(toy_registered):
    """Streamed (capacity 3, refill at ε = 0.25: groups merge through the generic concat), its
    output is fixed-width beam search's at k = 1; its capabilities refuse --beam 2."""
    model = tiny_transformer(D, layers=1)
    assert _decode(toy_registered, model) == _decode("fixed-ours", model)
    with pytest.raises(FairseqStreamError, match="toy-greedy with --beam 2"):
        _decode(toy_registered, model, gen={"beam": 2})
    with pytest.raises(FairseqStreamError, match="does not read --jacobi-block"):
        _decode(toy_registered, model, jacobi_block=5)


def test_user_pruning_rule_from_a_user_dir():
    from fairseq import utils

    utils.import_user_module(Namespace(user_dir=str(REPO / "user_dir_examples" / "prune_rule")))
    model = tiny_transformer(D, layers=1)
    runs = {}
    for rules in (None, "max-width:1"):
        g = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=4, max_len_a=0, max_len_b=8),
                            stream_opts(prune_rules=rules, prune_abs_threshold=math.inf))
        g.generate([model], sample_for(D, SOURCES))
        runs[rules] = g.stats
    # One candidate per sentence survives each step: one decoder row per sentence in flight.
    assert runs["max-width:1"].expansions == runs["max-width:1"].active_sentences
    assert runs[None].expansions > runs[None].active_sentences
    with pytest.raises(FairseqStreamError, match="max-width:N needs a whole number"):
        build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=4), stream_opts(prune_rules="max-width:x"))


def test_unknown_pruning_rule_is_a_one_line_error():
    model = tiny_transformer(D, layers=1)
    with pytest.raises(FairseqStreamError, match="unknown --prune-rules 'nope'; registered rules: .*ap") as err:
        build_generator("var-stream", fake_task(D), [model], gen_cfg(beam=4), stream_opts(prune_rules="rpl:0.1,nope"))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("ended", ["prune", "keep"])
def test_prune_rules_compose_like_the_flags(ended):
    """``--prune-rules ap:1.0,rpl:0.2`` is ``--prune-abs-threshold 1 --prune-rel-local-threshold 0.2``,
    under either ``--prune-ended`` (a rule from --prune-rules inherits it, as the flags' rules do)."""
    model = tiny_transformer(D, layers=1)
    by_flags = _decode("var-batch", model, {"beam": 4}, prune_abs_threshold=1.0, prune_rel_local_threshold=0.2,
                       prune_ended=ended)
    by_rules = _decode("var-batch", model, {"beam": 4}, prune_abs_threshold=math.inf, prune_rules="ap:1.0,rpl:0.2",
                       prune_ended=ended)
    assert by_flags == by_rules
    rules = build_generator("var-batch", fake_task(D), [model], gen_cfg(beam=4),
                            stream_opts(prune_rules="ap:1.0", prune_ended=ended)).config.pruning.extra
    assert rules[0].ended == ended


def test_no_function_of_the_package_is_longer_than_60_lines():
    long = []
    for path in sorted((REPO / "fairseq_stream").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
