#!/usr/bin/env bash
# shellcheck disable=SC2317  # the stage_* functions are called as "stage_$s"
# The one script that builds rudnn, runs the whole test suite and the benchmarks on
# the NVIDIA GPU machine (DESIGN.md sections 6 and 7).
#
#   tools/gpu-suite.sh [STAGE ...]        run from the repository root
#
# Stages, in this order (default: all of them):
#   build     meson setup + ninja: cuda and opencl plugins, tests (hip disabled)
#   test      meson test --print-errorlogs, every suite (cuda, opencl on NVIDIA's driver;
#             hip reports SKIP); testlog.txt is copied to $OUT
#   info      rudnn-info (text and --json)
#   bench     rudnn-bench on cuda (default shapes, all ops, f32 and bf16), then a --quick
#             run on opencl (non-fatal)
#   baseline  bench/baselines/torch_norm.py (same shapes/ops/dtypes; torch.compile of
#             add+rms_norm unless TORCH_COMPILE=0)
#   compare   bench/compare.py -> $OUT/compare.md, printed at the very end
#   moe       rudnn-bench-moe (on cuda also with --kernel moe.cublas_grouped) and
#             bench/baselines/torch_moe.py -> $OUT/compare-moe.md
#   attention rudnn-bench-attention (every strategy) and bench/baselines/torch_attention.py
#             (SDPA, each backend forced), issue 20's cases in bf16 -> $OUT/compare-attention.md
#             and the attention section of $OUT/RESULTS.md
#   ffn       rudnn-bench-ffn and bench/baselines/torch_ffn.py (issue 22's cases) -> $OUT/ffn-*.jsonl
#   gdr       rudnn-bench-gdr and bench/baselines/torch_gdr.py side by side (the gated delta rule in
#             bf16: chunked prefill, varlen prefill beside fixed length, recurrent decode)
#             -> $OUT/gdr-rudnn.jsonl, $OUT/gdr-torch.jsonl
#   paged     rudnn-bench-paged and bench/baselines/torch_paged.py side by side (issue 24: paged decode,
#             varlen prefill, MLA decode in bf16; torch: SDPA cuDNN and FA2 over gathered pages)
#             -> $OUT/paged-rudnn.jsonl, $OUT/paged-torch.jsonl, $OUT/compare-paged.md; rudnn's
#             cases each in its own process (the cache allocated once)
#   vision    rudnn-bench-vision and bench/baselines/torch_vision.py side by side (convolution on
#             ResNet-50's shapes, forward in NCHW and NHWC, data and weight backward on one; max and
#             average pooling, 2x interpolation, grid sampling, forward and backward, in bf16; CTC in
#             F32; torch: cuDNN with cudnn.benchmark, ATen's kernels) -> $OUT/vision-rudnn.jsonl,
#             $OUT/vision-torch.jsonl, $OUT/compare-vision.md (bench/compare_vision.py)
#   example   installs into a scratch DESTDIR and builds examples/ through pkg-config
#   ep2       (only when named; two GPUs: kind nvidia-h200-x2) expert parallelism over NCCL, one
#             process a GPU (RUDNN_DEVICE = the node-local rank): tests/test_ep_mpi --comm=nccl on 2
#             ranks (each case also over MPI, byte for byte), compute-sanitizer memcheck on rank 0
#             of a second run (EP2_SANITIZE_FILTER), rudnn-bench-ep-comm over NCCL and MPI beside
#             bench/baselines/torch_ep.py -> $OUT/ep2-*.log, $OUT/ep2-*.jsonl, $OUT/compare-ep2.md
#   sanitize  (only when named) the CUDA numeric suites under compute-sanitizer's memcheck,
#             racecheck, synccheck and initcheck; fails on any report. The suites' largest cases
#             (SANITIZE_SKIP, a cmocka glob: the same kernels on more rows) are left out, since
#             the tools slow kernels 10-100x. initcheck leaves out the cuBLAS comparison kernels
#             (moe.cublas_*: it reports every read of what cuBLAS's GEMMs wrote as uninitialised,
#             while the suite finds those outputs equal to the reference, so the writes happened
#             where initcheck does not see them). Logs: $OUT/sanitize-TOOL-SUITE-N.log, table
#             in $OUT/sanitize.md
#
# The image has CUDA (nvcc), PyTorch, pip meson+ninja and the NVIDIA driver, but no
# cmocka, CLBlast, OpenCL headers/loader or pkg-config, and no network: those come
# from .debs/ (made by tools/fetch-gpu-debs.sh, carried along), unpacked with
# `dpkg -x` into $DEBROOT (not into /). Nothing is installed into the system except
# an OpenCL ICD file naming NVIDIA's libnvidia-opencl.so.1 by full path.
#
# Environment knobs:
#   OUT=dir              where logs and results go (default ./gpu-out)
#   BUILD=dir            build folder (default build-gpu)
#   DEBROOT=dir          where the .debs are unpacked (default /tmp/debroot)
#   CUDA_ARCH=90a        value of the CUDA SM option (-Dnvcc_arch)
#   MESON_ARGS="..."     extra meson setup arguments
#   MESON_TEST_ARGS="..." extra meson test arguments (e.g. "--suite cuda")
#   NINJA_TARGETS="..."  what the build stage builds (default: everything), e.g. the A/B variants'
#                        "backends/cuda/librudnn-cuda.so bench/rudnn-bench-paged"
#   RUDNN_CCACHE=1       nvcc through ccache (from .debs, where it runs) in build folders set up
#                        now: a build with other -D values recompiles only the files whose
#                        preprocessed source changes (tools/gpu-ab.sh's variants); 0 turns it off.
#                        CCACHE_DIR defaults to build-ccache/ in the repository (kept between
#                        calls on a warm machine)
#   BENCH_ARGS="..."     extra rudnn-bench / torch_norm.py arguments (e.g. "--reps 20")
#   BENCH_DTYPES=f32,bf16
#   BENCH_BACKEND=cuda   the backend rudnn-bench(-moe, -attention) times and compare*.py read
#   ATTENTION_ARGS="..." extra arguments of both rudnn-bench-attention and torch_attention.py
#                        (--reps N, --case NAME[,NAME], --dtype, --quick, --copy-mib N)
#   GDR_ARGS="..."       extra arguments of both rudnn-bench-gdr and torch_gdr.py (--reps N,
#                        --case NAME[,NAME], --quick)
#   PAGED_ARGS="..."     extra arguments of both rudnn-bench-paged and torch_paged.py (--reps N,
#                        --case NAME[,NAME], --quick, --max-cache-gib G)
#   VISION_ARGS="..."    extra arguments of both rudnn-bench-vision and torch_vision.py (--reps N,
#                        --case NAME[,NAME], --quick)
#   TORCH_COMPILE=1      also time torch.compile(add + rms_norm) (0 to skip)
#   EP2_ARGS="..."       extra arguments of both rudnn-bench-ep-comm and torch_ep.py (--bs, --k, --h,
#                        --experts, --dtype, --reps)
#   EP2_SANITIZE_FILTER='dispatch_combine/bf16/*'  the cases memcheck runs (a cmocka glob)
#   EP2_TIMEOUT=900      seconds for each ep2 step
#   SANITIZE_TOOLS="memcheck racecheck synccheck initcheck"
#   SANITIZE_SUITES="norm moe attention ffn gated_delta paged_attention"
#   SANITIZE_SKIP='*/large' (SANITIZE_SKIP_<suite> for one suite; attention: '*/long-*', gated_delta:
#   'long_sequence')
#   SANITIZE_TIMEOUT=480 (seconds per tool and suite)
#   SANITIZE_INITCHECK_SKIP_KERNELS='moe.cublas_*'   SANITIZE_JOBS=4 (runs at once on the GPU)
#   SANITIZE_SHARDS_<suite>="glob ..." (cmocka globs: the suite's parts that run side by side;
#   default for moe: its test families)
set -u
set -o pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root" || exit 1

OUT=${OUT:-$repo_root/gpu-out}
BUILD=${BUILD:-build-gpu}
DEBROOT=${DEBROOT:-/tmp/debroot}
CUDA_ARCH=${CUDA_ARCH:-90a}
MESON_ARGS=${MESON_ARGS:-}
MESON_TEST_ARGS=${MESON_TEST_ARGS:-}
NINJA_TARGETS=${NINJA_TARGETS:-}
BENCH_ARGS=${BENCH_ARGS:-}
BENCH_DTYPES=${BENCH_DTYPES:-f32,bf16}
BENCH_BACKEND=${BENCH_BACKEND:-cuda}
ATTENTION_ARGS=${ATTENTION_ARGS:-}
FFN_ARGS=${FFN_ARGS:-}
GDR_ARGS=${GDR_ARGS:-}
PAGED_ARGS=${PAGED_ARGS:-}
VISION_ARGS=${VISION_ARGS:-}
EP2_ARGS=${EP2_ARGS:-}
EP2_SANITIZE_FILTER=${EP2_SANITIZE_FILTER:-dispatch_combine/bf16/*}
EP2_TIMEOUT=${EP2_TIMEOUT:-900}
TORCH_COMPILE=${TORCH_COMPILE:-1}
SANITIZE_TOOLS=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}
SANITIZE_SUITES=${SANITIZE_SUITES:-norm moe attention ffn gated_delta paged_attention}
SANITIZE_SKIP=${SANITIZE_SKIP:-*/large}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-480}
SANITIZE_INITCHECK_SKIP_KERNELS=${SANITIZE_INITCHECK_SKIP_KERNELS-moe.cublas_*}
SANITIZE_JOBS=${SANITIZE_JOBS:-4}
# racecheck takes over 330 s for the whole MoE suite on the H200: its test families run side by side
SANITIZE_SHARDS_moe=${SANITIZE_SHARDS_moe-route_* dispatch/* pipeline/* pipeline_tensor_core/f32 pipeline_tensor_core/f16 pipeline_tensor_core/bf16}
# attention: a shard per dtype, without the long-* cases (S 200-520: the same kernels on more tiles)
SANITIZE_SHARDS_attention=${SANITIZE_SHARDS_attention-f32/* f16/* bf16/*}
SANITIZE_SKIP_attention=${SANITIZE_SKIP_attention-*/long-*}
# gated_delta: a shard per test, without long_sequence (T 8192: the same kernels over more chunks)
SANITIZE_SHARDS_gated_delta=${SANITIZE_SHARDS_gated_delta-all_cases empty_sequence prefill_then_decode}
SANITIZE_SKIP_gated_delta=${SANITIZE_SKIP_gated_delta-long_sequence}
# paged_attention: a shard per test of tests/test_paged_attention.c (keep in step with its list), run side
# by side under the slower tools; its cases are small, so nothing is skipped
SANITIZE_SHARDS_paged_attention=${SANITIZE_SHARDS_paged_attention-attention_all mla_all garbage_rows nan_inputs* split_workspaces *append* plan_reused_by_layers no_queries}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
case $BUILD in /*) ;; *) BUILD=$repo_root/$BUILD ;; esac

all_stages=(build test info bench baseline compare moe attention ffn gdr paged vision example ep2 sanitize)
default_stages=(build test info bench baseline compare moe attention ffn gdr paged vision example)
if (( $# == 0 )) || [[ "$*" == all ]]; then
  stages=("${default_stages[@]}")
else
  stages=()
  for s in "$@"; do
    ok=0
    for a in "${all_stages[@]}"; do [[ $s == "$a" ]] && ok=1; done
    if (( !ok )); then
      echo "gpu-suite.sh: unknown stage '$s' (stages: ${all_stages[*]}, or all)" >&2
      exit 2
    fi
    stages+=("$s")
  done
fi

# Everything printed from here on is also kept in $OUT/gpu-suite.log.
exec > >(tee -a "$OUT/gpu-suite.log") 2>&1
tee_pid=$!

log() { echo "== gpu-suite: $*"; }

# ---- environment (always; cheap and idempotent) -------------------------------

unpack_debs() {
  shopt -s nullglob
  local debs=("$repo_root"/.debs/*.deb)
  shopt -u nullglob
  if (( ${#debs[@]} == 0 )); then
    log "no .debs/*.deb: relying on what the machine has (run tools/fetch-gpu-debs.sh and carry .debs)"
    return 0
  fi
  mkdir -p "$DEBROOT"
  # Several builds may start at once (tools/gpu-ab.sh): one unpacks, the others wait for it
  # and find the stamp.
  exec 9>"$DEBROOT.lock"
  flock 9
  local want
  want=$(printf '%s\n' "${debs[@]##*/}")
  if [[ -e $DEBROOT/.unpacked && $(cat "$DEBROOT/.unpacked") == "$want" ]]; then
    flock -u 9
    log "packages already unpacked into $DEBROOT"
    return 0
  fi
  local d
  for d in "${debs[@]}"; do
    dpkg -x "$d" "$DEBROOT" || { log "dpkg -x $d failed"; flock -u 9; return 1; }
  done
  # The .pc files say prefix=/usr (cmocka.pc even spells -I/usr/include): point them
  # into $DEBROOT. Works with any pkg-config binary, unlike PKG_CONFIG_SYSROOT_DIR,
  # which would also rewrite the paths of the machine's own .pc files.
  local pc
  for pc in "$DEBROOT"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$DEBROOT"/usr/share/pkgconfig/*.pc; do
    [[ -f $pc ]] || continue
    sed -i -e "s#^\([A-Za-z_][A-Za-z0-9_]*\)=/usr#\1=$DEBROOT/usr#" \
           -e "s#\([[:space:]]-[IL]\)/usr/#\1$DEBROOT/usr/#g" "$pc"
  done
  echo "$want" > "$DEBROOT/.unpacked"
  flock -u 9
  log "unpacked ${#debs[@]} packages into $DEBROOT"
}

setup_env() {
  unpack_debs || return 1
  local lib=$DEBROOT/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$lib/pkgconfig:$DEBROOT/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export CPATH=$DEBROOT/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$DEBROOT/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  # Debian 12's pkgconf needs glibc >= 2.34; use it when it runs, else the machine's.
  if [[ -x $DEBROOT/usr/bin/pkgconf ]] && "$DEBROOT/usr/bin/pkgconf" --version >/dev/null 2>&1; then
    export PATH=$DEBROOT/usr/bin:$PATH
    export PKG_CONFIG=$DEBROOT/usr/bin/pkg-config
  elif command -v pkg-config >/dev/null; then
    PKG_CONFIG=$(command -v pkg-config)
    export PKG_CONFIG
    log "the unpacked pkgconf does not run here; using $PKG_CONFIG"
  else
    log "WARNING: no working pkg-config; meson falls back to CMake (CMAKE_PREFIX_PATH) for cmocka/CLBlast"
  fi
  if ! command -v nvcc >/dev/null; then
    local d
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
      [[ -x $d/nvcc ]] && { export PATH=$PATH:$d; break; }
    done
  fi
  RDG_CCACHE=""
  if [[ ${RUDNN_CCACHE:-1} != 0 ]]; then
    local cc
    for cc in "$DEBROOT/usr/bin/ccache" "$(command -v ccache 2>/dev/null)"; do
      if [[ -n $cc && -x $cc ]] && "$cc" --version >/dev/null 2>&1; then
        RDG_CCACHE=$cc
        break
      fi
    done
  fi
  if [[ -n $RDG_CCACHE ]]; then
    export CCACHE_DIR=${CCACHE_DIR:-$repo_root/build-ccache}
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo_root}
    export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
  fi
  export RUDNN_BACKEND_PATH=$BUILD/backends/cuda:$BUILD/backends/opencl:$BUILD/backends/hip
  export RUDNN_CACHE_DIR=${RUDNN_CACHE_DIR:-$BUILD/rudnn-cache}

  # OpenCL on NVIDIA: an ICD file naming the driver's library by full path.
  local nv=""
  nv=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1 .*x86-64/ {print $NF; exit}')
  if [[ -z $nv ]]; then
    local c
    for c in /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
             /usr/lib64/libnvidia-opencl.so.1 /usr/local/nvidia/lib/libnvidia-opencl.so.1; do
      [[ -e $c ]] && { nv=$c; break; }
    done
  fi
  if [[ -z $nv ]]; then
    nv=$(find /usr /lib /opt -maxdepth 5 -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
  fi
  if [[ -n $nv ]]; then
    nv=$(readlink -f "$nv")
    if mkdir -p /etc/OpenCL/vendors 2>/dev/null && echo "$nv" > /etc/OpenCL/vendors/nvidia.icd 2>/dev/null; then
      log "OpenCL ICD: /etc/OpenCL/vendors/nvidia.icd -> $nv"
    else
      mkdir -p "$DEBROOT/etc/OpenCL/vendors"
      echo "$nv" > "$DEBROOT/etc/OpenCL/vendors/nvidia.icd"
      export OCL_ICD_VENDORS=$DEBROOT/etc/OpenCL/vendors
      log "OpenCL ICD: /etc not writable; OCL_ICD_VENDORS=$OCL_ICD_VENDORS -> $nv"
    fi
    # the driver's own folder, for its dependencies
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$nv")
    export LD_LIBRARY_PATH
  else
    log "no libnvidia-opencl.so.1 found: the opencl suite will use whatever ICD is installed, if any"
  fi

  log "environment:"
  echo "  repo      $repo_root"
  echo "  build     $BUILD"
  echo "  out       $OUT"
  echo "  PATH      $PATH"
  echo "  PKG_CONFIG ${PKG_CONFIG:-none}"
  echo "  PKG_CONFIG_PATH $PKG_CONFIG_PATH"
  echo "  LD_LIBRARY_PATH $LD_LIBRARY_PATH"
  echo "  RUDNN_BACKEND_PATH $RUDNN_BACKEND_PATH"
  echo "  ccache    ${RDG_CCACHE:-none}${RDG_CCACHE:+ (CCACHE_DIR $CCACHE_DIR)}"
  echo "  meson $(meson --version 2>/dev/null || echo missing), ninja $(ninja --version 2>/dev/null || echo missing)," \
       "nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([^,]*\).*/\1/p' || true)"
  if [[ -n ${PKG_CONFIG:-} ]]; then
    local p
    for p in cmocka OpenCL clblast; do
      echo "  pkg-config $p: $("$PKG_CONFIG" --modversion $p 2>/dev/null || echo 'not found')"
    done
  fi
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi || true
  else
    log "nvidia-smi not found"
  fi
}

# ---- stages ---------------------------------------------------------------------

stage_build() {
  # The SM option's name: meson 1.0 reserves "cuda_*" option names, so it may be renamed;
  # take the first *arch option of meson_options.txt that is not hip's.
  local arch_opt
  arch_opt=$(sed -n "s/^option('\([A-Za-z0-9_]*arch[A-Za-z0-9_]*\)'.*/\1/p" meson_options.txt | grep -v '^hip' | head -1)
  local args=(-Dcuda=enabled -Dopencl=enabled -Dhip=disabled -Dtests=enabled)
  [[ -n $arch_opt ]] && args+=("-D$arch_opt=$CUDA_ARCH")
  # later -D options win, so MESON_ARGS can override any of the above
  # shellcheck disable=SC2206
  args+=($MESON_ARGS)
  if [[ -f $BUILD/build.ninja ]]; then
    meson setup --reconfigure "$BUILD" "${args[@]}" || return 1
  elif [[ -n ${RDG_CCACHE:-} ]]; then # meson keeps the compiler of the first setup
    NVCC="$RDG_CCACHE nvcc" meson setup "$BUILD" "${args[@]}" || return 1
  else
    meson setup "$BUILD" "${args[@]}" || return 1
  fi
  # shellcheck disable=SC2086
  ninja -C "$BUILD" $NINJA_TARGETS
  local rc=$?
  [[ -z ${RDG_CCACHE:-} ]] || "$RDG_CCACHE" -s 2>/dev/null | sed -n 's/^ *\(Hits\|Misses\):/  ccache \1:/p' 
  mkdir -p "$OUT/meson-logs"
  cp -f "$BUILD"/meson-logs/meson-log.txt "$OUT/meson-logs/" 2>/dev/null || true
  return "$rc"
}

stage_test() {
  # shellcheck disable=SC2086
  meson test -C "$BUILD" --print-errorlogs $MESON_TEST_ARGS
  local rc=$?
  cp -f "$BUILD"/meson-logs/testlog.txt "$OUT/testlog.txt" 2>/dev/null || true
  cp -f "$BUILD"/meson-logs/testlog.json "$OUT/testlog.json" 2>/dev/null || true
  return "$rc"
}

stage_info() {
  "$BUILD/tools/rudnn-info" | tee "$OUT/rudnn-info.txt" || return 1
  "$BUILD/tools/rudnn-info" --json > "$OUT/rudnn-info.jsonl"
}

stage_bench() {
  # shellcheck disable=SC2086
  "$BUILD/bench/rudnn-bench" --backend "$BENCH_BACKEND" --dtype "$BENCH_DTYPES" $BENCH_ARGS \
    | tee "$OUT/rudnn-$BENCH_BACKEND.jsonl"
  local rc=$?
  if [[ $BENCH_BACKEND != opencl ]]; then
    log "opencl --quick (NVIDIA's OpenCL driver; informational, does not fail the stage)"
    "$BUILD/bench/rudnn-bench" --backend opencl --quick --dtype "$BENCH_DTYPES" \
      | tee "$OUT/rudnn-opencl-quick.jsonl" || log "opencl quick bench failed (rc $?)"
  fi
  return "$rc"
}

stage_baseline() {
  if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    log "PyTorch with CUDA not available: no baseline"
    return 1
  fi
  local extra=()
  [[ $TORCH_COMPILE == 1 ]] && extra+=(--compile)
  # shellcheck disable=SC2086
  python3 bench/baselines/torch_norm.py --dtype "$BENCH_DTYPES" "${extra[@]}" $BENCH_ARGS \
    | tee "$OUT/torch.jsonl"
}

stage_compare() {
  rm -f "$OUT/RESULTS.md" # the moe stage builds on this file: never on an earlier run's
  python3 bench/compare.py "$OUT/rudnn-$BENCH_BACKEND.jsonl" "$OUT/torch.jsonl" > "$OUT/compare.md" || return 1
  # $OUT/RESULTS.md: bench/RESULTS.md with this run's norm section (bench/results.py's header)
  python3 bench/results.py norm "$OUT/rudnn-$BENCH_BACKEND.jsonl" "$OUT/torch.jsonl" --out "$OUT/RESULTS.md"
}

# MoE forward and routing (bf16, the issue's model shapes) side by side with torch._grouped_mm.
stage_moe() {
  "$BUILD/bench/rudnn-bench-moe" --backend "$BENCH_BACKEND" | tee "$OUT/moe-rudnn.jsonl" || return 1
  local cublas=()
  if [[ $BENCH_BACKEND == cuda ]]; then
    # the same forward with the expert GEMMs through cuBLAS's grouped GEMM (the kernel moe.cublas_grouped)
    "$BUILD/bench/rudnn-bench-moe" --backend cuda --only forward --kernel moe.cublas_grouped |
      tee "$OUT/moe-rudnn-cublas.jsonl" || return 1
    cublas=("$OUT/moe-rudnn-cublas.jsonl")
  fi
  python3 bench/baselines/torch_moe.py | tee "$OUT/moe-torch.jsonl" || return 1
  python3 bench/compare_moe.py "$OUT/moe-rudnn.jsonl" "$OUT/moe-torch.jsonl" "${cublas[@]}" | tee "$OUT/compare-moe.md" || return 1
  # the moe section of $OUT/RESULTS.md, on top of the norm section when this run's compare stage wrote it
  local results=bench/RESULTS.md
  [[ " ${stages[*]} " == *" compare "* && -f $OUT/RESULTS.md ]] && results=$OUT/RESULTS.md
  python3 bench/results.py moe "$OUT/moe-rudnn.jsonl" "$OUT/moe-torch.jsonl" "${cublas[@]}" \
    --results "$results" --out "$OUT/RESULTS.md"
}

# FFN (issue 22's cases: BF16, W8A8, W4A16 per group) beside PyTorch's matmul + activation + matmul,
# its two GEMMs, torch._int_mm and torch._weight_int4pack_mm in the same run.
stage_ffn() {
  local rc=0
  # shellcheck disable=SC2086
  "$BUILD/bench/rudnn-bench-ffn" --backend "$BENCH_BACKEND" $FFN_ARGS | tee "$OUT/ffn-rudnn.jsonl" || rc=1
  python3 bench/baselines/torch_ffn.py | tee "$OUT/ffn-torch.jsonl" || rc=1
  return "$rc"
}

# The gated delta rule (bf16, K = V = 128: chunked prefill B 1 T 32768 and B 8 T 4096, varlen prefill of 64
# sequences beside the same tokens as one, decode at B 64-256) beside the same math in plain PyTorch
# (the chunked WY form, the padded batch for varlen, the naive recurrent loop for decode).
stage_gdr() {
  local rc=0
  # shellcheck disable=SC2086
  "$BUILD/bench/rudnn-bench-gdr" --backend "$BENCH_BACKEND" $GDR_ARGS | tee "$OUT/gdr-rudnn.jsonl" || rc=1
  # shellcheck disable=SC2086
  python3 bench/baselines/torch_gdr.py $GDR_ARGS | tee "$OUT/gdr-torch.jsonl" || rc=1
  # the two side by side: one row per case -> $OUT/compare-gdr.md
  python3 - "$OUT/gdr-rudnn.jsonl" "$OUT/gdr-torch.jsonl" > "$OUT/compare-gdr.md" <<'PY' || rc=1
import json, sys
def load(path):
    rows = {}
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("op") != "copy" and "case" in r:
            rows[r["case"]] = r
    return rows
ours, torch = load(sys.argv[1]), load(sys.argv[2])
print("| case | rudnn kernel | rudnn ms | torch ms | torch / rudnn | rudnn TFLOP/s | rudnn copy fraction |")
print("|---|---|---|---|---|---|---|")
for case, r in ours.items():
    t = torch.get(case, {})
    ms, tms = r.get("median_ms"), t.get("median_ms")
    frac = r.get("state_copy_fraction", r.get("copy_fraction"))
    print("| %s | %s | %s | %s | %s | %s | %s |" % (
        case, r.get("kernel", r.get("status", "?")), "%.4f" % ms if ms else "-", "%.4f" % tms if tms else "-",
        "%.2fx" % (tms / ms) if ms and tms else "-", "%.1f" % r["tflops"] if "tflops" in r else "-",
        "%.3f" % frac if frac is not None else "-"))
PY
  cat "$OUT/compare-gdr.md"
  return "$rc"
}

# Paged attention and MLA (issue 24, bf16: decode at B 1-128 and KV 2k-128k on pages of 16 and 64, varlen
# prefill of 16k tokens, MLA decode) beside PyTorch's SDPA (cuDNN, FA2; MLA: matmul + softmax + matmul)
# over the gathered pages, joined by case in $OUT/compare-paged.md (bench/compare_paged.py).
stage_paged() {
  local rc=0
  # shellcheck disable=SC2086
  # Each case in its own process (unless PAGED_ARGS names cases): the cache is allocated once, as a
  # serving engine keeps it, not where the previous case's freed cache leaves room (B 128, KV 2k
  # after B 64, KV 32k read at 0.815 of copy on an H200, alone at 0.909).
  if [[ " $PAGED_ARGS " == *" --case "* ]]; then
    # shellcheck disable=SC2086
    "$BUILD/bench/rudnn-bench-paged" --backend "$BENCH_BACKEND" $PAGED_ARGS | tee "$OUT/paged-rudnn.jsonl" || rc=1
  else
    local list=cases: c
    [[ " $PAGED_ARGS " == *" --quick "* ]] && list="--quick cases:"
    : > "$OUT/paged-rudnn.jsonl"
    # shellcheck disable=SC2086
    for c in $("$BUILD/bench/rudnn-bench-paged" --help | sed -n "s/^$list //p"); do
      "$BUILD/bench/rudnn-bench-paged" --backend "$BENCH_BACKEND" $PAGED_ARGS --case "$c" |
        tee -a "$OUT/paged-rudnn.jsonl" || rc=1
    done
  fi
  # shellcheck disable=SC2086
  python3 bench/baselines/torch_paged.py $PAGED_ARGS | tee "$OUT/paged-torch.jsonl" || rc=1
  python3 bench/compare_paged.py "$OUT/paged-rudnn.jsonl" "$OUT/paged-torch.jsonl" > "$OUT/compare-paged.md" || rc=1
  cat "$OUT/compare-paged.md"
  return "$rc"
}

# Convolution (ResNet-50's shapes at N 32, NCHW and channels-last; Autotune against cuDNN with
# cudnn.benchmark), pooling, interpolation and grid sampling (bf16, forward and backward) and CTC (F32,
# loss and gradient) beside PyTorch on the same GPU, joined by case, direction and layout in
# $OUT/compare-vision.md (bench/compare_vision.py). A case that fails (NOT_SUPPORTED aside) fails the
# stage after the table is written.
stage_vision() {
  local rc=0
  # shellcheck disable=SC2086
  "$BUILD/bench/rudnn-bench-vision" --backend "$BENCH_BACKEND" $VISION_ARGS | tee "$OUT/vision-rudnn.jsonl" || rc=1
  # shellcheck disable=SC2086
  python3 bench/baselines/torch_vision.py $VISION_ARGS | tee "$OUT/vision-torch.jsonl" || rc=1
  python3 bench/compare_vision.py "$OUT/vision-rudnn.jsonl" "$OUT/vision-torch.jsonl" > "$OUT/compare-vision.md" || rc=1
  cat "$OUT/compare-vision.md"
  return "$rc"
}

# Attention forward (issue 20's prefill and decode cases, bf16), every rudnn strategy side by side
# with PyTorch's SDPA backends. A strategy or backend that refuses a case prints a NOT_SUPPORTED
# line; one that fails a FAILED line and fails the stage, after the tables are written.
stage_attention() {
  local rc=0
  # shellcheck disable=SC2086
  "$BUILD/bench/rudnn-bench-attention" --backend "$BENCH_BACKEND" --strategy all $ATTENTION_ARGS |
    tee "$OUT/attention-rudnn.jsonl" || rc=1
  # shellcheck disable=SC2086
  python3 bench/baselines/torch_attention.py $ATTENTION_ARGS | tee "$OUT/attention-torch.jsonl" || rc=1
  python3 bench/compare_attention.py "$OUT/attention-rudnn.jsonl" "$OUT/attention-torch.jsonl" |
    tee "$OUT/compare-attention.md" || return 1
  # on top of the sections this run's compare or moe stage wrote into $OUT/RESULTS.md
  local results=bench/RESULTS.md
  if [[ -f $OUT/RESULTS.md && ( " ${stages[*]} " == *" compare "* || " ${stages[*]} " == *" moe "* ) ]]; then
    results=$OUT/RESULTS.md
  fi
  python3 bench/results.py attention "$OUT/attention-rudnn.jsonl" "$OUT/attention-torch.jsonl" \
    --results "$results" --out "$OUT/RESULTS.md" || rc=1
  return "$rc"
}

# Expert parallelism on two GPUs (issue 25). Each rank's device is its node-local rank (Open MPI's
# OMPI_COMM_WORLD_LOCAL_RANK); rows move between the GPUs over NCCL (NVLink), NVLink multicast left
# off (NCCL_NVLS_ENABLE=0, the device tool's KINDS.md).
stage_ep2() {
  local gpus rc=0
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if (( gpus < 2 )); then
    echo "ep2: needs two GPUs, this machine has $gpus"
    return 1
  fi
  export RUDNN_BACKEND=cuda RUDNN_BACKEND_PATH="$BUILD/backends/cuda:$BUILD/comm" NCCL_NVLS_ENABLE=0
  local np=(--allow-run-as-root -x RUDNN_BACKEND -x RUDNN_BACKEND_PATH -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
  # shellcheck disable=SC2016  # expanded by each rank's shell
  local on_own_gpu=(bash -c 'export RUDNN_DEVICE=$OMPI_COMM_WORLD_LOCAL_RANK; exec "$@"' _)
  log "ep2: tests/test_ep_mpi --comm=nccl on 2 ranks, a GPU each"
  timeout "$EP2_TIMEOUT" mpirun "${np[@]}" -np 2 "${on_own_gpu[@]}" "$BUILD/tests/test_ep_mpi" --comm=nccl \
    > "$OUT/ep2-test.log" 2>&1 || rc=1
  tail -5 "$OUT/ep2-test.log"
  # TP = 2 needs 4 ranks (EP 2 x TP 2): two a GPU, each its own NCCL "host" (RUDNN_TEST_NCCL_ONE_GPU:
  # sockets, since NCCL refuses two ranks of one communicator on one GPU of one host)
  log "ep2: the TP = 2 cases on 4 ranks, two a GPU"
  # shellcheck disable=SC2016
  RUDNN_TEST_NCCL_ONE_GPU=1 timeout "$EP2_TIMEOUT" mpirun "${np[@]}" -x RUDNN_TEST_NCCL_ONE_GPU -np 4 \
    bash -c 'export RUDNN_DEVICE=$((OMPI_COMM_WORLD_LOCAL_RANK / 2)); exec "$@"' _ \
    "$BUILD/tests/test_ep_mpi" --comm=nccl '*tp2*' > "$OUT/ep2-test-tp.log" 2>&1 || rc=1
  tail -3 "$OUT/ep2-test-tp.log"
  log "ep2: compute-sanitizer memcheck on rank 0 ($EP2_SANITIZE_FILTER)"
  timeout "$EP2_TIMEOUT" mpirun "${np[@]}" \
    -np 1 "${on_own_gpu[@]}" compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$BUILD/tests/test_ep_mpi" --comm=nccl "$EP2_SANITIZE_FILTER" : \
    -np 1 "${on_own_gpu[@]}" "$BUILD/tests/test_ep_mpi" --comm=nccl "$EP2_SANITIZE_FILTER" \
    > "$OUT/ep2-memcheck.log" 2>&1 || rc=1
  grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/ep2-memcheck.log" | tail -4
  log "ep2: rudnn-bench-ep-comm (NCCL, MPI) and bench/baselines/torch_ep.py"
  : > "$OUT/ep2-rudnn.jsonl"
  for comm in nccl mpi; do
    # shellcheck disable=SC2086
    timeout "$EP2_TIMEOUT" mpirun "${np[@]}" -np 2 "${on_own_gpu[@]}" "$BUILD/bench/rudnn-bench-ep-comm" \
      --comm "$comm" $EP2_ARGS >> "$OUT/ep2-rudnn.jsonl" 2> "$OUT/ep2-rudnn-$comm.err" || rc=1
  done
  # shellcheck disable=SC2086
  timeout "$EP2_TIMEOUT" mpirun "${np[@]}" -np 2 python3 bench/baselines/torch_ep.py $EP2_ARGS \
    > "$OUT/ep2-torch.jsonl" 2> "$OUT/ep2-torch.err" || rc=1
  python3 bench/compare_ep.py "$OUT/ep2-rudnn.jsonl" "$OUT/ep2-torch.jsonl" | tee "$OUT/compare-ep2.md" || rc=1
  return "$rc"
}

stage_example() {
  local dest=/tmp/rudnn-destdir
  rm -rf "$dest"
  meson install -C "$BUILD" --destdir "$dest" >/dev/null || return 1
  local pcdir
  pcdir=$(dirname "$(find "$dest" -name rudnn.pc | head -1)")
  [[ -f $pcdir/rudnn.pc ]] || { log "rudnn.pc not installed"; return 1; }
  local libdir
  libdir=$(dirname "$(find "$dest" -name 'librudnn.so' | head -1)")
  rm -rf /tmp/rudnn-example && cp -r examples /tmp/rudnn-example
  # PKG_CONFIG_SYSROOT_DIR maps the installed prefix into the DESTDIR.
  PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest make -C /tmp/rudnn-example || return 1
  LD_LIBRARY_PATH=$libdir:$LD_LIBRARY_PATH RUDNN_BACKEND_PATH="$libdir/rudnn" /tmp/rudnn-example/rms_norm_example
}

# The CUDA numeric suites under each compute-sanitizer tool. A run passes when the suite passes
# and the tool reports nothing (its exit code is --error-exitcode on a report).
# One compute-sanitizer run: tool over test binary suite, restricted to the tests matching shard
# (a cmocka glob; "" for all); writes its table row to $3.row.
sanitize_one() {
  local cs=$1 tool=$2 row=$3 suite=$4 shard=$5
  local log_file=${row%.row}.log t0 r=0 extra=() skip_kernels="" skip_var="SANITIZE_SKIP_$suite"
  local skip=${!skip_var-$SANITIZE_SKIP}
  case $tool in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report all) ;;
    initcheck) skip_kernels=$SANITIZE_INITCHECK_SKIP_KERNELS ;;
  esac
  t0=$(date +%s)
  RUDNN_BACKEND=cuda RUDNN_TEST_REQUIRE=cuda RUDNN_TEST_SKIP=$skip \
    RUDNN_TEST_SKIP_KERNELS=$skip_kernels timeout "$SANITIZE_TIMEOUT" \
    "$cs" --tool "$tool" --error-exitcode 86 "${extra[@]}" --log-file "$log_file.tool" \
    "$BUILD/tests/test_$suite" ${shard:+"$shard"} > "$log_file" 2>&1 || r=$?
  cat "$log_file.tool" >> "$log_file" 2>/dev/null && rm -f "$log_file.tool"
  local summary result
  summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log_file" | tail -1 | sed 's/^=* *//')
  case $r in
    0) result=ok ;;
    77) result="SKIP (the suite skipped: $(grep -m1 -o 'SKIPPED (.*)' "$log_file" || echo 'see the log'))"
        r=0 ;; # a family without CUDA kernels yet: nothing ran, nothing to report
    86) result="REPORTS" ;;
    124) result="TIMEOUT (${SANITIZE_TIMEOUT} s)" ;;
    *) result="FAIL (rc $r)" ;;
  esac
  echo "| $tool | $suite | ${shard:-all} | $result | ${summary:-none} | $(( $(date +%s) - t0 )) |" > "$row"
  return "$r"
}

# Every (tool, suite, shard) run, SANITIZE_JOBS at a time on the one GPU; a suite's shards are the
# globs of SANITIZE_SHARDS_<suite> (its tests split into parts that run side by side), else one.
stage_sanitize() {
  local cs
  cs=$(command -v compute-sanitizer || true)
  [[ -n $cs ]] || for cs in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer; do
    [[ -x $cs ]] && break
  done
  [[ -x $cs ]] || { log "compute-sanitizer not found"; return 1; }
  local rc=0 tool suite shard n=0 rows=() running=0
  for tool in $SANITIZE_TOOLS; do
    for suite in $SANITIZE_SUITES; do
      local shards_var="SANITIZE_SHARDS_$suite" shards=()
      read -ra shards <<< "${!shards_var:-}" # split on spaces, the globs unexpanded
      (( ${#shards[@]} )) || shards=("-")
      for shard in "${shards[@]}"; do
        [[ $shard == - ]] && shard=""
        n=$((n + 1))
        local row=$OUT/sanitize-$tool-$suite-$n.row
        rows+=("$row")
        if (( running >= SANITIZE_JOBS )); then
          wait -n || rc=1
          running=$((running - 1))
        fi
        sanitize_one "$cs" "$tool" "$row" "$suite" "$shard" &
        running=$((running + 1))
      done
    done
  done
  while (( running > 0 )); do
    wait -n || rc=1
    running=$((running - 1))
  done
  {
    echo "| tool | suite | tests | result | reports | seconds |"
    echo "|---|---|---|---|---|---|"
    cat "${rows[@]}"
  } > "$OUT/sanitize.md"
  cat "$OUT/sanitize.md"
  return "$rc"
}

# ---- run ------------------------------------------------------------------------

log "start $(date -u '+%Y-%m-%d %H:%M:%S UTC'), stages: ${stages[*]}"
# In this shell (not a pipe) so that its exports apply to the stages.
setup_env > "$OUT/env.log" 2>&1 || { cat "$OUT/env.log"; log "environment setup failed"; exit 1; }
cat "$OUT/env.log"

declare -A status seconds
overall=0
for s in "${stages[@]}"; do
  log "stage $s"
  t0=$(date +%s)
  "stage_$s" 2>&1 | tee "$OUT/$s.log"
  rc=${PIPESTATUS[0]}
  seconds[$s]=$(( $(date +%s) - t0 ))
  if (( rc == 0 )); then
    status[$s]=ok
  else
    status[$s]="FAIL (rc $rc)"
    overall=1
  fi
  log "stage $s: ${status[$s]} in ${seconds[$s]} s"
done

echo
echo "## gpu-suite summary"
echo
echo "| stage | status | seconds | log |"
echo "|---|---|---|---|"
for s in "${stages[@]}"; do
  echo "| $s | ${status[$s]} | ${seconds[$s]} | $s.log |"
done
if [[ -f $OUT/testlog.txt ]]; then
  echo
  echo "meson test: $(grep -E '^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):' "$OUT/testlog.txt" \
    | sed 's/:  */: /; s/ *$//' | paste -sd ',' - | sed 's/,/, /g')"
  grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|SKIP|ERROR) ' "$OUT/testlog.txt" | sort -u | head -40 | sed 's/^/  /'
  if [[ -f $OUT/testlog.json && -f tools/test_summary.py ]]; then
    python3 tools/test_summary.py "$OUT/testlog.json" | tail -1
  fi
fi
if [[ " ${stages[*]} " == *" compare "* && -f $OUT/compare.md ]]; then
  echo
  cat "$OUT/compare.md"
fi
if [[ " ${stages[*]} " == *" attention "* && -f $OUT/compare-attention.md ]]; then
  echo
  sed -n '/^| case |/,/^$/p' "$OUT/compare-attention.md" # the summary table only
fi
if [[ " ${stages[*]} " == *" paged "* && -f $OUT/compare-paged.md ]]; then
  echo
  cat "$OUT/compare-paged.md"
fi
if [[ " ${stages[*]} " == *" vision "* && -f $OUT/compare-vision.md ]]; then
  echo
  cat "$OUT/compare-vision.md"
fi
if [[ " ${stages[*]} " == *" ep2 "* && -f $OUT/compare-ep2.md ]]; then
  echo
  cat "$OUT/compare-ep2.md"
fi
if [[ " ${stages[*]} " == *" sanitize "* && -f $OUT/sanitize.md ]]; then
  echo
  cat "$OUT/sanitize.md"
fi
# Let tee drain before exiting, so the last lines reach the terminal and the log.
exec 1>&- 2>&-
wait "$tee_pid" 2>/dev/null
exit $overall
