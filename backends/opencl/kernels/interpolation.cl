/* Interpolation (backends/hal/interpolation.h; the rules in include/rudnn/interpolation.h): FP32
 * coordinates and sums, tensors of the program's RUDNN_DTYPE (common.cl's LOAD_A / STORE_A).
 *   rudnn_interp_forward   a work-item per output: the product of each dim's taps
 *   rudnn_interp_backward  a work-item per dx element: along each dim the outputs whose taps can
 *                          reach it (a range found by bisection, since taps only move forward as
 *                          the output index grows), each weighted by the taps that land on it; no
 *                          atomics, one sum in a fixed order
 * Coordinates round as the contract's FP32 formulas do: common.cl turns FP_CONTRACT off.
 * Modes: 0 NEAREST, 1 NEAREST_EXACT, 2 LINEAR, 3 CUBIC. Shapes come as long4 (D, H, W, unused),
 * ratios as float4, strides as long8 ([batch, channel, D, H, W]), offsets in elements. */

#define CUBIC_A (-0.75f)

float cubic1(float x) { return ((CUBIC_A + 2.0f) * x - (CUBIC_A + 3.0f)) * x * x + 1.0f; }

float cubic2(float x) { return ((CUBIC_A * x - 5.0f * CUBIC_A) * x + 8.0f * CUBIC_A) * x - 4.0f * CUBIC_A; }

/* Output index o's taps along one dim of S inputs: their count, input indices and weights. */
int taps_raw(int mode, int align, float r, long S, long o, long *idx, float *w)
{
    /* indices are clamped in float before they become integers: a huge ratio never overflows */
    if (mode == 0 || mode == 1) {
        const float s = mode == 0 ? floor((float)o * r) : floor(((float)o + 0.5f) * r);
        idx[0] = (long)fmin(s, (float)(S - 1));
        w[0] = 1.0f;
        return 1;
    }
    float src = align ? r * (float)o : r * ((float)o + 0.5f) - 0.5f;
    if (mode == 2) {
        if (src < 0.0f)
            src = 0.0f;
        const float fl = floor(src);
        const long i0 = (long)fmin(fl, (float)(S - 1));
        const float t = src - fl;
        idx[0] = i0;
        idx[1] = i0 < S - 1 ? i0 + 1 : i0;
        w[0] = 1.0f - t;
        w[1] = t;
        return 2;
    }
    const float fl = floor(src);
    const long i = (long)clamp(fl, -3.0f, (float)(S + 2)); /* its taps clamp into 0 .. S - 1 all the same */
    const float t = src - fl;
    w[0] = cubic2(t + 1.0f);
    w[1] = cubic1(t);
    w[2] = cubic1(1.0f - t);
    w[3] = cubic2(2.0f - t);
    for (int k = 0; k < 4; k++)
        idx[k] = clamp(i - 1 + k, (long)0, S - 1);
    return 4;
}

/* taps_raw, with a dim of one input (and the missing leading dims) as one tap: every tap lands on
 * index 0, and taps landing on one index add. */
int taps_of(int mode, int align, float r, long S, long o, long *idx, float *w)
{
    const int n = taps_raw(mode, align, r, S, o, idx, w);
    if (S > 1)
        return n;
    for (int k = 1; k < n; k++)
        w[0] += w[k];
    return 1;
}

/* The weight output o gives input q along one dim (taps landing on the same clamped index add). */
float weight_to(int mode, int align, float r, long S, long o, long q)
{
    long idx[4];
    float w[4];
    const int n = taps_of(mode, align, r, S, o, idx, w);
    float sum = 0.0f;
    for (int k = 0; k < n; k++)
        if (idx[k] == q)
            sum += w[k];
    return sum;
}

/* The outputs (of O) whose taps can reach input q: [lo, hi], empty when lo > hi. */
void reach(int mode, int align, float r, long S, long O, long q, long *lo, long *hi)
{
    long idx[4];
    float w[4];
    /* lo: the first o whose last tap is at or past q */
    long a = 0, b = O;
    while (a < b) {
        const long m = (a + b) / 2;
        const int n = taps_of(mode, align, r, S, m, idx, w);
        if (idx[n - 1] >= q)
            b = m;
        else
            a = m + 1;
    }
    *lo = a;
    /* hi: the last o whose first tap is at or before q */
    a = 0, b = O;
    while (a < b) {
        const long m = (a + b) / 2;
        taps_of(mode, align, r, S, m, idx, w);
        if (idx[0] <= q)
            a = m + 1;
        else
            b = m;
    }
    *hi = a - 1;
}

__kernel void rudnn_interp_forward(__global const act_t *x, ulong xo, __global act_t *y, ulong yo, ulong group0,
                                   long N, long C, long4 S, long4 O, float4 r, long8 xs, long8 ys, int mode,
                                   int align)
{
    x += xo, y += yo;
    const long no = box_size(O);
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= (ulong)(N * C * no))
        return;
    const long oi = (long)(id % (ulong)no), ch = (long)((id / (ulong)no) % (ulong)C), n = (long)(id / (ulong)(no * C));
    const long4 o = box_at(oi, O);
    long i0[4], i1[4], i2[4];
    float w0[4], w1[4], w2[4];
    const int n0 = taps_of(mode, align, r.s0, S.s0, o.s0, i0, w0);
    const int n1 = taps_of(mode, align, r.s1, S.s1, o.s1, i1, w1);
    const int n2 = taps_of(mode, align, r.s2, S.s2, o.s2, i2, w2);
    const long base = n * xs.s0 + ch * xs.s1;
    float acc = 0.0f;
    for (int a = 0; a < n0; a++)
        for (int b = 0; b < n1; b++) {
            float row = 0.0f;
            for (int c = 0; c < n2; c++)
                row += w2[c] * LOAD_A(x, base + box_offset((long4)(i0[a], i1[b], i2[c], 0), xs));
            acc += w0[a] * w1[b] * row;
        }
    STORE_A(y, n * ys.s0 + ch * ys.s1 + box_offset(o, ys), acc);
}

__kernel void rudnn_interp_backward(__global act_t *dx, ulong xo, __global const act_t *dy, ulong yo, ulong group0,
                                    long N, long C, long4 S, long4 O, float4 r, long8 xs, long8 ys, int mode,
                                    int align)
{
    dx += xo, dy += yo;
    const long ns = box_size(S);
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= (ulong)(N * C * ns))
        return;
    const long qi = (long)(id % (ulong)ns), ch = (long)((id / (ulong)ns) % (ulong)C), n = (long)(id / (ulong)(ns * C));
    const long4 q = box_at(qi, S);
    long lo0, hi0, lo1, hi1, lo2, hi2;
    reach(mode, align, r.s0, S.s0, O.s0, q.s0, &lo0, &hi0);
    reach(mode, align, r.s1, S.s1, O.s1, q.s1, &lo1, &hi1);
    reach(mode, align, r.s2, S.s2, O.s2, q.s2, &lo2, &hi2);
    const long base = n * ys.s0 + ch * ys.s1;
    float acc = 0.0f;
    /* no output reaches q along the innermost dim: no term at all (an empty row times another dim's
     * weight, NaN past FP32's coordinate range, must not make one) */
    if (lo2 > hi2)
        hi0 = lo0 - 1;
    for (long a = lo0; a <= hi0; a++) {
        const float wa = weight_to(mode, align, r.s0, S.s0, a, q.s0);
        for (long b = lo1; b <= hi1; b++) {
            const float wb = weight_to(mode, align, r.s1, S.s1, b, q.s1);
            float row = 0.0f;
            for (long c = lo2; c <= hi2; c++)
                row += weight_to(mode, align, r.s2, S.s2, c, q.s2) *
                       LOAD_A(dy, base + box_offset((long4)(a, b, c, 0), ys));
            acc += wa * wb * row;
        }
    }
    STORE_A(dx, n * xs.s0 + ch * xs.s1 + box_offset(q, xs), acc);
}
