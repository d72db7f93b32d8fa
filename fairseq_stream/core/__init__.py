"""The engine: strategy interface, typed state, the streaming scheduler, the model step, options and validation.

Nothing here patches fairseq; strategies (:mod:`fairseq_stream.strategies`) and fused step
operators (:mod:`fairseq_stream.ops`) plug into it.
"""
