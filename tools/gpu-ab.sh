#!/usr/bin/env bash
# A/B of compile-time variants on the GPU machine, side by side in one run: builds each
# variant in its own folder (in parallel, through tools/gpu-suite.sh build; with nvcc through
# ccache the first one alone before the others, which then recompile only what their -D values
# change), then runs every
# benchmark command on each variant in turn, ROUNDS times (A B, B A, ...), so that clock and
# thermal drift spread over all of them. JSON lines go to $OUT/ab.jsonl with "variant" added.
#
#   tools/gpu-ab.sh [-r ROUNDS] -v NAME=CUDA_ARGS ... -t NAME=DIR ... -- 'BENCH ARGS' ...
#   tools/gpu-ab.sh [-r ROUNDS] -p PACK [-T 'TEST ARGS'] ... -- 'BENCH ARGS' ...
#
#   -v NAME=CUDA_ARGS   a variant; CUDA_ARGS is a comma-separated nvcc argument list for meson's
#                       cuda_args (empty: the committed defaults), e.g. -v lineinfo=-lineinfo
#   -t NAME=DIR         a variant built from another source tree DIR (e.g. an older commit's
#                       checkout, carried along), by DIR's own tools/gpu-suite.sh, into
#                       DIR/build-ab-NAME; DIR shares this tree's .debs. Benchmark arguments must
#                       be ones both trees' binaries accept.
#   -p PACK             prebuilt variants instead (tools/gpu-pack.sh PACK ..., made on a machine
#                       without a GPU and carried): "base" and each of PACK/v/*, each plugin linked
#                       here from PACK's objects in seconds; the commands run PACK's binaries.
#                       Each variant gets a build folder's layout, $AB_PACK_WORK/NAME/build
#                       (default /tmp/gpu-ab-pack), where gpu-suite.sh's benchmark stages run
#                       (BUILD=/tmp/gpu-ab-pack/base/build tools/gpu-suite.sh gdr). With no
#                       BENCH ARGS, -p only links and tests.
#   -T 'TEST ARGS'      (with -p) a test program of PACK and its arguments, e.g. tests/test_ffn, run
#                       once on each variant before the benchmarks: its exit status printed, its
#                       output in $OUT/test-NAME-N.log (AB_TEST_VARIANTS="base ...": those only)
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
tree_names=()
tree_dirs=()
pack=""
tests=()
while (( $# )); do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -p) pack=$(cd "$2" && pwd); shift 2 ;;
    -T) tests+=("$2"); shift 2 ;;
    -v) names+=("${2%%=*}"); args+=("${2#*=}"); shift 2 ;;
    -t) tree_names+=("${2%%=*}"); tree_dirs+=("$(cd "${2#*=}" && pwd)"); shift 2 ;;
    --) shift; break ;;
    *) echo "gpu-ab.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ $pack ]] && (( ${#names[@]} + ${#tree_names[@]} > 0 )); then
  echo "gpu-ab.sh: -p takes its variants from the pack, not from -v / -t" >&2
  exit 2
fi
if [[ -z $pack ]] && (( ${#names[@]} + ${#tree_names[@]} < 1 || $# < 1 || ${#tests[@]} > 0 )); then
  echo "usage: tools/gpu-ab.sh [-r ROUNDS] -v NAME=CUDA_ARGS ... -t NAME=DIR ... -- 'BENCH ARGS' ..." >&2
  echo "       tools/gpu-ab.sh [-r ROUNDS] -p PACK [-T 'TEST ARGS'] ... -- 'BENCH ARGS' ..." >&2
  exit 2
fi
DEBROOT=${DEBROOT:-/tmp/debroot}

# where each variant's binaries and plugins are
declare -A bin_dir plugin_path
for n in "${names[@]}"; do
  bin_dir[$n]=$repo_root/build-ab-$n
  plugin_path[$n]=$repo_root/build-ab-$n/backends/cuda:$repo_root/build-ab-$n/backends/opencl
done

for i in "${!tree_names[@]}"; do
  n=${tree_names[$i]} d=${tree_dirs[$i]}
  bin_dir[$n]=$d/build-ab-$n
  plugin_path[$n]=$d/build-ab-$n/backends/cuda:$d/build-ab-$n/backends/opencl
done

# Prebuilt: each variant's plugin linked from the pack's objects (its own objects over base's),
# the programs the pack's; cmocka (the tests) from .debs. Then straight to the runs.
if [[ $pack ]]; then
  work=${AB_PACK_WORK:-/tmp/gpu-ab-pack}
  rm -rf "$work"
  mkdir -p "$work/base/o"
  tar xJf "$pack/objs.tar.xz" -C "$work/base/o"
  names=(base)
  for v in "$pack"/v/*/; do [[ -d $v ]] && names+=("$(basename "$v")"); done
  read -r -a link_flags < <(sed "s/'//g" "$pack/link-flags")
  pids=()
  for n in "${names[@]}"; do
    if [[ $n != base ]]; then
      mkdir -p "$work/$n/o"
      cp "$work"/base/o/*.o "$work/$n/o/"
      for f in "$pack/v/$n"/*.o.xz; do xz -dc "$f" > "$work/$n/o/$(basename "${f%.xz}")"; done
    fi
    # a build folder's layout, for gpu-suite.sh's benchmark stages: BUILD=$work/NAME/build
    mkdir -p "$work/$n/build/backends/cuda"
    for d in bench core tests; do ln -sfn "$pack/$d" "$work/$n/build/$d"; done
    nvcc -o "$work/$n/build/backends/cuda/librudnn-cuda.so" "$work/$n"/o/*.o "${link_flags[@]}" > "$OUT/link-$n.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "gpu-ab.sh: linking variant ${names[$i]} failed:"; cat "$OUT/link-${names[$i]}.log"; exit 1; }
    bin_dir[${names[$i]}]=$pack
    plugin_path[${names[$i]}]=$work/${names[$i]}/build/backends/cuda
  done
  if [[ ! -e $DEBROOT/usr/lib/x86_64-linux-gnu/libcmocka.so.0 ]] && compgen -G ".debs/libcmocka0_*.deb" >/dev/null; then
    mkdir -p "$DEBROOT"
    dpkg -x .debs/libcmocka0_*.deb "$DEBROOT"
  fi
  echo "gpu-ab.sh: prebuilt variants ${names[*]}"
fi

# one ccache for every variant, the -t trees' builds too (their gpu-suite.sh keeps a CCACHE_DIR given)
export CCACHE_DIR=${CCACHE_DIR:-$repo_root/build-ccache}
if [[ -z $pack ]]; then
pids=()
names_of_pids=()
build_variant() {
  local extra=""
  # meson's list literal (no spaces: gpu-suite.sh splits MESON_ARGS on them)
  [[ -n ${args[$1]} ]] && extra="-Dcuda_args=['${args[$1]//,/\',\'}']"
  BUILD=build-ab-${names[$1]} OUT=$OUT/build-${names[$1]} MESON_ARGS="${MESON_ARGS:-} $extra" \
    bash tools/gpu-suite.sh build > "$OUT/build-${names[$1]}.log" 2>&1
}
# With nvcc through ccache (gpu-suite.sh: a ccache in .debs or on the machine, RUDNN_CCACHE not 0),
# the first variant builds alone: the others then compile only the files their -D values change.
first=0
if (( ${#names[@]} > 1 )) && [[ ${RUDNN_CCACHE:-1} != 0 ]] &&
   { compgen -G ".debs/ccache*.deb" >/dev/null || command -v ccache >/dev/null; }; then
  echo "gpu-ab.sh: building variant ${names[0]} first (ccache)"
  if ! build_variant 0; then
    echo "gpu-ab.sh: build of variant ${names[0]} failed (tail of its log:)"
    tail -30 "$OUT/build-${names[0]}.log"
    exit 1
  fi
  first=1
fi
for ((i = first; i < ${#names[@]}; i++)); do
  build_variant "$i" &
  pids+=($!)
  names_of_pids+=("${names[$i]}")
done
for i in "${!tree_names[@]}"; do
  d=${tree_dirs[$i]}
  [[ -e $d/.debs || ! -d $repo_root/.debs ]] || ln -s "$repo_root/.debs" "$d/.debs"
  (cd "$d" && BUILD=build-ab-${tree_names[$i]} OUT=$OUT/build-${tree_names[$i]} bash tools/gpu-suite.sh build) \
    > "$OUT/build-${tree_names[$i]}.log" 2>&1 &
  pids+=($!)
  names_of_pids+=("${tree_names[$i]}")
done
rc=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "gpu-ab.sh: build of variant ${names_of_pids[$i]} failed (tail of its log:)"
    tail -30 "$OUT/build-${names_of_pids[$i]}.log"
    rc=1
  fi
done
(( rc == 0 )) || exit 1
fi

export LD_LIBRARY_PATH=$DEBROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for i in "${!tests[@]}"; do
  for n in ${AB_TEST_VARIANTS:-${names[*]}}; do
    # shellcheck disable=SC2086
    RUDNN_BACKEND=${RUDNN_BACKEND:-cuda} RUDNN_BACKEND_PATH=${plugin_path[$n]} timeout "$ab_timeout" \
      "${bin_dir[$n]}"/${tests[$i]} > "$OUT/test-$n-$i.log" 2>&1
    echo "== gpu-ab: test variant $n: ${tests[$i]}: exit status $? ($OUT/test-$n-$i.log)"
  done
done
: > "$OUT/ab.jsonl"
for cmd in "$@"; do
  for ((r = 0; r < rounds; r++)); do
    # odd rounds run the variants in reverse order (A B, B A, ...), so that none always goes first
    order=("${names[@]}" "${tree_names[@]}")
    if (( r % 2 )); then
      rev=()
      for ((j = ${#order[@]} - 1; j >= 0; j--)); do rev+=("${order[$j]}"); done
      order=("${rev[@]}")
    fi
    for n in "${order[@]}"; do
      echo "== gpu-ab: round $r variant $n: $cmd"
      # shellcheck disable=SC2086
      RUDNN_BACKEND_PATH=${plugin_path[$n]} timeout "$ab_timeout" "${bin_dir[$n]}"/$cmd 2>&1 |
        sed -n "s/^{\(.*\)}$/{\"variant\":\"$n\",\"round\":$r,\1}/p" | tee -a "$OUT/ab.jsonl"
    done
  done
done
