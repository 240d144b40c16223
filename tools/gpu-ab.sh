#!/usr/bin/env bash
# A/B of compile-time variants on the GPU machine, side by side in one run: builds each
# variant in its own folder (in parallel, through tools/gpu-suite.sh build), then runs every
# benchmark command on each variant in turn, ROUNDS times (A B A B ...), so that clock and
# thermal drift spread over all of them. JSON lines go to $OUT/ab.jsonl with "variant" added.
#
#   tools/gpu-ab.sh [-r ROUNDS] [-f FILE] -v NAME=CUDA_ARGS ... -n NAME=DEFINES ... -- 'BENCH ARGS' ...
#
#   -v NAME=CUDA_ARGS   a variant; CUDA_ARGS is a comma-separated nvcc argument list for meson's
#                       cuda_args (empty: the committed defaults), e.g. -v old=-DRDG_MOE_FAST_SILU=0
#   -n NAME=DEFINES     a variant of one source file only (FILE, default norm.cu): DEFINES, a
#                       comma-separated list of MACRO=VALUE (empty: the defaults), go into
#                       rdg_variant.h in the build folder of backends/cuda, which FILE includes
#                       when it exists. The -n variants share one build folder (build-ab-one)
#                       and rebuild FILE alone, one after the other, each plugin copied aside: a
#                       fraction of a full build's time. E.g. -n base= -n pf2=RDG_PF_DEPTH=2
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
one_file=norm.cu
names=()
args=()
one_names=()
one_defs=()
while (( $# )); do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -f) one_file=$2; shift 2 ;;
    -v) names+=("${2%%=*}"); args+=("${2#*=}"); shift 2 ;;
    -n) one_names+=("${2%%=*}"); one_defs+=("${2#*=}"); shift 2 ;;
    --) shift; break ;;
    *) echo "gpu-ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if (( ${#names[@]} + ${#one_names[@]} < 1 || $# < 1 )); then
  echo "usage: tools/gpu-ab.sh [-r ROUNDS] [-f FILE] -v NAME=CUDA_ARGS ... -n NAME=DEFINES ... -- 'BENCH ARGS' ..." >&2
  exit 2
fi

# where each variant's binaries and plugins are (the -n variants: build-ab-one's binaries)
declare -A bin_dir plugin_path
for n in "${names[@]}"; do
  bin_dir[$n]=$repo_root/build-ab-$n
  plugin_path[$n]=$repo_root/build-ab-$n/backends/cuda:$repo_root/build-ab-$n/backends/opencl
done

one_build() { # the -n variants, one after the other in build-ab-one
  local b=$repo_root/build-ab-one
  BUILD=build-ab-one OUT=$OUT/build-one bash tools/gpu-suite.sh build > "$OUT/build-one.log" 2>&1 || return 1
  local obj
  obj=$(find "$b/backends/cuda" -name "$one_file.o" | head -1)
  if [[ -z $obj ]]; then
    echo "gpu-ab.sh: no object for $one_file in $b/backends/cuda" >&2
    return 1
  fi
  # the defaults' plugin, put back afterwards: later stages (gpu-suite.sh bench, gpu-profile.sh)
  # that use this folder without building would otherwise run the last variant
  mkdir -p "$OUT/plugins"
  cp "$b"/backends/cuda/librudnn-cuda.so "$OUT/plugins/defaults.so"
  local i
  for i in "${!one_names[@]}"; do
    local hdr=$b/backends/cuda/rdg_variant.h d
    : > "$hdr"
    IFS=',' read -ra defs <<< "${one_defs[$i]}"
    for d in "${defs[@]}"; do
      [[ -n $d ]] && echo "#define ${d%%=*} ${d#*=}" >> "$hdr"
    done
    rm -f "$obj" # the header is found through __has_include: ninja does not know it yet
    ninja -C "$b" backends/cuda/librudnn-cuda.so >> "$OUT/build-one.log" 2>&1 || return 1
    mkdir -p "$OUT/plugins/${one_names[$i]}"
    cp "$b"/backends/cuda/librudnn-cuda.so "$OUT/plugins/${one_names[$i]}/"
    bin_dir[${one_names[$i]}]=$b
    plugin_path[${one_names[$i]}]=$OUT/plugins/${one_names[$i]}:$b/backends/opencl
  done
  rm -f "$b/backends/cuda/rdg_variant.h" "$obj" # the next build compiles the defaults again
  cp "$OUT/plugins/defaults.so" "$b"/backends/cuda/librudnn-cuda.so
}

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
if (( ${#one_names[@]} )) && ! one_build; then
  echo "gpu-ab.sh: one-file variants failed (tail of $OUT/build-one.log:)"
  tail -30 "$OUT/build-one.log"
  rc=1
fi
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
    for n in "${names[@]}" "${one_names[@]}"; do
      echo "== gpu-ab: round $r variant $n: $cmd"
      # shellcheck disable=SC2086
      RUDNN_BACKEND_PATH=${plugin_path[$n]} timeout "$ab_timeout" "${bin_dir[$n]}"/$cmd 2>&1 |
        sed -n "s/^{\(.*\)}$/{\"variant\":\"$n\",\"round\":$r,\1}/p" | tee -a "$OUT/ab.jsonl"
    done
  done
done
