#!/usr/bin/env bash
# Install (see scripts/install.sh), then run the demo: the shipped Spanish→English model
# translates 50 held-out verses with six strategies (about a minute after the install);
# --full: all ten of the demo on 200 verses. Other arguments go to the demo (its options:
# python -m fairseq_stream.tools.demo --help); --help prints this and installs nothing.
set -euo pipefail
for arg in "$@"; do  # --help: this header, before anything is installed
    case "$arg" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;; esac
done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/install.sh"
venv="${FAIRSEQ_STREAM_VENV:-$repo/.venv}"
python="$venv/bin/python"
[ "$venv" = "none" ] && python="${PYTHON:-python3}"
cd "$repo"
exec "$python" -m fairseq_stream.tools.demo "$@"
