"""The old path of :mod:`fairseq_stream.ops.quantize`, kept so that callers outside the package still import it.

The module moved to ``ops/``: the decoder step (``ops/transformer_step.py``) uses it, and ops imports
nothing above it. This name is the very same module object (a monkeypatch on either path acts on both).
"""
import sys

from fairseq_stream.ops import quantize as _moved

sys.modules[__name__] = _moved
