/* rudnn OpenCL helpers shared by every program: the program cache prepends
 * this file to each kernel source (see program_cache.c), so norm.cl and
 * moe.cl use these without an #include (OpenCL 1.2 sources have no include
 * path when loaded from memory).
 *
 * Dtype codes, as in -DRUDNN_DTYPE / -DRUDNN_WDTYPE: 0 F32, 1 F16
 * (vload_half / vstore_half_rte, no cl_khr_fp16 needed), 2 BF16 (ushort bits,
 * round to nearest even, NaN stays NaN).
 */

/* Keep the arithmetic exactly as written (no a*b+c contraction), so that the
 * same expression gives the same bits in every kernel. */
#pragma OPENCL FP_CONTRACT OFF

/* ---- BF16 ---------------------------------------------------------------------- */

float bf16_to_f32(ushort b) { return as_float((uint)b << 16); }

ushort f32_to_bf16(float v)
{
    uint u = as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (ushort)((u >> 16) | 0x0040u); /* NaN stays (quiet) NaN */
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (ushort)(u >> 16);
}

/* ---- RUDNN_DTYPE storage ---------------------------------------------------------
 * act_t / LOAD_A / STORE_A: the storage of the activations (RUDNN_DTYPE), read
 * and written as float. LOAD8_A reads 8 consecutive elements (index i8 * 8).
 * raw_t: same-size bits, for plain copies. Only defined when the program is
 * built with RUDNN_DTYPE (the MoE dispatch program has no dtype). */
#if defined(RUDNN_DTYPE)
#if RUDNN_DTYPE == 0
#define act_t float
#define raw_t uint
#define LOAD_A(p, i) ((p)[i])
#define LOAD8_A(p, i8) vload8((i8), (p))
#define STORE_A(p, i, v) ((p)[i] = (v))
#elif RUDNN_DTYPE == 1
#define act_t half
#define raw_t ushort
#define LOAD_A(p, i) vload_half((i), (p))
#define LOAD8_A(p, i8) vload_half8((i8), (p))
#define STORE_A(p, i, v) vstore_half_rte((v), (i), (p))
#elif RUDNN_DTYPE == 2
#define act_t ushort
#define raw_t ushort
#define LOAD_A(p, i) bf16_to_f32((p)[i])
#define LOAD8_A(p, i8) as_float8(convert_uint8(vload8((i8), (p))) << 16)
#define STORE_A(p, i, v) ((p)[i] = f32_to_bf16(v))
#else
#error "RUDNN_DTYPE must be 0 (F32), 1 (F16) or 2 (BF16)"
#endif
#endif

/* ROUND_A(v): the float that v becomes when stored as act_t (STORE_A then LOAD_A), without a
 * store: F16 rounds to nearest even at its step (2^-24 for subnormals), past 65504 to inf. */
#if defined(RUDNN_DTYPE)
#if RUDNN_DTYPE == 0
#define ROUND_A(v) (v)
#elif RUDNN_DTYPE == 1
float round_to_half(float v)
{
    const float a = fabs(v);
    if (isnan(v)) {
        return v;
    }
    if (a >= 65520.0f) {
        return copysign(INFINITY, v);
    }
    int e;
    (void)frexp(a, &e); /* a = m 2^e, m in [0.5, 1): 10 fraction bits leave steps of 2^(e - 11) */
    const float step = ldexp(1.0f, max(e - 11, -24));
    return copysign(rint(a / step) * step, v);
}
#define ROUND_A(v) round_to_half(v)
#else
#define ROUND_A(v) bf16_to_f32(f32_to_bf16(v))
#endif
#endif

/* The expert of dispatched row r: the largest e < E with offsets[e] <= r
 * (offsets[0] = 0 <= r < offsets[E] = rows; empty experts are skipped). */
uint expert_of_row(const __global uint *off, uint experts, uint r)
{
    uint lo = 0, hi = experts;
    while (hi - lo > 1) {
        const uint mid = lo + (hi - lo) / 2;
        if (off[mid] <= r) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* w_t / LOAD_W: the storage of routing weights (-DRUDNN_WDTYPE, the logits dtype; combine and its
 * backward), read as float. */
#if defined(RUDNN_WDTYPE)
#if RUDNN_WDTYPE == 0
#define w_t float
#define LOAD_W(p, i) ((p)[i])
#elif RUDNN_WDTYPE == 1
#define w_t half
#define LOAD_W(p, i) vload_half((i), (p))
#elif RUDNN_WDTYPE == 2
#define w_t ushort
#define LOAD_W(p, i) bf16_to_f32((p)[i])
#else
#error "RUDNN_WDTYPE must be 0 (F32), 1 (F16) or 2 (BF16)"
#endif
#endif

/* ---- work-group reductions -------------------------------------------------------
 * Over the local size (a power of two), in a fixed tree order, so results are
 * deterministic for a given local size. Every work-item gets the result; the
 * trailing barrier lets the scratch (local size floats) be reused at once. */

float group_sum(float v, __local float *scratch)
{
    const uint lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = (uint)get_local_size(0) >> 1; h > 0; h >>= 1) {
        if (lid < h) {
            scratch[lid] = scratch[lid] + scratch[lid + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

/* fmax drops NaN; callers rely on the arithmetic that follows to carry it. */
float group_max(float v, __local float *scratch)
{
    const uint lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = (uint)get_local_size(0) >> 1; h > 0; h >>= 1) {
        if (lid < h) {
            scratch[lid] = fmax(scratch[lid], scratch[lid + h]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

/* ---- the spatial families' boxes ------------------------------------------------------------
 * Convolution, pooling, interpolation and grid sampling keep three spatial dims (D, H, W) in the
 * first lanes of a long4 (a 1D or 2D op has leading dims of 1) and a tensor's strides as a long8
 * [batch, channel, D, H, W]. */

/* Index i of a box as (d, h, w). */
long4 box_at(long i, long4 box)
{
    long4 v;
    v.s2 = i % box.s2;
    i /= box.s2;
    v.s1 = i % box.s1;
    v.s0 = i / box.s1;
    v.s3 = 0;
    return v;
}

long box_size(long4 box) { return box.s0 * box.s1 * box.s2; }

/* The element offset of position at under strides s (its batch and channel terms apart). */
long box_offset(long4 at, long8 s) { return at.s0 * s.s2 + at.s1 * s.s3 + at.s2 * s.s4; }
