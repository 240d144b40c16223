/* MoE first-order training on CUDA and HIP (hal/moe_train.h; the rules in include/rudnn/moe_train.h;
 * backends/opencl/kernels/moe_train.cl is the reference followed here, sum for sum where cheap).
 *   moe_train.router_weights / .router_backward
 *       a block a token row (64 to 256 threads, a power of two covering E; a grid-stride loop over
 *       the rows). Thread j < k loads slot j's index and gradient; the softmax's max and sum over
 *       E are block reductions (a butterfly in each warp, then the warps' partials in warp order:
 *       every thread gets the same bits). Totals over the k slots run in slot order.
 *   moe_train.combine_backward_serial / _plane
 *       a block a token: grad_expert rows by all threads along h; each grad_weights sum by one
 *       thread, h ascending (serial), or strided over the block and reduced as above (plane).
 *   moe_train.dispatch_backward
 *       a power-of-two group of threads a token (up to the block of 256), each h a sum in slot order.
 *   moe_train.experts_forward_scalar / _backward_scalar
 *       every output of the SwiGLU experts' training is one FP32 sum in index order (rows ascending
 *       for the weight gradients), by one thread. Two forms of the same sums, picked by
 *       EXPERTS_TILED: 64 x 64 output tiles through shared memory, 16 terms a step (256 threads, 4 x 4
 *       outputs each; a tile of dispatched rows is cut where the expert changes; the weight gradients
 *       a tile per expert), the one used; and one thread an output straight from global memory, the
 *       plain reference. Both add each term with an explicit fmaf in the same order: the same bits.
 * No atomics, no scratch beyond the workspace ops/ hands in (the forward's act, the backward's
 * work), no host synchronisation. Plans come validated from ops/moe_train.c. */
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"
#include "rudnn/moe_train.h"

namespace {

/* Router and combine blocks: a power of two covering the row, within these (multiples of 64, HIP's
 * wavefront). The router's slot arrays hold one entry a thread of the smallest block. */
constexpr int ROW_THREADS_MIN = 64;
constexpr int ROW_THREADS_MAX = 256;
static_assert(RUDNN_MOE_TRAIN_MAX_TOP_K <= ROW_THREADS_MIN, "a router slot per thread");
constexpr int SLOTS = RUDNN_MOE_TRAIN_MAX_TOP_K;

constexpr int DISPATCH_THREADS = 256;
constexpr int ITEM_THREADS = 256; /* the one-thread-an-output experts kernels */

/* The experts' tiles: TILE x TILE outputs a block of TILE_SIDE x TILE_SIDE threads, TILE_K terms of
 * each sum a shared-memory step. */
constexpr int TILE = 64;
constexpr int TILE_K = 16;
constexpr int TILE_SIDE = 16;
constexpr int TILE_THREADS = TILE_SIDE * TILE_SIDE;
constexpr int TILE_PER = TILE / TILE_SIDE; /* outputs a thread along each side */

/* The tiled experts kernels (true) or one thread an output from global memory (false): the same
 * sums in the same order, so the same bits; the latter is the plain reference. */
constexpr bool EXPERTS_TILED = true;

constexpr int64_t GRID_X_MAX = 0x7fffffff;
constexpr int64_t GRID_YZ_MAX = 65535;

__device__ __forceinline__ float quiet_nan()
{
    return __int_as_float(0x7fc00000);
}

/* sigmoid, the stable form (moe_train.cl's sigmoid_of): no overflow of exp for either sign */
__device__ __forceinline__ float sigmoid_of(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

/* silu as the forward of rudnn/moe.h writes it */
__device__ __forceinline__ float silu_of(float g)
{
    return g / (1.0f + expf(-g));
}

/* v as the dtype stores it (moe_train.cl's ROUND_A) */
template <int DT>
__device__ __forceinline__ float round_to(float v)
{
    if constexpr (DT == RUDNN_F16)
        return rdg_f16_to_f32(rdg_f32_to_f16(v));
    else if constexpr (DT == RUDNN_BF16)
        return rdg_bf16_to_f32(rdg_f32_to_bf16(v));
    else
        return v;
}

template <int DT>
__host__ __device__ constexpr int64_t elem_bytes()
{
    return DT == RUDNN_F32 ? 4 : 2;
}

/* run-time dtype (the routing weights of combine_backward) */
__device__ __forceinline__ float ld_any(int dt, const void *p, int64_t i)
{
    return dt == RUDNN_F32 ? Elem<RUDNN_F32>::ld(p, i)
         : dt == RUDNN_F16 ? Elem<RUDNN_F16>::ld(p, i)
                           : Elem<RUDNN_BF16>::ld(p, i);
}

/* Max (MAX) or sum of v over the block, every thread calling (blockDim.x a multiple of the warp):
 * an xor butterfly in each warp (both lanes of a pair add the same two values, so all hold the same
 * bits), then the warps' partials in warp order. partials: RDG_MAX_WARPS floats of shared memory;
 * the leading barrier lets consecutive reductions share them. fmaxf drops NaN as OpenCL's fmax. */
template <bool MAX>
__device__ float block_reduce(float v, float *partials)
{
#pragma unroll
    for (int m = RDG_WARP / 2; m > 0; m >>= 1) {
        const float o = RDG_SHFL_XOR(v, m);
        v = MAX ? fmaxf(v, o) : v + o;
    }
    __syncthreads();
    if (threadIdx.x % RDG_WARP == 0)
        partials[threadIdx.x / RDG_WARP] = v;
    __syncthreads();
    float r = partials[0];
    const int warps = blockDim.x / RDG_WARP;
    for (int w = 1; w < warps; w++)
        r = MAX ? fmaxf(r, partials[w]) : r + partials[w];
    return r;
}

/* ================================================================================
 * The router: selected weights and their backward (moe_train.cl part 1).
 * ================================================================================ */

struct RouterArgs {
    const void *logits;        /* [rows, E] in DT */
    const void *indices;       /* [rows, k] */
    const float *grad_weights; /* [rows, k] (backward) */
    float *weights;            /* [rows, k] (forward) */
    void *grad_logits;         /* [rows, E] in DT (backward) */
    int64_t rows;
    int experts, top_k;
    int sigmoid, renormalize;
    float scale;
};

/* p of expert i of row x: one expression for both kernels and every use (moe_train.cl's score_of) */
template <int DT>
__device__ __forceinline__ float score_of(const void *x, int64_t i, bool sigmoid, float m, float sum)
{
    return sigmoid ? sigmoid_of(Elem<DT>::ld(x, i)) : expf(Elem<DT>::ld(x, i) - m) / sum;
}

/* Row t of the router, forward (weights) or BACKWARD (grad_logits). ids: the selected experts (0 for
 * an index outside [0, E), whose row is then NaN); sel: their scores (softmax renormalized: exp of the
 * selected logits less their own max, whose ratios are the same and do not underflow to 0 / 0). */
template <bool BACKWARD, int DT, class IDX>
__global__ void __launch_bounds__(ROW_THREADS_MAX) router_kernel(RouterArgs a)
{
    __shared__ int ids[SLOTS];
    __shared__ float sel[SLOTS];
    __shared__ float grad[SLOTS];
    __shared__ float coef[SLOTS];
    __shared__ float partials[RDG_MAX_WARPS];
    const int tid = threadIdx.x;
    const int k = a.top_k;
    const bool sigmoid = a.sigmoid != 0, renormalize = a.renormalize != 0;
    for (int64_t t = blockIdx.x; t < a.rows; t += gridDim.x) {
        const void *x = (const char *)a.logits + t * a.experts * elem_bytes<DT>();
        bool out = false;
        if (tid < k) {
            const int64_t i = (int64_t)((const IDX *)a.indices)[t * k + tid];
            out = i < 0 || i >= a.experts;
            ids[tid] = out ? 0 : (int)i;
            if constexpr (BACKWARD)
                grad[tid] = a.grad_weights[t * k + tid];
        }
        const bool invalid = __syncthreads_or((int)out) != 0; /* also publishes ids and grad */

        float m = 0.0f, sum = 1.0f;
        if (!sigmoid && renormalize) {
            const float v = tid < k ? Elem<DT>::ld(x, ids[tid]) : -INFINITY;
            m = block_reduce<true>(v, partials);
            if (tid < k)
                sel[tid] = expf(Elem<DT>::ld(x, ids[tid]) - m);
        } else {
            if (!sigmoid) {
                float v = -INFINITY;
                for (int i = tid; i < a.experts; i += blockDim.x)
                    v = fmaxf(v, Elem<DT>::ld(x, i));
                m = block_reduce<true>(v, partials);
                float acc = 0.0f;
                for (int i = tid; i < a.experts; i += blockDim.x)
                    acc = acc + expf(Elem<DT>::ld(x, i) - m);
                sum = block_reduce<false>(acc, partials);
            }
            if (tid < k)
                sel[tid] = score_of<DT>(x, ids[tid], sigmoid, m, sum);
        }
        __syncthreads();

        float total = 0.0f; /* the selected scores' sum, slot order (every thread: the same bits) */
        for (int j = 0; j < k; j++)
            total = total + sel[j];
        if constexpr (!BACKWARD) {
            if (tid < k) {
                const float p = renormalize ? sel[tid] / total : sel[tid];
                a.weights[t * k + tid] = invalid ? quiet_nan() : a.scale * p;
            }
        } else {
            /* grad_logits[e] = D p[e] + the c[j] of e's occurrences (moe_train.cl's rudnn_router_backward:
             * D only for softmax without renormalization; 1 - p taken as sigmoid(-x); renormalized,
             * every product formed from q = p / total, at most 1) */
            float dot = 0.0f;
            for (int j = 0; j < k; j++)
                dot = dot + grad[j] * (renormalize ? sel[j] / total : sel[j]);
            if (tid < k) {
                const float p = sel[tid];
                float c;
                if (!renormalize) {
                    c = a.scale * grad[tid] * (sigmoid ? p * sigmoid_of(-Elem<DT>::ld(x, ids[tid])) : p);
                } else {
                    const float q = p / total;
                    c = a.scale * (grad[tid] - dot) * (sigmoid ? q * sigmoid_of(-Elem<DT>::ld(x, ids[tid])) : q);
                }
                coef[tid] = c;
            }
            const bool with_dense = !sigmoid && !renormalize;
            const float dense = with_dense ? -a.scale * dot : 0.0f;
            __syncthreads();
            void *gx = (char *)a.grad_logits + t * a.experts * elem_bytes<DT>();
            for (int e = tid; e < a.experts; e += blockDim.x) {
                float v = with_dense ? dense * score_of<DT>(x, e, false, m, sum) : 0.0f;
                for (int j = 0; j < k; j++)
                    if (ids[j] == e)
                        v = v + coef[j];
                Elem<DT>::st(gx, e, invalid ? quiet_nan() : v);
            }
        }
        __syncthreads(); /* the next row rewrites ids, grad, sel and coef */
    }
}

/* ================================================================================
 * combine_backward and dispatch_backward (moe_train.cl part 2). positions[t*k + j] is the
 * dispatched row of (token t, slot j): each output element is written once.
 * ================================================================================ */

struct RowsArgs {
    const void *expert_out;    /* [T*k, H] */
    const uint32_t *positions; /* [T, k] */
    const void *weights;       /* [T, k] in wdt */
    const void *grad_out;      /* [T, H] */
    void *grad_expert;         /* [T*k, H] */
    float *grad_weights;       /* [T, k] */
    const void *grad_rows;     /* [T*k, H] (dispatch_backward) */
    void *grad_input;          /* [T, H] (dispatch_backward) */
    int64_t tokens, hidden;
    int top_k, wdt;
};

/* grad_expert[pos[t, j], :] = w[t, j] grad_out[t, :]; grad_weights[t, j] = sum_h grad_out[t, h]
 * expert_out[pos[t, j], h]: PLANE strided over the block then reduced, else thread j alone, h
 * ascending. */
template <int DT, bool PLANE>
__global__ void __launch_bounds__(ROW_THREADS_MAX) combine_backward_kernel(RowsArgs a)
{
    __shared__ float partials[RDG_MAX_WARPS];
    const int tid = threadIdx.x;
    const int k = a.top_k;
    const int64_t H = a.hidden;
    for (int64_t t = blockIdx.x; t < a.tokens; t += gridDim.x) {
        const uint32_t *pos = a.positions + t * k;
        const int64_t g0 = t * H;
        for (int j = 0; j < k; j++) {
            const float wj = ld_any(a.wdt, a.weights, t * k + j);
            const int64_t row = (int64_t)pos[j] * H;
            for (int64_t h = tid; h < H; h += blockDim.x)
                Elem<DT>::st(a.grad_expert, row + h, wj * Elem<DT>::ld(a.grad_out, g0 + h));
        }
        if constexpr (PLANE) {
            for (int j = 0; j < k; j++) {
                const int64_t row = (int64_t)pos[j] * H;
                float acc = 0.0f;
                for (int64_t h = tid; h < H; h += blockDim.x)
                    acc = fmaf(Elem<DT>::ld(a.grad_out, g0 + h), Elem<DT>::ld(a.expert_out, row + h), acc);
                acc = block_reduce<false>(acc, partials);
                if (tid == 0)
                    a.grad_weights[t * k + j] = acc;
            }
        } else {
            for (int j = tid; j < k; j += blockDim.x) {
                const int64_t row = (int64_t)pos[j] * H;
                float acc = 0.0f;
                for (int64_t h = 0; h < H; h++)
                    acc = fmaf(Elem<DT>::ld(a.grad_out, g0 + h), Elem<DT>::ld(a.expert_out, row + h), acc);
                a.grad_weights[t * k + j] = acc;
            }
        }
    }
}

/* grad_input[t, h] = sum_j grad_rows[pos[t, j], h] in slot order; tpr threads a token. */
template <int DT>
__global__ void __launch_bounds__(DISPATCH_THREADS) dispatch_backward_kernel(RowsArgs a, int tpr)
{
    const int per_block = DISPATCH_THREADS / tpr;
    const int64_t H = a.hidden;
    const int k = a.top_k;
    for (int64_t t = (int64_t)blockIdx.x * per_block + threadIdx.x / tpr; t < a.tokens;
         t += (int64_t)gridDim.x * per_block) {
        const uint32_t *pos = a.positions + t * k;
        for (int64_t h = threadIdx.x % tpr; h < H; h += tpr) {
            float acc = Elem<DT>::ld(a.grad_rows, (int64_t)pos[0] * H + h);
            for (int j = 1; j < k; j++)
                acc = acc + Elem<DT>::ld(a.grad_rows, (int64_t)pos[j] * H + h);
            Elem<DT>::st(a.grad_input, t * H + h, acc);
        }
    }
}

/* ================================================================================
 * The SwiGLU experts' training (moe_train.cl part 3; rudnn/moe_train.h: g, u, a, dg, du). Expert e
 * owns rows offsets[e] .. offsets[e + 1].
 * ================================================================================ */

struct ExpertArgs {
    const void *tokens;         /* x [R, H] */
    const uint32_t *offsets;    /* [E + 1] */
    const void *gate, *up;      /* [E, I, H] */
    const void *down;           /* [E, H, I] */
    float *reserve;             /* [R, 2 I]: g, u */
    void *act;                  /* [R, I] (the forward's scratch) */
    void *out;                  /* [R, H] */
    const void *grad_out;       /* dy [R, H] */
    float *work;                /* [R, 2 I]: dg, du (the backward's scratch) */
    void *grad_tokens;          /* [R, H] */
    float *grad_gate, *grad_up; /* [E, I, H] */
    float *grad_down;           /* [E, H, I] */
    int64_t rows, hidden, inter;
    int experts;
};

/* The expert of row r: the last e with offsets[e] <= r (an expert without rows is never one). */
__device__ __forceinline__ int expert_of_row(const uint32_t *off, int experts, int64_t r)
{
    int lo = 0, hi = experts;
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        if ((int64_t)off[mid] <= r)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The forward's epilogue for (r, i): reserve (g, u) and the activation in DT. */
template <int DT>
__device__ __forceinline__ void store_gate_up(const ExpertArgs &a, int64_t r, int64_t i, float g, float u)
{
    float *res = a.reserve + r * 2 * a.inter;
    res[i] = g;
    res[a.inter + i] = u;
    Elem<DT>::st(a.act, r * a.inter + i, silu_of(g) * u);
}

/* The backward's (dg, du) of (r, i) from da: dg = da u s (1 + g (1 - s)), 1 - s taken as sigmoid(-g);
 * du = da silu(g). */
__device__ __forceinline__ void store_dact(const ExpertArgs &a, int64_t r, int64_t i, float da)
{
    const float *res = a.reserve + r * 2 * a.inter;
    const float g = res[i], u = res[a.inter + i];
    const float s = sigmoid_of(g);
    float *wk = a.work + r * 2 * a.inter;
    wk[i] = da * u * (s * fmaf(g, sigmoid_of(-g), 1.0f));
    wk[a.inter + i] = da * silu_of(g);
}

/* a[r, i] = silu(g) u as the forward rounded it, from the reserve */
template <int DT>
__device__ __forceinline__ float act_of(const ExpertArgs &a, int64_t r, int64_t i)
{
    const float *res = a.reserve + r * 2 * a.inter;
    return round_to<DT>(silu_of(res[i]) * res[a.inter + i]);
}

/* ---- one thread an output, straight from global memory ---- */

/* reserve and act of (r, i); items rows x inter */
template <int DT>
__global__ void __launch_bounds__(ITEM_THREADS) gate_up_items(ExpertArgs a)
{
    const int64_t H = a.hidden, I = a.inter;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.rows * I;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = id / I, i = id % I;
        const int e = expert_of_row(a.offsets, a.experts, r);
        const int64_t w = (e * I + i) * H;
        float g = 0.0f, u = 0.0f;
        for (int64_t h = 0; h < H; h++) {
            const float xv = Elem<DT>::ld(a.tokens, r * H + h);
            g = fmaf(xv, Elem<DT>::ld(a.gate, w + h), g);
            u = fmaf(xv, Elem<DT>::ld(a.up, w + h), u);
        }
        store_gate_up<DT>(a, r, i, g, u);
    }
}

/* out[r, h] = sum_i act[r, i] down[e, h, i]; items rows x hidden */
template <int DT>
__global__ void __launch_bounds__(ITEM_THREADS) down_items(ExpertArgs a)
{
    const int64_t H = a.hidden, I = a.inter;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.rows * H;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = id / H, h = id % H;
        const int e = expert_of_row(a.offsets, a.experts, r);
        const int64_t w = (e * H + h) * I;
        float acc = 0.0f;
        for (int64_t i = 0; i < I; i++)
            acc = fmaf(Elem<DT>::ld(a.act, r * I + i), Elem<DT>::ld(a.down, w + i), acc);
        Elem<DT>::st(a.out, r * H + h, acc);
    }
}

/* work (dg, du) of (r, i), da = sum_h dy[r, h] down[e, h, i]; items rows x inter */
template <int DT>
__global__ void __launch_bounds__(ITEM_THREADS) dact_items(ExpertArgs a)
{
    const int64_t H = a.hidden, I = a.inter;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.rows * I;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = id / I, i = id % I;
        const int e = expert_of_row(a.offsets, a.experts, r);
        const int64_t w = e * H * I + i;
        float da = 0.0f;
        for (int64_t h = 0; h < H; h++)
            da = fmaf(Elem<DT>::ld(a.grad_out, r * H + h), Elem<DT>::ld(a.down, w + h * I), da);
        store_dact(a, r, i, da);
    }
}

/* grad_tokens[r, h] = sum_i dg[r, i] gate[e, i, h] + du[r, i] up[e, i, h]; items rows x hidden */
template <int DT>
__global__ void __launch_bounds__(ITEM_THREADS) dx_items(ExpertArgs a)
{
    const int64_t H = a.hidden, I = a.inter;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.rows * H;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = id / H, h = id % H;
        const int e = expert_of_row(a.offsets, a.experts, r);
        const float *wk = a.work + r * 2 * I;
        const int64_t w = e * I * H + h;
        float acc = 0.0f;
        for (int64_t i = 0; i < I; i++) {
            acc = fmaf(wk[i], Elem<DT>::ld(a.gate, w + i * H), acc);
            acc = fmaf(wk[I + i], Elem<DT>::ld(a.up, w + i * H), acc);
        }
        Elem<DT>::st(a.grad_tokens, r * H + h, acc);
    }
}

/* grad_gate[e, i, h] = sum over e's rows of dg[r, i] x[r, h], grad_up with du; items E x I x H */
template <int DT>
__global__ void __launch_bounds__(ITEM_THREADS) dw_gate_up_items(ExpertArgs a)
{
    const int64_t H = a.hidden, I = a.inter, per_expert = I * H;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.experts * per_expert;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = id / per_expert, i = id % per_expert / H, h = id % H;
        float sg = 0.0f, su = 0.0f;
        for (int64_t r = a.offsets[e]; r < (int64_t)a.offsets[e + 1]; r++) {
            const float xv = Elem<DT>::ld(a.tokens, r * H + h);
            const float *wk = a.work + r * 2 * I;
            sg = fmaf(wk[i], xv, sg);
            su = fmaf(wk[I + i], xv, su);
        }
        a.grad_gate[id] = sg;
        a.grad_up[id] = su;
    }
}

/* grad_down[e, h, i] = sum over e's rows of dy[r, h] a[r, i]; items E x H x I */
template <int DT>
__global__ void __launch_bounds__(ITEM_THREADS) dw_down_items(ExpertArgs a)
{
    const int64_t H = a.hidden, I = a.inter, per_expert = H * I;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.experts * per_expert;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = id / per_expert, h = id % per_expert / I, i = id % I;
        float acc = 0.0f;
        for (int64_t r = a.offsets[e]; r < (int64_t)a.offsets[e + 1]; r++) {
            const float av = act_of<DT>(a, r, i);
            acc = fmaf(Elem<DT>::ld(a.grad_out, r * H + h), av, acc);
        }
        a.grad_down[id] = acc;
    }
}

/* ---- tiles through shared memory ----
 * A step holds TILE_K terms of the sums of a TILE x TILE block of outputs: s[k][m] of each operand
 * (a row of padding against bank conflicts). Thread (tx, ty) owns outputs (ty + 16 p, tx + 16 q)
 * and adds its terms k ascending, one fmaf each, as the one-thread-an-output kernels do. */

struct Tile {
    float v[TILE_K][TILE + 1];
};

/* s[k][mn] = at(mn, k) for mn < mn_n and k < k_n, 0 elsewhere. K_FAST: consecutive threads take
 * consecutive k (an operand contiguous along k), else consecutive mn: coalesced either way. */
template <bool K_FAST, class At>
__device__ __forceinline__ void fill_tile(Tile &s, int mn_n, int k_n, At at)
{
#pragma unroll
    for (int step = 0; step < TILE * TILE_K / TILE_THREADS; step++) {
        const int q = (int)threadIdx.x + step * TILE_THREADS;
        const int mn = K_FAST ? q / TILE_K : q % TILE;
        const int k = K_FAST ? q % TILE_K : q / TILE;
        s.v[k][mn] = mn < mn_n && k < k_n ? at(mn, k) : 0.0f;
    }
}

/* acc[p][q] += sum over k < k_n of a[k][m] b[k][n] (PAIR: then + a2[k][m] b2[k][n] after each
 * term, dx's interleaved sum), k ascending. */
template <bool PAIR>
__device__ __forceinline__ void tile_mac(float (&acc)[TILE_PER][TILE_PER], const Tile &a, const Tile &b,
                                         const Tile &a2, const Tile &b2, int k_n)
{
    const int tx = threadIdx.x % TILE_SIDE, ty = threadIdx.x / TILE_SIDE;
    auto step = [&](int k) {
        float av[TILE_PER], bv[TILE_PER];
#pragma unroll
        for (int p = 0; p < TILE_PER; p++) {
            av[p] = a.v[k][ty + TILE_SIDE * p];
            bv[p] = b.v[k][tx + TILE_SIDE * p];
        }
#pragma unroll
        for (int p = 0; p < TILE_PER; p++)
#pragma unroll
            for (int q = 0; q < TILE_PER; q++)
                acc[p][q] = fmaf(av[p], bv[q], acc[p][q]);
        if constexpr (PAIR) {
#pragma unroll
            for (int p = 0; p < TILE_PER; p++) {
                av[p] = a2.v[k][ty + TILE_SIDE * p];
                bv[p] = b2.v[k][tx + TILE_SIDE * p];
            }
#pragma unroll
            for (int p = 0; p < TILE_PER; p++)
#pragma unroll
                for (int q = 0; q < TILE_PER; q++)
                    acc[p][q] = fmaf(av[p], bv[q], acc[p][q]);
        }
    };
    if (k_n == TILE_K) {
#pragma unroll
        for (int k = 0; k < TILE_K; k++)
            step(k);
    } else {
        for (int k = 0; k < k_n; k++)
            step(k);
    }
}

__device__ __forceinline__ void tile_mac(float (&acc)[TILE_PER][TILE_PER], const Tile &a, const Tile &b, int k_n)
{
    tile_mac<false>(acc, a, b, a, b, k_n);
}

/* Calls out(m, n, p, q) for each output (m < m_n, n < n_n) of this thread (acc[p][q]). */
template <class Out>
__device__ __forceinline__ void tile_store(int m_n, int n_n, Out out)
{
    const int tx = threadIdx.x % TILE_SIDE, ty = threadIdx.x / TILE_SIDE;
#pragma unroll
    for (int p = 0; p < TILE_PER; p++)
#pragma unroll
        for (int q = 0; q < TILE_PER; q++) {
            const int m = ty + TILE_SIDE * p, n = tx + TILE_SIDE * q;
            if (m < m_n && n < n_n)
                out(m, n, p, q);
        }
}

__device__ __forceinline__ void zero(float (&acc)[TILE_PER][TILE_PER])
{
#pragma unroll
    for (int p = 0; p < TILE_PER; p++)
#pragma unroll
        for (int q = 0; q < TILE_PER; q++)
            acc[p][q] = 0.0f;
}

/* The rows kernels' work: block x takes rows [x TILE, x TILE + TILE) and cuts them where the expert
 * changes; columns in tiles of TILE (a grid-stride loop in y). body(e, first row, rows <= TILE,
 * first column, columns <= TILE) for each piece, block-uniform (it may hold barriers). */
template <class Body>
__device__ __forceinline__ void for_each_row_piece(const ExpertArgs &a, int64_t cols, Body body)
{
    const int64_t r0 = (int64_t)blockIdx.x * TILE;
    const int64_t r1 = min(a.rows, r0 + TILE);
    const int e_lo = expert_of_row(a.offsets, a.experts, r0);
    const int e_hi = expert_of_row(a.offsets, a.experts, r1 - 1);
    for (int64_t c0 = (int64_t)blockIdx.y * TILE; c0 < cols; c0 += (int64_t)gridDim.y * TILE) {
        const int c_n = (int)min((int64_t)TILE, cols - c0);
        for (int e = e_lo; e <= e_hi; e++) {
            const int64_t beg = max((int64_t)a.offsets[e], r0), end = min((int64_t)a.offsets[e + 1], r1);
            if (beg < end)
                body(e, beg, (int)(end - beg), c0, c_n);
        }
    }
}

/* g, u = x gate[e]^T, x up[e]^T over h; reserve and act. Grid: rows tiles x inter tiles. */
template <int DT>
__global__ void __launch_bounds__(TILE_THREADS) gate_up_tiled(ExpertArgs a)
{
    __shared__ Tile xs, gs, us;
    const int64_t H = a.hidden, I = a.inter;
    for_each_row_piece(a, I, [&](int e, int64_t r0, int m_n, int64_t i0, int n_n) {
        float g[TILE_PER][TILE_PER], u[TILE_PER][TILE_PER];
        zero(g);
        zero(u);
        const int64_t w0 = ((int64_t)e * I + i0) * H;
        for (int64_t h0 = 0; h0 < H; h0 += TILE_K) {
            const int k_n = (int)min((int64_t)TILE_K, H - h0);
            __syncthreads(); /* the last step's reads are done */
            fill_tile<true>(xs, m_n, k_n, [&](int m, int k) { return Elem<DT>::ld(a.tokens, (r0 + m) * H + h0 + k); });
            fill_tile<true>(gs, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.gate, w0 + n * H + h0 + k); });
            fill_tile<true>(us, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.up, w0 + n * H + h0 + k); });
            __syncthreads();
            tile_mac(g, xs, gs, k_n);
            tile_mac(u, xs, us, k_n);
        }
        tile_store(m_n, n_n,
                   [&](int m, int n, int p, int q) { store_gate_up<DT>(a, r0 + m, i0 + n, g[p][q], u[p][q]); });
    });
}

/* out = act down[e]^T over i. Grid: rows tiles x hidden tiles. */
template <int DT>
__global__ void __launch_bounds__(TILE_THREADS) down_tiled(ExpertArgs a)
{
    __shared__ Tile as, ds;
    const int64_t H = a.hidden, I = a.inter;
    for_each_row_piece(a, H, [&](int e, int64_t r0, int m_n, int64_t h0, int n_n) {
        float acc[TILE_PER][TILE_PER];
        zero(acc);
        const int64_t w0 = ((int64_t)e * H + h0) * I;
        for (int64_t i0 = 0; i0 < I; i0 += TILE_K) {
            const int k_n = (int)min((int64_t)TILE_K, I - i0);
            __syncthreads();
            fill_tile<true>(as, m_n, k_n, [&](int m, int k) { return Elem<DT>::ld(a.act, (r0 + m) * I + i0 + k); });
            fill_tile<true>(ds, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.down, w0 + n * I + i0 + k); });
            __syncthreads();
            tile_mac(acc, as, ds, k_n);
        }
        tile_store(m_n, n_n,
                   [&](int m, int n, int p, int q) { Elem<DT>::st(a.out, (r0 + m) * H + h0 + n, acc[p][q]); });
    });
}

/* da = dy down[e] over h, then work (dg, du). Grid: rows tiles x inter tiles. */
template <int DT>
__global__ void __launch_bounds__(TILE_THREADS) dact_tiled(ExpertArgs a)
{
    __shared__ Tile ys, ds;
    const int64_t H = a.hidden, I = a.inter;
    for_each_row_piece(a, I, [&](int e, int64_t r0, int m_n, int64_t i0, int n_n) {
        float da[TILE_PER][TILE_PER];
        zero(da);
        const int64_t w0 = (int64_t)e * H * I + i0;
        for (int64_t h0 = 0; h0 < H; h0 += TILE_K) {
            const int k_n = (int)min((int64_t)TILE_K, H - h0);
            __syncthreads();
            fill_tile<true>(ys, m_n, k_n,
                            [&](int m, int k) { return Elem<DT>::ld(a.grad_out, (r0 + m) * H + h0 + k); });
            fill_tile<false>(ds, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.down, w0 + (h0 + k) * I + n); });
            __syncthreads();
            tile_mac(da, ys, ds, k_n);
        }
        tile_store(m_n, n_n, [&](int m, int n, int p, int q) { store_dact(a, r0 + m, i0 + n, da[p][q]); });
    });
}

/* grad_tokens = dg gate[e] + du up[e] over i, the two terms of each i in turn. Grid: rows tiles x
 * hidden tiles. */
template <int DT>
__global__ void __launch_bounds__(TILE_THREADS) dx_tiled(ExpertArgs a)
{
    __shared__ Tile dgs, dus, gs, us;
    const int64_t H = a.hidden, I = a.inter;
    for_each_row_piece(a, H, [&](int e, int64_t r0, int m_n, int64_t h0, int n_n) {
        float acc[TILE_PER][TILE_PER];
        zero(acc);
        const int64_t w0 = (int64_t)e * I * H + h0;
        for (int64_t i0 = 0; i0 < I; i0 += TILE_K) {
            const int k_n = (int)min((int64_t)TILE_K, I - i0);
            __syncthreads();
            fill_tile<true>(dgs, m_n, k_n, [&](int m, int k) { return a.work[(r0 + m) * 2 * I + i0 + k]; });
            fill_tile<true>(dus, m_n, k_n, [&](int m, int k) { return a.work[(r0 + m) * 2 * I + I + i0 + k]; });
            fill_tile<false>(gs, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.gate, w0 + (i0 + k) * H + n); });
            fill_tile<false>(us, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.up, w0 + (i0 + k) * H + n); });
            __syncthreads();
            tile_mac<true>(acc, dgs, gs, dus, us, k_n);
        }
        tile_store(m_n, n_n, [&](int m, int n, int p, int q) {
            Elem<DT>::st(a.grad_tokens, (r0 + m) * H + h0 + n, acc[p][q]);
        });
    });
}

/* The weight gradients' work: block (x, y, z) takes columns tile x of cols, rows tiles y (of rows_n)
 * and expert z (grid-stride loops in y and z); body(e, first row, rows, first column, columns) with
 * the sums over e's dispatched rows inside. */
template <class Body>
__device__ __forceinline__ void for_each_weight_tile(const ExpertArgs &a, int64_t rows_n, int64_t cols, Body body)
{
    const int64_t c0 = (int64_t)blockIdx.x * TILE;
    const int c_n = (int)min((int64_t)TILE, cols - c0);
    for (int e = blockIdx.z; e < a.experts; e += gridDim.z)
        for (int64_t m0 = (int64_t)blockIdx.y * TILE; m0 < rows_n; m0 += (int64_t)gridDim.y * TILE)
            body(e, m0, (int)min((int64_t)TILE, rows_n - m0), c0, c_n);
}

/* grad_gate[e] = dg^T x, grad_up[e] = du^T x over e's rows, ascending. Grid: hidden tiles x inter
 * tiles x experts. */
template <int DT>
__global__ void __launch_bounds__(TILE_THREADS) dw_gate_up_tiled(ExpertArgs a)
{
    __shared__ Tile dgs, dus, xs;
    const int64_t H = a.hidden, I = a.inter;
    for_each_weight_tile(a, I, H, [&](int e, int64_t i0, int m_n, int64_t h0, int n_n) {
        float sg[TILE_PER][TILE_PER], su[TILE_PER][TILE_PER];
        zero(sg);
        zero(su);
        const int64_t end = a.offsets[e + 1];
        for (int64_t q0 = a.offsets[e]; q0 < end; q0 += TILE_K) {
            const int k_n = (int)min((int64_t)TILE_K, end - q0);
            __syncthreads();
            fill_tile<false>(dgs, m_n, k_n, [&](int m, int k) { return a.work[(q0 + k) * 2 * I + i0 + m]; });
            fill_tile<false>(dus, m_n, k_n, [&](int m, int k) { return a.work[(q0 + k) * 2 * I + I + i0 + m]; });
            fill_tile<false>(xs, n_n, k_n, [&](int n, int k) { return Elem<DT>::ld(a.tokens, (q0 + k) * H + h0 + n); });
            __syncthreads();
            tile_mac(sg, dgs, xs, k_n);
            tile_mac(su, dus, xs, k_n);
        }
        tile_store(m_n, n_n, [&](int m, int n, int p, int q) {
            const int64_t o = ((int64_t)e * I + i0 + m) * H + h0 + n;
            a.grad_gate[o] = sg[p][q];
            a.grad_up[o] = su[p][q];
        });
    });
}

/* grad_down[e] = dy^T act over e's rows, ascending (act from the reserve, rounded as the forward's).
 * Grid: inter tiles x hidden tiles x experts. */
template <int DT>
__global__ void __launch_bounds__(TILE_THREADS) dw_down_tiled(ExpertArgs a)
{
    __shared__ Tile ys, as;
    const int64_t H = a.hidden, I = a.inter;
    for_each_weight_tile(a, H, I, [&](int e, int64_t h0, int m_n, int64_t i0, int n_n) {
        float acc[TILE_PER][TILE_PER];
        zero(acc);
        const int64_t end = a.offsets[e + 1];
        for (int64_t q0 = a.offsets[e]; q0 < end; q0 += TILE_K) {
            const int k_n = (int)min((int64_t)TILE_K, end - q0);
            __syncthreads();
            fill_tile<false>(ys, m_n, k_n,
                             [&](int m, int k) { return Elem<DT>::ld(a.grad_out, (q0 + k) * H + h0 + m); });
            fill_tile<false>(as, n_n, k_n, [&](int n, int k) { return act_of<DT>(a, q0 + k, i0 + n); });
            __syncthreads();
            tile_mac(acc, ys, as, k_n);
        }
        tile_store(m_n, n_n, [&](int m, int n, int p, int q) {
            a.grad_down[((int64_t)e * H + h0 + m) * I + i0 + n] = acc[p][q];
        });
    });
}

/* ================================================================================
 * Launchers
 * ================================================================================ */

/* a power of two covering n, within [ROW_THREADS_MIN, ROW_THREADS_MAX] */
int row_threads(int64_t n)
{
    int t = ROW_THREADS_MIN;
    while (t < ROW_THREADS_MAX && t < n)
        t *= 2;
    return t;
}

unsigned grid_x(int64_t blocks)
{
    return (unsigned)(blocks < 1 ? 1 : blocks > GRID_X_MAX ? GRID_X_MAX : blocks);
}

unsigned grid_yz(int64_t blocks)
{
    return (unsigned)(blocks < 1 ? 1 : blocks > GRID_YZ_MAX ? GRID_YZ_MAX : blocks);
}

bool float_dtype(rudnn_dtype_t dt)
{
    return dt == RUDNN_F32 || dt == RUDNN_F16 || dt == RUDNN_BF16;
}

typedef void (*router_fn)(RouterArgs);

template <bool BACKWARD, int DT>
router_fn router_for_index(rudnn_dtype_t index_dtype)
{
    switch (index_dtype) {
    case RUDNN_U32: return router_kernel<BACKWARD, DT, uint32_t>;
    case RUDNN_I32: return router_kernel<BACKWARD, DT, int32_t>;
    case RUDNN_I64: return router_kernel<BACKWARD, DT, int64_t>;
    default: return nullptr;
    }
}

template <bool BACKWARD>
router_fn router_for(rudnn_dtype_t dtype, rudnn_dtype_t index_dtype)
{
    switch (dtype) {
    case RUDNN_F32: return router_for_index<BACKWARD, RUDNN_F32>(index_dtype);
    case RUDNN_F16: return router_for_index<BACKWARD, RUDNN_F16>(index_dtype);
    case RUDNN_BF16: return router_for_index<BACKWARD, RUDNN_BF16>(index_dtype);
    default: return nullptr;
    }
}

template <bool BACKWARD>
rudnn_status_t router_run(void *queue, const rudnn_router_train_plan_t *p, const RouterArgs &a, const char *name)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const router_fn fn = router_for<BACKWARD>(p->dtype, p->index_dtype);
    if (!fn)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: logits dtype %d with index dtype %d on this backend",
                         name, (int)p->dtype, (int)p->index_dtype);
    TRY(rdg_use_device(q->dev.index));
    if (p->rows < 1)
        return RUDNN_STATUS_SUCCESS;
    rdg_note_kernel(name);
    fn<<<grid_x(p->rows), row_threads(p->experts), 0, q->stream>>>(a);
    return rdg_launched(name);
}

RouterArgs router_args(const rudnn_router_train_plan_t *p, rudnn_mem_ref_t logits, rudnn_mem_ref_t indices)
{
    RouterArgs a;
    memset(&a, 0, sizeof a);
    a.logits = rdg_at(logits);
    a.indices = rdg_at(indices);
    a.rows = p->rows;
    a.experts = p->experts;
    a.top_k = p->top_k;
    a.sigmoid = p->sigmoid != 0;
    a.renormalize = p->renormalize != 0;
    a.scale = p->scale;
    return a;
}

rudnn_status_t router_weights(void *queue, const rudnn_router_train_plan_t *p, rudnn_mem_ref_t logits,
                              rudnn_mem_ref_t indices, rudnn_mem_ref_t weights)
{
    RouterArgs a = router_args(p, logits, indices);
    a.weights = (float *)rdg_at(weights);
    return router_run<false>(queue, p, a, "moe_train.router_weights");
}

rudnn_status_t router_backward(void *queue, const rudnn_router_train_plan_t *p, rudnn_mem_ref_t logits,
                               rudnn_mem_ref_t indices, rudnn_mem_ref_t grad_weights, rudnn_mem_ref_t grad_logits)
{
    RouterArgs a = router_args(p, logits, indices);
    a.grad_weights = (const float *)rdg_at(grad_weights);
    a.grad_logits = rdg_at(grad_logits);
    return router_run<true>(queue, p, a, "moe_train.router_backward");
}

/* The rows ops' dtypes (with_weights: the routing weights' too), the device made current;
 * NOT_SUPPORTED for dtypes the kernels lack. */
rudnn_status_t rows_begin(rdg_queue_t *q, const rudnn_moe_rows_plan_t *p, bool with_weights, const char *name)
{
    if (!float_dtype(p->dtype) || (with_weights && !float_dtype(p->weight_dtype)))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: rows dtype %d with routing weights dtype %d on this backend",
                         name, (int)p->dtype, (int)p->weight_dtype);
    return rdg_use_device(q->dev.index);
}

typedef void (*rows_fn)(RowsArgs);

template <bool PLANE>
rows_fn combine_backward_for(rudnn_dtype_t dt)
{
    return dt == RUDNN_F32 ? combine_backward_kernel<RUDNN_F32, PLANE>
         : dt == RUDNN_F16 ? combine_backward_kernel<RUDNN_F16, PLANE>
                           : combine_backward_kernel<RUDNN_BF16, PLANE>;
}

rudnn_status_t combine_backward(void *queue, const rudnn_moe_rows_plan_t *p, int plane, rudnn_mem_ref_t expert_out,
                                rudnn_mem_ref_t positions, rudnn_mem_ref_t weights, rudnn_mem_ref_t grad_out,
                                rudnn_mem_ref_t grad_expert, rudnn_mem_ref_t grad_weights)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const char *name = plane ? "moe_train.combine_backward_plane" : "moe_train.combine_backward_serial";
    TRY(rows_begin(q, p, true, name));
    if (p->tokens < 1)
        return RUDNN_STATUS_SUCCESS;
    RowsArgs a;
    memset(&a, 0, sizeof a);
    a.expert_out = rdg_at(expert_out);
    a.positions = (const uint32_t *)rdg_at(positions);
    a.weights = rdg_at(weights);
    a.grad_out = rdg_at(grad_out);
    a.grad_expert = rdg_at(grad_expert);
    a.grad_weights = (float *)rdg_at(grad_weights);
    a.tokens = p->tokens;
    a.hidden = p->hidden;
    a.top_k = p->top_k;
    a.wdt = (int)p->weight_dtype;
    const rows_fn fn = plane ? combine_backward_for<true>(p->dtype) : combine_backward_for<false>(p->dtype);
    rdg_note_kernel(name);
    fn<<<grid_x(p->tokens), row_threads(p->hidden), 0, q->stream>>>(a);
    return rdg_launched(name);
}

rudnn_status_t dispatch_backward(void *queue, const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t grad_rows,
                                 rudnn_mem_ref_t positions, rudnn_mem_ref_t grad_input)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const char *name = "moe_train.dispatch_backward";
    TRY(rows_begin(q, p, false, name));
    if (p->tokens < 1)
        return RUDNN_STATUS_SUCCESS;
    RowsArgs a;
    memset(&a, 0, sizeof a);
    a.grad_rows = rdg_at(grad_rows);
    a.positions = (const uint32_t *)rdg_at(positions);
    a.grad_input = rdg_at(grad_input);
    a.tokens = p->tokens;
    a.hidden = p->hidden;
    a.top_k = p->top_k;
    int tpr = 1; /* threads a token: a power of two covering H, up to the block */
    while (tpr < DISPATCH_THREADS && tpr < p->hidden)
        tpr *= 2;
    const unsigned grid = grid_x(rdg_ceil_div(p->tokens, DISPATCH_THREADS / tpr));
    rdg_note_kernel(name);
    switch (p->dtype) {
    case RUDNN_F32: dispatch_backward_kernel<RUDNN_F32><<<grid, DISPATCH_THREADS, 0, q->stream>>>(a, tpr); break;
    case RUDNN_F16: dispatch_backward_kernel<RUDNN_F16><<<grid, DISPATCH_THREADS, 0, q->stream>>>(a, tpr); break;
    default: dispatch_backward_kernel<RUDNN_BF16><<<grid, DISPATCH_THREADS, 0, q->stream>>>(a, tpr); break;
    }
    return rdg_launched(name);
}

/* ---- the experts ---- */

ExpertArgs expert_args(const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets,
                       rudnn_mem_ref_t gate, rudnn_mem_ref_t up, rudnn_mem_ref_t down, rudnn_mem_ref_t reserve)
{
    ExpertArgs a;
    memset(&a, 0, sizeof a);
    a.tokens = rdg_at(tokens);
    a.offsets = (const uint32_t *)rdg_at(offsets);
    a.gate = rdg_at(gate);
    a.up = rdg_at(up);
    a.down = rdg_at(down);
    a.reserve = (float *)rdg_at(reserve);
    a.rows = p->rows;
    a.hidden = p->hidden;
    a.inter = p->inter;
    a.experts = p->experts;
    return a;
}

/* One launch of an experts kernel; name for a failure. */
rudnn_status_t launch(void (*fn)(ExpertArgs), dim3 grid, int threads, rdg_queue_t *q, const ExpertArgs &a,
                      const char *name)
{
    fn<<<grid, threads, 0, q->stream>>>(a);
    return rdg_launched(name);
}

/* one-thread-an-output grid over n items */
dim3 items_grid(int64_t n)
{
    return dim3(grid_x(rdg_ceil_div(n, ITEM_THREADS)));
}

/* rows tiles x column tiles */
dim3 rows_grid(const ExpertArgs &a, int64_t cols)
{
    return dim3(grid_x(rdg_ceil_div(a.rows, TILE)), grid_yz(rdg_ceil_div(cols, TILE)));
}

/* column tiles x row tiles x experts */
dim3 weights_grid(const ExpertArgs &a, int64_t rows_n, int64_t cols)
{
    return dim3(grid_x(rdg_ceil_div(cols, TILE)), grid_yz(rdg_ceil_div(rows_n, TILE)), grid_yz(a.experts));
}

template <int DT>
rudnn_status_t forward_run(rdg_queue_t *q, const ExpertArgs &a)
{
    const char *name = "moe_train.experts_forward_scalar";
    if (EXPERTS_TILED) {
        TRY(launch(gate_up_tiled<DT>, rows_grid(a, a.inter), TILE_THREADS, q, a, name));
        return launch(down_tiled<DT>, rows_grid(a, a.hidden), TILE_THREADS, q, a, name);
    } else {
        TRY(launch(gate_up_items<DT>, items_grid(a.rows * a.inter), ITEM_THREADS, q, a, name));
        return launch(down_items<DT>, items_grid(a.rows * a.hidden), ITEM_THREADS, q, a, name);
    }
}

template <int DT>
rudnn_status_t backward_run(rdg_queue_t *q, const ExpertArgs &a)
{
    const char *name = "moe_train.experts_backward_scalar";
    if (EXPERTS_TILED) {
        TRY(launch(dact_tiled<DT>, rows_grid(a, a.inter), TILE_THREADS, q, a, name));
        TRY(launch(dx_tiled<DT>, rows_grid(a, a.hidden), TILE_THREADS, q, a, name));
        TRY(launch(dw_gate_up_tiled<DT>, weights_grid(a, a.inter, a.hidden), TILE_THREADS, q, a, name));
        return launch(dw_down_tiled<DT>, weights_grid(a, a.hidden, a.inter), TILE_THREADS, q, a, name);
    } else {
        TRY(launch(dact_items<DT>, items_grid(a.rows * a.inter), ITEM_THREADS, q, a, name));
        TRY(launch(dx_items<DT>, items_grid(a.rows * a.hidden), ITEM_THREADS, q, a, name));
        TRY(launch(dw_gate_up_items<DT>, items_grid(a.experts * a.inter * a.hidden), ITEM_THREADS, q, a, name));
        return launch(dw_down_items<DT>, items_grid(a.experts * a.hidden * a.inter), ITEM_THREADS, q, a, name);
    }
}

rudnn_status_t experts_forward_train(void *queue, const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t tokens,
                                     rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                     rudnn_mem_ref_t down, rudnn_mem_ref_t reserve, rudnn_mem_ref_t act,
                                     rudnn_mem_ref_t out)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (!float_dtype(p->dtype))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "moe_train.experts_forward_scalar: experts of dtype %d on this backend",
                         (int)p->dtype);
    TRY(rdg_use_device(q->dev.index));
    if (p->rows < 1)
        return RUDNN_STATUS_SUCCESS;
    ExpertArgs a = expert_args(p, tokens, offsets, gate, up, down, reserve);
    a.act = rdg_at(act);
    a.out = rdg_at(out);
    rdg_note_kernel("moe_train.experts_forward_scalar");
    switch (p->dtype) {
    case RUDNN_F32: return forward_run<RUDNN_F32>(q, a);
    case RUDNN_F16: return forward_run<RUDNN_F16>(q, a);
    default: return forward_run<RUDNN_BF16>(q, a);
    }
}

rudnn_status_t experts_backward(void *queue, const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t tokens,
                                rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                rudnn_mem_ref_t down, rudnn_mem_ref_t reserve, rudnn_mem_ref_t grad_out,
                                rudnn_mem_ref_t work, rudnn_mem_ref_t grad_tokens, rudnn_mem_ref_t grad_gate,
                                rudnn_mem_ref_t grad_up, rudnn_mem_ref_t grad_down)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (!float_dtype(p->dtype))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "moe_train.experts_backward_scalar: experts of dtype %d on this backend",
                         (int)p->dtype);
    TRY(rdg_use_device(q->dev.index));
    ExpertArgs a = expert_args(p, tokens, offsets, gate, up, down, reserve);
    a.grad_out = rdg_at(grad_out);
    a.work = (float *)rdg_at(work);
    a.grad_tokens = rdg_at(grad_tokens);
    a.grad_gate = (float *)rdg_at(grad_gate);
    a.grad_up = (float *)rdg_at(grad_up);
    a.grad_down = (float *)rdg_at(grad_down);
    rdg_note_kernel("moe_train.experts_backward_scalar");
    switch (p->dtype) {
    case RUDNN_F32: return backward_run<RUDNN_F32>(q, a);
    case RUDNN_F16: return backward_run<RUDNN_F16>(q, a);
    default: return backward_run<RUDNN_BF16>(q, a);
    }
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_moe_train_kernels_t make_moe_train_table(void)
{
    rudnn_moe_train_kernels_t table;
    memset(&table, 0, sizeof table);
    table.router_weights = router_weights;
    table.router_backward = router_backward;
    table.combine_backward = combine_backward;
    table.dispatch_backward = dispatch_backward;
    table.experts_forward_train = experts_forward_train;
    table.experts_backward = experts_backward;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_moe_train_kernels_t *rdg_moe_train_table(void)
{
    static const rudnn_moe_train_kernels_t table = make_moe_train_table();
    return &table;
}
