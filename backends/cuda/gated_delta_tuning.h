/* Tuning values of the gated-delta kernels (gated_delta.cu, gated_delta_tc.cu). How many segments
 * a sequence's state pass is cut into is the plan's choice (ops/gated_delta.c). */
#ifndef RUDNN_GATED_DELTA_TUNING_H
#define RUDNN_GATED_DELTA_TUNING_H

/* Warps of a tensor-core state-pass block (4 row quarters x GDR_TC_PASS_WARPS / 4 column groups),
 * one block an SM. H200 (bf16, K = V = 128), before the output was fused into the pass: 8 and 16
 * warps timed the same (B 1, H 8, T 32768: 0.885 and 0.858 ms); with the output's accumulators 16
 * keep every thread within 128 registers. */
#ifndef GDR_TC_PASS_WARPS
#define GDR_TC_PASS_WARPS 16
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
