#!/usr/bin/env bash
# Reproduce paper 003's (Zhang et al. 2020) Table 1 on WMT14 En-De: a standard Transformer (①)
# and an IBDecoder (②; --h/--c pick +SA or IMDecoder), each trained from scratch and with
# sequence-level knowledge distillation (+KD, Kim & Rush 2016: the averaged Transformer
# translates the training sources with beam 4 and students train on its outputs), then BLEU at
# beam 4 and 1 and latency at batch size 1 (the paper: averaged over three runs; latency and
# speedup of the KD models against the Transformer, GTX 1080).
#   rows     Transformer (fairseq's beam search), Transformer (ours) (the same checkpoint by our
#            fixed-ours), IBDecoder (ib-beam), and the same three +KD; "speedup" is against the
#            first row (fairseq's Transformer, the paper's baseline), "vs ours" against the
#            Transformer of the same training decoded by our engine at the same beam
#   data     WMT14 En-De (Europarl v7, Common Crawl, News Commentary v9), newstest2013 for
#            validation, newstest2014 for test: sacreBLEU's wmt14 (2,737 sentences, the set of
#            the paper's Fig. 3: 10 bins of 274) by default; --testset wmt14/full = 3,003
#   prep     sacremoses + joint subword-nmt BPE (32k); Transformer Base (App. A: d=512, 6 layers,
#            8 heads, FFN 2048, dropout 0.1, Adam (0.9, 0.98), 4k warm-up, ~25k target tokens per
#            update); the last 5 checkpoints averaged
#   decode   GNMT's length penalty ((5 + |Y|)/6)^0.6 over the n-best list (scripts/ib_eval.py),
#            detokenised sacreBLEU (the paper's signature: BLEU+c.mixed+#.1+s.exp+tok.13a)
#
#   bash scripts/wmt14_ibdecoder.sh --device cuda                     # downloads WMT14 En-De
#   bash scripts/wmt14_ibdecoder.sh --train-prefix DIR/train --valid-prefix DIR/valid --test-prefix DIR/test \
#        --src en --tgt de --bpe-merges 32000
#
# Local alternatives to every download: --train-prefix / --valid-prefix / --test-prefix P (raw
# files P.SRC and P.TGT). Model: --h 2 --c 1 (IBDecoder; --c 2 = +SA; --h 4 = IMDecoder),
# --max-update N (100000), --max-tokens N (4096) --update-freq N (6: ~25k tokens per update on
# one device), --arch-args "..." to override the Transformer Base flags, --train-args "..." extra
# fairseq-train flags (e.g. --fp16), --no-kd, --kd-procs N (processes for the teacher's
# translation, one GPU each: fairseq-stream-shard), --beams "4 1", --latency-sentences N (all),
# --latency-runs N (3),
# --device cpu|cuda (cpu), --dtype float32|float16|bfloat16 (decoding), --threads N, --out DIR.
# The test suite runs it end to end on the demo corpus with tiny models.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src=en tgt=de train="" valid="" test="" merges=32000 h=2 c=1 max_update=100000 max_tokens=4096 update_freq=6
out="" threads="" arch_args="" train_args="" testset=wmt14 kd=1 kd_procs=1 beams="4 1" latency_sentences=0 latency_runs=3
device=cpu dtype=float32
while [ $# -gt 0 ]; do
    case "$1" in
        --src) src="$2"; shift 2;;
        --tgt) tgt="$2"; shift 2;;
        --train-prefix) train="$2"; shift 2;;
        --valid-prefix) valid="$2"; shift 2;;
        --test-prefix) test="$2"; shift 2;;
        --testset) testset="$2"; shift 2;;
        --bpe-merges) merges="$2"; shift 2;;
        --h) h="$2"; shift 2;;
        --c) c="$2"; shift 2;;
        --max-update) max_update="$2"; shift 2;;
        --max-tokens) max_tokens="$2"; shift 2;;
        --update-freq) update_freq="$2"; shift 2;;
        --arch-args) arch_args="$2"; shift 2;;
        --train-args) train_args="$2"; shift 2;;
        --no-kd) kd=""; shift;;
        --kd-procs) kd_procs="$2"; shift 2;;
        --beams) beams="$2"; shift 2;;
        --latency-sentences) latency_sentences="$2"; shift 2;;
        --latency-runs) latency_runs="$2"; shift 2;;
        --device) device="$2"; shift 2;;
        --dtype) dtype="$2"; shift 2;;
        --cpu) device=cpu; shift;;
        --threads) threads="$2"; shift 2;;
        --out) out="$2"; shift 2;;
        -h|--help) sed -n '2,33p' "$0"; exit 0;;
        *) echo "wmt14_ibdecoder.sh: unknown option $1 (see --help)" >&2; exit 2;;
    esac
done
case "$device" in cpu) cpu="--cpu";; cuda) cpu="";; *) echo "wmt14_ibdecoder.sh: --device cpu|cuda" >&2; exit 2;; esac
out="${out:-$repo/work/wmt14_ib}"
mkdir -p "$out/raw" "$out/tok" "$out/bpe" "$out/kd"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
bin="$(dirname "$python")"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
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
        side=$([ $l = $src ] && echo src || echo ref)
        cat "$out/raw"/training/europarl-v7.de-en.$l "$out/raw"/commoncrawl.de-en.$l "$out/raw"/training/news-commentary-v9.de-en.$l > "$out/raw/train.$l"
        "$python" -m sacrebleu -t wmt13 -l $src-$tgt --echo $side > "$out/raw/valid.$l"
        "$python" -m sacrebleu -t "$testset" -l $src-$tgt --echo $side > "$out/raw/test.$l"
    done
    train="$out/raw/train" valid="$out/raw/valid" test="$out/raw/test"
fi

# 2. Moses tokenisation (sacremoses, fairseq's settings; one process for all files) and a joint BPE.
"$python" - "$out/tok" "$src" "$tgt" "train=$train" "valid=$valid" "test=$test" <<'PY'
import os, sys
from fairseq_stream.tools.text import tokenize
dest, langs = sys.argv[1], sys.argv[2:4]
for item in sys.argv[4:]:
    split, prefix = item.split("=", 1)
    for lang in langs:
        path = os.path.join(dest, f"{split}.{lang}")
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            with open(f"{prefix}.{lang}", encoding="utf-8") as f, open(path, "w", encoding="utf-8") as g:
                g.writelines(tokenize(line.rstrip("\n"), lang) + "\n" for line in f)
PY
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

# 3. Training (Transformer Base, App. A), the same budget for every model; last 5 checkpoints averaged.
arch=(--share-all-embeddings --encoder-layers 6 --decoder-layers 6 --encoder-embed-dim 512 --decoder-embed-dim 512
      --encoder-ffn-embed-dim 2048 --decoder-ffn-embed-dim 2048 --encoder-attention-heads 8 --decoder-attention-heads 8)
# shellcheck disable=SC2206
[ -n "$arch_args" ] && arch=($arch_args)
# shellcheck disable=SC2206
extra=($train_args)
train_model() {  # NAME DATA standard|ib → prints the averaged checkpoint
    local ckpts="$out/checkpoints_$1" task
    if [ "$3" = ib ]; then task=(--task translation_ib --arch transformer_ib --ib-h "$h" --ib-c "$c");
    else task=(--task translation --arch transformer); fi
    if [ ! -f "$ckpts/checkpoint_last.pt" ] || ! grep -q "done training" "$ckpts/train.log" 2>/dev/null; then
        mkdir -p "$ckpts"
        "$bin/fairseq-train" "$2" --user-dir "$repo/fairseq_stream" "${task[@]}" "${arch[@]}" \
            --dropout 0.1 --attention-dropout 0.1 --optimizer adam --adam-betas '(0.9, 0.98)' \
            --lr 0.0007 --lr-scheduler inverse_sqrt --warmup-updates 4000 --criterion label_smoothed_cross_entropy \
            --label-smoothing 0.1 --max-tokens "$max_tokens" --update-freq "$update_freq" --max-update "$max_update" \
            --save-dir "$ckpts" --save-interval-updates "$(( max_update / 20 > 0 ? max_update / 20 : 1 ))" \
            --keep-interval-updates 5 --no-epoch-checkpoints --log-format simple --log-interval 100 $cpu \
            "${extra[@]}" > "$ckpts/train.log" 2>&1 || { tail -20 "$ckpts/train.log" >&2; exit 1; }
    fi
    local n
    n=$( (ls "$ckpts"/checkpoint_*_*.pt 2>/dev/null || true) | wc -l)
    if [ "$n" -ge 2 ]; then
        "$python" -m fairseq_stream.tools.average_checkpoints --dir "$ckpts" --last $(( n < 5 ? n : 5 )) --output "$ckpts/averaged.pt" >&2
    else
        cp "$ckpts/checkpoint_last.pt" "$ckpts/averaged.pt"
    fi
    echo "$ckpts/averaged.pt"
}
ib="ib_h${h}_c${c}"
# (one substitution per assignment, so that set -e sees a failed training)
teacher=$(train_model transformer "$out/bin" standard)
ib_ckpt=$(train_model "$ib" "$out/bin" ib)
# Each Transformer is timed twice: by fairseq's generator (the paper's baseline, the speedup
# column) and by our engine (fixed-ours, the 'vs ours' column: the same implementation as ib-beam's).
models=(--model "Transformer=beam:$teacher" --model "Transformer (ours)=fixed-ours:$teacher"
        --model "IBDecoder=ib-beam:$ib_ckpt")

# 4. Sequence-level KD: the averaged Transformer translates the training sources (beam 4, streamed;
#    --kd-procs > 1 splits the work over processes/GPUs), the students train on its outputs.
if [ -n "$kd" ]; then
    if [ ! -s "$out/kd/train.$tgt" ]; then
        if [ "$kd_procs" -gt 1 ]; then gen=("$python" -m fairseq_stream.tools.shard --nprocs "$kd_procs" --workdir "$out/kd/shards");
        else gen=("$bin/fairseq-generate"); fi
        "${gen[@]}" "$out/bin" --user-dir "$repo/fairseq_stream" --path "$teacher" \
            --gen-subset train --search var-stream --beam 4 --lenpen 0.6 --max-len-a 1.2 --max-len-b 10 --max-tokens 8000 \
            --skip-invalid-size-inputs-valid-test $cpu > "$out/kd/generate.train.txt" 2> "$out/kd/generate.log" \
            || { tail -5 "$out/kd/generate.log" >&2; exit 1; }
        # Pair each hypothesis with its BPE source line by id (over-long sentences were skipped).
        "$python" - "$out/kd/generate.train.txt" "$out/bpe/train.$src" "$out/kd/train.$src" "$out/kd/train.$tgt" <<'PY'
import sys
hyps = {}
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("H-"):
        head, _, text = line.rstrip("\n").split("\t", 2)
        hyps[int(head[2:])] = text
sources = open(sys.argv[2], encoding="utf-8").read().splitlines()
with open(sys.argv[3], "w", encoding="utf-8") as s, open(sys.argv[4], "w", encoding="utf-8") as t:
    for i in sorted(hyps):
        s.write(sources[i] + "\n")
        t.write(hyps[i] + "\n")
print(f"KD: {len(hyps)} of {len(sources)} training sentences translated by the teacher", file=sys.stderr)
PY
    fi
    [ -f "$out/bin_kd/dict.$src.txt" ] || "$bin/fairseq-preprocess" --source-lang $src --target-lang $tgt \
        --srcdict "$out/bin/dict.$src.txt" --tgtdict "$out/bin/dict.$tgt.txt" --trainpref "$out/kd/train" \
        --validpref "$out/bpe/valid" --destdir "$out/bin_kd" --workers 4 > "$out/kd/preprocess.log"
    tf_kd=$(train_model transformer_kd "$out/bin_kd" standard)
    ib_kd=$(train_model "${ib}_kd" "$out/bin_kd" ib)
    models+=(--model "Transformer+KD=beam:$tf_kd" --model "Transformer+KD (ours)=fixed-ours:$tf_kd"
             --model "IBDecoder+KD=ib-beam:$ib_kd")
fi

# 5. BLEU (GNMT length penalty 0.6 over the n-best list) and latency at batch size 1.
"$python" "$repo/scripts/ib_eval.py" --data "$out/bin" --bpe-codes "$out/bpecodes" --src "$test.$src" --ref "$test.$tgt" \
    --source-lang "$src" --target-lang "$tgt" "${models[@]}" --beams $beams --alpha 0.6 \
    --latency-sentences "$latency_sentences" --runs "$latency_runs" --device "$device" --dtype "$dtype" --json "$out/table1.json"
