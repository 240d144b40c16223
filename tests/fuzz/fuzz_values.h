/* Value checks shared by the targets of pooling, interpolation, ctc, grid_sample and the attention
 * backward (fuzz_<family>.c): reading back what the buffers hold after an accepted call, element
 * access through a validated view (bounds-checked: a view past its buffer is a library bug, never
 * an out-of-bounds read here), the overlap and gap rules of outputs, and one output element
 * against its FP64 sum. Everything is static inline: each target takes what it uses.
 *
 * An element's expectation (fv_acc_t): the FP64 sum of its terms, the sum of their magnitudes
 * (which bounds the FP32 evaluation's rounding), an extra error bound (err: what a term's own
 * computation may be off by, e.g. exp's amplification of a score's error), slack (terms with an
 * FP32 denormal factor, which a device may flush), reach (what the device's partial sums may
 * reach beyond the terms' magnitudes: a factorized sum's inner rows) and whether a term is NaN.
 * fv_check_element: NaN exactly where a term is NaN; else, when the magnitudes (and the reach) stay
 * within the output dtype's range,
 * within (terms + 2) 2^-23 mag + err + slack + the dtype's rounding of the sum. */
#ifndef RUDNN_FUZZ_VALUES_H
#define RUDNN_FUZZ_VALUES_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

/* ---- what the buffers hold -------------------------------------------------------------------- */

#define FV_MAX_READ 12
static struct {
    rudnn_buffer_t b;
    uint8_t *raw;
    size_t bytes;
} fv_read[FV_MAX_READ];
static int fv_nread;

static inline void fv_reads_reset(void)
{
    for (int i = 0; i < fv_nread; i++)
        free(fv_read[i].raw);
    fv_nread = 0;
}

/* The whole buffer b (read once per input), through a queue of its context; *bytes its size. */
static inline const uint8_t *fv_buffer_bytes(const fz_call_t *c, rudnn_buffer_t b, size_t *bytes)
{
    for (int i = 0; i < fv_nread; i++)
        if (fv_read[i].b == b) {
            *bytes = fv_read[i].bytes;
            return fv_read[i].raw;
        }
    if (fv_nread == FV_MAX_READ)
        fz_fail("harness: too many buffers to read", "buffer_read", RUDNN_STATUS_INTERNAL);
    const size_t n = rudnn_buffer_size(b);
    uint8_t *raw = malloc(n ? n : 1);
    if (!raw)
        fz_fail("harness: out of memory", "malloc", RUDNN_STATUS_ALLOC_FAILED);
    const rudnn_queue_t q = rudnn_buffer_context(b) == c->env->ctx ? c->env->q : c->env->q2;
    fz_require("buffer_read", rudnn_buffer_read(q, b, 0, raw, n));
    fv_read[fv_nread].b = b, fv_read[fv_nread].raw = raw, fv_read[fv_nread].bytes = n;
    fv_nread++;
    *bytes = n;
    return raw;
}

/* ---- element access through an accepted call's view --------------------------------------------- */

typedef struct fv_view {
    const uint8_t *raw;
    size_t bytes; /* of the buffer */
    rudnn_dtype_t dt;
    size_t es;
    int64_t base; /* element index of [0, 0, ...] */
    int64_t st[RUDNN_MAX_RANK];
    int rank;
    const char *op;
} fv_view_t;

static inline fv_view_t fv_view_of(const fz_call_t *c, const char *op, const rudnn_tensor_t *t)
{
    fv_view_t v;
    memset(&v, 0, sizeof v);
    v.raw = fv_buffer_bytes(c, t->buffer, &v.bytes);
    v.dt = t->dtype;
    v.es = rudnn_dtype_size(t->dtype);
    v.base = (int64_t)(t->offset / v.es);
    v.rank = t->rank;
    v.op = op;
    for (int i = 0; i < t->rank && i < RUDNN_MAX_RANK; i++)
        v.st[i] = t->dims[i] == 1 ? 0 : t->strides[i];
    return v;
}

/* Element index of [i0, i1, ...] (the first n indices; the rest 0). */
static inline int64_t fv_index(const fv_view_t *v, const int64_t *at, int n)
{
    int64_t e = v->base;
    for (int k = 0; k < n && k < v->rank; k++)
        e += at[k] * v->st[k];
    return e;
}

static inline const uint8_t *fv_at(const fv_view_t *v, int64_t e)
{
    if (e < 0 || (uint64_t)e >= v->bytes / v->es) {
        fprintf(stderr, "fuzz: element %lld of a view lies outside its buffer of %zu bytes\n", (long long)e, v->bytes);
        fz_fail("an accepted call's view reaches past its buffer", v->op, RUDNN_STATUS_SUCCESS);
    }
    return v->raw + (size_t)e * v->es;
}

static inline float fv_load(const fv_view_t *v, int64_t e)
{
    float f;
    rudnn_convert_to_f32(v->dt, fv_at(v, e), &f, 1);
    return f;
}

static inline int64_t fv_load_int(const fv_view_t *v, int64_t e)
{
    const uint8_t *p = fv_at(v, e);
    if (v->dt == RUDNN_I64) {
        int64_t x;
        memcpy(&x, p, 8);
        return x;
    }
    int32_t x;
    memcpy(&x, p, 4);
    return x;
}

/* ---- the overlap and gap rules of outputs ---------------------------------------------------------- */

/* Bytes [first, last element] of a view (begin == end when empty). */
static inline void fv_span_of(const rudnn_tensor_t *t, size_t *begin, size_t *end)
{
    *begin = *end = t->offset;
    if (rudnn_tensor_numel(t) == 0)
        return;
    uint64_t last = 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > 1)
            last += (uint64_t)(t->dims[i] - 1) * (uint64_t)t->strides[i];
    *end = t->offset + (size_t)(last + 1) * rudnn_dtype_size(t->dtype);
}

/* Outputs overlap no input and no other output, not even exactly (the headers' rule). */
static inline void fv_check_disjoint(const char *op, const rudnn_tensor_t *const *outs, int nouts,
                                     const rudnn_tensor_t *const *ins, int nins)
{
    for (int i = 0; i < nouts; i++) {
        if (!outs[i])
            continue;
        size_t ob, oe;
        fv_span_of(outs[i], &ob, &oe);
        for (int j = 0; j < nins + nouts; j++) {
            const rudnn_tensor_t *o = j < nins ? ins[j] : outs[j - nins];
            if (!o || o == outs[i] || o->buffer != outs[i]->buffer)
                continue;
            size_t ib, ie;
            fv_span_of(o, &ib, &ie);
            if (ob < oe && ib < ie && ob < ie && ib < oe) {
                fprintf(stderr, "fuzz: output bytes [%zu, %zu) meet bytes [%zu, %zu) of another argument\n", ob, oe,
                        ib, ie);
                fz_fail("an accepted call's output overlaps an input or another output", op, RUDNN_STATUS_SUCCESS);
            }
        }
    }
}

/* The byte the harness left at `at` of buffer b (the fill, or fz_write_input's bytes); -1 for a
 * buffer not the harness's. */
static inline int fv_expected_byte(const fz_call_t *c, rudnn_buffer_t b, size_t at)
{
    int k = -1;
    for (int i = 0; i < FZ_BUFFERS + FZ_FOREIGN_BUFFERS && k < 0; i++)
        if ((i < FZ_BUFFERS ? c->env->buf[i] : c->env->foreign[i - FZ_BUFFERS]) == b)
            k = i;
    if (k < 0)
        return -1;
    int v = c->fill[k];
    for (int i = 0; i < c->nwritten; i++)
        if (c->written[i].buffer == k && at >= c->written[i].offset && at - c->written[i].offset < c->written[i].bytes)
            v = c->written[i].data[at - c->written[i].offset];
    return v;
}

/* The bytes between a strided output's elements hold what they held. */
static inline void fv_check_gaps(const fz_call_t *c, const char *op, const rudnn_tensor_t *t)
{
    if (!t || rudnn_tensor_is_contiguous(t) || rudnn_tensor_numel(t) == 0)
        return;
    static uint8_t covered[FZ_BUFFER_BYTES];
    size_t b, e, bytes;
    fv_span_of(t, &b, &e);
    if (e > sizeof covered || fv_expected_byte(c, t->buffer, 0) < 0)
        return;
    memset(covered + b, 0, e - b);
    const size_t es = rudnn_dtype_size(t->dtype);
    const int64_t n = rudnn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, off = 0;
        for (int k = t->rank - 1; k >= 0; k--) {
            off += (rest % t->dims[k]) * (t->dims[k] == 1 ? 0 : t->strides[k]);
            rest /= t->dims[k];
        }
        memset(covered + t->offset + (size_t)off * es, 1, es);
    }
    const uint8_t *now = fv_buffer_bytes(c, t->buffer, &bytes);
    for (size_t at = b; at < e; at++)
        if (!covered[at] && now[at] != fv_expected_byte(c, t->buffer, at)) {
            fprintf(stderr, "fuzz: byte %zu, between elements of an output (bytes [%zu, %zu)), is 0x%02x, was 0x%02x\n",
                    at, b, e, now[at], fv_expected_byte(c, t->buffer, at));
            fz_fail("an accepted call wrote between a strided output's elements", op, RUDNN_STATUS_SUCCESS);
        }
}

/* ---- one element against its FP64 sum ---------------------------------------------------------------- */

typedef struct fv_acc {
    double sum, mag, err, slack, reach;
    int64_t terms;
    int nan;
} fv_acc_t;

static inline int fv_denormal(double v) { return v != 0.0 && fabs(v) < FLT_MIN; }

/* A term that is the product of u and v (either may be 1). */
static inline void fv_add(fv_acc_t *a, double u, double v)
{
    const double t = u * v;
    a->terms++;
    if (isnan(t)) {
        a->nan = 1;
        return;
    }
    a->sum += t, a->mag += fabs(t);
    if (fv_denormal(u) || fv_denormal(v) || fv_denormal(t))
        a->slack += fabs(t) + FLT_MIN;
}

/* A term t with its own error bound e. */
static inline void fv_add_err(fv_acc_t *a, double t, double e)
{
    a->terms++;
    if (isnan(t) || isnan(e)) {
        a->nan |= isnan(t);
        return;
    }
    a->sum += t, a->mag += fabs(t), a->err += e;
    if (fv_denormal(t))
        a->slack += fabs(t) + FLT_MIN;
}

/* The output dtype's range: past it (or FP32's on the way) the element is left alone. */
static inline double fv_range(rudnn_dtype_t dt) { return dt == RUDNN_F16 ? 6e4 : 1e37; }

static inline double fv_eps(rudnn_dtype_t dt) { return dt == RUDNN_F16 ? 0x1p-11 : dt == RUDNN_BF16 ? 0x1p-8 : 0.0; }

/* 1 when got is right for a, else 0 with the tolerance in *tol. */
static inline int fv_matches(rudnn_dtype_t dt, const fv_acc_t *a, float got, double *tol)
{
    *tol = 0;
    if (a->nan)
        return isnan(got);
    if (!(a->mag + a->err + a->reach <= fv_range(dt)))
        return 1; /* FP32 (F16) may overflow on the way */
    *tol = (double)(a->terms + 2) * 0x1p-23 * a->mag + a->err + a->slack + (double)(a->terms + 2) * FLT_MIN +
           fv_eps(dt) * fabs(a->sum) + (dt == RUDNN_F16 ? 0x1p-24 : 0.0);
    return !isnan(got) && fabs((double)got - a->sum) <= *tol;
}

static inline void fv_check_element(const char *op, const char *out, rudnn_dtype_t dt, int64_t i, const fv_acc_t *a,
                                    float got, const char *rule)
{
    double tol;
    if (fv_matches(dt, a, got, &tol))
        return;
    fprintf(stderr, "fuzz: %s element %lld: expected %.9g (within %.3g, %lld terms, magnitude %.3g), got %.9g\n", out,
            (long long)i, a->nan ? NAN : a->sum, tol, (long long)a->terms, a->mag, (double)got);
    fz_fail(a->nan ? "an output over a NaN term is not NaN" : rule, op, RUDNN_STATUS_SUCCESS);
}

/* ---- input values ------------------------------------------------------------------------------------ */

/* Seeded values (sin-ish, scaled) into the first FZ_WRITE_BYTES bytes of an input of float dtype dt. */
static inline void fv_write_values(fz_call_t *c, const rudnn_tensor_t *t, rudnn_dtype_t dt, int seed, int j,
                                   float amplitude)
{
    if (!t || (dt != RUDNN_F32 && dt != RUDNN_F16 && dt != RUDNN_BF16))
        return; /* a mutated dtype: the fill alone */
    float v[FZ_WRITE_BYTES / 2];
    uint8_t raw[FZ_WRITE_BYTES];
    const size_t es = rudnn_dtype_size(dt), n = sizeof raw / es;
    for (size_t i = 0; i < n; i++)
        v[i] = (float)sin(0.9 * (seed + 1) + 1.7 * (double)i + 0.5 * j) * amplitude;
    rudnn_convert_from_f32(dt, v, raw, n);
    fz_write_input(c, t, raw, n * es);
}

/* Strides of [N, S.., C] memory for the logical [N, C, S..] dims of t, when t is the intended
 * contiguous descriptor (the harness's own: fz_call_t.args). */
static inline void fv_channels_last(const rudnn_tensor_t *t)
{
    if (!t || t->rank < 3 || t->rank > 5 || !rudnn_tensor_is_contiguous(t))
        return;
    int64_t s = 1;
    for (int i = 1; i < t->rank; i++)
        if (t->dims[i] < 0 || __builtin_mul_overflow(s, t->dims[i] ? t->dims[i] : 1, &s) || s > ((int64_t)1 << 40))
            return; /* dims too large for any stride: leave the contiguous view to be rejected */
    rudnn_tensor_t *w = (rudnn_tensor_t *)t;
    s = w->dims[1] ? w->dims[1] : 1;
    w->strides[1] = 1;
    for (int i = w->rank - 1; i >= 2; i--) {
        w->strides[i] = s;
        s *= w->dims[i] ? w->dims[i] : 1;
    }
    w->strides[0] = s;
}

#endif
