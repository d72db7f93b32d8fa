"""Layer 2, the only code that runs weights: the block-incremental decoder step and its row caches,
the encoder, the static step (:mod:`fairseq_stream.model.static`: buckets, slabs, CUDA graphs), the
native step, quantised and oneDNN linears, the encoder slots, the ensemble and
:class:`~fairseq_stream.model.model_step.ModelStep`, the one caller of the models.

Imports only :mod:`fairseq_stream.ops` below it.
"""
