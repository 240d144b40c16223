/* Fault cases of pooling (rudnn/pooling.h): rudnn_pool_forward and rudnn_pool_backward in each mode,
 * over 1, 2 and 3 spatial dims and the three dtypes (one program per dtype: every case builds its
 * own from a cold context). The ops take no workspace: their allocations are the plugin's program
 * builds from a cold context (none from a cold or warm queue, which the walk checks with every
 * allocation failing). rudnn_pool_output_dims allocates nothing (host arithmetic) and is not walked.
 *
 * Every successful call's outputs are checked against an FP64 reference computed here from the
 * inputs as the device holds them (MAX and its indices exactly; the averages within FP32 rounding of
 * their sums and the dtype's rounding), then compared byte for byte with the fault-free run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/pooling.h>

typedef struct pool_def {
    int backward;
    rudnn_pool_mode_t mode;
    rudnn_dtype_t dt;
    int d;
    int64_t N, C, S[3], R[3], st[3], pad[3], dil[3];
    int ceil_mode, indices, x_given; /* indices: forward MAX; x_given: backward */
} pool_def_t;

#define MAX_ELEMS 512

/* The cases' problems: each small, each mode, rank and dtype at least once. */
static const pool_def_t defs[] = {
    /* 0: forward MAX f32 2D with indices, padding, dilation along W, ceil_mode */
    {0, RUDNN_POOL_MAX, RUDNN_F32, 2, 2, 3, {5, 6, 1}, {3, 2, 1}, {2, 2, 1}, {1, 1, 0}, {1, 2, 1}, 1, 1, 0},
    /* 1: forward AVG_INCLUDE_PAD f16 3D, ceil_mode */
    {0, RUDNN_POOL_AVG_INCLUDE_PAD, RUDNN_F16, 3, 1, 2, {3, 4, 5}, {2, 3, 2}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1, 0, 0},
    /* 2: forward AVG_EXCLUDE_PAD bf16 1D */
    {0, RUDNN_POOL_AVG_EXCLUDE_PAD, RUDNN_BF16, 1, 2, 2, {7, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1},
     0, 0, 0},
    /* 3: backward MAX f32 2D (x given), overlapping windows */
    {1, RUDNN_POOL_MAX, RUDNN_F32, 2, 2, 2, {5, 4, 1}, {3, 2, 1}, {1, 2, 1}, {1, 1, 0}, {1, 1, 1}, 0, 0, 1},
    /* 4: backward AVG_EXCLUDE_PAD f16 2D, x NULL */
    {1, RUDNN_POOL_AVG_EXCLUDE_PAD, RUDNN_F16, 2, 1, 3, {4, 5, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1, 0, 0},
    /* 5: backward AVG_INCLUDE_PAD bf16 3D, x given (read by no kernel) */
    {1, RUDNN_POOL_AVG_INCLUDE_PAD, RUDNN_BF16, 3, 1, 2, {3, 3, 4}, {2, 2, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1},
     0, 0, 1},
};

typedef struct pool_state {
    fault_env_t env;
    const pool_def_t *def;
    rudnn_pool_options_t opts;
    int64_t xdims[5], ydims[5];
    rudnn_tensor_t x, y, idx;  /* forward: x in, y and idx out; backward: x (MAX or given), y = dy */
    rudnn_tensor_t dx;         /* backward out */
    double ref[MAX_ELEMS], mag[MAX_ELEMS];
    int64_t ref_idx[MAX_ELEMS];
    int terms[MAX_ELEMS];
    size_t nref;
} pool_state_t;

static rudnn_status_t read_f32(const fault_env_t *env, const rudnn_tensor_t *t, float *out)
{
    const size_t n = (size_t)rudnn_tensor_numel(t), bytes = rudnn_tensor_bytes(t);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return RUDNN_STATUS_ALLOC_FAILED;
    rudnn_status_t st = rudnn_tensor_read(env->queue, t, raw, bytes);
    if (!st)
        rudnn_convert_to_f32(t->dtype, raw, out, n);
    free(raw);
    return st;
}

/* The problem padded to 3 spatial dims (leading dims of size 1, as the header's index formula). */
typedef struct box3 {
    int64_t S[3], P[3], R[3], st[3], pad[3], dil[3];
} box3_t;

static box3_t box_of(const pool_state_t *s)
{
    box3_t b;
    const int d = s->def->d;
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d);
        b.S[i] = k >= 0 ? s->xdims[2 + k] : 1;
        b.P[i] = k >= 0 ? s->ydims[2 + k] : 1;
        b.R[i] = k >= 0 ? s->def->R[k] : 1;
        b.st[i] = k >= 0 ? s->def->st[k] : 1;
        b.pad[i] = k >= 0 ? s->def->pad[k] : 0;
        b.dil[i] = k >= 0 ? s->def->dil[k] : 1;
    }
    return b;
}

/* Output p's window: the max (first in window order), its flat position (-1: none) over x row xr;
 * or the sum and the divisor of the averages. */
static void window(const pool_state_t *s, const box3_t *b, const float *xr, const int64_t p[3], double *value,
                   int64_t *arg, double *div, double *mag)
{
    double best = -INFINITY, sum = 0, m = 0;
    int64_t at = -1, inside = 0, padded = 1;
    for (int i = 0; i < 3; i++) { /* include_pad's count: positions inside [-pad, S + pad) */
        const int64_t lo = p[i] * b->st[i] - b->pad[i];
        int64_t hi = lo + b->R[i];
        if (hi > b->S[i] + b->pad[i])
            hi = b->S[i] + b->pad[i];
        padded *= hi - lo;
    }
    for (int64_t r0 = 0; r0 < b->R[0]; r0++)
        for (int64_t r1 = 0; r1 < b->R[1]; r1++)
            for (int64_t r2 = 0; r2 < b->R[2]; r2++) {
                const int64_t r[3] = {r0, r1, r2};
                int64_t q[3], in = 1;
                for (int i = 0; i < 3; i++) {
                    q[i] = p[i] * b->st[i] - b->pad[i] + r[i] * b->dil[i];
                    in &= q[i] >= 0 && q[i] < b->S[i];
                }
                if (!in)
                    continue;
                const int64_t flat = (q[0] * b->S[1] + q[1]) * b->S[2] + q[2];
                const double v = xr[flat];
                inside++;
                sum += v, m += fabs(v);
                if (at < 0 || (!isnan(best) && (isnan(v) || v > best)))
                    best = v, at = flat;
            }
    if (s->def->mode == RUDNN_POOL_MAX) {
        *value = best, *arg = at, *div = 1, *mag = fabs(best);
        return;
    }
    *div = s->def->mode == RUDNN_POOL_AVG_INCLUDE_PAD ? (double)padded : (double)inside;
    *value = *div > 0 ? sum / *div : 0.0, *arg = -1, *mag = *div > 0 ? m / *div : 0.0;
}

static rudnn_status_t make_reference(pool_state_t *s)
{
    const box3_t b = box_of(s);
    const int64_t NC = s->xdims[0] * s->xdims[1], ns = b.S[0] * b.S[1] * b.S[2], np = b.P[0] * b.P[1] * b.P[2];
    static float x[MAX_ELEMS], y[MAX_ELEMS];
    const int need_x = !s->def->backward || s->def->mode == RUDNN_POOL_MAX;
    if (NC * ns > MAX_ELEMS || NC * np > MAX_ELEMS)
        return RUDNN_STATUS_INTERNAL;
    rudnn_status_t st = need_x ? read_f32(&s->env, &s->x, x) : RUDNN_STATUS_SUCCESS;
    if (!st && s->def->backward)
        st = read_f32(&s->env, &s->y, y);
    if (st)
        return st;
    s->nref = (size_t)(NC * (s->def->backward ? ns : np));
    memset(s->ref, 0, sizeof s->ref);
    memset(s->mag, 0, sizeof s->mag);
    memset(s->terms, 0, sizeof s->terms);
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t pi = 0; pi < np; pi++) {
            const int64_t p[3] = {pi / (b.P[1] * b.P[2]), pi / b.P[2] % b.P[1], pi % b.P[2]};
            double v, div, m;
            int64_t arg;
            window(s, &b, x + nc * ns, p, &v, &arg, &div, &m);
            if (!s->def->backward) {
                s->ref[nc * np + pi] = v, s->mag[nc * np + pi] = m, s->ref_idx[nc * np + pi] = arg;
                continue;
            }
            const double g = y[nc * np + pi];
            if (s->def->mode == RUDNN_POOL_MAX) {
                if (arg >= 0)
                    s->ref[nc * ns + arg] += g, s->mag[nc * ns + arg] += fabs(g), s->terms[nc * ns + arg]++;
                continue;
            }
            for (int64_t r0 = 0; r0 < b.R[0]; r0++) /* the averages: every q of the window inside x */
                for (int64_t r1 = 0; r1 < b.R[1]; r1++)
                    for (int64_t r2 = 0; r2 < b.R[2]; r2++) {
                        const int64_t r[3] = {r0, r1, r2};
                        int64_t q[3], in = 1;
                        for (int i = 0; i < 3; i++) {
                            q[i] = p[i] * b.st[i] - b.pad[i] + r[i];
                            in &= q[i] >= 0 && q[i] < b.S[i];
                        }
                        if (!in)
                            continue;
                        const int64_t e = nc * ns + (q[0] * b.S[1] + q[1]) * b.S[2] + q[2];
                        s->ref[e] += g / div, s->mag[e] += fabs(g / div), s->terms[e]++;
                    }
        }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t probe(const pool_state_t *s, rudnn_buffer_t in, rudnn_buffer_t out);

static rudnn_status_t setup(void *p, const fault_env_t *env)
{
    pool_state_t *s = p;
    s->env = *env;
    s->def = &defs[env->variant];
    const pool_def_t *d = s->def;
    rudnn_pool_options_init(&s->opts);
    s->opts.mode = d->mode;
    s->opts.ceil_mode = d->ceil_mode;
    for (int i = 0; i < d->d; i++) {
        s->opts.window[i] = d->R[i], s->opts.stride[i] = d->st[i];
        s->opts.padding[i] = d->pad[i], s->opts.dilation[i] = d->dil[i];
    }
    const int rank = 2 + d->d;
    s->xdims[0] = d->N, s->xdims[1] = d->C;
    for (int i = 0; i < d->d; i++)
        s->xdims[2 + i] = d->S[i];
    rudnn_status_t st = rudnn_pool_output_dims(rank, s->xdims, &s->opts, s->ydims);
    if (st)
        return st;
    if (!d->backward) {
        st = fault_float_tensor(env, d->dt, rank, s->xdims, 61 + env->variant, &s->x);
        if (!st)
            st = fault_out_tensor(env, d->dt, rank, s->ydims, &s->y);
        if (!st && d->indices)
            st = fault_out_tensor(env, RUDNN_I64, rank, s->ydims, &s->idx);
    } else {
        if (d->mode == RUDNN_POOL_MAX || d->x_given)
            st = fault_float_tensor(env, d->dt, rank, s->xdims, 71 + env->variant, &s->x);
        if (!st)
            st = fault_float_tensor(env, d->dt, rank, s->ydims, 81 + env->variant, &s->y);
        if (!st)
            st = fault_out_tensor(env, d->dt, rank, s->xdims, &s->dx);
    }
    if (!st)
        st = d->backward ? probe(s, s->y.buffer, s->dx.buffer) : probe(s, s->x.buffer, s->y.buffer);
    return st ? st : make_reference(s);
}

/* A backend without pooling kernels answers NOT_SUPPORTED (the case is then skipped): asked with N 0,
 * which the op checks in full and launches nothing for (no program is built). */
static rudnn_status_t probe(const pool_state_t *s, rudnn_buffer_t in, rudnn_buffer_t out)
{
    const int rank = 2 + s->def->d;
    int64_t xd[5], yd[5];
    memcpy(xd, s->xdims, sizeof xd);
    memcpy(yd, s->ydims, sizeof yd);
    xd[0] = yd[0] = 0;
    rudnn_tensor_t px, py;
    rudnn_status_t st = rudnn_tensor_init(&px, in, 0, s->def->dt, rank, xd);
    if (!st)
        st = rudnn_tensor_init(&py, out, 0, s->def->dt, rank, yd);
    return st ? st : rudnn_pool_forward(s->env.queue, &px, &s->opts, &py, NULL);
}

static rudnn_status_t prepare(void *p)
{
    pool_state_t *s = p;
    if (s->def->backward)
        return fault_fill_sentinel(&s->env, &s->dx);
    rudnn_status_t st = fault_fill_sentinel(&s->env, &s->y);
    return st || !s->idx.buffer ? st : fault_fill_sentinel(&s->env, &s->idx);
}

static rudnn_status_t call(void *p)
{
    pool_state_t *s = p;
    if (s->def->backward)
        return rudnn_pool_backward(s->env.queue, s->x.buffer ? &s->x : NULL, &s->y, &s->opts, &s->dx);
    return rudnn_pool_forward(s->env.queue, &s->x, &s->opts, &s->y, s->idx.buffer ? &s->idx : NULL);
}

static int unchanged(void *p, char *why, size_t cap)
{
    pool_state_t *s = p;
    if (s->def->backward)
        return fault_is_sentinel(&s->env, &s->dx, "dx", why, cap);
    return fault_is_sentinel(&s->env, &s->y, "y", why, cap) &&
           (!s->idx.buffer || fault_is_sentinel(&s->env, &s->idx, "indices", why, cap));
}

/* The outputs against the reference: a mismatch is said on stdout and fails the case (INTERNAL). */
static rudnn_status_t check_reference(pool_state_t *s)
{
    static float got[MAX_ELEMS];
    const rudnn_tensor_t *out = s->def->backward ? &s->dx : &s->y;
    rudnn_status_t st = read_f32(&s->env, out, got);
    if (st)
        return st;
    const double eps = s->def->dt == RUDNN_F32 ? 0.0 : s->def->dt == RUDNN_F16 ? 0x1p-11 : 0x1p-8;
    for (size_t i = 0; i < s->nref; i++) {
        const int exact = !s->def->backward && s->def->mode == RUDNN_POOL_MAX;
        const double tol =
            exact ? 0.0 : (double)(s->terms[i] + 4) * 0x1p-23 * s->mag[i] + eps * fabs(s->ref[i]) + 1e-30;
        if (!(fabs((double)got[i] - s->ref[i]) <= tol) && !(isinf(s->ref[i]) && got[i] == s->ref[i])) {
            printf("faults pooling: %s, element %zu of %zu: %.9g, expected %.9g\n",
                   s->def->backward ? "pool_backward dx" : "pool_forward y", i, s->nref, (double)got[i], s->ref[i]);
            return RUDNN_STATUS_INTERNAL;
        }
    }
    if (s->idx.buffer) {
        static int64_t idx[MAX_ELEMS];
        st = rudnn_tensor_read(s->env.queue, &s->idx, idx, s->nref * sizeof *idx);
        for (size_t i = 0; !st && i < s->nref; i++)
            if (idx[i] != s->ref_idx[i]) {
                printf("faults pooling: pool_forward indices, element %zu: %lld, expected %lld\n", i,
                       (long long)idx[i], (long long)s->ref_idx[i]);
                st = RUDNN_STATUS_INTERNAL;
            }
    }
    return st;
}

static rudnn_status_t result(void *p, uint8_t **bytes, size_t *size)
{
    pool_state_t *s = p;
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = check_reference(s);
    if (st)
        return st;
    if (s->def->backward)
        return fault_append_tensor(&s->env, &s->dx, bytes, size);
    st = fault_append_tensor(&s->env, &s->y, bytes, size);
    return st || !s->idx.buffer ? st : fault_append_tensor(&s->env, &s->idx, bytes, size);
}

static void undo(void *p) { (void)p; }

static void teardown(void *p)
{
    pool_state_t *s = p;
    rudnn_tensor_t *all[] = {&s->x, &s->y, &s->idx, &s->dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define POOL_CASE(op, label, def)                                                                            \
    {op,     sizeof(pool_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, def}

static const fault_case_t cases[] = {
    POOL_CASE("pool_forward", "pool_forward (MAX, f32, 2D, indices)", 0),
    POOL_CASE("pool_forward", "pool_forward (AVG_INCLUDE_PAD, f16, 3D)", 1),
    POOL_CASE("pool_forward", "pool_forward (AVG_EXCLUDE_PAD, bf16, 1D)", 2),
    POOL_CASE("pool_backward", "pool_backward (MAX, f32, 2D)", 3),
    POOL_CASE("pool_backward", "pool_backward (AVG_EXCLUDE_PAD, f16, x NULL)", 4),
    POOL_CASE("pool_backward", "pool_backward (AVG_INCLUDE_PAD, bf16, 3D)", 5),
};

const fault_family_t fault_family_pooling = {"pooling", cases, sizeof cases / sizeof cases[0]};
