#!/usr/bin/env bash
# Packs prebuilt A/B variants of the CUDA plugin for `tools/gpu-ab.sh -p DIR`. Run it here, where
# nvcc compiles but no GPU runs; then carry DIR to the GPU machine. There gpu-ab.sh only links
# each variant's plugin (seconds) instead of building every variant (minutes of device time).
#
#   tools/gpu-pack.sh DIR [-v NAME=CUDA_ARGS@FILE[:SRC][,FILE[:SRC]...]] ...
#
#   DIR   a folder git ignores (e.g. build-pack; build*/ is ignored), made anew. It gets:
#         objs.tar.xz, the build's plugin objects (variant "base");
#         link-flags, the plugin's link flags from the build;
#         core/, bench/ and tests/, librudnn, the benchmarks and the test programs (their RUNPATH
#         finds ../core);
#         v/NAME/*.o.xz, each variant's objects that differ from base.
#   -v    a variant. CUDA_ARGS is a comma-separated nvcc argument list, as in gpu-ab.sh -v (empty:
#         the build's own). FILE is a plugin source under backends/cuda (e.g. ffn_mma_w4.cu):
#         the objects compiled again with CUDA_ARGS. FILE:SRC compiles SRC (e.g. an edited copy
#         kept outside backends/) in place of FILE.
#
# Environment: BUILD, a configured build folder with cuda enabled (default: build). It is brought
# up to date first (the plugin, librudnn, the benchmarks and the tests).
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
if (( $# < 1 )) || [[ $1 == -* ]]; then
  echo "usage: tools/gpu-pack.sh DIR [-v NAME=CUDA_ARGS@FILE[:SRC][,...]] ..." >&2
  exit 2
fi
dir=$1
shift
BUILD=${BUILD:-build}
build=$(cd "$BUILD" && pwd)
objdir=backends/cuda/librudnn-cuda.so.p
[[ -d $build/$objdir ]] || { echo "gpu-pack.sh: $BUILD has no CUDA plugin (cuda enabled?)" >&2; exit 1; }

variants=()
while (( $# )); do
  case $1 in
    -v) variants+=("$2"); shift 2 ;;
    *) echo "gpu-pack.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

targets=$(ninja -C "$build" -t targets all)
mapfile -t programs < <(grep -oE '^(bench/rudnn-bench[a-z-]*|tests/test_[a-z_]*):' <<< "$targets" | tr -d :)
lib=$(grep -oE '^core/librudnn\.so[0-9.]*:' <<< "$targets" | tr -d : | head -n 1)
ninja -C "$build" backends/cuda/librudnn-cuda.so "$lib" "${programs[@]}" >/dev/null

rm -rf "$dir"
mkdir -p "$dir/core" "$dir/bench" "$dir/tests" "$dir/v"
dir=$(cd "$dir" && pwd)
(cd "$build/$objdir" && tar cf - ./*.o) | xz -3 -T2 > "$dir/objs.tar.xz"
cp -L "$build/core/librudnn.so.0" "$dir/core/"
for p in "${programs[@]}"; do cp "$build/$p" "$dir/${p%%/*}/"; done
# the link step without its output and objects (gpu-ab.sh -p adds them)
(cd "$build" && ninja -t commands backends/cuda/librudnn-cuda.so | tail -n 1) |
  sed -e 's#^\S*nvcc *##' -e "s#-o backends/cuda/librudnn-cuda.so##" -e "s#$objdir/[^ ]*\.o##g" > "$dir/link-flags"

commands=$(cd "$build" && ninja -t commands backends/cuda/librudnn-cuda.so)
for spec in "${variants[@]}"; do
  name=${spec%%=*} rest=${spec#*=}
  cuda_args=${rest%%@*} files=${rest#*@}
  [[ $name && $rest == *@* && $files ]] || { echo "gpu-pack.sh: -v $spec: NAME=CUDA_ARGS@FILE..." >&2; exit 2; }
  mkdir -p "$dir/v/$name"
  IFS=, read -r -a list <<< "$files"
  IFS=, read -r -a extra <<< "$cuda_args"
  for item in "${list[@]}"; do
    file=${item%%:*} src=../backends/cuda/$file
    [[ $item == *:* ]] && src=$(cd "$(dirname "${item#*:}")" && pwd)/$(basename "${item#*:}")
    cmd=$(grep -F -- "-o $objdir/$file.o -c" <<< "$commands" || true)
    [[ $cmd ]] || { echo "gpu-pack.sh: $file is not a source of the CUDA plugin" >&2; exit 1; }
    out=$dir/v/$name/$file.o
    from="-o $objdir/$file.o -c ../backends/cuda/$file"
    # the build's own object must never be the output: stop where its command has another form
    [[ $cmd == *"$from"* ]] || { echo "gpu-pack.sh: unexpected compile command for $file: $cmd" >&2; exit 1; }
    cmd=${cmd/"$from"/"-o $out -c $src"}
    echo "gpu-pack.sh: $name: $file${cuda_args:+ with $cuda_args}"
    # shellcheck disable=SC2086  # the build's own command line, split as ninja would
    (cd "$build" && eval "$cmd ${extra[*]:-}")
    xz -3 -f "$out"
  done
done
du -sh "$dir"
