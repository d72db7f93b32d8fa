#!/usr/bin/env python
"""Micro-benchmark of the output layer plus one search step: fused (Hoang2018 §3.1) vs fairseq's path.

For every cell (vocabulary V, beam k, batch b) it times, per decoding step and in
milliseconds (median of ``--repeats`` timed runs after warm-up):

* **fairseq**: multiplication ``h·Wᵀ``, bias, ``log_softmax`` over the vocabulary, and the
  search step of ``fairseq.search.BeamSearch`` (add the hypothesis scores, top-2k over
  beam × vocabulary) — the split of Hoang2018 Tables 2–3;
* **fused**: the same multiplication with the bias fused in (``addmm``), then per row the
  top-2k raw scores and the normaliser in one call of the op the strategies use
  (:func:`fairseq_stream.ops.fused_output.topk_with_normaliser`: the C++ kernel on CPU where it
  builds), the winners normalised, and the global top-2k over the rows' winners; for beam 1 the
  arg-max of Algorithm 3 plus the winner's normaliser. ``fused rest (torch)`` is the same with
  plain PyTorch ``topk`` + ``logsumexp``, the fallback path.

``post-mult ratio`` = (fused time after the multiplication) / (fairseq's bias + softmax +
search): the paper reached 0.43 at beam 5. ``--end-to-end`` adds the effect on the demo model
(``--output-layer fused`` vs ``full`` under the benchmark harness).

    python scripts/bench/bench_output_layer.py --threads 2

The cells time one operator call each (a micro-benchmark, its own loop); ``--end-to-end`` decodes
through the harness (``fairseq_stream.tools.bench.run_benchmark``), the one benchmarking entry point.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fairseq_stream.ops import fused_output  # noqa: E402
from fairseq_stream.ops.fused_output import cpu_kernel, reference_topk_lse, topk_with_normaliser  # noqa: E402


DEVICE = torch.device("cpu")
DTYPE = torch.float32  # the timed cells' dtype (--dtype); the equality check runs in float32


def _sync() -> None:
    if DEVICE.type == "cuda":  # kernels run asynchronously: time what the GPU did
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], repeats: int) -> float:
    for _ in range(3):  # warm-up (on CUDA: Triton's compile and the measured choice) outside the timed region
        fn()
    samples = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        fn()
        _sync()
        samples.append(time.perf_counter() - start)
    return 1000 * statistics.median(samples)


def cell(vocab: int, beam: int, batch: int, dim: int, repeats: int) -> Dict[str, Any]:
    torch.manual_seed(0)
    rows = batch * beam
    h = torch.randn(rows, dim, device=DEVICE).to(DTYPE)
    weight = (torch.randn(vocab, dim, device=DEVICE) / dim ** 0.5).to(DTYPE)
    bias = (torch.randn(vocab, device=DEVICE) * 0.1).to(DTYPE)
    scores = torch.randn(batch, beam, device=DEVICE).cumsum(1).neg().to(DTYPE)  # hypothesis scores, best first
    cand = min(2 * beam, vocab)

    logits = F.linear(h, weight)
    biased = logits + bias
    lprobs = torch.log_softmax(biased, dim=-1)

    def fs_search():
        total = lprobs.view(batch, beam, vocab) + scores.unsqueeze(-1)
        return torch.topk(total.view(batch, -1), k=cand)

    out = {
        "fairseq mult": timed(lambda: F.linear(h, weight), repeats),
        "fairseq bias": timed(lambda: logits + bias, repeats),
        "fairseq softmax": timed(lambda: torch.log_softmax(biased, dim=-1), repeats),
        "fairseq search": timed(fs_search, repeats),
        "fused mult+bias": timed(lambda: torch.addmm(bias, h, weight.t()), repeats),
    }

    def fused_rest(op):
        vals, idx, lse = op(biased, 1 if beam == 1 else cand)  # per-row top-2k on raw scores + normaliser
        lp = vals - lse.unsqueeze(-1)
        if beam == 1:  # Algorithm 3: the arg-max, only the winner normalised
            return lp, idx
        total = (lp.view(batch, beam, cand) + scores.unsqueeze(-1)).view(batch, -1)
        return torch.topk(total, k=cand)

    fused_output.take_cuda_kernels()
    out["fused rest"] = timed(lambda: fused_rest(topk_with_normaliser), repeats)
    out["kernel"] = ",".join(fused_output.take_cuda_kernels()) or ("cpp" if cpu_kernel() is not None else "torch")
    out["fused rest (torch)"] = timed(lambda: fused_rest(reference_topk_lse), repeats)
    if DEVICE.type == "cuda":  # every candidate the measured choice picks from, timed alone
        for name, op in fused_output.cuda_candidates().items():
            if name != "triton" or cand <= fused_output.UNROLLED_MAX_K:  # as the measured choice: no unrolled k = 100
                out[f"rest {name}"] = timed(lambda: fused_rest(op), repeats)
    fs_post = out["fairseq bias"] + out["fairseq softmax"] + out["fairseq search"]
    out["fairseq total"] = out["fairseq mult"] + fs_post
    out["fused total"] = out["fused mult+bias"] + out["fused rest"]
    out["post-mult ratio"] = out["fused rest"] / fs_post
    out["step ratio"] = out["fused total"] / out["fairseq total"]
    return out


def check_equal(vocab: int, beam: int, batch: int, dim: int) -> None:
    """The fused winners are fairseq's (same ids, scores to float tolerance)."""
    torch.manual_seed(1)
    h, w, b = (torch.randn(batch * beam, dim, device=DEVICE), torch.randn(vocab, dim, device=DEVICE) / dim ** 0.5,
               torch.randn(vocab, device=DEVICE) * 0.1)
    logits = torch.addmm(b, h, w.t())
    ref = torch.log_softmax(logits, -1)
    ref_v, ref_i = ref.topk(min(2 * beam, vocab), -1)
    v, i, lse = topk_with_normaliser(logits, min(2 * beam, vocab))
    torch.testing.assert_close(v - lse.unsqueeze(-1), ref_v, rtol=1e-5, atol=1e-5)
    # ids equal up to near-ties (random scores at V = 32k have some 1e-6 apart)
    torch.testing.assert_close(ref.gather(1, i), ref_v, rtol=1e-5, atol=1e-5)
    assert (i == ref_i).float().mean() > 0.99


def end_to_end(threads: int, limit: int, repeats: int) -> str:
    from fairseq_stream.tools.bench import DEMO_DIR, RunSpec, format_table, run_benchmark
    from fairseq_stream.tools.session import TranslationSession

    demo = Path(DEMO_DIR)
    session = TranslationSession.load(str(demo), str(demo / "checkpoint.pt"), bpe_codes=str(demo / "bpe.codes"),
                                      extra_args=["--source-lang", "es", "--target-lang", "en"])
    sources = (demo / "test.es").read_text(encoding="utf-8").splitlines()[:limit]
    refs = (demo / "test.en").read_text(encoding="utf-8").splitlines()[:limit]
    runs = []
    for k in (5, 50):
        for layer in ("full", "fused"):
            runs.append(RunSpec(f"fixed-ours k={k} {layer}", "fixed-ours", gen={"beam": k},
                                opts={"output_layer": layer}))
    rows = run_benchmark(session, sources, refs, runs, repeats=repeats, progress=False, log=lambda m: None)
    return format_table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, nargs="+", default=[8000, 32000])
    parser.add_argument("--beam", type=int, nargs="+", default=[1, 5, 50])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: time the GPU path (synchronised, after warm-up)")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32",
                        help="the timed cells' dtype (the half types are meant for GPUs)")
    parser.add_argument("--end-to-end", type=int, default=0, metavar="N", help="also decode N demo sentences")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    global DEVICE, DTYPE
    DTYPE = getattr(torch, args.dtype)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_output_layer.py: error: --device cuda: torch sees no GPU")
    DEVICE = torch.device(args.device)
    if DEVICE.type == "cuda":
        kernel = ("Triton kernels or PyTorch's topk + logsumexp, whichever measures faster per (V, rows, k); "
                  "the choice is logged (CUDA)")
    else:
        kernel = "C++ kernel" if cpu_kernel() is not None else "PyTorch ops (no kernel)"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.dtype}, d = {args.dim}, fused op: {kernel}; "
          "milliseconds per step\n")
    head = ["V", "beam", "batch", "fairseq mult", "bias", "softmax", "search", "fused mult+bias", "fused rest",
            "fused rest (torch)", "post-mult ratio", "fairseq step", "fused step", "step ratio", "kernel"]
    per_candidate: List[str] = []
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for vocab in args.vocab:
        for beam in args.beam:
            for batch in args.batch:
                check_equal(vocab, beam, batch, args.dim)
                r = cell(vocab, beam, batch, args.dim, args.repeats)
                vals = [r["fairseq mult"], r["fairseq bias"], r["fairseq softmax"], r["fairseq search"],
                        r["fused mult+bias"], r["fused rest"], r["fused rest (torch)"]]
                print(f"| {vocab} | {beam} | {batch} | " + " | ".join(f"{v:.3f}" for v in vals)
                      + f" | {r['post-mult ratio']:.2f} | {r['fairseq total']:.3f} | {r['fused total']:.3f}"
                      + f" | {r['step ratio']:.2f} | {r['kernel']} |", flush=True)
                times = [f"{name[5:]} {t:.3f}" for name, t in r.items() if name.startswith("rest ")]
                if times:
                    per_candidate.append(f"| {vocab} | {beam} | {batch} | " + ", ".join(times) + f" | {r['kernel']} |")
    if per_candidate:
        print("\nFused rest with each CUDA candidate alone (ms per step) and the measured choice:\n")
        print("| V | beam | batch | candidates | chosen |\n|---|---|---|---|---|\n" + "\n".join(per_candidate))
    if args.end_to_end:
        print(f"\nEnd to end on the demo model ({args.end_to_end} sentences):\n")
        print(end_to_end(torch.get_num_threads(), args.end_to_end, 3))


if __name__ == "__main__":
    main()
