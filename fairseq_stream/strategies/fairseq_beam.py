"""``--search beam``: fairseq's own ``SequenceGenerator``, unchanged — the baseline.

The generator gets a ``stats`` attribute (:class:`~fairseq_stream.stats.DecodeStats`) filled by
counting its decoder calls, so the benchmark tables show fairseq's timesteps and candidate
expansions beside ours. The counting wraps the generator's own ensemble object only.
"""
from __future__ import annotations

import functools
from typing import Any

from fairseq.tasks import FairseqTask

from fairseq_stream.registry import Capabilities, register_search
from fairseq_stream.stats import DecodeStats


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


@register_search(
    "beam",
    summary="fairseq's own beam search (SequenceGenerator); --beam 1 is fairseq's greedy",
    capabilities=Capabilities(streaming=False),
)
def build_fairseq_beam(task: Any, models: Any, gen_cfg: Any, opts: Any, **fairseq_kwargs: Any) -> Any:
    # The stock FairseqTask implementation, explicitly: our tasks subclass it.
    return _count_decoder_calls(FairseqTask.build_generator(task, models, gen_cfg, **fairseq_kwargs))
