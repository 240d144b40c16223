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

/* The element-wise epilogues: threads a block, and at most this many blocks an SM (grid-stride). */
#define FFN_EW_THREADS 256
#define FFN_EW_BLOCKS_PER_SM 8

#endif
