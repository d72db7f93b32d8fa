"""``python -m fairseq_stream``: list the ``--search`` strategies with one line each."""
import fairseq_stream  # noqa: F401  (registers every strategy)
from fairseq_stream.search.registry import get_search, search_names

for name in search_names():
    print(f"{name:16s} {get_search(name).summary}")
