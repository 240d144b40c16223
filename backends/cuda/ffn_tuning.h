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

/* The element-wise epilogues: threads a block, and at most this many blocks an SM (grid-stride). */
#define FFN_EW_THREADS 256
#define FFN_EW_BLOCKS_PER_SM 8
/* the vectorised activation: rows a launch covers before its blocks loop (grid.y's limit) */
#define FFN_ACT_MAX_GRID_Y 65535

#endif
