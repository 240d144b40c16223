/* FP64 reference of the gated delta rule: see gated_delta_ref.h. */
#include "gated_delta_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gdr_ref_recurrent(int64_t T, int64_t K, int64_t V, const double *q, const double *k, const double *v,
                       const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                       double *s_out)
{
    if (s_out != s_in)
        memmove(s_out, s_in, sizeof(double) * (size_t)(K * V));
    double *S = s_out;
    for (int64_t t = 0; t < T; t++) {
        const double *kt = k + t * K, *qt = q + t * K, *vt = v + t * V;
        const double g = exp(log_decay[t]);
        for (int64_t i = 0; i < K * V; i++)
            S[i] *= g;
        for (int64_t c = 0; c < V; c++) { /* delta = beta (v - S^T k); S += k delta^T */
            double kv = 0.0;
            for (int64_t r = 0; r < K; r++)
                kv += S[r * V + c] * kt[r];
            const double delta = beta[t] * (vt[c] - kv);
            for (int64_t r = 0; r < K; r++)
                S[r * V + c] += kt[r] * delta;
        }
        for (int64_t c = 0; c < V; c++) { /* o = scale S^T q */
            double o = 0.0;
            for (int64_t r = 0; r < K; r++)
                o += S[r * V + c] * qt[r];
            out[t * V + c] = scale * o;
        }
    }
}

int gdr_ref_chunked(int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q, const double *k, const double *v,
                    const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                    double *s_out)
{
    const int64_t C = chunk;
    double *S = malloc(sizeof(double) * (size_t)(K * V));
    double *gam = malloc(sizeof(double) * (size_t)C), *Tm = calloc((size_t)(C * C), sizeof(double));
    double *W = malloc(sizeof(double) * (size_t)(C * K)), *D = malloc(sizeof(double) * (size_t)(C * V));
    if (!S || !gam || !Tm || !W || !D) {
        free(S), free(gam), free(Tm), free(W), free(D);
        return -1;
    }
    memcpy(S, s_in, sizeof(double) * (size_t)(K * V));
    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t L = T - t0 < C ? T - t0 : C;
        const double *qc = q + t0 * K, *kc = k + t0 * K, *vc = v + t0 * V, *bc = beta + t0;
        double run = 0.0;
        for (int64_t i = 0; i < L; i++)
            gam[i] = run += log_decay[t0 + i];
        /* T = (I + Lm)^-1, Lm[i][j] = beta_i e^(gamma_i - gamma_j) k_i . k_j (j < i): forward
         * substitution, row by row */
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < L; j++) {
                if (j > i) {
                    Tm[i * C + j] = 0.0;
                    continue;
                }
                if (j == i) {
                    Tm[i * C + j] = 1.0;
                    continue;
                }
                double acc = 0.0; /* sum_{j <= m < i} Lm[i][m] T[m][j] */
                for (int64_t m = j; m < i; m++) {
                    double kk = 0.0;
                    for (int64_t d = 0; d < K; d++)
                        kk += kc[i * K + d] * kc[m * K + d];
                    acc += bc[i] * exp(gam[i] - gam[m]) * kk * Tm[m * C + j];
                }
                Tm[i * C + j] = -acc;
            }
        /* W = T diag(beta e^gamma) Kc; Delta = T diag(beta) Vc - W S */
        for (int64_t i = 0; i < L; i++) {
            for (int64_t d = 0; d < K; d++) {
                double acc = 0.0;
                for (int64_t j = 0; j <= i; j++)
                    acc += Tm[i * C + j] * bc[j] * exp(gam[j]) * kc[j * K + d];
                W[i * K + d] = acc;
            }
            for (int64_t c = 0; c < V; c++) {
                double u = 0.0, ws = 0.0;
                for (int64_t j = 0; j <= i; j++)
                    u += Tm[i * C + j] * bc[j] * vc[j * V + c];
                for (int64_t d = 0; d < K; d++)
                    ws += W[i * K + d] * S[d * V + c];
                D[i * V + c] = u - ws;
            }
        }
        /* O = scale (e^gamma Qc S + Pm Delta), Pm[i][j] = e^(gamma_i - gamma_j) q_i . k_j (j <= i) */
        for (int64_t i = 0; i < L; i++)
            for (int64_t c = 0; c < V; c++) {
                double qs = 0.0, pd = 0.0;
                for (int64_t d = 0; d < K; d++)
                    qs += qc[i * K + d] * S[d * V + c];
                for (int64_t j = 0; j <= i; j++) {
                    double qk = 0.0;
                    for (int64_t d = 0; d < K; d++)
                        qk += qc[i * K + d] * kc[j * K + d];
                    pd += exp(gam[i] - gam[j]) * qk * D[j * V + c];
                }
                out[(t0 + i) * V + c] = scale * (exp(gam[i]) * qs + pd);
            }
        /* S = e^gamma_last S + sum_j e^(gamma_last - gamma_j) k_j Delta_j^T */
        const double gl = gam[L - 1];
        for (int64_t d = 0; d < K; d++)
            for (int64_t c = 0; c < V; c++) {
                double acc = exp(gl) * S[d * V + c];
                for (int64_t j = 0; j < L; j++)
                    acc += exp(gl - gam[j]) * kc[j * K + d] * D[j * V + c];
                S[d * V + c] = acc;
            }
    }
    memcpy(s_out, S, sizeof(double) * (size_t)(K * V));
    free(S), free(gam), free(Tm), free(W), free(D);
    return 0;
}
