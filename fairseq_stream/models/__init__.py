"""fairseq models of the package (fairseq imports this folder itself for ``--user-dir``)."""
