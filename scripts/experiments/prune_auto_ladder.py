"""The search error --prune-auto measures for every rung of its ladder, on its calibration sample.

The calibration stops at the first rung within the tolerance; this walks the whole ladder
(tolerance 0) on the same 32 sentences a run of the frontier tool calibrates on (the first the
engine sees, in batches of ``--batch-size``), and prints one JSON line per ``k``: the mean loss of
the best hypothesis's length-normalised score against the fixed beam's, the sentences whose best
hypothesis changed, and the expansions against the fixed beam's. docs/results.md sets these beside
the BLEU change of the same settings over the whole input (does the reference-free loss track BLEU?).

    python scripts/experiments/prune_auto_ladder.py --path CHECKPOINT --data DATA_DIR --bpe-codes CODES \\
        --model "300 updates" --limit 300 --beam 5 50
"""
import argparse
import json
import os

import torch

from fairseq_stream.integration.prune_auto import sample_size, select_rows
from fairseq_stream.tools.demo_files import find_demo_dir
from fairseq_stream.tools.session import TranslationSession

DEMO = find_demo_dir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", default=os.path.join(DEMO, "checkpoint.pt"))
    parser.add_argument("--data", default=DEMO, help="directory with dict.es.txt and dict.en.txt")
    parser.add_argument("--bpe-codes", default=os.path.join(DEMO, "bpe.codes"))
    parser.add_argument("--src", default=os.path.join(DEMO, "test.es"))
    parser.add_argument("--model", default="model")
    parser.add_argument("--limit", type=int, default=300, help="the input's first N sentences (the sample's size follows it)")
    parser.add_argument("--beam", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--batch-size", type=int, default=64, help="as the frontier tool's")
    args = parser.parse_args()
    torch.set_num_threads(1)
    session = TranslationSession.load(args.data, args.path, bpe_codes=args.bpe_codes,
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    with open(args.src, encoding="utf-8") as f:
        dataset = session.encode(f.read().splitlines()[: args.limit])
    size = sample_size(len(dataset))
    for k in args.beam:
        generator = session.build_generator("var-stream", {"beam": k}, {"prune_auto": True, "prune_auto_tolerance": 0.0})
        calibration = generator.calibration
        with torch.no_grad():
            for batch in session.batches(dataset, None, args.batch_size, None):
                rows = min(size - calibration.taken, batch["id"].numel())
                calibration.decode(session.models, select_rows(batch, range(rows)), None)
                if calibration.taken >= size:
                    break
            choice = calibration.choose(session.models, None)
        print(json.dumps({"model": args.model, "k": k, **choice.as_dict()}, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
