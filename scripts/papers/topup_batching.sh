#!/usr/bin/env bash
# Hoang2018 §5.2 (Figures 6 and 7, "speed using top-up batching") on a local model and corpus
# (default: the bundled demo model and its held-out test set): plain mini-batches against top-up
# batching, each with the input length-sorted and in its own order. Hoang2018 reports the gain
# without maxi-batch sorting (top-up alone matches or beats mini-batch + maxi-batch); fairseq
# sorts the whole input by length, which here stands for the maxi-batch. All rows decode a fixed
# beam of width k (--beams, the paper's default 5) in batches of --batch sentences (the paper: 128).
#   row                          reproduces                      how
#   batches (sorted)             Figs. 6-7, mini + maxi-batch     fixed-ours (ε = 0), --stream-input-order sorted
#   batches (unsorted)           Figs. 6-7, mini-batch alone      fixed-ours, --stream-input-order as-given
#   top-up (sorted)              Figs. 6-7, top-up + maxi-batch   topup (refill when half empty, ε = 1/2; every
#                                                                 sentence in flight steps), sorted
#   top-up (unsorted)            Figs. 6-7, top-up alone          topup, as-given
#   var-stream (sorted/unsorted) — (Yang2020, comparison)         var-stream, ε = 1/6, shortest beams step; our
#                                                                 fixed default rule (--prune-auto off: δ 1.5, M 5, --prune-reference
#                                                                 normalized): a variable beam, not Hoang2018's
#   fairseq (sorted/unsorted)    — (beside ours)                  fairseq's beam search, batches of --batch
# Rule: Hoang2018 does not state its beam's ending rule; the fixed-beam rows use --finalize (default
# ours, Yang2020 App. A.1; 'fairseq' or 'shrink' are the others). "ratio" and "vs ours" are against
# the first row, batches (sorted). The outputs of the sorted and unsorted rows of one strategy are
# the same (only who shares a batch changes), as are those of "batches" and "top-up".
#
#   bash scripts/papers/topup_batching.sh                                       # the demo model, its test set
#   bash scripts/papers/topup_batching.sh --data DIR --path CKPT --bpe-codes CODES --src F.es --ref F.en --batch 128
#
# Options: --data DIR (dict.SRC.txt, dict.TGT.txt; default the demo's) --path CKPT (DIR/checkpoint.pt)
#   --bpe-codes FILE (DIR/bpe.codes) --src/--ref FILE (DIR/test.es, DIR/test.en; the languages are
#   their extensions) --beams "5" --finalize ours|fairseq|shrink --limit N (500) --runs N (2)
#   --batch N (32) --device cpu|cuda --threads N --out DIR (work/topup_batching)
#   --dry-run (print the harness command; decode nothing)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/wmt_common.sh"
beams="5" finalize=ours limit=500 runs=2
wmt_option() { case "$1" in --finalize) finalize="${2-}"; wmt_shift=2;; *) wmt_local_option "$@";; esac; }
wmt_parse "$@"
wmt_local_bench topup_batching
for k in $beams; do
    fixed="beam=$k,stream_capacity=$batch,beam_finalize=$finalize"
    rows=()
    for order in sorted as-given; do
        name=$([ "$order" = sorted ] && echo sorted || echo unsorted)
        rows+=(--run "fixed-ours:$fixed,stream_input_order=$order,label=batches ($name)")
        rows+=(--run "topup:$fixed,stream_input_order=$order,label=top-up ($name)")
    done
    for order in sorted as-given; do
        name=$([ "$order" = sorted ] && echo sorted || echo unsorted)
        rows+=(--run "var-stream:beam=$k,stream_capacity=$batch,stream_input_order=$order,prune_auto=false,label=var-stream ($name)")
        rows+=(--run "beam:beam=$k,stream_input_order=$order,label=fairseq ($name)")
    done
    if [ -n "$dry_run" ]; then
        echo "## would run: ${bench[*]} --json $out/topup_k$k.json ${rows[*]}"
        continue
    fi
    echo "## Hoang2018 Figs. 6-7 shape, beam $k, batches of $batch ($limit sentences, $runs run(s) each, $device)"
    "${bench[@]}" --json "$out/topup_k$k.json" "${rows[@]}"
    echo
done
