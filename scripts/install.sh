#!/usr/bin/env bash
# Install fairseq-stream and its pinned dependencies into a virtual environment (.venv by
# default; FAIRSEQ_STREAM_VENV=path to choose another, FAIRSEQ_STREAM_VENV=none to install
# into the current Python). Safe to re-run: what is installed already is skipped. --help prints
# this and installs nothing.
#
# The order matters: fairseq must be built without build isolation (with isolation pip
# downloads a multi-GB CUDA torch just to build it), so torch, cython, numpy, setuptools and
# wheel come first; torch is pinned because a bare "torch" pulls a CUDA build.
# FAIRSEQ_STREAM_KEEP_TORCH=1 keeps a torch that already imports (a CUDA build on a GPU machine, e.g.
# in a venv made with --system-site-packages): neither the torch pin nor the triton pin is applied
# then, since either would replace it (or its matching triton) with this project's CPU pins.
set -euo pipefail
for arg in "$@"; do  # --help: this header, before anything is installed
    case "$arg" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;; esac
done
# One line per stage on stderr, with its time (pip itself stays quiet: -q), so a slow stage
# shows where it is: "install: [3/7] fairseq-fixed 0.12.3.1: building its C++ and Cython extensions (the slow stage, ...) ... 202 s".
stages=7 stage_no=0 install_start=$SECONDS
stage() {  # stage "what" command...: runs the command, then prints its line
    local what=$1 start=$SECONDS
    shift
    stage_no=$((stage_no + 1))
    printf 'install: [%d/%d] %s ...' "$stage_no" "$stages" "$what" >&2
    "$@"
    printf ' %d s\n' "$((SECONDS - start))" >&2
}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FAIRSEQ_STREAM_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"

if [ "$venv" != "none" ]; then
    [ -x "$venv/bin/python" ] && stage "virtual environment $venv (exists)" true \
        || stage "virtual environment $venv" "$python" -m venv "$venv"
    python="$venv/bin/python"
else
    stage "no virtual environment: $python" true
fi
pip=("$python" -m pip install --disable-pip-version-check -q)

torch_pin=(torch==2.13.0)
triton_pin=(triton==3.9.0)
if [ "${FAIRSEQ_STREAM_KEEP_TORCH:-0}" = 1 ] && "$python" -c "import torch" 2>/dev/null; then
    echo "keeping torch $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')" >&2
    torch_pin=()
    if "$python" -c "import triton" 2>/dev/null; then triton_pin=(); fi
fi
stage "torch${torch_pin[*]+ ${torch_pin[*]#torch==}} and build tools" \
    "${pip[@]}" ${torch_pin[@]+"${torch_pin[@]}"} cython==3.3.1 numpy==2.4.6 setuptools==84.2.1 wheel==0.48.0 ninja==1.13.2

# The C++ kernels (ops/csrc), built once per machine into ~/.cache/fairseq_stream (otherwise the
# first decoding run stops for each in turn, ~40 s each). They need only torch and ninja, so they
# build in the background, from this checkout's sources and without importing fairseq, while
# fairseq builds; the last stage waits for them. Same sources, same cache key as the installed copy.
kernel_log="$(mktemp)"
"$python" - "$repo/fairseq_stream" >"$kernel_log" 2>&1 <<'EOF_KERNELS' &
import sys, types
package = types.ModuleType("fairseq_stream")  # bare: its __init__ imports fairseq, not built yet
package.__path__ = [sys.argv[1]]
sys.modules["fairseq_stream"] = package
from fairseq_stream.ops.kernels import prebuild
sys.exit(1 if prebuild(write=lambda m: "FAILED" in m and print(m, file=sys.stderr)) else 0)
EOF_KERNELS
kernel_pid=$!

if "$python" -c "import fairseq" 2>/dev/null; then
    stage "fairseq (installed)" true
elif "$python" -m pip cache list 2>/dev/null | grep -q "fairseq_fixed-0.12.3.1-"; then
    stage "fairseq-fixed 0.12.3.1 (pip's cached wheel)" "${pip[@]}" --no-build-isolation fairseq-fixed==0.12.3.1
else
    # The slow stage: three C++ extensions against torch's headers and two Cython ones, one at a time
    # (torch's ninja backend writes one build.ninja per build folder, so setuptools' parallel
    # build_ext races: tried, and an object file went missing). The kernels use the other core meanwhile.
    # pip keeps the wheel it builds: a second venv on this machine skips this stage.
    stage "fairseq-fixed 0.12.3.1: building its C++ and Cython extensions (the slow stage, ~2-3 min on 2 cores, once per machine)" \
        "${pip[@]}" --no-build-isolation fairseq-fixed==0.12.3.1
fi
stage "text tools, pytest, matplotlib" "${pip[@]}" sacremoses==0.2.0 subword-nmt==0.3.8 sacrebleu==2.6.0 \
    pytest==9.2.0 pytest-xdist==3.8.0 hypothesis==6.170.15 matplotlib==3.10.8
# Triton: the GPU output-layer kernels; on a CPU only its interpreter runs them (the tests).
if [ ${#triton_pin[@]} -eq 0 ]; then stage "triton (kept)" true; else stage "triton" "${pip[@]}" "${triton_pin[@]}"; fi
# A regular (not editable) install: fairseq finds --user-dir fairseq_stream in site-packages
# from any directory. --no-deps: everything it needs is installed above. setuptools builds in
# build/ and would ship modules left there by an older layout: start from an empty one.
rm -rf "$repo/build"
stage "fairseq-stream" "${pip[@]}" --no-build-isolation --no-deps --force-reinstall "$repo"
wait_kernels() {  # a kernel that failed to build is named; its callers use the PyTorch path (exact too)
    wait "$kernel_pid" || true
    if [ -s "$kernel_log" ]; then printf '\n  %s' "$(cat "$kernel_log")" >&2; fi
    rm -f "$kernel_log"
}
stage "C++ kernels (built alongside fairseq, once per machine)" wait_kernels
echo "install: fairseq-stream installed in $("$python" -c 'import sys; print(sys.prefix)') in $((SECONDS - install_start)) s" >&2
