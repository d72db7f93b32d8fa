#!/usr/bin/env python
"""One-off experiment: how many beam steps one verification of draft proposals could advance (issue 83, item 1; 2026-12-05).

    OMP_NUM_THREADS=1 python scripts/experiments/speculative_beam_study.py --model user_dir_examples/demo \\
        --model ~/.cache/fairseq_stream/zoo/en-es-3x3-sep7k5k --limit 60 --beams 4,5

For each model folder (as ``python -m fairseq_stream.tools.user_bench`` takes it: the zoo's layout, with its
``draft.pt``) and each beam size k, the first ``--limit`` test sentences are decoded by ``fixed-ours --beam k`` one
sentence at a time (true batch 1), and the live hypotheses of the beam after every step are recorded: ``B_t``, the
prefixes the next step expands. A speculative beam step verifies at ``B_t``: the draft proposes, from each root in
``B_t``, the paths of its top-``m`` tokens at every node down to depth γ (``m = 1``: one greedy continuation per
hypothesis; ``m > 1``: a tree), and one block step of the model scores every node. The beam then advances as long
as every hypothesis it keeps lies on a scored path: step ``t + 1`` always (the roots are scored), step ``t + 1 + j``
if every hypothesis of ``B_{t+1}``…``B_{t+j}`` is such a node, ``j <= γ``. A hypothesis of ``B_s`` is a node when
its last token is among the draft's top-``m`` at its parent (in ``B_{s-1}``) and its parent is a node or a root —
so one draft call per step over the beam (its top-``m`` at every live hypothesis) says it all, with no model of the
speculative search itself. Ended candidates waiting on the beam need no scores and are left out.

Printed per model and k: sentences, beam steps, the share of the beam's edges that are the draft's top-1 (its
acceptance on the beam), and for each (m, γ) the beam steps per verification (steps / verifications) and the rows
one verification scores (live hypotheses × nodes per root, mean): on a CPU a call costs about its rows once they
are many, so the method pays where steps per verification clearly exceed the rows' cost ratio of a block step to
a one-token step (docs/results.md, "Exact speculative beam search: the study").
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

Prefix = Tuple[int, ...]


def record_beams(session: Any, line: str, k: int) -> List[List[Prefix]]:
    """``B_0 .. B_T`` of one sentence under ``fixed-ours --beam k``: the live prefixes (tokens after BOS) after each step."""
    import torch

    from fairseq_stream.search import beam as beam_module

    beams: List[List[Prefix]] = [[()]]
    outcome = beam_module.BeamSearch._outcome

    def recording(self: Any, state: Any, result: Any, packet: Any, **kwargs: Any) -> Any:
        steps = int(state.steps[0])
        live = torch.isfinite(state.scores[0]) & ~state.ended[0]
        beams.append([tuple(state.tokens[0, j, :steps].tolist()) for j in range(state.scores.size(1)) if bool(live[j])])
        return outcome(self, state, result, packet, **kwargs)

    beam_module.BeamSearch._outcome = recording
    try:
        session.translate(session.encode([line]), search="fixed-ours", gen={"beam": k}, opts={"stream_capacity": 1})
    finally:
        beam_module.BeamSearch._outcome = outcome
    while beams and not beams[-1]:
        beams.pop()
    return beams


class Draft:
    """The draft's top-``m`` next tokens after given prefixes of one source sentence (full forwards, no cache)."""

    def __init__(self, model: Any, bos: int) -> None:
        self.model, self.bos = model, bos
        self.encoder_out: Any = None

    def source(self, src_tokens: Any) -> None:
        import torch

        with torch.no_grad():
            self.encoder_out = self.model.encoder(src_tokens.unsqueeze(0), src_lengths=torch.tensor([src_tokens.numel()]))

    def top(self, prefixes: Sequence[Prefix], m: int) -> List[List[int]]:
        import torch

        rows = torch.tensor([[self.bos, *p] for p in prefixes], dtype=torch.long)
        with torch.no_grad():
            enc = self.model.encoder.reorder_encoder_out(self.encoder_out, torch.zeros(len(prefixes), dtype=torch.long))
            logits, _ = self.model.decoder(rows, encoder_out=enc)
        return logits[:, -1].float().topk(m, dim=-1).indices.tolist()


def edge_levels(beams: List[List[Prefix]], draft: Draft, widths: Sequence[int]) -> Dict[int, List[bool]]:
    """m → for each level s ≥ 1, whether every hypothesis of ``B_s`` extends its parent by one of the draft's
    top-``m`` tokens there; and, under key 0, the share of edges that are the draft's top-1 (per level, as floats)."""
    most = max(widths)
    out: Dict[int, List[Any]] = {m: [] for m in widths}
    out[0] = []
    for s in range(1, len(beams)):
        parents = sorted({h[:-1] for h in beams[s]})
        top = dict(zip(parents, draft.top(parents, most)))
        for m in widths:
            out[m].append(all(h[-1] in top[h[:-1]][:m] for h in beams[s]))
        out[0].append(sum(h[-1] == top[h[:-1]][0] for h in beams[s]) / len(beams[s]))
    return out


def verifications(covered: List[bool], gamma: int) -> int:
    """Verifications a speculative beam needs for ``len(covered) + 1`` beam steps (module docstring)."""
    steps, t, count = len(covered) + 1, 0, 0  # covered[s - 1]: level s fully on scored paths
    while t < steps:
        j = 0
        while j < gamma and t + j < len(covered) and covered[t + j]:
            j += 1
        t += 1 + j
        count += 1
    return count


def nodes_per_root(m: int, gamma: int) -> int:
    """Scored positions per root: the root and its tree of top-``m`` paths of depth ``gamma``."""
    return sum(m ** d for d in range(gamma + 1))


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="a model folder with draft.pt (repeatable)")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--beams", default="4,5")
    parser.add_argument("--gammas", default="1,2,3,4")
    parser.add_argument("--widths", default="1,2,3", help="m, the draft's tokens per node (1: one path per root)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from fairseq_stream.integration.checkpoints import load_draft
    from fairseq_stream.tools.session import TranslationSession
    from fairseq_stream.tools.user_bench import load_model_dir, read_test

    beams_k = [int(k) for k in args.beams.split(",")]
    gammas = [int(g) for g in args.gammas.split(",")]
    widths = [int(m) for m in args.widths.split(",")]
    print("| model | k | sentences | beam steps | draft top-1 on the beam's edges | m | γ | beam steps per verification "
          "| rows per verification |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in args.model:
        model = load_model_dir(path)
        if model.draft is None:
            raise SystemExit(f"{path}: no draft.pt")
        session = TranslationSession.load(path, model.file("checkpoint.pt"), bpe_codes=model.file("bpe.codes"),
                                          extra_args=["--source-lang", model.source_lang, "--target-lang",
                                                      model.target_lang])
        draft_model = load_draft(model.draft, session.task)[0].eval()
        draft = Draft(draft_model, session.task.target_dictionary.eos())
        sources, _ = read_test(model, args.limit)
        data = session.encode(sources)
        for k in beams_k:
            levels: List[Dict[int, List[Any]]] = []
            rows_live: List[int] = []
            for i, line in enumerate(sources):
                beams = record_beams(session, line, k)
                draft.source(data[i]["source"])
                levels.append(edge_levels(beams, draft, widths))
                rows_live.extend(len(b) for b in beams[:-1] or beams)
            steps = sum(len(lv[widths[0]]) + 1 for lv in levels)
            top1 = [x for lv in levels for x in lv[0]]
            live = sum(rows_live) / len(rows_live)
            for m in widths:
                for gamma in gammas:
                    count = sum(verifications(lv[m], gamma) for lv in levels)
                    print(f"| {model.name} | {k} | {len(sources)} | {steps} | {sum(top1) / max(len(top1), 1):.2f} | {m} "
                          f"| {gamma} | {steps / count:.2f} | {live * nodes_per_root(m, gamma):.0f} |", flush=True)


if __name__ == "__main__":
    main()
