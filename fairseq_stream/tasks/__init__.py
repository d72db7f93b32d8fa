"""fairseq tasks of the package (fairseq imports this folder itself for ``--user-dir``)."""
from fairseq_stream.tasks import translation_ib, translation_stream  # noqa: F401
