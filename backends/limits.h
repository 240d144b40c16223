/* Limits that ops/ enforces and backend kernels are sized for, written once.
 *
 * Preprocessor macros only (no types, no declarations, no C-only syntax), so
 * that C, CUDA and OpenCL C read the same file: the OpenCL plugin's build puts
 * it before kernels/moe.cl (backends/opencl/meson.build), which also makes the
 * program cache key change whenever a value here changes. */
#ifndef RUDNN_BACKENDS_LIMITS_H
#define RUDNN_BACKENDS_LIMITS_H

/* Grouped sigmoid routing (rudnn_moe_route_sigmoid_grouped): ops/ rejects
 * larger values, and the routing kernels keep a whole token row (its experts'
 * scores, the group scores and the chosen experts) in fixed-size on-chip
 * arrays of these lengths. Softmax routing has no such limits. */
#define RUDNN_MOE_GROUPED_MAX_EXPERTS 1024
#define RUDNN_MOE_GROUPED_MAX_GROUPS 128
#define RUDNN_MOE_GROUPED_MAX_TOP_K 64

#endif
