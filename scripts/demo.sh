#!/usr/bin/env bash
# Install (see scripts/install.sh), then run the demo: the shipped Spanish→English model
# translates 50 held-out verses with six strategies (about a minute after the install);
# --full: all ten of the demo on 200 verses. Extra arguments go to the demo (--help).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/install.sh"
venv="${FAIRSEQ_STREAM_VENV:-$repo/.venv}"
python="$venv/bin/python"
[ "$venv" = "none" ] && python="${PYTHON:-python3}"
cd "$repo"
exec "$python" -m fairseq_stream.tools.demo "$@"
