"""Average the parameters of several fairseq checkpoints (the "average the last 5 checkpoints" step).

    python -m fairseq_stream.tools.average_checkpoints --inputs a.pt b.pt c.pt --output avg.pt
    python -m fairseq_stream.tools.average_checkpoints --dir checkpoints/ --last 5 --output avg.pt

Loads with the safe allow-list of :mod:`fairseq_stream.integration.compat` (no pickled code) and keeps
the first checkpoint's configuration; the optimizer state is dropped.
"""
from __future__ import annotations

import argparse
import glob
import os
import pickle
import re
from typing import Any, Dict, List

import torch

from fairseq_stream.integration.checkpoints import register_safe_globals
from fairseq_stream.errors import FairseqStreamError, unpickling_problem


def last_checkpoints(directory: str, n: int) -> List[str]:
    """The ``n`` most recent ``checkpoint_*_UPDATES.pt`` or ``checkpointEPOCH.pt`` files."""
    found = []
    for path in glob.glob(os.path.join(directory, "checkpoint*.pt")):
        m = re.search(r"checkpoint(?:_\d+)?_(\d+)\.pt$", path) or re.search(r"checkpoint(\d+)\.pt$", path)
        if m:
            found.append((int(m.group(1)), path))
    if len(found) < n:
        raise FairseqStreamError(f"{directory} has {len(found)} numbered checkpoints, --last {n} needs {n}")
    return [p for _, p in sorted(found)[-n:]]


def load_state(path: str) -> Dict[str, Any]:
    """``torch.load`` under the allow-list, with one-line errors for missing, unsafe or corrupt files."""
    if not os.path.isfile(path):
        raise FairseqStreamError(f"checkpoint {path!r} not found (check --inputs or --dir)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise FairseqStreamError(f"{path}: {unpickling_problem(exc) or exc}") from None
    except Exception as exc:  # noqa: BLE001  torch's zip reader, a truncated file, garbage pickle data
        raise FairseqStreamError(f"{path}: could not read the checkpoint ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}); the file is corrupt, "
                                 "truncated or not a torch checkpoint") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise FairseqStreamError(f"{path} is not a fairseq checkpoint (no 'model' parameters)")
    return state


def average(paths: List[str], output: str) -> None:
    register_safe_globals()
    total = None
    first = None
    for path in paths:
        state = load_state(path)
        params = state["model"]
        if total is None:
            first = state
            total = {k: v.double().clone() if v.is_floating_point() else v for k, v in params.items()}
        else:
            for k, v in params.items():
                if v.is_floating_point():
                    total[k] += v.double()
    averaged = {k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v for k, v in total.items()}
    first["model"] = averaged
    first["last_optimizer_state"] = None
    torch.save(first, output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", nargs="*", default=[])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--last", type=int, default=5)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    from fairseq_stream.integration.compat import install_excepthook

    install_excepthook()
    paths = args.inputs or (last_checkpoints(args.dir, args.last) if args.dir else [])
    if not paths:
        raise FairseqStreamError("give --inputs or --dir")
    average(paths, args.output)
    print(f"averaged {len(paths)} checkpoints into {args.output}")


if __name__ == "__main__":
    main()
