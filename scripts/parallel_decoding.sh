#!/usr/bin/env bash
# Paper 004 (Santilli et al. 2023), Table 1 protocol on fairseq models: greedy autoregressive
# decoding vs PJ / PGJ b=3 / PGJ b=5 / HGJ b=3 at batch size 1, on a WMT test set through
# sacreBLEU; wall time, iterations and BLEU (which must equal greedy's). The paper decoded
# Opus-MT and mBART50 through Hugging Face; this script uses fairseq checkpoints instead
# (default: the published WMT'19 De-En single model).
#
#   bash scripts/parallel_decoding.sh --pair de-en                       # downloads model and data
#   bash scripts/parallel_decoding.sh --models-dir DIR --src F --ref F --pair es-en --limit 100
#
# Local-path alternatives for every download: --models-dir, --src/--ref, --bpe-codes (as in
# scripts/wmt19_var_stream.sh). Other options: --testset wmt14 --runs N (3) --limit N --threads N --out DIR
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pair=de-en models="" src="" ref="" codes="" runs=3 limit="" out="" threads="" testset=wmt14
while [ $# -gt 0 ]; do
    case "$1" in
        --pair) pair="$2"; shift 2;;
        --models-dir) models="$2"; shift 2;;
        --src) src="$2"; shift 2;;
        --ref) ref="$2"; shift 2;;
        --bpe-codes) codes="$2"; shift 2;;
        --testset) testset="$2"; shift 2;;
        --runs) runs="$2"; shift 2;;
        --limit) limit="$2"; shift 2;;
        --threads) threads="$2"; shift 2;;
        --out) out="$2"; shift 2;;
        -h|--help) sed -n '2,14p' "$0"; exit 0;;
        *) echo "parallel_decoding.sh: unknown option $1 (see --help)" >&2; exit 2;;
    esac
done
sl="${pair%-*}" tl="${pair#*-}"
out="${out:-$repo/work/parallel_$pair}"
mkdir -p "$out"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
if [ -z "$models" ]; then
    url=https://dl.fbaipublicfiles.com/fairseq/models/wmt19.$pair.joined-dict.single_model.tar.gz
    [ -d "$out/models" ] || { mkdir -p "$out/models"; curl -fL "$url" | tar -xz -C "$out/models" --strip-components=1; }
    models="$out/models"
fi
if [ -z "$src" ] || [ -z "$ref" ]; then
    src="$out/$testset.$sl" ref="$out/$testset.$tl"
    [ -s "$src" ] || "$python" -m sacrebleu -t "$testset" -l "$pair" --echo src > "$src"
    [ -s "$ref" ] || "$python" -m sacrebleu -t "$testset" -l "$pair" --echo ref > "$ref"
fi
[ -n "$codes" ] || codes="$models/bpecodes"
cut -d' ' -f1,2 "$codes" > "$out/bpecodes.subword-nmt"
ckpt=$( (ls "$models"/model*.pt "$models"/checkpoint*.pt 2>/dev/null || true) | head -1)
[ -n "$ckpt" ] || { echo "no model*.pt in $models" >&2; exit 2; }
bench=("$python" -m fairseq_stream.bench --data "$models" --path "$ckpt" --bpe-codes "$out/bpecodes.subword-nmt"
       --src "$src" --ref "$ref" --source-lang "$sl" --target-lang "$tl" --repeats "$runs" --batch-size 1 --no-progress)
[ -n "$limit" ] && bench+=(--limit "$limit")
[ -n "$threads" ] && bench+=(--threads "$threads")
one="beam=1,stream_capacity=1"
"${bench[@]}" --json "$out/table1.json" \
    --run "beam:beam=1,label=Greedy (fairseq)" \
    --run "fixed-ours:$one,label=Greedy (ours)" \
    --run "jacobi:$one,label=PJ" \
    --run "gs-jacobi:$one,jacobi_block=3,label=PGJ (b=3)" \
    --run "gs-jacobi:$one,jacobi_block=5,label=PGJ (b=5)" \
    --run "hybrid-jacobi:$one,jacobi_block=3,label=HGJ (b=3)"
