/* Numeric tests of the gated delta rule (include/rudnn/gated_delta.h) against the FP64 recurrence of
 * reference/gated_delta_ref.c, through the public API; run once per backend (meson registers
 * gated_delta-opencl, -cuda, -hip with RUDNN_BACKEND set).
 *
 * Every case runs for F32, F16 and BF16 and for both forms (rudnn_chunk_gated_delta_rule with the
 * case's chunk, rudnn_gated_delta_rule), once with a workspace of exactly the queried size and once
 * with a NULL workspace (the queue's pool): the (T, chunk) pairs (1,1), (3,4), (7,3), (67,33),
 * (64,64), (65,64), (129,64); K and V not multiples of 16 with K != V; K = V = 64 and 128 with chunk 64
 * (on CUDA the tensor-core path); gates log_decay 0 and -20 and a mild one; beta 0, 1 and random;
 * [B, T, H, K] storage viewed as [B, H, T, K] (and beta / log_decay [B, T, H] viewed [B, H, T]);
 * T = 0 (the state copied, the output untouched); prefill (chunked) then decode token by token,
 * passing final_state back, equal to one run; varlen with lengths 0, 1 and longer, shuffled state
 * rows in pools of different sizes (rows no sequence names and tokens past the last offset
 * untouched); one long sequence (T 8192) for drift.
 *
 * Reference: the inputs are rounded to the dtype first (uploaded, read back) and the FP64
 * recurrence runs on the rounded values, so only the kernels' own arithmetic is measured. A case
 * passes when every output element and every final-state element is within
 *     tol * max(1, max |ref output|)
 * of the reference (the state compared against the same scale). Tolerances:
 *   F32  1e-4: FP32 sums over K and the chunk (<= 129 terms of O(1)), the WY inverse in FP32;
 *        an error of one term is ~1e-1.
 *   F16  6e-3 and BF16 3e-2: the output rounded once (2^-11 / 2^-8 relative), and on the
 *        tensor-core path W, U, the state snapshot, Delta and P rounded to the dtype before their
 *        products (as FLA's kernels do): a few roundings of O(1) values each, summed over K terms
 *        of random sign. BF16's 2^-8 = 3.9e-3 times ~sqrt(K) terms stays under 3e-2 for K <= 128.
 * The long case (T 8192) uses the same tolerance: the state's FP32 recurrence must not drift. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/gated_delta.h>

#include "common.h"
#include "reference/gated_delta_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};

static double tol_of(rudnn_dtype_t dt)
{
    return dt == RUDNN_F32 ? 1e-4 : dt == RUDNN_F16 ? 6e-3 : 3e-2;
}

typedef struct gcase {
    const char *name;
    int64_t B, H, T, K, V, chunk;
    double gate;    /* log_decay = gate * U(0.5, 1.5) */
    int beta_mode;  /* 0: random in (0, 1); 1: all 0; 2: all 1 */
    int strided;    /* [B, T, H, *] storage */
    int nseq;       /* > 0: varlen with these lengths (B = 1, T = their sum + tail) */
    int64_t lens[8];
    int64_t tail;   /* varlen: tokens past the last offset */
} gcase_t;

static const gcase_t cases[] = {
    {"t1_c1", 1, 2, 1, 8, 8, 1, -0.1, 0, 0, 0, {0}, 0},
    {"t3_c4", 2, 1, 3, 8, 5, 4, -0.1, 0, 0, 0, {0}, 0},
    {"t7_c3", 1, 2, 7, 20, 12, 3, -0.1, 0, 0, 0, {0}, 0},
    {"t67_c33", 1, 2, 67, 20, 12, 33, -0.05, 0, 0, 0, {0}, 0},
    {"t64_c64", 1, 1, 64, 5, 33, 64, -0.05, 0, 0, 0, {0}, 0},
    {"t65_c64", 2, 1, 65, 33, 5, 64, -0.05, 0, 0, 0, {0}, 0},
    {"t129_c64", 1, 2, 129, 16, 24, 64, -0.05, 0, 0, 0, {0}, 0},
    {"gate0", 1, 1, 40, 8, 8, 16, 0.0, 0, 0, 0, {0}, 0},
    {"gate-20", 1, 1, 40, 8, 8, 16, -20.0, 0, 0, 0, {0}, 0},
    {"beta0", 1, 1, 40, 8, 8, 16, -0.1, 1, 0, 0, {0}, 0},
    {"beta1", 1, 1, 40, 8, 8, 16, -0.1, 2, 0, 0, {0}, 0},
    {"k64v128_c64", 1, 2, 150, 64, 128, 64, -0.05, 0, 0, 0, {0}, 0},
    {"k128v128_c64", 2, 1, 129, 128, 128, 64, -0.05, 0, 0, 0, {0}, 0},
    {"k128v64_gate-20", 1, 1, 70, 128, 64, 64, -20.0, 0, 0, 0, {0}, 0},
    {"strided", 2, 3, 50, 16, 8, 16, -0.1, 0, 1, 0, {0}, 0},
    {"strided_tc", 1, 2, 100, 128, 128, 64, -0.05, 0, 1, 0, {0}, 0},
    {"varlen", 1, 2, 0, 12, 10, 8, -0.1, 0, 0, 5, {5, 0, 1, 19, 8}, 3},
    {"varlen_tc", 1, 2, 0, 128, 128, 64, -0.05, 0, 0, 4, {70, 1, 0, 130}, 2},
};

/* Host data of a case (in [B, H, T, *] order), already rounded to the dtype where the device holds
 * the dtype. */
typedef struct hdata {
    float *q, *k, *v, *beta, *ld, *s0;
    int64_t B, H, T, K, V, rows; /* rows: state rows (B, or the pool) */
} hdata_t;

static void make_data(const gcase_t *c, rudnn_dtype_t dt, int64_t T, int64_t rows, hdata_t *h, int seed)
{
    rt_rng_t r;
    rt_rng_seed_case(&r, c->name, seed * 7 + (int)dt);
    h->B = c->B, h->H = c->H, h->T = T, h->K = c->K, h->V = c->V, h->rows = rows;
    const int64_t nq = c->B * c->H * T * c->K, nv = c->B * c->H * T * c->V, nb = c->B * c->H * T;
    h->q = rt_xmalloc(sizeof(float) * (size_t)nq + 4), h->k = rt_xmalloc(sizeof(float) * (size_t)nq + 4);
    h->v = rt_xmalloc(sizeof(float) * (size_t)nv + 4), h->beta = rt_xmalloc(sizeof(float) * (size_t)nb + 4);
    h->ld = rt_xmalloc(sizeof(float) * (size_t)nb + 4);
    h->s0 = rt_xmalloc(sizeof(float) * (size_t)(rows * c->H * c->K * c->V));
    const double ks = 1.0 / sqrt((double)c->K);
    for (int64_t i = 0; i < nq; i++)
        h->q[i] = (float)rt_rng_uniform(&r, -1, 1), h->k[i] = (float)(ks * rt_rng_uniform(&r, -1, 1));
    for (int64_t i = 0; i < nv; i++)
        h->v[i] = (float)rt_rng_uniform(&r, -1, 1);
    for (int64_t i = 0; i < nb; i++) {
        h->beta[i] = c->beta_mode == 1 ? 0.0f : c->beta_mode == 2 ? 1.0f : (float)rt_rng_uniform(&r, 0, 1);
        h->ld[i] = (float)(c->gate * rt_rng_uniform(&r, 0.5, 1.5));
    }
    for (int64_t i = 0; i < rows * c->H * c->K * c->V; i++)
        h->s0[i] = (float)rt_rng_uniform(&r, -0.5, 0.5);
}

static void free_data(hdata_t *h)
{
    free(h->q), free(h->k), free(h->v), free(h->beta), free(h->ld), free(h->s0);
}

/* Device tensors of a case: storage [B, H, T, X] or (strided) [B, T, H, X], described [B, H, T, X]. */
typedef struct dev {
    rt_tensor_t q, k, v, beta, ld, s0, out, s1;
    rudnn_tensor_t dq, dk, dv, dbeta, dld, dout;
} gdev_t;

static void make_operand(rt_tensor_t *store, rudnn_tensor_t *desc, rudnn_dtype_t dt, int64_t B, int64_t H, int64_t T,
                         int64_t X, int strided, const float *host)
{
    const int rank = X ? 4 : 3;
    const int64_t logical[4] = {B, H, T, X};
    const int64_t storage[4] = {B, T, H, X};
    rt_tensor_create(store, dt, rank, strided ? storage : logical, 3, RT_TAIL_BYTES);
    *desc = store->t;
    memcpy(desc->dims, logical, sizeof logical);
    const int64_t x = X ? X : 1;
    if (strided) {
        desc->strides[0] = T * H * x, desc->strides[1] = x, desc->strides[2] = H * x;
        if (X)
            desc->strides[3] = 1;
    }
    /* host is in [B, H, T, X] order: permute for the storage */
    const int64_t n = B * H * T * x;
    float *tmp = rt_xmalloc(sizeof(float) * (size_t)n + 4);
    for (int64_t b = 0; b < B; b++)
        for (int64_t hh = 0; hh < H; hh++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < x; i++) {
                    const int64_t src = ((b * H + hh) * T + t) * x + i;
                    const int64_t dst = strided ? ((b * T + t) * H + hh) * x + i : src;
                    tmp[dst] = host[src];
                }
    rt_tensor_upload(store, tmp);
    rt_tensor_download(store, tmp); /* rounded to the dtype: the reference sees what the device holds */
    for (int64_t b = 0; b < B; b++)
        for (int64_t hh = 0; hh < H; hh++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < x; i++) {
                    const int64_t src = ((b * H + hh) * T + t) * x + i;
                    const int64_t dst = strided ? ((b * T + t) * H + hh) * x + i : src;
                    ((float *)host)[src] = tmp[dst];
                }
    free(tmp);
}

static void make_dev(gdev_t *d, const hdata_t *h, rudnn_dtype_t dt, int strided, int64_t out_rows)
{
    make_operand(&d->q, &d->dq, dt, h->B, h->H, h->T, h->K, strided, h->q);
    make_operand(&d->k, &d->dk, dt, h->B, h->H, h->T, h->K, strided, h->k);
    make_operand(&d->v, &d->dv, dt, h->B, h->H, h->T, h->V, strided, h->v);
    make_operand(&d->beta, &d->dbeta, dt, h->B, h->H, h->T, 0, strided, h->beta);
    make_operand(&d->ld, &d->dld, RUDNN_F32, h->B, h->H, h->T, 0, strided, h->ld);
    float *zero = rt_xcalloc((size_t)(h->B * h->H * h->T * h->V) + 1, sizeof(float));
    make_operand(&d->out, &d->dout, dt, h->B, h->H, h->T, h->V, strided, zero);
    free(zero);
    rt_tensor_poison(&d->out);
    const int64_t s_in[4] = {h->rows, h->H, h->K, h->V}, s_out[4] = {out_rows, h->H, h->K, h->V};
    rt_tensor_create(&d->s0, RUDNN_F32, 4, s_in, 0, RT_TAIL_BYTES);
    rt_tensor_upload(&d->s0, h->s0);
    rt_tensor_create(&d->s1, RUDNN_F32, 4, s_out, 0, RT_TAIL_BYTES);
}

static void free_dev(gdev_t *d)
{
    rt_tensor_destroy(&d->q), rt_tensor_destroy(&d->k), rt_tensor_destroy(&d->v), rt_tensor_destroy(&d->beta);
    rt_tensor_destroy(&d->ld), rt_tensor_destroy(&d->s0), rt_tensor_destroy(&d->out), rt_tensor_destroy(&d->s1);
}

/* Reference of one (sequence, head): tokens [t0, t0 + len) of batch row b, state row rin -> rows of
 * ref_out [B, H, T, V] and ref_s [out_rows, H, K, V] at rout. */
static void ref_seq(const hdata_t *h, int64_t b, int64_t hh, int64_t t0, int64_t len, int64_t rin, int64_t rout,
                    float scale, double *ref_out, double *ref_s)
{
    const int64_t K = h->K, V = h->V, T = h->T;
    double *q = rt_xmalloc(sizeof(double) * (size_t)(len * K) + 8), *k = rt_xmalloc(sizeof(double) * (size_t)(len * K) + 8);
    double *v = rt_xmalloc(sizeof(double) * (size_t)(len * V) + 8), *be = rt_xmalloc(sizeof(double) * (size_t)len + 8);
    double *ld = rt_xmalloc(sizeof(double) * (size_t)len + 8), *s0 = rt_xmalloc(sizeof(double) * (size_t)(K * V));
    double *o = rt_xmalloc(sizeof(double) * (size_t)(len * V) + 8);
    const int64_t base = (b * h->H + hh) * T + t0;
    for (int64_t t = 0; t < len; t++) {
        for (int64_t i = 0; i < K; i++)
            q[t * K + i] = h->q[(base + t) * K + i], k[t * K + i] = h->k[(base + t) * K + i];
        for (int64_t i = 0; i < V; i++)
            v[t * V + i] = h->v[(base + t) * V + i];
        be[t] = h->beta[base + t], ld[t] = h->ld[base + t];
    }
    for (int64_t i = 0; i < K * V; i++)
        s0[i] = h->s0[(rin * h->H + hh) * K * V + i];
    gdr_ref_recurrent(len, K, V, q, k, v, be, ld, s0, scale, o, ref_s + (rout * h->H + hh) * K * V);
    for (int64_t t = 0; t < len; t++)
        for (int64_t i = 0; i < V; i++)
            ref_out[(base + t) * V + i] = o[t * V + i];
    free(q), free(k), free(v), free(be), free(ld), free(s0), free(o);
}

/* Reads out (in [B, H, T, V] order) from the device, NaN where still poisoned. */
static float *read_out(const gdev_t *d, const hdata_t *h, int strided)
{
    const int64_t n = h->B * h->H * h->T * h->V;
    float *raw = rt_xmalloc(sizeof(float) * (size_t)n + 4), *o = rt_xmalloc(sizeof(float) * (size_t)n + 4);
    rt_tensor_download(&d->out, raw);
    uint8_t *snap = rt_buffer_snapshot(d->out.buffer, d->out.buffer_bytes);
    const size_t es = rudnn_dtype_size(d->out.t.dtype);
    for (int64_t b = 0; b < h->B; b++)
        for (int64_t hh = 0; hh < h->H; hh++)
            for (int64_t t = 0; t < h->T; t++)
                for (int64_t i = 0; i < h->V; i++) {
                    const int64_t src = strided ? ((b * h->T + t) * h->H + hh) * h->V + i : ((b * h->H + hh) * h->T + t) * h->V + i;
                    const int poisoned =
                        rt_element_bits(d->out.t.dtype, snap + d->out.t.offset, (size_t)src) ==
                        rt_poison_bits(d->out.t.dtype);
                    o[((b * h->H + hh) * h->T + t) * h->V + i] = poisoned ? NAN : raw[src];
                }
    (void)es;
    free(snap), free(raw);
    return o;
}

/* Compares; written[] marks the output tokens that must be written (others must stay poisoned). */
static void compare(const char *what, const hdata_t *h, const float *out, const double *ref_out, const uint8_t *written,
                    const float *s1, const double *ref_s, const uint8_t *row_written, int64_t out_rows,
                    const float *s1_before, double tol)
{
    const int64_t V = h->V, KV = h->H * h->K * h->V;
    double scale = 1.0;
    for (int64_t i = 0; i < h->B * h->H * h->T * V; i++)
        if (written[i / V])
            scale = fmax(scale, fabs(ref_out[i]));
    for (int64_t i = 0; i < h->B * h->H * h->T * V; i++) {
        if (!written[i / V]) {
            if (!isnan(out[i]))
                fail_msg("%s: output element %lld written, must stay untouched", what, (long long)i);
            continue;
        }
        if (!(fabs(out[i] - ref_out[i]) <= tol * scale))
            fail_msg("%s: output[%lld] = %.6g, reference %.6g (tol %.3g x %.3g)", what, (long long)i, out[i],
                     ref_out[i], tol, scale);
    }
    for (int64_t r = 0; r < out_rows; r++)
        for (int64_t i = 0; i < KV; i++) {
            const int64_t e = r * KV + i;
            if (!row_written[r]) {
                if (memcmp(&s1[e], &s1_before[e], sizeof(float)))
                    fail_msg("%s: final_state row %lld written, no sequence names it", what, (long long)r);
                continue;
            }
            if (!(fabs(s1[e] - ref_s[e]) <= tol * scale))
                fail_msg("%s: final_state[%lld] = %.6g, reference %.6g", what, (long long)e, s1[e], ref_s[e]);
        }
}

static rudnn_status_t call(int chunked, int64_t chunk, const rudnn_gated_delta_input_t *in,
                           const rudnn_gated_delta_varlen_t *vl, const rudnn_gated_delta_output_t *out, int pooled)
{
    size_t bytes = 0;
    rudnn_status_t st = chunked ? rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, in, vl, chunk, out, &bytes)
                                : rudnn_gated_delta_rule_workspace_size(rt_queue, in, vl, out, &bytes);
    if (st)
        return st;
    rudnn_buffer_t ws = NULL;
    if (!pooled && bytes) {
        st = rudnn_buffer_create(rt_ctx, bytes, &ws);
        if (st)
            return st;
    }
    st = chunked ? rudnn_chunk_gated_delta_rule(rt_queue, in, vl, chunk, ws, bytes, out)
                 : rudnn_gated_delta_rule(rt_queue, in, vl, ws, bytes, out);
    if (!st && strncmp(rudnn_last_kernel(), "gated_delta.", 12))
        fail_msg("rudnn_last_kernel() = \"%s\", expected a gated_delta. kernel", rudnn_last_kernel());
    rudnn_queue_synchronize(rt_queue);
    if (ws)
        rudnn_buffer_destroy(ws);
    return st;
}

static void run_case(const gcase_t *c, rudnn_dtype_t dt, int chunked, int pooled)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s %s%s", c->name, rudnn_dtype_name(dt), chunked ? "chunked" : "recurrent",
             pooled ? " pooled" : "");
    const int varlen = c->nseq > 0;
    int64_t T = c->T, rows_in = c->B, rows_out = c->B;
    int64_t cu[9] = {0};
    int32_t idx[8];
    if (varlen) {
        for (int i = 0; i < c->nseq; i++)
            cu[i + 1] = cu[i] + c->lens[i];
        T = cu[c->nseq] + c->tail;
        rows_in = c->nseq + 2, rows_out = c->nseq + 3;
        for (int i = 0; i < c->nseq; i++)
            idx[i] = (int32_t)(c->nseq + 1 - i); /* reversed, rows 0 and 1 (and P_out's last) unnamed */
    }
    hdata_t h;
    make_data(c, dt, T, rows_in, &h, chunked);
    gdev_t d;
    make_dev(&d, &h, dt, c->strided, rows_out);
    float *s1_before = rt_xmalloc(sizeof(float) * (size_t)(rows_out * c->H * c->K * c->V));
    rt_fill_uniform(&(rt_rng_t){42}, s1_before, (size_t)(rows_out * c->H * c->K * c->V), -9, 9);
    rt_tensor_upload(&d.s1, s1_before);
    const float scale = (float)(1.0 / sqrt((double)c->K));
    rudnn_gated_delta_input_t in = {&d.dq, &d.dk, &d.dv, &d.dbeta, &d.dld, &d.s0.t, scale};
    rudnn_gated_delta_output_t out = {&d.dout, &d.s1.t};
    rudnn_gated_delta_varlen_t vl = {c->nseq, cu, idx};
    rt_assert_status(call(chunked, c->chunk, &in, varlen ? &vl : NULL, &out, pooled), RUDNN_STATUS_SUCCESS);

    double *ref_out = rt_xcalloc((size_t)(c->B * c->H * T * c->V) + 1, sizeof(double));
    double *ref_s = rt_xcalloc((size_t)(rows_out * c->H * c->K * c->V), sizeof(double));
    uint8_t *written = rt_xcalloc((size_t)(c->B * c->H * T) + 1, 1), *row_written = rt_xcalloc((size_t)rows_out, 1);
    if (varlen) {
        for (int i = 0; i < c->nseq; i++) {
            row_written[idx[i]] = 1;
            for (int64_t hh = 0; hh < c->H; hh++) {
                ref_seq(&h, 0, hh, cu[i], c->lens[i], idx[i], idx[i], scale, ref_out, ref_s);
                for (int64_t t = cu[i]; t < cu[i + 1]; t++)
                    written[hh * T + t] = 1;
            }
        }
    } else {
        for (int64_t b = 0; b < c->B; b++) {
            row_written[b] = 1;
            for (int64_t hh = 0; hh < c->H; hh++)
                ref_seq(&h, b, hh, 0, T, b, b, scale, ref_out, ref_s);
        }
        memset(written, 1, (size_t)(c->B * c->H * T));
    }
    float *o = read_out(&d, &h, c->strided);
    float *s1 = rt_xmalloc(sizeof(float) * (size_t)(rows_out * c->H * c->K * c->V));
    rt_tensor_download(&d.s1, s1);
    compare(what, &h, o, ref_out, written, s1, ref_s, row_written, rows_out, s1_before, tol_of(dt));
    free(o), free(s1), free(ref_out), free(ref_s), free(written), free(row_written), free(s1_before);
    free_dev(&d);
    free_data(&h);
}

static void all_cases(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (size_t di = 0; di < 3; di++)
            for (int chunked = 0; chunked < 2; chunked++)
                run_case(&cases[ci], dtypes[di], chunked, ci % 2);
}

/* T = 0: the state copied, the output (empty) and nothing else touched */
static void empty_sequence(void **state)
{
    (void)state;
    for (int chunked = 0; chunked < 2; chunked++) {
        const gcase_t c = {"t0", 2, 2, 0, 8, 4, 4, -0.1, 0, 0, 0, {0}, 0};
        hdata_t h;
        make_data(&c, RUDNN_F32, 0, 2, &h, 0);
        gdev_t d;
        make_dev(&d, &h, RUDNN_F32, 0, 2);
        rudnn_gated_delta_input_t in = {&d.dq, &d.dk, &d.dv, &d.dbeta, &d.dld, &d.s0.t, 1.0f};
        rudnn_gated_delta_output_t out = {&d.dout, &d.s1.t};
        rt_assert_status(call(chunked, 4, &in, NULL, &out, 0), RUDNN_STATUS_SUCCESS);
        float s1[2 * 2 * 8 * 4];
        rt_tensor_download(&d.s1, s1);
        assert_memory_equal(s1, h.s0, sizeof s1);
        free_dev(&d);
        free_data(&h);
    }
}

/* prefill (chunked, chunk 16) of the first P tokens, then decode the rest one call a token passing
 * final_state back, equals one recurrent run of all T */
static void prefill_then_decode(void **state)
{
    (void)state;
    for (size_t di = 0; di < 3; di++) {
        const rudnn_dtype_t dt = dtypes[di];
        const int64_t B = 2, H = 2, T = 45, K = 12, V = 10, P = 37;
        const gcase_t c = {"pd", B, H, T, K, V, 16, -0.1, 0, 0, 0, {0}, 0};
        hdata_t h;
        make_data(&c, dt, T, B, &h, 0);
        gdev_t d;
        make_dev(&d, &h, dt, 0, B);
        /* views of the first P tokens and of each later token */
        rudnn_tensor_t vq = d.dq, vk = d.dk, vv = d.dv, vb = d.dbeta, vl = d.dld, vo = d.dout;
        vq.dims[2] = vk.dims[2] = vv.dims[2] = vb.dims[2] = vl.dims[2] = vo.dims[2] = P;
        rudnn_gated_delta_input_t in = {&vq, &vk, &vv, &vb, &vl, &d.s0.t, 0.3f};
        rudnn_gated_delta_output_t out = {&vo, &d.s1.t};
        rt_assert_status(call(1, 16, &in, NULL, &out, 0), RUDNN_STATUS_SUCCESS);
        rt_tensor_t s_b;
        const int64_t sd[4] = {B, H, K, V};
        rt_tensor_create(&s_b, RUDNN_F32, 4, sd, 0, RT_TAIL_BYTES);
        for (int64_t t = P; t < T; t++) {
            rudnn_tensor_t tq = d.dq, tk = d.dk, tv = d.dv, tb = d.dbeta, tl = d.dld, to = d.dout;
            rudnn_tensor_t *all[6] = {&tq, &tk, &tv, &tb, &tl, &to};
            for (int i = 0; i < 6; i++) {
                all[i]->dims[2] = 1;
                all[i]->offset += (size_t)(t * all[i]->strides[2]) * rudnn_dtype_size(all[i]->dtype);
            }
            /* ping-pong the state between s1 and s_b */
            const int even = (t - P) % 2 == 0;
            rudnn_gated_delta_input_t i2 = {&tq, &tk, &tv, &tb, &tl, even ? &d.s1.t : &s_b.t, 0.3f};
            rudnn_gated_delta_output_t o2 = {&to, even ? &s_b.t : &d.s1.t};
            rt_assert_status(call(0, 0, &i2, NULL, &o2, 1), RUDNN_STATUS_SUCCESS);
        }
        const rt_tensor_t *final = (T - P) % 2 ? &s_b : &d.s1;
        double *ref_out = rt_xcalloc((size_t)(B * H * T * V), sizeof(double));
        double *ref_s = rt_xcalloc((size_t)(B * H * K * V), sizeof(double));
        for (int64_t b = 0; b < B; b++)
            for (int64_t hh = 0; hh < H; hh++)
                ref_seq(&h, b, hh, 0, T, b, b, 0.3f, ref_out, ref_s);
        float *o = read_out(&d, &h, 0), *s1 = rt_xmalloc(sizeof(float) * (size_t)(B * H * K * V));
        rt_tensor_download(final, s1);
        uint8_t written[2 * 2 * 45], rows[2] = {1, 1};
        memset(written, 1, sizeof written);
        char what[64];
        snprintf(what, sizeof what, "prefill+decode %s", rudnn_dtype_name(dt));
        compare(what, &h, o, ref_out, written, s1, ref_s, rows, B, s1, tol_of(dt));
        free(o), free(s1), free(ref_out), free(ref_s);
        rt_tensor_destroy(&s_b);
        free_dev(&d);
        free_data(&h);
    }
}

/* T 8192, one sequence: no drift past the tolerance (F32 and BF16, chunked and recurrent) */
static void long_sequence(void **state)
{
    (void)state;
    const gcase_t c = {"long", 1, 1, 8192, 16, 16, 64, -0.01, 0, 0, 0, {0}, 0};
    run_case(&c, RUDNN_F32, 1, 0);
    run_case(&c, RUDNN_BF16, 1, 1);
    run_case(&c, RUDNN_F32, 0, 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_cases),
        cmocka_unit_test(empty_sequence),
        cmocka_unit_test(prefill_then_decode),
        cmocka_unit_test(long_sequence),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("gated_delta");
    rt_print_device("gated_delta");
    const int failed = cmocka_run_group_tests_name("gated_delta", tests, NULL, rt_group_teardown);
    return rt_exit_code(failed);
}
