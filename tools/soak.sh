#!/usr/bin/env bash
# Long leak run: the lifetime loops of tests/test_lifetime.c with 10^6 object cycles (CI runs
# 10^5) and 200 context cycles on the default backend, printing RSS, device memory and seconds.
#   tools/soak.sh [builddir] [cycles] [context cycles]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ninja -C "$build" tests/test_lifetime
plugins=$(find "$PWD/$build/backends" -name 'librudnn-*.so' -printf '%h\n' | sort -u | paste -sd:)
RUDNN_BACKEND_PATH=$plugins RUDNN_CACHE_DIR="$PWD/$build/test-cache" \
  RUDNN_LIFETIME_CYCLES=${2:-1000000} RUDNN_LIFETIME_CONTEXTS=${3:-200} \
  "$build/tests/test_lifetime" cycles
