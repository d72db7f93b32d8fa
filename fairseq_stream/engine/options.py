"""Decoding options of fairseq-stream, shared by every task of the package.

They are fields of the task's dataclass config because fairseq rebuilds
``cfg.generation`` from ``GenerationConfig`` alone: an extra generation flag survives only as
a task field (fairseq's ``--task`` config is the only place besides ``GenerationConfig`` that
fairseq-generate and fairseq-interactive parse and keep). This module only declares them; they
are checked in :mod:`fairseq_stream.engine.validation`.
"""
from dataclasses import dataclass, field
from typing import Optional

from fairseq.dataclass import FairseqDataclass

from fairseq_stream.search.defaults import (
    DEFAULT_ABS_SCALE, DEFAULT_ABS_THRESHOLD, DEFAULT_ABS_THRESHOLD_PER_DECADE, DEFAULT_FINALIZE, DEFAULT_MAX_CANDS_PER_NODE, PRUNE_AUTO_BUDGET,
    PRUNE_AUTO_START, PRUNE_AUTO_TOLERANCE, default_abs_threshold, prune_auto_arg,
)
from fairseq_stream.ops.pruning import DEFAULT_REFERENCE
from fairseq_stream.search.registry import epsilon_defaults_help, search_names


def prune_auto_cli(text: str) -> str:
    """``--prune-auto``'s argparse type: :func:`prune_auto_arg`, with an empty value refused. An empty
    value reads as "not given" in the API, but ``--prune-auto ''`` was stored as the string 'None' and
    refused later as "got 'None'"."""
    if not str(text).strip():
        import argparse  # only where a command line is parsed

        raise argparse.ArgumentTypeError(f"got an empty value ({text!r}); give 'on' or 'off' (or the bare "
                                         "--prune-auto, meaning on), or leave the option out for the default")
    return prune_auto_arg(text)


#: --stream-capacity when not given: sentences in flight per device. On a CPU 64 (Yang2020's n). On
#: CUDA a step costs about the same at any width, so fuller steps win: measured on an H200 (the GPU
#: check of 2026-11-26, --step-mode graph, demo model, 200 sentences), var-stream k = 5 took 0.23x
#: fairseq's beam at 256 sentences against 0.32x at 128 (float16; float32 0.28x / 0.36x), while
#: k = 50 was measured at 64. So on CUDA: 1280 candidates, between 64 and 256 sentences.
CPU_CAPACITY = 64
CUDA_CANDIDATES, CUDA_MIN_CAPACITY, CUDA_MAX_CAPACITY = 1280, 64, 256


def default_capacity(beam: int, on_cuda: bool) -> int:
    """Sentences in flight when --stream-capacity is not given (see :data:`CPU_CAPACITY`)."""
    if not on_cuda:
        return CPU_CAPACITY
    return min(CUDA_MAX_CAPACITY, max(CUDA_MIN_CAPACITY, CUDA_CANDIDATES // max(1, beam)))


#: --stream-input-order: fairseq's length-sorted order, or the input's own (Hoang2018 measures
#: top-up batching without maxi-batch sorting).
INPUT_ORDERS = ("sorted", "as-given")


@dataclass
class StreamDecodingConfig(FairseqDataclass):
    search: str = field(
        default="beam",
        metadata={
            "help": "decoding strategy of fairseq-stream, one of: "
            + ", ".join(search_names())
            + " ('beam' is fairseq's own beam search; 'python -m fairseq_stream' describes each)"
        },
    )
    # ---- the streaming scheduler (Yang2020 Algorithm 1; Hoang2018 Algorithms 5-6) ----
    stream_epsilon: Optional[float] = field(
        default=None,
        metadata={"help": "refill threshold ε in [0, 1): new sentences join when the sentences in "
                  "flight drop to ε·capacity (0 = plain batches); default " + epsilon_defaults_help() + " (Yang2020: 1/6; "
                  "Hoang2018: 1/2); the other strategies decode plain batches"},
    )
    stream_capacity: Optional[int] = field(
        default=None,
        metadata={"help": "sentences in flight at once (the batch size n of Yang2020); fairseq's "
                  "--batch-size/--max-tokens only set how the input is read (one stream runs over all of it); "
                  "default 64 on a CPU, on CUDA 1280 // --beam between 64 and 256 (fuller steps win there)"},
    )
    stream_max_candidates: int = field(
        default=0,
        metadata={"help": "bound the live candidates (total beam width) in flight instead of the "
                  "sentences (Yang2020 §3, §4.2); 0 = off"},
    )
    stream_oversubscribe: bool = field(
        default=False,
        metadata={"help": "with --stream-max-candidates C: keep --stream-capacity sentences in flight (their "
                  "encoder states and beams cached) and expand at most C candidates per step, the shortest "
                  "beams first, the others waiting a step (Yang2020 §3 over-subscription); steps stay full "
                  "while beams narrow"},
    )
    stream_max_wait: int = field(
        default=0,
        metadata={"help": "latency bound: stop refilling while a sentence has been in flight for more "
                  "than this many steps (Yang2020 footnote 3); 0 = off"},
    )
    stream_per_batch: bool = field(
        default=False,
        metadata={"help": "stream each fairseq batch on its own (the stream drains at every batch's end) "
                  "instead of over the whole input; for comparisons"},
    )
    stream_input_order: str = field(
        default="sorted",
        metadata={"help": "the order sentences are read in, for every --search: 'sorted' (fairseq's: by length, "
                  "so batches hold sentences of similar length) or 'as-given' (the input file's order, no "
                  "length sorting: Hoang2018 reports top-up batching without maxi-batch sorting); the output "
                  "order is the same either way (fairseq prints sentence ids)"},
    )
    stream_stats: Optional[str] = field(
        default=None,
        metadata={"help": "write the run's statistics (and the per-step active batch trace) as JSON here; checked before "
                          "the first decode (never a checkpoint, a data file, --input, the results file or stdout's "
                          "file) and written whole or not at all"},
    )
    # ---- beam search heuristics (Freitag2017 §3; Yang2020 §4) ----
    prune_abs_threshold: Optional[float] = field(
        default=None,
        metadata={"help": "absolute threshold δ (ap): prune candidates scoring ≤ best − δ in "
                  f"log-probability; the best may be a finished hypothesis (default {DEFAULT_ABS_THRESHOLD:g} for "
                  f"var-* at --beam <= 5, + {DEFAULT_ABS_THRESHOLD_PER_DECADE:g} for every tenfold k above: "
                  f"{default_abs_threshold(50):g} at 50" + ("" if DEFAULT_ABS_SCALE is None else
                                                           ", widened per sentence and step by --prune-abs-scale's default")
                  + "; given, it is fixed unless --prune-abs-scale is given too; inf = off)"},
    )
    prune_abs_scale: Optional[float] = field(
        default=None,
        metadata={"help": "α >= 0: scale δ per sentence and step to max(δ, α·ū), ū the best candidate's mean "
                  "per-token surprisal (nats), so an unsure (weak) model gets a wider beam; 0 = a fixed δ "
                  "(" + ("default: a fixed δ" if DEFAULT_ABS_SCALE is None else
                         f"default {DEFAULT_ABS_SCALE:g} for var-* when --prune-abs-threshold is not given, a fixed δ "
                         "when it is") +
                  "; each sentence's δ reads only its own candidates, so its output is the same in any batch, "
                  "stream or shard)"},
    )
    prune_final_per_token: Optional[float] = field(
        default=None,
        metadata={"help": "β >= 0 (with --prune-reference normalized): a finished hypothesis (its length-normalised "
                  "score scaled to the candidate's length) prunes a candidate only when it is better by more than "
                  "max(δ, β·length), β log-probability a token of the candidate, so long candidates are not cut by "
                  "short finished ones; against the beam's best candidate δ stays "
                  "(default: none; the C++ beam step has it with a fixed δ, other pairs run the reference step)"},
    )
    prune_max_cands_per_node: Optional[int] = field(
        default=None,
        metadata={"help": "max candidates per node M (mc): at most M expansions of one hypothesis "
                  f"(default {DEFAULT_MAX_CANDS_PER_NODE} for var-*; --beam = off)"},
    )
    prune_rel_threshold: Optional[float] = field(
        default=None,
        metadata={"help": "relative threshold rp in (0, 1]: prune candidates with probability ≤ "
                  "rp·best (off by default)"},
    )
    prune_rel_local_threshold: Optional[float] = field(
        default=None,
        metadata={"help": "relative local threshold rpl in (0, 1]: prune candidates whose last word's "
                  "probability ≤ rpl·the step's best last-word probability (off by default)"},
    )
    prune_reference: Optional[str] = field(
        default=None,
        metadata={"help": "the best score --prune-abs-threshold and --prune-rel-threshold measure from: "
                  "'active' (best candidate on the beam, Freitag2017), 'final' (best of those and the finished "
                  "hypotheses by log-probability, Yang2020 App. A.3; up to 1.6 BLEU below the fixed beam on "
                  "weak models, docs/results.md), 'normalized' (finished hypotheses by length-normalised score, scaled to "
                  f"each candidate's length); default {DEFAULT_REFERENCE!r}, or --prune-preset's"},
    )
    prune_ended: str = field(
        default="prune",
        metadata={"help": "candidates ending in EOS under --prune-abs-threshold and --prune-rel-threshold: "
                  "'prune' them like the others (Yang2020) or 'keep' them (they cost no decoder row; pruning them "
                  "sends searches on to the maximum length)"},
    )
    prune_rules: Optional[str] = field(
        default=None,
        metadata={"help": "more pruning rules for var-*, applied in order after the three thresholds: "
                  "'NAME[:ARG],...' of registered rules (built in: ap:δ, rp:r, rpl:r; a --user-dir may register "
                  "more, see user_dir_examples/prune_rule)"},
    )
    beam_final_count: int = field(
        default=0,
        metadata={"help": "rule 'ours': a sentence ends after Z final hypotheses (or an empty beam) and returns the "
                  "best --nbest by length-normalised score (the reference code's find_top_z; 0 = --beam; "
                  "1 = strict top-1, shorter outputs); refused with the other --beam-finalize rules, which end at --beam"},
    )
    beam_finalize: Optional[str] = field(
        default=None,
        metadata={"help": "when a finished candidate becomes final: 'ours' (Yang2020 App. A.1: only "
                  "once it tops the beam), 'fairseq' (at once if among the top k of 2k, as fairseq's "
                  "beam search) or 'shrink' (Freitag2017's baseline: at once if among the beam's k − finals best, "
                  f"and the beam shrinks by one); default {DEFAULT_FINALIZE!r}, or --prune-preset's"},
    )
    prune_preset: Optional[str] = field(
        default=None,
        metadata={"help": "a paper's whole pruning rule for var-*: 'freitag2017' = Freitag2017 Table 1 at beam 5 "
                  "(rp 0.6, ap 2.5, rpl 0.02, mc 3, measured from the best active candidate, --beam-finalize "
                  "shrink); 'freitag2017-k14' = its beam-14 row (rp 0.3, ap 2.5, rpl 0.3, mc 3, same rule); an "
                  "option left unset takes the preset's value, one given another value is refused"},
    )
    prune_auto: Optional[str] = field(
        default=None,
        metadata={"argparse_const": "on", "argparse_type": prune_auto_cli,
                  "help": "'on' (or the bare flag) or 'off' (default 'off': opt-in; without it the var-* beams prune each "
                  "sentence by its own search, --prune-abs-threshold). It steers δ and M while "
                  f"the run goes, without references: it starts at δ {PRUNE_AUTO_START[0]:g}, M {PRUNE_AUTO_START[1]}; "
                  "probe sentences, chosen per batch across source lengths, are decoded again by the fixed beam and "
                  f"by the next faster setting, at most {100 * PRUNE_AUTO_BUDGET:g}%% of the run's decoder work (less "
                  "while the setting holds); the run moves one setting safer when the current one's recent probes "
                  "lose more than --prune-auto-tolerance of the fixed beam's model score, one faster when the faster "
                  "one's lose less than half of it. Deterministic (no clock); streams without reading the input ahead; "
                  "fairseq-interactive steers the same way; its choices follow the batching, so its output may differ "
                  "between batch sizes, streams and shards; 'on' with an option that fixes the pruning is refused"},
    )
    prune_auto_tolerance: Optional[float] = field(
        default=None,
        metadata={"help": "with --prune-auto: the largest mean loss of the best hypothesis's length-normalised "
                  "model score against the fixed beam's the current setting may have over its recent probes, as a "
                  f"fraction of the fixed beam's mean |score| there (default {PRUNE_AUTO_TOLERANCE:g})"},
    )
    # ---- the output layer (Hoang2018 §3.1) ----
    output_layer: str = field(
        default="fused",
        metadata={"help": "'fused': top-k on the raw scores, normalise only the winners (Hoang2018); "
                  "'full': fairseq's full log-softmax (falls back automatically where needed)"},
    )
    step_backend: str = field(
        default="auto",
        metadata={"help": "who runs the fused step operators (beam step, Jacobi iteration, IBDecoder step): 'auto' "
                  "(the fastest available: C++ on a CPU, Triton on CUDA), 'reference' (the PyTorch code that defines "
                  "the results), 'cpp', 'triton'; a backend that cannot run falls back to the reference with one "
                  "warning line, and the closing statistics name the backend each operator ran on"},
    )
    step_mode: str = field(
        default="auto",
        metadata={"help": "how a decoder step runs: 'eager' (shapes follow the live rows and the cache length), "
                  "'static' (shapes fixed per bucket of rows and cache slots, padding rows masked; any device), "
                  "'graph' (the static step captured once per bucket as a CUDA graph and replayed; CUDA only), "
                  "'native' (the eager step as one C++ call, the same bits; CPU only; a step it does not cover, "
                  "such as a block with its own mask, runs eager and is counted as a fallback), "
                  "'auto' (graph on CUDA; native on a CPU where it runs every model, else eager); the closing "
                  "statistics count the steps of each kind"},
    )
    native_loop: str = field(
        default="auto",
        metadata={"help": "'auto': where a step has few rows (<= 16) on the native step, the greedy beam (--beam 1 of "
                  "the fixed-*/var-* strategies) runs its steps in one C++ call until a sentence may end, searching "
                  "each as the Python step does; a wider beam (fixed-*, var-*) of one sentence at any k, or of a few "
                  "within the 16 rows, likewise until one of its steps finishes a sentence, its rows reordered in the "
                  "call; at batch 1 the Jacobi iterations of gs-jacobi, hybrid-jacobi, "
                  "lookahead and speculative (a fixed --draft-tokens) likewise, their guesses (the n-gram pool's, "
                  "the draft's) made inside (the same output and scores, bit for bit); 'off': a Python step each "
                  "(for comparisons)"},
    )
    # ---- int8 weights (fairseq_stream.model.quantize) ----
    quantize: str = field(
        default="none",
        metadata={"help": "'int8': decode with int8 weights in every Linear layer (encoder, decoder, output "
                  "projection): weights with one scale per output channel, activations quantised at each call with one "
                  "scale per row (8-bit; FAIRSEQ_STREAM_INT8_ACTIVATION_BITS=7 forces 7), multiplied in integers by "
                  "our own product (the same bits on every CPU kind: AVX-512 VNNI, AVX2 or none), so a row's result "
                  "does not depend on its batch; CPU and float32 models only; the closing statistics line names the kernel and the bits. "
                  "'none': as loaded"},
    )
    cpu_matmul: str = field(
        default="auto",
        metadata={"help": "who multiplies the float32 Linear layers on a CPU: 'packed' (this package's product over "
                  "weights packed once: a few microseconds a call at few rows; one fixed order of sums, so batch-, "
                  "thread- and instruction-set-invariant), 'onednn' (oneDNN's packed product, batch-invariant), "
                  "'torch' (PyTorch's default, MKL), 'auto' (packed for this package's strategies, oneDNN where its "
                  "kernel cannot be built; stock PyTorch for fairseq's own --search beam)"},
    )
    # ---- parallel Jacobi decoding (Santilli2023) ----
    jacobi_block: int = field(
        default=3, metadata={"help": "block size b of gs-jacobi and hybrid-jacobi (Santilli2023 Alg. 2-3)"}
    )
    jacobi_max_parallel_len: int = field(
        default=64,
        metadata={"help": "hybrid-jacobi: target positions decoded in parallel blocks before switching to "
                  "one token per step (L of Santilli2023 Alg. 3)"},
    )
    jacobi_parallel: str = field(
        default="auto",
        metadata={"help": "gs-jacobi, hybrid-jacobi, lookahead, speculative at one sentence a call (the native loop, "
                  "--stream-capacity 1): 'auto' (before each sentence's run of iterations, its blocks or one position "
                  "a call, whichever this run measured cheaper per verified token; speculative: each sentence with "
                  "the draft's guesses or without the draft: on a CPU a block's call costs "
                  "more than a one-token step), 'always' (the papers' blocks), 'never' (one position a call, as "
                  "hybrid-jacobi with L = 0); the output is greedy's either way"},
    )
    jacobi_init: str = field(
        default="pad",
        metadata={"help": "initial draft of a block: 'pad' (Santilli2023) or 'tail' (slide the block and keep "
                  "the previous iteration's unverified predictions as the draft)"},
    )
    # ---- speculative decoding (Leviathan et al. 2023; Xia et al. 2023) ----
    draft_path: Optional[str] = field(
        default=None,
        metadata={"help": "speculative: the draft model's checkpoint (a.pt:b.pt = an ensemble draft), a small "
                  "fairseq transformer with the model's dictionaries (scripts/train_draft.sh distils one); "
                  "the output is the model's greedy output whatever the draft"},
    )
    draft_tokens: Optional[str] = field(
        default=None,
        metadata={"help": "speculative, speculative-beam: γ, the tokens the draft proposes per verification (the model "
                  "verifies γ + 1 positions in one block step), an integer in [1, 64]; not given: 3 for speculative "
                  "(with the demo model's int8 draft on a CPU at batch 1, 3 measured faster than 2 and 4, "
                  "docs/results.md) and 1 for speculative-beam (at k = 5, batch 1, 1 measured faster than 2 and 3: "
                  "every hypothesis is a row, so each proposed token costs a row a position); or 'auto' "
                  "(speculative only): γ before each verification from the recent acceptance rate and the measured "
                  "draft/verification cost (Leviathan et al. 2023, Theorem 3.8), up to 8"},
    )
    draft_quantize: str = field(
        default="auto",
        metadata={"help": "speculative: the draft's Linear weights: 'int8' (--quantize int8's per-row kernels, "
                  "CPU and float32 drafts only), 'none' (float, as loaded; --cpu-matmul applies), 'auto' (int8 on a "
                  "CPU where the int8 kernels run, else none); a draft only proposes, so the output is the model's "
                  "greedy output either way: int8 makes the demo's draft call about half as long at batch 1 "
                  "(docs/results.md)"},
    )
    # ---- lookahead decoding (Fu et al. 2024) ----
    lookahead_ngram: int = field(
        default=3,  # on a CPU at batch 1, N = 3 was faster than 4 with and without a prior (docs/results.md)
        metadata={"help": "lookahead: N, the n-gram size of the pool (a token and the N - 1 tokens that followed it "
                  "in the run's greedy outputs); a step verifies N positions"},
    )
    lookahead_prior: Optional[str] = field(
        default=None,
        metadata={"help": "lookahead: a file of the model's frequent continuations (of its last token and last two), "
                  "counted on its greedy output of training sources by python -m fairseq_stream.tools.lookahead_prior; "
                  "the pool starts from it. Guesses only: the output is the model's greedy output either way"},
    )
    # ---- IBDecoder family (Zhang2020) ----
    ib_dedup: bool = field(
        default=False, metadata={"help": "ib-beam: remove immediately repeated n-grams (n <= 4) from outputs (Zhang2020 §5.1)"}
    )
    ib_finalize: str = field(
        default="top",
        metadata={"help": "ib-beam: which continuations that end become final hypotheses: 'top' = those among the "
                  "sentence's --beam best of the step (as fairseq's beam search), 'all' = every one (Algorithm 1 "
                  "read literally; fills the finished set with short endings)"},
    )
