#!/usr/bin/env bash
# The default test suite: every tier but `slow` (tests/conftest.py describes the tiers), on two
# pytest-xdist workers, with the 25 slowest tests listed at the end. CI (.ci/run) runs this after
# setup and the torch-free floor.
#   bash scripts/test.sh                 the engine tier beside the fast tier: one worker starts on the
#                                        engines while the other takes the fast tier, then both share it
#   bash scripts/test.sh --engine after  the fast tier on both workers, then the engine tier alone
# Further arguments go to pytest (e.g. -x). Exit code: pytest's; collecting no test at all fails.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=beside
if [ "${1:-}" = "--engine" ]; then
  engine="${2:?--engine needs beside or after}"
  shift 2
fi
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25)

run() {  # pytest's exit code, 5 (no test collected) turned into a failure
  local rc=0
  "${PYTEST[@]}" "$@" || rc=$?
  if [ "$rc" = 5 ]; then
    echo "scripts/test.sh: pytest collected no tests ($*); failing" >&2
    rc=1
  fi
  return "$rc"
}

case "$engine" in
  beside)
    run -m "not slow" -n 2 "$@"
    ;;
  after)
    rc=0
    run -m "not slow and not engine" -n 2 "$@" || rc=$?
    run -m "engine and not slow" "$@" || rc=$((rc ? rc : $?))
    exit "$rc"
    ;;
  *)
    echo "scripts/test.sh: --engine $engine: use beside or after" >&2
    exit 2
    ;;
esac
