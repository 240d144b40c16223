/* Tuning values of the FFN kernels (ffn.cu). */
#ifndef RUDNN_FFN_TUNING_H
#define RUDNN_FFN_TUNING_H

/* The tiled GEMM: a block's tile of C (rows x columns), the k step, and each thread's square patch
 * (TILE_M / MICRO x TILE_N / MICRO threads). */
#ifndef FFN_TILE_M
#define FFN_TILE_M 64
#endif
#ifndef FFN_TILE_N
#define FFN_TILE_N 64
#endif
#ifndef FFN_TILE_K
#define FFN_TILE_K 16
#endif
#ifndef FFN_MICRO
#define FFN_MICRO 4
#endif

/* The weight-only GEMM for few rows (ffn_gemv.cu): rows up to which it runs, threads a block (a
 * warp's 256 columns, the warps splitting the block's rows), rows' loads in flight a lane, blocks
 * an SM the split of k aims at, and the fewest rows of k a split takes. */
#ifndef FFN_GEMV_MAX_M
#define FFN_GEMV_MAX_M 16
#endif
#define FFN_GEMV_THREADS 256
#define FFN_GEMV_COLS 256
#ifndef FFN_GEMV_UNROLL
#define FFN_GEMV_UNROLL 8
#endif
#ifndef FFN_GEMV_BLOCKS_PER_SM
#define FFN_GEMV_BLOCKS_PER_SM 3
#endif
#define FFN_GEMV_MIN_ROWS 128

/* The int4 weight-only GEMM on tensor cores (ffn_mma_w4.cu, "ffn.mma_w4"):
 * rows of A up to which ffn_gemm takes it: past 64 it runs token blocks of 64, each block
 * dequantizing the weights again (read from L2 the second time); at 128 its mma.sync work is still
 * below a BF16 GEMM's weight bytes (to be measured against cuBLAS: lower it if slower) */
#ifndef FFN_MMA_W4_MAX_M
#define FFN_MMA_W4_MAX_M 128
#endif
/* threads a block: 4 warps (side by side along n, or splitting k between them) */
#define FFN_MMA_W4_THREADS 128
/* k16 steps of weights a warp keeps in flight (cp.async ring, 1 KiB a step at m <= 16): 5 ahead x
 * 12 warps = 60 KiB an SM, above the ~30 KiB that H200's latency x bandwidth share asks */
#ifndef FFN_MMA_W4_STAGES
#define FFN_MMA_W4_STAGES 6
#endif
/* blocks an SM for m <= 32 (12 warps, at most 170 registers a thread) and for m > 32 (the 8-tile
 * variant holds 128 accumulators a thread: 8 warps); the split of k aims at one wave of these */
#ifndef FFN_MMA_W4_BLOCKS_SM_SMALL
#define FFN_MMA_W4_BLOCKS_SM_SMALL 3
#endif
#ifndef FFN_MMA_W4_BLOCKS_SM_LARGE
#define FFN_MMA_W4_BLOCKS_SM_LARGE 2
#endif
/* elements of A a staged chunk holds (tokens of the block x rows of k; one block barrier a chunk):
 * 1024 rows for 8 tokens .. 128 for 64, 33 .. 37 KiB double-buffered */
#ifndef FFN_MMA_W4_CHUNK_ELEMS
#define FFN_MMA_W4_CHUNK_ELEMS 8192
#endif
/* 1: the int4 GEMM multiplies the raw codes (bias + w) and applies (w + offset) x scale to each
 * group's FP32 sums (no rounding of the dequantized weight; ~70 fewer instructions a KiB); 0: each
 * weight is dequantized and rounded to A's dtype before the product. H200, bf16, K 8192, N 28672,
 * g128: M 1-8 4-5% faster with 1 (bench/RESULTS.md); past FFN_MMA_W4_FOLD_NT tiles it never folds */
#ifndef FFN_MMA_W4_FOLD
#define FFN_MMA_W4_FOLD 1
#endif
/* the most token tiles of 8 a warp (NT: 1 at m <= 8, 2 at m <= 16, 4 at m <= 32) whose sums are
 * folded; past one tile the group sums double the accumulators (240 registers at NT 2: no spills
 * only at 2 blocks an SM, FFN_MMA_W4_BLOCKS_SM_FOLD). H100, K1 8192, N1 28672, g128: M 16 1.12x
 * slower with 2 than with 1 (the 2-block wave splits the first product unevenly: 224 blocks of 264
 * slots); the H200 not measured */
#ifndef FFN_MMA_W4_FOLD_NT
#define FFN_MMA_W4_FOLD_NT 1
#endif
#ifndef FFN_MMA_W4_BLOCKS_SM_FOLD
#define FFN_MMA_W4_BLOCKS_SM_FOLD 2
#endif
/* 1: those variants keep their FP32 sums in shared memory (only the group ends touch them: 168
 * registers without spills, so 3 blocks an SM fit, with FFN_MMA_W4_BLOCKS_SM_FOLD 3) and halve
 * the activation chunks (73 KB a block); 0: in registers. H100, same shape: M 16 1.07x slower with
 * 1 (each group's end loads and stores 64 sums a thread); the H200 not measured */
#ifndef FFN_MMA_W4_FOLD_SMEM
#define FFN_MMA_W4_FOLD_SMEM 0
#endif
/* the weight-only path past the few-rows kernels (dequantized weights into the workspace, then
 * cuBLAS): consecutive columns a thread of the dequantization (one 16-byte store) */
#ifndef FFN_DEQ_COLS
#define FFN_DEQ_COLS 8
#endif
/* 1: the expert form's first grouped product (F16 / BF16) applies the activation in its epilogue
 * (no h in memory, no activation launch); 0: h, then the activation kernel over all rows */
#ifndef FFN_GROUPED_FUSED_ACT
#define FFN_GROUPED_FUSED_ACT 1
#endif
/* 1: that epilogue's sigmoids (silu, swiglu, fastgelu) through ex2.approx / rcp.approx, as the MoE
 * experts' (the unrolled epilogue of the accurate expf and division was 350 KB of code) */
#ifndef FFN_GROUPED_ACT_FAST
#define FFN_GROUPED_ACT_FAST 1
#endif
/* The int4 wgmma kernel (ffn_wgmma_w4.cu, sm_90a): 1 on; its pipeline stages (24 KB each); the
 * fewest rows (dense) or most rows of one expert (grouped) from which it replaces the mma.sync
 * kernel and the dequantize-then-cuBLAS path */
#ifndef FFN_WGMMA_W4
#define FFN_WGMMA_W4 1
#endif
#ifndef FFN_WGMMA_W4_STAGES
#define FFN_WGMMA_W4_STAGES 6
#endif
#ifndef FFN_WGMMA_W4_MIN_ROWS
#define FFN_WGMMA_W4_MIN_ROWS 64
#endif
/* a dense int4 wgmma product of few tiles splits k (F32 partials, summed in order), each split
 * this many k tiles (of 64) or more */
#ifndef FFN_WGMMA_W4_SPLIT_MIN_KTILES
#define FFN_WGMMA_W4_SPLIT_MIN_KTILES 8
#endif
/* the expert form's int4 products run as one grouped launch (all experts, no split of k) from this
 * many experts; fewer run one expert at a time, whose launches split k to fill the GPU */
#ifndef FFN_MMA_W4_GROUPED_MIN_EXPERTS
#define FFN_MMA_W4_GROUPED_MIN_EXPERTS 8
#endif
/* the fewest k16 steps a warp takes in a split (the ring's fill and the epilogue amortised), and the
 * most splits */
#ifndef FFN_MMA_W4_MIN_STEPS
#define FFN_MMA_W4_MIN_STEPS 8
#endif
#define FFN_MMA_W4_MAX_SPLITS 64
/* warps an SM needs in flight for its share of the bandwidth (each keeps STAGES - 1 steps of 0.5 ..
 * 1 KiB coming: 8 warps x 5 KiB = 40 KiB an SM) */
#ifndef FFN_MMA_W4_WARPS_SM
#define FFN_MMA_W4_WARPS_SM 8
#endif
/* issue slots an evenly loaded SM spends at full bandwidth, percent, by tokens a warp: the split
 * choice accepts a busiest SM with 1 / (this) times the average work. <= 16 tokens: ncu measured
 * the kernel issue-bound (~240 SASS instructions a KiB of weights, 2.5 issued a cycle an SM), so
 * every SM's share counts (100 beat 70 by 1.08x at M 1..16); 32 tokens: 80 beat 100 (1.10x);
 * 64 are mma-bound */
#ifndef FFN_MMA_W4_ISSUE_PCT_16
#define FFN_MMA_W4_ISSUE_PCT_16 100
#endif
#ifndef FFN_MMA_W4_ISSUE_PCT_32
#define FFN_MMA_W4_ISSUE_PCT_32 80
#endif
#ifndef FFN_MMA_W4_ISSUE_PCT_64
#define FFN_MMA_W4_ISSUE_PCT_64 100
#endif
/* weight of the partials' bytes against the weights' in the split choice, percent: they are
 * written and read back mostly in L2, cheaper than the weights' DRAM reads */
#ifndef FFN_MMA_W4_PARTIAL_COST
#define FFN_MMA_W4_PARTIAL_COST 50
#endif
/* 1: the int4 GEMM's split sum and the vectorised activation launch as programmatic dependents
 * (pdl.cuh, sm_90): each is scheduled while the kernel before it ends instead of after */
#ifndef FFN_PDL
#define FFN_PDL 1
#endif

/* 1: where the int4 tensor-core kernel splits k, the first product's split sum and the activation
 * run as one kernel (ffn.split_act); 0: the split sum, then the activation. H100, W4A16 K1 8192
 * N1 28672: 1 is 2-4% faster at M 1..32 */
#ifndef FFN_SPLIT_ACT
#define FFN_SPLIT_ACT 1
#endif

/* 1: after ffn.split_act the second product (ffn.mma_w4) launches as a programmatic dependent and
 * copies its first weight stages before it waits for the activations (its weights are the op's
 * inputs, final before the first product began), at most 2 blocks an SM where its grid fits that;
 * 0: a plain launch. H100, W4A16 K1 8192 N1 28672 g128: M 1 / 8 / 16 0.925 / 0.957 / 0.988 of the
 * plain launch's time (bench/RESULTS.md). */
#ifndef FFN_MMA_W4_EARLY
#define FFN_MMA_W4_EARLY 1
#endif

/* splits of k whose partials a split sum loads at once (ffn_split.cuh; 16 was 1-5% slower than 8
 * at M 8..32), from FFN_SPLIT_BATCH_MIN splits on (M 32's 3 splits were 2% slower batched) */
#ifndef FFN_SPLIT_BATCH
#define FFN_SPLIT_BATCH 8
#endif
#ifndef FFN_SPLIT_BATCH_MIN
#define FFN_SPLIT_BATCH_MIN 5
#endif

/* The element-wise epilogues: threads a block, and at most this many blocks an SM (grid-stride). */
#define FFN_EW_THREADS 256
#define FFN_EW_BLOCKS_PER_SM 8
/* the vectorised activation: rows a launch covers before its blocks loop (grid.y's limit) */
#define FFN_ACT_MAX_GRID_Y 65535

#endif
