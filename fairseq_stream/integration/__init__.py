"""Layer 5, the fairseq glue: the tasks (the streaming one and the IBDecoder's), the IBDecoder model,
the builder and the generator fairseq calls, ``--search beam``, ``--prune-auto``, checkpoints and
their allow-list, the input fairseq hands over, text.

:mod:`~fairseq_stream.integration.compat` is the only module that patches fairseq; the others
use fairseq's public classes and the plain helpers of :mod:`~fairseq_stream.integration.cli`.
"""
