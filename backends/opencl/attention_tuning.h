/* Tuning values of the OpenCL attention kernels (attention.c, kernels/attention.cl), in one
 * place. Each value with why. */
#ifndef RUDNN_OCL_ATTENTION_TUNING_H
#define RUDNN_OCL_ATTENTION_TUNING_H

/* flash_unit on GPUs: 16 query rows per work-group share each staged K/V tile (16x less K/V
 * traffic than one row per group), 16 work-items per row (256 per group: a full group on every
 * GPU driver, and Dv / 16 <= 16 accumulator registers each). */
#define ATT_GPU_ROWS 16u
#define ATT_GPU_THREADS_PER_ROW 16u
/* flash_unit on CPU devices (PoCL): one query row per work-group (many groups spread over the
 * cores; the K/V tile is in cache anyway), 16 work-items: one AVX-512 vector of floats. */
#define ATT_CPU_ROWS 1u
#define ATT_CPU_THREADS_PER_ROW 16u
/* Keys per staged tile: start here and halve (then halve the rows) until the tiles fit the
 * device's local memory; never below ATT_MIN_KEYS (then flash_unit does not run). */
#define ATT_MAX_KEYS 64u
#define ATT_MIN_KEYS 8u
/* Upper bound of the fallback kernels' work-group size (one group per score row). */
#define ATT_FALLBACK_MAX_LOCAL 256u

#endif
