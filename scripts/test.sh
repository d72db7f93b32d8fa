#!/usr/bin/env bash
# Install (see scripts/install.sh), then run the tests. By default the fast tier (pytest -m "not slow");
# --all, or FAIRSEQ_STREAM_TEST_ALL=1, runs every test, as CI does. Other arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tier=(-m "not slow")
args=()
for arg in "$@"; do
  if [ "$arg" = "--all" ]; then tier=(); else args+=("$arg"); fi
done
[ "${FAIRSEQ_STREAM_TEST_ALL:-0}" = "1" ] && tier=()
bash "$repo/scripts/install.sh"
venv="${FAIRSEQ_STREAM_VENV:-$repo/.venv}"
python="$venv/bin/python"
[ "$venv" = "none" ] && python="${PYTHON:-python3}"
cd "$repo"
# pytest exits with 5 when it collects no tests; set -e turns that into a failure too.
# A -m of the caller's comes after the tier's and wins.
exec "$python" -m pytest tests -q ${tier[@]+"${tier[@]}"} ${args[@]+"${args[@]}"}
