/* Pooling (backends/hal/pooling.h; the rules in include/rudnn/pooling.h): FP32 arithmetic, tensors
 * of the program's RUDNN_DTYPE (common.cl's LOAD_A / STORE_A), indices int64.
 *   rudnn_pool_forward   a work-item per output (n, c, p): its window walked in order, only the
 *                        taps that land inside x
 *   rudnn_pool_backward  a work-item per dx element (n, c, q): the outputs whose window holds q, in
 *                        tap order, each added once (MAX: where q is that window's argmax, found
 *                        again by the forward's own walk); no atomics
 * Shapes come as long4 (D, H, W, unused), strides as long8 ([batch, channel, D, H, W]), offsets in
 * elements. Modes: 0 MAX, 1 AVG_INCLUDE_PAD, 2 AVG_EXCLUDE_PAD. */

typedef struct pool_shape {
    long4 S, P, R, st, pad, dil;
} pool_shape_t;

/* The taps r (0 .. R - 1) of one dim whose position start + r dil lies inside 0 .. S - 1: [*lo, *hi],
 * empty when lo > hi. The walks visit only these, so a huge window over a small input costs what
 * the input holds. */
void taps_inside(long start, long dil, long S, long R, long *lo, long *hi)
{
    *lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
    *hi = start > S - 1 ? -1 : min(R - 1, (S - 1 - start) / dil);
}

/* The max of output p's window over the elements inside x (NaN if any is NaN), and its argmax, the
 * first such element in window order (the first NaN where there is one): -1 and -inf when none. */
float window_max(__global const act_t *x, long base, long8 xs, const pool_shape_t *c, long4 p, long *arg)
{
    const long4 start = p * c->st - c->pad;
    long lo0, hi0, lo1, hi1, lo2, hi2;
    taps_inside(start.s0, c->dil.s0, c->S.s0, c->R.s0, &lo0, &hi0);
    taps_inside(start.s1, c->dil.s1, c->S.s1, c->R.s1, &lo1, &hi1);
    taps_inside(start.s2, c->dil.s2, c->S.s2, c->R.s2, &lo2, &hi2);
    float best = -INFINITY;
    long at = -1;
    for (long r0 = lo0; r0 <= hi0; r0++)
        for (long r1 = lo1; r1 <= hi1; r1++)
            for (long r2 = lo2; r2 <= hi2; r2++) {
                const long4 i = start + (long4)(r0, r1, r2, 0) * c->dil;
                const float v = LOAD_A(x, base + box_offset(i, xs));
                if (at < 0 || (!isnan(best) && (isnan(v) || v > best))) {
                    best = v;
                    at = (i.s0 * c->S.s1 + i.s1) * c->S.s2 + i.s2;
                }
            }
    *arg = at;
    return best;
}

/* The averages' divisor of output p: positions of the window inside the padded input (1) or inside
 * x (2); the averages take dilation 1. */
float window_count(const pool_shape_t *c, long4 p, int mode)
{
    const long4 lo = p * c->st - c->pad;
    long4 hi = lo + c->R;
    if (mode == 1) {
        hi = min(hi, c->S + c->pad);
        return (float)((hi.s0 - lo.s0) * (hi.s1 - lo.s1) * (hi.s2 - lo.s2));
    }
    const long4 a = max(lo, (long4)(0)), b = min(hi, c->S);
    return (float)((b.s0 - a.s0) * (b.s1 - a.s1) * (b.s2 - a.s2));
}

pool_shape_t make_shape(long4 S, long4 P, long4 R, long4 st, long4 pad, long4 dil)
{
    pool_shape_t c;
    c.S = S, c.P = P, c.R = R, c.st = st, c.pad = pad, c.dil = dil;
    return c;
}

__kernel void rudnn_pool_forward(__global const act_t *x, ulong xo, __global act_t *y, ulong yo, __global long *idx,
                                 ulong io, ulong group0, long N, long C, long4 S, long4 P, long4 R, long4 st,
                                 long4 pad, long4 dil, long8 xs, long8 ys, long8 is, int mode, int has_idx)
{
    x += xo, y += yo, idx += io;
    const pool_shape_t c = make_shape(S, P, R, st, pad, dil);
    const long np = box_size(P);
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= (ulong)(N * C * np))
        return;
    const long pi = (long)(id % (ulong)np), ch = (long)((id / (ulong)np) % (ulong)C), n = (long)(id / (ulong)(np * C));
    const long4 p = box_at(pi, P);
    const long base = n * xs.s0 + ch * xs.s1;
    const long out = n * ys.s0 + ch * ys.s1 + box_offset(p, ys);
    if (mode == 0) {
        long arg;
        const float v = window_max(x, base, xs, &c, p, &arg);
        STORE_A(y, out, v);
        if (has_idx)
            idx[n * is.s0 + ch * is.s1 + box_offset(p, is)] = arg;
        return;
    }
    float sum = 0.0f;
    const long4 start = p * st - pad;
    long lo0, hi0, lo1, hi1, lo2, hi2;
    taps_inside(start.s0, 1, S.s0, R.s0, &lo0, &hi0);
    taps_inside(start.s1, 1, S.s1, R.s1, &lo1, &hi1);
    taps_inside(start.s2, 1, S.s2, R.s2, &lo2, &hi2);
    for (long r0 = lo0; r0 <= hi0; r0++)
        for (long r1 = lo1; r1 <= hi1; r1++)
            for (long r2 = lo2; r2 <= hi2; r2++)
                sum += LOAD_A(x, base + box_offset(start + (long4)(r0, r1, r2, 0), xs));
    const float cnt = window_count(&c, p, mode);
    STORE_A(y, out, cnt > 0.0f ? sum / cnt : 0.0f);
}

__kernel void rudnn_pool_backward(__global const act_t *x, ulong xo, __global const act_t *dy, ulong yo,
                                  __global act_t *dx, ulong dxo, ulong group0, long N, long C, long4 S, long4 P,
                                  long4 R, long4 st, long4 pad, long4 dil, long8 dxs, long8 ys, long8 srcs, int mode)
{
    x += xo, dy += yo, dx += dxo;
    const pool_shape_t c = make_shape(S, P, R, st, pad, dil);
    const long ns = box_size(S);
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= (ulong)(N * C * ns))
        return;
    const long qi = (long)(id % (ulong)ns), ch = (long)((id / (ulong)ns) % (ulong)C), n = (long)(id / (ulong)(ns * C));
    const long4 q = box_at(qi, S);
    const long flat_q = (q.s0 * S.s1 + q.s1) * S.s2 + q.s2;
    /* along each dim, the taps whose output position p = (q + pad - r dil) / st lies in 0 .. P - 1 */
    const long4 top = q + pad, span = (P - 1) * st;
    long lo[3], hi[3];
    for (int d = 0; d < 3; d++) {
        const long t = d == 0 ? top.s0 : d == 1 ? top.s1 : top.s2, sp = d == 0 ? span.s0 : d == 1 ? span.s1 : span.s2;
        const long dl = d == 0 ? dil.s0 : d == 1 ? dil.s1 : dil.s2, r = d == 0 ? R.s0 : d == 1 ? R.s1 : R.s2;
        lo[d] = t - sp <= 0 ? 0 : (t - sp + dl - 1) / dl;
        hi[d] = min(r - 1, t / dl);
    }
    float acc = 0.0f;
    for (long r0 = lo[0]; r0 <= hi[0]; r0++)
        for (long r1 = lo[1]; r1 <= hi[1]; r1++)
            for (long r2 = lo[2]; r2 <= hi[2]; r2++) {
                const long4 num = top - (long4)(r0, r1, r2, 0) * dil;
                if (num.s0 % st.s0 || num.s1 % st.s1 || num.s2 % st.s2)
                    continue;
                long4 p; /* component by component: the unused fourth lane of st is 0 */
                p.s0 = num.s0 / st.s0, p.s1 = num.s1 / st.s1, p.s2 = num.s2 / st.s2, p.s3 = 0;
                const float g = LOAD_A(dy, n * ys.s0 + ch * ys.s1 + box_offset(p, ys));
                if (mode == 0) {
                    long arg;
                    window_max(x, n * srcs.s0 + ch * srcs.s1, srcs, &c, p, &arg);
                    if (arg == flat_q)
                        acc += g;
                } else {
                    acc += g / window_count(&c, p, mode);
                }
            }
    STORE_A(dx, n * dxs.s0 + ch * dxs.s1 + box_offset(q, dxs), acc);
}
