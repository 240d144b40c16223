#!/usr/bin/env bash
# A/B of compile-time variants on the GPU machine, side by side in one run: builds each
# variant in its own folder (in parallel, through tools/gpu-suite.sh build), then runs every
# benchmark command on each variant in turn, ROUNDS times (A B A B ...), so that clock and
# thermal drift spread over all of them. JSON lines go to $OUT/ab.jsonl with "variant" added.
#
#   tools/gpu-ab.sh [-r ROUNDS] -v NAME=CUDA_ARGS ... -- 'BENCH ARGS' ...
#
#   -v NAME=CUDA_ARGS   a variant; CUDA_ARGS is a comma-separated nvcc argument list for meson's
#                       cuda_args (empty: the committed defaults), e.g. -v old=-DRDG_ROUTE_FAST=0
#   BENCH ARGS          a benchmark binary of the build folder and its arguments, e.g.
#                       'bench/rudnn-bench-moe --backend cuda --case mixtral --only forward'
#
# Environment: OUT (default ./gpu-out), AB_TIMEOUT (seconds per benchmark run, default 300), and
# those of tools/gpu-suite.sh (DEBROOT, CUDA_ARCH, MESON_ARGS, ...).
set -u
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root" || exit 1
OUT=${OUT:-$repo_root/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

rounds=2
ab_timeout=${AB_TIMEOUT:-300}
names=()
args=()
while (( $# )); do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -v) names+=("${2%%=*}"); args+=("${2#*=}"); shift 2 ;;
    --) shift; break ;;
    *) echo "gpu-ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if (( ${#names[@]} < 1 || $# < 1 )); then
  echo "usage: tools/gpu-ab.sh [-r ROUNDS] -v NAME=CUDA_ARGS ... -- 'BENCH ARGS' ..." >&2
  exit 2
fi

pids=()
for i in "${!names[@]}"; do
  extra=""
  # meson's list literal (no spaces: gpu-suite.sh splits MESON_ARGS on them)
  [[ -n ${args[$i]} ]] && extra="-Dcuda_args=['${args[$i]//,/\',\'}']"
  BUILD=build-ab-${names[$i]} OUT=$OUT/build-${names[$i]} MESON_ARGS="${MESON_ARGS:-} $extra" \
    bash tools/gpu-suite.sh build > "$OUT/build-${names[$i]}.log" 2>&1 &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "gpu-ab.sh: build of variant ${names[$i]} failed (tail of its log:)"
    tail -30 "$OUT/build-${names[$i]}.log"
    rc=1
  fi
done
(( rc == 0 )) || exit 1

DEBROOT=${DEBROOT:-/tmp/debroot}
export LD_LIBRARY_PATH=$DEBROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
: > "$OUT/ab.jsonl"
for cmd in "$@"; do
  for ((r = 0; r < rounds; r++)); do
    for i in "${!names[@]}"; do
      b=$repo_root/build-ab-${names[$i]}
      echo "== gpu-ab: round $r variant ${names[$i]}: $cmd"
      # shellcheck disable=SC2086
      RUDNN_BACKEND_PATH=$b/backends/cuda:$b/backends/opencl timeout "$ab_timeout" "$b"/$cmd 2>&1 |
        sed -n "s/^{\(.*\)}$/{\"variant\":\"${names[$i]}\",\"round\":$r,\1}/p" | tee -a "$OUT/ab.jsonl"
    done
  done
done
