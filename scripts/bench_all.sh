#!/usr/bin/env bash
# The benchmarks quoted in the README's Results, one section per paper, on the demo model.
#
#   bash scripts/bench_all.sh [var|zsweep|jacobi|output-layer|demo ...]   (default: all)
#
# Every table comes from one process that interleaves and repeats its strategies
# (python -m fairseq_stream.bench), so the ratios in a table are measured in one run.
# THREADS (default 1) sets torch's CPU threads; OUT (default bench_out) receives the
# Markdown logs, the JSON rows and the per-step traces. Needs the installed environment
# (scripts/install.sh); nothing here is part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
THREADS=${THREADS:-1}
OUT=${OUT:-bench_out}
mkdir -p "$OUT"
bench() { PYTHONPATH=. "$PYTHON" -m fairseq_stream.bench --threads "$THREADS" --no-progress "$@"; }

var() {  # paper 000 Tables 4-7 on the demo model: k = 5 and k = 50, 500 sentences
    bench --limit 500 --repeats 2 --json "$OUT/k5.json" --trace-dir "$OUT/traces_k5" \
        --run beam:beam=5,label=fairseq-beam --run fixed-ours:beam=5,stream_capacity=32 \
        --run var-batch:beam=5,stream_capacity=32 --run var-stream:beam=5,stream_capacity=32 \
        --run var-fifo:beam=5,stream_capacity=32 --run topup:beam=5,stream_capacity=32 \
        --run beam:beam=1,label=fairseq-greedy | tee "$OUT/k5.md"
    bench --limit 500 --repeats 1 --json "$OUT/k50.json" --trace-dir "$OUT/traces_k50" \
        --run beam:beam=50,label=fairseq-beam --run fixed-ours:beam=50,stream_capacity=16 \
        --run var-batch:beam=50,stream_capacity=16 --run var-stream:beam=50,stream_capacity=16 \
        --run var-fifo:beam=50,stream_capacity=16 --run beam:beam=1,label=fairseq-greedy | tee "$OUT/k50.md"
    "$PYTHON" scripts/step_cost.py "$OUT"/traces_k5/*.json "$OUT"/traces_k50/*.json | tee "$OUT/step_cost.md"
}

zsweep() {  # --beam-final-count at k = 50 (the App. A.1 rule ends a sentence after Z finals)
    bench --limit 200 --repeats 3 --json "$OUT/zsweep50.json" \
        --run beam:beam=50,label=fairseq-beam --run var-stream:beam=50,stream_capacity=16,beam_final_count=1,label=Z=1 \
        --run var-stream:beam=50,stream_capacity=16,beam_final_count=5,label=Z=5 \
        --run var-stream:beam=50,stream_capacity=16,beam_final_count=10,label=Z=10 \
        --run var-stream:beam=50,stream_capacity=16,beam_final_count=50,label=Z=50 \
        --run var-stream:beam=50,stream_capacity=16,beam_finalize=fairseq,label=fairseq-rule | tee "$OUT/zsweep50.md"
}

jacobi() {  # paper 004 Table 1 protocol on the demo model: batch 1 and batch 32, 300 sentences
    for bs in 1 32; do
        bench --limit 300 --repeats 2 --batch-size "$bs" --json "$OUT/jacobi_b$bs.json" \
            --run beam:beam=1,label=greedy-fairseq --run fixed-ours:beam=1,stream_capacity=$bs,label=greedy-ours \
            --run jacobi:beam=1,stream_capacity=$bs,label=PJ --run gs-jacobi:beam=1,stream_capacity=$bs,jacobi_block=3,label=PGJ-b3 \
            --run gs-jacobi:beam=1,stream_capacity=$bs,jacobi_block=5,label=PGJ-b5 \
            --run hybrid-jacobi:beam=1,stream_capacity=$bs,jacobi_block=3,label=HGJ-b3 \
            --run gs-jacobi:beam=1,stream_capacity=$bs,jacobi_block=3,jacobi_init=tail,label=PGJ-b3-tail | tee "$OUT/jacobi_b$bs.md"
    done
}

output-layer() {  # paper 002 Tables 2-3: the output layer per step, and end to end
    PYTHONPATH=. "$PYTHON" scripts/bench_output_layer.py --threads "$THREADS" --end-to-end 200 | tee "$OUT/output_layer.md"
}

demo() { PYTHONPATH=. "$PYTHON" -m fairseq_stream.demo | tee "$OUT/demo.md"; }

sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(demo var zsweep jacobi output-layer)
for s in "${sections[@]}"; do
    case "$s" in
        var|zsweep|jacobi|output-layer|demo) "$s" ;;
        *) echo "bench_all.sh: unknown section '$s' (var, zsweep, jacobi, output-layer, demo)" >&2; exit 2 ;;
    esac
done
