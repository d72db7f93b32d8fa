#!/usr/bin/env bash
# Santilli2023 (docs/papers.md), Table 1 protocol on fairseq models: greedy autoregressive
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
#   bash scripts/papers/parallel_decoding.sh --pair de-en --device cuda         # downloads model and data
#   bash scripts/papers/parallel_decoding.sh --models-dir DIR --src F --ref F --pair es-en --limit 100
#
# Local-path alternatives for every download: --models-dir, --src/--ref, --bpe-codes (subword-nmt
# or fastBPE codes, as in scripts/papers/wmt19_var_stream.sh). Other options: --testset wmt14/full
# --runs N (3) --limit N --device cpu|cuda (cpu) --dtype float32|float16|bfloat16 --threads N --out DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/wmt_common.sh"
testset=wmt14/full
wmt_option() { wmt_testset_option "$@"; }
wmt_parse "$@"
out="${out:-$repo/work/parallel_$pair}"
mkdir -p "$out"
if [ -z "$models" ]; then
    # fairseq's WMT'19 single models: only the En<->De ones have a joined dictionary.
    case "$pair" in
        de-en|en-de) wmt_fetch_models "https://dl.fbaipublicfiles.com/fairseq/models/wmt19.$pair.joined-dict.single_model.tar.gz";;
        ru-en|en-ru) wmt_fetch_models "https://dl.fbaipublicfiles.com/fairseq/models/wmt19.$pair.single_model.tar.gz";;
        *) wmt_fail "no published WMT'19 single model for $pair; pass --models-dir";;
    esac
fi
wmt_test_files
wmt_subword_nmt_codes
ckpt=$(wmt_checkpoints)
wmt_bench "${ckpt%%:*}"  # one model: the paper decodes single models
bench+=(--batch-size 1)
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
