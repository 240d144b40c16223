/* Plain-C FP64 host reference of the gated delta rule (include/rudnn/gated_delta.h, DESIGN.md
 * section 8). One (sequence, head) at a time on plain row-major double arrays:
 *   q, k [T][K], v [T][V], beta [T], log_decay [T], s_in [K][V]  ->  out [T][V], s_out [K][V].
 * gdr_ref_recurrent is the definition, token by token; gdr_ref_chunked computes the same in the
 * chunked WY form of backends/hal/gated_delta.h (a second derivation the kernels follow), chunks
 * of chunk tokens, the last one shorter. s_out may equal s_in (in place). */
#ifndef RUDNN_TESTS_GATED_DELTA_REF_H
#define RUDNN_TESTS_GATED_DELTA_REF_H

#include <stdint.h>

void gdr_ref_recurrent(int64_t T, int64_t K, int64_t V, const double *q, const double *k, const double *v,
                       const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                       double *s_out);

/* Returns 0, or -1 when out of host memory (nothing written then). */
int gdr_ref_chunked(int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q, const double *k, const double *v,
                    const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                    double *s_out);

#endif
