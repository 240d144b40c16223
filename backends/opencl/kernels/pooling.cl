/* Pooling (backends/hal/pooling.h; the rules in include/rudnn/pooling.h): FP32 arithmetic, tensors
 * of the program's RUDNN_DTYPE (common.cl's LOAD_A / STORE_A), indices int64.
 *   rudnn_pool_forward   a work-item per output (n, c, p): its window walked in order
 *   rudnn_pool_backward  a work-item per dx element (n, c, q): the outputs whose window holds q, in
 *                        tap order, each added once (MAX: where q is that window's argmax, found
 *                        again by the forward's own walk); no atomics
 * Shapes come as long4 (D, H, W, unused), strides as long8 ([batch, channel, D, H, W]), offsets in
 * elements. Modes: 0 MAX, 1 AVG_INCLUDE_PAD, 2 AVG_EXCLUDE_PAD. */

typedef struct pool_shape {
    long4 S, P, R, st, pad, dil;
} pool_shape_t;

int inside(long4 i, long4 S)
{
    return i.s0 >= 0 && i.s0 < S.s0 && i.s1 >= 0 && i.s1 < S.s1 && i.s2 >= 0 && i.s2 < S.s2;
}

/* The max of output p's window over the elements inside x (NaN if any is NaN), and its argmax, the
 * first such element in window order (the first NaN where there is one): -1 and -inf when none. */
float window_max(__global const act_t *x, long base, long8 xs, const pool_shape_t *c, long4 p, long *arg)
{
    const long nr = box_size(c->R);
    float best = -INFINITY;
    long at = -1;
    for (long ri = 0; ri < nr; ri++) {
        const long4 i = p * c->st - c->pad + box_at(ri, c->R) * c->dil;
        if (!inside(i, c->S))
            continue;
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
    const long nr = box_size(R);
    for (long ri = 0; ri < nr; ri++) {
        const long4 i = p * st - pad + box_at(ri, R);
        if (inside(i, S))
            sum += LOAD_A(x, base + box_offset(i, xs));
    }
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
    const long nr = box_size(R);
    float acc = 0.0f;
    for (long ri = 0; ri < nr; ri++) {
        const long4 num = q + pad - box_at(ri, R) * dil;
        if (num.s0 < 0 || num.s1 < 0 || num.s2 < 0 || num.s0 % st.s0 || num.s1 % st.s1 || num.s2 % st.s2)
            continue;
        long4 p; /* component by component: the unused fourth lane of st is 0 */
        p.s0 = num.s0 / st.s0, p.s1 = num.s1 / st.s1, p.s2 = num.s2 / st.s2, p.s3 = 0;
        if (p.s0 >= P.s0 || p.s1 >= P.s1 || p.s2 >= P.s2)
            continue;
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
