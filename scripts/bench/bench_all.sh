#!/usr/bin/env bash
# The benchmarks quoted in docs/results.md, one section per paper, on the demo model.
#
#   bash scripts/bench/bench_all.sh [var|zsweep|oversubscribe|jacobi|output-layer|demo|engine|gpu ...]   (default: the CPU ones)
#
# Every table comes from one process that interleaves and repeats its strategies
# (python -m fairseq_stream.tools.bench), so the ratios in a table are measured in one run.
# THREADS (default 1) sets torch's CPU threads; DEVICE (cpu|cuda, default cpu) and DTYPE
# (float32|float16|bfloat16, default float32) where the models run; OUT (default bench_out) receives the
# Markdown logs, the JSON rows and the per-step traces. PYTHON (default .venv/bin/python, else
# python3) is the interpreter of the installed environment (scripts/install.sh); fairseq's console
# scripts are taken from beside it. Nothing here is part of the test suite; scripts/gpu_check.sh
# is the one-command GPU check (install, gpu tests, these rows in fp32 and fp16, one report).
set -euo pipefail
case "${1-}" in  # --help: this header, before anything runs
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;;
esac
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
THREADS=${THREADS:-1}
DEVICE=${DEVICE:-cpu}
DTYPE=${DTYPE:-float32}
OUT=${OUT:-bench_out}
mkdir -p "$OUT"
bench() { PYTHONPATH=. "$PYTHON" -m fairseq_stream.tools.bench --threads "$THREADS" --device "$DEVICE" --dtype "$DTYPE" --no-progress "$@"; }

var() {  # Yang2020 Tables 4-7 on the demo model: k = 5 and k = 50, 500 sentences
    bench --limit 500 --repeats 2 --json "$OUT/k5.json" --trace-dir "$OUT/traces_k5" \
        --run beam:beam=5,label=fairseq-beam --run fixed-ours:beam=5,stream_capacity=32 \
        --run var-batch:beam=5,stream_capacity=32 --run var-stream:beam=5,stream_capacity=32,prune_auto=false \
        --run var-fifo:beam=5,stream_capacity=32 --run topup:beam=5,stream_capacity=32 \
        --run beam:beam=1,label=fairseq-greedy | tee "$OUT/k5.md"
    bench --limit 500 --repeats 1 --json "$OUT/k50.json" --trace-dir "$OUT/traces_k50" \
        --run beam:beam=50,label=fairseq-beam --run fixed-ours:beam=50,stream_capacity=16 \
        --run var-batch:beam=50,stream_capacity=16 --run var-stream:beam=50,stream_capacity=16,prune_auto=false \
        --run var-fifo:beam=50,stream_capacity=16 --run beam:beam=1,label=fairseq-greedy | tee "$OUT/k50.md"
    "$PYTHON" scripts/experiments/step_cost.py "$OUT"/traces_k5/*.json "$OUT"/traces_k50/*.json | tee "$OUT/step_cost.md"
}

zsweep() {  # --beam-final-count at k = 50 (the App. A.1 rule ends a sentence after Z finals)
    bench --limit 200 --repeats 3 --json "$OUT/zsweep50.json" \
        --run beam:beam=50,label=fairseq-beam --run var-stream:beam=50,stream_capacity=16,beam_final_count=1,label=Z=1 \
        --run var-stream:beam=50,stream_capacity=16,beam_final_count=5,label=Z=5 \
        --run var-stream:beam=50,stream_capacity=16,beam_final_count=10,label=Z=10 \
        --run var-stream:beam=50,stream_capacity=16,beam_final_count=50,label=Z=50 \
        --run var-stream:beam=50,stream_capacity=16,beam_finalize=fairseq,label=fairseq-rule | tee "$OUT/zsweep50.md"
}

oversubscribe() {  # Yang2020 §3: a candidate budget C per step, with and without over-subscription
    bench --limit 300 --repeats 2 --json "$OUT/oversubscribe.json" \
        --run var-stream:beam=5,stream_capacity=8,label=k5-capacity-8 \
        --run var-stream:beam=5,stream_max_candidates=40,label=k5-C40 \
        --run var-stream:beam=5,stream_max_candidates=40,stream_capacity=32,stream_oversubscribe=true,label=k5-C40-oversubscribed-n32 \
        --run var-stream:beam=10,stream_max_candidates=40,label=k10-C40 \
        --run var-stream:beam=10,stream_max_candidates=40,stream_capacity=32,stream_oversubscribe=true,label=k10-C40-oversubscribed-n32 \
        | tee "$OUT/oversubscribe.md"
}

jacobi() {  # Santilli2023 Table 1 protocol on the demo model: batch 1 and batch 32, 300 sentences
    for bs in 1 32; do
        bench --limit 300 --repeats 2 --batch-size "$bs" --json "$OUT/jacobi_b$bs.json" \
            --run beam:beam=1,label=greedy-fairseq --run fixed-ours:beam=1,stream_capacity=$bs,label=greedy-ours \
            --run jacobi:beam=1,stream_capacity=$bs,label=PJ --run gs-jacobi:beam=1,stream_capacity=$bs,jacobi_block=3,label=PGJ-b3 \
            --run gs-jacobi:beam=1,stream_capacity=$bs,jacobi_block=5,label=PGJ-b5 \
            --run hybrid-jacobi:beam=1,stream_capacity=$bs,jacobi_block=3,label=HGJ-b3 \
            --run gs-jacobi:beam=1,stream_capacity=$bs,jacobi_block=3,jacobi_init=tail,label=PGJ-b3-tail | tee "$OUT/jacobi_b$bs.md"
    done
}

output-layer() {  # Hoang2018 Tables 2-3: the output layer per step, and end to end
    PYTHONPATH=. "$PYTHON" scripts/bench/bench_output_layer.py --threads "$THREADS" --end-to-end 200 | tee "$OUT/output_layer.md"
}

demo() { PYTHONPATH=. "$PYTHON" -m fairseq_stream.tools.demo --full | tee "$OUT/demo.md"; }

engine() {  # the GPU engine's proxies, measurable anywhere: host reads and aten ops per decoder step
    bench --limit 100 --repeats 1 --costs --json "$OUT/engine.json" \
        --run beam:beam=5,label=fairseq-beam --run var-stream:beam=5,stream_capacity=32 \
        --run fixed-ours:beam=5,stream_capacity=32 --run gs-jacobi:beam=1,jacobi_block=3,stream_capacity=32 \
        --run gs-jacobi:beam=1,jacobi_block=3,stream_capacity=1,label=gs-jacobi-batch1 | tee "$OUT/engine.md"
}

# fairseq's console scripts (fairseq-preprocess, fairseq-generate) of $PYTHON's environment: beside
# the interpreter (a venv's bin), else on PATH (a --user or system install)
console() {
    local bin
    bin=$("$PYTHON" -c 'import os, sys; print(os.path.dirname(sys.executable))')
    if [ -x "$bin/$1" ]; then echo "$bin/$1"; else command -v "$1" || { echo "bench_all.sh: $1 not found beside $PYTHON or on PATH" >&2; exit 2; }; fi
}

# timed LABEL CMD...: run CMD (its output to $OUT/LABEL.log) and print "LABEL: N.NN s", the wall time
# by this shell's clock (no /usr/bin/time needed)
timed() {
    local label=$1 start end; shift
    start=$(date +%s.%N)
    "$@" > "$OUT/${label// /_}.log" 2>&1 || echo "$label: failed (see $OUT/${label// /_}.log)"
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v l="$label" 'BEGIN { printf "%s: %.2f s\n", l, e - s }'
}

gpu() {  # the GPU rows of docs/results.md (unmeasured here): run with DEVICE=cuda (and DTYPE=float16 for the fp16 rows)
    [ "$DEVICE" = cuda ] || { echo "bench_all.sh gpu: set DEVICE=cuda" >&2; exit 2; }
    local preprocess generate
    preprocess=$(console fairseq-preprocess)  # found (or refused) before any GPU time is spent
    generate=$(console fairseq-generate)
    # the demo model, then a Transformer-base-sized model with a 32k vocabulary (random weights:
    # speed rows only, every sentence forced to 40 tokens)
    "$PYTHON" scripts/models/make_base_model.py --out "$OUT/base/checkpoint.pt" --vocab 32000
    for model in demo base; do
        data=user_dir_examples/demo; fix=""
        [ "$model" = base ] && { data="$OUT/base"; fix=",min_len=40,max_len_a=0,max_len_b=40"; }
        gbench() { bench --data "$data" --path "$data/checkpoint.pt" --warmup 1 "$@"; }
        gbench --limit 500 --repeats 3 --pool-size 0 --json "$OUT/gpu_${model}_k5.json" \
            --run "beam:beam=5$fix,label=fairseq-beam" --run "var-stream:beam=5,stream_capacity=128$fix" \
            --run "fixed-ours:beam=5,stream_capacity=128$fix" | tee "$OUT/gpu_${model}_k5.md"
        gbench --limit 500 --repeats 3 --pool-size 0 --json "$OUT/gpu_${model}_k50.json" \
            --run "beam:beam=50$fix,label=fairseq-beam" --run "var-stream:beam=50,stream_capacity=64$fix" \
            | tee "$OUT/gpu_${model}_k50.md"
        gbench --limit 60 --repeats 3 --batch-size 1 --json "$OUT/gpu_${model}_b1.json" \
            --run "beam:beam=1$fix,label=greedy-fairseq" --run "fixed-ours:beam=1,stream_capacity=1$fix,label=greedy-ours" \
            --run "gs-jacobi:beam=1,jacobi_block=3,stream_capacity=1$fix,label=PGJ-b3" | tee "$OUT/gpu_${model}_b1.md"
    done
    PYTHONPATH=. "$PYTHON" scripts/bench/bench_output_layer.py --device cuda --vocab 32000 --beam 5 --batch 32 128 \
        | tee "$OUT/gpu_output_layer.md"
    # the per-process pause (kernel build, compile) in fairseq-generate: whole runs, cold processes
    mkdir -p "$OUT/gen_raw"
    for lang in es en; do
        head -n 500 "user_dir_examples/demo/test.$lang" | PYTHONPATH=. "$PYTHON" -m fairseq_stream.tools.text tokenize \
            --lang "$lang" --codes user_dir_examples/demo/bpe.codes > "$OUT/gen_raw/test.$lang"
    done
    "$preprocess" --source-lang es --target-lang en --testpref "$OUT/gen_raw/test" \
        --destdir "$OUT/gen_bin" --srcdict user_dir_examples/demo/dict.es.txt \
        --tgtdict user_dir_examples/demo/dict.en.txt --workers 1 > /dev/null
    for search in beam var-stream; do
        timed "fairseq-generate --search $search" "$generate" "$OUT/gen_bin" --user-dir fairseq_stream \
            --path user_dir_examples/demo/checkpoint.pt --search "$search" --beam 5 --batch-size 64 --quiet \
            | tee -a "$OUT/gpu_generate.md"
    done
}

sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(demo var zsweep jacobi output-layer)
for s in "${sections[@]}"; do
    case "$s" in
        var|zsweep|oversubscribe|jacobi|output-layer|demo|engine|gpu) "$s" ;;
        *) echo "bench_all.sh: unknown section '$s' (var, zsweep, oversubscribe, jacobi, output-layer, demo, engine, gpu)" >&2; exit 2 ;;
    esac
done
