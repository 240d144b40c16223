/* The gated delta rule on CUDA and HIP (hal/gated_delta.h): FP32 state and arithmetic on the
 * SIMT cores, inputs of any float dtype.
 *   gated_delta.recurrent    a block per (sequence, head, 32 value columns); 4 warps split the
 *                            key rows, a thread keeps its column's rows of S in registers; for
 *                            few tokens a sequence (decode) a thread keeps 4 columns of 8 rows
 *                            instead (16-byte state accesses, more threads an SM; recurrent4);
 *   gated_delta.chunk_prep   a block per (chunk, head): gamma, Lm, T = (I + Lm)^-1 (in shared
 *                            memory: the contract's 4 (C^2 + C) bytes), W, U and Pm to the scratch;
 *   gated_delta.chunk_state  a block per (sequence, head, 32 value columns) walking its chunks in
 *                            order: Delta = U - W S, the output, the state update.
 * Only chunk_state is serial along a sequence. The chunked entry takes the tensor-core kernels of
 * gated_delta_tc.cu (CUDA) where they fit: F16/BF16, chunks of 64, K and V of 64 or 128, 16-byte
 * aligned rows; these are the general path. */
#include <atomic>

#include "rdg_internal.h"
#include "elem.cuh"
#include "gated_delta.cuh"
#include "gated_delta_tuning.h"

namespace {

constexpr int REC_COLS = 32;    /* value columns a recurrent block owns (a warp's lanes) */
constexpr int REC_PARTS = 4;    /* warps splitting the key rows */
constexpr int REC_MIN_BLOCKS = 5; /* blocks an SM up to K 128: the state streams once, bytes in flight */
/* recurrent4: a 32-thread group is REC4_GCOLS column groups x REC4_GPARTS row parts */
constexpr int REC4_W = 4;       /* value columns a thread: one float4 of each state row it keeps */
constexpr int REC4_GCOLS = 8;   /* a group's 8 float4s of a row: 128 contiguous bytes */
constexpr int REC4_GPARTS = 4;  /* row parts of a group, summed with shuffles */
constexpr int REC4_GROUP = REC4_GCOLS * REC4_GPARTS;
constexpr int REC4_COLS = REC4_W * REC4_GCOLS;      /* value columns a block */
constexpr int REC4_ROWS = GDR_REC4_ROWS;            /* key rows a thread */
constexpr int REC4_GROWS = REC4_GPARTS * REC4_ROWS; /* key rows a group */
constexpr int REC4_MAX_GROUPS = (RUDNN_GATED_DELTA_MAX_DIM + REC4_GROWS - 1) / REC4_GROWS;
constexpr int REC4_MIN_BLOCKS = 4; /* of the largest block (K 256): 64 registers, K 128 blocks fit 8 an SM */
constexpr int PREP_THREADS = 256;
constexpr int STATE_COLS = 32;  /* value columns a chunk_state block owns */
constexpr int STATE_THREADS = 256;

/* ---- recurrent --------------------------------------------------------------------------------- */

template <int DT, int KR>
__global__ void __launch_bounds__(REC_COLS *REC_PARTS, KR <= 32 ? REC_MIN_BLOCKS : 2)
    recurrent_kernel(const rudnn_gated_delta_plan_t p, const void *__restrict__ q, const void *__restrict__ k,
                     const void *__restrict__ v, const void *__restrict__ beta, const float *__restrict__ decay,
                     const float *__restrict__ s_in, const void *__restrict__ table, void *__restrict__ out,
                     float *__restrict__ s_out)
{
    /* q and k of the token by part: row part + 4 i at [part][i], zeros past K, so that a thread's rows
     * are contiguous (float4 reads) and need no bound checks */
    static_assert(KR % 4 == 0, "rows a thread: a multiple of 4");
    __shared__ __align__(16) float qs[REC_PARTS][KR], ks[REC_PARTS][KR];
    __shared__ float red[2][REC_PARTS][REC_COLS];
    __shared__ float redkq[REC_PARTS];
    const int lane = threadIdx.x % REC_COLS, part = threadIdx.x / REC_COLS;
    const int64_t h = blockIdx.y, s = blockIdx.z;
    const int64_t col = (int64_t)blockIdx.x * REC_COLS + lane;
    const int K = (int)p.key_dim;
    const int64_t V = p.value_dim;
    const bool live = col < V;
    const SeqInfo si = seq_info(p, table, s);
    const float *src = state_at(s_in, p, si.row, h);
    float *dst = (float *)state_at(s_out, p, si.row, h);

    float S[KR]; /* rows part, part + 4, ... of column col */
#pragma unroll
    for (int i = 0; i < KR; i++) {
        const int r = part + REC_PARTS * i;
        S[i] = live && r < K ? src[r * V + col] : 0.0f;
    }
    for (int64_t t = si.start; t < si.start + si.length; t++) {
        const int64_t qo = tok(p.q_stride, si.batch, h, t), ko = tok(p.k_stride, si.batch, h, t);
        for (int r = threadIdx.x; r < REC_PARTS * KR; r += blockDim.x) {
            qs[r % REC_PARTS][r / REC_PARTS] = r < K ? Elem<DT>::ld(q, qo + r) : 0.0f;
            ks[r % REC_PARTS][r / REC_PARTS] = r < K ? Elem<DT>::ld(k, ko + r) : 0.0f;
        }
        __syncthreads();
        const float g = expf(decay[tok(p.decay_stride, si.batch, h, t)]);
        float dk = 0.0f, dq = 0.0f, kq = 0.0f;
#pragma unroll
        for (int i4 = 0; i4 < KR / 4; i4++) {
            const float4 k4 = ((const float4 *)ks[part])[i4], q4 = ((const float4 *)qs[part])[i4];
            const float kr[4] = {k4.x, k4.y, k4.z, k4.w}, qr[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float &x = S[4 * i4 + e];
                x *= g;
                dk += x * kr[e], dq += x * qr[e];
                if (lane == 0)
                    kq += kr[e] * qr[e];
            }
        }
        red[0][part][lane] = dk, red[1][part][lane] = dq;
        if (lane == 0)
            redkq[part] = kq;
        __syncthreads();
        float kv = 0.0f, qv = 0.0f, kqs = 0.0f;
#pragma unroll
        for (int j = 0; j < REC_PARTS; j++)
            kv += red[0][j][lane], qv += red[1][j][lane], kqs += redkq[j];
        const float b = Elem<DT>::ld(beta, tok(p.beta_stride, si.batch, h, t));
        const float vt = live ? Elem<DT>::ld(v, tok(p.v_stride, si.batch, h, t) + col) : 0.0f;
        const float delta = b * (vt - kv);
        if (live && part == 0)
            Elem<DT>::st(out, tok(p.o_stride, si.batch, h, t) + col, p.query_scale * (qv + kqs * delta));
#pragma unroll
        for (int i4 = 0; i4 < KR / 4; i4++) {
            const float4 k4 = ((const float4 *)ks[part])[i4];
            S[4 * i4] += k4.x * delta, S[4 * i4 + 1] += k4.y * delta;
            S[4 * i4 + 2] += k4.z * delta, S[4 * i4 + 3] += k4.w * delta;
        }
        __syncthreads(); /* qs, ks and red are rewritten by the next token */
    }
#pragma unroll
    for (int i = 0; i < KR; i++) {
        const int r = part + REC_PARTS * i;
        if (live && r < K)
            dst[r * V + col] = S[i];
    }
}

template <int DT, int KR>
void launch_recurrent(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    const dim3 grid((unsigned)rdg_ceil_div(p->value_dim, REC_COLS), (unsigned)p->heads, (unsigned)p->sequences);
    recurrent_kernel<DT, KR><<<grid, REC_COLS * REC_PARTS, 0, q->stream>>>(
        *p, rdg_at(o->query), rdg_at(o->key), rdg_at(o->value), rdg_at(o->beta), (const float *)rdg_at(o->log_decay),
        (const float *)rdg_at(o->initial_state), rdg_at(o->table), rdg_at(o->output), (float *)rdg_at(o->final_state));
}

/* recurrent4: acc[c] += w * column c of x */
__device__ __forceinline__ void axpy4(float acc[REC4_W], float w, const float4 x)
{
    acc[0] += x.x * w, acc[1] += x.y * w, acc[2] += x.z * w, acc[3] += x.w * w;
}

__device__ __forceinline__ void add4(float acc[REC4_W], const float4 x)
{
    acc[0] += x.x, acc[1] += x.y, acc[2] += x.z, acc[3] += x.w;
}

/* recurrent4: the output of token t, staged in os, stored by a thread a column (coalesced) */
template <int DT>
__device__ __forceinline__ void rec4_out(const rudnn_gated_delta_plan_t &p, void *out, const float *os, int64_t b,
                                         int64_t h, int64_t t, int col0)
{
    const int c = threadIdx.x;
    if (c < REC4_COLS && col0 + c < p.value_dim)
        Elem<DT>::st(out, tok(p.o_stride, b, h, t) + col0 + c, os[c]);
}

/* The recurrence for few tokens a sequence: the state streams through once, so what counts is bytes
 * in flight and threads an SM. A thread keeps a float4 (4 value columns) of REC4_ROWS consecutive key
 * rows and issues all its 16-byte loads before the first token; a block is the (sequence, head,
 * 32 columns) of recurrent_kernel, ceil(K / REC4_GROWS) groups of 32 threads. k.S and q.S are summed
 * over a group's 4 row parts with shuffles, then over the groups through shared memory. What else a
 * token needs (q, k, k.q, v, g, beta) is staged in shared memory by a few threads, and its output
 * leaves from there, by the first 32 threads, at the next token: little beside the state's 32
 * registers stays live, and a thread fits 64. Needs V % 4 == 0 and 16-byte aligned states
 * (recurrent4_fits); any K, any number of tokens. */
template <int DT>
__global__ void __launch_bounds__(REC4_GROUP *REC4_MAX_GROUPS, REC4_MIN_BLOCKS)
    recurrent4_kernel(const rudnn_gated_delta_plan_t p, const void *__restrict__ q, const void *__restrict__ k,
                      const void *__restrict__ v, const void *__restrict__ beta, const float *__restrict__ decay,
                      const float *__restrict__ s_in, const void *__restrict__ table, void *__restrict__ out,
                      float *__restrict__ s_out)
{
    static_assert(REC4_ROWS % 4 == 0, "rows a thread: float4 reads of q and k");
    /* q and k of the token, zeros past K up to the block's rows: a thread's rows are contiguous */
    __shared__ __align__(16) float qs[REC4_MAX_GROUPS * REC4_GROWS], ks[REC4_MAX_GROUPS * REC4_GROWS];
    __shared__ __align__(16) float vs[REC4_COLS], os[REC4_COLS]; /* v and the output of the block's columns */
    __shared__ float4 redk[REC4_MAX_GROUPS][REC4_GCOLS], redq[REC4_MAX_GROUPS][REC4_GCOLS];
    __shared__ float redkq[REC4_MAX_GROUPS], gb[2]; /* k.q by group; exp(log_decay), beta */
    const int tid = threadIdx.x, cg = tid % REC4_GCOLS, part = tid / REC4_GCOLS;
    const int sub = part % REC4_GPARTS, grp = part / REC4_GPARTS;
    const int groups = blockDim.x / REC4_GROUP, rows = groups * REC4_GROWS;
    const int64_t h = blockIdx.y, s = blockIdx.z;
    const int K = (int)p.key_dim, V = (int)p.value_dim;
    const int col0 = blockIdx.x * REC4_COLS, col = col0 + cg * REC4_W, r0 = part * REC4_ROWS;
    const bool live = col < V; /* V % 4 == 0: all 4 columns */
    const SeqInfo si = seq_info(p, table, s);
    const float *src = state_at(s_in, p, si.row, h) + col;

    float4 S[REC4_ROWS]; /* rows r0 .. r0 + REC4_ROWS - 1, columns col .. col + 3 */
#pragma unroll
    for (int i = 0; i < REC4_ROWS; i++)
        S[i] = live && r0 + i < K ? *(const float4 *)(src + (r0 + i) * V) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 *k4 = (const float4 *)(ks + r0), *q4 = (const float4 *)(qs + r0);
    for (int64_t t = si.start; t < si.start + si.length; t++) {
        if (t > si.start) {
            __syncthreads(); /* the last token's reads of the staged values and sums are done */
            rec4_out<DT>(p, out, os, si.batch, h, t - 1, col0);
        }
        const int64_t qo = tok(p.q_stride, si.batch, h, t), ko = tok(p.k_stride, si.batch, h, t);
        /* v, log_decay and beta loaded before q and k are waited for: one round trip, not a chain
         * (q and k for the k.q shuffle, then v, then log_decay, then beta) that holds the block and
         * its state registers; H200 decode B 64: 0.78 -> 0.80 of copy */
        float vr = 0.0f, lg = 0.0f, bt = 0.0f;
        if (tid < REC4_COLS && col0 + tid < V)
            vr = Elem<DT>::ld(v, tok(p.v_stride, si.batch, h, t) + col0 + tid);
        if (tid == 0) {
            lg = decay[tok(p.decay_stride, si.batch, h, t)];
            bt = Elem<DT>::ld(beta, tok(p.beta_stride, si.batch, h, t));
        }
        float kq = 0.0f;
        for (int r = tid; r < rows; r += blockDim.x) {
            const float qr = r < K ? Elem<DT>::ld(q, qo + r) : 0.0f, kr = r < K ? Elem<DT>::ld(k, ko + r) : 0.0f;
            qs[r] = qr, ks[r] = kr;
            kq += kr * qr;
        }
#pragma unroll
        for (int m = REC4_GROUP / 2; m > 0; m /= 2)
            kq += RDG_SHFL_XOR(kq, m);
        if (tid % REC4_GROUP == 0)
            redkq[grp] = kq;
        if (tid < REC4_COLS)
            vs[tid] = vr;
        if (tid == 0)
            gb[0] = expf(lg), gb[1] = bt;
        __syncthreads();
        const float g = gb[0];
        float dk[REC4_W] = {}, dq[REC4_W] = {};
#pragma unroll
        for (int i4 = 0; i4 < REC4_ROWS / 4; i4++) {
            const float4 kk = k4[i4], qq = q4[i4];
            const float kr[4] = {kk.x, kk.y, kk.z, kk.w}, qr[4] = {qq.x, qq.y, qq.z, qq.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float4 &x = S[4 * i4 + e];
                x.x *= g, x.y *= g, x.z *= g, x.w *= g;
                axpy4(dk, kr[e], x);
                axpy4(dq, qr[e], x);
            }
        }
        /* over the group's row parts (lane bits 3 and 4): every part gets the group's sums */
#pragma unroll
        for (int m = REC4_GCOLS; m < REC4_GROUP; m *= 2) {
#pragma unroll
            for (int c = 0; c < REC4_W; c++) {
                dk[c] += RDG_SHFL_XOR(dk[c], m);
                dq[c] += RDG_SHFL_XOR(dq[c], m);
            }
        }
        if (sub == 0) {
            redk[grp][cg] = make_float4(dk[0], dk[1], dk[2], dk[3]);
            redq[grp][cg] = make_float4(dq[0], dq[1], dq[2], dq[3]);
        }
        __syncthreads();
        float kv[REC4_W] = {}, qv[REC4_W] = {}, kqs = 0.0f;
#pragma unroll 1
        for (int j = 0; j < groups; j++) {
            add4(kv, redk[j][cg]);
            add4(qv, redq[j][cg]);
            kqs += redkq[j];
        }
        const float b = gb[1];
        const float4 vt = ((const float4 *)vs)[cg];
        const float delta[REC4_W] = {b * (vt.x - kv[0]), b * (vt.y - kv[1]), b * (vt.z - kv[2]), b * (vt.w - kv[3])};
        if (part == 0) {
            const float sc = p.query_scale;
            ((float4 *)os)[cg] = make_float4(sc * (qv[0] + kqs * delta[0]), sc * (qv[1] + kqs * delta[1]),
                                             sc * (qv[2] + kqs * delta[2]), sc * (qv[3] + kqs * delta[3]));
        }
#pragma unroll
        for (int i4 = 0; i4 < REC4_ROWS / 4; i4++) {
            const float4 kk = k4[i4];
            const float kr[4] = {kk.x, kk.y, kk.z, kk.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float4 &x = S[4 * i4 + e];
                x.x += kr[e] * delta[0], x.y += kr[e] * delta[1];
                x.z += kr[e] * delta[2], x.w += kr[e] * delta[3];
            }
        }
    }
    if (si.length > 0) {
        __syncthreads();
        rec4_out<DT>(p, out, os, si.batch, h, si.start + si.length - 1, col0);
    }
    /* rows past K (and dead columns) by a count, not the loads' predicates: those, kept live for
     * the stores, cost registers */
    float *dst = (float *)state_at(s_out, p, si.row, h) + col;
    const int nrows = live ? min(K - r0, REC4_ROWS) : 0;
#pragma unroll
    for (int i = 0; i < REC4_ROWS; i++) {
        if (i >= nrows)
            break;
        *(float4 *)(dst + (r0 + i) * V) = S[i];
    }
}

template <int DT>
void launch_recurrent4(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    const int groups = (int)rdg_ceil_div(p->key_dim, REC4_GROWS);
    const dim3 grid((unsigned)rdg_ceil_div(p->value_dim, REC4_COLS), (unsigned)p->heads, (unsigned)p->sequences);
    recurrent4_kernel<DT><<<grid, REC4_GROUP * groups, 0, q->stream>>>(
        *p, rdg_at(o->query), rdg_at(o->key), rdg_at(o->value), rdg_at(o->beta), (const float *)rdg_at(o->log_decay),
        (const float *)rdg_at(o->initial_state), rdg_at(o->table), rdg_at(o->output), (float *)rdg_at(o->final_state));
}

/* Decode-shaped calls take recurrent4: few tokens a sequence (varlen: on average, the lengths are on
 * the device) and float4 rows of both states. */
bool recurrent4_fits(const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    const int64_t tokens = p->varlen ? rdg_ceil_div(p->seq_len, p->sequences) : p->seq_len;
    const uintptr_t in = (uintptr_t)rdg_at(o->initial_state), fin = (uintptr_t)rdg_at(o->final_state);
    return p->value_dim % REC4_W == 0 && tokens <= GDR_REC4_MAX_TOKENS && (in | fin) % 16 == 0;
}

template <int DT>
void recurrent_rows(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    if (recurrent4_fits(p, o)) {
        launch_recurrent4<DT>(q, p, o);
        return;
    }
    const int64_t rows = rdg_ceil_div(p->key_dim, REC_PARTS);
    if (rows <= 4)
        launch_recurrent<DT, 4>(q, p, o);
    else if (rows <= 8)
        launch_recurrent<DT, 8>(q, p, o);
    else if (rows <= 16)
        launch_recurrent<DT, 16>(q, p, o);
    else if (rows <= 32)
        launch_recurrent<DT, 32>(q, p, o);
    else
        launch_recurrent<DT, 64>(q, p, o);
}

rudnn_status_t gdr_recurrent(void *queue, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    if (p->sequences > 65535 || p->heads > 65535)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "gated_delta.recurrent: %lld sequences x %lld heads exceed the "
                         "launch grid (65535 each)", (long long)p->sequences, (long long)p->heads);
    rdg_note_kernel("gated_delta.recurrent");
    switch (p->dtype) {
    case RUDNN_F32: recurrent_rows<RUDNN_F32>(q, p, o); break;
    case RUDNN_F16: recurrent_rows<RUDNN_F16>(q, p, o); break;
    default: recurrent_rows<RUDNN_BF16>(q, p, o); break;
    }
    return rdg_launched("gated_delta.recurrent");
}

/* ---- chunked: scratch layout ------------------------------------------------------------------- */

/* Per (chunk, head), FP32: W [C][K], U [C][V] (overwritten by Delta), Pm [C][C], gamma [C]. */
struct ChunkScratch {
    int64_t w, u, pm, gamma, per; /* offsets in floats within one (chunk, head) record, its size */
};

__host__ __device__ __forceinline__ ChunkScratch chunk_scratch(const rudnn_gated_delta_plan_t &p)
{
    const int64_t C = p.chunk_size;
    ChunkScratch cs;
    cs.w = 0;
    cs.u = cs.w + C * p.key_dim;
    cs.pm = cs.u + C * p.value_dim;
    cs.gamma = cs.pm + C * C;
    cs.per = (cs.gamma + C + 3) / 4 * 4; /* 16-byte records */
    return cs;
}

/* ---- chunked: per-chunk preparation ------------------------------------------------------------ */

template <int DT>
__global__ void __launch_bounds__(PREP_THREADS)
    chunk_prep_kernel(const rudnn_gated_delta_plan_t p, const void *__restrict__ q, const void *__restrict__ k,
                      const void *__restrict__ v, const void *__restrict__ beta, const float *__restrict__ decay,
                      const void *__restrict__ table, float *__restrict__ scratch)
{
    extern __shared__ float smem[];
    const int64_t C = p.chunk_size, K = p.key_dim, V = p.value_dim;
    float *Tm = smem;         /* [C][C]: Lm, then T row by row */
    float *gam = smem + C * C; /* [C] */
    const int64_t c = blockIdx.x, h = blockIdx.y;
    const int64_t s = seq_of_chunk(p, table, c);
    const SeqInfo si = seq_info(p, table, s);
    const int64_t t0 = si.start + (c - si.chunk_first) * C;
    const int64_t L = min(C, si.start + si.length - t0);
    const ChunkScratch cs = chunk_scratch(p);
    float *rec = scratch + (c * p.heads + h) * cs.per;
    const int64_t b = si.batch;

    if (threadIdx.x == 0) {
        float run = 0.0f;
        for (int64_t i = 0; i < C; i++) {
            if (i < L)
                run += decay[tok(p.decay_stride, b, h, t0 + i)];
            gam[i] = run;
            rec[cs.gamma + i] = run;
        }
    }
    __syncthreads();
    /* Lm (strictly lower) into Tm, Pm (lower with the diagonal) to the scratch */
    for (int idx = threadIdx.x; idx < (int)(C * C); idx += blockDim.x) { /* C <= PREP_THREADS */
        const int i = idx / (int)C, j = idx % (int)C;
        float lm = 0.0f, pm = 0.0f;
        if (i < L && j <= i) {
            const int64_t ki = tok(p.k_stride, b, h, t0 + i), kj = tok(p.k_stride, b, h, t0 + j);
            const int64_t qi = tok(p.q_stride, b, h, t0 + i);
            float kk = 0.0f, qk = 0.0f;
            for (int64_t d = 0; d < K; d++) {
                const float kjd = Elem<DT>::ld(k, kj + d);
                kk += Elem<DT>::ld(k, ki + d) * kjd;
                qk += Elem<DT>::ld(q, qi + d) * kjd;
            }
            const float e = expf(gam[i] - gam[j]);
            pm = e * qk;
            if (j < i)
                lm = Elem<DT>::ld(beta, tok(p.beta_stride, b, h, t0 + i)) * e * kk;
        }
        Tm[idx] = lm;
        rec[cs.pm + idx] = pm;
    }
    __syncthreads();
    /* T = (I + Lm)^-1 by rows: T[i][j] = -Lm[i][j] - sum_{j < m < i} Lm[i][m] T[m][j] (j < i), a
     * thread a column (C <= PREP_THREADS); row i of Lm is read before it becomes row i of T */
    for (int64_t i = 1; i < L; i++) {
        float val = 0.0f;
        const int64_t j = threadIdx.x;
        if (j < i) {
            val = -Tm[i * C + j];
            for (int64_t m = j + 1; m < i; m++)
                val -= Tm[i * C + m] * Tm[m * C + j];
        }
        __syncthreads();
        if (j < i)
            Tm[i * C + j] = val;
        __syncthreads();
    }
    /* W = T diag(beta e^gamma) Kc, U = T diag(beta) Vc (T's diagonal is 1) */
    for (int idx = threadIdx.x; idx < (int)(C * (K + V)); idx += blockDim.x) {
        const bool is_w = idx < C * K;
        const int cols = (int)(is_w ? K : V), e = is_w ? idx : idx - (int)(C * K);
        const int64_t i = e / cols, d = e % cols;
        float acc = 0.0f;
        if (i < L)
            for (int64_t j = 0; j <= i; j++) {
                const float tij = j == i ? 1.0f : Tm[i * C + j];
                const float bj = Elem<DT>::ld(beta, tok(p.beta_stride, b, h, t0 + j));
                const float x = is_w ? Elem<DT>::ld(k, tok(p.k_stride, b, h, t0 + j) + d) * expf(gam[j])
                                     : Elem<DT>::ld(v, tok(p.v_stride, b, h, t0 + j) + d);
                acc += tij * bj * x;
            }
        rec[(is_w ? cs.w : cs.u) + e] = acc;
    }
}

/* ---- chunked: the state passed along each sequence ---------------------------------------------- */

template <int DT>
__global__ void __launch_bounds__(STATE_THREADS)
    chunk_state_kernel(const rudnn_gated_delta_plan_t p, const void *__restrict__ q, const void *__restrict__ k,
                       const float *__restrict__ s_in, const void *__restrict__ table, float *__restrict__ scratch,
                       void *__restrict__ out, float *__restrict__ s_out)
{
    extern __shared__ float smem[];
    const int64_t C = p.chunk_size, K = p.key_dim, V = p.value_dim;
    float *S = smem;              /* [K][STATE_COLS] */
    float *D = smem + K * STATE_COLS; /* [C][STATE_COLS]: Delta */
    const int64_t h = blockIdx.y, s = blockIdx.z;
    const int64_t c0 = (int64_t)blockIdx.x * STATE_COLS;
    const int lane = threadIdx.x % STATE_COLS, row0 = threadIdx.x / STATE_COLS;
    constexpr int ROW_STEP = STATE_THREADS / STATE_COLS;
    const int64_t col = c0 + lane;
    const bool live = col < V;
    const SeqInfo si = seq_info(p, table, s);
    const float *src = state_at(s_in, p, si.row, h);
    float *dst = (float *)state_at(s_out, p, si.row, h);
    const ChunkScratch cs = chunk_scratch(p);
    const int64_t b = si.batch;

    for (int64_t r = row0; r < K; r += ROW_STEP)
        S[r * STATE_COLS + lane] = live ? src[r * V + col] : 0.0f;
    __syncthreads();
    const int64_t chunks = si.chunks;
    for (int64_t ci = 0; ci < chunks; ci++) {
        const int64_t c = si.chunk_first + ci, t0 = si.start + ci * C;
        const int64_t L = min(C, si.start + si.length - t0);
        const float *rec = scratch + (c * p.heads + h) * cs.per;
        const float *gam = rec + cs.gamma;
        /* Delta = U - W S */
        for (int64_t i = row0; i < L; i += ROW_STEP) {
            float acc = live ? rec[cs.u + i * V + col] : 0.0f;
            const float *w = rec + cs.w + i * K;
            for (int64_t d = 0; d < K; d++)
                acc -= w[d] * S[d * STATE_COLS + lane];
            D[i * STATE_COLS + lane] = acc;
        }
        __syncthreads();
        /* O = scale (e^gamma Qc S + Pm Delta) */
        for (int64_t i = row0; i < L; i += ROW_STEP) {
            const int64_t qo = tok(p.q_stride, b, h, t0 + i);
            float qs = 0.0f, pd = 0.0f;
            for (int64_t d = 0; d < K; d++)
                qs += Elem<DT>::ld(q, qo + d) * S[d * STATE_COLS + lane];
            const float *pm = rec + cs.pm + i * C;
            for (int64_t j = 0; j <= i; j++)
                pd += pm[j] * D[j * STATE_COLS + lane];
            if (live)
                Elem<DT>::st(out, tok(p.o_stride, b, h, t0 + i) + col, p.query_scale * (expf(gam[i]) * qs + pd));
        }
        __syncthreads();
        /* S = e^gamma_last S + sum_j e^(gamma_last - gamma_j) k_j Delta_j^T */
        const float glast = gam[L - 1];
        for (int64_t r = row0; r < K; r += ROW_STEP) {
            float acc = expf(glast) * S[r * STATE_COLS + lane];
            for (int64_t j = 0; j < L; j++)
                acc += expf(glast - gam[j]) * Elem<DT>::ld(k, tok(p.k_stride, b, h, t0 + j) + r) *
                       D[j * STATE_COLS + lane];
            S[r * STATE_COLS + lane] = acc;
        }
        __syncthreads();
    }
    for (int64_t r = row0; r < K; r += ROW_STEP)
        if (live)
            dst[r * V + col] = S[r * STATE_COLS + lane];
}

std::atomic<int> smem_raised[2][3][64];

template <typename F>
rudnn_status_t allow_smem(F *fn, int which, int dt, int device, size_t bytes, const char *what)
{
    if (bytes <= 48 * 1024 || (device < 64 && smem_raised[which][dt][device].load(std::memory_order_acquire)))
        return RUDNN_STATUS_SUCCESS;
    cudaError_t err = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)bytes);
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, what);
    if (device < 64)
        smem_raised[which][dt][device].store(1, std::memory_order_release);
    return RUDNN_STATUS_SUCCESS;
}

size_t prep_smem(const rudnn_gated_delta_plan_t *p)
{
    return (size_t)4 * (size_t)(p->chunk_size * p->chunk_size + p->chunk_size);
}

size_t state_smem(const rudnn_gated_delta_plan_t *p)
{
    return (size_t)4 * STATE_COLS * (size_t)(p->key_dim + p->chunk_size);
}

rudnn_status_t gdr_chunk_workspace(void *device, const rudnn_gated_delta_plan_t *p, size_t *bytes)
{
    const rdg_devinfo_t *dev = rdg_devinfo_of(device);
    if (p->chunk_size > PREP_THREADS)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "gated_delta: chunk_size %lld is past the %d this backend's "
                         "chunk kernels take", (long long)p->chunk_size, PREP_THREADS);
    if (prep_smem(p) > dev->smem_optin || state_smem(p) > dev->smem_optin)
        return rdg_error(RUDNN_STATUS_BAD_PARAM, "gated_delta: chunk_size %lld with K %lld needs %zu bytes of shared "
                         "memory a block, past the device's %zu", (long long)p->chunk_size, (long long)p->key_dim,
                         prep_smem(p) > state_smem(p) ? prep_smem(p) : state_smem(p), dev->smem_optin);
    *bytes = (size_t)p->chunks * (size_t)p->heads * (size_t)chunk_scratch(*p).per * sizeof(float);
#if !RDG_HIP
    /* the tensor-core path is chosen per call (it also needs aligned operands): room for either */
    if (rdg_gdr_tc_plan_fits(dev, p) && rdg_gdr_tc_scratch(p) > *bytes)
        *bytes = rdg_gdr_tc_scratch(p);
#endif
    return RUDNN_STATUS_SUCCESS;
}

template <int DT>
rudnn_status_t launch_chunked(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    const int dt = DT == RUDNN_F32 ? 0 : DT == RUDNN_F16 ? 1 : 2;
    TRY(allow_smem(chunk_prep_kernel<DT>, 0, dt, q->dev.index, prep_smem(p), "gated_delta.chunk_prep"));
    TRY(allow_smem(chunk_state_kernel<DT>, 1, dt, q->dev.index, state_smem(p), "gated_delta.chunk_state"));
    float *scratch = (float *)rdg_at(o->scratch);
    rdg_note_kernel("gated_delta.chunk_prep");
    chunk_prep_kernel<DT><<<dim3((unsigned)p->chunks, (unsigned)p->heads), PREP_THREADS, prep_smem(p), q->stream>>>(
        *p, rdg_at(o->query), rdg_at(o->key), rdg_at(o->value), rdg_at(o->beta), (const float *)rdg_at(o->log_decay),
        rdg_at(o->table), scratch);
    TRY(rdg_launched("gated_delta.chunk_prep"));
    rdg_note_kernel("gated_delta.chunk_state");
    const dim3 grid((unsigned)rdg_ceil_div(p->value_dim, STATE_COLS), (unsigned)p->heads, (unsigned)p->sequences);
    chunk_state_kernel<DT><<<grid, STATE_THREADS, state_smem(p), q->stream>>>(
        *p, rdg_at(o->query), rdg_at(o->key), (const float *)rdg_at(o->initial_state), rdg_at(o->table), scratch,
        rdg_at(o->output), (float *)rdg_at(o->final_state));
    return rdg_launched("gated_delta.chunk_state");
}

rudnn_status_t gdr_chunked(void *queue, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    if (p->sequences > 65535 || p->heads > 65535 || p->chunks > 0x7fffffff)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "gated_delta.chunked: %lld sequences, %lld heads, %lld chunks "
                         "exceed the launch grid", (long long)p->sequences, (long long)p->heads, (long long)p->chunks);
#if !RDG_HIP
    if (rdg_gdr_tc_fits(&q->dev, p, o))
        return rdg_gdr_tc_chunked(q, p, o);
#endif
    switch (p->dtype) {
    case RUDNN_F32: return launch_chunked<RUDNN_F32>(q, p, o);
    case RUDNN_F16: return launch_chunked<RUDNN_F16>(q, p, o);
    default: return launch_chunked<RUDNN_BF16>(q, p, o);
    }
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_gated_delta_kernels_t make_gated_delta_table(void)
{
    rudnn_gated_delta_kernels_t table;
    memset(&table, 0, sizeof table);
    table.recurrent = gdr_recurrent;
    table.chunk_workspace = gdr_chunk_workspace;
    table.chunked = gdr_chunked;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_gated_delta_kernels_t *rdg_gated_delta_table(void)
{
    static rudnn_gated_delta_kernels_t table = make_gated_delta_table();
    return &table;
}
