"""fairseq-stream: fast NMT decoding strategies for fairseq, loaded with ``--user-dir fairseq_stream``.

Importing the package registers its ``--search`` strategies, tasks and models with fairseq,
allow-lists the plain-data classes fairseq checkpoints need for ``torch.load(weights_only=True)``,
routes ``--task translation`` to the streaming-aware task (see :mod:`fairseq_stream.cli_hook`)
and makes user errors print as one line. It prints nothing.
"""
from fairseq_stream import strategies  # noqa: F401  (registers --search names; before options)
from fairseq_stream.checkpoint import register_safe_globals
from fairseq_stream.cli_hook import exit_nonzero_after_skipped_lines, route_translation_task, show_options_in_help
from fairseq_stream.errors import FairseqStreamError, install_excepthook
from fairseq_stream import models, tasks  # noqa: F401

__version__ = "0.1.0"
__all__ = ["FairseqStreamError", "__version__"]

register_safe_globals()
route_translation_task()
show_options_in_help()
exit_nonzero_after_skipped_lines()
install_excepthook()
