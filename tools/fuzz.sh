#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz/fuzz_<family>) on the OpenCL backend, each from its
# seed corpus with tests/fuzz/fuzz.dict and a fixed seed, and prints one line per target:
#   fuzz_<family>: <inputs> inputs, <seconds> s, <crashes> crashes[, artifact <file>]
# Exits 1 when any target crashed (a sanitizer report, a contract violation, a leak, a
# timeout); the input that did it is in <builddir>/fuzz-artifacts/<family>/.
#   tools/fuzz.sh [-b builddir] [-n inputs] [-j jobs] [-s seed] [-T seconds] [-c] [family...]
#     -b  build folder (default build-fuzz; configured here with CC=clang if it is not yet)
#     -n  inputs per target (default 1000000)
#     -j  targets run at the same time (default 1: one after the other)
#     -s  libFuzzer -seed (default 1)
#     -T  stop each target after this many seconds too (default: no limit)
#     -c  start from the seeds alone (empty the work folder first): what CI does, reproducible
#     family...  default: every target the build made
# New inputs that add coverage go to <builddir>/fuzz-work/<family>/ (kept for the next run
# unless -c), never into the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=build-fuzz runs=1000000 jobs=1 seed=1 max_time=0 clean=0
while getopts "b:n:j:s:T:c" opt; do
  case $opt in
    b) build=$OPTARG ;;
    n) runs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    s) seed=$OPTARG ;;
    T) max_time=$OPTARG ;;
    c) clean=1 ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" -Dfuzz=enabled -Dcuda=disabled -Dhip=disabled -Dopencl=enabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized -Dtests=enabled
fi
ninja -C "$build" -j2 >/dev/null

families=("$@")
if [ ${#families[@]} -eq 0 ]; then
  for exe in "$build"/tests/fuzz/fuzz_*; do
    [ -x "$exe" ] && [ -f "$exe" ] && families+=("${exe##*/fuzz_}")
  done
fi
[ ${#families[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets in $build (configure with -Dfuzz=enabled)"; exit 1; }

export RUDNN_BACKEND=opencl
export RUDNN_BACKEND_PATH="$root/$build/backends/opencl"
export RUDNN_CACHE_DIR="${RUDNN_CACHE_DIR:-$root/$build/test-cache}"
# The autotune cache file cannot be written (a path under /dev/null): the winners stay in memory,
# as with a read-only cache. The fuzzer's shapes are nearly all distinct, and every store rewrites
# the whole file (O(entries)): a writable file grew to 15k entries within one run and took the
# attention target from 280 to 60 inputs/s. The file itself has its own suite (test_autotune).
export RUDNN_AUTOTUNE_CACHE=/dev/null/rudnn-fuzz-autotune.txt
export ASAN_OPTIONS=detect_leaks=1
# the suites' suppressions (GPU drivers) and the fuzz targets' own, joined by the build
export LSAN_OPTIONS="suppressions=$root/$build/tests/fuzz/fuzz-lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# One target: libFuzzer's own log in <builddir>/fuzz-<family>.log, the summary line on stdout.
run_one() {
  local f=$1
  local work="$root/$build/fuzz-work/$f" artifacts="$root/$build/fuzz-artifacts/$f/"
  local log="$root/$build/fuzz-$f.log"
  [ "$clean" -eq 1 ] && rm -rf "$work"
  mkdir -p "$work" "$artifacts"
  local limit=()
  [ "$max_time" -gt 0 ] && limit=(-max_total_time="$max_time")
  local t0=$SECONDS status=0
  FZ_ARTIFACT_PREFIX="$artifacts" nice "$root/$build/tests/fuzz/fuzz_$f" -runs="$runs" -seed="$seed" "${limit[@]}" \
    -max_len=512 -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
    -dict="$root/tests/fuzz/fuzz.dict" -artifact_prefix="$artifacts" \
    "$work" "$root/tests/fuzz/corpus/$f" >"$log" 2>&1 || status=$?
  local seconds=$((SECONDS - t0))
  local inputs
  inputs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)
  [ -n "$inputs" ] || inputs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
  local artifact
  artifact=$(grep -o -E '(Test unit|input) written to .*' "$log" | sed -E 's/.* written to //' | tail -n 1 || true)
  local crashes=0
  [ "$status" -ne 0 ] && crashes=1
  echo "fuzz_$f: ${inputs:-0} inputs, $seconds s, $crashes crashes${artifact:+, artifact $artifact}"
  if [ "$status" -ne 0 ]; then
    grep -E '^fuzz:|ERROR:|runtime error|SUMMARY' "$log" | head -n 32 | sed 's/^/  /'
    return 1
  fi
}

failed=0
pids=()
for f in "${families[@]}"; do
  if [ "$jobs" -le 1 ]; then
    run_one "$f" || failed=1
  else
    run_one "$f" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
  fi
done
for p in "${pids[@]}"; do
  wait "$p" || failed=1
done
exit $failed
