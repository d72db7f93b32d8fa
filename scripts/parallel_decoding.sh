#!/usr/bin/env bash
# Paper 004 (Santilli et al. 2023), Table 1 protocol on fairseq models: greedy autoregressive
# decoding, beam search (beam 5), PJ, PGJ b=3, PGJ b=5 and HGJ b=3 at batch size 1, on a WMT test
# set through sacreBLEU; wall time, iterations and BLEU (every Jacobi row must equal greedy's).
# The paper's lengths: PJ and PGJ know the target length beforehand ("ideal condition", §4):
# their maximum length is greedy's output length, taken from the greedy row outside their timing;
# HGJ decodes every position in parallel blocks (L = the maximum). The paper decoded Opus-MT
# and mBART50 through Hugging Face on WMT14 De-En (3,003 sentences, sacreBLEU's wmt14/full);
# this script uses fairseq checkpoints instead (default: the published WMT'19 single models).
# Rows: Greedy and Beam search (beam=5) are fairseq's generator (Table 1's baselines); Greedy
# (ours) and Beam search ours (beam=5) the same searches by our engine (fixed-ours), which runs
# the Jacobi rows too, so "vs ours" compares within one implementation as the paper does; PJ,
# PGJ (b=3, b=5) and HGJ (b=3) are Table 1's parallel rows with the rules above.
#
#   bash scripts/parallel_decoding.sh --pair de-en --device cuda         # downloads model and data
#   bash scripts/parallel_decoding.sh --models-dir DIR --src F --ref F --pair es-en --limit 100
#
# Local-path alternatives for every download: --models-dir, --src/--ref, --bpe-codes (subword-nmt
# or fastBPE codes, as in scripts/wmt19_var_stream.sh). Other options: --testset wmt14/full
# --runs N (3) --limit N --device cpu|cuda (cpu) --dtype float32|float16|bfloat16 --threads N --out DIR
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pair=de-en models="" src="" ref="" codes="" runs=3 limit="" out="" threads="" testset=wmt14/full device=cpu dtype=float32
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
        --device) device="$2"; shift 2;;
        --dtype) dtype="$2"; shift 2;;
        --threads) threads="$2"; shift 2;;
        --out) out="$2"; shift 2;;
        -h|--help) sed -n '2,20p' "$0"; exit 0;;
        *) echo "parallel_decoding.sh: unknown option $1 (see --help)" >&2; exit 2;;
    esac
done
sl="${pair%-*}" tl="${pair#*-}"
out="${out:-$repo/work/parallel_$pair}"
mkdir -p "$out"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "$models" ]; then
    # fairseq's WMT'19 single models: only the En<->De ones have a joined dictionary.
    case "$pair" in
        de-en|en-de) url=https://dl.fbaipublicfiles.com/fairseq/models/wmt19.$pair.joined-dict.single_model.tar.gz;;
        ru-en|en-ru) url=https://dl.fbaipublicfiles.com/fairseq/models/wmt19.$pair.single_model.tar.gz;;
        *) echo "no published WMT'19 single model for $pair; pass --models-dir" >&2; exit 2;;
    esac
    [ -d "$out/models" ] || { mkdir -p "$out/models"; curl -fL "$url" | tar -xz -C "$out/models" --strip-components=1; }
    models="$out/models"
fi
if [ -z "$src" ] || [ -z "$ref" ]; then
    src="$out/${testset//\//_}.$sl" ref="$out/${testset//\//_}.$tl"
    [ -s "$src" ] || "$python" -m sacrebleu -t "$testset" -l "$pair" --echo src > "$src"
    [ -s "$ref" ] || "$python" -m sacrebleu -t "$testset" -l "$pair" --echo ref > "$ref"
fi
[ -n "$codes" ] || codes="$models/bpecodes"
"$python" -m fairseq_stream.tools.text convert-codes < "$codes" > "$out/bpecodes.subword-nmt"  # fastBPE → subword-nmt 0.2
ckpt=$( (ls "$models"/model*.pt "$models"/checkpoint*.pt 2>/dev/null || true) | head -1)
[ -n "$ckpt" ] || { echo "no model*.pt in $models" >&2; exit 2; }
bench=("$python" -m fairseq_stream.tools.bench --data "$models" --path "$ckpt" --bpe-codes "$out/bpecodes.subword-nmt"
       --src "$src" --ref "$ref" --source-lang "$sl" --target-lang "$tl" --repeats "$runs" --batch-size 1 --no-progress
       --device "$device" --dtype "$dtype")
[ -n "$limit" ] && bench+=(--limit "$limit")
[ -n "$threads" ] && bench+=(--threads "$threads")
one="beam=1,stream_capacity=1"
"${bench[@]}" --json "$out/table1.json" \
    --run "beam:beam=1,label=Greedy" \
    --run "beam:beam=5,label=Beam search (beam=5)" \
    --run "fixed-ours:$one,label=Greedy (ours)" \
    --run "fixed-ours:beam=5,stream_capacity=1,label=Beam search ours (beam=5)" \
    --run "jacobi:$one,length_from=Greedy,label=PJ" \
    --run "gs-jacobi:$one,jacobi_block=3,length_from=Greedy,label=PGJ (b=3)" \
    --run "gs-jacobi:$one,jacobi_block=5,length_from=Greedy,label=PGJ (b=5)" \
    --run "hybrid-jacobi:$one,jacobi_block=3,jacobi_max_parallel_len=100000,label=HGJ (b=3)"
