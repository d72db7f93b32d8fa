#!/usr/bin/env bash
# Reproduce paper 003's (Zhang et al. 2020) WMT14 En-De setup for the IBDecoder family:
# data, sacremoses + joint subword-nmt BPE (32k), Transformer Base (App. A: d=512, 6 layers,
# 8 heads, FFN 2048, dropout 0.1, Adam (0.9, 0.98), 4k warm-up, ~25k target tokens per update),
# training with --task translation_ib, averaging the last 5 checkpoints, decoding with
# ib-beam (beam 4, length penalty 0.6) and detokenised sacreBLEU (the paper's signature:
# BLEU+c.mixed+#.1+s.exp+tok.13a).
#
#   bash scripts/wmt14_ibdecoder.sh                                  # downloads WMT14 En-De
#   bash scripts/wmt14_ibdecoder.sh --train-prefix DIR/train --valid-prefix DIR/valid --test-prefix DIR/test \
#        --src en --tgt de --bpe-merges 32000
#
# Local alternatives to every download: --train-prefix / --valid-prefix / --test-prefix P
# (raw files P.SRC and P.TGT). Model: --h 2 --c 1 (IBDecoder; --c 2 = +SA; --h 4 = IMDecoder),
# --max-update N (100000), --max-tokens N (4096) --update-freq N (6: ~25k tokens per update on
# one device), --arch-args "..." to override the Transformer Base flags, --threads N, --out DIR,
# --cpu. The test suite runs it end to end on the demo corpus with a tiny model.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src=en tgt=de train="" valid="" test="" merges=32000 h=2 c=1 max_update=100000 max_tokens=4096 update_freq=6
out="" cpu="" threads="" arch_args=""
while [ $# -gt 0 ]; do
    case "$1" in
        --src) src="$2"; shift 2;;
        --tgt) tgt="$2"; shift 2;;
        --train-prefix) train="$2"; shift 2;;
        --valid-prefix) valid="$2"; shift 2;;
        --test-prefix) test="$2"; shift 2;;
        --bpe-merges) merges="$2"; shift 2;;
        --h) h="$2"; shift 2;;
        --c) c="$2"; shift 2;;
        --max-update) max_update="$2"; shift 2;;
        --max-tokens) max_tokens="$2"; shift 2;;
        --update-freq) update_freq="$2"; shift 2;;
        --arch-args) arch_args="$2"; shift 2;;
        --threads) threads="$2"; shift 2;;
        --out) out="$2"; shift 2;;
        --cpu) cpu="--cpu"; shift;;
        -h|--help) sed -n '2,20p' "$0"; exit 0;;
        *) echo "wmt14_ibdecoder.sh: unknown option $1 (see --help)" >&2; exit 2;;
    esac
done
out="${out:-$repo/work/wmt14_ib}"
mkdir -p "$out/raw" "$out/tok" "$out/bpe"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
bin="$(dirname "$python")"
[ -n "$threads" ] && export OMP_NUM_THREADS="$threads"

# 1. Data: WMT14 En-De (Europarl v7, Common Crawl, News Commentary v9; newstest2013/2014), or local files.
if [ -z "$train" ]; then
    base=https://www.statmt.org/wmt13
    for f in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz; do
        [ -f "$out/raw/$f" ] || curl -fL -o "$out/raw/$f" "$base/$f"
        tar -xzf "$out/raw/$f" -C "$out/raw"
    done
    [ -f "$out/raw/nc.tgz" ] || curl -fL -o "$out/raw/nc.tgz" https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz
    tar -xzf "$out/raw/nc.tgz" -C "$out/raw"
    for l in $src $tgt; do
        cat "$out/raw"/training/europarl-v7.de-en.$l "$out/raw"/commoncrawl.de-en.$l "$out/raw"/training/news-commentary-v9.de-en.$l > "$out/raw/train.$l"
        "$python" -m sacrebleu -t wmt13 -l $src-$tgt --echo $([ $l = $src ] && echo src || echo ref) > "$out/raw/valid.$l"
        "$python" -m sacrebleu -t wmt14/full -l $src-$tgt --echo $([ $l = $src ] && echo src || echo ref) > "$out/raw/test.$l"
    done
    train="$out/raw/train" valid="$out/raw/valid" test="$out/raw/test"
fi

# 2. Moses tokenisation (sacremoses, fairseq's settings) and a joint BPE.
for split in train valid test; do
    prefix=$(eval echo \$$split)
    for l in $src $tgt; do
        [ -s "$out/tok/$split.$l" ] || "$python" -m fairseq_stream.text tokenize --lang $l < "$prefix.$l" > "$out/tok/$split.$l"
    done
done
if [ ! -s "$out/bpecodes" ]; then
    cat "$out/tok/train.$src" "$out/tok/train.$tgt" | "$bin/subword-nmt" learn-bpe -s "$merges" > "$out/bpecodes"
fi
for split in train valid test; do
    for l in $src $tgt; do
        [ -s "$out/bpe/$split.$l" ] || "$bin/subword-nmt" apply-bpe -c "$out/bpecodes" < "$out/tok/$split.$l" > "$out/bpe/$split.$l"
    done
done
[ -f "$out/bin/dict.$src.txt" ] || "$bin/fairseq-preprocess" --source-lang $src --target-lang $tgt --joined-dictionary \
    --trainpref "$out/bpe/train" --validpref "$out/bpe/valid" --testpref "$out/bpe/test" --destdir "$out/bin" --workers 4

# 3. Train (Transformer Base, App. A) with the interleaved target order.
arch=(--arch transformer_ib --share-all-embeddings --encoder-layers 6 --decoder-layers 6 --encoder-embed-dim 512
      --decoder-embed-dim 512 --encoder-ffn-embed-dim 2048 --decoder-ffn-embed-dim 2048 --encoder-attention-heads 8
      --decoder-attention-heads 8)
# shellcheck disable=SC2206
[ -n "$arch_args" ] && arch=(--arch transformer_ib $arch_args)
ckpts="$out/checkpoints_h${h}_c${c}"
if [ ! -f "$ckpts/checkpoint_last.pt" ] || ! grep -q "done training" "$ckpts/train.log" 2>/dev/null; then
    mkdir -p "$ckpts"
    "$bin/fairseq-train" "$out/bin" --user-dir "$repo/fairseq_stream" --task translation_ib --ib-h "$h" --ib-c "$c" \
        "${arch[@]}" --dropout 0.1 --attention-dropout 0.1 --optimizer adam --adam-betas '(0.9, 0.98)' \
        --lr 0.0007 --lr-scheduler inverse_sqrt --warmup-updates 4000 --criterion label_smoothed_cross_entropy \
        --label-smoothing 0.1 --max-tokens "$max_tokens" --update-freq "$update_freq" --max-update "$max_update" \
        --save-dir "$ckpts" --save-interval-updates "$(( max_update / 20 > 0 ? max_update / 20 : 1 ))" \
        --keep-interval-updates 5 --no-epoch-checkpoints --log-format simple --log-interval 100 $cpu 2>&1 | tee "$ckpts/train.log"
fi

# 4. Average the last 5 checkpoints (fewer when the run saved fewer).
n=$( (ls "$ckpts"/checkpoint_*_*.pt 2>/dev/null || true) | wc -l)
if [ "$n" -ge 2 ]; then
    "$python" -m fairseq_stream.average_checkpoints --dir "$ckpts" --last $(( n < 5 ? n : 5 )) --output "$ckpts/averaged.pt"
else
    cp "$ckpts/checkpoint_last.pt" "$ckpts/averaged.pt"
fi

# 5. Decode the test set with the multi-word beam and score with sacreBLEU.
"$bin/fairseq-generate" "$out/bin" --user-dir "$repo/fairseq_stream" --path "$ckpts/averaged.pt" --gen-subset test \
    --search ib-beam --beam 4 --lenpen 0.6 --max-tokens 8000 --post-process subword_nmt $cpu > "$out/generate.test.txt"
grep ^H- "$out/generate.test.txt" | sort -t- -k2 -n | cut -f3 | "$python" -m fairseq_stream.text detokenize --lang $tgt > "$out/test.hyp.$tgt"
"$python" -m sacrebleu "$test.$tgt" -i "$out/test.hyp.$tgt" -m bleu -b -w 2 > "$out/bleu.txt"
echo "sacreBLEU (c.mixed, #.1, s.exp, tok.13a): $(cat "$out/bleu.txt") on $(wc -l < "$out/test.hyp.$tgt") sentences"
