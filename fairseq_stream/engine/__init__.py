"""Layer 4, running a decode: the streaming scheduler, the input stream, the run's options and their
one validation, statistics and profiling. Nothing here patches fairseq; strategies
(:mod:`fairseq_stream.search`) and models (:mod:`fairseq_stream.model`) plug into it.
"""
