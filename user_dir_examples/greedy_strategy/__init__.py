"""A new ``--search`` strategy in one file: greedy search written against the strategy interface.

    fairseq-generate DATA --user-dir user_dir_examples/greedy_strategy --path ckpt.pt --search my-greedy

The ``@register_search`` line is the whole registration (docs/architecture.md, "A strategy"). It
reads the device once a step (``.tolist()``): fine for an example, not for a fast strategy.
"""
from dataclasses import dataclass

import torch
from torch import Tensor

from fairseq_stream.search.interface import Hypothesis, StepOutcome
from fairseq_stream.search.registry import Capabilities, register_search
from fairseq_stream.search.score_edits import RowContext
from fairseq_stream.search.state import PAD, StateOps, StrategyState, per_sentence


@dataclass
class GreedyState(StrategyState):  # select/concat/split of every field come with the declarations
    sentences: Tensor  # (S,)
    tokens: Tensor = per_sentence(pad=PAD)  # (S, t)
    token_scores: Tensor = per_sentence(pad=0.0)  # (S, t)
    max_len: Tensor = per_sentence()  # (S,)


@register_search("my-greedy", summary="greedy search, the docs' example",
                 capabilities=Capabilities(streaming=True, default_epsilon=0.25, beam=False, nbest=False))
class MyGreedy(StateOps):
    rows_per_sentence = 1

    def __init__(self, cfg, ctx) -> None:
        self.cfg, self.ctx = cfg, ctx  # cfg: --lenpen, --beam, --nbest; ctx: the run's scorer and symbols

    @classmethod
    def from_config(cls, cfg, ctx) -> "MyGreedy":
        return cls(cfg, ctx)

    def init_state(self, sentences: Tensor, max_len: Tensor, src_lengths: Tensor, **_) -> StepOutcome:
        s = len(sentences)
        state = GreedyState(sentences, sentences.new_zeros(s, 0), torch.zeros(s, 0, dtype=self.ctx.dtype), max_len)
        return StepOutcome(state=state, parents=None, feed=sentences.new_full((s, 1), self.ctx.bos))

    def length(self, state: GreedyState) -> int:
        return state.tokens.size(1)

    def step(self, state: GreedyState, scores: Tensor) -> StepOutcome:  # scores (S, 1, V)
        steps = torch.full_like(state.max_len, state.tokens.size(1))
        lp, tok, _ = self.ctx.scorer.top(scores[:, -1], 1, RowContext(steps, state.max_len))  # (S, 1) each
        state.tokens = torch.cat([state.tokens, tok], dim=1)
        state.token_scores = torch.cat([state.token_scores, lp.to(state.token_scores)], dim=1)
        done = (tok[:, 0] == self.ctx.eos).tolist()
        finished = {int(state.sentences[i]): [Hypothesis(state.tokens[i], float(state.token_scores[i].sum())
                                                         / state.tokens.size(1) ** self.cfg.lenpen, state.token_scores[i])]
                    for i, d in enumerate(done) if d}
        keep = torch.tensor([i for i, d in enumerate(done) if not d], dtype=torch.long)
        return StepOutcome(state=state.select(keep), parents=keep, feed=tok.index_select(0, keep), finished=finished)
