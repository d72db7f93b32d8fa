"""Layer 3, the strategy API and every strategy: the interface and typed state, the registry, score
edits and the output scorer, the beams, Jacobi, speculative, lookahead, ib-beam and the IB target order.

Importing this package registers each strategy under its ``--search`` name. A new strategy is one
module here with a ``@register_search`` class, plus its import below (docs/contributing.md,
"A strategy"; the contract: docs/architecture.md, "The strategy contract"). ``--search beam`` (fairseq's own generator) is fairseq glue:
:mod:`fairseq_stream.integration.fairseq_beam`.
"""
from fairseq_stream.search import ib_beam, jacobi, lookahead, speculative, speculative_beam, streaming_beam  # noqa: F401
