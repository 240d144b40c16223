#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install dependencies, build, then
# rudnn-info (what the default context gets, which plugins load) and a short
# benchmark of the normalization ops, on the default backend (OpenCL on PoCL when
# there is no GPU). README.md's Quick start says the same; keep them together.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then bash tools/install-deps.sh; else sudo bash tools/install-deps.sh; fi
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dtests=enabled
ninja -C "$build"
plugins=$(find "$build/backends" -name 'librudnn-*.so' -printf '%h:' 2>/dev/null)
export RUDNN_BACKEND_PATH="${plugins%:}"
"$build/tools/rudnn-info"
"$build/bench/rudnn-bench" --quick --reps 5
