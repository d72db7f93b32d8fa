#!/usr/bin/env bash
# Reproduce Zhang2020 (docs/papers.md) on WMT14 En-De. Which row is which, and with which rule:
#   Table 1 ①    "Transformer": fairseq's transformer, fairseq's own beam search (--search beam);
#                "Transformer (ours)": the same checkpoint by our fixed-ours, the 'vs ours' baseline
#                (the same implementation as ib-beam's); "speedup" is against fairseq's Transformer
#   Table 1 ②–④  "IBDecoder" (--h 2 --c 1; --c 2 = ③ +SA; --h 4 = ④ IMDecoder): --search ib-beam
#   Table 1 +KD  both again on the teacher's translations (Kim & Rush 2016: the averaged
#                Transformer translates the training sources with plain beam search, beam 4:
#                --kd-search beam, fairseq's; fixed-ours/fixed-stream are our plain beams,
#                var-stream the pruned, faster teacher)
#   Table 2 (--table2, from scratch, beam 4; --table2-rows picks): 1 IBDecoder, 2 + vanilla mask
#                (--ib-mask vanilla), 3 + vanilla positions, 4 + middle-to-side (--ib-order),
#                5 + indep. directions, 6 vanilla SA (--ib-h 1 --ib-c 2), 7 + SA (h 2, c 2),
#                8 vanilla SA (--ib-h 1 --ib-c 4)
#   Table 3 (--table3): test-set perplexity of left-to-right AR (the Transformer), left-to-right
#                SA (Table 2 row 6), bidirectional AR (row 2: IBDecoder order, causal mask) and
#                bidirectional SA (row 1), from fairseq-validate; the PMI row is not computed
# The rule (--rule): "paper" (default for every row above) is Algorithm 1 read literally: one
# EOS after the target (--ib-eos single) and every ended continuation final (--ib-finalize
# all). "ours" trains with --ib-eos step and decodes with --ib-finalize top, the package's
# defaults (see docs/ibdecoder.md for why). Each model then gets BLEU at beam 4 and 1 and
# latency at batch size 1 (the paper: averaged over three runs; latency and speedup of the KD
# models against the Transformer, GTX 1080).
#   data     WMT14 En-De (Europarl v7, Common Crawl, News Commentary v9), newstest2013 for
#            validation, newstest2014 for test: sacreBLEU's wmt14 (2,737 sentences, the set of
#            the paper's Fig. 3: 10 bins of 274) by default; --testset wmt14/full = 3,003
#   prep     sacremoses + joint subword-nmt BPE (32k); Transformer Base (App. A: d=512, 6 layers,
#            8 heads, FFN 2048, dropout 0.1, Adam (0.9, 0.98), 4k warm-up, ~25k target tokens per
#            update); the last 5 checkpoints averaged
#   decode   GNMT's length penalty ((5 + |Y|)/6)^0.6 over the n-best list (scripts/papers/ib_eval.py),
#            detokenised sacreBLEU (the paper's signature: BLEU+c.mixed+#.1+s.exp+tok.13a)
#
#   bash scripts/papers/wmt14_ibdecoder.sh --device cuda                     # downloads WMT14 En-De
#   bash scripts/papers/wmt14_ibdecoder.sh --train-prefix DIR/train --valid-prefix DIR/valid --test-prefix DIR/test \
#        --src en --tgt de --bpe-merges 32000
#
# Local alternatives to every download: --train-prefix / --valid-prefix / --test-prefix P (raw
# files P.SRC and P.TGT). Model: --h 2 --c 1 (IBDecoder; --c 2 = +SA; --h 4 = IMDecoder;
# --h 1 --c 2 = vanilla SA), --rule paper|ours (paper), --kd-search NAME (beam),
# --table2, --table2-rows "1 2 3 4 5 6 7 8", --table3,
# --max-update N (100000), --max-tokens N (4096) --update-freq N (6: ~25k tokens per update on
# one device), --arch-args "..." to override the Transformer Base flags, --train-args "..." extra
# fairseq-train flags (e.g. --fp16), --no-kd, --kd-procs N (processes for the teacher's
# translation, one GPU each: fairseq-stream-shard), --beams "4 1", --latency-sentences N (all),
# --latency-runs N (3),
# --device cpu|cuda (cpu), --dtype float32|float16|bfloat16 (decoding), --threads N, --out DIR.
# The test suite runs it end to end on the demo corpus with tiny models.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/wmt_common.sh"
src=en tgt=de train="" valid="" test="" merges=32000 h=2 c=1 max_update=100000 max_tokens=4096 update_freq=6
out="" threads="" arch_args="" train_args="" testset=wmt14 kd=1 kd_procs=1 beams="4 1" latency_sentences=0 latency_runs=3
rule=paper kd_search=beam table2="" table2_rows="1 2 3 4 5 6 7 8" table3=""
wmt_option() {  # --src/--tgt are languages here, and the data are local prefixes or WMT14's
    case "$1" in
        --src) src="${2-}";; --tgt) tgt="${2-}";;
        --train-prefix) train="${2-}";; --valid-prefix) valid="${2-}";; --test-prefix) test="${2-}";;
        --testset) testset="${2-}";; --bpe-merges) merges="${2-}";;
        --h) h="${2-}";; --c) c="${2-}";;
        --max-update) max_update="${2-}";; --max-tokens) max_tokens="${2-}";; --update-freq) update_freq="${2-}";;
        --arch-args) arch_args="${2-}";; --train-args) train_args="${2-}";;
        --kd-procs) kd_procs="${2-}";; --beams) beams="${2-}";;
        --latency-sentences) latency_sentences="${2-}";; --latency-runs) latency_runs="${2-}";;
        --rule) rule="${2-}";; --kd-search) kd_search="${2-}";; --table2-rows) table2_rows="${2-}";;
        --no-kd) kd=""; wmt_shift=1; return 0;;
        --cpu) device=cpu; wmt_shift=1; return 0;;
        --table2) table2=1; wmt_shift=1; return 0;;
        --table3) table3=1; wmt_shift=1; return 0;;
        *) return 0;;
    esac
    wmt_shift=2
}
wmt_parse "$@"
case "$device" in cpu) cpu="--cpu";; cuda) cpu="";; esac
case "$rule" in
    paper) ib_eos=single ib_finalize=all;;  # Algorithm 1 read literally
    ours) ib_eos=step ib_finalize=top;;
    *) wmt_fail "--rule paper|ours, got $rule";;
esac
case "$kd_search" in beam|fixed-ours|fixed-stream|var-stream) ;;
    *) wmt_fail "--kd-search beam|fixed-ours|fixed-stream|var-stream, got $kd_search";; esac
for row in $table2_rows; do
    case "$row" in [1-8]) ;; *) wmt_fail "--table2-rows takes rows 1-8 of Table 2, got $row";; esac
done
out="${out:-$repo/work/wmt14_ib}"
mkdir -p "$out/raw" "$out/tok" "$out/bpe" "$out/kd"
[ -n "$threads" ] && export OMP_NUM_THREADS="$threads"

# 1. Data: WMT14 En-De (Europarl v7, Common Crawl, News Commentary v9; newstest2013/2014), or local files.
if [ -z "$train" ]; then
    for f in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz; do
        wmt_download "https://www.statmt.org/wmt13/$f" "$out/raw/$f"
        tar -xzf "$out/raw/$f" -C "$out/raw"
    done
    wmt_download https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz "$out/raw/nc.tgz"
    tar -xzf "$out/raw/nc.tgz" -C "$out/raw"
    for l in $src $tgt; do
        side=$([ $l = $src ] && echo src || echo ref)
        cat "$out/raw"/training/europarl-v7.de-en.$l "$out/raw"/commoncrawl.de-en.$l "$out/raw"/training/news-commentary-v9.de-en.$l > "$out/raw/train.$l"
        wmt_echo_testset wmt13 "$src-$tgt" "$side" "$out/raw/valid.$l"
        wmt_echo_testset "$testset" "$src-$tgt" "$side" "$out/raw/test.$l"
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
train_model() {  # NAME DATA standard|ib [IB FLAGS] → prints the averaged checkpoint
    local ckpts="$out/checkpoints_$1" task
    if [ "$3" = ib ]; then task=(--task translation_ib --arch transformer_ib --ib-eos "$ib_eos" "${@:4}");
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
ib="ib_h${h}_c${c}_${rule}"
# (one substitution per assignment, so that set -e sees a failed training)
teacher=$(train_model transformer "$out/bin" standard)
ib_ckpt=$(train_model "$ib" "$out/bin" ib --ib-h "$h" --ib-c "$c")
# Each Transformer is timed twice: by fairseq's generator (the paper's baseline, the speedup
# column) and by our engine (fixed-ours, the 'vs ours' column: the same implementation as ib-beam's).
models=(--model "Transformer=beam:$teacher" --model "Transformer (ours)=fixed-ours:$teacher"
        --model "IBDecoder=ib-beam:$ib_ckpt")

# 4. Sequence-level KD: the averaged Transformer translates the training sources (plain beam search,
#    beam 4, as Kim & Rush 2016; --kd-procs > 1 splits the work over processes/GPUs), the students
#    train on its outputs.
if [ -n "$kd" ]; then
    if [ ! -s "$out/kd/train.$tgt" ]; then
        if [ "$kd_procs" -gt 1 ]; then gen=("$python" -m fairseq_stream.tools.shard --nprocs "$kd_procs" --workdir "$out/kd/shards");
        else gen=("$bin/fairseq-generate"); fi
        "${gen[@]}" "$out/bin" --user-dir "$repo/fairseq_stream" --path "$teacher" \
            --gen-subset train --search "$kd_search" --beam 4 --lenpen 0.6 --max-len-a 1.2 --max-len-b 10 --max-tokens 8000 \
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
    ib_kd=$(train_model "${ib}_kd" "$out/bin_kd" ib --ib-h "$h" --ib-c "$c")
    models+=(--model "Transformer+KD=beam:$tf_kd" --model "Transformer+KD (ours)=fixed-ours:$tf_kd"
             --model "IBDecoder+KD=ib-beam:$ib_kd")
fi

# 5. Table 2 (and the models of Table 3): the ablations, from scratch, each with its flags.
table2_flags() {  # ROW → the IBDecoder-family flags of Table 2's row
    case "$1" in
        1) echo "--ib-h 2 --ib-c 1";;
        2) echo "--ib-h 2 --ib-c 1 --ib-mask vanilla";;
        3) echo "--ib-h 2 --ib-c 1 --ib-positions vanilla";;
        4) echo "--ib-h 2 --ib-c 1 --ib-order middle-to-side";;
        5) echo "--ib-h 2 --ib-c 1 --ib-independent-directions";;
        6) echo "--ib-h 1 --ib-c 2";;
        7) echo "--ib-h 2 --ib-c 2";;
        8) echo "--ib-h 1 --ib-c 4";;
    esac
}
table2_names=("" "IBDecoder" "+vanilla-mask" "+vanilla-positions" "+middle-to-side" "+indep-directions" "vanilla-SA-c2"
              "+SA" "vanilla-SA-c4")
train_rows=""
[ -n "$table2" ] && train_rows="$table2_rows"
[ -n "$table3" ] && train_rows="$train_rows 1 2 6"  # Table 3's models
declare -A table2_ckpt=()
if [ -n "$train_rows" ]; then
    for row in $(printf '%s\n' $train_rows | sort -un); do
        if [ "$row" = 1 ] && [ "$h$c" = 21 ]; then table2_ckpt[1]="$ib_ckpt"; continue; fi  # Table 1's ②
        # shellcheck disable=SC2046
        table2_ckpt[$row]=$(train_model "table2_row${row}_${rule}" "$out/bin" ib $(table2_flags "$row"))
    done
fi

# 6. BLEU (GNMT length penalty 0.6 over the n-best list) and latency at batch size 1.
"$python" "$repo/scripts/papers/ib_eval.py" --data "$out/bin" --bpe-codes "$out/bpecodes" --src "$test.$src" --ref "$test.$tgt" \
    --source-lang "$src" --target-lang "$tgt" "${models[@]}" --beams $beams --alpha 0.6 --ib-finalize "$ib_finalize" \
    --latency-sentences "$latency_sentences" --runs "$latency_runs" --device "$device" --dtype "$dtype" --json "$out/table1.json"
if [ -n "$table2" ]; then
    t2=()
    for row in $table2_rows; do t2+=(--model "T2-${row}-${table2_names[$row]}=ib-beam:${table2_ckpt[$row]}"); done
    echo "Table 2 (from scratch, beam 4, rule $rule):"
    "$python" "$repo/scripts/papers/ib_eval.py" --data "$out/bin" --bpe-codes "$out/bpecodes" --src "$test.$src" \
        --ref "$test.$tgt" --source-lang "$src" --target-lang "$tgt" "${t2[@]}" --beams 4 --alpha 0.6 \
        --ib-finalize "$ib_finalize" --runs 0 --device "$device" --dtype "$dtype" --json "$out/table2.json"
fi

# 7. Table 3: test-set perplexity (fairseq-validate; per target token, EOS included: with
#    --rule paper every model's target is its sentence and one EOS, so the counts agree).
if [ -n "$table3" ]; then
    ppl() {  # TASK CHECKPOINT → the test set's perplexity (the task's options come from the checkpoint)
        "$bin/fairseq-validate" "$out/bin" --user-dir "$repo/fairseq_stream" --task "$1" --path "$2" --valid-subset test \
            --max-tokens "$max_tokens" --log-format simple $cpu 2>&1 | sed -n "s/.*valid on 'test' subset.*| ppl \([0-9.]*\).*/\1/p" | tail -1
    }
    echo "Table 3 (test perplexity, rule $rule):"
    echo "| | Left-to-Right | Bidirectional |"
    echo "|---|---|---|"
    echo "| Autoregressive | $(ppl translation "$teacher") | $(ppl translation_ib "${table2_ckpt[2]}") |"
    echo "| Semi-Autoregressive | $(ppl translation_ib "${table2_ckpt[6]}") | $(ppl translation_ib "${table2_ckpt[1]}") |"
fi
