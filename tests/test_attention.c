/* Numeric tests of dense attention (rudnn/attention.h) against the FP64 reference of
 * reference/attention_ref.c, run once per backend (meson: attention-opencl, -cuda, -hip), for
 * F32, F16 and BF16.
 *
 * Each case runs every strategy the backend lists a candidate of, and Autotune: the kernel that
 * rudnn_attention_resolve names must be the one rudnn_last_kernel() reports (Autotune: the one
 * resolve names after the call, from the cache the call filled, and a listed candidate), its out
 * and lse must match the reference, and the strategies must agree with each other. A case no
 * strategy runs fails. The cases: Sq != Skv both ways, Sq 1 (decode), decode with Sq 2-4 and
 * GQA 4-8 (causal, window, long Skv, D 256, unaligned rows), S not a multiple of 16 or 64, D in {1, 32, 64, 80, 96, 128, 192, 256} with Dv != D (192/128), GQA ratios 1, 4 and 8,
 * causal, window (left, right, both), causal + window_left, masks with fully masked rows
 * (per [B, H] and broadcast), bias (F32 and the dtype; broadcast over B and over H), softcap,
 * q/k/v/out as views of [B, S, H, D] memory, lse, Skv 0, Sq 0.
 *
 * Tolerances (tol_of): the inputs are rounded to the dtype before the reference sees them, so
 * what is left is FP32 arithmetic, the rounding of out to the dtype and, in the tensor-core
 * kernels (a kernel of the FlashAccelerated strategy, whichever strategy asked for it), the
 * rounding of the probabilities P to the dtype before P V (as FlashAttention and cuDNN do: a
 * second rounding of the same relative size per term as out's own):
 *   norm-wise  ||out - ref|| / ||ref||:   f32 1e-5, f16 1e-3, bf16 2e-3 (the RMS of a rounding is
 *              about 0.3 ulp: 2.8e-4 f16, 1.1e-3 bf16); with P rounded, two roundings of that
 *              size: bf16 4e-3 (f16's bound already holds both: 2 x 2.8e-4 < 1e-3);
 *   per row    max |out - ref| / max |v| of the row's head (out is a convex combination of v
 *              rows): f32 2e-5, f16 1e-3 (half an f16 ulp at 1 is 4.9e-4), bf16 4e-3 (half an
 *              ulp: 2e-3);
 *   lse        |lse - ref| <= 1e-4 + 1e-5 |ref| (FP32 throughout); -inf exactly where the
 *              reference is -inf. NaN never passes.
 * Every output element must be written (poisoned first) and nothing past out and lse.
 *
 * The backward (rudnn_attention_backward), tests "<dtype>/backward/<case>": the library's own
 * forward (Autotune, with lse) gives out and lse, as a user would get them; then dq, dk, dv from a
 * random dout, once with workspace NULL and once with a workspace of exactly the queried size,
 * each against attn_ref_backward (FP64, from the same q, k, v, mask, bias, options and dout),
 * every element written (poisoned first), nothing past them or past the workspace's bytes, the
 * two runs bitwise equal (the deterministic backward), exact zeros where the gradient is 0 by
 * structure; F32 also against central differences of sum(dout * out) of the FP64 forward
 * reference (the reference's and the library's gradients). Cases: MHA, GQA 2 and 4 (Hkv 1),
 * causal with Sq < Skv and Sq > Skv (bottom-right: rows with no key), window left, right, both
 * (keys in no window), masks with fully masked rows (per head, broadcast), bias F32 and in the
 * dtype, softcap, a non-default scale, D 40 / Dv 24, D 256, dout/dq/dk/dv as [B, S, H, D] views
 * (and everything so, with every option), more rows and keys than a work-group, Sq 0 (dk, dv
 * zeros) and Skv 0 (dq zeros). Tolerances: grad_tol_of, with why. A backend whose backward
 * answers NOT_SUPPORTED (checked: the op named, nothing written) reports each backward case as
 * SKIPPED with the reason, never as passed.
 *
 * A backend without attention kernels (no table) must answer
 * NOT_SUPPORTED naming the family; the suite checks that, then reports SKIP (exit 77).
 *
 * Usage: test_attention [glob of <dtype>/<case>]. RUDNN_TEST_VERBOSE=1 prints each run's errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "reference/attention_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3

enum { MASK_NONE, MASK_PER_HEAD, MASK_BROADCAST };
enum { BIAS_NONE, BIAS_F32_OVER_B, BIAS_DTYPE_OVER_H };

typedef struct acase {
    const char *name;
    int64_t b, hq, hkv, sq, skv, d, dv;
    int causal;
    int64_t wl, wr;
    float softcap, scale;
    int mask, bias;
    int bshd; /* q, k, v, out as views of [B, S, H, D] memory */
    int lse;
} acase_t;

#define NW RUDNN_ATTENTION_NO_WINDOW
static const acase_t cases[] = {
    {"basic", 2, 2, 2, 5, 7, 64, 64, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"sq>skv", 1, 2, 2, 9, 4, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"decode-gqa4", 1, 8, 2, 1, 37, 128, 128, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"d1", 2, 1, 1, 3, 5, 1, 1, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"d80-causal", 1, 2, 1, 17, 17, 80, 80, 1, NW, NW, 0, 0, 0, 0, 0, 1},
    {"d96-s70", 1, 2, 2, 70, 70, 96, 96, 0, NW, NW, 0, 0, 0, 0, 0, 0},
    {"d192-dv128-gqa8", 1, 8, 1, 20, 33, 192, 128, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"d256", 1, 1, 1, 9, 13, 256, 256, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"causal-sq>skv", 1, 2, 2, 9, 4, 16, 16, 1, NW, NW, 0, 0, 0, 0, 0, 1},
    {"causal-sq<skv", 2, 2, 2, 5, 12, 64, 64, 1, NW, NW, 0, 0, 0, 0, 0, 1},
    {"window-left", 1, 2, 2, 16, 16, 32, 32, 0, 3, NW, 0, 0, 0, 0, 0, 1},
    {"window-right", 1, 2, 2, 10, 14, 32, 32, 0, NW, 2, 0, 0, 0, 0, 0, 1},
    {"window-both", 1, 2, 2, 12, 9, 32, 32, 0, 2, 1, 0, 0, 0, 0, 0, 1},
    {"causal-window-left", 1, 4, 2, 13, 13, 64, 64, 1, 4, NW, 0, 0, 0, 0, 0, 1},
    {"mask-per-head", 2, 2, 1, 6, 10, 64, 64, 0, NW, NW, 0, 0, MASK_PER_HEAD, 0, 0, 1},
    {"mask-broadcast", 2, 4, 4, 7, 19, 32, 32, 0, NW, NW, 0, 0, MASK_BROADCAST, 0, 0, 1},
    {"bias-f32-over-b", 2, 2, 2, 8, 11, 64, 64, 0, NW, NW, 0, 0, 0, BIAS_F32_OVER_B, 0, 1},
    {"bias-dtype-over-h", 2, 2, 2, 8, 11, 64, 64, 0, NW, NW, 0, 0, 0, BIAS_DTYPE_OVER_H, 0, 1},
    {"softcap", 1, 2, 2, 12, 12, 64, 64, 0, NW, NW, 5.0f, 1.0f, 0, 0, 0, 1},
    {"bshd-gqa4", 2, 4, 1, 11, 11, 64, 64, 0, NW, NW, 0, 0, 0, 0, 1, 1},
    {"bshd-all-options", 1, 4, 2, 9, 15, 32, 48, 1, 6, NW, 3.0f, 0.3f, MASK_PER_HEAD, BIAS_F32_OVER_B, 1, 1},
    /* several query and key tiles of the tensor-core kernels (128 or 192 x 128), more key tiles than
     * stages in flight, the last of each partial */
    {"long-causal-d128", 1, 2, 1, 300, 520, 128, 128, 1, NW, NW, 0, 0, 0, 0, 0, 1},
    {"long-bshd-d64", 1, 2, 2, 200, 333, 64, 64, 0, NW, NW, 0, 0, 0, 0, 1, 1},
    {"long-window-mask-dv96", 1, 2, 2, 140, 300, 128, 96, 0, 50, 20, 0, 0, MASK_PER_HEAD, 0, 0, 1},
    {"long-causal-gqa-d64", 1, 4, 2, 400, 410, 64, 64, 1, NW, NW, 0, 0, 0, 0, 0, 1},
    {"long-window-d32-dv64", 2, 2, 1, 260, 300, 32, 64, 0, 70, 10, 0, 0, 0, 0, 0, 1},
    /* decode shapes (Sq * Hq/Hkv <= 16 rows per K/V head: CUDA's flash_decode): causal with Sq > 1
     * and GQA 8, Skv not a multiple of 64, long Skv (split-KV on a large GPU) with fully masked rows,
     * windows that leave a few tiles, D 256, D != Dv, rows not 16-byte aligned, strided views */
    {"decode-gqa8-causal-sq2", 2, 16, 2, 2, 150, 128, 128, 1, NW, NW, 0, 0, 0, 0, 0, 1},
    {"decode-gqa4-sq4-window", 1, 8, 2, 4, 300, 64, 64, 1, 40, NW, 0, 0, 0, 0, 0, 1},
    {"decode-split-long", 1, 8, 2, 1, 1100, 128, 128, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"decode-split-mask-bias", 1, 8, 2, 2, 700, 64, 96, 0, NW, NW, 0, 0, MASK_PER_HEAD, BIAS_F32_OVER_B, 0, 1},
    {"decode-window-long", 1, 4, 1, 1, 2000, 64, 64, 0, 100, NW, 0, 0, 0, 0, 0, 1},
    {"decode-d256", 2, 4, 1, 1, 77, 256, 256, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"decode-d256-dv64", 1, 4, 1, 1, 520, 256, 64, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"decode-d20-dv12", 2, 4, 2, 2, 45, 20, 12, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"decode-bshd-all-options", 2, 8, 2, 2, 100, 32, 48, 1, 30, NW, 3.0f, 0.3f, MASK_PER_HEAD, BIAS_F32_OVER_B, 1, 1},
    {"skv0", 2, 2, 1, 3, 0, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 1},
    {"skv0-no-lse", 1, 1, 1, 2, 0, 8, 8, 0, NW, NW, 0, 0, 0, 0, 0, 0},
    {"sq0", 1, 2, 2, 0, 5, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 1},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

/* ---- tolerances --------------------------------------------------------------------------- */

typedef struct tol {
    double norm, row, lse_abs, lse_rel;
} tol_t;

/* p_rounded: the kernel that ran rounds P to the dtype (FlashAccelerated's) */
static tol_t tol_of(rudnn_dtype_t dt, int p_rounded)
{
    tol_t t = {1e-5, 2e-5, 1e-4, 1e-5};
    if (dt == RUDNN_F16) {
        t.norm = 1e-3;
        t.row = 1e-3;
    } else if (dt == RUDNN_BF16) {
        t.norm = p_rounded ? 4e-3 : 2e-3;
        t.row = 4e-3;
    }
    return t;
}

/* ---- device operands ------------------------------------------------------------------------ */

/* A rank-4 operand: logical [d0, d1, d2, d3]; stored contiguous, or (bshd) as [d0, d2, d1, d3]
 * memory; the buffer has RT_TAIL_BYTES of poison after it. */
typedef struct operand {
    rudnn_buffer_t buf;
    rudnn_tensor_t t;
    size_t bytes;   /* of the data, without the tail */
    uint8_t *poison; /* the whole buffer poisoned (rt_poison_host): a NaN no kernel writes */
} operand_t;

static void operand_poison(const operand_t *o)
{
    rt_assert_status(rudnn_buffer_write(rt_queue, o->buf, 0, o->poison, o->bytes + RT_TAIL_BYTES),
                     RUDNN_STATUS_SUCCESS);
}

static void operand_make(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, int bshd)
{
    memset(o, 0, sizeof *o);
    int64_t n = rt_numel(rank, dims);
    o->bytes = (size_t)n * rudnn_dtype_size(dt);
    rt_assert_status(rudnn_buffer_create(rt_ctx, o->bytes + RT_TAIL_BYTES, &o->buf), RUDNN_STATUS_SUCCESS);
    o->poison = rt_xmalloc(o->bytes + RT_TAIL_BYTES);
    rt_poison_host(dt, o->poison, o->bytes + RT_TAIL_BYTES);
    rt_assert_status(rudnn_tensor_init(&o->t, o->buf, 0, dt, rank, dims), RUDNN_STATUS_SUCCESS);
    operand_poison(o);
    if (bshd && rank == 4) { /* memory [d0, d2, d1, d3] */
        o->t.strides[3] = 1;
        o->t.strides[1] = dims[3];
        o->t.strides[2] = dims[1] * dims[3];
        o->t.strides[0] = dims[2] * dims[1] * dims[3];
    }
}

static void operand_free(operand_t *o)
{
    if (o->buf)
        rudnn_buffer_destroy(o->buf);
    free(o->poison);
    memset(o, 0, sizeof *o);
}

/* Offset in elements of logical element i (row-major over t's dims) in t's memory. */
static size_t phys_index(const rudnn_tensor_t *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t dim = t->dims[d] ? t->dims[d] : 1;
        off += (i % dim) * t->strides[d];
        i /= dim;
    }
    return (size_t)off;
}

/* Uploads logical values (already exactly representable in the dtype). */
static void operand_upload(const operand_t *o, const float *logical)
{
    int64_t n = rudnn_tensor_numel(&o->t);
    if (!n)
        return;
    size_t es = rudnn_dtype_size(o->t.dtype);
    uint8_t *raw = rt_xmalloc(o->bytes);
    memcpy(raw, o->poison, o->bytes);
    for (int64_t i = 0; i < n; i++) {
        size_t p = phys_index(&o->t, i);
        if (o->t.dtype == RUDNN_BOOL)
            raw[p] = logical[i] != 0.0f;
        else
            rudnn_convert_from_f32(o->t.dtype, &logical[i], raw + p * es, 1);
    }
    rt_assert_status(rudnn_buffer_write(rt_queue, o->buf, 0, raw, o->bytes), RUDNN_STATUS_SUCCESS);
    free(raw);
}

/* Reads logical values; *unwritten counts elements still poisoned, *tail_changed bytes past the
 * data that changed. */
static void operand_download(const operand_t *o, float *logical, size_t *unwritten, size_t *tail_changed)
{
    size_t total = o->bytes + RT_TAIL_BYTES;
    uint8_t *raw = rt_xmalloc(total);
    rt_assert_status(rudnn_buffer_read(rt_queue, o->buf, 0, raw, total), RUDNN_STATUS_SUCCESS);
    size_t es = rudnn_dtype_size(o->t.dtype);
    int64_t n = rudnn_tensor_numel(&o->t);
    *unwritten = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *e = raw + phys_index(&o->t, i) * es;
        *unwritten += rt_element_bits(o->t.dtype, e, 0) == rt_poison_bits(o->t.dtype);
        logical[i] = rt_element_value(o->t.dtype, e, 0);
    }
    *tail_changed = 0;
    for (size_t b = o->bytes; b < total; b++)
        *tail_changed += raw[b] != o->poison[b];
    free(raw);
}

static float round_to(rudnn_dtype_t dt, float v)
{
    float r;
    uint16_t h;
    if (dt == RUDNN_F32)
        return v;
    rudnn_convert_from_f32(dt, &v, &h, 1);
    rudnn_convert_to_f32(dt, &h, &r, 1);
    return r;
}

static float *random_values(rt_rng_t *rng, rudnn_dtype_t dt, int64_t n, double lo, double hi)
{
    float *v = rt_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    rt_fill_uniform(rng, v, (size_t)n, lo, hi);
    for (int64_t i = 0; i < n; i++)
        v[i] = round_to(dt, v[i]);
    return v;
}

/* ---- one case ------------------------------------------------------------------------------- */

typedef struct problem {
    const acase_t *c;
    rudnn_dtype_t dt;
    operand_t q, k, v, mask, bias, out, lse;
    float *hq, *hk, *hv, *hmask, *hbias;
    double *ref_out, *ref_lse;
    rudnn_attention_options_t opts;
    attn_ref_problem_t rp;
} problem_t;

static void problem_make(problem_t *p, const acase_t *c, rudnn_dtype_t dt, rt_rng_t *rng)
{
    memset(p, 0, sizeof *p);
    p->c = c;
    p->dt = dt;
    const int64_t dq[4] = {c->b, c->hq, c->sq, c->d}, dk[4] = {c->b, c->hkv, c->skv, c->d};
    const int64_t dv[4] = {c->b, c->hkv, c->skv, c->dv}, dout[4] = {c->b, c->hq, c->sq, c->dv};
    const int64_t dl[3] = {c->b, c->hq, c->sq};
    operand_make(&p->q, dt, 4, dq, c->bshd);
    operand_make(&p->k, dt, 4, dk, c->bshd);
    operand_make(&p->v, dt, 4, dv, c->bshd);
    operand_make(&p->out, dt, 4, dout, c->bshd);
    if (c->lse)
        operand_make(&p->lse, RUDNN_F32, 3, dl, 0);
    p->hq = random_values(rng, dt, rt_numel(4, dq), -1, 1);
    p->hk = random_values(rng, dt, rt_numel(4, dk), -1, 1);
    p->hv = random_values(rng, dt, rt_numel(4, dv), -1, 1);
    operand_upload(&p->q, p->hq);
    operand_upload(&p->k, p->hk);
    operand_upload(&p->v, p->hv);
    attn_ref_problem_t *r = &p->rp;
    r->batch = c->b, r->heads_q = c->hq, r->heads_kv = c->hkv, r->seq_q = c->sq, r->seq_kv = c->skv;
    r->head_dim = c->d, r->head_dim_v = c->dv;
    r->q = p->hq, r->k = p->hk, r->v = p->hv;
    if (c->mask) {
        int64_t mb = c->mask == MASK_PER_HEAD ? c->b : 1, mh = c->mask == MASK_PER_HEAD ? c->hq : 1;
        const int64_t dm[4] = {mb, mh, c->sq, c->skv};
        operand_make(&p->mask, RUDNN_BOOL, 4, dm, 0);
        int64_t n = rt_numel(4, dm);
        p->hmask = rt_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
        uint8_t *m8 = rt_xmalloc((size_t)(n ? n : 1));
        for (int64_t i = 0; i < n; i++) {
            int64_t row = (i / c->skv) % c->sq;
            /* about a third masked; row 1 of every [b, h] fully masked */
            m8[i] = row == 1 || rt_rng_below(rng, 3) == 0;
            p->hmask[i] = m8[i];
        }
        operand_upload(&p->mask, p->hmask);
        r->mask = m8, r->mask_b = mb, r->mask_h = mh;
    }
    if (c->bias) {
        int64_t bb = c->bias == BIAS_F32_OVER_B ? 1 : c->b, bh = c->bias == BIAS_F32_OVER_B ? c->hq : 1;
        rudnn_dtype_t bdt = c->bias == BIAS_F32_OVER_B ? RUDNN_F32 : dt;
        const int64_t db[4] = {bb, bh, c->sq, c->skv};
        operand_make(&p->bias, bdt, 4, db, 0);
        p->hbias = random_values(rng, bdt, rt_numel(4, db), -2, 2);
        operand_upload(&p->bias, p->hbias);
        r->bias = p->hbias, r->bias_b = bb, r->bias_h = bh;
    }
    rudnn_attention_options_init(&p->opts);
    p->opts.scale = c->scale;
    p->opts.softcap = c->softcap;
    p->opts.causal = c->causal;
    p->opts.window_left = c->wl;
    p->opts.window_right = c->wr;
    r->scale = c->scale != 0.0f ? (double)c->scale : (double)(float)(1.0 / sqrt((double)c->d));
    r->softcap = c->softcap;
    r->causal = c->causal;
    r->window_left = c->wl;
    r->window_right = c->wr;
    int64_t nout = rt_numel(4, dout), nl = rt_numel(3, dl);
    p->ref_out = rt_xcalloc((size_t)(nout ? nout : 1), sizeof(double));
    p->ref_lse = rt_xcalloc((size_t)(nl ? nl : 1), sizeof(double));
    attn_ref_forward(r, p->ref_out, p->ref_lse);
}

static void problem_free(problem_t *p)
{
    operand_t *all[] = {&p->q, &p->k, &p->v, &p->mask, &p->bias, &p->out, &p->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        operand_free(all[i]);
    free(p->hq), free(p->hk), free(p->hv), free(p->hmask), free(p->hbias);
    free((void *)p->rp.mask);
    free(p->ref_out), free(p->ref_lse);
}

static const rudnn_tensor_t *opt(const operand_t *o) { return o->buf ? &o->t : NULL; }

/* Compares got (out [B, Hq, Sq, Dv], lse [B, Hq, Sq] or NULL) with ref (double) or with another
 * run (float; ref NULL). Returns the number of failed checks, logged. */
static int compare(rt_log_t *log, const char *what, const problem_t *p, const float *got, const float *got_lse,
                   const double *ref, const double *ref_lse, const float *other, const float *other_lse, int p_rounded,
                   int other_rounded)
{
    const acase_t *c = p->c;
    tol_t t = tol_of(p->dt, p_rounded);
    if (!ref) { /* two runs, each within its bound of the reference: within their sum of each other */
        const tol_t u = tol_of(p->dt, other_rounded);
        t.norm += u.norm, t.row += u.row, t.lse_abs += u.lse_abs, t.lse_rel += u.lse_rel;
    }
    int64_t rows = c->b * c->hq * c->sq;
    double num = 0, den = 0, worst_row = 0;
    int64_t worst_at = -1, nan_at = -1;
    for (int64_t r = 0; r < rows; r++) {
        int64_t bh = r / c->sq, b = bh / c->hq, h = bh % c->hq, hk = h / (c->hq / c->hkv);
        double vmax = 0;
        const float *vb = p->hv + (b * c->hkv + hk) * c->skv * c->dv;
        for (int64_t i = 0; i < c->skv * c->dv; i++)
            vmax = fmax(vmax, fabs(vb[i]));
        double row_err = 0;
        for (int64_t x = 0; x < c->dv; x++) {
            int64_t i = r * c->dv + x;
            double want = ref ? ref[i] : other[i];
            double e = fabs((double)got[i] - want);
            if (!(e == e)) {
                nan_at = nan_at < 0 ? i : nan_at;
                e = INFINITY;
            }
            num += e * e;
            den += want * want;
            row_err = fmax(row_err, e);
        }
        double rel = row_err / (vmax > 0 ? vmax : 1);
        if (worst_at < 0 || !(rel <= worst_row))
            worst_row = rel, worst_at = r;
    }
    int bad = 0;
    double norm = den > 0 ? sqrt(num) / sqrt(den) : sqrt(num);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: norm-wise %.3g (tol %.3g), worst row %.3g (tol %.3g)\n", what, norm, t.norm, worst_row,
               t.row);
    if (nan_at >= 0) {
        rt_logf(log, "  %s: NaN in out at element %lld\n", what, (long long)nan_at);
        bad++;
    }
    if (!(norm <= t.norm)) {
        rt_logf(log, "  %s: norm-wise relative error %.3g > %.3g\n", what, norm, t.norm);
        bad++;
    }
    if (!(worst_row <= t.row)) {
        rt_logf(log, "  %s: row %lld: max error / max|v| = %.3g > %.3g\n", what, (long long)worst_at, worst_row,
                t.row);
        bad++;
    }
    if (got_lse) {
        for (int64_t r = 0; r < rows; r++) {
            double want = ref_lse ? ref_lse[r] : (double)other_lse[r];
            double g = got_lse[r];
            int ok = isinf(want) && want < 0 ? (isinf(g) && g < 0)
                                             : fabs(g - want) <= t.lse_abs + t.lse_rel * fabs(want);
            if (!ok) {
                rt_logf(log, "  %s: lse row %lld = %.9g, expected %.9g\n", what, (long long)r, g, want);
                bad++;
                break;
            }
        }
    }
    return bad;
}

static int strategy_listed(rudnn_attention_strategy_t s)
{
    int n = 0;
    if (rudnn_attention_kernel_count(rt_ctx, &n))
        return 0;
    for (int i = 0; i < n; i++) {
        const char *name;
        rudnn_attention_strategy_t st;
        if (!rudnn_attention_kernel_info(rt_ctx, i, &name, &st) && st == s)
            return 1;
    }
    return 0;
}

static int kernel_listed(const char *kernel)
{
    int n = 0;
    if (!kernel || rudnn_attention_kernel_count(rt_ctx, &n))
        return 0;
    for (int i = 0; i < n; i++) {
        const char *name;
        rudnn_attention_strategy_t st;
        if (!rudnn_attention_kernel_info(rt_ctx, i, &name, &st) && strcmp(name, kernel) == 0)
            return 1;
    }
    return 0;
}

static const char *const strategy_names[] = {"Autotune", "Fallback", "FlashUnit", "FlashAccelerated"};

/* Runs case c in dtype dt with every strategy; logs failures. */
static void run_case(rt_log_t *log, const acase_t *c, rudnn_dtype_t dt)
{
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, (int)dt);
    problem_t p;
    problem_make(&p, c, dt, &rng);
    int64_t nout = c->b * c->hq * c->sq * c->dv, nl = c->b * c->hq * c->sq;
    float *first = NULL, *first_lse = NULL;
    const char *first_kernel = NULL;
    int first_rounded = 0;
    float *got = rt_xmalloc(sizeof(float) * (size_t)(nout ? nout : 1));
    float *got_lse = rt_xmalloc(sizeof(float) * (size_t)(nl ? nl : 1));
    int ran = 0;
    for (int s = RUDNN_ATTENTION_FALLBACK; s <= RUDNN_ATTENTION_FLASH_ACCELERATED + 1; s++) {
        /* the explicit strategies first, Autotune last (its choice must agree with them) */
        rudnn_attention_strategy_t strat = s > RUDNN_ATTENTION_FLASH_ACCELERATED ? RUDNN_ATTENTION_AUTOTUNE
                                                                                 : (rudnn_attention_strategy_t)s;
        if (strat != RUDNN_ATTENTION_AUTOTUNE && !strategy_listed(strat))
            continue;
        char what[160];
        snprintf(what, sizeof what, "%s/%s/%s", c->name, rudnn_dtype_name(dt), strategy_names[strat]);
        rudnn_attention_choice_t choice;
        rudnn_status_t st = rudnn_attention_resolve(rt_queue, &p.q.t, &p.k.t, &p.v.t, opt(&p.mask), opt(&p.bias),
                                                    &p.opts, strat, &p.out.t, opt(&p.lse), &choice);
        if (st == RUDNN_STATUS_NOT_SUPPORTED) {
            if (getenv("RUDNN_TEST_VERBOSE"))
                printf("    %s: not supported: %s\n", what, rudnn_last_error());
            continue;
        }
        if (st) {
            rt_logf(log, "  %s: resolve returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
            log->failures++;
            continue;
        }
        operand_poison(&p.out);
        if (p.lse.buf)
            operand_poison(&p.lse);
        st = rudnn_attention(rt_queue, &p.q.t, &p.k.t, &p.v.t, opt(&p.mask), opt(&p.bias), &p.opts, strat, NULL, 0,
                             &p.out.t, opt(&p.lse));
        if (st) {
            rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
            log->failures++;
            continue;
        }
        rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
        const char *last = rudnn_last_kernel();
        if (c->sq > 0) {
            if (strat == RUDNN_ATTENTION_AUTOTUNE) { /* the call may have tuned: ask again */
                rudnn_attention_resolve(rt_queue, &p.q.t, &p.k.t, &p.v.t, opt(&p.mask), opt(&p.bias), &p.opts,
                                        strat, &p.out.t, opt(&p.lse), &choice);
                if (strstr(choice.reason, "first rudnn_attention call tunes")) {
                    rt_logf(log, "  %s: the call did not tune: resolve still says \"%s\"\n", what, choice.reason);
                    log->failures++;
                }
                if (getenv("RUDNN_TEST_VERBOSE"))
                    printf("    %s: Autotune: %s\n", what, choice.reason);
                if (!kernel_listed(choice.kernel)) {
                    rt_logf(log, "  %s: Autotune resolved to %s, not a listed kernel\n", what, choice.kernel);
                    log->failures++;
                }
            }
            if (!last || !choice.kernel || strcmp(last, choice.kernel) != 0) {
                rt_logf(log, "  %s: resolve named %s, rudnn_last_kernel() says %s ran\n", what, choice.kernel,
                        last ? last : "(null)");
                log->failures++;
            }
        }
        ran++;
        size_t unwritten = 0, tail = 0, lse_unwritten = 0, lse_tail = 0;
        operand_download(&p.out, got, &unwritten, &tail);
        if (p.lse.buf)
            operand_download(&p.lse, got_lse, &lse_unwritten, &lse_tail);
        if (unwritten || tail || lse_unwritten || lse_tail) {
            rt_logf(log, "  %s: %zu out / %zu lse elements not written, %zu / %zu bytes past them changed\n", what,
                    unwritten, lse_unwritten, tail, lse_tail);
            log->failures++;
        }
        const int rounded = choice.strategy == RUDNN_ATTENTION_FLASH_ACCELERATED;
        log->failures += compare(log, what, &p, got, p.lse.buf ? got_lse : NULL, p.ref_out, p.ref_lse, NULL, NULL,
                                 rounded, 0);
        if (!first) {
            first = got, first_lse = got_lse, first_kernel = choice.kernel, first_rounded = rounded;
            got = rt_xmalloc(sizeof(float) * (size_t)(nout ? nout : 1));
            got_lse = rt_xmalloc(sizeof(float) * (size_t)(nl ? nl : 1));
        } else {
            char pair[240];
            snprintf(pair, sizeof pair, "%s against %s", what, first_kernel);
            log->failures +=
                compare(log, pair, &p, got, p.lse.buf ? got_lse : NULL, NULL, NULL, first, first_lse, rounded, first_rounded);
        }
    }
    if (!ran) {
        rt_logf(log, "  %s/%s: no strategy ran\n", c->name, rudnn_dtype_name(dt));
        log->failures++;
    }
    free(first), free(first_lse), free(got), free(got_lse);
    problem_free(&p);
}

/* One cmocka test per (dtype, case), named "<dtype>/<case>" (e.g. bf16/long-causal-d128), so that
 * a glob picks a dtype or a group of cases (the GPU sanitizer stage leaves out "<dtype>/long-*"). */
typedef struct {
    rudnn_dtype_t dt;
    const acase_t *c;
    char name[64];
} unit_t;

static void test_case(void **state)
{
    const unit_t *u = *state;
    rt_log_t *log = rt_log_new();
    run_case(log, u->c, u->dt);
    rt_log_finish_free(log, "check(s)");
}

/* ==== the backward (rudnn_attention_backward) ================================================ */

/* A backward case: the forward problem a (a.lse 1: the backward needs the lse) and the layout
 * of the gradients. */
typedef struct bcase {
    acase_t a;
    int grads_bshd; /* dout, dq, dk, dv as views of [B, S, H, D] memory */
} bcase_t;

#define BC(name, b, hq, hkv, sq, skv, d, dv, causal, wl, wr, cap, scale, mask, bias, bshd, gbshd)                     \
    {{name, b, hq, hkv, sq, skv, d, dv, causal, wl, wr, cap, scale, mask, bias, bshd, 1}, gbshd}
static const bcase_t bcases[] = {
    BC("basic", 2, 2, 2, 5, 7, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("gqa2", 1, 4, 2, 6, 9, 16, 16, 0, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("gqa4-hkv1", 2, 4, 1, 7, 5, 24, 24, 0, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("causal-sq<skv", 1, 2, 2, 5, 12, 32, 32, 1, NW, NW, 0, 0, 0, 0, 0, 0),
    /* bottom-right with Sq > Skv: the first Sq - Skv rows see no key (lse -inf) */
    BC("causal-sq>skv-gqa", 1, 4, 2, 9, 4, 16, 16, 1, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("window-left", 1, 2, 2, 12, 12, 16, 16, 0, 3, NW, 0, 0, 0, 0, 0, 0),
    BC("window-right", 1, 2, 1, 8, 11, 16, 16, 0, NW, 2, 0, 0, 0, 0, 0, 0),
    BC("window-both-sq>skv", 1, 2, 2, 10, 7, 16, 16, 0, 2, 1, 0, 0, 0, 0, 0, 0),
    /* keys 0..13 in no query's window: their dk, dv exactly 0 */
    BC("window-both-sq<skv-gqa", 1, 2, 1, 4, 20, 16, 16, 0, 2, 1, 0, 0, 0, 0, 0, 0),
    BC("causal-window-left", 1, 4, 2, 13, 13, 32, 32, 1, 4, NW, 0, 0, 0, 0, 0, 0),
    /* row 1 of each [b, h] fully masked (problem_make) */
    BC("mask-per-head-gqa", 2, 2, 1, 6, 10, 32, 32, 0, NW, NW, 0, 0, MASK_PER_HEAD, 0, 0, 0),
    BC("mask-broadcast", 1, 4, 4, 5, 9, 16, 16, 0, NW, NW, 0, 0, MASK_BROADCAST, 0, 0, 0),
    BC("bias-f32-over-b", 2, 2, 2, 6, 8, 32, 32, 0, NW, NW, 0, 0, 0, BIAS_F32_OVER_B, 0, 0),
    BC("bias-dtype-over-h", 2, 2, 2, 6, 8, 32, 32, 0, NW, NW, 0, 0, 0, BIAS_DTYPE_OVER_H, 0, 0),
    /* scores up to about +-5 against a cap of 2: the softcap's slope ranges over (0.1, 1] */
    BC("softcap", 1, 2, 2, 8, 8, 32, 32, 0, NW, NW, 2.0f, 1.0f, 0, 0, 0, 0),
    BC("scale", 1, 2, 2, 6, 7, 32, 32, 0, NW, NW, 0, 0.37f, 0, 0, 0, 0),
    BC("d40-dv24", 1, 4, 2, 7, 9, 40, 24, 0, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("d256", 1, 2, 1, 9, 13, 256, 256, 0, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("grads-bshd", 2, 4, 2, 7, 9, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 1),
    BC("bshd-all-options", 1, 4, 2, 9, 15, 32, 48, 1, 6, NW, 3.0f, 0.3f, MASK_PER_HEAD, BIAS_F32_OVER_B, 1, 1),
    /* more rows and keys than a work-group (64) of OpenCL's kernels */
    BC("causal-gqa-rows>64", 1, 4, 2, 70, 90, 64, 64, 1, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("sq0", 1, 2, 2, 0, 5, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 0),
    BC("skv0", 2, 2, 1, 3, 0, 32, 32, 0, NW, NW, 0, 0, 0, 0, 0, 0),
};
#undef BC
#define BCASE_COUNT (sizeof bcases / sizeof bcases[0])

/* Tolerances of dq, dk and dv against the FP64 reference, per tensor (grad_tol_of):
 *   norm-wise ||got - ref|| / ||ref||, and
 *   worst element |got - ref| / max |ref| of the tensor (so that elements near 0 do not demand a
 *   relative precision no rounding has).
 * The inputs (q, k, v, dout, bias) are the dtype's values, which the reference sees exactly; what
 * is left is
 *   (1) FP32 arithmetic, sums of up to Skv * Hq/Hkv terms of both signs: measured at most 4e-7
 *       norm-wise and 6e-7 per element on these cases; f32's tolerance is the forward's, 1e-5 and
 *       2e-5, 20x that;
 *   (2) the rounding of dq, dk, dv to the dtype: 2.0e-4 (f16) and 1.6e-3 (bf16) relative RMS (an
 *       ulp / sqrt(12) over a mantissa's values: dv, which has nothing else, measures exactly
 *       that), at most half an ulp at the largest element (4.9e-4 f16, 3.9e-3 bf16);
 *   (3) the forward's out rounded to the dtype (the backward is given it, as FlashAttention's)
 *       in Delta_i = dout_i . out_i, which dS = P (dP - Delta) subtracts from dP: where a row's
 *       softmax is peaked dP - Delta cancels and the rounding is amplified (measured up to 1.75x
 *       the rounding of (2) norm-wise, in f16 and bf16 alike, bshd-all-options: few visible
 *       keys).
 * f16 and bf16: norm-wise 5 RMS roundings (1e-3, 8e-3; measured at most 4.5e-4, 3.2e-3), per
 * element 4 half ulps at the largest element (2e-3, 1.6e-2; measured at most 9e-4, 3.5e-3).
 * Where the gradient is 0 by structure (the dq row of a fully masked row, lse -inf; dk and dv of a
 * key no query sees; all of dk, dv with Sq 0 and dq with Skv 0) it must be exactly 0: nothing may
 * leak from masked rows or keys. The dout rows of fully masked rows are scaled by 64, so that a
 * leak from them would stand out in dk and dv as well. */
typedef struct grad_tol {
    double norm, elem;
} grad_tol_t;

static grad_tol_t grad_tol_of(rudnn_dtype_t dt)
{
    if (dt == RUDNN_F16)
        return (grad_tol_t){1e-3, 2e-3};
    if (dt == RUDNN_BF16)
        return (grad_tol_t){8e-3, 1.6e-2};
    return (grad_tol_t){1e-5, 2e-5};
}

/* got against ref (n elements): the tolerances above, NaN, exact zeros where zero[i] (the
 * gradient is 0 by structure). Returns failed checks. */
static int grad_compare(rt_log_t *log, const char *what, const char *name, const float *got, const double *ref,
                        const uint8_t *zero, int64_t n, grad_tol_t t)
{
    double num = 0, den = 0, rmax = 0, emax = 0;
    int64_t worst = -1, nan_at = -1, leak_at = -1;
    for (int64_t i = 0; i < n; i++)
        rmax = fmax(rmax, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e == e)) {
            nan_at = nan_at < 0 ? i : nan_at;
            e = INFINITY;
        }
        if (zero[i] && got[i] != 0.0f && leak_at < 0)
            leak_at = i;
        num += e * e;
        den += ref[i] * ref[i];
        if (worst < 0 || !(e <= emax))
            emax = e, worst = i;
    }
    const double norm = den > 0 ? sqrt(num / den) : sqrt(num), elem = emax / (rmax > 0 ? rmax : 1);
    if (getenv("RUDNN_TEST_VERBOSE") && n)
        printf("    %s: %s norm-wise %.3g (tol %.3g), worst element %.3g (tol %.3g)\n", what, name, norm, t.norm,
               elem, t.elem);
    int bad = 0;
    if (nan_at >= 0) {
        rt_logf(log, "  %s: NaN in %s at element %lld\n", what, name, (long long)nan_at);
        bad++;
    }
    if (!(norm <= t.norm)) {
        rt_logf(log, "  %s: %s norm-wise relative error %.3g > %.3g\n", what, name, norm, t.norm);
        bad++;
    }
    if (!(elem <= t.elem)) {
        rt_logf(log, "  %s: %s element %lld = %.9g, expected %.9g: error / max|ref| %.3g > %.3g\n", what, name,
                (long long)worst, (double)got[worst], ref[worst], elem, t.elem);
        bad++;
    }
    if (leak_at >= 0) {
        rt_logf(log, "  %s: %s element %lld = %.9g, expected exactly 0 (a fully masked row, or a key no query "
                "sees)\n",
                what, name, (long long)leak_at, (double)got[leak_at]);
        bad++;
    }
    return bad;
}

/* L = sum(dout * out) of the FP64 forward reference. */
static double fd_loss(const attn_ref_problem_t *rp, const float *dout, double *out, int64_t nout)
{
    attn_ref_forward(rp, out, NULL);
    double l = 0;
    for (int64_t i = 0; i < nout; i++)
        l += (double)dout[i] * out[i];
    return l;
}

/* Central differences of L in element e of x (a copy of the problem's q, k or v that rp reads):
 * step FD_STEP, divided by the step the float values actually took. Truncation error h^2 / 6
 * L''' (about 1e-7 with h 2^-10 and these scores), cancellation 1e-16 |L| / h: the differences
 * are good to about 1e-6 of the gradient. */
#define FD_STEP (1.0 / 1024.0)
static double fd_at(const attn_ref_problem_t *rp, float *x, int64_t e, const float *dout, double *out, int64_t nout)
{
    const float x0 = x[e];
    const float hi = (float)((double)x0 + FD_STEP), lo = (float)((double)x0 - FD_STEP);
    x[e] = hi;
    const double lh = fd_loss(rp, dout, out, nout);
    x[e] = lo;
    const double ll = fd_loss(rp, dout, out, nout);
    x[e] = x0;
    return (lh - ll) / ((double)hi - (double)lo);
}

/* F32: dq, dk, dv of the reference (ref) and of the library (got) against central differences of
 * L, at every element of tensors of up to FD_ALL elements, else at FD_SAMPLE elements spread over
 * the tensor. Norm-wise over those elements: the reference within 1e-6 (the differences' own
 * error, measured at most 1e-7, with softcap's larger third derivatives), the library within
 * 1.1e-5 (its tolerance against the reference, 1e-5, on top). */
#define FD_ALL 1024
#define FD_SAMPLE 97
static int fd_check(rt_log_t *log, const char *what, const problem_t *p, const float *dout, const float *got[3],
                    const double *ref[3])
{
    static const char *const names[3] = {"dq", "dk", "dv"};
    const acase_t *c = p->c;
    const int64_t n[3] = {c->b * c->hq * c->sq * c->d, c->b * c->hkv * c->skv * c->d,
                          c->b * c->hkv * c->skv * c->dv};
    const int64_t nout = c->b * c->hq * c->sq * c->dv;
    double *out = rt_xmalloc(sizeof(double) * (size_t)(nout ? nout : 1));
    int bad = 0;
    for (int t = 0; t < 3; t++) {
        if (!n[t])
            continue;
        attn_ref_problem_t rp = p->rp;
        float *x = rt_xmalloc(sizeof(float) * (size_t)n[t]);
        memcpy(x, t == 0 ? p->hq : t == 1 ? p->hk : p->hv, sizeof(float) * (size_t)n[t]);
        if (t == 0)
            rp.q = x;
        else if (t == 1)
            rp.k = x;
        else
            rp.v = x;
        const int64_t count = n[t] <= FD_ALL ? n[t] : FD_SAMPLE;
        double num_ref = 0, num_got = 0, den = 0;
        for (int64_t s = 0; s < count; s++) {
            const int64_t e = n[t] <= FD_ALL ? s : s * n[t] / count + (s * 7919) % (n[t] / count);
            const double fd = fd_at(&rp, x, e, dout, out, nout);
            num_ref += (ref[t][e] - fd) * (ref[t][e] - fd);
            num_got += ((double)got[t][e] - fd) * ((double)got[t][e] - fd);
            den += fd * fd;
        }
        const double er = den > 0 ? sqrt(num_ref / den) : sqrt(num_ref);
        const double eg = den > 0 ? sqrt(num_got / den) : sqrt(num_got);
        if (getenv("RUDNN_TEST_VERBOSE"))
            printf("    %s: %s against central differences at %lld elements: reference %.3g, library %.3g\n", what,
                   names[t], (long long)count, er, eg);
        if (!(er <= 1e-6)) {
            rt_logf(log, "  %s: the reference's %s against central differences: norm-wise %.3g > 1e-6\n", what,
                    names[t], er);
            bad++;
        }
        if (!(eg <= 1.1e-5)) {
            rt_logf(log, "  %s: %s against central differences: norm-wise %.3g > 1.1e-5\n", what, names[t], eg);
            bad++;
        }
        free(x);
    }
    free(out);
    return bad;
}

/* The backward's operands of problem p: dout (uploaded), dq, dk, dv (poisoned). */
typedef struct grads {
    operand_t dout, d[3]; /* dq, dk, dv */
    float *hdout;
    int64_t n[3];
    uint8_t *zero[3]; /* per element of dq, dk, dv: 0 by structure */
} grads_t;

static void grads_make(grads_t *g, const problem_t *p, const bcase_t *bc, rt_rng_t *rng)
{
    const acase_t *c = p->c;
    memset(g, 0, sizeof *g);
    const int64_t ddo[4] = {c->b, c->hq, c->sq, c->dv}, ddq[4] = {c->b, c->hq, c->sq, c->d};
    const int64_t ddk[4] = {c->b, c->hkv, c->skv, c->d}, ddv[4] = {c->b, c->hkv, c->skv, c->dv};
    operand_make(&g->dout, p->dt, 4, ddo, bc->grads_bshd);
    operand_make(&g->d[0], p->dt, 4, ddq, bc->grads_bshd);
    operand_make(&g->d[1], p->dt, 4, ddk, bc->grads_bshd);
    operand_make(&g->d[2], p->dt, 4, ddv, bc->grads_bshd);
    g->n[0] = rt_numel(4, ddq), g->n[1] = rt_numel(4, ddk), g->n[2] = rt_numel(4, ddv);
    g->hdout = random_values(rng, p->dt, rt_numel(4, ddo), -1, 1);
    const int64_t rows = c->b * c->hq * c->sq;
    for (int64_t r = 0; r < rows; r++) /* fully masked rows: a leak from them stands out */
        if (p->ref_lse[r] == -INFINITY)
            for (int64_t x = 0; x < c->dv; x++)
                g->hdout[r * c->dv + x] *= 64.0f;
    operand_upload(&g->dout, g->hdout);
    /* the gradients that are 0 by structure */
    for (int t = 0; t < 3; t++)
        g->zero[t] = rt_xcalloc((size_t)(g->n[t] ? g->n[t] : 1), 1);
    for (int64_t r = 0; r < rows; r++)
        if (p->ref_lse[r] == -INFINITY)
            memset(g->zero[0] + r * c->d, 1, (size_t)c->d);
    const attn_ref_problem_t *rp = &p->rp;
    const int64_t group = c->hq / c->hkv;
    for (int64_t b = 0; b < c->b; b++) {
        for (int64_t hk = 0; hk < c->hkv; hk++) {
            for (int64_t j = 0; j < c->skv; j++) {
                int seen = 0;
                for (int64_t h = hk * group; h < (hk + 1) * group && !seen; h++) {
                    for (int64_t i = 0; i < c->sq && !seen; i++) {
                        const int64_t m = (((rp->mask_b == 1 ? 0 : b) * rp->mask_h + (rp->mask_h == 1 ? 0 : h)) *
                                           c->sq + i) * c->skv + j;
                        seen = attn_ref_visible(rp, i, j) && !(rp->mask && rp->mask[m]);
                    }
                }
                const int64_t key = (b * c->hkv + hk) * c->skv + j;
                if (!seen) {
                    memset(g->zero[1] + key * c->d, 1, (size_t)c->d);
                    memset(g->zero[2] + key * c->dv, 1, (size_t)c->dv);
                }
            }
        }
    }
}

static void grads_free(grads_t *g)
{
    operand_free(&g->dout);
    for (int t = 0; t < 3; t++) {
        operand_free(&g->d[t]);
        free(g->zero[t]);
    }
    free(g->hdout);
}

static const char *const grad_names[3] = {"dq", "dk", "dv"};

/* Runs case bc in dtype dt: the library's forward (Autotune, with lse) gives out and lse, then the
 * backward twice, with the queue's pool (workspace NULL) and with a workspace of exactly the
 * queried size (poison after it must stay), each checked against the reference, and the two
 * bitwise equal (the deterministic backward). Returns 1 when the backend's backward answers
 * NOT_SUPPORTED (why: its message), after checking that answer (the op named, nothing written). */
static int run_backward_case(rt_log_t *log, const bcase_t *bc, rudnn_dtype_t dt, char *why, size_t why_cap)
{
    const acase_t *c = &bc->a;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, 100 + (int)dt);
    problem_t p;
    problem_make(&p, c, dt, &rng);
    grads_t g;
    grads_make(&g, &p, bc, &rng);
    char what[160];
    snprintf(what, sizeof what, "backward/%s/%s", c->name, rudnn_dtype_name(dt));
    double *ref[3];
    float *got[2][3];
    for (int t = 0; t < 3; t++) {
        ref[t] = rt_xcalloc((size_t)(g.n[t] ? g.n[t] : 1), sizeof(double));
        for (int r = 0; r < 2; r++)
            got[r][t] = rt_xcalloc((size_t)(g.n[t] ? g.n[t] : 1), sizeof(float));
    }
    rudnn_buffer_t ws = NULL;
    uint8_t *ws_poison = NULL;
    int unsupported = 0;
    attn_ref_backward(&p.rp, g.hdout, ref[0], ref[1], ref[2]);

    /* the forward, as a user runs it */
    rudnn_status_t st = rudnn_attention(rt_queue, &p.q.t, &p.k.t, &p.v.t, opt(&p.mask), opt(&p.bias), &p.opts,
                                        RUDNN_ATTENTION_AUTOTUNE, NULL, 0, &p.out.t, &p.lse.t);
    if (st) {
        rt_logf(log, "  %s: the forward returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        log->failures++;
        goto done;
    }
    if (c->sq) { /* the lse the backward gets: -inf exactly on the fully masked rows */
        const int64_t rows = c->b * c->hq * c->sq;
        float *lse = rt_xmalloc(sizeof(float) * (size_t)rows);
        size_t unwritten = 0, tail = 0;
        operand_download(&p.lse, lse, &unwritten, &tail);
        for (int64_t r = 0; r < rows; r++) {
            if ((p.ref_lse[r] == -INFINITY) != (lse[r] == -INFINITY) || unwritten || tail) {
                rt_logf(log, "  %s: the forward's lse row %lld = %.9g, reference %.9g (%zu unwritten)\n", what,
                        (long long)r, (double)lse[r], p.ref_lse[r], unwritten);
                log->failures++;
                break;
            }
        }
        free(lse);
    }
    const rudnn_attention_backward_args_t args = {&p.q.t,  &p.k.t,  &p.v.t,  opt(&p.mask), opt(&p.bias), &p.out.t,
                                                  &p.lse.t, &g.dout.t, &g.d[0].t, &g.d[1].t,  &g.d[2].t};
    size_t need = 0;
    st = rudnn_attention_backward_workspace_size(rt_queue, &args, &p.opts, &need);
    if (st == RUDNN_STATUS_NOT_SUPPORTED) {
        /* the backend has no backward: both calls say so, naming the op, and write nothing */
        unsupported = 1;
        snprintf(why, why_cap, "%s", rudnn_last_error());
        if (strncmp(why, "attention_backward_workspace_size: ", 35) != 0 || !strstr(why, "backward")) {
            rt_logf(log, "  %s: workspace_size NOT_SUPPORTED with message \"%s\"\n", what, why);
            log->failures++;
        }
        st = rudnn_attention_backward(rt_queue, &args, &p.opts, NULL, 0);
        if (st != RUDNN_STATUS_NOT_SUPPORTED || strncmp(rudnn_last_error(), "attention_backward: ", 20) != 0) {
            rt_logf(log, "  %s: workspace_size NOT_SUPPORTED but the backward returned %s: %s\n", what,
                    rudnn_status_string(st), rudnn_last_error());
            log->failures++;
        }
        rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
        for (int t = 0; t < 3; t++) {
            size_t unwritten = 0, tail = 0;
            operand_download(&g.d[t], got[0][t], &unwritten, &tail);
            if (unwritten != (size_t)g.n[t] || tail) {
                rt_logf(log, "  %s: NOT_SUPPORTED but %s was written\n", what, grad_names[t]);
                log->failures++;
            }
        }
        goto done;
    }
    if (st) {
        rt_logf(log, "  %s: workspace_size returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        log->failures++;
        goto done;
    }
    rt_assert_status(rudnn_buffer_create(rt_ctx, need + RT_TAIL_BYTES, &ws), RUDNN_STATUS_SUCCESS);
    ws_poison = rt_xmalloc(need + RT_TAIL_BYTES);
    rt_poison_host(RUDNN_F32, ws_poison, need + RT_TAIL_BYTES);
    rt_assert_status(rudnn_buffer_write(rt_queue, ws, 0, ws_poison, need + RT_TAIL_BYTES), RUDNN_STATUS_SUCCESS);
    for (int r = 0; r < 2; r++) {
        char run[200];
        snprintf(run, sizeof run, "%s/%s", what, r ? "workspace of the queried size" : "workspace NULL");
        for (int t = 0; t < 3; t++)
            operand_poison(&g.d[t]);
        st = rudnn_attention_backward(rt_queue, &args, &p.opts, r ? ws : NULL, r ? need : 0);
        if (st) {
            rt_logf(log, "  %s: returned %s: %s\n", run, rudnn_status_string(st), rudnn_last_error());
            log->failures++;
            goto done;
        }
        rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
        const char *last = rudnn_last_kernel();
        if (c->sq && c->skv && (!last || strncmp(last, "attention.", 10) != 0 || !strstr(last, "backward"))) {
            rt_logf(log, "  %s: rudnn_last_kernel() says %s ran, not an attention backward kernel\n", run,
                    last ? last : "(null)");
            log->failures++;
        }
        for (int t = 0; t < 3; t++) {
            size_t unwritten = 0, tail = 0;
            operand_download(&g.d[t], got[r][t], &unwritten, &tail);
            if (unwritten || tail) {
                rt_logf(log, "  %s: %zu %s elements not written, %zu bytes past it changed\n", run, unwritten,
                        grad_names[t], tail);
                log->failures++;
            }
            log->failures += grad_compare(log, run, grad_names[t], got[r][t], ref[t], g.zero[t], g.n[t],
                                         grad_tol_of(dt));
        }
        if (r) {
            uint8_t *after = rt_xmalloc(need + RT_TAIL_BYTES);
            rt_assert_status(rudnn_buffer_read(rt_queue, ws, 0, after, need + RT_TAIL_BYTES), RUDNN_STATUS_SUCCESS);
            if (memcmp(after + need, ws_poison + need, RT_TAIL_BYTES) != 0) {
                rt_logf(log, "  %s: bytes past the %zu of the workspace changed\n", run, need);
                log->failures++;
            }
            free(after);
            for (int t = 0; t < 3; t++) {
                if (g.n[t] && memcmp(got[0][t], got[1][t], sizeof(float) * (size_t)g.n[t]) != 0) {
                    int64_t i = 0;
                    while (memcmp(&got[0][t][i], &got[1][t][i], sizeof(float)) == 0)
                        i++;
                    rt_logf(log, "  %s: not deterministic: %s element %lld is %.9g, then %.9g\n", what,
                            grad_names[t], (long long)i, (double)got[0][t][i], (double)got[1][t][i]);
                    log->failures++;
                }
            }
        }
    }
    if (dt == RUDNN_F32) {
        const float *gp[3] = {got[0][0], got[0][1], got[0][2]};
        const double *rp[3] = {ref[0], ref[1], ref[2]};
        log->failures += fd_check(log, what, &p, g.hdout, gp, rp);
    }
done:
    if (ws)
        rudnn_buffer_destroy(ws);
    free(ws_poison);
    for (int t = 0; t < 3; t++) {
        free(ref[t]);
        free(got[0][t]), free(got[1][t]);
    }
    grads_free(&g);
    problem_free(&p);
    return unsupported;
}

typedef struct {
    rudnn_dtype_t dt;
    const bcase_t *c;
    char name[64];
} bunit_t;

/* A backend whose backward answers NOT_SUPPORTED (checked as such) reports each backward case as
 * SKIPPED, saying why, as a strategy a backend lacks is left out: never as passed. */
static void test_backward_case(void **state)
{
    const bunit_t *u = *state;
    rt_log_t *log = rt_log_new();
    char why[512] = "";
    const int unsupported = run_backward_case(log, u->c, u->dt, why, sizeof why);
    if (unsupported && !log->failures) {
        printf("  %s: SKIPPED (backend %s: attention backward NOT_SUPPORTED: %s)\n", u->name, rt_requested_backend(),
               why);
        free(log);
        skip();
        return;
    }
    rt_log_finish_free(log, "check(s)");
}

/* No table on this backend: every entry says so, nothing runs. */
static int check_absent(void)
{
    int n = -1;
    rudnn_status_t st = rudnn_attention_kernel_count(rt_ctx, &n);
    if (st != RUDNN_STATUS_NOT_SUPPORTED || !strstr(rudnn_last_error(), "attention"))
        return 0;
    const int64_t d[4] = {1, 1, 2, 8};
    operand_t q, o;
    operand_make(&q, RUDNN_F32, 4, d, 0);
    operand_make(&o, RUDNN_F32, 4, d, 0);
    st = rudnn_attention(rt_queue, &q.t, &q.t, &q.t, NULL, NULL, NULL, RUDNN_ATTENTION_AUTOTUNE, NULL, 0, &o.t, NULL);
    int ok = st == RUDNN_STATUS_NOT_SUPPORTED && strstr(rudnn_last_error(), "attention: backend");
    if (!ok)
        fprintf(stderr, "attention without kernels returned %s: %s\n", rudnn_status_string(st), rudnn_last_error());
    operand_free(&q);
    operand_free(&o);
    return ok;
}

int main(int argc, char **argv)
{
    /* a cache of this process's own: tuning starts cold and leaves nothing behind */
    char cache[64];
    snprintf(cache, sizeof cache, "/tmp/rudnn-test-attention-%ld.txt", (long)getpid());
    setenv("RUDNN_AUTOTUNE_CACHE", cache, 1);
    rt_set_filters(argc, argv);
    rt_open_or_skip("attention");
    int count = 0;
    if (rudnn_attention_kernel_count(rt_ctx, &count) == RUDNN_STATUS_NOT_SUPPORTED) {
        int ok = check_absent();
        printf("backend %s: %s\n", rt_requested_backend(),
               ok ? "SKIPPED (no attention kernels; NOT_SUPPORTED checked)" : "FAILED: wrong answer without kernels");
        rt_close();
        return ok ? RT_EXIT_SKIP : 1;
    }
    for (int i = 0; i < count; i++) {
        const char *name;
        rudnn_attention_strategy_t s;
        rudnn_attention_kernel_info(rt_ctx, i, &name, &s);
        printf("attention: kernel %s (%s)\n", name, strategy_names[s]);
    }
    static unit_t units[DTYPE_COUNT * CASE_COUNT];
    static bunit_t bunits[DTYPE_COUNT * BCASE_COUNT];
    static struct CMUnitTest tests[DTYPE_COUNT * (CASE_COUNT + BCASE_COUNT)];
    size_t ntests = 0;
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        for (size_t i = 0; i < CASE_COUNT; i++) {
            unit_t *u = &units[d * CASE_COUNT + i];
            u->dt = dtypes[d];
            u->c = &cases[i];
            snprintf(u->name, sizeof u->name, "%s/%s", rudnn_dtype_name(dtypes[d]), cases[i].name);
            tests[ntests++] = (struct CMUnitTest){u->name, test_case, NULL, NULL, u};
        }
    }
    /* the backward's cases, named "<dtype>/backward/<case>" */
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        for (size_t i = 0; i < BCASE_COUNT; i++) {
            bunit_t *u = &bunits[d * BCASE_COUNT + i];
            u->dt = dtypes[d];
            u->c = &bcases[i];
            snprintf(u->name, sizeof u->name, "%s/backward/%s", rudnn_dtype_name(dtypes[d]), bcases[i].a.name);
            tests[ntests++] = (struct CMUnitTest){u->name, test_backward_case, NULL, NULL, u};
        }
    }
    int failed = _cmocka_run_group_tests("attention", tests, ntests, NULL, NULL);
    rt_close();
    unlink(cache);
    return rt_exit_code(failed);
}
