#!/usr/bin/env bash
# Reproduce Table 1 (and Tables 3 and 5) of Yang2020 (docs/papers.md): fairseq's WMT'19
# De-En / Ru-En ensembles on newstest2018, k = 5 and 50, several runs each, wall clock as
# mean ± sd, detokenised sacreBLEU. Each row, what it reproduces, and its rule:
#   GREEDY             Table 1   fairseq's greedy (beam 1)
#   GREEDY (ours)      —         our engine's greedy (fixed-ours --beam 1): the baseline in our engine
#   FIXED (fairseq)    Table 1   fairseq's beam search (its own ending rule)
#   VAR-BATCH          Table 1   paper rule: δ = 1.5, M = 5 measured from the best of the beam's
#                                candidates and the finished hypotheses by log-probability
#                                (--prune-reference final, App. A.3), App. A.1 finalisation
#   VAR-STREAM         Table 1   the same paper rule, ε = 1/6
#   FIXED-OURS         Table 3   our fixed beam, App. A.1 finalisation (ε = 0)
#   FIXED-STREAM       Table 3   the same, ε = 1/6
#   VAR-STR-FIFO       Table 5   the paper rule, ε = 1/6, every beam in flight steps (App. A.2)
#   VAR-BATCH (ours: normalized δ), VAR-STREAM (ours: normalized δ)
#                      —         not the paper's: our default --prune-reference normalized (δ
#                                measured per token from the finished hypotheses), extra rows
# The "ratio" column is against GREEDY (the first row); "vs ours" against our own engine's fixed
# beam at the same width (FIXED-OURS; for k = 1 GREEDY (ours)). The paper ran on one V100 GPU:
# use --device cuda (the 4-model ensemble at k = 50 on 2,998 sentences is impractical on CPU).
# As in the paper, FIXED and GREEDY decode batches of --fixed-batch sentences, and our
# strategies stream over the whole input keeping --capacity sentences in flight; choose both
# to saturate the GPU (the paper tuned them in multiples of 64).
#
#   bash scripts/papers/wmt19_var_stream.sh --pair de-en --device cuda        # downloads models and data
#   bash scripts/papers/wmt19_var_stream.sh --pair de-en --models-dir DIR --src newstest2018.de --ref newstest2018.en
#
# Every download has a local-path alternative (a machine without internet passes them all):
#   --models-dir DIR   an extracted fairseq model folder (dict.*.txt, bpecodes, model*.pt)
#   --src/--ref FILE   raw source / reference sentences (else: sacreBLEU's --testset, default wmt18)
#   --bpe-codes FILE   subword-nmt or fastBPE codes (else DIR/bpecodes; fastBPE codes are converted
#                      to subword-nmt's v0.2 format, which applies their word-final merges)
# Other options: --runs N (5) --beams "5 50" --limit N (all) --capacity n (64) --fixed-batch N (64)
#   --device cpu|cuda (cpu) --dtype float32|float16|bfloat16 (float32) --out DIR --threads N
#   --dry-run (prepare the codes, print the first source lines in subwords and the commands; decode nothing)
# The test suite runs this script end to end on the demo model with local paths.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/wmt_common.sh"
runs=5 testset=wmt18 beams="5 50" capacity=64 fixed_batch=64 dry_run=""
wmt_option() {
    wmt_testset_option "$@"
    case "$1" in
        --beams) beams="${2-}"; wmt_shift=2;;
        --capacity) capacity="${2-}"; wmt_shift=2;;
        --fixed-batch) fixed_batch="${2-}"; wmt_shift=2;;
        --dry-run) dry_run=1; wmt_shift=1;;
    esac
    return 0
}
wmt_parse "$@"
out="${out:-$repo/work/wmt19_$pair}"
mkdir -p "$out"

if [ -z "$models" ]; then
    case "$pair" in
        de-en) wmt_fetch_models https://dl.fbaipublicfiles.com/fairseq/models/wmt19.de-en.joined-dict.ensemble.tar.gz;;
        ru-en) wmt_fetch_models https://dl.fbaipublicfiles.com/fairseq/models/wmt19.ru-en.ensemble.tar.gz;;
        *) wmt_fail "no published WMT'19 ensemble for $pair; pass --models-dir";;
    esac
fi
wmt_test_files
wmt_subword_nmt_codes
ckpts=$(wmt_checkpoints)
wmt_bench "$ckpts"
bench+=(--batch-size "$fixed_batch" --pool-size 0)
# the paper's δ, M (and ε below) with the paper's reference; ours: the project's default reference
var="prune_abs_threshold=1.5,prune_max_cands_per_node=5,prune_reference=final,stream_capacity=$capacity"
ours="prune_abs_threshold=1.5,prune_max_cands_per_node=5,prune_reference=normalized,stream_capacity=$capacity"
if [ -n "$dry_run" ]; then
    echo "## dry run: the first source sentences as the models will see them"
    head -3 "$src" | "$python" -m fairseq_stream.tools.text tokenize --lang "${pair%-*}" --codes "$codes_nmt"
    echo "## would run, for k in $beams: ${bench[*]} --run ..."
    exit 0
fi
for k in $beams; do
    echo "## $pair, k = $k, $(echo "$ckpts" | tr ':' '\n' | wc -l) model(s), $runs run(s) each, $device $dtype"
    "${bench[@]}" --json "$out/table1_k$k.json" \
        --run "beam:beam=1,label=GREEDY" \
        --run "fixed-ours:beam=1,stream_capacity=$capacity,label=GREEDY (ours)" \
        --run "beam:beam=$k,label=FIXED (fairseq)" \
        --run "var-batch:beam=$k,$var,label=VAR-BATCH" \
        --run "var-stream:beam=$k,$var,stream_epsilon=0.1667,label=VAR-STREAM" \
        --run "fixed-ours:beam=$k,stream_capacity=$capacity,label=FIXED-OURS" \
        --run "fixed-stream:beam=$k,stream_capacity=$capacity,stream_epsilon=0.1667,label=FIXED-STREAM" \
        --run "var-fifo:beam=$k,$var,stream_epsilon=0.1667,label=VAR-STR-FIFO" \
        --run "var-batch:beam=$k,$ours,label=VAR-BATCH (ours: normalized δ)" \
        --run "var-stream:beam=$k,$ours,stream_epsilon=0.1667,label=VAR-STREAM (ours: normalized δ)"
done
