/* Tuning values of the OpenCL attention kernels (attention.c, kernels/attention.cl), in one
 * place. Each value with why. */
#ifndef RUDNN_OCL_ATTENTION_TUNING_H
#define RUDNN_OCL_ATTENTION_TUNING_H

/* flash_unit on GPUs: 16 query rows per work-group share each staged K/V tile (16x less K/V
 * traffic than one row per group), 16 work-items per row (256 per group: a full group on every
 * GPU driver, and Dv / 16 <= 16 accumulator registers each). */
#define ATT_GPU_ROWS 16u
#define ATT_GPU_THREADS_PER_ROW 16u
/* flash_unit on CPU devices (PoCL): the same shape. One query row per work-group was 1.7-2x
 * slower there (F32 B1 H8 S512 D64 causal: 534 ms against 252-309 ms), since every row then
 * copies the whole K/V tile into local memory for itself. */
#define ATT_CPU_ROWS 16u
#define ATT_CPU_THREADS_PER_ROW 16u
/* GPUs with fewer query rows than ATT_GPU_ROWS (decode: only B * Hq work-groups) keep the
 * group's size by giving each row more work-items, up to this many (one key of a 64-key tile
 * each; whole warps instead of half of one). Not on CPU devices: PoCL was no faster with it
 * (F16 Hq8 Hkv2 Sq1 Skv2048 D128: 14-17 ms with 16 per row, 18-21 ms with 64). */
#define ATT_GPU_MAX_THREADS_PER_ROW 64u
/* Keys per staged tile: start here and halve (then halve the rows) until the tiles fit the
 * device's local memory; never below ATT_MIN_KEYS (then flash_unit does not run). */
#define ATT_MAX_KEYS 64u
#define ATT_MIN_KEYS 8u
/* On CPU devices the fallback is preferred up to this many query rows (decode): PoCL, F16 B1
 * Hq8 Hkv2 Skv2048 D128: Sq 1 fallback 13 ms, flash 44 ms; Sq 4 fallback 78 ms, flash 54 ms;
 * Sq 256 fallback 4.9 s, flash 2.0 s. */
#define ATT_CPU_FALLBACK_MAX_SQ 1
/* Upper bound of the fallback kernels' work-group size (one group per score row). */
#define ATT_FALLBACK_MAX_LOCAL 256u

#endif
