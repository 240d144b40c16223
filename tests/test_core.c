/* Core runtime tests: status names and the thread-local error, dtype metadata,
 * the RNE conversions f32 <-> f16 and f32 <-> bf16 (exhaustive over all 16-bit
 * patterns, and against an independent double-precision rounding model),
 * tensor descriptors and the version ("host" part, no backend needed); and on
 * the default backend ("backend" part, exits 77 when none is usable) buffers,
 * tensor I/O, the stride rule of rudnn/status.h, queues, events and device info, with
 * their error paths.
 *
 * Usage: test_core host|backend [glob] */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int initial_error_empty;

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- status ----------------------------------------------------------------------- */

static void test_last_error_starts_empty(void **state)
{
    (void)state;
    /* checked at the start of main, before any other rudnn call */
    assert_true(initial_error_empty);
}

static void test_status_strings(void **state)
{
    (void)state;
    static const struct {
        rudnn_status_t code;
        const char *name;
    } codes[] = {
        {RUDNN_STATUS_SUCCESS, "RUDNN_STATUS_SUCCESS"},
        {RUDNN_STATUS_BAD_PARAM, "RUDNN_STATUS_BAD_PARAM"},
        {RUDNN_STATUS_BAD_SHAPE, "RUDNN_STATUS_BAD_SHAPE"},
        {RUDNN_STATUS_BAD_DTYPE, "RUDNN_STATUS_BAD_DTYPE"},
        {RUDNN_STATUS_DEVICE_MISMATCH, "RUDNN_STATUS_DEVICE_MISMATCH"},
        {RUDNN_STATUS_OUT_OF_BOUNDS, "RUDNN_STATUS_OUT_OF_BOUNDS"},
        {RUDNN_STATUS_NOT_SUPPORTED, "RUDNN_STATUS_NOT_SUPPORTED"},
        {RUDNN_STATUS_ALLOC_FAILED, "RUDNN_STATUS_ALLOC_FAILED"},
        {RUDNN_STATUS_BACKEND_UNAVAILABLE, "RUDNN_STATUS_BACKEND_UNAVAILABLE"},
        {RUDNN_STATUS_ABI_MISMATCH, "RUDNN_STATUS_ABI_MISMATCH"},
        {RUDNN_STATUS_UNKNOWN_BACKEND, "RUDNN_STATUS_UNKNOWN_BACKEND"},
        {RUDNN_STATUS_DEVICE_ERROR, "RUDNN_STATUS_DEVICE_ERROR"},
        {RUDNN_STATUS_INTERNAL, "RUDNN_STATUS_INTERNAL"},
    };
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = rudnn_status_string(codes[i].code);
        assert_non_null(s);
        assert_string_equal(s, codes[i].name);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, rudnn_status_string(codes[j].code));
    }
    /* values that are not codes: a fixed, non-NULL name distinct from every code */
    const int unknown[] = {1, 99, 105, 201, 301, 403, 501, 901, 12345, -1};
    for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
        const char *s = rudnn_status_string((rudnn_status_t)unknown[k]);
        assert_non_null(s);
        assert_non_null(strstr(s, "UNKNOWN"));
        for (size_t i = 0; i < n; i++)
            assert_string_not_equal(s, codes[i].name);
    }
}

typedef struct thread_result {
    char seen_at_start[256];
    char own_error[256];
    rudnn_status_t st;
} thread_result_t;

static void *error_thread(void *arg)
{
    thread_result_t *r = arg;
    snprintf(r->seen_at_start, sizeof r->seen_at_start, "%s", rudnn_last_error());
    r->st = rudnn_tensor_init(NULL, NULL, 0, RUDNN_F32, 1, NULL);
    snprintf(r->own_error, sizeof r->own_error, "%s", rudnn_last_error());
    return NULL;
}

/* The message is per thread: one thread's failure neither shows in nor
 * clears another's. */
static void test_last_error_is_thread_local(void **state)
{
    (void)state;
    int64_t dims[1] = {-1};
    rudnn_tensor_t t;
    assert_int_equal(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 1, dims), RUDNN_STATUS_BAD_SHAPE);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", rudnn_last_error());
    assert_true(mine[0] != '\0');

    thread_result_t r;
    memset(&r, 0, sizeof r);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, error_thread, &r), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_string_equal(r.seen_at_start, "");
    assert_int_equal(r.st, RUDNN_STATUS_BAD_PARAM);
    assert_true(r.own_error[0] != '\0');
    assert_string_not_equal(r.own_error, mine);
    assert_string_equal(rudnn_last_error(), mine);
}

/* ---- dtypes ------------------------------------------------------------------------ */

static void test_dtype_metadata(void **state)
{
    (void)state;
    static const struct {
        rudnn_dtype_t dt;
        const char *name;
        size_t size;
        int is_float, is_quant;
    } table[] = {
        {RUDNN_F32, "f32", 4, 1, 0}, {RUDNN_F16, "f16", 2, 1, 0}, {RUDNN_BF16, "bf16", 2, 1, 0},
        {RUDNN_U32, "u32", 4, 0, 0}, {RUDNN_I32, "i32", 4, 0, 0}, {RUDNN_I64, "i64", 8, 0, 0},
        {RUDNN_I8, "i8", 1, 0, 1},   {RUDNN_I4, "i4", 0, 0, 1},  {RUDNN_BOOL, "bool", 1, 0, 0},
    };
    assert_int_equal(sizeof table / sizeof table[0], RUDNN_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        assert_string_equal(rudnn_dtype_name(table[i].dt), table[i].name);
        assert_int_equal(rudnn_dtype_size(table[i].dt), table[i].size);
        assert_int_equal(rudnn_dtype_is_float(table[i].dt), table[i].is_float);
        assert_int_equal(rudnn_dtype_is_quantized(table[i].dt), table[i].is_quant);
        if (table[i].dt != RUDNN_I4) {
            assert_int_equal(rudnn_dtype_storage_bytes(table[i].dt, 0), 0);
            assert_int_equal(rudnn_dtype_storage_bytes(table[i].dt, 7), 7 * table[i].size);
        }
    }
    /* I4: two per byte, rounded up */
    assert_int_equal(rudnn_dtype_storage_bytes(RUDNN_I4, 0), 0);
    assert_int_equal(rudnn_dtype_storage_bytes(RUDNN_I4, 1), 1);
    assert_int_equal(rudnn_dtype_storage_bytes(RUDNN_I4, 2), 1);
    assert_int_equal(rudnn_dtype_storage_bytes(RUDNN_I4, 3), 2);
    assert_int_equal(rudnn_dtype_storage_bytes(RUDNN_I4, 4097), 2049);
    /* invalid values */
    const int invalid[] = {RUDNN_DTYPE_COUNT, 99, -1};
    for (size_t i = 0; i < 3; i++) {
        rudnn_dtype_t dt = (rudnn_dtype_t)invalid[i];
        assert_string_equal(rudnn_dtype_name(dt), "invalid");
        assert_int_equal(rudnn_dtype_size(dt), 0);
        assert_int_equal(rudnn_dtype_is_float(dt), 0);
        assert_int_equal(rudnn_dtype_is_quantized(dt), 0);
    }
}

/* Independent decoders: the value of a 16-bit pattern computed with ldexp. */
static double decode_f16(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp(mant, -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

static double decode_bf16(uint16_t b)
{
    int sign = b >> 15, exp = (b >> 7) & 0xff, mant = b & 0x7f;
    double v;
    if (exp == 0)
        v = ldexp(mant, -133);
    else if (exp == 255)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(128 + mant, exp - 134);
    return sign ? -v : v;
}

static void test_f16_roundtrip_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = rudnn_f16_to_f32((uint16_t)h);
        double want = decode_f16((uint16_t)h);
        uint16_t back = rudnn_f32_to_f16(f);
        if (isnan(want)) {
            if (!isnan(f))
                fail_msg("f16 0x%04x is NaN but decodes to %g", h, (double)f);
            if ((back & 0x7c00) != 0x7c00 || !(back & 0x03ff) || !(back & 0x0200))
                fail_msg("f16 NaN 0x%04x -> f32 -> 0x%04x is not a quiet NaN", h, back);
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want))
            fail_msg("f16 0x%04x decodes to %.10g, want %.10g", h, (double)f, want);
        if (back != h)
            fail_msg("f16 0x%04x -> f32 %.10g -> f16 0x%04x (not identical)", h, (double)f, back);
    }
}

static void test_bf16_roundtrip_exhaustive(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = rudnn_bf16_to_f32((uint16_t)b);
        double want = decode_bf16((uint16_t)b);
        uint16_t back = rudnn_f32_to_bf16(f);
        if (isnan(want)) {
            if (!isnan(f))
                fail_msg("bf16 0x%04x is NaN but decodes to %g", b, (double)f);
            if ((back & 0x7f80) != 0x7f80 || !(back & 0x007f) || !(back & 0x0040))
                fail_msg("bf16 NaN 0x%04x -> f32 -> 0x%04x is not a quiet NaN", b, back);
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want))
            fail_msg("bf16 0x%04x decodes to %.10g, want %.10g", b, (double)f, want);
        if (f32_bits(f) != (b << 16))
            fail_msg("bf16 0x%04x -> f32 0x%08x, want 0x%08x", b, f32_bits(f), b << 16);
        if (back != b)
            fail_msg("bf16 0x%04x -> f32 -> bf16 0x%04x (not identical)", b, back);
    }
}

/* Rounding model: |v| rounded to a multiple of the quantum of its binade with
 * nearbyint (round-half-even in the default rounding mode), in double, where
 * the scaled value is exact. precision = significand bits including the
 * implicit one; min_exp = exponent of the smallest normal; overflow when the
 * rounded value reaches 2^(max_exp + 1). Returns the rounded magnitude. */
static double model_round(double a, int precision, int min_exp, int max_exp, int *overflow)
{
    *overflow = 0;
    if (a == 0.0)
        return 0.0;
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    int q_exp = (e - 1) - (precision - 1);
    if (q_exp < min_exp - (precision - 1))
        q_exp = min_exp - (precision - 1); /* subnormal range: fixed quantum */
    double r = nearbyint(ldexp(a, -q_exp));
    double v = ldexp(r, q_exp);
    if (v >= ldexp(1.0, max_exp + 1))
        *overflow = 1;
    return v;
}

static uint16_t model_f16(float value)
{
    uint16_t sign = signbit(value) ? 0x8000 : 0;
    if (isnan(value))
        return 0xffff; /* checked separately */
    if (isinf(value))
        return sign | 0x7c00;
    int overflow;
    double v = model_round(fabs((double)value), 11, -14, 15, &overflow);
    if (overflow)
        return sign | 0x7c00;
    if (v < ldexp(1.0, -14))
        return sign | (uint16_t)ldexp(v, 24); /* subnormal (or zero): v / 2^-24 */
    int e;
    double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
    uint16_t exp = (uint16_t)(e - 1 + 15);
    uint16_t mant = (uint16_t)(ldexp(m, 11) - 1024.0);
    return sign | (uint16_t)(exp << 10) | mant;
}

static uint16_t model_bf16(float value)
{
    uint16_t sign = signbit(value) ? 0x8000 : 0;
    if (isnan(value))
        return 0xffff;
    if (isinf(value))
        return sign | 0x7f80;
    int overflow;
    double v = model_round(fabs((double)value), 8, -126, 127, &overflow);
    if (overflow)
        return sign | 0x7f80;
    /* v has at most 8 significant bits inside float range: exact in float,
     * and its low 16 bits are zero */
    return sign | (uint16_t)(f32_bits((float)v) >> 16);
}

static void check_f16(float v)
{
    uint16_t got = rudnn_f32_to_f16(v);
    if (isnan(v)) {
        if ((got & 0x7c00) != 0x7c00 || !(got & 0x0200))
            fail_msg("f32 NaN 0x%08x -> f16 0x%04x is not a quiet NaN", f32_bits(v), got);
        return;
    }
    uint16_t want = model_f16(v);
    if (got != want)
        fail_msg("f32 %.10g (0x%08x) -> f16 0x%04x, want 0x%04x (RNE)", (double)v, f32_bits(v), got, want);
}

static void check_bf16(float v)
{
    uint16_t got = rudnn_f32_to_bf16(v);
    if (isnan(v)) {
        if ((got & 0x7f80) != 0x7f80 || !(got & 0x0040))
            fail_msg("f32 NaN 0x%08x -> bf16 0x%04x is not a quiet NaN", f32_bits(v), got);
        return;
    }
    uint16_t want = model_bf16(v);
    if (got != want)
        fail_msg("f32 %.10g (0x%08x) -> bf16 0x%04x, want 0x%04x (RNE)", (double)v, f32_bits(v), got, want);
}

/* f32 -> f16 against the model: every midpoint between neighbouring f16
 * values (ties, which must go to the even one) and the floats just around it,
 * then every f32 pattern whose low 13 bits are one of a few edge values
 * (exact, tie, just below and above a tie) or random, across all exponents. */
static void test_f32_to_f16_rounding(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (int s = 0; s < 2; s++) {
            double lo = decode_f16((uint16_t)h);
            double hi = h + 1 == 0x7c00 ? 65536.0 : decode_f16((uint16_t)(h + 1));
            float mid = (float)((lo + hi) / 2); /* exact: f16 midpoints fit in f32 */
            if (s)
                mid = -mid;
            check_f16(mid);
            check_f16(nextafterf(mid, INFINITY));
            check_f16(nextafterf(mid, -INFINITY));
        }
    }
    rt_rng_t rng;
    rt_rng_seed(&rng, rt_hash("f32_to_f16"));
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
    for (uint32_t high = 0; high < (1u << 19); high++) {
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
            check_f16(bits_f32((high << 13) | lows[k]));
        check_f16(bits_f32((high << 13) | (uint32_t)rt_rng_below(&rng, 1u << 13)));
    }
    /* named cases */
    assert_int_equal(rudnn_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(rudnn_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(rudnn_f32_to_f16(65520.0f), 0x7c00);  /* tie above the max rounds to inf */
    assert_int_equal(rudnn_f32_to_f16(1e10f), 0x7c00);
    assert_int_equal(rudnn_f32_to_f16(-1e10f), 0xfc00);
    assert_int_equal(rudnn_f32_to_f16(FLT_MAX), 0x7c00);
    assert_int_equal(rudnn_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(rudnn_f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(rudnn_f32_to_f16(0.0f), 0x0000);
    assert_int_equal(rudnn_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(rudnn_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(rudnn_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      /* tie -> even (down) */
    assert_int_equal(rudnn_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  /* tie -> even (up) */
    assert_int_equal(rudnn_f32_to_f16(0x1p-14f), 0x0400);             /* smallest normal */
    assert_int_equal(rudnn_f32_to_f16(0x1p-24f), 0x0001);             /* smallest subnormal */
    assert_int_equal(rudnn_f32_to_f16(0x1p-25f), 0x0000);             /* tie with 0 -> 0 */
    assert_int_equal(rudnn_f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    assert_int_equal(rudnn_f32_to_f16(3 * 0x1p-25f), 0x0002);         /* tie 1|2 -> 2 */
    assert_int_equal(rudnn_f32_to_f16(-3 * 0x1p-25f), 0x8002);
    assert_int_equal(rudnn_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);  /* tie 0x3ff|0x400 -> 0x400 */
    assert_int_equal(rudnn_f32_to_f16(1e-30f), 0x0000);
    assert_int_equal(rudnn_f32_to_f16(bits_f32(0x00000001)), 0x0000); /* f32 denormal */
    /* NaNs, including payloads that live only in the bits f16 drops */
    const uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa5a5a5, 0x7f801000};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = rudnn_f32_to_f16(bits_f32(nans[i]));
        if ((h & 0x7c00) != 0x7c00 || !(h & 0x0200))
            fail_msg("f32 NaN 0x%08x -> f16 0x%04x is not a quiet NaN", nans[i], h);
    }
}

static void test_f32_to_bf16_rounding(void **state)
{
    (void)state;
    /* every f32 pattern with low 16 bits at the edges (exact, just above 0,
     * just below / at / just above the tie, all ones) or random: covers every
     * bf16 binade, ties to even, overflow to inf, subnormals */
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    rt_rng_t rng;
    rt_rng_seed(&rng, rt_hash("f32_to_bf16"));
    for (uint32_t high = 0; high < 65536; high++) {
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
            check_bf16(bits_f32((high << 16) | lows[k]));
        for (int k = 0; k < 4; k++)
            check_bf16(bits_f32((high << 16) | (uint32_t)rt_rng_below(&rng, 65536)));
    }
    assert_int_equal(rudnn_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(rudnn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie -> even (down) */
    assert_int_equal(rudnn_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie -> even (up) */
    assert_int_equal(rudnn_f32_to_bf16(FLT_MAX), 0x7f80);            /* rounds to inf */
    assert_int_equal(rudnn_f32_to_bf16(-FLT_MAX), 0xff80);
    assert_int_equal(rudnn_f32_to_bf16(bits_f32(0x7f7f7fff)), 0x7f7f);
    assert_int_equal(rudnn_f32_to_bf16(bits_f32(0x7f7f8000)), 0x7f80); /* tie with max -> inf (even) */
    assert_int_equal(rudnn_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(rudnn_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(rudnn_f32_to_bf16(bits_f32(0x00008000)), 0x0000); /* subnormal tie -> 0 */
    assert_int_equal(rudnn_f32_to_bf16(bits_f32(0x00018000)), 0x0002); /* subnormal tie -> even */
    /* a NaN whose payload is only in the dropped bits must not become inf */
    const uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa5a5a5, 0x7f80ffff};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t b = rudnn_f32_to_bf16(bits_f32(nans[i]));
        if ((b & 0x7f80) != 0x7f80 || !(b & 0x0040))
            fail_msg("f32 NaN 0x%08x -> bf16 0x%04x is not a quiet NaN", nans[i], b);
    }
}

static void test_convert_arrays(void **state)
{
    (void)state;
    enum { N = 1031 };
    float src[N], back[N];
    uint16_t half[N];
    rt_rng_t rng;
    rt_rng_seed(&rng, rt_hash("convert_arrays"));
    for (int i = 0; i < N; i++)
        src[i] = bits_f32((uint32_t)rt_rng_next(&rng));
    src[0] = NAN;
    src[1] = INFINITY;
    src[2] = -0.0f;
    /* F32: a copy */
    float f32_out[N];
    rudnn_convert_from_f32(RUDNN_F32, src, f32_out, N);
    assert_memory_equal(f32_out, src, sizeof src);
    rudnn_convert_to_f32(RUDNN_F32, f32_out, back, N);
    assert_memory_equal(back, src, sizeof src);
    /* F16 and BF16: the scalar conversions, element by element */
    rudnn_convert_from_f32(RUDNN_F16, src, half, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(half[i], rudnn_f32_to_f16(src[i]));
    rudnn_convert_to_f32(RUDNN_F16, half, back, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(f32_bits(back[i]), f32_bits(rudnn_f16_to_f32(half[i])));
    rudnn_convert_from_f32(RUDNN_BF16, src, half, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(half[i], rudnn_f32_to_bf16(src[i]));
    rudnn_convert_to_f32(RUDNN_BF16, half, back, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(f32_bits(back[i]), f32_bits(rudnn_bf16_to_f32(half[i])));
    /* n = 0 touches nothing */
    rudnn_convert_from_f32(RUDNN_F16, src, NULL, 0);
    rudnn_convert_to_f32(RUDNN_BF16, NULL, back, 0);
}

/* ---- tensors and version ---------------------------------------------------------- */

static void test_tensor_init(void **state)
{
    (void)state;
    rudnn_tensor_t t;
    int64_t dims[RUDNN_MAX_RANK + 1] = {2, 3, 4, 1, 1, 1, 1, 1, 1};

    rt_assert_status(rudnn_tensor_init(NULL, NULL, 0, RUDNN_F32, 2, dims), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("tensor_init", "tensor");
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, RUDNN_MAX_RANK + 1, dims), RUDNN_STATUS_BAD_SHAPE);
    rt_assert_error_mentions("tensor_init", "rank");
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, -1, dims), RUDNN_STATUS_BAD_SHAPE);
    rt_assert_error_mentions("tensor_init", "rank");
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 2, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("tensor_init", "dims");
    int64_t neg[3] = {2, -3, 4};
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 3, neg), RUDNN_STATUS_BAD_SHAPE);
    rt_assert_error_mentions("tensor_init", "dims");
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, (rudnn_dtype_t)99, 3, dims), RUDNN_STATUS_BAD_DTYPE);
    rt_assert_error_mentions("tensor_init", "dtype");

    /* success clears the message; row-major strides */
    rt_assert_status(rudnn_tensor_init(&t, NULL, 12, RUDNN_F16, 3, dims), RUDNN_STATUS_SUCCESS);
    assert_string_equal(rudnn_last_error(), "");
    assert_int_equal(t.dtype, RUDNN_F16);
    assert_int_equal(t.rank, 3);
    assert_int_equal(t.offset, 12);
    assert_null(t.buffer);
    assert_int_equal(t.dims[0], 2);
    assert_int_equal(t.dims[1], 3);
    assert_int_equal(t.dims[2], 4);
    assert_int_equal(t.strides[0], 12);
    assert_int_equal(t.strides[1], 4);
    assert_int_equal(t.strides[2], 1);
    assert_int_equal(rudnn_tensor_numel(&t), 24);
    assert_int_equal(rudnn_tensor_bytes(&t), 48);
    assert_true(rudnn_tensor_is_contiguous(&t));
    t.strides[0] = 13; /* padded rows */
    assert_false(rudnn_tensor_is_contiguous(&t));
    t.strides[0] = 12;
    t.strides[1] = 1; /* transposed inner pair */
    t.strides[2] = 3;
    assert_false(rudnn_tensor_is_contiguous(&t));

    /* rank 8 */
    int64_t d8[RUDNN_MAX_RANK] = {2, 1, 3, 1, 2, 1, 1, 5};
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, RUDNN_MAX_RANK, d8), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_tensor_numel(&t), 60);
    assert_int_equal(t.strides[RUDNN_MAX_RANK - 1], 1);
    assert_int_equal(t.strides[0], 30);
    assert_true(rudnn_tensor_is_contiguous(&t));

    /* rank 0: one element */
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 0, NULL), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_tensor_numel(&t), 1);
    assert_int_equal(rudnn_tensor_bytes(&t), 4);
    assert_true(rudnn_tensor_is_contiguous(&t));

    /* a zero dim: no elements, no bytes */
    int64_t z[3] = {2, 0, 3};
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_BF16, 3, z), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_tensor_numel(&t), 0);
    assert_int_equal(rudnn_tensor_bytes(&t), 0);

    /* I4 bytes round up; I64 */
    int64_t five[1] = {5};
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_I4, 1, five), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_tensor_bytes(&t), 3);
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_I64, 1, five), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_tensor_bytes(&t), 40);

    /* NULL descriptors in the helpers do not crash */
    assert_int_equal(rudnn_tensor_numel(NULL), 0);
    assert_int_equal(rudnn_tensor_bytes(NULL), 0);
    assert_false(rudnn_tensor_is_contiguous(NULL));
}

/* tensor_init promises a contiguous row-major descriptor, empty or not: the
 * ops check contiguity with rudnn_tensor_is_contiguous, so the two must agree
 * for shapes with a zero dim too. */
static void test_tensor_init_empty_is_contiguous(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{2, 0, 3}, {4, 0, 0}, {0, 5, 7}, {3, 5, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rudnn_tensor_t t;
        rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 3, shapes[i]), RUDNN_STATUS_SUCCESS);
        if (!rudnn_tensor_is_contiguous(&t))
            fail_msg("tensor_init [%lld, %lld, %lld] gives strides [%lld, %lld, %lld], which "
                     "rudnn_tensor_is_contiguous rejects",
                     (long long)shapes[i][0], (long long)shapes[i][1], (long long)shapes[i][2],
                     (long long)t.strides[0], (long long)t.strides[1], (long long)t.strides[2]);
    }
    int64_t z2[2] = {4, 0};
    rudnn_tensor_t t;
    rt_assert_status(rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 2, z2), RUDNN_STATUS_SUCCESS);
    assert_true(rudnn_tensor_is_contiguous(&t));
}

/* Dims whose product overflows int64: no undefined behaviour in the stride
 * computation (the UBSan build turns it into a failure); either rejected as
 * BAD_SHAPE or accepted (the ops reject the element count later). */
static void test_tensor_init_overflow(void **state)
{
    (void)state;
    rudnn_tensor_t t;
    int64_t huge[3] = {(int64_t)1 << 62, 4, 8};
    rudnn_status_t st = rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 3, huge);
    assert_true(st == RUDNN_STATUS_SUCCESS || st == RUDNN_STATUS_BAD_SHAPE);
    int64_t huge2[2] = {INT64_MAX, INT64_MAX};
    st = rudnn_tensor_init(&t, NULL, 0, RUDNN_F32, 2, huge2);
    assert_true(st == RUDNN_STATUS_SUCCESS || st == RUDNN_STATUS_BAD_SHAPE);
    /* the helpers must not overflow either */
    if (st == RUDNN_STATUS_SUCCESS)
        (void)rudnn_tensor_is_contiguous(&t);
}

/* The helpers take hand-filled descriptors: a rank outside 0..8 reads no dim past dims[7]
 * (fuzz_moe found rank 9 read dims[8]); such a descriptor has no elements and no layout.
 * strides[0] follows dims[7] in memory: a read past the dims would count it. */
static void test_tensor_helpers_bad_rank(void **state)
{
    (void)state;
    rudnn_tensor_t t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < RUDNN_MAX_RANK; i++) {
        t.dims[i] = 1;
        t.strides[i] = 7;
    }
    static const int ranks[] = {RUDNN_MAX_RANK + 1, -1, INT32_MIN};
    for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
        t.rank = ranks[k];
        assert_int_equal(rudnn_tensor_numel(&t), 0);
        assert_int_equal(rudnn_tensor_bytes(&t), 0);
        assert_false(rudnn_tensor_is_contiguous(&t));
    }
}

static void test_version(void **state)
{
    (void)state;
    assert_non_null(rudnn_version());
    assert_string_equal(rudnn_version(), RUDNN_VERSION_STRING);
    char expect[64];
    snprintf(expect, sizeof expect, "%d.%d.%d", RUDNN_VERSION_MAJOR, RUDNN_VERSION_MINOR, RUDNN_VERSION_PATCH);
    assert_string_equal(rudnn_version(), expect);
}

/* ---- on the default backend --------------------------------------------------------- */

static void fill_pattern(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7u);
}

static void read_all(rudnn_buffer_t b, uint8_t *host, size_t n)
{
    rt_assert_status(rudnn_buffer_read(rt_queue, b, 0, host, n), RUDNN_STATUS_SUCCESS);
}

static void test_buffer_roundtrip(void **state)
{
    (void)state;
    enum { N = 1024 };
    rudnn_buffer_t a = NULL, b = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, N, &a), RUDNN_STATUS_SUCCESS);
    assert_string_equal(rudnn_last_error(), "");
    rt_assert_status(rudnn_buffer_create(rt_ctx, N, &b), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_buffer_size(a), N);
    assert_ptr_equal(rudnn_buffer_context(a), rt_ctx);

    uint8_t src[N], got[N], want[N];
    fill_pattern(src, N, 3);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, 0, src, N), RUDNN_STATUS_SUCCESS);
    read_all(a, got, N);
    assert_memory_equal(got, src, N);

    /* a partial write at an odd offset */
    uint8_t part[50];
    fill_pattern(part, sizeof part, 100);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, 101, part, sizeof part), RUDNN_STATUS_SUCCESS);
    memcpy(want, src, N);
    memcpy(want + 101, part, sizeof part);
    read_all(a, got, N);
    assert_memory_equal(got, want, N);
    /* a partial read */
    uint8_t small[60];
    rt_assert_status(rudnn_buffer_read(rt_queue, a, 97, small, sizeof small), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(small, want + 97, sizeof small);

    /* device copy between buffers, offsets on both sides */
    uint8_t zero[N];
    memset(zero, 0, N);
    rt_assert_status(rudnn_buffer_write(rt_queue, b, 0, zero, N), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, 33, a, 200, 500), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_all(b, got, N);
    uint8_t want_b[N];
    memset(want_b, 0, N);
    memcpy(want_b + 33, want + 200, 500);
    assert_memory_equal(got, want_b, N);
    /* a copy within one buffer, disjoint ranges */
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, 600, b, 33, 100), RUDNN_STATUS_SUCCESS);
    memcpy(want_b + 600, want_b + 33, 100);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_all(b, got, N);
    assert_memory_equal(got, want_b, N);

    /* fill a range */
    rt_assert_status(rudnn_buffer_fill(rt_queue, b, 5, 0xc3, 77), RUDNN_STATUS_SUCCESS);
    memset(want_b + 5, 0xc3, 77);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_all(b, got, N);
    assert_memory_equal(got, want_b, N);
    /* fill of an odd length at an odd offset, to the very end */
    rt_assert_status(rudnn_buffer_fill(rt_queue, b, N - 3, 0x5a, 3), RUDNN_STATUS_SUCCESS);
    memset(want_b + N - 3, 0x5a, 3);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_all(b, got, N);
    assert_memory_equal(got, want_b, N);

    /* zero-byte operations at the end are valid and change nothing */
    rt_assert_status(rudnn_buffer_write(rt_queue, a, N, src, 0), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_read(rt_queue, a, N, got, 0), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, N, a, 0, 0), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_fill(rt_queue, b, N, 0, 0), RUDNN_STATUS_SUCCESS);
    read_all(b, got, N);
    assert_memory_equal(got, want_b, N);

    rudnn_buffer_destroy(a);
    rudnn_buffer_destroy(b);
}

static void test_buffer_errors(void **state)
{
    (void)state;
    enum { N = 256 };
    rudnn_buffer_t a = NULL, b = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, N, &a), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_create(rt_ctx, N, &b), RUDNN_STATUS_SUCCESS);
    uint8_t init_a[N], init_b[N], got[N], host[2 * N];
    fill_pattern(init_a, N, 1);
    fill_pattern(init_b, N, 2);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, 0, init_a, N), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_write(rt_queue, b, 0, init_b, N), RUDNN_STATUS_SUCCESS);
    fill_pattern(host, sizeof host, 9);

    /* writes past the end: OUT_OF_BOUNDS, nothing written */
    rt_assert_status(rudnn_buffer_write(rt_queue, a, N - 100, host, 101), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_error_mentions("buffer_write");
    rt_assert_status(rudnn_buffer_write(rt_queue, a, N + 1, host, 0), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, 0, host, N + 1), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, SIZE_MAX, host, 2), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, 8, host, SIZE_MAX - 4), RUDNN_STATUS_OUT_OF_BOUNDS);
    read_all(a, got, N);
    assert_memory_equal(got, init_a, N);

    /* reads past the end: OUT_OF_BOUNDS, host untouched */
    uint8_t guard[2 * N];
    memcpy(guard, host, sizeof host);
    rt_assert_status(rudnn_buffer_read(rt_queue, a, N - 10, host, 11), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_error_mentions("buffer_read");
    rt_assert_status(rudnn_buffer_read(rt_queue, a, 0, host, 2 * N), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_status(rudnn_buffer_read(rt_queue, a, SIZE_MAX, host, 1), RUDNN_STATUS_OUT_OF_BOUNDS);
    assert_memory_equal(host, guard, sizeof host);

    /* copies past the end of src or dst; partially overlapping copy */
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, 0, a, N - 10, 20), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_error_mentions("buffer_copy", "src");
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, N - 10, a, 0, 20), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_error_mentions("buffer_copy", "dst");
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, 0, a, SIZE_MAX - 1, 4), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_status(rudnn_buffer_copy(rt_queue, b, 10, b, 0, 20), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("buffer_copy", "overlap");
    /* fill past the end */
    rt_assert_status(rudnn_buffer_fill(rt_queue, b, N - 1, 0xee, 2), RUDNN_STATUS_OUT_OF_BOUNDS);
    rt_assert_error_mentions("buffer_fill");
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_all(a, got, N);
    assert_memory_equal(got, init_a, N);
    read_all(b, got, N);
    assert_memory_equal(got, init_b, N);

    /* NULL arguments */
    rt_assert_status(rudnn_buffer_write(NULL, a, 0, host, 4), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("queue");
    rt_assert_status(rudnn_buffer_write(rt_queue, NULL, 0, host, 4), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_buffer_write(rt_queue, a, 0, NULL, 4), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("host");
    rt_assert_status(rudnn_buffer_read(rt_queue, a, 0, NULL, 4), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_buffer_copy(rt_queue, NULL, 0, a, 0, 4), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_buffer_copy(rt_queue, a, 0, NULL, 0, 4), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_buffer_fill(NULL, a, 0, 0, 4), RUDNN_STATUS_BAD_PARAM);
    rudnn_buffer_t none = NULL;
    rt_assert_status(rudnn_buffer_create(NULL, 16, &none), RUDNN_STATUS_BAD_PARAM);
    assert_null(none);
    rt_assert_status(rudnn_buffer_create(rt_ctx, 16, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_buffer_create(rt_ctx, 0, &none), RUDNN_STATUS_BAD_PARAM);
    assert_null(none);
    assert_int_equal(rudnn_buffer_size(NULL), 0);
    assert_null(rudnn_buffer_context(NULL));
    rudnn_buffer_destroy(NULL);

    /* buffers of another context */
    rudnn_context_t ctx2 = NULL;
    rudnn_queue_t q2 = NULL;
    rudnn_buffer_t c = NULL;
    rt_assert_status(rudnn_context_create(&ctx2, NULL), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_queue_create(ctx2, &q2), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_create(ctx2, N, &c), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_write(rt_queue, c, 0, host, 4), RUDNN_STATUS_DEVICE_MISMATCH);
    rt_assert_error_mentions("buffer_write");
    rt_assert_status(rudnn_buffer_copy(rt_queue, a, 0, c, 0, 4), RUDNN_STATUS_DEVICE_MISMATCH);
    rt_assert_status(rudnn_buffer_copy(q2, c, 0, a, 0, 4), RUDNN_STATUS_DEVICE_MISMATCH);
    rt_assert_status(rudnn_buffer_fill(q2, a, 0, 1, 4), RUDNN_STATUS_DEVICE_MISMATCH);
    rt_assert_status(rudnn_buffer_read(q2, a, 0, host, 4), RUDNN_STATUS_DEVICE_MISMATCH);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_all(a, got, N);
    assert_memory_equal(got, init_a, N);
    rudnn_buffer_destroy(c);
    rudnn_queue_destroy(q2);
    rudnn_context_destroy(ctx2);

    rudnn_buffer_destroy(a);
    rudnn_buffer_destroy(b);
}

static void test_tensor_io(void **state)
{
    (void)state;
    int64_t dims[2] = {3, 5};
    rudnn_buffer_t buf = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, 64, &buf), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t t;
    rt_assert_status(rudnn_tensor_init(&t, buf, 6, RUDNN_F16, 2, dims), RUDNN_STATUS_SUCCESS);
    uint16_t in[15], out[15];
    for (int i = 0; i < 15; i++)
        in[i] = rudnn_f32_to_f16((float)i - 7.5f);
    rt_assert_status(rudnn_tensor_write(rt_queue, &t, in, sizeof in), RUDNN_STATUS_SUCCESS);
    memset(out, 0, sizeof out);
    rt_assert_status(rudnn_tensor_read(rt_queue, &t, out, sizeof out), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(out, in, sizeof in);
    /* it landed at byte offset 6 */
    uint8_t raw[64];
    rt_assert_status(rudnn_buffer_read(rt_queue, buf, 0, raw, sizeof raw), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(raw + 6, in, sizeof in);

    /* wrong byte counts, NULLs, strided views, out of range */
    rt_assert_status(rudnn_tensor_write(rt_queue, &t, in, sizeof in - 2), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("tensor_write");
    rt_assert_status(rudnn_tensor_read(rt_queue, &t, out, sizeof out + 2), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("tensor_read");
    rt_assert_status(rudnn_tensor_write(rt_queue, &t, NULL, sizeof in), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_tensor_read(NULL, &t, out, sizeof out), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_tensor_read(rt_queue, NULL, out, sizeof out), RUDNN_STATUS_BAD_PARAM);
    rudnn_tensor_t strided = t; /* padded rows inside the buffer: a valid view (test_strides) */
    strided.strides[0] = 6;
    rt_assert_status(rudnn_tensor_write(rt_queue, &strided, in, sizeof in), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_error_mentions("contiguous");
    rudnn_tensor_t far;
    rt_assert_status(rudnn_tensor_init(&far, buf, 40, RUDNN_F16, 2, dims), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_write(rt_queue, &far, in, sizeof in), RUDNN_STATUS_OUT_OF_BOUNDS);
    uint8_t raw2[64];
    rt_assert_status(rudnn_buffer_read(rt_queue, buf, 0, raw2, sizeof raw2), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(raw2, raw, sizeof raw);
    rudnn_buffer_destroy(buf);
}

/* The stride rule of rudnn/status.h, through an op (rms_norm: rudnn_check_tensor) and through
 * tensor I/O (rudnn_tensor_write), which must agree: strides that describe no view are
 * BAD_SHAPE, a view past the end of its buffer OUT_OF_BOUNDS, a valid view that is not
 * contiguous NOT_SUPPORTED; the strides of size-1 dims and of empty tensors are not looked at.
 * No rejected call writes its output. */
static void test_strides(void **state)
{
    (void)state;
    enum { R = 4, C = 8, XBYTES = 1024 }; /* x [4, 8] f32 in a 256-element buffer */
    static const struct {
        int64_t s0, s1;
        rudnn_status_t want;
        const char *says; /* in the message */
        const char *what;
    } cases[] = {
        {16, 1, RUDNN_STATUS_NOT_SUPPORTED, "contiguous", "padded rows (stride 16 > 8)"},
        {1, R, RUDNN_STATUS_NOT_SUPPORTED, "contiguous", "transpose (strides [1, 4])"},
        {2 * C, 2, RUDNN_STATUS_NOT_SUPPORTED, "contiguous", "every other column (strides [16, 2])"},
        {100, 1, RUDNN_STATUS_OUT_OF_BOUNDS, "buffer has 1024 bytes", "padded rows past the buffer"},
        {INT64_MAX, 1, RUDNN_STATUS_OUT_OF_BOUNDS, "more bytes than any buffer", "stride INT64_MAX"},
        {-C, 1, RUDNN_STATUS_BAD_SHAPE, "must be positive", "negative row stride"},
        {C, -1, RUDNN_STATUS_BAD_SHAPE, "must be positive", "negative column stride"},
        {0, 1, RUDNN_STATUS_BAD_SHAPE, "must be positive", "zero row stride (broadcast rows)"},
        {C / 2, 1, RUDNN_STATUS_BAD_SHAPE, "overlapping", "rows overlapping by half"},
        {1, 1, RUDNN_STATUS_BAD_SHAPE, "overlapping", "equal strides"},
        {3, 2, RUDNN_STATUS_BAD_SHAPE, "overlapping", "interleaved strides [3, 2]"},
    };
    rudnn_buffer_t bx = NULL, bg = NULL, by = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, XBYTES, &bx), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_create(rt_ctx, C * sizeof(float), &bg), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_create(rt_ctx, R * C * sizeof(float), &by), RUDNN_STATUS_SUCCESS);
    uint8_t pattern[R * C * sizeof(float)], after[sizeof pattern];
    memset(pattern, 0xa5, sizeof pattern);
    rt_assert_status(rudnn_buffer_write(rt_queue, by, 0, pattern, sizeof pattern), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_write(rt_queue, bx, 0, pattern, sizeof pattern), RUDNN_STATUS_SUCCESS);
    const int64_t dims[2] = {R, C}, gdims[1] = {C};
    rudnn_tensor_t x, g, y;
    rt_assert_status(rudnn_tensor_init(&x, bx, 0, RUDNN_F32, 2, dims), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_init(&g, bg, 0, RUDNN_F32, 1, gdims), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_init(&y, by, 0, RUDNN_F32, 2, dims), RUDNN_STATUS_SUCCESS);
    float host[R * C] = {0};

    int bad = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rudnn_tensor_t v = x;
        v.strides[0] = cases[k].s0;
        v.strides[1] = cases[k].s1;
        for (int path = 0; path < 2; path++) {
            rudnn_status_t st = path ? rudnn_tensor_write(rt_queue, &v, host, sizeof host)
                                     : rudnn_rms_norm(rt_queue, &v, &g, 1e-6f, &y);
            const char *msg = rudnn_last_error();
            const char *who = path ? "tensor_write" : "rms_norm";
            if (st != cases[k].want || !strstr(msg, cases[k].says) || !strstr(msg, who)) {
                fprintf(stderr, "%s, %s: got %s \"%s\", expected %s mentioning \"%s\"\n", who,
                        cases[k].what, rudnn_status_string(st), msg, rudnn_status_string(cases[k].want),
                        cases[k].says);
                bad++;
            }
        }
    }
    /* strides never used: dims of size 1, empty tensors */
    const int64_t one_row[2] = {1, C}, empty[2] = {0, C};
    rudnn_tensor_t v;
    rt_assert_status(rudnn_tensor_init(&v, bx, 0, RUDNN_F32, 2, one_row), RUDNN_STATUS_SUCCESS);
    v.strides[0] = -5;
    rt_assert_status(rudnn_tensor_write(rt_queue, &v, host, C * sizeof(float)), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_init(&v, bx, 0, RUDNN_F32, 2, empty), RUDNN_STATUS_SUCCESS);
    v.strides[0] = 0;
    v.strides[1] = -1;
    rt_assert_status(rudnn_tensor_write(rt_queue, &v, host, 0), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_rms_norm(rt_queue, &v, &g, 1e-6f, &v), RUDNN_STATUS_SUCCESS);

    /* nothing rejected wrote y; only the one-row write touched x (its first row) */
    rt_assert_status(rudnn_buffer_read(rt_queue, by, 0, after, sizeof after), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(after, pattern, sizeof pattern);
    rt_assert_status(rudnn_buffer_read(rt_queue, bx, 0, after, sizeof after), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(after + C * sizeof(float), pattern + C * sizeof(float),
                        sizeof pattern - C * sizeof(float));
    rudnn_buffer_destroy(bx);
    rudnn_buffer_destroy(bg);
    rudnn_buffer_destroy(by);
    if (bad)
        fail_msg("%d stride case(s) got the wrong status or message (above)", bad);
}

static void test_context_queue_event(void **state)
{
    (void)state;
    rt_assert_status(rudnn_context_create(NULL, NULL), RUDNN_STATUS_BAD_PARAM);
    assert_true(rudnn_last_error()[0] != '\0');

    rudnn_device_info_t info;
    rt_assert_status(rudnn_context_device_info(rt_ctx, &info), RUDNN_STATUS_SUCCESS);
    assert_true(strcmp(info.backend, "cuda") == 0 || strcmp(info.backend, "hip") == 0 ||
                strcmp(info.backend, "opencl") == 0);
    assert_true(info.name[0] != '\0');
    assert_true(info.global_memory_bytes > 0);
    assert_true(info.compute_units > 0);
    assert_true(info.max_group_size > 0);
    assert_true(info.plane_width_min <= info.plane_width_max);
    assert_true(info.index >= 0);
    rt_assert_status(rudnn_context_device_info(NULL, &info), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_context_device_info(rt_ctx, NULL), RUDNN_STATUS_BAD_PARAM);

    assert_ptr_equal(rudnn_queue_context(rt_queue), rt_ctx);
    assert_null(rudnn_queue_context(NULL));
    rudnn_queue_t q = NULL;
    rt_assert_status(rudnn_queue_create(rt_ctx, &q), RUDNN_STATUS_SUCCESS);
    rudnn_queue_t q_bad = NULL;
    rt_assert_status(rudnn_queue_create(NULL, &q_bad), RUDNN_STATUS_BAD_PARAM);
    assert_null(q_bad);
    rt_assert_status(rudnn_queue_create(rt_ctx, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_queue_synchronize(NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_queue_synchronize(q), RUDNN_STATUS_SUCCESS);
    /* the runtime's queue object: one per queue, stable, none for NULL */
    assert_null(rudnn_queue_native_handle(NULL));
    assert_non_null(rudnn_queue_native_handle(q));
    assert_ptr_equal(rudnn_queue_native_handle(q), rudnn_queue_native_handle(q));
    assert_ptr_not_equal(rudnn_queue_native_handle(q), rudnn_queue_native_handle(rt_queue));

    rudnn_event_t e0 = NULL, e1 = NULL;
    rt_assert_status(rudnn_event_create(rt_ctx, &e0), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_create(rt_ctx, &e1), RUDNN_STATUS_SUCCESS);
    rudnn_buffer_t buf = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, 1 << 20, &buf), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_record(e0, q), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_fill(q, buf, 0, 7, 1 << 20), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_record(e1, q), RUDNN_STATUS_SUCCESS);
    float ms = -1.0f;
    rt_assert_status(rudnn_event_elapsed_ms(e0, e1, &ms), RUDNN_STATUS_SUCCESS);
    assert_true(ms >= 0.0f && isfinite(ms));
    rt_assert_status(rudnn_event_elapsed_ms(e0, e1, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_event_elapsed_ms(NULL, e1, &ms), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_event_record(NULL, q), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_event_record(e0, NULL), RUDNN_STATUS_BAD_PARAM);
    rudnn_event_t e_bad = NULL;
    rt_assert_status(rudnn_event_create(NULL, &e_bad), RUDNN_STATUS_BAD_PARAM);
    assert_null(e_bad);

    /* an event of another context */
    rudnn_context_t ctx2 = NULL;
    rudnn_event_t e2 = NULL;
    rt_assert_status(rudnn_context_create(&ctx2, NULL), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_create(ctx2, &e2), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_record(e2, q), RUDNN_STATUS_DEVICE_MISMATCH);
    rt_assert_status(rudnn_event_elapsed_ms(e0, e2, &ms), RUDNN_STATUS_DEVICE_MISMATCH);
    rudnn_event_destroy(e2);
    rudnn_context_destroy(ctx2);

    rudnn_buffer_destroy(buf);
    rudnn_event_destroy(e0);
    rudnn_event_destroy(e1);
    rudnn_queue_destroy(q);
    rudnn_event_destroy(NULL);
    rudnn_queue_destroy(NULL);
    rudnn_context_destroy(NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    rt_close();
    return 0;
}

int main(int argc, char **argv)
{
    /* checked before any other rudnn call: nothing has failed yet */
    initial_error_empty = rudnn_last_error() != NULL && rudnn_last_error()[0] == '\0';
    static const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_last_error_starts_empty),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_last_error_is_thread_local),
        cmocka_unit_test(test_dtype_metadata),
        cmocka_unit_test(test_f16_roundtrip_exhaustive),
        cmocka_unit_test(test_bf16_roundtrip_exhaustive),
        cmocka_unit_test(test_f32_to_f16_rounding),
        cmocka_unit_test(test_f32_to_bf16_rounding),
        cmocka_unit_test(test_convert_arrays),
        cmocka_unit_test(test_tensor_init),
        cmocka_unit_test(test_tensor_init_empty_is_contiguous),
        cmocka_unit_test(test_tensor_init_overflow),
        cmocka_unit_test(test_tensor_helpers_bad_rank),
        cmocka_unit_test(test_version),
    };
    static const struct CMUnitTest backend_tests[] = {
        cmocka_unit_test(test_buffer_roundtrip),
        cmocka_unit_test(test_buffer_errors),
        cmocka_unit_test(test_tensor_io),
        cmocka_unit_test(test_strides),
        cmocka_unit_test(test_context_queue_event),
    };
    const char *part = argc > 1 ? argv[1] : "host";
    if (argc > 2)
        cmocka_set_test_filter(argv[2]);
    if (strcmp(part, "host") == 0)
        return rt_exit_code(cmocka_run_group_tests_name("core", host_tests, NULL, NULL));
    if (strcmp(part, "backend") == 0) {
        rt_open_or_skip("core-backend"); /* exits 77 when no backend is usable */
        return rt_exit_code(cmocka_run_group_tests_name("core-backend", backend_tests, NULL, group_teardown));
    }
    fprintf(stderr, "usage: %s host|backend [glob]\n", argv[0]);
    return 2;
}
