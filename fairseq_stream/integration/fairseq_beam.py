"""``--search beam``: fairseq's own ``SequenceGenerator``, unchanged — the baseline.

The generator gets a ``stats`` attribute (:class:`~fairseq_stream.engine.stats.DecodeStats`) filled by
counting its decoder calls, so the benchmark tables show fairseq's timesteps and candidate
expansions beside ours. The counting wraps the generator's own ensemble object only.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, List

from fairseq.tasks import FairseqTask

from fairseq_stream.search.interface import empty_hypothesis
from fairseq_stream.search.registry import Capabilities, register_search
from fairseq_stream.engine.stats import DecodeStats


def _count_decoder_calls(generator: Any) -> Any:
    stats = DecodeStats()
    forward_decoder = generator.model.forward_decoder

    @functools.wraps(forward_decoder)
    def counted(tokens, *args, **kwargs):
        # fairseq steps every live sentence with exactly beam_size rows.
        stats.add_step(sentences=tokens.size(0) // generator.beam_size, rows=tokens.size(0), length=tokens.size(1))
        return forward_decoder(tokens, *args, **kwargs)

    generator.model.forward_decoder = counted
    generator.stats = stats
    return generator


def _answer_empty_sources(generator: Any, nbest: int) -> Any:
    """Empty sources (EOS only) get the empty hypothesis without a model call, as with our
    strategies (fairseq's beam search would make a sentence up); other rows are unchanged.
    Under ``--nbest`` > 1 that one hypothesis is counted as ``fewer_than_nbest``, as ours are."""
    generate = generator.generate
    eos = generator.eos

    @functools.wraps(generate)
    def answered(models: Any, sample: Dict[str, Any], *args: Any, **kwargs: Any) -> List[Any]:
        lengths = sample["net_input"]["src_lengths"]
        empty = lengths.le(1)
        if not bool(empty.any()):
            return generate(models, sample, *args, **kwargs)
        keep = (~empty).nonzero().squeeze(1)
        if nbest > 1:
            generator.stats.add_extra("fewer_than_nbest", float(empty.sum()))
        out: List[Any] = [[empty_hypothesis(eos)] for _ in range(int(lengths.numel()))]
        if keep.numel():
            sub = dict(sample, net_input=dict(sample["net_input"], src_tokens=sample["net_input"]["src_tokens"][keep],
                                              src_lengths=lengths[keep]))
            for key in ("prefix_tokens", "constraints"):  # per-row tensors follow their rows
                if kwargs.get(key) is not None:
                    kwargs[key] = kwargs[key][keep]
            for row, hypos in zip(keep.tolist(), generate(models, sub, *args, **kwargs)):
                out[row] = hypos
        return out

    generator.generate = answered
    return generator


@register_search(
    "beam",
    summary="fairseq's own beam search (SequenceGenerator); --beam 1 is fairseq's greedy",
    capabilities=Capabilities(streaming=False),
)
def build_fairseq_beam(task: Any, models: Any, gen_cfg: Any, opts: Any, **fairseq_kwargs: Any) -> Any:
    # The stock FairseqTask implementation, explicitly: our tasks subclass it.
    generator = _count_decoder_calls(FairseqTask.build_generator(task, models, gen_cfg, **fairseq_kwargs))
    return _answer_empty_sources(generator, int(gen_cfg.nbest))
