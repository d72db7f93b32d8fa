#!/usr/bin/env bash
# Reproduce Table 1 (and Tables 3 and 5) of Yang2020 (streaming beam search): fairseq's WMT'19
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
#   bash scripts/wmt19_var_stream.sh --pair de-en --device cuda        # downloads models and data
#   bash scripts/wmt19_var_stream.sh --pair de-en --models-dir DIR --src newstest2018.de --ref newstest2018.en
#
# Every download has a local-path alternative (a machine without internet passes them all):
#   --models-dir DIR   an extracted fairseq model folder (dict.*.txt, bpecodes, model*.pt)
#   --src/--ref FILE   raw source / reference sentences (else: sacrebleu -t wmt18 --echo)
#   --bpe-codes FILE   subword-nmt or fastBPE codes (else DIR/bpecodes; fastBPE codes are converted
#                      to subword-nmt's v0.2 format, which applies their word-final merges)
# Other options: --runs N (5) --beams "5 50" --limit N (all) --capacity n (64) --fixed-batch N (64)
#   --device cpu|cuda (cpu) --dtype float32|float16|bfloat16 (float32) --out DIR --threads N
#   --dry-run (prepare the codes, print the first source lines in subwords and the commands; decode nothing)
# The test suite runs this script end to end on the demo model with local paths.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pair=de-en models="" src="" ref="" codes="" runs=5 beams="5 50" limit="" capacity=64 fixed_batch=64 out="" threads=""
device=cpu dtype=float32 dry_run=""
while [ $# -gt 0 ]; do
    case "$1" in
        --pair) pair="$2"; shift 2;;
        --models-dir) models="$2"; shift 2;;
        --src) src="$2"; shift 2;;
        --ref) ref="$2"; shift 2;;
        --bpe-codes) codes="$2"; shift 2;;
        --runs) runs="$2"; shift 2;;
        --beams) beams="$2"; shift 2;;
        --limit) limit="$2"; shift 2;;
        --capacity) capacity="$2"; shift 2;;
        --fixed-batch) fixed_batch="$2"; shift 2;;
        --device) device="$2"; shift 2;;
        --dtype) dtype="$2"; shift 2;;
        --out) out="$2"; shift 2;;
        --threads) threads="$2"; shift 2;;
        --dry-run) dry_run=1; shift;;
        -h|--help) sed -n '2,36p' "$0"; exit 0;;
        *) echo "wmt19_var_stream.sh: unknown option $1 (see --help)" >&2; exit 2;;
    esac
done
sl="${pair%-*}" tl="${pair#*-}"
out="${out:-$repo/work/wmt19_$pair}"
mkdir -p "$out"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

if [ -z "$models" ]; then
    case "$pair" in
        de-en) url=https://dl.fbaipublicfiles.com/fairseq/models/wmt19.de-en.joined-dict.ensemble.tar.gz;;
        ru-en) url=https://dl.fbaipublicfiles.com/fairseq/models/wmt19.ru-en.ensemble.tar.gz;;
        *) echo "no published WMT'19 ensemble for $pair; pass --models-dir" >&2; exit 2;;
    esac
    [ -d "$out/models" ] || { mkdir -p "$out/models"; curl -fL "$url" | tar -xz -C "$out/models" --strip-components=1; }
    models="$out/models"
fi
if [ -z "$src" ] || [ -z "$ref" ]; then
    src="$out/newstest2018.$sl" ref="$out/newstest2018.$tl"
    [ -s "$src" ] || "$python" -m sacrebleu -t wmt18 -l "$pair" --echo src > "$src"
    [ -s "$ref" ] || "$python" -m sacrebleu -t wmt18 -l "$pair" --echo ref > "$ref"
fi
if [ -z "$codes" ]; then codes="$models/bpecodes"; fi
# fairseq's WMT'19 models ship fastBPE codes ("a b count"); subword-nmt applies them faithfully
# only as version 0.2 codes (header, pairs): without the header no word-final merge applies.
"$python" -m fairseq_stream.tools.text convert-codes < "$codes" > "$out/bpecodes.subword-nmt"
ckpts=$( (ls "$models"/model*.pt "$models"/checkpoint*.pt 2>/dev/null || true) | paste -sd: -)
[ -n "$ckpts" ] || { echo "no model*.pt in $models" >&2; exit 2; }

bench=("$python" -m fairseq_stream.tools.bench --data "$models" --path "$ckpts" --bpe-codes "$out/bpecodes.subword-nmt"
       --src "$src" --ref "$ref" --source-lang "$sl" --target-lang "$tl" --repeats "$runs" --no-progress
       --device "$device" --dtype "$dtype" --batch-size "$fixed_batch" --pool-size 0)
[ -n "$limit" ] && bench+=(--limit "$limit")
[ -n "$threads" ] && bench+=(--threads "$threads")
# the paper's δ, M (and ε below) with the paper's reference; ours: the project's default reference
var="prune_abs_threshold=1.5,prune_max_cands_per_node=5,prune_reference=final,stream_capacity=$capacity"
ours="prune_abs_threshold=1.5,prune_max_cands_per_node=5,prune_reference=normalized,stream_capacity=$capacity"
if [ -n "$dry_run" ]; then
    echo "## dry run: the first source sentences as the models will see them"
    head -3 "$src" | "$python" -m fairseq_stream.tools.text tokenize --lang "$sl" --codes "$out/bpecodes.subword-nmt"
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
