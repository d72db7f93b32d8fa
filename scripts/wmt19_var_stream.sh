#!/usr/bin/env bash
# Reproduce Table 1 of Yang et al. 2020 (paper 000): fairseq's WMT'19 De-En / Ru-En ensembles
# on newstest2018, k = 5 and 50, GREEDY / FIXED (fairseq) / VAR-BATCH / VAR-STREAM with
# δ = 1.5, M = 5, ε = 1/6; several runs each, wall clock as mean ± sd, detokenised sacreBLEU.
#
#   bash scripts/wmt19_var_stream.sh --pair de-en                 # downloads models and data
#   bash scripts/wmt19_var_stream.sh --pair de-en --models-dir DIR --src newstest2018.de --ref newstest2018.en
#
# Every download has a local-path alternative (a machine without internet passes them all):
#   --models-dir DIR   an extracted fairseq model folder (dict.*.txt, bpecodes, model*.pt)
#   --src/--ref FILE   raw source / reference sentences (else: sacrebleu -t wmt18 --echo)
#   --bpe-codes FILE   subword-nmt or fastBPE codes (else DIR/bpecodes; fastBPE's count column is dropped)
# Other options: --runs N (5) --beams "5 50" --limit N (all) --capacity n (64) --out DIR --threads N
# The test suite runs this script end to end on the demo model with local paths.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pair=de-en models="" src="" ref="" codes="" runs=5 beams="5 50" limit="" capacity=64 out="" threads=""
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
        --out) out="$2"; shift 2;;
        --threads) threads="$2"; shift 2;;
        -h|--help) sed -n '2,17p' "$0"; exit 0;;
        *) echo "wmt19_var_stream.sh: unknown option $1 (see --help)" >&2; exit 2;;
    esac
done
sl="${pair%-*}" tl="${pair#*-}"
out="${out:-$repo/work/wmt19_$pair}"
mkdir -p "$out"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"

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
# fastBPE codes carry a count column; subword-nmt reads the same merges without it.
cut -d' ' -f1,2 "$codes" > "$out/bpecodes.subword-nmt"
ckpts=$( (ls "$models"/model*.pt "$models"/checkpoint*.pt 2>/dev/null || true) | paste -sd: -)
[ -n "$ckpts" ] || { echo "no model*.pt in $models" >&2; exit 2; }

bench=("$python" -m fairseq_stream.bench --data "$models" --path "$ckpts" --bpe-codes "$out/bpecodes.subword-nmt"
       --src "$src" --ref "$ref" --source-lang "$sl" --target-lang "$tl" --repeats "$runs" --no-progress)
[ -n "$limit" ] && bench+=(--limit "$limit")
[ -n "$threads" ] && bench+=(--threads "$threads")
for k in $beams; do
    echo "## $pair, k = $k, $(echo "$ckpts" | tr ':' '\n' | wc -l) model(s), $runs run(s) each"
    "${bench[@]}" --json "$out/table1_k$k.json" \
        --run "beam:beam=1,label=GREEDY" \
        --run "beam:beam=$k,label=FIXED (fairseq)" \
        --run "var-batch:beam=$k,prune_abs_threshold=1.5,prune_max_cands_per_node=5,stream_capacity=$capacity,label=VAR-BATCH" \
        --run "var-stream:beam=$k,prune_abs_threshold=1.5,prune_max_cands_per_node=5,stream_epsilon=0.1667,stream_capacity=$capacity,label=VAR-STREAM"
done
