"""fairseq models of the package (fairseq imports this folder itself for ``--user-dir``)."""
from fairseq_stream.models import transformer_ib  # noqa: F401
