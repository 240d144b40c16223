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
 * the producer gives its share to the consumers; 512 threads in tc_state's pass: 40 + 3 x 152 <= 512,
 * 384 in the segment passes: 40 + 2 x 232 <= 512, per 128-thread unit of the 64K registers). */
#ifndef GDR_TC_WGMMA
#define GDR_TC_WGMMA 1
#endif
#ifndef GDR_WG_PRODUCER_REGS
#define GDR_WG_PRODUCER_REGS 40
#endif
#ifndef GDR_WG_STATE_CONSUMER_REGS
#define GDR_WG_STATE_CONSUMER_REGS 152
#endif
#ifndef GDR_WG_SEGMENT_CONSUMER_REGS
#define GDR_WG_SEGMENT_CONSUMER_REGS 232
#endif
/* Stages of the wgmma zero-state and transition passes' ring (the output's pass has room for 2
 * only), and whether the producer keeps the next chunk's copies in flight before it signals a chunk
 * (1) or signals each chunk as soon as it lands (0). The defaults are the protocol timed and tested
 * on the H200; 3 stages and copying ahead compile without spills but have not run on a GPU yet
 * (the passes wait on their loads: bench/RESULTS.md). */
#ifndef GDR_WG_SEGMENT_STAGES
#define GDR_WG_SEGMENT_STAGES 2
#endif
/* 1: the zero-state and transition passes take X = S^T W^T's A operand from registers (the
 * rounded accumulators) instead of an S^T copy in shared memory, which frees that copy's 64 KB for
 * a fourth stage; 2: the state pass too (it still stores S^T for the output warpgroup, while the
 * products run; 80-130 bytes of spills at 152 registers); 0: through shared memory. Not yet timed. */
#ifndef GDR_WG_X_REGS
#define GDR_WG_X_REGS 0
#endif
#ifndef GDR_WG_COPY_AHEAD
#define GDR_WG_COPY_AHEAD 0
#endif

/* tc_prep's triangular inverse: its block rows on tensor cores (3xTF32, about FP32's precision:
 * 1) or on FP32 FMAs (0). Not yet timed. */
#ifndef GDR_PREP_INVERSE_MMA
#define GDR_PREP_INVERSE_MMA 0
#endif

/* tc_prep's Gram matrix K K^T: a warp's n8 tiles on and below the diagonal only (1; 2, 4, 6, 8 for
 * the 4 warps, the rest written 0) or all 8 (0). Not yet timed. */
#ifndef GDR_PREP_GRAM_LOWER
#define GDR_PREP_GRAM_LOWER 0
#endif

/* tc_prep's W and U products: A fragments built from the FP32 T in registers, scaled and rounded
 * there (1), or T scaled and rounded into staged 16-bit copies Tw, Tu first (0). Not yet timed. */
#ifndef GDR_PREP_TFRAG
#define GDR_PREP_TFRAG 0
#endif

/* tc_prep blocks an SM (its launch bounds: 128 registers a thread at 4). H200, bf16, prefill B 1,
 * H 8, T 32768 earlier (an older state pass): 3 -> 4 took the call from 0.792 to 0.759 ms. */
#ifndef GDR_TC_PREP_BLOCKS
#define GDR_TC_PREP_BLOCKS 4
#endif

/* tc_carry: 1 loads a step's local state before its wait and adds it after the products (its
 * latency hidden); 0 starts the sums from it. Not yet timed. */
#ifndef GDR_CARRY_LOCAL_LAST
#define GDR_CARRY_LOCAL_LAST 0
#endif

/* 1: the wgmma passes and tc_carry launch as programmatic dependents (pdl.cuh, sm_90): scheduled
 * while the kernel before them ends, waiting for its outputs in the kernel. Not yet timed. */
#ifndef GDR_PDL
#define GDR_PDL 0
#endif

/* Threads of a tc_carry block (a thread a row of the transition and 4 columns). */
#ifndef GDR_TC_CARRY_THREADS
#define GDR_TC_CARRY_THREADS 256
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
