"""The fairseq glue: the streaming task, the generator fairseq calls, its input and the hooks.

:mod:`~fairseq_stream.integration.compat` is the only module that patches fairseq; the others
use fairseq's public classes and the plain helpers of :mod:`~fairseq_stream.integration.cli`.
"""
