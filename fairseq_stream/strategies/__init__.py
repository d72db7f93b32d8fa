"""Decoding strategies; importing this package registers each under its ``--search`` name."""
from fairseq_stream.strategies import fairseq_beam, ib_beam, jacobi, lookahead, speculative, streaming_beam  # noqa: F401
