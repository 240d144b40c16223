/* Plain-C FP64 host reference of the gated delta rule (include/rudnn/gated_delta.h, DESIGN.md
 * section 8). Written to be obviously correct: simple loops, every product and sum in double,
 * nothing rounded. Inputs are the values the device tensors hold, already decoded to double;
 * rounding the results to a dtype and the tolerance of a comparison are the caller's.
 *
 * The core functions take one (sequence, head) on plain row-major arrays:
 *   q, k [T][K], v [T][V], beta [T], log_decay [T], s_in [K][V]  ->  out [T][V], s_out [K][V].
 *
 * gdr_ref_recurrent is the definition, token by token (g_t = exp(log_decay_t)):
 *   S = g_t S;  delta = beta_t (v_t - S^T k_t);  S = S + k_t delta^T;  o_t = scale S^T q_t.
 * gdr_ref_chunked computes the same in the chunked WY form of backends/hal/gated_delta.h, chunks of
 * `chunk` tokens (the last one shorter): an independent second derivation, so that the two check
 * each other and the math the kernels implement. Per chunk of L tokens entering with state S0,
 * gamma_i = log_decay_0 + ... + log_decay_i (within the chunk):
 *   Lm[i][j] = beta_i e^(gamma_i - gamma_j) k_i . k_j (j < i);  Tm = (I + Lm)^-1 (forward substitution);
 *   W = Tm diag(beta e^gamma) Kc;  U = Tm diag(beta) Vc;  Delta = U - W S0;
 *   O = scale (diag(e^gamma) Qc S0 + Pm Delta),  Pm[i][j] = e^(gamma_i - gamma_j) q_i . k_j (j <= i);
 *   S1 = e^gamma_{L-1} S0 + sum_j e^(gamma_{L-1} - gamma_j) k_j Delta_j^T.
 *
 * Whole problems (gdr_ref_fixed, gdr_ref_varlen) call the per-(sequence, head) function on the
 * contiguous layouts of the API's dims: [B][H][T][*] for q, k, v, out, [B][H][T] for beta and
 * log_decay, [rows][H][K][V] for the states. */
#ifndef RUDNN_TESTS_GATED_DELTA_REF_H
#define RUDNN_TESTS_GATED_DELTA_REF_H

#include <stdint.h>

/* One (sequence, head), token by token. T may be 0 (s_out = s_in). s_out may equal s_in (in
 * place); out must not overlap the inputs. */
void gdr_ref_recurrent(int64_t T, int64_t K, int64_t V, const double *q, const double *k, const double *v,
                       const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                       double *s_out);

/* One (sequence, head) in the chunked WY form, chunk >= 1. s_out may equal s_in. Returns 0, or -1
 * when out of host memory or chunk < 1 (nothing written then). */
int gdr_ref_chunked(int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q, const double *k, const double *v,
                    const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                    double *s_out);

/* A fixed-length problem: q, k [B][H][T][K], v [B][H][T][V], beta, log_decay [B][H][T],
 * s_in [B][H][K][V] -> out [B][H][T][V], s_out [B][H][K][V]. chunk 0: the recurrent form, else the
 * chunked one. Returns 0 or -1 (out of host memory). */
int gdr_ref_fixed(int64_t B, int64_t H, int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q,
                  const double *k, const double *v, const double *beta, const double *log_decay, const double *s_in,
                  double scale, double *out, double *s_out);

/* A packed varlen problem (B = 1): q, k [H][T][K], v [H][T][V], beta, log_decay [H][T]; sequence i
 * (i < n) is tokens [cu[i], cu[i + 1]) and reads row r = idx[i] (idx NULL: r = i) of the pool
 * s_in [P_in][H][K][V] and writes row r of s_out [P_out][H][K][V]. Writes nothing else: not the
 * other rows of s_out, not the tokens of out past cu[n]. The caller passes a valid problem
 * (0 = cu[0] <= ... <= cu[n] <= T, distinct rows inside both pools). chunk as gdr_ref_fixed. */
int gdr_ref_varlen(int64_t H, int64_t T, int64_t K, int64_t V, int64_t chunk, int64_t n, const int64_t *cu,
                   const int32_t *idx, const double *q, const double *k, const double *v, const double *beta,
                   const double *log_decay, const double *s_in, double scale, double *out, double *s_out);

#endif
