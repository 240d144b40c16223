/* Launch tuning of the MoE routing and permutation kernels (moe_route.cu, moe_permute.cu), in one
 * table. Each value changes speed only, never a result (the limits every kernel must meet are in
 * backends/limits.h). Thread counts are per block.
 */
#ifndef RUDNN_MOE_TUNING_H
#define RUDNN_MOE_TUNING_H

/* routing: one warp per token, four tokens a block on CUDA: small blocks, so that even small
 * batches give many blocks to spread over the SMs */
#define ROUTE_THREADS 128
/* routing: experts per lane held in registers, a power of two up to this (E <= 32 W); softmax rows
 * beyond 32 W re-read their logits instead (the looped kernel) */
#define ROUTE_MAX_EPT 32

/* dispatch plan: pairs per chunk at least (a block of the histogram and rank kernels): fewer,
 * larger chunks keep the chunks x E counters that the one-block scan walks small... */
#define PLAN_CHUNK_MIN 512
/* ... and on large batches about this many chunks per SM, so that those kernels fill the GPU */
#define PLAN_CHUNKS_PER_SM 2
/* dispatch plan, histogram: two pairs or more per thread of a chunk */
#define PLAN_HIST_THREADS 256
/* dispatch plan, histogram: experts counted in shared memory (48 KiB, what a block has without the
 * opt-in); more experts count with global atomics */
#define PLAN_SMEM_BINS 12288
/* dispatch plan, scan: a single block, the largest, so that up to 1024 experts take one step */
#define PLAN_SCAN_THREADS 1024
/* dispatch plan, scan: slices of the chunk rows per expert at most, so that a few experts still
 * occupy the whole block */
#define PLAN_SCAN_MAX_SLICES 32
/* dispatch plan, rank: pairs per batch; each thread compares its expert with the whole batch's,
 * so the work per pair grows with it */
#define PLAN_RANK_THREADS 128
/* dispatch plan, finish: one thread per pair (and per expert), a plain block size */
#define PLAN_FINISH_THREADS 256

/* gather and combine: ROWS_THREADS / tpr rows a block (tpr a power of two from the warp up to the
 * block, covering the row) */
#define ROWS_THREADS 256

/* gather (dispatch, the expert-parallel packing): 16-byte loads a thread issues before storing
 * (H200, 4096 rows of 7168 bf16: 23.1 us with 1, 22.5 us with 4) */
#ifndef GATHER_UNROLL
#define GATHER_UNROLL 4
#endif
/* gather: threads per row at most (a power of two, >= the warp; 128 with 8 loads in flight:
 * 22.8 us, no better) */
#ifndef GATHER_MAX_TPR
#define GATHER_MAX_TPR ROWS_THREADS
#endif
/* gather: streaming (evict-first) stores when the output is larger than this fraction of L2: with
 * the input rows (read k times) it no longer fits, and plain stores evict those rows (H200, 60 MiB
 * L2, 4096 rows of 7168 bf16, 58.7 MB: 22.4 -> 20.0 us; f32 45.9 -> 41.3 us). Smaller outputs keep
 * plain stores, so that the experts that read them next find them in L2. */
#ifndef GATHER_STREAM_MIN_L2S
#define GATHER_STREAM_MIN_L2S 0.5
#endif

/* expert-parallel combine + RMSNorm: one block per token, its sum in registers; 256 threads hold
 * H 7168 bf16 in 4 vectors of 8 each; rows that allow no 16-byte access take 1024 threads */
#define EP_COMBINE_THREADS 256
#define EP_COMBINE_SCALAR_THREADS 1024
/* expert-parallel combine: rows whose loads a thread issues before adding the first. 1: the
 * fewest registers, so that all 512 tokens of a batch are resident at once (H200, BS 512, K 8,
 * H 7168 bf16: 28.8 us with 1, 36.4 us with 2, 30.6 us with 4: occupancy beats loads in flight) */
#ifndef EP_COMBINE_UNROLL
#define EP_COMBINE_UNROLL 1
#endif

#endif
