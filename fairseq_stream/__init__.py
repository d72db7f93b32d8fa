"""fairseq-stream: fast NMT decoding strategies for fairseq, loaded with ``--user-dir fairseq_stream``.

Importing the package registers its ``--search`` strategies, tasks and models with fairseq and
installs the hooks of :mod:`fairseq_stream.integration.compat` (the checkpoint allow-list for
``torch.load(weights_only=True)``, ``--task translation`` routed to the streaming-aware task,
our options in fairseq's ``--help``; one-line user errors only under fairseq's command-line
tools). It prints nothing.
"""
from fairseq_stream import strategies  # noqa: F401  (registers --search names; before options)
from fairseq_stream.integration import compat
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ib import model, task  # noqa: F401  (registers transformer_ib, translation_ib)
from fairseq_stream.integration import task as _stream_task  # noqa: F401  (registers translation_stream)

__version__ = "0.1.0"
__all__ = ["FairseqStreamError", "__version__"]

compat.install()
