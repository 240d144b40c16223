/* Convolution (backends/hal/convolution.h) on CUDA and HIP: the kernels of
 * backends/opencl/kernels/convolution.cl with the same candidates, results and summation order.
 * Each direction is the product C[m, j] = sum_t A[m, t] B[t, j] of one group g, its operands
 * gathered from the tensors (hal/convolution.h has the table of m, j, t per direction).
 *
 *   convolution.direct_*  a thread per output (g, m, j): the sum walked tap by tap, t increasing
 *                         (data backward skips the taps that land between output positions)
 *   convolution.igemm_*   a block of 256 threads per 64 x 64 tile of C: 16-deep slices of A and B
 *                         gathered into shared memory, double-buffered so that the next slice's
 *                         global loads are in flight during this slice's products (one barrier a
 *                         slice). FP32 (and every dtype under HIP, or before sm_80): each thread a
 *                         4 x 4 register tile of FP32 sums, t increasing as in OpenCL. F16 and BF16
 *                         on sm_80+ (CUDA): mma.sync m16n8k16 with FP32 accumulators, each warp a
 *                         32 x 16 tile (the order within a 16-deep slice is the tensor core's).
 *   dbias (weight backward with dbias): a block per channel, thread-strided sums then a fixed tree.
 *
 * The gather keeps index math out of the inner loops: each thread stages the same 4 rows of A and
 * 4 columns of B in every slice (their offsets and positions computed once per tile), and one t of
 * each operand a slice, walked as mixed-radix digits (c, r) / (k, r) / (n, p) advanced by carries,
 * never by division. Spatial positions are int32 where every |position| fits (the host checks),
 * int64 otherwise (the FP32-tile kernel only).
 *
 * Terms: forward and weight backward read x as 0 in the padding and add 0 * the other operand, as
 * OpenCL does; data backward leaves out the taps that reach no output position. The tiled kernels
 * stage such a tap as A = 0 with a flag: where every staged w of a slice is finite, 0 * w adds a
 * zero (only the sign of an exactly zero sum can differ from skipping it), else that slice's
 * products skip the flagged terms, so a NaN or infinite w meets no absent tap. No atomics, no
 * workspace; every output element written. */
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "rdg_internal.h"
#include "mma_sync.cuh"

namespace {

constexpr int CONV_THREADS = 256; /* the tiled kernels' block: 8 warps (4 wavefronts of 64) */
constexpr int TILE_M = 64, TILE_J = 64, TILE_T = 16;
constexpr int TILE_ROWS = 4;     /* rows of A (columns of B) each thread stages a slice */
constexpr int ROW_STEP = TILE_M / TILE_ROWS; /* between a thread's staged rows */
constexpr int SIMT_PITCH = 68;   /* floats a slice row: float4 reads stay aligned, stores spread over banks */
constexpr int DIRECT_THREADS = 256;
constexpr int BIAS_THREADS = 256;
constexpr int64_t MAX_BLOCKS = (int64_t)1 << 20; /* grid-stride beyond: blockIdx.x and HIP's grid limits */
/* Direct is preferred where the product is this narrow (depthwise, few channels): a 64 x 64 tile
 * would be mostly idle. */
constexpr int64_t NARROW = 16;

static_assert(TILE_M == TILE_J && CONV_THREADS == ROW_STEP * TILE_T && TILE_T == ROW_STEP,
              "each thread stages TILE_ROWS elements of A and of B a slice, lanes along t or along rows");

enum { DIR_FWD = RUDNN_CONV_FORWARD, DIR_DATA = RUDNN_CONV_DATA_BACKWARD, DIR_WEIGHT = RUDNN_CONV_WEIGHT_BACKWARD };

/* A plan's shape as the kernels read it (by value: a kernel argument). Spatial dims as the plan
 * keeps them: three, missing leading ones of size 1; strides in elements, [batch or filter,
 * channel, D, H, W]. */
struct ConvArgs {
    int64_t N, Cg, Kg, G;
    int64_t M, J, T; /* the product's rows, columns and depth per group */
    int64_t S[3], R[3], P[3], st[3], pad[3], dil[3];
    int64_t xs[5], ws[5], ys[5];
    int64_t nS, nR, nP; /* positions of x, taps of w, positions of y */
    int64_t bias_stride;
    int has_bias;    /* forward adds bias */
    int unit_stride; /* every stride 1: data backward's taps land without a division */
    /* t as digits: (c, r0, r1, r2) forward, (k, r0, r1, r2) data backward, (n, p0, p1, p2) weight
     * backward; t_step: TILE_T in those digits */
    uint32_t t_radix[4], t_step[4];
    /* dbias: (n, p0, p1, p2), and BIAS_THREADS in them */
    uint32_t b_radix[4], b_step[4];
};

/* ---- elements --------------------------------------------------------------------------------- */

/* Storage of a dtype: staged as it is (tensor cores) or converted to FP32. */
template <int DT>
struct Store {
    using raw = uint16_t;
    __device__ static float f32(raw v) { return DT == RUDNN_F16 ? rdg_f16_to_f32(v) : rdg_bf16_to_f32(v); }
    __device__ static void put(void *p, int64_t i, float v)
    {
        ((uint16_t *)p)[i] = DT == RUDNN_F16 ? rdg_f32_to_f16(v) : rdg_f32_to_bf16(v);
    }
    /* exponent all ones: infinite or NaN */
    __device__ static bool finite(raw v)
    {
        return DT == RUDNN_F16 ? (v & 0x7c00u) != 0x7c00u : (v & 0x7f80u) != 0x7f80u;
    }
};
template <>
struct Store<RUDNN_F32> {
    using raw = float;
    __device__ static float f32(raw v) { return v; }
    __device__ static void put(void *p, int64_t i, float v) { ((float *)p)[i] = v; }
    __device__ static bool finite(raw v) { return isfinite(v); }
};

template <int DT>
__device__ __forceinline__ typename Store<DT>::raw ld_raw(const void *p, int64_t i)
{
    return ((const typename Store<DT>::raw *)p)[i];
}

template <int DT>
__device__ __forceinline__ float ld(const void *p, int64_t i)
{
    return Store<DT>::f32(ld_raw<DT>(p, i));
}

/* ---- index helpers ------------------------------------------------------------------------------ */

/* a / b, by 32-bit division where both fit (the usual case: a 64-bit division is a long loop) */
__device__ __forceinline__ uint64_t div_u64(uint64_t a, uint64_t b)
{
    if (((a | b) >> 32) == 0)
        return (uint32_t)a / (uint32_t)b;
    uint64_t q = 0, r = 0;
    for (int i = 63; i >= 0; i--) {
        r = (r << 1) | ((a >> i) & 1u);
        if (r >= b) {
            r -= b;
            q |= (uint64_t)1 << i;
        }
    }
    return q;
}

/* num / stride for data backward's taps: 0 <= num < S + pad < 2^32 and stride <= 2^24 (the
 * contract's limits), so 32 bits divide it */
__device__ __forceinline__ int64_t stride_div(int64_t num, int64_t stride)
{
    return stride == 1 ? num : (int64_t)((uint32_t)num / (uint32_t)stride);
}

/* i -> position (i0, i1, i2) in a box of dims box[0..2], the last fastest */
__device__ __forceinline__ void box_at(uint64_t i, const int64_t box[3], int64_t at[3])
{
    uint64_t q = div_u64(i, (uint64_t)box[2]);
    at[2] = (int64_t)(i - q * (uint64_t)box[2]);
    i = q;
    q = div_u64(i, (uint64_t)box[1]);
    at[1] = (int64_t)(i - q * (uint64_t)box[1]);
    at[0] = (int64_t)q;
}

/* An index as four mixed-radix digits v[0] (outermost, unbounded) .. v[3], advanced by a fixed
 * step (its digits precomputed on the host) with one carry a digit: no division after init. */
struct Digits {
    uint32_t v[4];
    __device__ __forceinline__ void init(uint32_t i, const uint32_t radix[4])
    {
#pragma unroll
        for (int d = 3; d > 0; d--) {
            v[d] = i % radix[d];
            i /= radix[d];
        }
        v[0] = i;
    }
    /* digits and steps are below their radix (at most 2^31), so a sum stays below 2^32 */
    __device__ __forceinline__ void advance(const uint32_t step[4], const uint32_t radix[4])
    {
        uint32_t carry = 0;
#pragma unroll
        for (int d = 3; d > 0; d--) {
            v[d] += step[d] + carry;
            carry = v[d] >= radix[d];
            if (carry)
                v[d] -= radix[d];
        }
        v[0] += step[0] + carry;
    }
};

/* ---- Direct ----------------------------------------------------------------------------------- */

/* A thread per output (g, m, j), in t order as rudnn_conv_direct; j_fast: consecutive threads take
 * consecutive j (channels-last outputs, dw), else consecutive m (the positions of NCHW). */
template <int DIR, int DT>
__global__ void RDG_LAUNCH_BOUNDS(DIRECT_THREADS, 1)
direct_kernel(const ConvArgs a, void *x, void *w, void *y, const void *bias, int j_fast)
{
    const uint64_t M = (uint64_t)a.M, J = (uint64_t)a.J, total = (uint64_t)a.G * M * J;
    for (uint64_t id = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; id < total;
         id += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t m, j, g, rest;
        if (j_fast) {
            rest = div_u64(id, J), j = id - rest * J;
            g = div_u64(rest, M), m = rest - g * M;
        } else {
            rest = div_u64(id, M), m = id - rest * M;
            g = div_u64(rest, J), j = rest - g * J;
        }
        float acc = 0.0f;
        int64_t out;
        if constexpr (DIR == DIR_FWD) {
            const uint64_t n = div_u64(m, (uint64_t)a.nP);
            int64_t p[3];
            box_at(m - n * (uint64_t)a.nP, a.P, p);
            const int64_t k = (int64_t)g * a.Kg + (int64_t)j;
            const int64_t xb = (int64_t)n * a.xs[0] + (int64_t)g * a.Cg * a.xs[1], wb = k * a.ws[0];
            const int64_t i0b = p[0] * a.st[0] - a.pad[0], i1b = p[1] * a.st[1] - a.pad[1];
            const int64_t i2b = p[2] * a.st[2] - a.pad[2];
            for (int64_t c = 0; c < a.Cg; c++)
                for (int64_t r0 = 0; r0 < a.R[0]; r0++) {
                    const int64_t i0 = i0b + r0 * a.dil[0];
                    const bool in0 = i0 >= 0 && i0 < a.S[0];
                    for (int64_t r1 = 0; r1 < a.R[1]; r1++) {
                        const int64_t i1 = i1b + r1 * a.dil[1];
                        const bool in1 = in0 && i1 >= 0 && i1 < a.S[1];
                        for (int64_t r2 = 0; r2 < a.R[2]; r2++) {
                            const int64_t i2 = i2b + r2 * a.dil[2];
                            const bool in = in1 && i2 >= 0 && i2 < a.S[2];
                            const float xv =
                                in ? ld<DT>(x, xb + c * a.xs[1] + i0 * a.xs[2] + i1 * a.xs[3] + i2 * a.xs[4]) : 0.0f;
                            const float wv = ld<DT>(w, wb + c * a.ws[1] + r0 * a.ws[2] + r1 * a.ws[3] + r2 * a.ws[4]);
                            acc = fmaf(xv, wv, acc);
                        }
                    }
                }
            if (a.has_bias)
                acc += ld<DT>(bias, k * a.bias_stride);
            out = (int64_t)n * a.ys[0] + k * a.ys[1] + p[0] * a.ys[2] + p[1] * a.ys[3] + p[2] * a.ys[4];
            Store<DT>::put(y, out, acc);
        } else if constexpr (DIR == DIR_DATA) {
            const uint64_t n = div_u64(m, (uint64_t)a.nS);
            int64_t q[3];
            box_at(m - n * (uint64_t)a.nS, a.S, q);
            const int64_t yb = (int64_t)n * a.ys[0];
            const int64_t wb = (int64_t)j * a.ws[1];
            for (int64_t k = 0; k < a.Kg; k++) {
                const int64_t kk = (int64_t)g * a.Kg + k;
                for (int64_t r0 = 0; r0 < a.R[0]; r0++) {
                    /* tap_lands, one dim at a time */
                    const int64_t num0 = q[0] + a.pad[0] - r0 * a.dil[0];
                    if (num0 < 0)
                        continue;
                    const int64_t p0 = stride_div(num0, a.st[0]);
                    if (p0 * a.st[0] != num0 || p0 >= a.P[0])
                        continue;
                    for (int64_t r1 = 0; r1 < a.R[1]; r1++) {
                        const int64_t num1 = q[1] + a.pad[1] - r1 * a.dil[1];
                        if (num1 < 0)
                            continue;
                        const int64_t p1 = stride_div(num1, a.st[1]);
                        if (p1 * a.st[1] != num1 || p1 >= a.P[1])
                            continue;
                        for (int64_t r2 = 0; r2 < a.R[2]; r2++) {
                            const int64_t num2 = q[2] + a.pad[2] - r2 * a.dil[2];
                            if (num2 < 0)
                                continue;
                            const int64_t p2 = stride_div(num2, a.st[2]);
                            if (p2 * a.st[2] != num2 || p2 >= a.P[2])
                                continue;
                            const float dv =
                                ld<DT>(y, yb + kk * a.ys[1] + p0 * a.ys[2] + p1 * a.ys[3] + p2 * a.ys[4]);
                            const float wv =
                                ld<DT>(w, wb + kk * a.ws[0] + r0 * a.ws[2] + r1 * a.ws[3] + r2 * a.ws[4]);
                            acc = fmaf(dv, wv, acc);
                        }
                    }
                }
            }
            out = (int64_t)n * a.xs[0] + ((int64_t)g * a.Cg + (int64_t)j) * a.xs[1] + q[0] * a.xs[2] +
                  q[1] * a.xs[3] + q[2] * a.xs[4];
            Store<DT>::put(x, out, acc);
        } else {
            const uint64_t c = div_u64(j, (uint64_t)a.nR);
            int64_t r[3];
            box_at(j - c * (uint64_t)a.nR, a.R, r);
            const int64_t k = (int64_t)g * a.Kg + (int64_t)m, ch = (int64_t)g * a.Cg + (int64_t)c;
            const int64_t i0b = r[0] * a.dil[0] - a.pad[0], i1b = r[1] * a.dil[1] - a.pad[1];
            const int64_t i2b = r[2] * a.dil[2] - a.pad[2];
            for (int64_t n = 0; n < a.N; n++) {
                const int64_t yb = n * a.ys[0] + k * a.ys[1], xb = n * a.xs[0] + ch * a.xs[1];
                for (int64_t p0 = 0; p0 < a.P[0]; p0++) {
                    const int64_t i0 = p0 * a.st[0] + i0b;
                    const bool in0 = i0 >= 0 && i0 < a.S[0];
                    for (int64_t p1 = 0; p1 < a.P[1]; p1++) {
                        const int64_t i1 = p1 * a.st[1] + i1b;
                        const bool in1 = in0 && i1 >= 0 && i1 < a.S[1];
                        for (int64_t p2 = 0; p2 < a.P[2]; p2++) {
                            const int64_t i2 = p2 * a.st[2] + i2b;
                            const bool in = in1 && i2 >= 0 && i2 < a.S[2];
                            const float dv = ld<DT>(y, yb + p0 * a.ys[2] + p1 * a.ys[3] + p2 * a.ys[4]);
                            const float xv =
                                in ? ld<DT>(x, xb + i0 * a.xs[2] + i1 * a.xs[3] + i2 * a.xs[4]) : 0.0f;
                            acc = fmaf(dv, xv, acc);
                        }
                    }
                }
            }
            out = k * a.ws[0] + (int64_t)c * a.ws[1] + r[0] * a.ws[2] + r[1] * a.ws[3] + r[2] * a.ws[4];
            Store<DT>::put(w, out, acc);
        }
    }
}

/* ---- the tiled kernels' gather ------------------------------------------------------------------ */

/* What one thread stages of a tile (g, rows m0.., columns j0..): TILE_ROWS rows of A at a_row0 +
 * ROW_STEP i with t = a_tt in the slice, TILE_ROWS columns of B at b_row0 + ROW_STEP i with t =
 * b_tt. A runs its lanes along m in forward and data backward (x and dy are contiguous along the
 * positions of NCHW), along t in weight backward (dy along p); B runs its lanes along t (w along r,
 * x along p). Each row keeps the part of its offset and positions that depends on m (or j), each t
 * counter the part that depends on t: an element is their sum and a bounds test. Pos holds spatial
 * positions. */
template <int DIR, int DT, typename Pos>
struct Gather {
    using raw = typename Store<DT>::raw;
    using UPos = typename std::make_unsigned<Pos>::type;
    static constexpr bool A_ALONG_T = DIR == DIR_WEIGHT;
    static constexpr bool SHARED_T = DIR == DIR_WEIGHT; /* A and B read the same t: one counter */

    int a_row0, a_tt, b_row0, b_tt;
    int64_t a_off[TILE_ROWS], b_off[TILE_ROWS];
    Pos a_pos[TILE_ROWS][3], b_pos[TILE_ROWS][3];
    bool a_ok[TILE_ROWS], b_ok[TILE_ROWS];
    Digits ta, tb;
    int64_t t_a, t_b; /* the counters' t */
    int64_t ta_off, tb_off;
    Pos ta_pos[3], tb_pos[3];

    __device__ __forceinline__ void setup(const ConvArgs &a, int64_t g, int64_t m0, int64_t j0, int lid)
    {
        const int lane_t = lid % TILE_T, lane_r = lid / TILE_T;     /* lanes along t */
        const int rows_r = lid % ROW_STEP, rows_t = lid / ROW_STEP; /* lanes along rows */
        a_row0 = A_ALONG_T ? lane_r : rows_r;
        a_tt = A_ALONG_T ? lane_t : rows_t;
        b_row0 = lane_r;
        b_tt = lane_t;
#pragma unroll
        for (int i = 0; i < TILE_ROWS; i++) {
            const int64_t m = m0 + a_row0 + ROW_STEP * i, j = j0 + b_row0 + ROW_STEP * i;
            a_ok[i] = m < a.M;
            b_ok[i] = j < a.J;
            a_off[i] = b_off[i] = 0;
#pragma unroll
            for (int d = 0; d < 3; d++)
                a_pos[i][d] = b_pos[i][d] = 0;
            if (DIR == DIR_FWD) {
                if (a_ok[i]) {
                    const uint64_t n = div_u64((uint64_t)m, (uint64_t)a.nP);
                    int64_t p[3];
                    box_at((uint64_t)m - n * (uint64_t)a.nP, a.P, p);
                    a_off[i] = (int64_t)n * a.xs[0] + g * a.Cg * a.xs[1];
#pragma unroll
                    for (int d = 0; d < 3; d++) {
                        const int64_t ib = p[d] * a.st[d] - a.pad[d];
                        a_pos[i][d] = (Pos)ib;
                        a_off[i] += ib * a.xs[2 + d];
                    }
                }
                b_off[i] = (g * a.Kg + j) * a.ws[0];
            } else if (DIR == DIR_DATA) {
                if (a_ok[i]) {
                    const uint64_t n = div_u64((uint64_t)m, (uint64_t)a.nS);
                    int64_t q[3];
                    box_at((uint64_t)m - n * (uint64_t)a.nS, a.S, q);
                    a_off[i] = (int64_t)n * a.ys[0] + g * a.Kg * a.ys[1];
#pragma unroll
                    for (int d = 0; d < 3; d++) {
                        const int64_t qp = q[d] + a.pad[d];
                        a_pos[i][d] = (Pos)qp;
                        if (a.unit_stride)
                            a_off[i] += qp * a.ys[2 + d];
                    }
                }
                b_off[i] = g * a.Kg * a.ws[0] + j * a.ws[1];
            } else {
                a_off[i] = (g * a.Kg + m) * a.ys[1];
                if (b_ok[i]) {
                    const uint64_t c = div_u64((uint64_t)j, (uint64_t)a.nR);
                    int64_t r[3];
                    box_at((uint64_t)j - c * (uint64_t)a.nR, a.R, r);
                    b_off[i] = (g * a.Cg + (int64_t)c) * a.xs[1];
#pragma unroll
                    for (int d = 0; d < 3; d++) {
                        const int64_t rd = r[d] * a.dil[d];
                        b_pos[i][d] = (Pos)rd;
                        b_off[i] += rd * a.xs[2 + d];
                    }
                }
            }
        }
        ta.init((uint32_t)a_tt, a.t_radix);
        t_a = a_tt;
        if (!SHARED_T) {
            tb.init((uint32_t)b_tt, a.t_radix);
            t_b = b_tt;
        }
        t_parts(a);
    }

    /* the t-dependent parts of both operands' elements, from the counters */
    __device__ __forceinline__ void t_parts(const ConvArgs &a)
    {
        if (DIR == DIR_FWD) {
            ta_off = (int64_t)ta.v[0] * a.xs[1];
#pragma unroll
            for (int d = 0; d < 3; d++) {
                const int64_t rd = (int64_t)ta.v[1 + d] * a.dil[d];
                ta_pos[d] = (Pos)rd;
                ta_off += rd * a.xs[2 + d];
            }
            tb_off = (int64_t)tb.v[0] * a.ws[1] + (int64_t)tb.v[1] * a.ws[2] + (int64_t)tb.v[2] * a.ws[3] +
                     (int64_t)tb.v[3] * a.ws[4];
        } else if (DIR == DIR_DATA) {
            ta_off = (int64_t)ta.v[0] * a.ys[1];
#pragma unroll
            for (int d = 0; d < 3; d++) {
                const int64_t rd = (int64_t)ta.v[1 + d] * a.dil[d];
                ta_pos[d] = (Pos)rd;
                if (a.unit_stride)
                    ta_off -= rd * a.ys[2 + d];
            }
            tb_off = (int64_t)tb.v[0] * a.ws[0] + (int64_t)tb.v[1] * a.ws[2] + (int64_t)tb.v[2] * a.ws[3] +
                     (int64_t)tb.v[3] * a.ws[4];
        } else {
            ta_off = (int64_t)ta.v[0] * a.ys[0] + (int64_t)ta.v[1] * a.ys[2] + (int64_t)ta.v[2] * a.ys[3] +
                     (int64_t)ta.v[3] * a.ys[4];
            tb_off = (int64_t)ta.v[0] * a.xs[0];
#pragma unroll
            for (int d = 0; d < 3; d++) {
                const int64_t ib = (int64_t)ta.v[1 + d] * a.st[d] - a.pad[d];
                tb_pos[d] = (Pos)ib;
                tb_off += ib * a.xs[2 + d];
            }
        }
    }

    __device__ __forceinline__ void advance(const ConvArgs &a)
    {
        ta.advance(a.t_step, a.t_radix);
        t_a += TILE_T;
        if (!SHARED_T) {
            tb.advance(a.t_step, a.t_radix);
            t_b += TILE_T;
        }
        t_parts(a);
    }

    /* This thread's elements of the current slice: A into ra (fa: the term exists), B into rb;
     * *bad set where a staged w is not finite (data backward). 0 outside the product. */
    __device__ __forceinline__ void load(const ConvArgs &a, const void *x, const void *w, const void *y,
                                         raw (&ra)[TILE_ROWS], bool (&fa)[TILE_ROWS], raw (&rb)[TILE_ROWS],
                                         int *bad) const
    {
        const bool a_t_in = t_a < a.T, b_t_in = (SHARED_T ? t_a : t_b) < a.T;
#pragma unroll
        for (int i = 0; i < TILE_ROWS; i++) {
            bool in = a_ok[i] && a_t_in;
            int64_t off = a_off[i] + ta_off;
            if (DIR == DIR_FWD) {
#pragma unroll
                for (int d = 0; d < 3; d++)
                    in = in && (UPos)(a_pos[i][d] + ta_pos[d]) < (UPos)a.S[d];
                ra[i] = in ? ld_raw<DT>(x, off) : (raw)0;
            } else if (DIR == DIR_DATA) {
                /* tap_lands: q + pad - r dil = p st with 0 <= p < P */
#pragma unroll
                for (int d = 0; d < 3; d++) {
                    const Pos num = a_pos[i][d] - ta_pos[d];
                    if (a.unit_stride) {
                        in = in && (UPos)num < (UPos)a.P[d];
                    } else {
                        /* a negative num fails the test; its quotient is not used */
                        const int64_t p = stride_div((int64_t)num, a.st[d]);
                        in = in && num >= 0 && p * a.st[d] == (int64_t)num && p < a.P[d];
                        off += p * a.ys[2 + d];
                    }
                }
                ra[i] = in ? ld_raw<DT>(y, off) : (raw)0;
            } else {
                ra[i] = in ? ld_raw<DT>(y, off) : (raw)0;
            }
            fa[i] = in;
        }
#pragma unroll
        for (int i = 0; i < TILE_ROWS; i++) {
            bool in = b_ok[i] && b_t_in;
            const int64_t off = b_off[i] + tb_off;
            if (DIR == DIR_WEIGHT) {
#pragma unroll
                for (int d = 0; d < 3; d++)
                    in = in && (UPos)(b_pos[i][d] + tb_pos[d]) < (UPos)a.S[d];
                rb[i] = in ? ld_raw<DT>(x, off) : (raw)0;
            } else {
                rb[i] = in ? ld_raw<DT>(w, off) : (raw)0;
                if (DIR == DIR_DATA && !Store<DT>::finite(rb[i]))
                    *bad = 1;
            }
        }
    }
};

/* The output side of a tile: the m part and the j part of an output's offset, and where it goes. */
template <int DIR, int DT>
struct Out {
    __device__ static int64_t row(const ConvArgs &a, int64_t g, int64_t m)
    {
        if (DIR == DIR_FWD) {
            const uint64_t n = div_u64((uint64_t)m, (uint64_t)a.nP);
            int64_t p[3];
            box_at((uint64_t)m - n * (uint64_t)a.nP, a.P, p);
            return (int64_t)n * a.ys[0] + p[0] * a.ys[2] + p[1] * a.ys[3] + p[2] * a.ys[4];
        } else if (DIR == DIR_DATA) {
            const uint64_t n = div_u64((uint64_t)m, (uint64_t)a.nS);
            int64_t q[3];
            box_at((uint64_t)m - n * (uint64_t)a.nS, a.S, q);
            return (int64_t)n * a.xs[0] + q[0] * a.xs[2] + q[1] * a.xs[3] + q[2] * a.xs[4];
        }
        return (g * a.Kg + m) * a.ws[0];
    }
    __device__ static int64_t col(const ConvArgs &a, int64_t g, int64_t j)
    {
        if (DIR == DIR_FWD)
            return (g * a.Kg + j) * a.ys[1];
        if (DIR == DIR_DATA)
            return (g * a.Cg + j) * a.xs[1];
        const uint64_t c = div_u64((uint64_t)j, (uint64_t)a.nR);
        int64_t r[3];
        box_at((uint64_t)j - c * (uint64_t)a.nR, a.R, r);
        return (int64_t)c * a.ws[1] + r[0] * a.ws[2] + r[1] * a.ws[3] + r[2] * a.ws[4];
    }
    /* forward's bias of column j, added to the sum as out_store does */
    __device__ static float bias_of(const ConvArgs &a, const void *bias, int64_t g, int64_t j)
    {
        return DIR == DIR_FWD && a.has_bias ? ld<DT>(bias, (g * a.Kg + j) * a.bias_stride) : 0.0f;
    }
    __device__ static void *dst(void *x, void *w, void *y) { return DIR == DIR_FWD ? y : DIR == DIR_DATA ? x : w; }
};

/* tile -> (g, m0, j0); j fastest, as OpenCL orders its work-groups */
__device__ __forceinline__ void tile_at(int64_t tile, int64_t tiles_m, int64_t tiles_j, int64_t *g, int64_t *m0,
                                        int64_t *j0)
{
    const int64_t rest = (int64_t)div_u64((uint64_t)tile, (uint64_t)tiles_j);
    *j0 = (tile - rest * tiles_j) * TILE_J;
    *g = (int64_t)div_u64((uint64_t)rest, (uint64_t)tiles_m);
    *m0 = (rest - *g * tiles_m) * TILE_M;
}

/* ---- ImplicitGemm, FP32 register tiles ---------------------------------------------------------- */

/* Thread (tm, tj) = (lid / 16, lid % 16) sums rows 4 tm .. 4 tm + 3 and columns 4 tj .. 4 tj + 3 of
 * the tile, t increasing, as rudnn_conv_igemm does. */
template <int DIR, int DT, typename Pos>
__global__ void RDG_LAUNCH_BOUNDS(CONV_THREADS, 2)
igemm_kernel(const ConvArgs a, void *x, void *w, void *y, const void *bias)
{
    using G = Gather<DIR, DT, Pos>;
    using raw = typename G::raw;
    __shared__ __align__(16) float As[2][TILE_T][SIMT_PITCH];
    __shared__ __align__(16) float Bs[2][TILE_T][SIMT_PITCH];
    __shared__ bool Af[2][TILE_T][DIR == DIR_DATA ? TILE_M : 1]; /* data backward: the term exists */
    const int lid = threadIdx.x, tm = lid / (TILE_J / 4), tj = lid % (TILE_J / 4);
    const int64_t tiles_m = (a.M + TILE_M - 1) / TILE_M, tiles_j = (a.J + TILE_J - 1) / TILE_J;
    const int64_t tiles = a.G * tiles_m * tiles_j, slices = (a.T + TILE_T - 1) / TILE_T;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int64_t g, m0, j0;
        tile_at(tile, tiles_m, tiles_j, &g, &m0, &j0);
        G ga;
        ga.setup(a, g, m0, j0, lid);
        float acc[4][4];
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int v = 0; v < 4; v++)
                acc[u][v] = 0.0f;
        raw ra[TILE_ROWS], rb[TILE_ROWS];
        bool fa[TILE_ROWS];
        int bad = 0;
        ga.load(a, x, w, y, ra, fa, rb, &bad);
        auto stash = [&](int buf) {
#pragma unroll
            for (int i = 0; i < TILE_ROWS; i++) {
                As[buf][ga.a_tt][ga.a_row0 + ROW_STEP * i] = Store<DT>::f32(ra[i]);
                if constexpr (DIR == DIR_DATA)
                    Af[buf][ga.a_tt][ga.a_row0 + ROW_STEP * i] = fa[i];
                Bs[buf][ga.b_tt][ga.b_row0 + ROW_STEP * i] = Store<DT>::f32(rb[i]);
            }
        };
        stash(0);
        int bad_cur = __syncthreads_or(bad);
        for (int64_t s = 0; s < slices; s++) {
            const int cur = (int)(s & 1);
            const bool more = s + 1 < slices;
            bad = 0;
            if (more) { /* the next slice's loads are in flight while this one is summed */
                ga.advance(a);
                ga.load(a, x, w, y, ra, fa, rb, &bad);
            }
            if (DIR == DIR_DATA && bad_cur) {
                /* a w of this slice is not finite: absent taps stay out of the sum */
#pragma unroll
                for (int tt = 0; tt < TILE_T; tt++) {
                    const float4 av = *(const float4 *)&As[cur][tt][4 * tm];
                    const float4 bv = *(const float4 *)&Bs[cur][tt][4 * tj];
                    const float am[4] = {av.x, av.y, av.z, av.w}, bm[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
                    for (int u = 0; u < 4; u++)
                        if (Af[cur][tt][DIR == DIR_DATA ? 4 * tm + u : 0])
#pragma unroll
                            for (int v = 0; v < 4; v++)
                                acc[u][v] = fmaf(am[u], bm[v], acc[u][v]);
                }
            } else {
#pragma unroll
                for (int tt = 0; tt < TILE_T; tt++) {
                    const float4 av = *(const float4 *)&As[cur][tt][4 * tm];
                    const float4 bv = *(const float4 *)&Bs[cur][tt][4 * tj];
                    const float am[4] = {av.x, av.y, av.z, av.w}, bm[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
                    for (int u = 0; u < 4; u++)
#pragma unroll
                        for (int v = 0; v < 4; v++)
                            acc[u][v] = fmaf(am[u], bm[v], acc[u][v]);
                }
            }
            if (more) {
                stash(cur ^ 1); /* summed in the previous slice, which every thread has left */
                bad_cur = __syncthreads_or(bad);
            }
        }
        void *out = Out<DIR, DT>::dst(x, w, y);
        int64_t cols[4];
        float bias_v[4];
#pragma unroll
        for (int v = 0; v < 4; v++) {
            const int64_t j = j0 + 4 * tj + v;
            cols[v] = j < a.J ? Out<DIR, DT>::col(a, g, j) : 0;
            bias_v[v] = j < a.J ? Out<DIR, DT>::bias_of(a, bias, g, j) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int64_t m = m0 + 4 * tm + u;
            if (m >= a.M)
                continue;
            const int64_t rw = Out<DIR, DT>::row(a, g, m);
#pragma unroll
            for (int v = 0; v < 4; v++)
                if (j0 + 4 * tj + v < a.J)
                    Store<DT>::put(out, rw + cols[v], DIR == DIR_FWD && a.has_bias ? acc[u][v] + bias_v[v] : acc[u][v]);
        }
        __syncthreads(); /* the next tile stages into buffer 0 */
    }
}

/* ---- ImplicitGemm, tensor cores (CUDA, F16 and BF16, sm_80+) ------------------------------------ */

#if !RDG_HIP
constexpr int MMA_PITCH = 24; /* 16-bit elements a tile row: the fragment loads hit 32 banks */

/* Tiles staged as the dtype's 16-bit values, [row][t]. Warp w takes rows 32 (w / 4) .. + 31 and
 * columns 16 (w % 4) .. + 15: two m16 by two n8 tiles of mma.sync m16n8k16 a slice. Lane (g, q) =
 * (lane / 4, lane % 4) holds, for its m16 tile mi and n8 tile ni, rows g and g + 8 and columns
 * 2 q, 2 q + 1 (mma_sync.cuh). */
template <int DIR, int DT, typename Pos>
__global__ void RDG_LAUNCH_BOUNDS(CONV_THREADS, 2)
igemm_mma_kernel(const ConvArgs a, void *x, void *w, void *y, const void *bias)
{
    using G = Gather<DIR, DT, Pos>;
    static_assert(sizeof(typename G::raw) == 2, "16-bit dtypes only");
    __shared__ __align__(16) uint16_t Ah[2][TILE_M][MMA_PITCH];
    __shared__ __align__(16) uint16_t Bh[2][TILE_J][MMA_PITCH];
    __shared__ bool Af[2][TILE_T][DIR == DIR_DATA ? TILE_M : 1];
    const int lid = threadIdx.x, warp = lid / 32, lane = lid % 32, gq = lane / 4, tq = lane % 4;
    const int wm = warp / 4, wj = warp % 4;
    const int64_t tiles_m = (a.M + TILE_M - 1) / TILE_M, tiles_j = (a.J + TILE_J - 1) / TILE_J;
    const int64_t tiles = a.G * tiles_m * tiles_j, slices = (a.T + TILE_T - 1) / TILE_T;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int64_t g, m0, j0;
        tile_at(tile, tiles_m, tiles_j, &g, &m0, &j0);
        G ga;
        ga.setup(a, g, m0, j0, lid);
        float acc[2][2][4];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int ni = 0; ni < 2; ni++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[mi][ni][e] = 0.0f;
        uint16_t ra[TILE_ROWS], rb[TILE_ROWS];
        bool fa[TILE_ROWS];
        int bad = 0;
        ga.load(a, x, w, y, ra, fa, rb, &bad);
        auto stash = [&](int buf) {
#pragma unroll
            for (int i = 0; i < TILE_ROWS; i++) {
                Ah[buf][ga.a_row0 + ROW_STEP * i][ga.a_tt] = ra[i];
                if constexpr (DIR == DIR_DATA)
                    Af[buf][ga.a_tt][ga.a_row0 + ROW_STEP * i] = fa[i];
                Bh[buf][ga.b_row0 + ROW_STEP * i][ga.b_tt] = rb[i];
            }
        };
        stash(0);
        int bad_cur = __syncthreads_or(bad);
        for (int64_t s = 0; s < slices; s++) {
            const int cur = (int)(s & 1);
            const bool more = s + 1 < slices;
            bad = 0;
            if (more) {
                ga.advance(a);
                ga.load(a, x, w, y, ra, fa, rb, &bad);
            }
            if (DIR == DIR_DATA && bad_cur) {
                /* a w of this slice is not finite: this thread's outputs summed one term at a time,
                 * absent taps left out */
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int ni = 0; ni < 2; ni++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int r = wm * 32 + mi * 16 + gq + 8 * (e / 2), c = wj * 16 + ni * 8 + 2 * tq + e % 2;
                            for (int tt = 0; tt < TILE_T; tt++)
                                if (Af[cur][tt][DIR == DIR_DATA ? r : 0])
                                    acc[mi][ni][e] = fmaf(Store<DT>::f32(Ah[cur][r][tt]),
                                                          Store<DT>::f32(Bh[cur][c][tt]), acc[mi][ni][e]);
                        }
            } else {
                uint32_t af[2][4], bf[2][2];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    const int r = wm * 32 + mi * 16 + gq;
                    af[mi][0] = *(const uint32_t *)&Ah[cur][r][2 * tq];
                    af[mi][1] = *(const uint32_t *)&Ah[cur][r + 8][2 * tq];
                    af[mi][2] = *(const uint32_t *)&Ah[cur][r][2 * tq + 8];
                    af[mi][3] = *(const uint32_t *)&Ah[cur][r + 8][2 * tq + 8];
                }
#pragma unroll
                for (int ni = 0; ni < 2; ni++) {
                    const int c = wj * 16 + ni * 8 + gq;
                    bf[ni][0] = *(const uint32_t *)&Bh[cur][c][2 * tq];
                    bf[ni][1] = *(const uint32_t *)&Bh[cur][c][2 * tq + 8];
                }
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int ni = 0; ni < 2; ni++)
                        mma16816<DT>(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
            }
            if (more) {
                stash(cur ^ 1);
                bad_cur = __syncthreads_or(bad);
            }
        }
        void *out = Out<DIR, DT>::dst(x, w, y);
        int64_t cols[2][2];
        float bias_v[2][2];
#pragma unroll
        for (int ni = 0; ni < 2; ni++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t j = j0 + wj * 16 + ni * 8 + 2 * tq + h;
                cols[ni][h] = j < a.J ? Out<DIR, DT>::col(a, g, j) : 0;
                bias_v[ni][h] = j < a.J ? Out<DIR, DT>::bias_of(a, bias, g, j) : 0.0f;
            }
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t m = m0 + wm * 32 + mi * 16 + gq + 8 * h;
                if (m >= a.M)
                    continue;
                const int64_t rw = Out<DIR, DT>::row(a, g, m);
#pragma unroll
                for (int ni = 0; ni < 2; ni++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (j0 + wj * 16 + ni * 8 + 2 * tq + e < a.J) {
                            const float v = acc[mi][ni][2 * h + e];
                            Store<DT>::put(out, rw + cols[ni][e],
                                           DIR == DIR_FWD && a.has_bias ? v + bias_v[ni][e] : v);
                        }
            }
        __syncthreads();
    }
}
#endif

/* ---- dbias ---------------------------------------------------------------------------------------- */

/* dbias[k] = sum over n and p of dy[n, k, p]: thread i sums the elements i, i + 256, .. of (n, p)
 * in order, then a fixed tree adds the 256 sums (no atomics: the same bits every run). */
template <int DT>
__global__ void __launch_bounds__(BIAS_THREADS) bias_grad_kernel(const ConvArgs a, const void *dy, void *dbias,
                                                                  int64_t K)
{
    __shared__ float part[BIAS_THREADS];
    const int lid = threadIdx.x;
    const uint64_t count = (uint64_t)a.N * (uint64_t)a.nP;
    for (int64_t k = blockIdx.x; k < K; k += gridDim.x) {
        float acc = 0.0f;
        Digits e;
        e.init((uint32_t)lid, a.b_radix);
        const int64_t kb = k * a.ys[1];
        for (uint64_t i = (uint64_t)lid; i < count; i += BIAS_THREADS) {
            acc += ld<DT>(dy, kb + (int64_t)e.v[0] * a.ys[0] + (int64_t)e.v[1] * a.ys[2] +
                                  (int64_t)e.v[2] * a.ys[3] + (int64_t)e.v[3] * a.ys[4]);
            e.advance(a.b_step, a.b_radix);
        }
        part[lid] = acc;
        __syncthreads();
        for (int s = BIAS_THREADS / 2; s > 0; s /= 2) {
            if (lid < s)
                part[lid] += part[lid + s];
            __syncthreads();
        }
        if (lid == 0)
            Store<DT>::put(dbias, k * a.bias_stride, part[0]);
        __syncthreads();
    }
}

/* ---- host ----------------------------------------------------------------------------------------- */

enum { C_DIRECT_FWD, C_IGEMM_FWD, C_DIRECT_DATA, C_IGEMM_DATA, C_DIRECT_WEIGHT, C_IGEMM_WEIGHT, C_COUNT };

const rudnn_kernel_candidate_t k_candidates[C_COUNT] = {
    {"convolution.direct_forward", RUDNN_CONV_DIRECT, 0},
    {"convolution.igemm_forward", RUDNN_CONV_IMPLICIT_GEMM, 0},
    {"convolution.direct_data", RUDNN_CONV_DIRECT, 0},
    {"convolution.igemm_data", RUDNN_CONV_IMPLICIT_GEMM, 0},
    {"convolution.direct_weight", RUDNN_CONV_DIRECT, 0},
    {"convolution.igemm_weight", RUDNN_CONV_IMPLICIT_GEMM, 0},
};
const int k_directions[C_COUNT] = {
    RUDNN_CONV_FORWARD,       RUDNN_CONV_FORWARD,        RUDNN_CONV_DATA_BACKWARD,
    RUDNN_CONV_DATA_BACKWARD, RUDNN_CONV_WEIGHT_BACKWARD, RUDNN_CONV_WEIGHT_BACKWARD,
};

bool is_igemm(uint32_t c)
{
    return k_candidates[c].strategy == RUDNN_CONV_IMPLICIT_GEMM;
}

/* v as digits of radix (v[0] unbounded) */
void digits_of(uint64_t v, const uint32_t radix[4], uint32_t out[4])
{
    for (int d = 3; d > 0; d--) {
        out[d] = (uint32_t)(v % radix[d]);
        v /= radix[d];
    }
    out[0] = (uint32_t)v;
}

ConvArgs args_of(const rudnn_conv_plan_t *p)
{
    ConvArgs a;
    memset(&a, 0, sizeof a);
    a.N = p->batch;
    a.G = p->groups;
    a.Cg = p->in_channels / p->groups;
    a.Kg = p->out_channels / p->groups;
    a.unit_stride = 1;
    for (int d = 0; d < 3; d++) {
        a.S[d] = p->in_size[d], a.R[d] = p->filter_size[d], a.P[d] = p->out_size[d];
        a.st[d] = p->stride[d], a.pad[d] = p->padding[d], a.dil[d] = p->dilation[d];
        a.unit_stride = a.unit_stride && p->stride[d] == 1;
    }
    for (int i = 0; i < 5; i++)
        a.xs[i] = p->x_stride[i], a.ws[i] = p->w_stride[i], a.ys[i] = p->y_stride[i];
    a.nS = a.S[0] * a.S[1] * a.S[2];
    a.nR = a.R[0] * a.R[1] * a.R[2];
    a.nP = a.P[0] * a.P[1] * a.P[2];
    a.bias_stride = p->bias_stride;
    /* forward reads the bias in its kernel; weight backward writes dbias in a kernel of its own */
    a.has_bias = p->has_bias && p->direction == RUDNN_CONV_FORWARD;
    const int64_t *inner = p->direction == RUDNN_CONV_WEIGHT_BACKWARD ? a.P : a.R;
    switch (p->direction) {
    case RUDNN_CONV_DATA_BACKWARD:
        a.M = a.N * a.nS, a.J = a.Cg, a.T = a.Kg * a.nR;
        a.t_radix[0] = (uint32_t)a.Kg;
        break;
    case RUDNN_CONV_WEIGHT_BACKWARD:
        a.M = a.Kg, a.J = a.Cg * a.nR, a.T = a.N * a.nP;
        a.t_radix[0] = (uint32_t)a.N;
        break;
    default:
        a.M = a.N * a.nP, a.J = a.Kg, a.T = a.Cg * a.nR;
        a.t_radix[0] = (uint32_t)a.Cg;
        break;
    }
    for (int d = 0; d < 3; d++) {
        a.t_radix[1 + d] = (uint32_t)inner[d];
        a.b_radix[1 + d] = (uint32_t)a.P[d];
    }
    a.b_radix[0] = (uint32_t)a.N;
    digits_of(TILE_T, a.t_radix, a.t_step);
    digits_of(BIAS_THREADS, a.b_radix, a.b_step);
    return a;
}

/* Every position, tap offset (r dil) and their sum or difference the gather forms lies within
 * +-(S + 2 pad) of its dim (the filter's span is at most S + 2 pad): int32 holds them where that
 * does. */
bool positions_fit_int32(const rudnn_conv_plan_t *p)
{
    for (int d = 0; d < 3; d++)
        if (p->in_size[d] + 2 * p->padding[d] + 2 > INT32_MAX)
            return false;
    return true;
}

bool narrow(const ConvArgs &a)
{
    return a.M < NARROW || a.J < NARROW;
}

void conv_check(void *device, const rudnn_conv_plan_t *p, uint32_t c, rudnn_candidate_verdict_t *v)
{
    (void)device;
    v->runs = 1;
    v->preferred = 1;
    const ConvArgs a = args_of(p);
    const bool direct_wins = narrow(a);
    if (is_igemm(c) == direct_wins) {
        v->preferred = 0;
        snprintf(v->why, sizeof v->why, "%s",
                 direct_wins ? "a product narrower than 16 rows or columns leaves 64 x 64 tiles mostly idle"
                             : "tiles reuse loads on a GPU: ImplicitGemm is preferred");
    }
}

rudnn_status_t conv_workspace(void *device, const rudnn_conv_plan_t *p, uint32_t c, size_t *bytes)
{
    (void)device, (void)p, (void)c;
    *bytes = 0;
    return RUDNN_STATUS_SUCCESS;
}

int64_t grid_of(int64_t blocks)
{
    return blocks < 1 ? 1 : blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
}

using conv_fn = void (*)(const ConvArgs, void *, void *, void *, const void *);

template <int DIR, int DT>
conv_fn igemm_fn(const rdg_devinfo_t *dev, const rudnn_conv_plan_t *p)
{
    if (!positions_fit_int32(p))
        return igemm_kernel<DIR, DT, int64_t>;
#if !RDG_HIP
    /* the 16-bit dtypes on tensor cores from sm_80 */
    if constexpr (DT != RUDNN_F32)
        if (dev->arch >= 80)
            return igemm_mma_kernel<DIR, DT, int32_t>;
#else
    (void)dev;
#endif
    return igemm_kernel<DIR, DT, int32_t>;
}

template <int DIR, int DT>
rudnn_status_t launch_dir(rdg_queue_t *q, const rudnn_conv_plan_t *p, const ConvArgs &a, bool igemm,
                          const rudnn_conv_operands_t *o)
{
    void *x = rdg_at(o->x), *w = rdg_at(o->w), *y = rdg_at(o->y);
    const void *bias = rdg_at(o->bias);
    if (igemm) {
        const int64_t tiles = a.G * rdg_ceil_div(a.M, TILE_M) * rdg_ceil_div(a.J, TILE_J);
        igemm_fn<DIR, DT>(&q->dev, p)<<<(unsigned)grid_of(tiles), CONV_THREADS, 0, q->stream>>>(a, x, w, y, bias);
    } else {
        /* consecutive threads along the output's contiguous dim where it has one */
        int j_fast = DIR == DIR_WEIGHT || (DIR == DIR_FWD ? a.ys[1] == 1 : a.xs[1] == 1);
        if (a.J == 1)
            j_fast = 0;
        const int64_t total = a.G * a.M * a.J;
        direct_kernel<DIR, DT><<<(unsigned)grid_of(rdg_ceil_div(total, DIRECT_THREADS)), DIRECT_THREADS, 0,
                                 q->stream>>>(a, x, w, y, bias, j_fast);
    }
    return RUDNN_STATUS_SUCCESS;
}

template <int DT>
rudnn_status_t launch(rdg_queue_t *q, const rudnn_conv_plan_t *p, const ConvArgs &a, uint32_t c,
                      const rudnn_conv_operands_t *o)
{
    if (a.M && a.J) {
        switch (p->direction) {
        case RUDNN_CONV_DATA_BACKWARD: TRY((launch_dir<DIR_DATA, DT>(q, p, a, is_igemm(c), o))); break;
        case RUDNN_CONV_WEIGHT_BACKWARD: TRY((launch_dir<DIR_WEIGHT, DT>(q, p, a, is_igemm(c), o))); break;
        default: TRY((launch_dir<DIR_FWD, DT>(q, p, a, is_igemm(c), o))); break;
        }
        TRY(rdg_launched(k_candidates[c].name));
    }
    if (p->direction == RUDNN_CONV_WEIGHT_BACKWARD && p->has_bias) {
        const int64_t K = p->out_channels;
        bias_grad_kernel<DT><<<(unsigned)grid_of(K), BIAS_THREADS, 0, q->stream>>>(a, rdg_at(o->y), rdg_at(o->bias),
                                                                                   K);
        TRY(rdg_launched("convolution dbias"));
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t conv_run(void *queue, const rudnn_conv_plan_t *p, uint32_t c, const rudnn_conv_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (c >= C_COUNT || k_directions[c] != (int)p->direction)
        return rdg_error(RUDNN_STATUS_INTERNAL, "convolution: candidate %u does not compute direction %d", c,
                         (int)p->direction);
    TRY(rdg_use_device(q->dev.index));
    const ConvArgs a = args_of(p);
    rdg_note_kernel(k_candidates[c].name);
    switch (p->dtype) {
    case RUDNN_F32: return launch<RUDNN_F32>(q, p, a, c, o);
    case RUDNN_F16: return launch<RUDNN_F16>(q, p, a, c, o);
    case RUDNN_BF16: return launch<RUDNN_BF16>(q, p, a, c, o);
    default:
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "convolution: dtype %d on this backend", (int)p->dtype);
    }
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_convolution_kernels_t make_convolution_table(void)
{
    rudnn_convolution_kernels_t table;
    memset(&table, 0, sizeof table);
    table.struct_size = (uint32_t)sizeof table;
    table.candidates = k_candidates;
    table.candidate_directions = k_directions;
    table.candidate_count = C_COUNT;
    table.check = conv_check;
    table.workspace = conv_workspace;
    table.run = conv_run;
    return table;
}

} // namespace

const rudnn_convolution_kernels_t *rdg_convolution_table(void)
{
    static const rudnn_convolution_kernels_t table = make_convolution_table();
    return &table;
}
