"""The kernel half of ``--step-mode native``: a whole eager decoder step as one C++ operator.

``csrc/decoder_step.cpp`` registers ``torch.ops.fairseq_stream.decoder_step``, the class
``torch.classes.fairseq_stream.NativeDecoder`` (a model's weights, collected once by
:mod:`fairseq_stream.model.native_decoder`) and ``decoder_greedy`` (a loop of steps, each fed the last
one's arg-max: a speculative draft's proposal in one call). The operator makes the aten calls of the
eager step (:mod:`fairseq_stream.model.block_decoder`) in its order, so it computes the same bits; it calls
the attention and int8 operators through the dispatcher, so their kernels must be loaded first.
"""
from __future__ import annotations

from typing import Any

from fairseq_stream.ops import decode_attention, extension

#: No arithmetic of its own: the flags of the exact step operators.
KERNEL_FLAGS = extension.EXACT_FLAGS
_SOURCE = "decoder_step.cpp"


def kernel() -> Any:
    """The built module (its operator and class registered), or None where it cannot be built
    (or where the attention kernel it calls cannot)."""
    if decode_attention.cpu_kernel() is None:
        return None
    return extension.load(_SOURCE, KERNEL_FLAGS, "native-step")


def failure() -> str:
    """Why :func:`kernel` returned None."""
    for source in (decode_attention._SOURCE, _SOURCE):
        if source in extension.failures:
            return f"kernel {source}: {extension.failures[source]}"
    return "FAIRSEQ_STREAM_NO_KERNEL is set" if extension.disabled() else "not built"
