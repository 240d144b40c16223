#!/usr/bin/env bash
# Nsight Compute profiles of rudnn's hot kernels on the GPU machine, after
# `tools/gpu-suite.sh build` (same BUILD and environment). One text report per target
# in $OUT/ncu-<target>.txt: speed of light, occupancy, launch statistics, scheduler and
# warp-state statistics, instructions executed.
#
#   tools/gpu-profile.sh TARGET ...
#
# Targets:
#   route     the routing kernels (softmax and grouped sigmoid), DeepSeek-V3 shape T 4096, E 256:
#             ncu-route-softmax.txt and ncu-route-grouped.txt, with stall reasons
#   route-src the grouped routing kernel's SASS with per-instruction execution counts and stalls:
#             ncu-route-src-sass.csv, summarised per token in ncu-route-src-top.txt
#             (tools/ncu-sass-top.py), and the report, ncu-route-src.ncu-rep
#   norm-src  the same for the bf16 kernels of softmax, layer_norm and rms_norm [4096, 65536] and
#             layer_norm [16384, 8192]: ncu-norm-src-OP-SHAPE-sass.csv and -top.txt (per row)
#   norm-src-pair  the same for the two-row kernel (norm_pair.cuh): layer_norm bf16 [16384, 8192]
#             and [4096, 65536]
#   mixtral   the SwiGLU expert GEMMs (TensorCore strategy), Mixtral shape
#   mixtral-cmp  rudnn's two expert GEMMs and PyTorch's three grouped GEMMs (the baseline's
#             first forward), Mixtral shape, with the compute and memory workload sections:
#             ncu-mixtral-ours.txt and ncu-mixtral-torch.txt
#   norm-ln   layer_norm bf16 and f32 [4096, 65536]
#   norm-mem  softmax and rms_norm [4096, 65536], f32 and bf16, with the memory workload
#             section, DRAM and L2 bytes, and stall reasons: ncu-norm-mem-OP-DTYPE.txt
#   norm-1k   rms_norm and softmax f32 [65536, 1024]
#   norm-pair layer_norm and softmax bf16 [16384, 8192] and [4096, 65536] (the two-row kernels
#             and the one-row softmax), with stall reasons, the memory workload section, DRAM
#             and L2 bytes, L1 hit rate, carve-out and shared-load bank conflicts
#   norm-bulk layer_norm and rms_norm bf16 [16384, 8192] and [4096, 65536] (the bulk kernel,
#             norm_bulk.cuh, rows of one CTA and over a cluster), with the metrics of norm-pair
#   ffn-w4    one W4A16 FFN call (K1 8192, N1 28672, swiglu, group 128) at M 1 and M 16: every
#             kernel of it (both GEMMs, split sums, activation) with stall reasons, the memory
#             workload section and DRAM bytes: ncu-ffn-w4-m1.txt, ncu-ffn-w4-m16.txt
#   ffn-w4-src  the first ffn.mma_w4 GEMM of the M 1 call per instruction: ncu-ffn-w4-src-sass.csv
#             and -top.txt (counts per KiB step of a warp: --per 1)
#   att-d64   attention.wgmma_tma at B 8, H 16, S 2048, D 64 (issue 20), non-causal and causal:
#             stall reasons, how long the SMs were active (the tail: average against maximum),
#             L2 hit rate, DRAM bytes: ncu-att-d64.txt and ncu-att-d64-causal.txt
#   att-d64-src  the causal kernel per instruction: ncu-att-d64-src-sass.csv and -top.txt
#   gdr       one chunked gated-delta call at B 1, H 8, T 32768 and at B 8, H 16, T 4096 (bf16): every
#             kernel (tc_prep, the wgmma segment and state passes, tc_carry) with stall reasons, DRAM
#             bytes and the SMs' active cycles (average against maximum: the tail): ncu-gdr-b1.txt,
#             ncu-gdr-b8.txt
#   paged-decode  the paged decode kernel (mma_decode) at page 16, B 1 KV 2k and B 8 KV 8k, with the
#             metrics of gdr: ncu-paged-b1-kv2k.txt, ncu-paged-b8-kv8k.txt
#   norm-16   the 16-bit rows below target: all four ops bf16 [4096, 65536], layer_norm bf16
#             [16384, 8192], layer_norm and softmax bf16 [65536, 1024], with stall reasons
#
# ncu runs with --clock-control none (the clocks stay as they are; METHOD.md).
set -u
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root" || exit 1
OUT=${OUT:-$repo_root/gpu-out}
BUILD=${BUILD:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$repo_root/$BUILD ;; esac
mkdir -p "$OUT"

ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [[ -z $ncu ]]; then
  echo "gpu-profile.sh: ncu not found" >&2
  exit 1
fi
export RUDNN_BACKEND_PATH=$BUILD/backends/cuda:$BUILD/backends/opencl
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats
          --section WarpStateStats)
metrics=smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second
# why warps do not issue, per issued instruction (what the WarpStateStats chart shows)
stall_metrics=$(for r in long_scoreboard short_scoreboard barrier membar wait lg_throttle mio_throttle \
    math_pipe_throttle tex_throttle drain not_selected selected sleeping no_instruction dispatch_stall \
    branch_resolving misc imc_miss; do
  printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' "$r"; done)
stall_metrics=${stall_metrics%,}

# where the bytes go: DRAM, L2 sectors
mem=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum
# L1 and shared memory: hit rate, bank conflicts of shared loads (the shared-memory/L1 split is
# in LaunchStats: "Shared Memory Configuration Size")
l1=l1tex__t_sector_hit_rate.pct,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
# the normalization kernels: one-row (norm_*_kernel*), two-row (pair_kernel, norm_pair.cuh) and
# bulk (bulk_kernel, norm_bulk.cuh)
norm_kernels='norm|pair_kernel|bulk_kernel'

profile() { # name kernel-regex launch-count command...  (EXTRA_METRICS: more metrics)
  local name=$1 regex=$2 count=$3
  shift 3
  echo "== gpu-profile: $name ($*)"
  "$ncu" --clock-control none -k "regex:$regex" --launch-count "$count" "${sections[@]}" \
    --metrics "$metrics${EXTRA_METRICS:+,$EXTRA_METRICS}" "$@" \
    > "$OUT/ncu-$name.txt" 2>&1
  echo "== gpu-profile: $name rc $? -> $OUT/ncu-$name.txt"
}

# SASS of one kernel launch with executed-instruction counts and stall samples per
# instruction: $OUT/ncu-NAME-sass.csv, its summary ncu-NAME-top.txt (tools/ncu-sass-top.py,
# counts per UNITS: tokens, rows), and ncu-NAME.txt (the details page)
profile_src() { # name kernel-regex units command...
  local name=$1 regex=$2 units=$3
  shift 3
  "$ncu" --clock-control none -k "regex:$regex" --launch-count 1 --section SourceCounters \
    --section SpeedOfLight --section WarpStateStats --metrics "$metrics,$stall_metrics" \
    -o "$OUT/ncu-$name" -f "$@" > "$OUT/ncu-$name.log" 2>&1
  "$ncu" -i "$OUT/ncu-$name.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu-$name-sass.csv" 2>&1
  "$ncu" -i "$OUT/ncu-$name.ncu-rep" --page details > "$OUT/ncu-$name.txt" 2>&1
  python3 tools/ncu-sass-top.py "$OUT/ncu-$name-sass.csv" --top 30 --per "$units" --ranges \
    > "$OUT/ncu-$name-top.txt" 2>&1
  echo "== gpu-profile: $name -> $OUT/ncu-$name-sass.csv, ncu-$name-top.txt"
}

# one report per bf16 OP:SHAPE case, NAME-OP-SHAPE, with the stall reasons, the memory workload
# section, DRAM and L2 bytes and the L1 metrics (norm-pair, norm-bulk)
norm_mem_cases() {
  local name=$1 c
  shift
  for c in "$@"; do
    EXTRA_METRICS="$stall_metrics,$mem,$l1" profile "$name-${c/:/-}" "$norm_kernels" 1 \
      --section MemoryWorkloadAnalysis "$BUILD/bench/rudnn-bench" --backend=cuda \
      --op="${c%%:*}" --shape="${c#*:}" --dtype=bf16 --reps=1
  done
}

rc=0
for target in "$@"; do
  case $target in
    route)
      for k in softmax grouped; do
        EXTRA_METRICS=$stall_metrics profile "route-$k" "route_$k" 2 "$BUILD/bench/rudnn-bench-moe" --backend cuda --case deepseek_v3_t4096 \
          --only route --reps 2
      done ;;
    route-src) profile_src route-src route_grouped 4096 "$BUILD/bench/rudnn-bench-moe" --backend cuda \
                 --case deepseek_v3_t4096 --only route --reps 2 ;;
    norm-src)
      for c in softmax:4096x65536 layer_norm:4096x65536 rms_norm:4096x65536 layer_norm:16384x8192; do
        shape=${c#*:}
        profile_src "norm-src-${c/:/-}" "$norm_kernels" "${shape%%x*}" "$BUILD/bench/rudnn-bench" --backend=cuda --op="${c%%:*}" \
          --shape="$shape" --dtype=bf16 --reps=1
      done ;;
    norm-src-pair)
      for c in layer_norm:16384x8192 layer_norm:4096x65536; do
        shape=${c#*:}
        profile_src "norm-src-pair-${c/:/-}" pair_kernel "${shape%%x*}" "$BUILD/bench/rudnn-bench" --backend=cuda \
          --op="${c%%:*}" --shape="$shape" --dtype=bf16 --reps=1
      done ;;
    mixtral) EXTRA_METRICS=$stall_metrics profile mixtral 'tc_gemm|tma_gemm|gather|combine|plan_|route' "${MIXTRAL_KERNELS:-12}" "$BUILD/bench/rudnn-bench-moe" \
               --backend cuda --case mixtral --only forward --reps 1 ;;
    mixtral-cmp)
      wl=(--section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis)
      EXTRA_METRICS=$stall_metrics profile mixtral-ours 'tc_gemm|tma_gemm' 2 "${wl[@]}" "$BUILD/bench/rudnn-bench-moe" \
        --backend cuda --case mixtral --only forward --reps 1
      EXTRA_METRICS=$stall_metrics profile mixtral-torch 'device_kernel|GemmUniversal' 3 "${wl[@]}" \
        python3 bench/baselines/torch_moe.py --case mixtral ;;
    norm-mem)
      # softmax and rms_norm [4096, 65536], F32 (above 85% of copy) against bf16 (below): where
      # the bytes go (DRAM, L2, shared memory) and why warps wait
      for c in softmax:f32 softmax:bf16 rms_norm:f32 rms_norm:bf16; do
        EXTRA_METRICS="$stall_metrics,$mem" profile "norm-mem-${c/:/-}" "$norm_kernels" 1 --section MemoryWorkloadAnalysis \
          "$BUILD/bench/rudnn-bench" --backend=cuda --op="${c%%:*}" --shape=4096x65536 --dtype="${c#*:}" --reps=1
      done ;;
    norm-ln) profile norm-ln "$norm_kernels" 4 "$BUILD/bench/rudnn-bench" --backend=cuda --op=layer_norm \
               --shape=4096x65536 --dtype=bf16,f32 --reps=1 ;;
    norm-1k) profile norm-1k "$norm_kernels" 4 "$BUILD/bench/rudnn-bench" --backend=cuda --op=rms_norm,softmax \
               --shape=65536x1024 --dtype=f32 --reps=1 ;;
    norm-pair)
      # layer_norm's two-row kernel against softmax's (same structure; layer_norm also stages 64 KiB
      # of gamma and beta per CTA, which leaves L1 little room for the .ca prefetch)
      norm_mem_cases norm-pair layer_norm:16384x8192 softmax:16384x8192 layer_norm:4096x65536 softmax:4096x65536 ;;
    norm-bulk)
      norm_mem_cases norm-bulk layer_norm:16384x8192 rms_norm:16384x8192 layer_norm:4096x65536 rms_norm:4096x65536 ;;
    norm-16)
      for c in rms_norm:4096x65536 layer_norm:4096x65536 add_rms_norm:4096x65536 softmax:4096x65536 \
               layer_norm:16384x8192 layer_norm:65536x1024 softmax:65536x1024; do
        EXTRA_METRICS=$stall_metrics profile "norm-16-${c/:/-}" "$norm_kernels" 1 "$BUILD/bench/rudnn-bench" --backend=cuda \
          --op="${c%%:*}" --shape="${c#*:}" --dtype=bf16 --reps=1
      done ;;
    ffn-w4)
      for m in 1 16; do
        EXTRA_METRICS="$stall_metrics,$mem" profile "ffn-w4-m$m" 'ffn' 6 --section MemoryWorkloadAnalysis \
          "$BUILD/bench/rudnn-bench-ffn" --backend cuda --case "w4a16_g128_m$m" --reps 1
      done ;;
    ffn-w4-src) profile_src ffn-w4-src 'ffn_mma_w4' 1 "$BUILD/bench/rudnn-bench-ffn" --backend cuda \
                  --case w4a16_g128_m1 --reps 1 ;;
    att-d64)
      for c in prefill_b8_h16_s2048_d64 prefill_b8_h16_s2048_d64-causal; do
        EXTRA_METRICS="$stall_metrics,$mem,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,lts__t_sector_hit_rate.pct" \
          profile "att-d64${c##*d64}" 'att_wgmma' 1 --section MemoryWorkloadAnalysis \
          "$BUILD/bench/rudnn-bench-attention" --backend cuda --strategy flash_accelerated --case "${c/-/_}" --reps 1
      done ;;
    att-d64-src) profile_src att-d64-src 'att_wgmma' 1 "$BUILD/bench/rudnn-bench-attention" --backend cuda \
                   --strategy flash_accelerated --case prefill_b8_h16_s2048_d64_causal --reps 1 ;;
    gdr)
      for c in b1_h8_t32768 b8_h16_t4096; do
        EXTRA_METRICS="$stall_metrics,$mem,sm__cycles_active.avg,sm__cycles_active.max" \
          profile "gdr-${c%%_*}" 'tc_prep|wg_pass|tc_pass|tc_carry' 5 "$BUILD/bench/rudnn-bench-gdr" --backend cuda \
          --case "prefill_$c" --reps 1
      done ;;
    paged-decode)
      for c in b1_kv2k b8_kv8k; do
        EXTRA_METRICS="$stall_metrics,$mem,sm__cycles_active.avg,sm__cycles_active.max" \
          profile "paged-${c/_/-}" 'mma_kernel' 1 "$BUILD/bench/rudnn-bench-paged" --backend cuda \
          --case "decode_p16_$c" --reps 1
      done ;;
    *) echo "gpu-profile.sh: unknown target '$target'" >&2; rc=2 ;;
  esac
done
exit $rc
