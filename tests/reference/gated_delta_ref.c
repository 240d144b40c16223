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
    double *S = s_out; /* S[r][c], r < K, c < V */
    for (int64_t t = 0; t < T; t++) {
        const double *kt = k + t * K, *qt = q + t * K, *vt = v + t * V;
        /* S = exp(g) S */
        const double g = exp(log_decay[t]);
        for (int64_t i = 0; i < K * V; i++)
            S[i] *= g;
        /* delta_c = beta (v_c - (S^T k)_c), then column c of S gains k delta_c: each column of S is
         * read once before it is updated, and no column's update touches another column */
        for (int64_t c = 0; c < V; c++) {
            double sk = 0.0;
            for (int64_t r = 0; r < K; r++)
                sk += S[r * V + c] * kt[r];
            const double delta = beta[t] * (vt[c] - sk);
            for (int64_t r = 0; r < K; r++)
                S[r * V + c] += kt[r] * delta;
        }
        /* o = scale S^T q, from the updated state */
        for (int64_t c = 0; c < V; c++) {
            double sq = 0.0;
            for (int64_t r = 0; r < K; r++)
                sq += S[r * V + c] * qt[r];
            out[t * V + c] = scale * sq;
        }
    }
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

int gdr_ref_chunked(int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q, const double *k, const double *v,
                    const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
                    double *s_out)
{
    if (chunk < 1)
        return -1;
    const int64_t C = chunk < T ? chunk : (T > 0 ? T : 1); /* no chunk is longer than the sequence */
    const size_t kv = (size_t)(K * V), cc = (size_t)(C * C);
    double *S = malloc(sizeof(double) * kv), *S1 = malloc(sizeof(double) * kv);
    double *gam = malloc(sizeof(double) * (size_t)C);
    double *Gkk = malloc(sizeof(double) * cc), *Gqk = malloc(sizeof(double) * cc), *Tm = malloc(sizeof(double) * cc);
    double *W = malloc(sizeof(double) * (size_t)(C * K)), *U = malloc(sizeof(double) * (size_t)(C * V));
    double *D = malloc(sizeof(double) * (size_t)(C * V));
    int rc = 0;
    if (!S || !S1 || !gam || !Gkk || !Gqk || !Tm || !W || !U || !D) {
        rc = -1;
        goto done;
    }
    memcpy(S, s_in, sizeof(double) * kv);
    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t L = T - t0 < C ? T - t0 : C;
        const double *qc = q + t0 * K, *kc = k + t0 * K, *vc = v + t0 * V, *bc = beta + t0;

        /* gamma: running sums of log_decay inside the chunk */
        double run = 0.0;
        for (int64_t i = 0; i < L; i++) {
            run += log_decay[t0 + i];
            gam[i] = run;
        }
        /* Gram matrices k_i . k_j and q_i . k_j */
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < L; j++) {
                Gkk[i * C + j] = dot(kc + i * K, kc + j * K, K);
                Gqk[i * C + j] = dot(qc + i * K, kc + j * K, K);
            }

        /* Tm = (I + Lm)^-1, unit lower triangular: (I + Lm) Tm = I gives, row by row,
         * Tm[i][j] = [i == j] - sum_{j <= m < i} Lm[i][m] Tm[m][j] (Tm[m][j] = 0 for m < j). */
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < L; j++) {
                if (j > i) {
                    Tm[i * C + j] = 0.0;
                    continue;
                }
                double acc = i == j ? 1.0 : 0.0;
                for (int64_t m = j; m < i; m++) {
                    const double lm = bc[i] * exp(gam[i] - gam[m]) * Gkk[i * C + m];
                    acc -= lm * Tm[m * C + j];
                }
                Tm[i * C + j] = acc;
            }

        /* W = Tm diag(beta e^gamma) Kc;  U = Tm diag(beta) Vc;  Delta = U - W S0 */
        for (int64_t i = 0; i < L; i++) {
            for (int64_t d = 0; d < K; d++) {
                double w = 0.0;
                for (int64_t j = 0; j <= i; j++)
                    w += Tm[i * C + j] * bc[j] * exp(gam[j]) * kc[j * K + d];
                W[i * K + d] = w;
            }
            for (int64_t c = 0; c < V; c++) {
                double u = 0.0;
                for (int64_t j = 0; j <= i; j++)
                    u += Tm[i * C + j] * bc[j] * vc[j * V + c];
                U[i * V + c] = u;
            }
            for (int64_t c = 0; c < V; c++) {
                double ws = 0.0;
                for (int64_t d = 0; d < K; d++)
                    ws += W[i * K + d] * S[d * V + c];
                D[i * V + c] = U[i * V + c] - ws;
            }
        }

        /* O = scale (diag(e^gamma) Qc S0 + Pm Delta), Pm[i][j] = e^(gamma_i - gamma_j) q_i . k_j, j <= i */
        for (int64_t i = 0; i < L; i++)
            for (int64_t c = 0; c < V; c++) {
                double qs = 0.0, pd = 0.0;
                for (int64_t d = 0; d < K; d++)
                    qs += qc[i * K + d] * S[d * V + c];
                for (int64_t j = 0; j <= i; j++)
                    pd += exp(gam[i] - gam[j]) * Gqk[i * C + j] * D[j * V + c];
                out[(t0 + i) * V + c] = scale * (exp(gam[i]) * qs + pd);
            }

        /* S1 = e^gamma_last S0 + sum_j e^(gamma_last - gamma_j) k_j Delta_j^T */
        const double gl = gam[L - 1];
        for (int64_t d = 0; d < K; d++)
            for (int64_t c = 0; c < V; c++) {
                double acc = exp(gl) * S[d * V + c];
                for (int64_t j = 0; j < L; j++)
                    acc += exp(gl - gam[j]) * kc[j * K + d] * D[j * V + c];
                S1[d * V + c] = acc;
            }
        double *swap = S;
        S = S1, S1 = swap;
    }
    memcpy(s_out, S, sizeof(double) * kv);
done:
    free(S), free(S1), free(gam), free(Gkk), free(Gqk), free(Tm), free(W), free(U), free(D);
    return rc;
}

/* One (sequence, head) by the form chunk names (0: recurrent). */
static int one(int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q, const double *k, const double *v,
               const double *beta, const double *log_decay, const double *s_in, double scale, double *out,
               double *s_out)
{
    if (!chunk) {
        gdr_ref_recurrent(T, K, V, q, k, v, beta, log_decay, s_in, scale, out, s_out);
        return 0;
    }
    return gdr_ref_chunked(T, K, V, chunk, q, k, v, beta, log_decay, s_in, scale, out, s_out);
}

int gdr_ref_fixed(int64_t B, int64_t H, int64_t T, int64_t K, int64_t V, int64_t chunk, const double *q,
                  const double *k, const double *v, const double *beta, const double *log_decay, const double *s_in,
                  double scale, double *out, double *s_out)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t bh = b * H + h;
            if (one(T, K, V, chunk, q + bh * T * K, k + bh * T * K, v + bh * T * V, beta + bh * T,
                    log_decay + bh * T, s_in + bh * K * V, scale, out + bh * T * V, s_out + bh * K * V))
                return -1;
        }
    return 0;
}

int gdr_ref_varlen(int64_t H, int64_t T, int64_t K, int64_t V, int64_t chunk, int64_t n, const int64_t *cu,
                   const int32_t *idx, const double *q, const double *k, const double *v, const double *beta,
                   const double *log_decay, const double *s_in, double scale, double *out, double *s_out)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t t0 = cu[i], len = cu[i + 1] - cu[i], row = idx ? idx[i] : i;
        for (int64_t h = 0; h < H; h++) {
            const int64_t tok = h * T + t0; /* the sequence's first token of head h */
            if (one(len, K, V, chunk, q + tok * K, k + tok * K, v + tok * V, beta + tok, log_decay + tok,
                    s_in + (row * H + h) * K * V, scale, out + tok * V, s_out + (row * H + h) * K * V))
                return -1;
        }
    }
    return 0;
}
