#!/usr/bin/env bash
# The GPU check in one command, for a fresh GPU machine without internet: install the project over
# the machine's CUDA torch, run the gpu-marked tests, decode the GPU rows, write ONE report.
#
#   bash scripts/gpu_check.sh [--wheels DIR] [--ib-path CKPT] [--out DIR] [--no-install] [--dry-run] [--short]
#                             [--parts "tests rows output profile train ct2 frontier"] [--rows-args "..."]
#
# Install: a venv with --system-site-packages (GPU_VENV, default .venv-gpu) so that the CUDA torch
# already installed is used; scripts/install.sh runs in it with FAIRSEQ_STREAM_KEEP_TORCH=1 (its
# torch and triton pins are skipped). --wheels DIR installs from those wheels only (no index):
# the pinned packages, and torch itself if none imports. PYTHON (default python3) is the
# interpreter with the CUDA torch; --no-install uses PYTHON as it is (the way the first GPU run
# went: an offline kit installed fairseq-fixed and this project with `pip install --target`, put
# both on PYTHONPATH, then `bash scripts/gpu_check.sh --no-install`; pytest and ninja were there).
#
# Rows (scripts/gpu/gpu_rows.py, one process; scripts/gpu/gpu_report.py writes $OUT/gpu_report.md):
# per dtype (--dtypes, default "float32 float16"), on the demo model and a 32k-vocabulary
# Transformer-base-sized model with random weights (scripts/models/make_base_model.py --vocab 32000; every
# sentence forced to 40 tokens):
#   batched  300 sentences: fairseq beam vs fixed-ours and var-stream, k = 5 and k = 50
#   batch1     8 sentences at batch 1: fairseq greedy vs fixed-ours:beam=1 and gs-jacobi b = 3
#   ib       ib-beam k = 5 on --ib-path (300 sentences; listed as skipped without it)
#   ibbase   ib-beam beam 4 at batch 1 on an IBDecoder of the base model's size (make_base_model.py
#            --ib, random weights, forced lengths), beside fairseq's and fixed-ours' beam 4 at batch 1
#            on the base model
# each row: 2 untimed warm-ups (a graph row replays every step from its third run on), the median of 3 timed runs, costs from 3 more runs over 20 sentences
# (counted and profiled: slow, most of a batch-1 table's time); then the output-layer
# micro-benchmark (V = 32k, beams 1/5/50, batches 1/32/128) per dtype; then scripts/gpu/gpu_profile.py
# (float32, demo, k = 5, 300 sentences: host against device time, top operators, host-read sites).
# Time on one H100 (2026-11-25, measured): install 62 s, gpu tests 78 s, per dtype ~7 min of rows
# (demo batched 124-170 s, demo batch1 ~70 s, base batched ~120 s, base batch1 ~80 s), output layer
# ~30 s per dtype: ~17 min in all, before the ibbase rows were added (estimate: 1-2 more minutes
# per dtype; not yet timed on a GPU), and the profile (~1 min, estimate). Where one command may run 10 minutes, split it:
#   bash scripts/gpu_check.sh --dtypes float32 --out A; bash scripts/gpu_check.sh --no-install --skip-tests --dtypes float16 --out B
# Tables not started within ROWS_BUDGET_S (720 s) are listed as skipped.
#
# --short: the check for a lease of ~15 minutes of device time in all (one call of < 6 minutes after
# the install): float16, the gpu tests (at most 150 s), the rows with 100 sentences (batch 1: 4), two
# warm-ups and 2 timed runs, no cost runs, eager and graph side by side (tables not started by 200 s
# skipped), the profile over 100 sentences and the output layer; what it leaves out is said in the
# report. The round-3 call (docs/history/results-2026-11.md) ran its rows alone, graph only, in 135 s on an H100.
#
# Every row of ours runs in each --step-mode of gpu_rows.py's --step-modes (default eager and graph on
# CUDA, eager and static in a dry run), side by side; the report gives each graph row's time against its
# eager twin and how many steps were replayed. --parts chooses what runs (default all): tests (pytest -m
# gpu), rows (scripts/gpu/gpu_rows.py; --rows-args "..." adds its options, e.g. "--tables batched --models
# demo --limit 200 --repeats 2 --costs-limit 0"), output (the output-layer micro-benchmark), profile
# (scripts/gpu/gpu_profile.py: eager and graph, GPU busy), train (scripts/gpu/gpu_train_speed.py: IBDecoder
# training tokens/s against the transformer's), ct2 (scripts/bench/bench_vs_ctranslate2.py --device cuda:
# CTranslate2 float16 / int8_float16 beside our graph rows, or why it could not run) and frontier
# (fairseq-stream-frontier --device cuda at k = 5). Each part writes its file under OUT as it ends, so
# a call stopped at its time limit still returns what finished.
#
# --dry-run (or DEVICE=cpu): the same flow on the CPU with tiny sizes (2 sentences, outputs forced
# to 4 tokens, beams 5 and 8, 1 timed run, a 1-layer 64-wide 32k base model, float16 skipped, no
# install unless --install), GPU-only columns n/a: the test suite runs it (tests/integration/test_scripts.py).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
DEVICE=${DEVICE:-cuda}
ROWS_BUDGET_S=${ROWS_BUDGET_S:-720}
PYTHON=${PYTHON:-python3}
install=1; install_set=0; wheels=""; ib=""; tests=1; dtypes="float32 float16"
parts="tests rows output profile train ct2 frontier"; rows_args=""; short=0
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DEVICE=cpu ;;
        --short) short=1 ;;
        --no-install) install=0; install_set=1 ;;
        --install) install=1; install_set=1 ;;
        --wheels) wheels=$(cd "${2:?--wheels needs a folder}" && pwd); shift ;;
        --ib-path) ib=${2:?--ib-path needs a checkpoint}; shift ;;
        --dtypes) dtypes=${2:?--dtypes needs a list, e.g. "float32 float16"}; shift ;;
        --skip-tests) tests=0 ;;
        --parts) parts=${2:?--parts needs a list, e.g. "tests rows"}; shift ;;
        --rows-args) rows_args=${2?--rows-args needs a string}; shift ;;
        --out) OUT=${2:?--out needs a folder}; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$short" = 1 ]; then  # one short call: fewer sentences and runs, the slowest parts left out
    [ "$parts" = "tests rows output profile train ct2 frontier" ] && parts="tests rows profile output"
    if [ "$DEVICE" != cpu ]; then  # a dry run keeps its tiny sizes and float32
        dtypes=float16; rows_args="--limit 100 --batch1-limit 4 --repeats 2 --costs-limit 0 $rows_args"
    fi
    ROWS_BUDGET_S=${ROWS_BUDGET_S_SHORT:-200}; PROFILE_LIMIT=${PROFILE_LIMIT:-100}; TESTS_TIMEOUT=${TESTS_TIMEOUT:-150}
fi
for p in $parts; do case "$p" in tests|rows|output|profile|train|ct2|frontier) ;; *) echo "gpu_check.sh: --parts: unknown part '$p'" >&2; exit 2 ;; esac; done
has_part() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for d in $dtypes; do case "$d" in float32|float16|bfloat16) ;; *) echo "gpu_check.sh: --dtypes: unknown dtype '$d' (float32, float16, bfloat16)" >&2; exit 2 ;; esac; done
[ -n "${dtypes// /}" ] || { echo "gpu_check.sh: --dtypes: give at least one dtype" >&2; exit 2; }
[ -z "$ib" ] || [ -f "$ib" ] || { echo "gpu_check.sh: --ib-path '$ib': no such file" >&2; exit 2; }
[ "$DEVICE" = cpu ] && [ "$install_set" = 0 ] && install=0  # a dry run tests the flow, not pip
mkdir -p "$OUT"
log() { echo "gpu_check.sh: $*" >&2; }

install_project() {  # a --system-site-packages venv over the CUDA torch, then scripts/install.sh in it
    local venv=${GPU_VENV:-.venv-gpu}
    [ -z "$wheels" ] || export PIP_NO_INDEX=1 PIP_FIND_LINKS="$wheels"
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$venv"
    if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
        [ -n "$wheels" ] || { log "no torch in $PYTHON: install a CUDA torch first, or give its wheel with --wheels DIR"; exit 2; }
        "$venv/bin/python" -m pip install -q --disable-pip-version-check torch
    fi
    FAIRSEQ_STREAM_VENV="$venv" FAIRSEQ_STREAM_KEEP_TORCH=1 bash scripts/install.sh
    PYTHON="$venv/bin/python"
    echo "installed in $venv (--system-site-packages; torch kept: FAIRSEQ_STREAM_KEEP_TORCH=1)" > "$OUT/install.txt"
}

gpu_tests() {  # the gpu-marked tests; their summary goes into the report, a failure does not stop the check
    local rc=0
    ${TESTS_TIMEOUT:+timeout "$TESTS_TIMEOUT"} "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider tests > "$OUT/gpu_tests.log" 2>&1 || rc=$?
    { echo "pytest exit status $rc$([ "$rc" = 5 ] && echo ': no gpu test was collected')$([ "$rc" = 124 ] && echo ": stopped after ${TESTS_TIMEOUT} s (--short)")"; echo; echo '```'
      tail -n 3 "$OUT/gpu_tests.log"; echo '```'; } > "$OUT/gpu_tests.txt"
}

rows() {  # the base model, then every table in one process
    local base=(--layers 6 --dim 512) sizes=(--limit 300 --batch1-limit 8 --costs-limit 20 --repeats 3)
    if [ "$DEVICE" = cpu ]; then
        base=(--layers 1 --dim 64)
        sizes=(--limit 2 --batch1-limit 1 --costs-limit 1 --repeats 1 --demo-length 4 --base-length 4 --big-beam 8 --threads 1)
    fi
    "$PYTHON" scripts/models/make_base_model.py --out "$OUT/base32k/checkpoint.pt" --vocab 32000 "${base[@]}" >&2
    "$PYTHON" scripts/models/make_base_model.py --out "$OUT/ib32k/checkpoint.pt" --vocab 32000 --ib "${base[@]}" >&2
    rm -f "$OUT"/rows_*.json
    # shellcheck disable=SC2086  # --rows-args is a list of options
    # two warm-ups on a GPU: a graph row's first run captures while its cache slabs grow, its second replays every step
    local warm=2; [ "$DEVICE" = cpu ] && warm=1
    "$PYTHON" scripts/gpu/gpu_rows.py --out "$OUT" --device "$DEVICE" --dtypes $dtypes \
        --base "$OUT/base32k/checkpoint.pt" --ib-base "$OUT/ib32k/checkpoint.pt" ${ib:+--ib-path "$ib"} --warmup "$warm" --budget-s "$ROWS_BUDGET_S" "${sizes[@]}" $rows_args
}

train_speed() {  # IBDecoder training tokens/s against the standard transformer of the same size
    local sizes=()
    [ "$DEVICE" = cpu ] && sizes=(--updates 4 --log-interval 1 --layers 1 --dim 64 --limit 100)
    "$PYTHON" scripts/gpu/gpu_train_speed.py --device "$DEVICE" --out "$OUT" "${sizes[@]}" > /dev/null \
        || echo "scripts/gpu/gpu_train_speed.py failed (exit status $?)" > "$OUT/train_speed.md"
}

ct2() {  # CTranslate2 on the same GPU, beside our graph rows (a dry run: not run, CTranslate2 benchmarks CPUs there)
    if [ "$DEVICE" = cpu ]; then echo "not run: a CPU dry run (scripts/bench/bench_vs_ctranslate2.py without --device cuda is the CPU benchmark)" > "$OUT/ct2.md"; return; fi
    "$PYTHON" scripts/bench/bench_vs_ctranslate2.py --device cuda --limit 200 --limit-k50 40 --repeats 2 --json "$OUT/ct2.json" \
        > "$OUT/ct2.md" 2> "$OUT/ct2.log" || echo "scripts/bench/bench_vs_ctranslate2.py failed (exit status $?): $(tail -n 1 "$OUT/ct2.log")" >> "$OUT/ct2.md"
}

frontier() {  # the quality/speed frontier's k = 5 side on the device
    local sizes=(--limit 300 --deltas 1 1.5 2 3 --scales 0 2 --device "$DEVICE")
    [ "$DEVICE" = cpu ] && sizes=(--limit 3 --deltas 1.5 --scales 0 --device cpu)
    "$PYTHON" -m fairseq_stream.tools.frontier --beam 5 "${sizes[@]}" --out "$OUT/frontier" > /dev/null 2> "$OUT/frontier.log" \
        || echo "fairseq_stream.tools.frontier failed (exit status $?): $(tail -n 1 "$OUT/frontier.log")" > "$OUT/frontier.md"
}

output_layer() {  # the micro-benchmark, per dtype
    local dtype
    for dtype in $dtypes; do
        if [ "$DEVICE" = cpu ]; then
            if [ "$dtype" = float16 ]; then echo "skipped: float16 runs on a GPU only (a CPU dry run)" > "$OUT/output_layer_$dtype.md"; continue; fi
            "$PYTHON" scripts/bench/bench_output_layer.py --vocab 1000 --beam 5 --batch 2 --dim 32 --repeats 1 --threads 1 \
                > "$OUT/output_layer_$dtype.md"
        else
            "$PYTHON" scripts/bench/bench_output_layer.py --device cuda --dtype "$dtype" --vocab 32000 --beam 1 5 50 \
                --batch 1 32 128 --repeats 20 > "$OUT/output_layer_$dtype.md"
        fi
    done
}

profile() {  # where a k = 5 decode's time goes (host against device, top operators, host-read sites)
    local sizes=(--limit "${PROFILE_LIMIT:-300}")
    [ "$DEVICE" = cpu ] && sizes=(--limit 2 --threads 1)
    "$PYTHON" scripts/gpu/gpu_profile.py --device "$DEVICE" "${sizes[@]}" --out "$OUT/profile.md" >&2 \
        || echo "scripts/gpu/gpu_profile.py failed (exit status $?): see the log above" > "$OUT/profile.md"
}

start=$SECONDS
if [ "$install" = 1 ]; then log "installing"; install_project; else echo "not installed by this run: $PYTHON used as it is" > "$OUT/install.txt"; fi
"$PYTHON" -c "import torch, sys; sys.exit(0 if '$DEVICE' == 'cpu' or torch.cuda.is_available() else 1)" \
    || { log "torch in $PYTHON sees no GPU (use --dry-run for the CPU flow)"; exit 2; }
report() { "$PYTHON" scripts/gpu/gpu_report.py "$OUT" --title "fairseq-stream GPU check ($DEVICE$([ "$DEVICE" = cpu ] && echo ', dry run'))" > /dev/null 2>&1 || true; }
if [ "$tests" = 1 ] && has_part tests; then log "gpu-marked tests"; gpu_tests; else echo "not run" > "$OUT/gpu_tests.txt"; fi
if has_part rows; then log "rows ($DEVICE)"; rows; report; fi
if has_part profile; then log "profile"; profile; fi
if has_part train; then log "training speed"; train_speed; fi
if has_part output; then log "output layer"; output_layer; fi
if has_part frontier; then log "frontier"; frontier; fi
if has_part ct2; then log "CTranslate2"; ct2; fi
"$PYTHON" scripts/gpu/gpu_report.py "$OUT" --title "fairseq-stream GPU check ($DEVICE$([ "$DEVICE" = cpu ] && echo ', dry run'))" > /dev/null
# one archive of the rows and parts (a GPU lease returns few files; the checkpoints stay out)
(cd "$OUT" && tar czf gpu_check_parts.tgz $(ls rows_*.json skipped.json ./*.md ./*.txt ./*.log ./*.json 2>/dev/null | sort -u)) || true
log "done in $((SECONDS - start)) s: $OUT/gpu_report.md (parts: $OUT/gpu_check_parts.tgz)"
