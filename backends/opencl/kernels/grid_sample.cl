/* Grid sampling (backends/hal/grid_sample.h; the rules in include/rudnn/grid_sample.h): FP32
 * coordinates, weights and sums, tensors of the program's RUDNN_DTYPE (common.cl's LOAD_A /
 * STORE_A). A point is (n, d, h, w) of the grid; each spatial dim gives up to 4 taps (index,
 * weight, d weight / d coordinate), a point's taps are their product (at most 16).
 *   rudnn_gs_forward   a work-item per point: its taps, then every channel
 *   rudnn_gs_dgrid     a work-item per point: sum over channels and taps of dy x d(weight)
 *   dx, deterministically, by a counting sort of the (point, tap) pairs by the x element they read:
 *   rudnn_gs_zero      counts and cursors to 0
 *   rudnn_gs_count     a work-item per point: counts[element]++ per tap (integer atomics: the
 *                      counts do not depend on the order)
 *   rudnn_gs_scan      one work-group: offsets = exclusive prefix sum of counts
 *   rudnn_gs_fill      a work-item per point: each pair into its element's list (in any order)
 *   rudnn_gs_sort      a work-item per element: its list sorted by (point, tap)
 *   rudnn_gs_gather    a work-item per (n, c, element): the sum over its list, in that order
 * Modes: 0 bilinear, 1 nearest, 2 bicubic; paddings: 0 zeros, 1 border, 2 reflection. Shapes come
 * as long4 (D, H, W, unused), strides as long8 (x-like [n, c, d, h, w]; grid [n, d, h, w, coord]). */

#define GS_TAPS 16
#define CUBIC_A (-0.75f)

typedef struct gs_shape {
    long N, C;
    long4 S, P;
    int mode, padding, align, spatial;
} gs_shape_t;

/* std::max(v, 0) then std::min(S - 1, .), as PyTorch writes them (a NaN becomes S - 1) */
float gs_clip(float v, long S)
{
    const float m = v < 0.0f ? 0.0f : v;
    return m < (float)(S - 1) ? m : (float)(S - 1);
}

float gs_reflect(float in, float twice_low, float twice_high)
{
    if (twice_low == twice_high)
        return 0.0f;
    const float mn = twice_low / 2.0f, span = (twice_high - twice_low) / 2.0f;
    in = fabs(in - mn);
    const float extra = fmod(in, span);
    const int flips = (int)floor(in / span);
    return (flips % 2 == 0) ? extra + mn : span - extra + mn;
}

/* PyTorch's safe_downgrade_to_int_range: what cannot become an index reads as -100 */
float gs_safe(float c) { return (!isfinite(c) || c > (float)INT_MAX - 1.0f || c < (float)INT_MIN) ? -100.0f : c; }

float gs_unnormalize(float g, long S, int align)
{
    return align ? ((g + 1.0f) / 2.0f) * (float)(S - 1) : ((g + 1.0f) * (float)S - 1.0f) / 2.0f;
}

/* The padding mode applied to coordinate c (bilinear and nearest: to the unnormalized coordinate;
 * bicubic: to each tap's). */
float gs_pad(float c, long S, int padding, int align)
{
    if (padding == 1) {
        c = gs_clip(c, S);
    } else if (padding == 2) {
        c = align ? gs_reflect(c, 0.0f, 2.0f * (float)(S - 1)) : gs_reflect(c, -1.0f, 2.0f * (float)S - 1.0f);
        c = gs_clip(c, S);
    }
    return gs_safe(c);
}

/* d(padded coordinate) / d(unnormalized one), as PyTorch's *_set_grad functions (0 at and past a
 * clipped border; the reflections' sign). */
float gs_pad_slope(float c, long S, int padding, int align)
{
    if (padding == 0)
        return 1.0f;
    float m = 1.0f;
    if (padding == 2) {
        const float lo = align ? 0.0f : -1.0f, hi = align ? 2.0f * (float)(S - 1) : 2.0f * (float)S - 1.0f;
        if (lo == hi)
            return 0.0f;
        const float mn = lo / 2.0f, span = (hi - lo) / 2.0f;
        float in = c - mn;
        if (in < 0.0f) {
            m = -1.0f;
            in = -in;
        }
        const float extra = fmod(in, span);
        const int flips = (int)floor(in / span);
        c = (flips % 2 == 0) ? extra + mn : span - extra + mn;
        if (flips % 2 != 0)
            m = -m;
    }
    if (c <= 0.0f || c >= (float)(S - 1))
        return 0.0f;
    return m;
}

float cubic1(float x) { return ((CUBIC_A + 2.0f) * x - (CUBIC_A + 3.0f)) * x * x + 1.0f; }
float cubic2(float x) { return ((CUBIC_A * x - 5.0f * CUBIC_A) * x + 8.0f * CUBIC_A) * x - 4.0f * CUBIC_A; }
float cubic1_d(float x) { return (3.0f * (CUBIC_A + 2.0f) * x - 2.0f * (CUBIC_A + 3.0f)) * x; }
float cubic2_d(float x) { return (3.0f * CUBIC_A * x - 10.0f * CUBIC_A) * x + 8.0f * CUBIC_A; }

/* One dim's taps for grid coordinate g over S inputs: their count, indices (-1: reads nothing),
 * weights, and the weights' derivatives with respect to g (slope: d coordinate / d g folded in). */
int gs_dim_taps(const gs_shape_t *c, float g, long S, long *idx, float *w, float *dw)
{
    const float u = gs_unnormalize(g, S, c->align);
    const float unslope = c->align ? (float)(S - 1) / 2.0f : (float)S / 2.0f;
    if (c->mode == 2) {
        const float fl = floor(u), t = u - fl;
        w[0] = cubic2(t + 1.0f), w[1] = cubic1(t), w[2] = cubic1(1.0f - t), w[3] = cubic2(2.0f - t);
        dw[0] = cubic2_d(t + 1.0f), dw[1] = cubic1_d(t), dw[2] = -cubic1_d(1.0f - t), dw[3] = -cubic2_d(2.0f - t);
        for (int k = 0; k < 4; k++) {
            const float at = gs_pad(fl - 1.0f + (float)k, S, c->padding, c->align);
            const long i = (long)at;
            idx[k] = i >= 0 && i < S ? i : -1;
            dw[k] *= unslope;
        }
        return 4;
    }
    const float i = gs_pad(u, S, c->padding, c->align);
    if (c->mode == 1) {
        const long r = (long)rint(i);
        idx[0] = r >= 0 && r < S ? r : -1;
        w[0] = 1.0f, dw[0] = 0.0f;
        return 1;
    }
    const float fl = floor(i), t = i - fl;
    const long i0 = (long)fl;
    const float slope = unslope * gs_pad_slope(u, S, c->padding, c->align);
    idx[0] = i0 >= 0 && i0 < S ? i0 : -1;
    idx[1] = i0 + 1 >= 0 && i0 + 1 < S ? i0 + 1 : -1;
    w[0] = 1.0f - t, w[1] = t;
    dw[0] = -slope, dw[1] = slope;
    return 2;
}

/* A point's taps: per dim (D, H, W) their indices, weights and derivatives. */
typedef struct gs_taps {
    int n[3];
    long idx[3][4];
    float w[3][4], dw[3][4];
} gs_taps_t;

void gs_point_taps(const gs_shape_t *c, __global const act_t *grid, long8 gs, long n, long4 p, gs_taps_t *t)
{
    const long base = n * gs.s0 + p.s0 * gs.s1 + p.s1 * gs.s2 + p.s2 * gs.s3;
    /* coordinate 0 runs along W (dim 2 here), 1 along H, 2 along D */
    t->n[2] = gs_dim_taps(c, LOAD_A(grid, base), c->S.s2, t->idx[2], t->w[2], t->dw[2]);
    t->n[1] = gs_dim_taps(c, LOAD_A(grid, base + gs.s4), c->S.s1, t->idx[1], t->w[1], t->dw[1]);
    if (c->spatial == 3) {
        t->n[0] = gs_dim_taps(c, LOAD_A(grid, base + 2 * gs.s4), c->S.s0, t->idx[0], t->w[0], t->dw[0]);
    } else {
        t->n[0] = 1, t->idx[0][0] = 0, t->w[0][0] = 1.0f, t->dw[0][0] = 0.0f;
    }
}

gs_shape_t make_shape(long N, long C, long4 S, long4 P, int mode, int padding, int align, int spatial)
{
    gs_shape_t c;
    c.N = N, c.C = C, c.S = S, c.P = P, c.mode = mode, c.padding = padding, c.align = align, c.spatial = spatial;
    return c;
}

#define GS_PARAMS                                                                                            \
    long N, long C, long4 S, long4 P, int mode, int padding, int align, int spatial
#define GS_SHAPE make_shape(N, C, S, P, mode, padding, align, spatial)

ulong gs_id(ulong group0) { return (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0); }

__kernel void rudnn_gs_forward(__global const act_t *x, ulong xo, long8 xs, __global const act_t *grid, ulong go,
                               long8 gs, __global act_t *y, ulong yo, long8 ys, ulong group0, GS_PARAMS)
{
    x += xo, grid += go, y += yo;
    const gs_shape_t c = GS_SHAPE;
    const long np = box_size(P);
    const ulong id = gs_id(group0);
    if (id >= (ulong)(N * np))
        return;
    const long n = (long)(id / (ulong)np);
    const long4 p = box_at((long)(id % (ulong)np), P);
    gs_taps_t t;
    gs_point_taps(&c, grid, gs, n, p, &t);
    for (long ch = 0; ch < C; ch++) {
        const long xb = n * xs.s0 + ch * xs.s1;
        float acc = 0.0f;
        for (int a = 0; a < t.n[0]; a++)
            for (int b = 0; b < t.n[1]; b++)
                for (int e = 0; e < t.n[2]; e++) {
                    /* outside x: bilinear and nearest skip the tap; bicubic reads 0 and multiplies it, as
                     * PyTorch's (a NaN weight then gives NaN) */
                    const int out = t.idx[0][a] < 0 || t.idx[1][b] < 0 || t.idx[2][e] < 0;
                    if (out && mode != 2)
                        continue;
                    const float v =
                        out ? 0.0f : LOAD_A(x, xb + t.idx[0][a] * xs.s2 + t.idx[1][b] * xs.s3 + t.idx[2][e] * xs.s4);
                    acc += t.w[0][a] * t.w[1][b] * t.w[2][e] * v;
                }
        STORE_A(y, n * ys.s0 + ch * ys.s1 + p.s0 * ys.s2 + p.s1 * ys.s3 + p.s2 * ys.s4, acc);
    }
}

__kernel void rudnn_gs_dgrid(__global const act_t *x, ulong xo, long8 xs, __global const act_t *grid, ulong go,
                             long8 gs, __global const act_t *dy, ulong yo, long8 ys, __global act_t *dgrid, ulong dgo,
                             long8 dgs, ulong group0, GS_PARAMS)
{
    x += xo, grid += go, dy += yo, dgrid += dgo;
    const gs_shape_t c = GS_SHAPE;
    const long np = box_size(P);
    const ulong id = gs_id(group0);
    if (id >= (ulong)(N * np))
        return;
    const long n = (long)(id / (ulong)np);
    const long4 p = box_at((long)(id % (ulong)np), P);
    gs_taps_t t;
    gs_point_taps(&c, grid, gs, n, p, &t);
    float g0 = 0.0f, g1 = 0.0f, g2 = 0.0f; /* d / d coordinate along D, H, W */
    for (long ch = 0; ch < C; ch++) {
        const long xb = n * xs.s0 + ch * xs.s1;
        const float gy = LOAD_A(dy, n * ys.s0 + ch * ys.s1 + p.s0 * ys.s2 + p.s1 * ys.s3 + p.s2 * ys.s4);
        for (int a = 0; a < t.n[0]; a++)
            for (int b = 0; b < t.n[1]; b++)
                for (int e = 0; e < t.n[2]; e++) {
                    const int out = t.idx[0][a] < 0 || t.idx[1][b] < 0 || t.idx[2][e] < 0;
                    if (out && mode != 2) /* as the forward */
                        continue;
                    const long at = xb + t.idx[0][a] * xs.s2 + t.idx[1][b] * xs.s3 + t.idx[2][e] * xs.s4;
                    const float v = gy * (out ? 0.0f : LOAD_A(x, at));
                    g0 += t.dw[0][a] * t.w[1][b] * t.w[2][e] * v;
                    g1 += t.w[0][a] * t.dw[1][b] * t.w[2][e] * v;
                    g2 += t.w[0][a] * t.w[1][b] * t.dw[2][e] * v;
                }
    }
    const long out = n * dgs.s0 + p.s0 * dgs.s1 + p.s1 * dgs.s2 + p.s2 * dgs.s3;
    STORE_A(dgrid, out, g2);
    STORE_A(dgrid, out + dgs.s4, g1);
    if (spatial == 3)
        STORE_A(dgrid, out + 2 * dgs.s4, g0);
}

/* ---- dx by a counting sort: counts [N Sx + 1], cursors [N Sx], entries [pairs] (uint each; a
 * pair's id is point * GS_TAPS + tap, tap = (a n1 + b) n2 + e with n1, n2 the H and W dims' tap
 * counts, which the mode fixes: at most 16 taps a point) ------------------------------------------- */

__kernel void rudnn_gs_zero(__global uint *buf, ulong bo, ulong n, ulong group0)
{
    const ulong id = gs_id(group0);
    if (id < n)
        buf[bo + id] = 0u;
}

/* The x element (within all of x's N Sx spatial positions) a tap combination reads, or -1. */
long gs_element(const gs_taps_t *t, const gs_shape_t *c, long n, int a, int b, int e)
{
    if (t->idx[0][a] < 0 || t->idx[1][b] < 0 || t->idx[2][e] < 0)
        return -1;
    return ((n * c->S.s0 + t->idx[0][a]) * c->S.s1 + t->idx[1][b]) * c->S.s2 + t->idx[2][e];
}

__kernel void rudnn_gs_count(__global const act_t *grid, ulong go, long8 gs, __global uint *counts, ulong co,
                             ulong group0, GS_PARAMS)
{
    grid += go, counts += co;
    const gs_shape_t c = GS_SHAPE;
    const long np = box_size(P);
    const ulong id = gs_id(group0);
    if (id >= (ulong)(N * np))
        return;
    const long n = (long)(id / (ulong)np);
    gs_taps_t t;
    gs_point_taps(&c, grid, gs, n, box_at((long)(id % (ulong)np), P), &t);
    for (int a = 0; a < t.n[0]; a++)
        for (int b = 0; b < t.n[1]; b++)
            for (int e = 0; e < t.n[2]; e++) {
                const long el = gs_element(&t, &c, n, a, b, e);
                if (el >= 0)
                    atomic_inc(&counts[el]);
            }
}

/* One work-group: counts[0 .. n) become their exclusive prefix sums, counts[n] the total. Each
 * work-item sums a contiguous stretch; the stretches' sums are scanned in local memory. */
__kernel void rudnn_gs_scan(__global uint *counts, ulong co, ulong n, ulong group0, __local uint *part)
{
    (void)group0; /* one group */
    counts += co;
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    const ulong per = (n + L - 1) / L, lo = min(n, (ulong)lid * per), hi = min(n, lo + per);
    uint sum = 0u;
    for (ulong i = lo; i < hi; i++)
        sum += counts[i];
    part[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        uint run = 0u;
        for (uint k = 0; k < L; k++) {
            const uint s = part[k];
            part[k] = run;
            run += s;
        }
        counts[n] = run;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint run = part[lid];
    for (ulong i = lo; i < hi; i++) {
        const uint s = counts[i];
        counts[i] = run;
        run += s;
    }
}

__kernel void rudnn_gs_fill(__global const act_t *grid, ulong go, long8 gs, __global const uint *offsets, ulong oo,
                            __global uint *cursors, ulong cuo, __global uint *entries, ulong eo, ulong group0,
                            GS_PARAMS)
{
    grid += go, offsets += oo, cursors += cuo, entries += eo;
    const gs_shape_t c = GS_SHAPE;
    const long np = box_size(P);
    const ulong id = gs_id(group0);
    if (id >= (ulong)(N * np))
        return;
    const long n = (long)(id / (ulong)np);
    gs_taps_t t;
    gs_point_taps(&c, grid, gs, n, box_at((long)(id % (ulong)np), P), &t);
    for (int a = 0; a < t.n[0]; a++)
        for (int b = 0; b < t.n[1]; b++)
            for (int e = 0; e < t.n[2]; e++) {
                const long el = gs_element(&t, &c, n, a, b, e);
                if (el >= 0)
                    entries[offsets[el] + atomic_inc(&cursors[el])] =
                        (uint)id * GS_TAPS + (uint)((a * t.n[1] + b) * t.n[2] + e);
            }
}

__kernel void rudnn_gs_sort(__global const uint *offsets, ulong oo, __global uint *entries, ulong eo, ulong n,
                            ulong group0)
{
    offsets += oo, entries += eo;
    const ulong id = gs_id(group0);
    if (id >= n)
        return;
    const uint lo = offsets[id], hi = offsets[id + 1];
    for (uint i = lo + 1; i < hi; i++) {
        const uint v = entries[i];
        uint j = i;
        while (j > lo && entries[j - 1] > v) {
            entries[j] = entries[j - 1];
            j--;
        }
        entries[j] = v;
    }
}

__kernel void rudnn_gs_gather(__global const act_t *grid, ulong go, long8 gs, __global const act_t *dy, ulong yo,
                              long8 ys, __global const uint *offsets, ulong oo, __global const uint *entries, ulong eo,
                              __global act_t *dx, ulong dxo, long8 dxs, ulong group0, GS_PARAMS)
{
    grid += go, dy += yo, offsets += oo, entries += eo, dx += dxo;
    const gs_shape_t c = GS_SHAPE;
    const long ns = box_size(S), np = box_size(P);
    const ulong id = gs_id(group0);
    if (id >= (ulong)(N * C * ns))
        return;
    const long si = (long)(id % (ulong)ns), ch = (long)((id / (ulong)ns) % (ulong)C), n = (long)(id / (ulong)(ns * C));
    const long el = n * ns + si;
    float acc = 0.0f;
    for (uint k = offsets[el]; k < offsets[el + 1]; k++) {
        const uint pair = entries[k], point = pair / GS_TAPS, tap = pair % GS_TAPS;
        const long4 p = box_at((long)(point % (ulong)np), P);
        gs_taps_t t;
        gs_point_taps(&c, grid, gs, n, p, &t);
        const int e = (int)(tap % (uint)t.n[2]), b = (int)((tap / (uint)t.n[2]) % (uint)t.n[1]);
        const int a = (int)(tap / (uint)(t.n[2] * t.n[1]));
        const float gy = LOAD_A(dy, n * ys.s0 + ch * ys.s1 + p.s0 * ys.s2 + p.s1 * ys.s3 + p.s2 * ys.s4);
        acc += t.w[0][a] * t.w[1][b] * t.w[2][e] * gy;
    }
    const long4 q = box_at(si, S);
    STORE_A(dx, n * dxs.s0 + ch * dxs.s1 + q.s0 * dxs.s2 + q.s1 * dxs.s3 + q.s2 * dxs.s4, acc);
}
