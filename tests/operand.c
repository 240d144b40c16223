/* Shared pieces of the numeric and contract suites of five families (see operand.h). */
#include "operand.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/convolution.h> /* rudnn_conv_channels_last */

/* ---- device operands ------------------------------------------------------------------------ */

/* Offset in elements of logical element i (row-major over t's dims) in t's memory. */
static int64_t phys_index(const rudnn_tensor_t *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        const int64_t dim = t->dims[d] ? t->dims[d] : 1;
        off += (i % dim) * t->strides[d];
        i /= dim;
    }
    return off;
}

static uint8_t *element_at(const operand_t *o, uint8_t *base, int64_t i)
{
    return base + o->t.offset + (size_t)phys_index(&o->t, i) * rudnn_dtype_size(o->t.dtype);
}

/* Sizes the buffer for the strides (head elements, the span of the elements, RT_TAIL_BYTES) and
 * creates it; the descriptor is the caller's. */
static void operand_alloc(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, const int64_t *strides,
                          size_t head)
{
    memset(o, 0, sizeof *o);
    const size_t es = rudnn_dtype_size(dt);
    o->numel = rt_numel(rank, dims);
    int64_t span = o->numel > 0 ? 1 : 0;
    for (int i = 0; i < rank && o->numel > 0; i++)
        span += (dims[i] - 1) * strides[i];
    o->bytes = head * es + (size_t)span * es + RT_TAIL_BYTES;
    rt_assert_status(rudnn_buffer_create(rt_ctx, o->bytes, &o->buf), RUDNN_STATUS_SUCCESS);
}

/* The image all sentinel, the mask of the elements' bytes, and the image uploaded. */
static void operand_finish(operand_t *o)
{
    const size_t es = rudnn_dtype_size(o->t.dtype);
    o->image = rt_xmalloc(o->bytes);
    rt_poison_host(o->t.dtype, o->image, o->bytes);
    o->mask = rt_xcalloc(o->bytes, 1);
    for (int64_t i = 0; i < o->numel; i++)
        memset(element_at(o, o->mask, i), 1, es);
    rt_assert_status(rudnn_buffer_write(rt_queue, o->buf, 0, o->image, o->bytes), RUDNN_STATUS_SUCCESS);
}

void operand_init(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, const int64_t *strides,
                  size_t head)
{
    int64_t st[RUDNN_MAX_RANK];
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = strides ? strides[i] : s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
    operand_alloc(o, dt, rank, dims, st, head);
    rt_assert_status(rudnn_tensor_init(&o->t, o->buf, head * rudnn_dtype_size(dt), dt, rank, dims),
                     RUDNN_STATUS_SUCCESS);
    for (int i = 0; i < rank; i++)
        o->t.strides[i] = st[i];
    operand_finish(o);
}

void operand_init_layout(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, int layout, size_t head)
{
    int64_t strides[RUDNN_MAX_RANK];
    if (layout == OPERAND_PADDED) {
        int64_t s = 1;
        for (int i = rank - 1; i >= 0; i--) {
            strides[i] = s;
            s *= (dims[i] > 0 ? dims[i] : 1) + (rank == 1 ? 2 : i == rank - 1 ? 3 : 1);
        }
    } else if (layout == OPERAND_CLAST) {
        int64_t s = dims[1] > 0 ? dims[1] : 1;
        for (int i = rank - 1; i >= 2; i--) {
            strides[i] = s;
            s *= dims[i] > 0 ? dims[i] : 1;
        }
        strides[1] = 1, strides[0] = s;
    } else {
        operand_init(o, dt, rank, dims, NULL, head);
        return;
    }
    if (layout != OPERAND_CLAST) {
        operand_init(o, dt, rank, dims, strides, head);
        return;
    }
    /* channels-last through the library's own descriptor, which must agree */
    operand_alloc(o, dt, rank, dims, strides, head);
    rt_assert_status(rudnn_conv_channels_last(&o->t, o->buf, head * rudnn_dtype_size(dt), dt, rank, dims),
                     RUDNN_STATUS_SUCCESS);
    for (int i = 0; i < rank; i++)
        if (o->t.strides[i] != strides[i])
            fail_msg("rudnn_conv_channels_last: stride %d is %lld, expected %lld", i, (long long)o->t.strides[i],
                     (long long)strides[i]);
    operand_finish(o);
}

void operand_free(operand_t *o)
{
    if (o->buf)
        rudnn_buffer_destroy(o->buf);
    free(o->image), free(o->mask);
    memset(o, 0, sizeof *o);
}

void operand_poison(operand_t *o)
{
    rt_poison_host(o->t.dtype, o->image, o->bytes);
    rt_assert_status(rudnn_buffer_write(rt_queue, o->buf, 0, o->image, o->bytes), RUDNN_STATUS_SUCCESS);
}

void operand_upload(operand_t *o, const double *values)
{
    rt_poison_host(o->t.dtype, o->image, o->bytes);
    for (int64_t i = 0; i < o->numel; i++) {
        const float f = (float)values[i];
        rudnn_convert_from_f32(o->t.dtype, &f, element_at(o, o->image, i), 1);
    }
    rt_assert_status(rudnn_buffer_write(rt_queue, o->buf, 0, o->image, o->bytes), RUDNN_STATUS_SUCCESS);
}

void operand_upload_ints(operand_t *o, const int64_t *ints)
{
    rt_poison_host(o->t.dtype, o->image, o->bytes);
    for (int64_t i = 0; i < o->numel; i++) {
        uint8_t *e = element_at(o, o->image, i);
        if (o->t.dtype == RUDNN_I64) {
            memcpy(e, &ints[i], 8);
        } else {
            const int32_t v = (int32_t)ints[i];
            memcpy(e, &v, 4);
        }
    }
    rt_assert_status(rudnn_buffer_write(rt_queue, o->buf, 0, o->image, o->bytes), RUDNN_STATUS_SUCCESS);
}

uint8_t *operand_snapshot(const operand_t *o) { return rt_buffer_snapshot(o->buf, o->bytes); }

int operand_unchanged(const operand_t *o)
{
    uint8_t *now = operand_snapshot(o);
    const int same = memcmp(now, o->image, o->bytes) == 0;
    free(now);
    return same;
}

void operand_decode(const operand_t *o, const uint8_t *snap, float *values, int64_t *ints, int64_t *unwritten,
                    int64_t *outside)
{
    const size_t es = rudnn_dtype_size(o->t.dtype);
    *unwritten = 0, *outside = 0;
    for (int64_t i = 0; i < o->numel; i++) {
        const uint8_t *e = element_at(o, (uint8_t *)snap, i);
        if (es == 8) { /* I64: rt_poison_host's 0xa5 bytes */
            int64_t v;
            memcpy(&v, e, 8);
            *unwritten += (uint64_t)v == 0xa5a5a5a5a5a5a5a5ull;
            if (ints)
                ints[i] = v;
        } else {
            *unwritten += rt_element_bits(o->t.dtype, e, 0) == rt_poison_bits(o->t.dtype);
            if (values)
                values[i] = rt_element_value(o->t.dtype, e, 0);
        }
    }
    for (size_t b = 0; b < o->bytes; b++)
        *outside += !o->mask[b] && snap[b] != o->image[b];
}

int operand_check_written(rt_log_t *log, const char *what, const char *name, const operand_t *o,
                          const uint8_t *snap, float *values, int64_t *ints)
{
    int problems = 0;
    int64_t unwritten, outside;
    operand_decode(o, snap, values, ints, &unwritten, &outside);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s%s%s", what, name ? ": " : "", name ? name : "");
    if (unwritten) {
        rt_logf(log, "  %s: %lld of %lld element(s) never written (still the sentinel)\n", prefix,
                (long long)unwritten, (long long)o->numel);
        problems++;
    }
    if (outside) {
        rt_logf(log, "  %s: %lld byte(s) of its buffer outside its elements changed\n", prefix, (long long)outside);
        problems++;
    }
    return problems;
}

/* ---- tolerances and values ------------------------------------------------------------------- */

double rt_half_ulp(rudnn_dtype_t dt, double v)
{
    const int mant = dt == RUDNN_F32 ? 23 : dt == RUDNN_F16 ? 10 : 7;
    const int emin = dt == RUDNN_F16 ? -14 : -126;
    int e = 0;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    int E = e - 1;
    if (v == 0.0 || !isfinite(v) || E < emin)
        E = emin;
    return ldexp(1.0, E - mant - 1);
}

double rt_round_to(rudnn_dtype_t dt, double v)
{
    const float f = (float)v;
    if (dt == RUDNN_F32)
        return f;
    uint16_t h;
    float r;
    rudnn_convert_from_f32(dt, &f, &h, 1);
    rudnn_convert_to_f32(dt, &h, &r, 1);
    return r;
}

double *rt_random_values(rt_rng_t *rng, rudnn_dtype_t dt, int64_t n)
{
    double *v = rt_xmalloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = rt_round_to(dt, rt_rng_uniform(rng, -1, 1));
    return v;
}

int rt_mentions(const char *text, const char *needle)
{
    const size_t n = strlen(needle);
    for (const char *p = text; p && *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* ---- a backend without the family ------------------------------------------------------------ */

int rt_on_opencl(void)
{
    rudnn_device_info_t info;
    return rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS && strcmp(info.backend, "opencl") == 0;
}

int rt_family_absent_exit(int ok, const char *family, const char *kernels, const char *checked, const char *why,
                          const char *detail)
{
    const int on_opencl = rt_on_opencl();
    if (on_opencl || !ok) {
        printf("backend %s: FAILED: %s %s kernels%s%s%s%s\n", rt_requested_backend(),
               on_opencl ? "the opencl plugin has no" : "wrong answer without", kernels,
               on_opencl ? " (NOT_SUPPORTED)" : "", detail ? " (" : on_opencl ? "" : " (see above)",
               detail ? detail : "", detail ? ")" : "");
        rt_close();
        return 1;
    }
    /* the plugin has no kernels for the family (CUDA and HIP in this release): nothing to test */
    printf("backend %s: SKIPPED (%s: NOT_SUPPORTED, checked for %s: %s)\n", rt_requested_backend(), family, checked,
           why);
    fflush(stdout);
    rt_close();
    return RT_EXIT_SKIP;
}

/* ---- a contract suite's checks --------------------------------------------------------------- */

rt_log_t *rt_test_log;

int rt_test_log_setup(void **state)
{
    (void)state;
    rt_test_log = rt_log_new();
    return 0;
}

int rt_test_log_teardown(void **state)
{
    (void)state;
    rt_log_finish_free(rt_test_log, "check(s)");
    rt_test_log = NULL;
    return 0;
}

void rt_failf(const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rt_logf(rt_test_log, "  %s\n", line);
    rt_test_log->failures++;
}

void rt_reshape(rudnn_tensor_t *t, int rank, const int64_t *dims)
{
    t->rank = rank;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->dims[i] = dims[i];
        t->strides[i] = s;
        if (__builtin_mul_overflow(s, dims[i] > 0 ? dims[i] : 1, &s))
            s = 1;
    }
}

int rt_message_names(const char *msg, const char *op, const char *n1, const char *n2, const char *n3)
{
    const char *need[4] = {op, n1, n2, n3};
    for (int i = 0; i < 4 && need[i]; i++)
        if (!strstr(msg, need[i]))
            return 0;
    return 1;
}
