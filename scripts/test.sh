#!/usr/bin/env bash
# Install (see scripts/install.sh), then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/install.sh"
venv="${FAIRSEQ_STREAM_VENV:-$repo/.venv}"
python="$venv/bin/python"
[ "$venv" = "none" ] && python="${PYTHON:-python3}"
cd "$repo"
# pytest exits with 5 when it collects no tests; set -e turns that into a failure too.
exec "$python" -m pytest tests -q "$@"
