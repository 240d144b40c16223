/* Tuning values of the gated-delta kernels (gated_delta.cu, gated_delta_tc.cu, gated_delta_wg.cu).
 * How many segments a sequence's state pass is cut into is the plan's choice (ops/gated_delta.c). */
#ifndef RUDNN_GATED_DELTA_TUNING_H
#define RUDNN_GATED_DELTA_TUNING_H

/* Warps of a tensor-core state-pass block (4 row quarters x GDR_TC_PASS_WARPS / 4 column groups),
 * one block an SM. H200 (bf16, K = V = 128), before the output was fused into the pass: 8 and 16
 * warps timed the same (B 1, H 8, T 32768: 0.885 and 0.858 ms); with the output's accumulators 16
 * keep every thread within 128 registers. */
#ifndef GDR_TC_PASS_WARPS
#define GDR_TC_PASS_WARPS 16
#endif

/* The state passes on wgmma where the device and binary have it (sm_90a) and K = V = 128
 * (gated_delta_wg.cu); 0 keeps tc_pass's mma.sync. Registers a thread of its warpgroups (setmaxnreg:
 * the producer gives its share to the consumers, whose increase is drawn from what it released:
 * per 128-thread unit, at most the registers the launch gave (64K over the block's threads, in
 * steps of 8): 512 threads in tc_state's pass, 128 a thread: 56 + 3 x 152 <= 4 x 128; 384 in the
 * segment passes, 168: 40 + 2 x 232 <= 3 x 168. Past that the consumers' increase waits for the
 * producer to exit, which waits for them: a hang (48 did that; gated_delta_wg.cu asserts it). */
#ifndef GDR_TC_WGMMA
#define GDR_TC_WGMMA 1
#endif
#ifndef GDR_WG_PRODUCER_REGS
#define GDR_WG_PRODUCER_REGS 40
#endif
#ifndef GDR_WG_STATE_PRODUCER_REGS /* the state pass's producer (also copies Q): 56 + 3 x 152 = 512 */
#define GDR_WG_STATE_PRODUCER_REGS 56
#endif
#ifndef GDR_WG_STATE_CONSUMER_REGS
#define GDR_WG_STATE_CONSUMER_REGS 152
#endif
#ifndef GDR_WG_SEGMENT_CONSUMER_REGS
#define GDR_WG_SEGMENT_CONSUMER_REGS 232
#endif
/* 1: a segment's zero-state run and its transition in one wgmma pass (PASS_SEGMENT: each
 * warpgroup carries its 64 columns of both through every chunk, so W and K are read once); 0: a
 * pass each. H100, bf16, B 1 / H 8 / T 32768: 0.926 of the two passes' time (0.490 -> 0.454 ms);
 * B 8 / H 16 / T 4096 and varlen (no segments) unchanged (bench/RESULTS.md). */
#ifndef GDR_WG_FUSED_SEGMENT
#define GDR_WG_FUSED_SEGMENT 1
#endif
/* Stages of the wgmma zero-state and transition passes' ring (the output's pass has room for 2
 * only). H100, bf16, B 1 / H 8 / T 32768 and B 8 / H 16 / T 4096: 3 stages timed as 2 (0.989, 1.000);
 * so did X = S^T W^T from registers with 4 stages (0.995, 1.004), and copying a chunk ahead before
 * signalling it was 6-8% slower; starting the output warpgroup's Q S before Delta was stored, and
 * releasing the stage after it, was 2% slower at B 8 (bench/RESULTS.md). */
#ifndef GDR_WG_SEGMENT_STAGES
#define GDR_WG_SEGMENT_STAGES 2
#endif
/* tc_prep blocks an SM (its launch bounds: 80 registers a thread at 6; V is staged over K once W is
 * made, so that a block needs 37 KB of shared memory, not 55). H100, bf16, B 1 / H 8 / T 32768,
 * B 8 / H 16 / T 4096 and varlen: 6 against 4 (V beside K) timed 0.994, 0.997 and 0.980; 5: 0.996,
 * 1.001, 0.984 (bench/RESULTS.md). */
#ifndef GDR_TC_PREP_BLOCKS
#define GDR_TC_PREP_BLOCKS 6
#endif

/* Threads of a tc_carry block (a thread a row of the transition and 4 columns). H100, B 1 / H 8 /
 * T 32768: 512 (half the blocks, half the L2 reads of each transition) was 5% slower than 256, and
 * so were 2 or 4 threads a (row, 4 columns), each summing a share of the row's k range. */
#ifndef GDR_TC_CARRY_THREADS
#define GDR_TC_CARRY_THREADS 256
#endif
/* 1: tc_carry's product M_j X[j] on mma.sync with 3xTF32 (a tile a warp, each element of M_j read
 * once a step from shared memory); 0: FP32 FMAs, a row a thread (bound on its shared-memory reads,
 * ncu on an H100: 46 us at B 1 / H 8 / T 32768). H100, same case: 0.990 of the FMA form's time
 * alone, 0.918 with the fused segment pass against 0.926 without (bench/RESULTS.md). */
#ifndef GDR_TC_CARRY_MMA
#define GDR_TC_CARRY_MMA 1
#endif

/* The recurrent form's 4-column kernel (gated_delta.cu, recurrent4): state rows a thread keeps (4
 * floats each: 4 GDR_REC4_ROWS registers, all its state loads issued before the first use), and the
 * tokens a sequence up to which it is taken over the 1-column kernel (decode and short speculative
 * runs; the 1-column one is kept for long recurrent runs). Rows: H200, decode B 64..256, H 16: 8
 * is fastest (16 7.5% slower, 4 24% slower; bench/RESULTS.md); the token threshold is not timed. */
#ifndef GDR_REC4_ROWS
#define GDR_REC4_ROWS 8
#endif
#ifndef GDR_REC4_MAX_TOKENS
#define GDR_REC4_MAX_TOKENS 16
#endif

#endif
