#!/usr/bin/env bash
# A draft model for `--search speculative --draft-path DRAFT.pt`, by sequence-level knowledge
# distillation (Kim & Rush 2016): translate training sources with the model's own greedy output,
# then train a small transformer (same dictionaries, a narrow encoder, a 1-layer decoder) on
# those translations with stock fairseq-train. A draft only proposes tokens: the output of
# speculative decoding is the model's greedy output whatever the draft, so what matters is how
# often its proposals equal the model's greedy choices (the acceptance rate), which distilling
# on the model's own greedy output maximises.
#
#   scripts/train_draft.sh MODEL_DIR CHECKPOINT SOURCES OUT.pt
#
# MODEL_DIR holds dict.SRC.txt and dict.TGT.txt (the model's dictionaries, which the draft must
# share), CHECKPOINT is the model, SOURCES raw (untokenised) source sentences, one a line,
# from the model's training data (never its test set). Settings (environment):
#   SRC_LANG=es TGT_LANG=en  BPE_CODES=MODEL_DIR/bpe.codes (empty: sources are already BPE'd)
#   KD_LINES=12000 (sources to distil)  DIM=128 FFN=512 HEADS=4 ENC_LAYERS=2 DEC_LAYERS=1
#   TRAIN_MINUTES=12  LR=0.002 (the peak of the inverse-sqrt schedule)  WORK=./work/draft  THREADS=1
#   PRECISION=auto (training's products: bf16 where the CPU has AMX-BF16 or AVX512-BF16, float32 elsewhere;
#   scripts/models/train_autocast.py: more updates in TRAIN_MINUTES)
#   STAGES=distil,train,export (a subset reruns only those; RESUME=1: train on from WORK's last
#   checkpoint until TRAIN_MINUTES of training in all, fairseq-train's --stop-time-hours)
#   INIT=DRAFT.pt: start from an earlier draft of the same shape (its weights; a fresh optimizer and
#   learning-rate warm-up) instead of random weights, e.g. to distil it further on more sources
#
# Time for the shipped demo draft user_dir_examples/demo/draft.pt (Intel Xeon, AVX-512 VNNI, 1 thread;
# the commands: user_dir_examples/demo/draft.md): 12,000 sources distilled in 246 s and 30 minutes of
# training (2,100 updates) on 2026-11-27, then INIT= that draft, 28,605 sources distilled in 306 s (107
# sentences/s: greedy, capacity 64, the native step) and 55 minutes (4,616 updates) on 2026-11-28.
set -euo pipefail
case "${1-}" in  # --help: this header, before anything runs
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;;
esac

if [ $# -ne 4 ]; then
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
MODEL_DIR=$1 CHECKPOINT=$2 SOURCES=$3 OUT=$4
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
BIN=$(dirname "$(command -v "$PY")")
SRC_LANG=${SRC_LANG:-es} TGT_LANG=${TGT_LANG:-en}
BPE_CODES=${BPE_CODES-$MODEL_DIR/bpe.codes}
KD_LINES=${KD_LINES:-12000} DIM=${DIM:-128} FFN=${FFN:-512} HEADS=${HEADS:-4}
ENC_LAYERS=${ENC_LAYERS:-2} DEC_LAYERS=${DEC_LAYERS:-1} TRAIN_MINUTES=${TRAIN_MINUTES:-12} LR=${LR:-0.002}
WORK=${WORK:-./work/draft} THREADS=${THREADS:-1} PRECISION=${PRECISION:-auto}
export OMP_NUM_THREADS=$THREADS
mkdir -p "$WORK/kd"

STAGES=${STAGES:-distil,train,export} RESUME=${RESUME:-0}
stage() { [[ ",$STAGES," == *",$1,"* ]]; }

if stage distil; then
echo "== 1. distil: greedy translations of $KD_LINES sources ($(date -u +%T))"
start=$(date +%s)
head -n "$KD_LINES" "$SOURCES" > "$WORK/kd/sources.txt"
"$PY" - "$REPO" "$MODEL_DIR" "$CHECKPOINT" "$WORK/kd" "$SRC_LANG" "$TGT_LANG" "$BPE_CODES" <<'EOF'
import os, sys
repo, model_dir, ckpt, kd, src, tgt, codes = sys.argv[1:]
sys.path.insert(0, repo)
from fairseq_stream.tools.session import TranslationSession

with open(os.path.join(kd, "sources.txt"), encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f]
session = TranslationSession.load(model_dir, ckpt, bpe_codes=codes or None,
                                 extra_args=["--source-lang", src, "--target-lang", tgt])
prepared = [session.source_text(s) for s in lines]  # tokenised and BPE'd as the model reads them
# the model's greedy output (our fixed beam at width 1)
out = session.translate(session.encode(lines), search="fixed-ours", gen={"beam": 1},
                        opts={"stream_capacity": 64}, postprocess=False)
tgt_dict = session.task.target_dictionary
keep = [(s, tgt_dict.string(h[0]["tokens"][:-1].int().cpu())) for s, h in zip(prepared, out.hypos)]
keep = [(s, t) for s, t in keep if s.strip() and t.strip()]
for lang, side in ((src, 0), (tgt, 1)):
    with open(os.path.join(kd, f"train.{lang}"), "w", encoding="utf-8") as f:
        f.writelines(pair[side] + "\n" for pair in keep)
print(f"distilled {len(keep)} pairs ({out.stats.sentences_per_second:.1f} sentences/s)")
EOF
echo "   $(( $(date +%s) - start )) s"

fi

if stage train; then
echo "== 2. binarize with the model's dictionaries"
[ "$RESUME" = 1 ] || rm -rf "$WORK/bin"
"$BIN/fairseq-preprocess" --source-lang "$SRC_LANG" --target-lang "$TGT_LANG" --trainpref "$WORK/kd/train" \
    --destdir "$WORK/bin" --srcdict "$MODEL_DIR/dict.$SRC_LANG.txt" --tgtdict "$MODEL_DIR/dict.$TGT_LANG.txt" \
    --workers 1 > "$WORK/preprocess.log"
SHARE=()
cmp -s "$MODEL_DIR/dict.$SRC_LANG.txt" "$MODEL_DIR/dict.$TGT_LANG.txt" && SHARE=(--share-all-embeddings)

echo "== 3. train the draft for $TRAIN_MINUTES minutes ($(date -u +%T))"
start=$(date +%s)
[ "$RESUME" = 1 ] || rm -rf "$WORK/checkpoints"
START=()
if [ -n "${INIT:-}" ] && [ "$RESUME" != 1 ]; then
    [ -f "$INIT" ] || { echo "train_draft.sh: INIT=$INIT: no such file" >&2; exit 2; }
    START=(--restore-file "$(cd "$(dirname "$INIT")" && pwd)/$(basename "$INIT")" --reset-optimizer \
           --reset-lr-scheduler --reset-dataloader --reset-meters)
fi
"$PY" "$REPO/scripts/models/train_autocast.py" --precision "$PRECISION" -- "$WORK/bin" --user-dir "$REPO/fairseq_stream" --cpu --arch transformer "${SHARE[@]}" \
    --encoder-layers "$ENC_LAYERS" --decoder-layers "$DEC_LAYERS" \
    --encoder-embed-dim "$DIM" --decoder-embed-dim "$DIM" --encoder-ffn-embed-dim "$FFN" --decoder-ffn-embed-dim "$FFN" \
    --encoder-attention-heads "$HEADS" --decoder-attention-heads "$HEADS" \
    --encoder-normalize-before --decoder-normalize-before --dropout 0.1 \
    --optimizer adam --adam-betas '(0.9, 0.98)' --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates 300 \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 4096 \
    --stop-time-hours "$(awk "BEGIN { print $TRAIN_MINUTES / 60 }")" --max-epoch 200 \
    --save-dir "$WORK/checkpoints" --no-epoch-checkpoints --save-interval-updates 200 --keep-interval-updates 1 \
    --disable-validation --num-workers 0 --log-format simple --log-interval 50 --seed 1 "${START[@]}" \
    > "$WORK/train.log" 2>&1
tail -n 3 "$WORK/train.log"
echo "   $(( $(date +%s) - start )) s"

fi

if stage export; then
echo "== 4. export a decoding-only fp16 checkpoint"
"$PY" - "$REPO" "$WORK/checkpoints/checkpoint_last.pt" "$OUT" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from fairseq_stream.tools.checkpoint import export_inference_checkpoint
size = export_inference_checkpoint(sys.argv[2], sys.argv[3])
print(f"wrote {sys.argv[3]} ({size / 2**20:.1f} MiB)")
EOF
fi
