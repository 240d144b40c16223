#!/usr/bin/env bash
# The test command: configure (if needed), build, run every cmocka suite, and
# print a closing "N passed, N failed, N skipped" line.
#   tools/test.sh [builddir] [extra meson setup options...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dtests=enabled "$@"
fi
ninja -C "$build"
status=0
meson test -C "$build" --print-errorlogs --num-processes 2 || status=$?
python3 tools/test_summary.py "$build/meson-logs/testlog.json"
exit $status
