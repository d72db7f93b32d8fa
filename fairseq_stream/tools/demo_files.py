"""Where the demo model, BPE codes, dictionaries and held-out sample are found.

In a checkout they are ``user_dir_examples/demo/``. ``pip install`` (``scripts/install.sh``)
copies the same files, once, to ``<prefix>/share/fairseq-stream/demo/`` (setup.py
``data_files``), so ``fairseq-stream-demo``, ``fairseq-stream-bench`` and
``fairseq-stream-ddgviz`` work from any directory. ``FAIRSEQ_STREAM_DEMO_DIR`` overrides both;
``python -m fairseq_stream.tools.demo_files`` prints the folder.
"""
from __future__ import annotations

import os
import sys
from typing import List

from fairseq_stream.errors import FairseqStreamError

ENV_VAR = "FAIRSEQ_STREAM_DEMO_DIR"
# the checkout: fairseq_stream/tools/demo_files.py → three levels up (the GPU run found two: the
# package folder, so a checkout without an install had no demo)
_REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def candidates() -> List[str]:
    """The places searched, in order."""
    found = [os.environ[ENV_VAR]] if os.environ.get(ENV_VAR) else []
    found.append(os.path.join(_REPO_DIR, "user_dir_examples", "demo"))
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        found.append(os.path.join(prefix, "share", "fairseq-stream", "demo"))
    return found


def find_demo_dir() -> str:
    """``$FAIRSEQ_STREAM_DEMO_DIR`` if set, else the first candidate holding the demo checkpoint."""
    places = candidates()
    if os.environ.get(ENV_VAR):
        return places[0]  # the user's choice, even when wrong: require_demo_dir then says so
    for place in places:
        if os.path.isfile(os.path.join(place, "checkpoint.pt")):
            return place
    return places[0]


def require_demo_dir(demo_dir: str) -> str:
    """``demo_dir`` if it holds the demo files, else a one-line error saying what to pass."""
    if os.path.isfile(os.path.join(demo_dir, "checkpoint.pt")):
        return demo_dir
    raise FairseqStreamError(
        f"the demo files (checkpoint.pt, dictionaries, bpe.codes, test.es/en) are not in {demo_dir!r}; "
        f"set {ENV_VAR} to a copy of user_dir_examples/demo (fairseq-stream-bench and fairseq-stream-ddgviz also take --data, --path and --bpe-codes)"
    )


DEMO_DIR = find_demo_dir()


if __name__ == "__main__":  # DEMO=$(python -m fairseq_stream.tools.demo_files)
    print(require_demo_dir(DEMO_DIR))
