"""Decoding options of fairseq-stream, shared by every task of the package.

They are fields of the task's dataclass config because fairseq rebuilds
``cfg.generation`` from ``GenerationConfig`` alone: an extra generation flag survives only as
a task field (see ``../shared/docs/FAIRSEQ_NOTES.md``). :func:`validate` checks them once,
up front; the rest are checked where they are read, when the generator is built
(:mod:`fairseq_stream.engine`).
"""
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Optional, Sequence, Tuple

from fairseq.dataclass import FairseqDataclass

from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.ops.backends import CHOICES as STEP_BACKENDS
from fairseq_stream.quantize import check_choice as check_quantize
from fairseq_stream.registry import epsilon_defaults_help, get_search, search_names
from fairseq_stream.strategies.beam import (
    DEFAULT_ABS_THRESHOLD, DEFAULT_MAX_CANDS_PER_NODE, DEFAULT_REFERENCE, check_preset,
)


INPUT_ORDERS = ("sorted", "as-given")  # --stream-input-order


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
    # ---- the streaming scheduler (paper 000 Algorithm 1; paper 002 Algorithms 5-6) ----
    stream_epsilon: Optional[float] = field(
        default=None,
        metadata={"help": "refill threshold ε in [0, 1): new sentences join when the sentences in "
                  "flight drop to ε·capacity (0 = plain batches); default " + epsilon_defaults_help() + " (paper 000: 1/6; "
                  "paper 002: 1/2); the other strategies decode plain batches"},
    )
    stream_capacity: int = field(
        default=64,
        metadata={"help": "sentences in flight at once (the batch size n of paper 000); fairseq's "
                  "--batch-size/--max-tokens only set how the input is read (one stream runs over all of it)"},
    )
    stream_max_candidates: int = field(
        default=0,
        metadata={"help": "bound the live candidates (total beam width) in flight instead of the "
                  "sentences (paper 000 §3, §4.2); 0 = off"},
    )
    stream_oversubscribe: bool = field(
        default=False,
        metadata={"help": "with --stream-max-candidates C: keep --stream-capacity sentences in flight (their "
                  "encoder states and beams cached) and expand at most C candidates per step, the shortest "
                  "beams first, the others waiting a step (paper 000 §3 over-subscription); steps stay full "
                  "while beams narrow"},
    )
    stream_max_wait: int = field(
        default=0,
        metadata={"help": "latency bound: stop refilling while a sentence has been in flight for more "
                  "than this many steps (paper 000 footnote 3); 0 = off"},
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
        metadata={"help": "write the run's statistics (and the per-step active batch trace) as JSON here"},
    )
    # ---- beam search heuristics (paper 001 §3; paper 000 §4) ----
    prune_abs_threshold: Optional[float] = field(
        default=None,
        metadata={"help": "absolute threshold δ (ap): prune candidates scoring ≤ best − δ in "
                  f"log-probability; the best may be a finished hypothesis (default {DEFAULT_ABS_THRESHOLD:g} for "
                  "var-*; inf = off)"},
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
                  "'active' (best candidate on the beam, paper 001), 'final' (best of those and the finished "
                  "hypotheses by log-probability, paper 000 App. A.3; up to 1.6 BLEU below the fixed beam on "
                  "weak models, README), 'normalized' (finished hypotheses by length-normalised score, scaled to "
                  f"each candidate's length); default {DEFAULT_REFERENCE!r}, or --prune-preset's"},
    )
    prune_ended: str = field(
        default="prune",
        metadata={"help": "candidates ending in EOS under --prune-abs-threshold and --prune-rel-threshold: "
                  "'prune' them like the others (paper 000) or 'keep' them (they cost no decoder row; pruning them "
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
                  "1 = strict top-1, shorter outputs)"},
    )
    beam_finalize: Optional[str] = field(
        default=None,
        metadata={"help": "when a finished candidate becomes final: 'ours' (paper 000 App. A.1: only "
                  "once it tops the beam), 'fairseq' (at once if among the top k of 2k, as fairseq's "
                  "beam search) or 'shrink' (Freitag2017's baseline: at once if among the beam's k − finals best, "
                  "and the beam shrinks by one); default 'ours', or --prune-preset's"},
    )
    prune_preset: Optional[str] = field(
        default=None,
        metadata={"help": "a paper's whole pruning rule for var-*: 'freitag2017' = Freitag2017 Table 1 at beam 5 "
                  "(rp 0.6, ap 2.5, rpl 0.02, mc 3, measured from the best active candidate, --beam-finalize "
                  "shrink); 'freitag2017-k14' = its beam-14 row (rp 0.3, ap 2.5, rpl 0.3, mc 3, same rule); an "
                  "option left unset takes the preset's value, one given another value is refused"},
    )
    # ---- the output layer (paper 002 §3.1) ----
    output_layer: str = field(
        default="fused",
        metadata={"help": "'fused': top-k on the raw scores, normalise only the winners (paper 002); "
                  "'full': fairseq's full log-softmax (falls back automatically where needed)"},
    )
    step_backend: str = field(
        default="auto",
        metadata={"help": "who runs the fused step operators (beam step, Jacobi iteration, IBDecoder step): 'auto' "
                  "(the fastest available: C++ on a CPU, Triton on CUDA), 'reference' (the PyTorch code that defines "
                  "the results), 'cpp', 'triton'; a backend that cannot run falls back to the reference with one "
                  "warning line, and the closing statistics name the backend each operator ran on"},
    )
    # ---- int8 weights (fairseq_stream.quantize) ----
    quantize: str = field(
        default="none",
        metadata={"help": "'int8': decode with int8 weights in every Linear layer (encoder, decoder, output "
                  "projection; PyTorch's fbgemm dynamic quantisation, CPU and float32 models only); 'none': as loaded"},
    )
    # ---- parallel Jacobi decoding (paper 004) ----
    jacobi_block: int = field(
        default=3, metadata={"help": "block size b of gs-jacobi and hybrid-jacobi (paper 004 Alg. 2-3)"}
    )
    jacobi_max_parallel_len: int = field(
        default=64,
        metadata={"help": "hybrid-jacobi: target positions decoded in parallel blocks before switching to "
                  "one token per step (L of paper 004 Alg. 3)"},
    )
    jacobi_init: str = field(
        default="pad",
        metadata={"help": "initial draft of a block: 'pad' (paper 004) or 'tail' (slide the block and keep "
                  "the previous iteration's unverified predictions as the draft)"},
    )
    # ---- IBDecoder family (paper 003) ----
    ib_dedup: bool = field(
        default=False, metadata={"help": "ib-beam: remove immediately repeated n-grams (n <= 4) from outputs (paper 003 §5.1)"}
    )
    ib_finalize: str = field(
        default="top",
        metadata={"help": "ib-beam: which continuations that end become final hypotheses: 'top' = those among the "
                  "sentence's --beam best of the step (as fairseq's beam search), 'all' = every one (Algorithm 1 "
                  "read literally; fills the finished set with short endings)"},
    )


def _check_writable(path: str, flag: str) -> None:
    # Checked before decoding: otherwise the file fails only when the statistics are written, at the end.
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FairseqStreamError(f"{flag} {path}: the directory {folder!r} does not exist; create it or choose another path")
    if os.path.isdir(path) or not os.access(folder, os.W_OK):
        raise FairseqStreamError(f"{flag} {path}: cannot write a file there; choose another path")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _option_items(cfg: Any) -> Iterable[Tuple[str, Any]]:
    """(name, value) of a dataclass, an omegaconf node or an argparse namespace."""
    if hasattr(cfg, "__dataclass_fields__"):
        return [(f.name, getattr(cfg, f.name, None)) for f in fields(cfg)]
    if hasattr(cfg, "items"):
        return list(cfg.items())
    return list(vars(cfg).items())


def _refuse_nan(cfg: Any) -> None:
    # float("nan") parses as a number, and every range check (x < 0, 0 < x <= 1, ...) is False
    # for NaN: refused by name here, once, instead of silently poisoning every score.
    for name, value in _option_items(cfg):
        if isinstance(value, float) and math.isnan(value):
            raise FairseqStreamError(f"{_flag(name)} is NaN; give a number")


#: The built-in rules of --prune-rules, with the range of the flag they mirror (beam_rules
#: parses any float; what the flags refuse must not come in through the rule list).
_RULE_RANGES = {
    "ap": ("--prune-abs-threshold", lambda x: x >= 0, ">= 0 (inf = off)"),
    "rp": ("--prune-rel-threshold", lambda x: 0 < x <= 1, "in (0, 1]"),
    "rpl": ("--prune-rel-local-threshold", lambda x: 0 < x <= 1, "in (0, 1]"),
}


def _check_rule_arguments(spec: Optional[str]) -> None:
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        name, _, arg = item.partition(":")
        if name not in _RULE_RANGES or not arg:
            continue  # unknown names and missing numbers: refused by beam_rules with their own line
        try:
            value = float(arg)
        except ValueError:
            continue
        flag, ok, wanted = _RULE_RANGES[name]
        if math.isnan(value) or not ok(value):
            raise FairseqStreamError(f"--prune-rules {item}: {name} (as {flag}) must be {wanted}, got {arg}")


def validate(opts: StreamDecodingConfig) -> None:
    """Check, up front, the options that belong to no strategy or scheduler configuration.

    Each other option is checked once, where it is read: the scheduler's by
    ``SchedulerConfig``, a strategy's by its configuration dataclass (``__post_init__``), and
    combinations (an option of another strategy, ``--beam`` where there is no beam, ...) by
    :func:`fairseq_stream.engine.check_combinations`, all when the generator is built.
    """
    get_search(opts.search)
    _refuse_nan(opts)
    _check_rule_arguments(opts.prune_rules)
    check_preset(opts)
    if opts.stream_input_order not in INPUT_ORDERS:
        raise FairseqStreamError(f"--stream-input-order must be one of {', '.join(INPUT_ORDERS)}, "
                                 f"got {opts.stream_input_order!r}")
    if opts.output_layer not in ("fused", "full"):
        raise FairseqStreamError(f"--output-layer must be 'fused' or 'full', got {opts.output_layer!r}")
    if opts.step_backend not in STEP_BACKENDS:
        raise FairseqStreamError(f"--step-backend must be one of {', '.join(STEP_BACKENDS)}, got {opts.step_backend!r}")
    check_quantize(getattr(opts, "quantize", "none"))
    if opts.stream_stats:
        _check_writable(opts.stream_stats, "--stream-stats")


def validate_generation(gen_cfg: Any, models: Sequence[Any] = (), tgt_dict: Any = None) -> None:
    """Reject fairseq generation options that no strategy can honour, for every ``--search``.

    fairseq itself answers these with an assertion, a division by zero or an IndexError after
    decoding (``--beam 0``, ``--nbest 0``, a length limit below ``--min-len``). The maximum
    length ``min(a·|x| + b, max positions − 1)`` must leave room for at least one token and for
    ``--min-len`` at the shortest source (|x| = 1, the EOS of an empty line), so no sentence can
    end up without a hypothesis.
    """
    _refuse_nan(gen_cfg)
    for name in ("lenpen", "temperature", "max_len_a"):  # inf: scores of 0 or inf, or no length limit at all
        if math.isinf(float(getattr(gen_cfg, name))):
            raise FairseqStreamError(f"{_flag(name)} must be finite, got {getattr(gen_cfg, name)}")
    if gen_cfg.beam < 1:
        raise FairseqStreamError(f"--beam must be >= 1, got {gen_cfg.beam}")
    if gen_cfg.nbest < 1:
        raise FairseqStreamError(f"--nbest must be >= 1, got {gen_cfg.nbest}")
    if tgt_dict is not None and gen_cfg.beam > len(tgt_dict):  # top-k over the vocabulary has no k-th word
        raise FairseqStreamError(f"--beam {gen_cfg.beam} is larger than the target vocabulary ({len(tgt_dict)} "
                                 "symbols); lower --beam")
    if not gen_cfg.temperature > 0:
        raise FairseqStreamError(f"--temperature must be > 0, got {gen_cfg.temperature}")
    if gen_cfg.max_len_a < 0:
        raise FairseqStreamError(f"--max-len-a must be >= 0, got {gen_cfg.max_len_a}")
    limits = [m.max_decoder_positions() for m in models if hasattr(m, "max_decoder_positions")]
    max_positions = min(limits) if limits else None
    min_len = max(int(gen_cfg.min_len), 1)
    by_flags = int(float(gen_cfg.max_len_a) * 1 + float(gen_cfg.max_len_b))  # at |x| = 1
    shortest = by_flags if max_positions is None else min(by_flags, max_positions - 1)
    if shortest < min_len:
        cause = (f"--max-len-a {gen_cfg.max_len_a} --max-len-b {gen_cfg.max_len_b}" if by_flags == shortest
                 else f"the model's {max_positions} positions")
        raise FairseqStreamError(
            f"the maximum output length (a·|x| + b, from {cause}) is {shortest} tokens for a one-token source, "
            f"below the minimum of {min_len} (--min-len {gen_cfg.min_len}); raise --max-len-b (fairseq's default "
            "is 200) or lower --min-len"
        )
