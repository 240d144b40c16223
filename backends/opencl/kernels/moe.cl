/* rudnn OpenCL mixture-of-experts kernels: routing (softmax top-k, grouped
 * sigmoid), dispatch (plan + gather), Scalar SwiGLU experts, combine.
 *
 * Numerics follow backends/README.md exactly ("Numeric contract of the MoE
 * kernels"). OpenCL C 1.2; no extension is required.
 *
 * The file holds five programs, picked with -DRUDNN_MOE_PART (a program cache
 * entry holds at most 8 kernels, and each part needs only its own dtypes):
 *   1  route     -DRUDNN_DTYPE (logits = weights),      route_softmax, route_sigmoid_grouped
 *                -DMOE_ROUTE_MAX_LOCAL
 *   2  dispatch  (no dtype: U32 indices only)           dispatch_rank, dispatch_scan, dispatch_finish
 *   3  experts   -DRUDNN_DTYPE, -DMOE_TILE              gather, gate_up, down (tiled, GPUs),
 *                                                      gate_up_dot, down_dot (CPUs)
 *   4  combine   -DRUDNN_DTYPE (activations), -DRUDNN_WDTYPE (routing weights)
 *   5  ep        -DRUDNN_DTYPE, -DEP_MAX_TOP_K, -DEP_SRC_*  ep_combine_norm
 * The build puts backends/limits.h before this file (embed_cl.py); the
 * program cache prepends kernels/common.cl, which defines the dtype codes,
 * act_t / raw_t / LOAD_A / LOAD8_A / STORE_A (the RUDNN_DTYPE storage: logits,
 * tokens, expert weights, activations, outputs), w_t / LOAD_W (the RUDNN_WDTYPE
 * routing weights), bf16_to_f32, group_sum, group_max, and turns FP_CONTRACT
 * off (the expert dot products use MOE_MAC, an fma where the device says it is
 * fast).
 *
 * Arguments: buffers and element offsets are separate (no sub-buffers). Every
 * kernel takes group0, the first work-group of this launch: the host splits
 * launches so that one NDRange stays below 2^31 work-items. All launches are
 * one-dimensional (NVIDIA limits the other grid dimensions to 65535).
 */

#ifndef RUDNN_MOE_PART
#error "RUDNN_MOE_PART must be defined: 1 (route), 2 (dispatch), 3 (experts), 4 (combine), 5 (ep)"
#endif

/* ================================================================================
 * Part 1: routing. One work-group per token row; local size L is a power of two
 * (<= MOE_ROUTE_MAX_LOCAL), the same for every row of a launch.
 * ================================================================================ */
#if RUDNN_MOE_PART == 1

#ifndef RUDNN_DTYPE
#error "the route program needs RUDNN_DTYPE"
#endif

#ifndef MOE_ROUTE_MAX_LOCAL
#error "the route program needs MOE_ROUTE_MAX_LOCAL (set by moe.c)"
#endif
/* RUDNN_MOE_GROUPED_MAX_*: backends/limits.h, which the build puts before this file. */
#ifndef RUDNN_MOE_GROUPED_MAX_EXPERTS
#error "backends/limits.h must come before moe.cl (backends/opencl/meson.build)"
#endif

#define MOE_NONE 0xffffffffu

/* The selection order: a before b iff a has the larger score, NaN below every
 * number, equal scores (and two NaNs) by the lower id. id MOE_NONE is "no
 * candidate" and comes after everything. A strict total order on (score, id). */
int moe_before(float av, uint ai, float bv, uint bi)
{
    if (ai == MOE_NONE) {
        return 0;
    }
    if (bi == MOE_NONE) {
        return 1;
    }
    const int an = isnan(av) ? 1 : 0;
    const int bn = isnan(bv) ? 1 : 0;
    if (an != bn) {
        return bn;
    }
    if (!an && av != bv) {
        return av > bv;
    }
    return ai < bi;
}

/* The first (score, id) of the work-group in moe_before order; every
 * work-item gets it. */
void group_argbest(float *v, uint *id, __local float *sv, __local uint *si)
{
    const uint lid = get_local_id(0);
    sv[lid] = *v;
    si[lid] = *id;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = (uint)get_local_size(0) >> 1; h > 0; h >>= 1) {
        if (lid < h && moe_before(sv[lid + h], si[lid + h], sv[lid], si[lid])) {
            sv[lid] = sv[lid + h];
            si[lid] = si[lid + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *v = sv[0];
    *id = si[0];
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* p_i of a softmax row; one expression, so the local-memory path and the
 * recompute path give the same bits. */
float softmax_p(const __global act_t *x, uint i, float m, float sum)
{
    return exp(LOAD_A(x, i) - m) / sum;
}

/* Top-k selection without a "chosen" set: the order is strict and total, so
 * the j-th pick is the first element strictly after pick j-1. Each round scans
 * the row once (L-strided) and reduces; k rounds. */
__kernel void rudnn_moe_route_softmax(const __global act_t *logits, ulong logits_off,
                                      __global uint *indices, ulong indices_off,
                                      __global act_t *weights, ulong weights_off,
                                      ulong group0, uint experts, uint top_k, uint renormalize,
                                      uint p_in_local, __local float *pl, __local float *sv,
                                      __local uint *si)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const __global act_t *x = logits + logits_off + t * experts;
    __global uint *idx = indices + indices_off + t * top_k;
    __global act_t *w = weights + weights_off + t * top_k;

    /* NaN, +inf or an all -inf row: x - m is NaN somewhere, so the sum and
     * every p are NaN, by the arithmetic alone. */
    float m = -INFINITY;
    for (uint i = lid; i < experts; i += L) {
        m = fmax(m, LOAD_A(x, i));
    }
    m = group_max(m, sv);
    float acc = 0.0f;
    for (uint i = lid; i < experts; i += L) {
        acc = acc + exp(LOAD_A(x, i) - m);
    }
    const float sum = group_sum(acc, sv);
    if (p_in_local) {
        for (uint i = lid; i < experts; i += L) {
            pl[i] = softmax_p(x, i, m, sum);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    float prev_v = 0.0f;
    uint prev_i = MOE_NONE;
    float psum = 0.0f; /* work-item 0 only: selected p, FP32, slot order */
    for (uint j = 0; j < top_k; j++) {
        float bv = 0.0f;
        uint bi = MOE_NONE;
        for (uint i = lid; i < experts; i += L) {
            const float v = p_in_local ? pl[i] : softmax_p(x, i, m, sum);
            if ((prev_i == MOE_NONE || moe_before(prev_v, prev_i, v, i)) &&
                moe_before(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        group_argbest(&bv, &bi, sv, si);
        prev_v = bv;
        prev_i = bi;
        if (lid == 0) {
            idx[j] = bi;
            psum = psum + bv;
        }
    }

    /* Weights need the sum of all picks first: work-item 0 reads back its own
     * index writes and the same p bits. */
    if (lid == 0) {
        for (uint j = 0; j < top_k; j++) {
            const uint i = idx[j];
            float v = p_in_local ? pl[i] : softmax_p(x, i, m, sum);
            if (renormalize) {
                v = v / psum;
            }
            STORE_A(w, j, v);
        }
    }
}

/* E, groups and top_k within backends/limits.h's RUDNN_MOE_GROUPED_MAX_*
 * (checked by ops/moe.c): everything of a row lives in local memory. */
__kernel void rudnn_moe_route_sigmoid_grouped(const __global act_t *logits, ulong logits_off,
                                              const __global float *bias, ulong bias_off,
                                              uint has_bias, __global uint *indices,
                                              ulong indices_off, __global act_t *weights,
                                              ulong weights_off, ulong group0, uint experts,
                                              uint top_k, uint renormalize, uint groups,
                                              uint selected_groups, uint top_two, float scale)
{
    __local float p[RUDNN_MOE_GROUPED_MAX_EXPERTS];
    __local float s[RUDNN_MOE_GROUPED_MAX_EXPERTS];
    __local float gscore[RUDNN_MOE_GROUPED_MAX_GROUPS];
    __local uint gsel[RUDNN_MOE_GROUPED_MAX_GROUPS];
    __local uint sel[RUDNN_MOE_GROUPED_MAX_TOP_K];
    __local float sv[MOE_ROUTE_MAX_LOCAL];
    __local uint si[MOE_ROUTE_MAX_LOCAL];
    __local float psum_shared;

    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const __global act_t *x = logits + logits_off + t * experts;
    __global uint *idx = indices + indices_off + t * top_k;
    __global act_t *w = weights + weights_off + t * top_k;
    const __global float *b = bias + bias_off;

    /* p = sigmoid(x) in the stable form (NaN x: the else branch, NaN p);
     * s = p + bias, used for selection only. */
    for (uint i = lid; i < experts; i += L) {
        const float xv = LOAD_A(x, i);
        float pv;
        if (xv >= 0.0f) {
            pv = 1.0f / (1.0f + exp(-xv));
        } else {
            const float ex = exp(xv);
            pv = ex / (1.0f + ex);
        }
        p[i] = pv;
        s[i] = has_bias ? pv + b[i] : pv;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Group scores: the first s in selection order, plus the second one when
     * top_two (so a NaN counts only when a group has fewer numbers than it
     * needs). */
    const uint per_group = experts / groups;
    for (uint g = lid; g < groups; g += L) {
        float v1 = 0.0f, v2 = 0.0f;
        uint i1 = MOE_NONE, i2 = MOE_NONE;
        for (uint i = g * per_group; i < (g + 1) * per_group; i++) {
            const float v = s[i];
            if (moe_before(v, i, v1, i1)) {
                v2 = v1;
                i2 = i1;
                v1 = v;
                i1 = i;
            } else if (moe_before(v, i, v2, i2)) {
                v2 = v;
                i2 = i;
            }
        }
        gscore[g] = top_two ? v1 + v2 : v1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Group g is selected iff fewer than selected_groups groups come before
     * it (score descending, NaN lowest, lower group id first). */
    for (uint g = lid; g < groups; g += L) {
        const float gs = gscore[g];
        uint rank = 0;
        for (uint h = 0; h < groups; h++) {
            rank += moe_before(gscore[h], h, gs, g) ? 1u : 0u;
        }
        gsel[g] = rank < selected_groups ? 1u : 0u;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* top_k experts of the selected groups by s, as in route_softmax. */
    float prev_v = 0.0f;
    uint prev_i = MOE_NONE;
    float psum = 0.0f;
    for (uint j = 0; j < top_k; j++) {
        float bv = 0.0f;
        uint bi = MOE_NONE;
        for (uint i = lid; i < experts; i += L) {
            const float v = s[i];
            if (gsel[i / per_group] &&
                (prev_i == MOE_NONE || moe_before(prev_v, prev_i, v, i)) &&
                moe_before(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        group_argbest(&bv, &bi, sv, si);
        prev_v = bv;
        prev_i = bi;
        if (lid == 0) {
            sel[j] = bi;
            psum = psum + p[bi];
        }
    }
    if (lid == 0) {
        psum_shared = psum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const float total = psum_shared;
    for (uint j = lid; j < top_k; j += L) {
        const uint i = sel[j];
        float v = p[i];
        if (renormalize) {
            v = v / total;
        }
        v = v * scale;
        idx[j] = i;
        STORE_A(w, j, v);
    }
}

/* ================================================================================
 * Part 2: dispatch plan from indices [pairs] (pairs = T*k <= 2^32 - 1).
 *   dispatch_rank   one work-group per expert e: walks the pairs in order in
 *                   chunks of L * MOE_SCAN_V, ranks its matches with a
 *                   work-group prefix sum: positions[p] = rank of p within e;
 *                   counts[e] = its total.
 *   dispatch_scan   one work-group: offsets = exclusive scan of counts.
 *   dispatch_finish one work-item per pair: positions[p] += offsets[e];
 *                   row_token[positions[p]] = p / k.
 * Integer only, so the result is exact and does not depend on timing.
 * ================================================================================ */
#elif RUDNN_MOE_PART == 2

#define MOE_SCAN_V 4u

/* Exclusive prefix sum of v over the work-group (Hillis-Steele, L uints of
 * scratch); *total gets the sum of all v. */
uint group_scan_exclusive(uint v, __local uint *buf, uint *total)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint d = 1; d < L; d <<= 1) {
        const uint add = lid >= d ? buf[lid - d] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        buf[lid] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const uint inclusive = buf[lid];
    *total = buf[L - 1];
    barrier(CLK_LOCAL_MEM_FENCE);
    return inclusive - v;
}

__kernel void rudnn_moe_dispatch_rank(const __global uint *indices, ulong indices_off,
                                      __global uint *counts, ulong counts_off,
                                      __global uint *positions, ulong positions_off,
                                      ulong group0, uint pairs, __local uint *buf)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const uint e = (uint)(group0 + get_group_id(0));
    const __global uint *idx = indices + indices_off;
    __global uint *pos = positions + positions_off;
    const ulong chunk = (ulong)L * MOE_SCAN_V;

    uint base = 0;
    for (ulong c0 = 0; c0 < pairs; c0 += chunk) {
        const ulong first = c0 + (ulong)lid * MOE_SCAN_V;
        uint c = 0;
        for (uint v = 0; v < MOE_SCAN_V; v++) {
            const ulong q = first + v;
            c += (q < pairs && idx[q] == e) ? 1u : 0u;
        }
        uint total;
        uint r = base + group_scan_exclusive(c, buf, &total);
        for (uint v = 0; v < MOE_SCAN_V; v++) {
            const ulong q = first + v;
            if (q < pairs && idx[q] == e) {
                pos[q] = r++;
            }
        }
        base += total;
    }
    if (lid == 0) {
        counts[counts_off + e] = base;
    }
}

__kernel void rudnn_moe_dispatch_scan(const __global uint *counts, ulong counts_off,
                                      __global uint *offsets, ulong offsets_off,
                                      ulong group0, uint experts, __local uint *buf)
{
    (void)group0;
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const __global uint *cnt = counts + counts_off;
    __global uint *off = offsets + offsets_off;
    const ulong chunk = (ulong)L * MOE_SCAN_V;

    uint base = 0;
    for (ulong c0 = 0; c0 < experts; c0 += chunk) {
        const ulong first = c0 + (ulong)lid * MOE_SCAN_V;
        uint c = 0;
        for (uint v = 0; v < MOE_SCAN_V; v++) {
            const ulong q = first + v;
            c += q < experts ? cnt[q] : 0u;
        }
        uint total;
        uint r = base + group_scan_exclusive(c, buf, &total);
        for (uint v = 0; v < MOE_SCAN_V; v++) {
            const ulong q = first + v;
            if (q < experts) {
                off[q] = r;
                r += cnt[q];
            }
        }
        base += total;
    }
    if (lid == 0) {
        off[experts] = base;
    }
}

__kernel void rudnn_moe_dispatch_finish(const __global uint *indices, ulong indices_off,
                                        const __global uint *offsets, ulong offsets_off,
                                        __global uint *positions, ulong positions_off,
                                        __global uint *row_token, ulong row_token_off,
                                        ulong group0, uint pairs, uint top_k)
{
    const ulong q = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (q >= pairs) {
        return;
    }
    const uint e = indices[indices_off + q];
    const uint r = offsets[offsets_off + e] + positions[positions_off + q];
    positions[positions_off + q] = r;
    row_token[row_token_off + r] = (uint)(q / top_k);
}

/* ================================================================================
 * Part 3: gather and the Scalar SwiGLU experts.
 * ================================================================================ */
#elif RUDNN_MOE_PART == 3

#ifndef RUDNN_DTYPE
#error "the experts program needs RUDNN_DTYPE"
#endif
#ifndef MOE_TILE
#error "the experts program needs MOE_TILE (set by moe.c)"
#endif
#define T_ MOE_TILE

/* acc + a * b: fused where fma is fast (FP_FAST_FMAF), else multiply then add.
 * Fixed per device, so results stay deterministic. */
#ifdef FP_FAST_FMAF
#define MOE_MAC(acc, a, b) fma((a), (b), (acc))
#else
#define MOE_MAC(acc, a, b) ((acc) + (a) * (b))
#endif

/* tokens[r, :] = input[row_token[r], :], one work-group per row (a bit copy). */
__kernel void rudnn_moe_gather(const __global raw_t *input, ulong input_off,
                               const __global uint *row_token, ulong row_token_off,
                               __global raw_t *tokens, ulong tokens_off, ulong group0,
                               uint hidden)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong r = group0 + get_group_id(0);
    const __global raw_t *src = input + input_off + (ulong)row_token[row_token_off + r] * hidden;
    __global raw_t *dst = tokens + tokens_off + r * hidden;
    for (uint h = lid; h < hidden; h += L) {
        dst[h] = src[h];
    }
}

/* Both expert kernels are tiled matrix products over the dispatched rows, one
 * work-group (T_ x T_ work-items, 1-D) per tile of T_ rows x T_ outputs. A row
 * tile may straddle experts: it is processed as segments, one per expert
 * (uniform control flow: every work-item finds the same expert), so most
 * tiles are one segment when experts get many rows. The reduction axis goes
 * in chunks of T_ through local memory; work-item (ty, tx) loads element
 * (ty, tx) of each tile (consecutive along the contiguous axis) and computes
 * output (row ty, column tx). Out-of-range loads are 0 and only feed outputs
 * that are not written. Dot products accumulate in FP32 in axis order
 * (MOE_MAC).
 *
 * The TensorCore strategy on OpenCL is CLBlast SGEMM instead (moe_gemm.c,
 * kernels/moe_gemm.cl), built when CLBlast is found. */

/* This work-group's tile, rows [r_begin, r_end) x outputs [o0, o0 + T_), and
 * this work-item's (ty, tx) in it. */
typedef struct expert_tile {
    uint tx, ty, o0, r_begin, r_end;
} expert_tile;

expert_tile expert_tile_of_group(ulong group0, uint rows, uint out_tiles)
{
    expert_tile t;
    const uint lid = get_local_id(0);
    t.tx = lid % T_;
    t.ty = lid / T_;
    const ulong grp = group0 + get_group_id(0);
    t.o0 = (uint)(grp % out_tiles) * T_;
    const ulong r_first = (grp / out_tiles) * T_;
    t.r_begin = (uint)r_first;
    t.r_end = (uint)min(r_first + T_, (ulong)rows);
    return t;
}

/* The segment of the tile that starts at row seg: expert e's rows up to end.
 * The work-item loads input row load_row and weight row load_out; when the
 * real ones (seg + ty, o0 + ty) are out of range (row_ok / out_ok false) it
 * loads zeros, and these stay valid rows to point at. */
typedef struct tile_segment {
    uint e, end, load_row, load_out;
    int row_ok, out_ok;
} tile_segment;

tile_segment tile_segment_at(expert_tile t, const __global uint *off, uint experts, uint seg,
                             uint outputs)
{
    tile_segment s;
    s.e = expert_of_row(off, experts, seg);
    s.end = min(off[s.e + 1], t.r_end);
    s.row_ok = seg + t.ty < s.end;
    s.out_ok = t.o0 + t.ty < outputs;
    s.load_row = s.row_ok ? seg + t.ty : seg;
    s.load_out = s.out_ok ? t.o0 + t.ty : 0u;
    return s;
}

__kernel void rudnn_moe_gate_up(const __global act_t *tokens, ulong tokens_off,
                                const __global uint *offsets, ulong offsets_off,
                                const __global act_t *gate, ulong gate_off,
                                const __global act_t *up, ulong up_off,
                                __global act_t *act, ulong act_off, ulong group0, uint rows,
                                uint experts, uint hidden, uint inter, uint out_tiles)
{
    __local float xs[T_][T_ + 1];
    __local float gs[T_][T_ + 1];
    __local float us[T_][T_ + 1];

    const expert_tile t = expert_tile_of_group(group0, rows, out_tiles);
    const uint tx = t.tx, ty = t.ty;
    for (uint seg = t.r_begin; seg < t.r_end;) {
        const tile_segment s = tile_segment_at(t, offsets + offsets_off, experts, seg, inter);
        const __global act_t *xr = tokens + tokens_off + (ulong)s.load_row * hidden;
        const ulong wrow = ((ulong)s.e * inter + s.load_out) * hidden;
        const __global act_t *gr = gate + gate_off + wrow;
        const __global act_t *ur = up + up_off + wrow;

        float ag = 0.0f, au = 0.0f;
        for (uint k0 = 0; k0 < hidden; k0 += T_) {
            const uint k = k0 + tx;
            const int k_ok = k < hidden;
            xs[ty][tx] = (s.row_ok && k_ok) ? LOAD_A(xr, k) : 0.0f;
            gs[tx][ty] = (s.out_ok && k_ok) ? LOAD_A(gr, k) : 0.0f;
            us[tx][ty] = (s.out_ok && k_ok) ? LOAD_A(ur, k) : 0.0f;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (uint kk = 0; kk < T_; kk++) {
                const float xv = xs[ty][kk];
                ag = MOE_MAC(ag, xv, gs[kk][tx]);
                au = MOE_MAC(au, xv, us[kk][tx]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        const uint r = seg + ty;
        const uint o = t.o0 + tx;
        if (r < s.end && o < inter) {
            const float silu = ag / (1.0f + exp(-ag));
            STORE_A(act + act_off + (ulong)r * inter, o, silu * au);
        }
        seg = s.end;
    }
}

/* out[r, h] = round(sum_i act[r, i] * down[e, h, i]) */
__kernel void rudnn_moe_down(const __global act_t *act, ulong act_off,
                             const __global uint *offsets, ulong offsets_off,
                             const __global act_t *down, ulong down_off,
                             __global act_t *out, ulong out_off, ulong group0, uint rows,
                             uint experts, uint hidden, uint inter, uint out_tiles)
{
    __local float as[T_][T_ + 1];
    __local float ds[T_][T_ + 1];

    const expert_tile t = expert_tile_of_group(group0, rows, out_tiles);
    const uint tx = t.tx, ty = t.ty;
    for (uint seg = t.r_begin; seg < t.r_end;) {
        const tile_segment s = tile_segment_at(t, offsets + offsets_off, experts, seg, hidden);
        const __global act_t *ar = act + act_off + (ulong)s.load_row * inter;
        const __global act_t *dr = down + down_off + ((ulong)s.e * hidden + s.load_out) * inter;

        float acc = 0.0f;
        for (uint k0 = 0; k0 < inter; k0 += T_) {
            const uint k = k0 + tx;
            const int k_ok = k < inter;
            as[ty][tx] = (s.row_ok && k_ok) ? LOAD_A(ar, k) : 0.0f;
            ds[tx][ty] = (s.out_ok && k_ok) ? LOAD_A(dr, k) : 0.0f;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (uint kk = 0; kk < T_; kk++) {
                acc = MOE_MAC(acc, as[ty][kk], ds[kk][tx]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        const uint r = seg + ty;
        const uint o = t.o0 + tx;
        if (r < s.end && o < hidden) {
            STORE_A(out + out_off + (ulong)r * hidden, o, acc);
        }
        seg = s.end;
    }
}

/* CPU devices (PoCL): one work-item per output, the dot product along the
 * contiguous axis with 8-wide vectors (PoCL runs work-items as loops, so the
 * tiled kernels' barriers and local copies cost more than they save there:
 * about 9x slower on PoCL). Lane sums, then a fixed pairwise sum of the 8
 * lanes, then the tail in order. Same arguments as the tiled kernels
 * (out_tiles unused); the launch has ceil(rows * outputs / L) groups. */
float hsum8(float8 a)
{
    return ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
}

/* The output of a dot-kernel work-item: row r, column o of rows x outputs,
 * and row r's expert e. */
typedef struct dot_output {
    uint r, o, e;
} dot_output;

/* Returns 0 for the work-items past the last output (the launch is rounded up
 * to whole work-groups). */
int dot_output_of(ulong group0, uint rows, uint outputs, const __global uint *off, uint experts,
                  dot_output *d)
{
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= (ulong)rows * outputs) {
        return 0;
    }
    d->r = (uint)(id / outputs);
    d->o = (uint)(id % outputs);
    d->e = expert_of_row(off, experts, d->r);
    return 1;
}

__kernel void rudnn_moe_gate_up_dot(const __global act_t *tokens, ulong tokens_off,
                                    const __global uint *offsets, ulong offsets_off,
                                    const __global act_t *gate, ulong gate_off,
                                    const __global act_t *up, ulong up_off,
                                    __global act_t *act, ulong act_off, ulong group0,
                                    uint rows, uint experts, uint hidden, uint inter,
                                    uint out_tiles)
{
    (void)out_tiles;
    dot_output d;
    if (!dot_output_of(group0, rows, inter, offsets + offsets_off, experts, &d)) {
        return;
    }
    const ulong wrow = ((ulong)d.e * inter + d.o) * hidden;
    const __global act_t *x = tokens + tokens_off + (ulong)d.r * hidden;
    const __global act_t *g = gate + gate_off + wrow;
    const __global act_t *u = up + up_off + wrow;

    float8 ag = (float8)(0.0f), au = (float8)(0.0f);
    const uint n8 = hidden / 8u;
    for (uint v = 0; v < n8; v++) {
        const float8 xv = LOAD8_A(x, v);
        ag = MOE_MAC(ag, xv, LOAD8_A(g, v));
        au = MOE_MAC(au, xv, LOAD8_A(u, v));
    }
    float sg = hsum8(ag), su = hsum8(au);
    for (uint k = n8 * 8u; k < hidden; k++) {
        const float xv = LOAD_A(x, k);
        sg = MOE_MAC(sg, xv, LOAD_A(g, k));
        su = MOE_MAC(su, xv, LOAD_A(u, k));
    }
    const float silu = sg / (1.0f + exp(-sg));
    STORE_A(act + act_off + (ulong)d.r * inter, d.o, silu * su);
}

__kernel void rudnn_moe_down_dot(const __global act_t *act, ulong act_off,
                                 const __global uint *offsets, ulong offsets_off,
                                 const __global act_t *down, ulong down_off,
                                 __global act_t *out, ulong out_off, ulong group0, uint rows,
                                 uint experts, uint hidden, uint inter, uint out_tiles)
{
    (void)out_tiles;
    dot_output d;
    if (!dot_output_of(group0, rows, hidden, offsets + offsets_off, experts, &d)) {
        return;
    }
    const __global act_t *a = act + act_off + (ulong)d.r * inter;
    const __global act_t *dn = down + down_off + ((ulong)d.e * hidden + d.o) * inter;

    float8 acc8 = (float8)(0.0f);
    const uint n8 = inter / 8u;
    for (uint v = 0; v < n8; v++) {
        acc8 = MOE_MAC(acc8, LOAD8_A(a, v), LOAD8_A(dn, v));
    }
    float acc = hsum8(acc8);
    for (uint k = n8 * 8u; k < inter; k++) {
        acc = MOE_MAC(acc, LOAD_A(a, k), LOAD_A(dn, k));
    }
    STORE_A(out + out_off + (ulong)d.r * hidden, d.o, acc);
}

/* ================================================================================
 * Part 4: combine, one work-group per token:
 *   out[t, h] = round(sum_j w[t, j] * expert_out[positions[t*k + j], h]),
 * FP32, slot order j = 0..k-1, no contraction.
 * ================================================================================ */
#elif RUDNN_MOE_PART == 4

#if !defined(RUDNN_DTYPE) || !defined(RUDNN_WDTYPE)
#error "the combine program needs RUDNN_DTYPE and RUDNN_WDTYPE"
#endif

__kernel void rudnn_moe_combine(const __global act_t *expert_out, ulong expert_out_off,
                                const __global uint *positions, ulong positions_off,
                                const __global w_t *weights, ulong weights_off,
                                __global act_t *out, ulong out_off, ulong group0, uint top_k,
                                uint hidden)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const __global uint *pos = positions + positions_off + t * top_k;
    const __global w_t *w = weights + weights_off + t * top_k;
    const __global act_t *eo = expert_out + expert_out_off;
    __global act_t *y = out + out_off + t * hidden;

    for (uint h = lid; h < hidden; h += L) {
        float acc = LOAD_W(w, 0) * LOAD_A(eo + (ulong)pos[0] * hidden, h);
        for (uint j = 1; j < top_k; j++) {
            acc = acc + LOAD_W(w, j) * LOAD_A(eo + (ulong)pos[j] * hidden, h);
        }
        STORE_A(y, h, acc);
    }
}

/* ================================================================================
 * Part 5: the expert-parallel combine fused with the shared-expert term, the
 * residual add and RMSNorm (hal/moe.h ep_combine_norm; the CUDA kernel,
 * backends/cuda/ep_combine.cu, is the model), one work-group per token t:
 *   c[h] = sum_j value_j[h] (slot order j = 0..k-1, each term an fma on the
 *          running sum) + (any slot of t not OFF and has_shared ? shared[t, h] : 0)
 *   x[h] = c[h] + residual[t, h]                          (FP32)
 *   rstd = 1 / sqrt(sum_h x[h]^2 / H + eps)               (of the unrounded x)
 *   store x[h] rounded; y[h] = round((x[h] rstd) gamma[h])
 * value_j: src code s >= 0 scales[j] rows[s]; EP_SRC_ZERO nothing; EP_SRC_COPY
 * scales[j] ori_x[t]; s <= EP_SRC_CONST0, c = EP_SRC_CONST0 - s:
 * (scales[j] alpha1[c]) ori_x[t] then (scales[j] alpha2[c]) const_v[c];
 * EP_SRC_OFF nothing (and does not make the token active).
 *
 * The codes and EP_MAX_TOP_K come as build options from moe.c (hal/moe.h's
 * RUDNN_EP_SRC_*, rudnn/ep.h's RUDNN_EP_MAX_TOP_K). Work-item lid owns columns
 * lid, lid + L, ...; the token's FP32 x stays in local memory (sums_in_local:
 * H floats) where the device has room, else the second pass recomputes it
 * with the same expression (same bits). x and y are written in the second
 * pass, after every input of the token has been read.
 * ================================================================================ */
#elif RUDNN_MOE_PART == 5

#if !defined(RUDNN_DTYPE) || !defined(EP_MAX_TOP_K) || !defined(EP_SRC_OFF) ||                   \
    !defined(EP_SRC_ZERO) || !defined(EP_SRC_COPY) || !defined(EP_SRC_CONST0)
#error "the ep combine program needs RUDNN_DTYPE, EP_MAX_TOP_K and EP_SRC_* (set by moe.c)"
#endif

/* The token's unrounded x at column h: the slots' rows from the codes and
 * weights in local memory (w1: the row's weight, w2: const_v's), then the
 * shared row where add_shared, then the residual. */
float ep_x(const __global act_t *rows, const __global act_t *ori_t, const __global act_t *cv,
           const __global act_t *shared_t, const __global act_t *res_t, uint hidden, uint h,
           uint top_k, uint add_shared, const __local int *s_src, const __local float *s_w1,
           const __local float *s_w2)
{
    float acc = 0.0f;
    for (uint j = 0; j < top_k; j++) {
        const int s = s_src[j];
        if (s >= 0) {
            acc = fma(s_w1[j], LOAD_A(rows + (ulong)s * hidden, h), acc);
        } else if (s == EP_SRC_COPY) {
            acc = fma(s_w1[j], LOAD_A(ori_t, h), acc);
        } else if (s <= EP_SRC_CONST0) {
            const ulong c = (ulong)(EP_SRC_CONST0 - s);
            acc = fma(s_w1[j], LOAD_A(ori_t, h), acc);
            acc = fma(s_w2[j], LOAD_A(cv + c * hidden, h), acc);
        } /* OFF and zero experts add nothing */
    }
    if (add_shared) {
        acc = acc + LOAD_A(shared_t, h);
    }
    return acc + LOAD_A(res_t, h);
}

/* Buffers the plan does not read (shared without has_shared; ori_x, alpha1/2,
 * const_v without the codes that need them) come as some valid buffer with
 * offset 0 (moe.c passes the residual's) and are never dereferenced. */
__kernel void rudnn_moe_ep_combine_norm(const __global act_t *rows, ulong rows_off,
                                        const __global int *src, ulong src_off,
                                        const __global float *scales, ulong scales_off,
                                        const __global act_t *shared, ulong shared_off,
                                        const __global act_t *ori_x, ulong ori_x_off,
                                        const __global act_t *alpha1, ulong alpha1_off,
                                        const __global act_t *alpha2, ulong alpha2_off,
                                        const __global act_t *const_v, ulong const_v_off,
                                        const __global act_t *residual, ulong residual_off,
                                        const __global act_t *gamma, ulong gamma_off,
                                        __global act_t *y, ulong y_off,
                                        __global float *rstd, ulong rstd_off,
                                        __global act_t *x, ulong x_off, ulong group0,
                                        uint top_k, uint hidden, uint has_shared, float eps,
                                        uint sums_in_local, __local float *sums,
                                        __local float *scratch)
{
    __local int s_src[EP_MAX_TOP_K];
    __local float s_w1[EP_MAX_TOP_K];
    __local float s_w2[EP_MAX_TOP_K];
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const ulong row = t * hidden;

    /* the token's slots: codes, and the weight of each row they read */
    for (uint j = lid; j < top_k; j += L) {
        const int s = src[src_off + t * top_k + j];
        const float w = scales[scales_off + t * top_k + j];
        float w1 = w, w2 = 0.0f;
        if (s <= EP_SRC_CONST0) {
            const ulong c = (ulong)(EP_SRC_CONST0 - s);
            w1 = w * LOAD_A(alpha1 + alpha1_off, c);
            w2 = w * LOAD_A(alpha2 + alpha2_off, c);
        }
        s_src[j] = s;
        s_w1[j] = w1;
        s_w2[j] = w2;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint active = 0;
    for (uint j = 0; j < top_k; j++) {
        active |= s_src[j] != EP_SRC_OFF;
    }
    const uint add_shared = active && has_shared;

    const __global act_t *rw = rows + rows_off;
    const __global act_t *ori_t = ori_x + ori_x_off + row;
    const __global act_t *cv = const_v + const_v_off;
    const __global act_t *sh_t = shared + shared_off + row;
    const __global act_t *res_t = residual + residual_off + row;

    float ss = 0.0f;
    for (uint h = lid; h < hidden; h += L) {
        const float v = ep_x(rw, ori_t, cv, sh_t, res_t, hidden, h, top_k, add_shared, s_src,
                             s_w1, s_w2);
        if (sums_in_local) {
            sums[h] = v;
        }
        ss = fma(v, v, ss);
    }
    const float tot = group_sum(ss, scratch);
    const float r = 1.0f / sqrt(tot / (float)hidden + eps);
    if (lid == 0) {
        rstd[rstd_off + t] = r;
    }

    const __global act_t *g = gamma + gamma_off;
    __global act_t *x_t = x + x_off + row;
    __global act_t *y_t = y + y_off + row;
    for (uint h = lid; h < hidden; h += L) {
        const float v = sums_in_local ? sums[h]
                                      : ep_x(rw, ori_t, cv, sh_t, res_t, hidden, h, top_k,
                                             add_shared, s_src, s_w1, s_w2);
        STORE_A(x_t, h, v);
        STORE_A(y_t, h, (v * r) * LOAD_A(g, h));
    }
}

#else
#error "RUDNN_MOE_PART must be 1, 2, 3, 4 or 5"
#endif
