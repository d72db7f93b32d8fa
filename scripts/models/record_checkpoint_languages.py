#!/usr/bin/env python
"""Record the language pair in a fairseq checkpoint that records none (in place).

The shipped demo checkpoint was exported before the export recorded its languages, so the
direction check could not refuse ``--source-lang en --target-lang es`` on it (fluent garbage).
This writes ``source_lang``/``target_lang`` into its model and task configuration; the weights
and everything else are saved unchanged (the file keeps its size)::

    python scripts/models/record_checkpoint_languages.py user_dir_examples/demo/checkpoint.pt es en
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from fairseq_stream.integration.checkpoints import register_safe_globals  # noqa: E402
from fairseq_stream.tools.checkpoint import record_languages  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("source_lang")
    parser.add_argument("target_lang")
    args = parser.parse_args()
    register_safe_globals()
    before = os.path.getsize(args.checkpoint)
    state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    record_languages(state, args.source_lang, args.target_lang)
    torch.save(state, args.checkpoint)
    print(f"{args.checkpoint}: {args.source_lang}→{args.target_lang} recorded "
          f"({before} → {os.path.getsize(args.checkpoint)} bytes)")


if __name__ == "__main__":
    main()
