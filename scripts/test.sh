#!/usr/bin/env bash
# Install (see scripts/install.sh), then run the tests, one tier of three:
#   (default) or --quick: the quick tier (pytest -m quick): the fast tier with a parametrized test's
#             first case only: one case of every exactness test and every CLI contract;
#   --fast:   the fast tier (pytest -m "not slow"): every case, no model training, no whole scripts;
#   --all:    every test, as CI does (.ci/run); FAIRSEQ_STREAM_TEST_ALL=1 does the same.
# Their times: README.md ("Tests"); each run ends with its 15 slowest tests (--durations), so a slow
# tier says where its minutes went. Other arguments go to pytest; a -m of the caller's comes after the
# tier's and wins (and a --durations of the caller's after this one). --help prints this and installs nothing.
set -euo pipefail
for arg in "$@"; do  # --help: this header, before anything is installed
    case "$arg" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0;; esac
done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tier=(-m quick) name="quick tier (-m quick; --fast, --all for more)"
args=()
for arg in "$@"; do
  case "$arg" in
    --quick) tier=(-m quick) name="quick tier (-m quick)" ;;
    --fast) tier=(-m "not slow") name="fast tier (-m \"not slow\")" ;;
    --all) tier=() name="every test" ;;
    *) args+=("$arg") ;;
  esac
done
[ "${FAIRSEQ_STREAM_TEST_ALL:-0}" = "1" ] && tier=() name="every test"
# Every tier runs on every core (pytest-xdist, a test file per worker, each with one torch thread:
# tests/conftest.py), up to 4 workers. --all (CI) too, since 2026-12-01: in one process the whole suite
# took ~85 min on an AVX2-only 2-core AMD EPYC (CI's limit is 90); the slow tests' fixtures are per
# worker (tmp_path_factory), so a tiny model a file needs may be trained once in each worker.
workers=()
cores=$(nproc 2>/dev/null || echo 1)
if [ "$cores" -gt 1 ]; then workers=(-n "$(( cores < 4 ? cores : 4 ))" --dist loadfile); fi
bash "$repo/scripts/install.sh"
venv="${FAIRSEQ_STREAM_VENV:-$repo/.venv}"
python="$venv/bin/python"
[ "$venv" = "none" ] && python="${PYTHON:-python3}"
cd "$repo"
echo "test.sh: $name${workers[*]+, ${workers[1]} workers}" >&2
# pytest exits with 5 when it collects no tests; set -e turns that into a failure too.
exec "$python" -m pytest tests -q --durations=15 --durations-min=1 ${workers[@]+"${workers[@]}"} ${tier[@]+"${tier[@]}"} ${args[@]+"${args[@]}"}
