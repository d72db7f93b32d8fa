"""Layer 1, kernels and their dispatch: the C++ and Triton operators, the step backends that choose
between them (:mod:`~fairseq_stream.ops.backends`), the packets the host reads, the pruning
primitives the fused beam step runs, the kernel halves of the output layer and of int8.

Imports nothing of the package but :mod:`fairseq_stream.errors`.
"""
