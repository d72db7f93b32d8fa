"""fairseq-stream: fast NMT decoding strategies for fairseq, loaded with ``--user-dir fairseq_stream``.

Importing the package registers its ``--search`` strategies, tasks and models with fairseq and
installs the hooks of :mod:`fairseq_stream.integration.compat` (the checkpoint allow-list for
``torch.load(weights_only=True)``, ``--task translation`` routed to the streaming-aware task,
our options in fairseq's ``--help``; one-line user errors only under fairseq's command-line
tools). It prints nothing, and silences known third-party noise
(:mod:`fairseq_stream.integration.quiet`).
"""
from fairseq_stream.integration.quiet import silence_known_noise

silence_known_noise()  # before fairseq is imported: its import already logs

# Registration, in this order: every --search name before engine/options.py lists them in its help.
from fairseq_stream import search  # noqa: E402,F401  (registers the strategies of search/)
from fairseq_stream.integration import fairseq_beam  # noqa: E402,F401  (registers --search beam: fairseq's own)
from fairseq_stream.integration import compat  # noqa: E402
from fairseq_stream.errors import FairseqStreamError  # noqa: E402
from fairseq_stream.integration import ib_model, ib_task  # noqa: E402,F401  (registers transformer_ib, translation_ib)
from fairseq_stream.integration import task  # noqa: E402,F401  (registers translation_stream)

__version__ = "0.1.0"
__all__ = ["FairseqStreamError", "__version__"]

compat.install()
