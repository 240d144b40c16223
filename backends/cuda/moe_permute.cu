/* Mixture-of-experts permutation: the dispatch plan, the row gather and the weighted combine (the
 * dispatch_plan, dispatch_gather and combine entries of moe_table.cu). Routing is in moe_route.cu.
 *
 * Numerics follow backends/README.md ("Numeric contract of the MoE kernels"): FP32 math, F16/BF16
 * storage rounded to nearest even through gpu_compat.h.
 *
 * Dispatch plan (no host synchronisation): a stable counting sort of the pairs by expert.
 *   K1 hist:     block b counts the experts of its chunk of pairs -> M[b][e]
 *   K2 scan:     one block: counts, offsets, and M[b][e] := offsets[e] + sum_{b' < b} M[b'][e]
 *   K3 rank:     block b walks its chunk in pair order, batch by batch; a pair's rank among the
 *                equal experts of its batch comes from shared memory, its base from M[b][e] (the
 *                block's own cursor row, advanced after each batch) -> positions
 *   K4 finish:   row_token[positions[p]] = p / k
 * M lives in the row_token buffer (block count nb is chosen so that nb * E <= T * k), which K4
 * overwrites last; with one block, M is the counts buffer itself (K4 restores the counts).
 *
 * Gather and combine: a power-of-two group of threads per row (up to the block), 16-byte accesses
 * (gather falls back to 8, 4 or 2 bytes, combine to scalars, when the row size or alignment does
 * not allow them); combine accumulates w * x with FMA in FP32 in slot order j = 0..k-1.
 */
#include "rdg_internal.h"
#include "elem.cuh"
#include "moe_host.h"
#include "moe_tuning.h"

namespace {

/* run-time dtype (the routing weights in combine) */
__device__ __forceinline__ float ld_any(int dt, const void *p, int64_t i)
{
    return dt == RUDNN_F32 ? Elem<RUDNN_F32>::ld(p, i)
         : dt == RUDNN_F16 ? Elem<RUDNN_F16>::ld(p, i)
                           : Elem<RUDNN_BF16>::ld(p, i);
}

/* ---- dispatch plan ---- */

/* K1: m[b * E + e] = pairs of chunk b routed to e. Shared-memory bins when E fits (every entry of
 * the row is written), else global atomics into a zeroed m. */
__global__ void RDG_LAUNCH_BOUNDS(PLAN_HIST_THREADS, 4)
plan_hist_kernel(const uint32_t *__restrict__ idx, uint32_t *__restrict__ m, int64_t pairs, int64_t chunk,
                 int experts, int smem_bins)
{
    extern __shared__ uint32_t hist_smem[];
    const int64_t b = blockIdx.x;
    const int64_t beg = b * chunk;
    const int64_t end = min(pairs, beg + chunk);
    uint32_t *row = m + b * experts;
    if (smem_bins) {
        for (int e = threadIdx.x; e < experts; e += blockDim.x)
            hist_smem[e] = 0u;
        __syncthreads();
        for (int64_t p = beg + threadIdx.x; p < end; p += blockDim.x)
            atomicAdd(&hist_smem[idx[p]], 1u);
        __syncthreads();
        for (int e = threadIdx.x; e < experts; e += blockDim.x)
            row[e] = hist_smem[e];
    } else {
        for (int64_t p = beg + threadIdx.x; p < end; p += blockDim.x)
            atomicAdd(&row[idx[p]], 1u);
    }
}

/* Exclusive block-wide scan of one value per thread (blockDim a multiple of the warp size); the
 * xor butterfly gives inclusive warp prefixes. Returns the exclusive prefix, *total the block sum.
 * Ends with a barrier, so the scratch can be reused at once. */
__device__ uint32_t block_exclusive_scan(uint32_t v, uint32_t *scratch, uint32_t *total)
{
    const int lane = threadIdx.x % RDG_WARP;
    const int warp = threadIdx.x / RDG_WARP;
    const int nwarps = blockDim.x / RDG_WARP;
    uint32_t incl = v, sum = v;
#pragma unroll
    for (int msk = 1; msk < RDG_WARP; msk <<= 1) {
        const uint32_t o = RDG_SHFL_XOR(sum, msk);
        if (lane & msk)
            incl += o;
        sum += o;
    }
    if (lane == RDG_WARP - 1)
        scratch[warp] = sum;
    __syncthreads();
    uint32_t before = 0, all = 0;
    for (int w = 0; w < nwarps; w++) {
        const uint32_t s = scratch[w];
        before += w < warp ? s : 0u;
        all += s;
    }
    __syncthreads();
    *total = all;
    return before + incl - v;
}

/* K2 (one block): counts, offsets and the per-chunk bases m[b][e] := offsets[e] + sum of the
 * chunks before b. Threads split into `slices` groups of chunk rows per expert, so that a few
 * experts still use the whole block: thread (sl, el) handles expert e0 + el, rows of slice sl. */
__global__ void RDG_LAUNCH_BOUNDS(PLAN_SCAN_THREADS, 1)
plan_scan_kernel(uint32_t *__restrict__ m, uint32_t *__restrict__ counts, uint32_t *__restrict__ offsets,
                 int64_t nb, int experts, int slices, int counts_alias)
{
    __shared__ uint32_t part[PLAN_SCAN_THREADS];
    __shared__ uint32_t base[PLAN_SCAN_THREADS];
    __shared__ uint32_t scratch[RDG_MAX_WARPS];
    const int per = blockDim.x / slices; /* experts per step */
    const int el = threadIdx.x % per;
    const int sl = threadIdx.x / per;
    const int64_t rb = nb * sl / slices, re = nb * (sl + 1) / slices;
    uint32_t carry = 0;
    for (int e0 = 0; e0 < experts; e0 += per) {
        const int e = e0 + el;
        uint32_t s = 0;
        if (e < experts) {
#pragma unroll 8
            for (int64_t b = rb; b < re; b++)
                s += m[b * experts + e];
        }
        part[threadIdx.x] = s;
        __syncthreads();
        /* the scan runs over threads 0..per-1 (slice 0), the others add zeros */
        uint32_t total = 0;
        if (sl == 0)
            for (int q = 0; q < slices; q++)
                total += part[q * per + el];
        uint32_t block_sum;
        const uint32_t excl = block_exclusive_scan(sl == 0 ? total : 0u, scratch, &block_sum);
        if (sl == 0) {
            base[el] = carry + excl;
            if (e < experts) {
                offsets[e] = carry + excl;
                if (!counts_alias)
                    counts[e] = total;
            }
        }
        __syncthreads();
        if (e < experts) {
            uint32_t run = base[el];
            for (int q = 0; q < sl; q++)
                run += part[q * per + el];
            for (int64_t b = rb; b < re; b++) {
                const uint32_t v = m[b * experts + e];
                m[b * experts + e] = run;
                run += v;
            }
        }
        carry += block_sum;
        __syncthreads(); /* part and base are rewritten by the next step */
    }
    if (threadIdx.x == 0)
        offsets[experts] = carry;
}

/* K3: block b walks its chunk in pair order, PLAN_RANK_THREADS pairs at a time. A pair's position
 * is the cursor of its expert (m[b][e], this block's own row) plus the number of earlier pairs of
 * the batch with the same expert; the last such pair of the batch advances the cursor. */
__global__ void RDG_LAUNCH_BOUNDS(PLAN_RANK_THREADS, 8)
plan_rank_kernel(const uint32_t *__restrict__ idx, uint32_t *__restrict__ m, uint32_t *__restrict__ positions,
                 int64_t pairs, int64_t chunk, int experts)
{
    __shared__ __align__(16) uint32_t se[PLAN_RANK_THREADS];
    const int64_t b = blockIdx.x;
    const int64_t beg = b * chunk;
    const int64_t end = min(pairs, beg + chunk);
    uint32_t *cursor = m + b * experts;
    const int tid = threadIdx.x;
    for (int64_t base = beg; base < end; base += PLAN_RANK_THREADS) {
        const int64_t p = base + tid;
        const bool valid = p < end;
        const uint32_t e = valid ? idx[p] : 0xffffffffu;
        se[tid] = e;
        __syncthreads();
        int before = 0, same = 0;
#pragma unroll 4
        for (int i = 0; i < PLAN_RANK_THREADS; i += 4) {
            const uint4 q = *(const uint4 *)&se[i];
            before += (q.x == e && i < tid) + (q.y == e && i + 1 < tid) + (q.z == e && i + 2 < tid) +
                      (q.w == e && i + 3 < tid);
            same += (q.x == e) + (q.y == e) + (q.z == e) + (q.w == e);
        }
        uint32_t pos = 0;
        if (valid) {
            pos = cursor[e] + (uint32_t)before;
            positions[p] = pos;
        }
        __syncthreads(); /* every cursor read of the batch is done */
        if (valid && before == same - 1)
            cursor[e] = pos + 1;
        __syncthreads(); /* cursor writes visible, se free */
    }
}

/* K4: row_token[positions[p]] = p / k; with the counts as cursors, restores counts = end - start. */
__global__ void plan_finish_kernel(const uint32_t *__restrict__ positions, uint32_t *__restrict__ row_token,
                                   uint32_t *__restrict__ counts, const uint32_t *__restrict__ offsets,
                                   int64_t pairs, int top_k, int experts, int counts_alias)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < pairs)
        row_token[positions[i]] = (uint32_t)(i / top_k);
    if (counts_alias && i < experts)
        counts[i] -= offsets[i];
}

/* ---- gather and combine ---- */

/* STREAM: streaming stores (evict-first), so that output rows, written once and too many to stay
 * in L2 anyway, do not push the input rows, read k times, out of it */
template <bool STREAM, class U>
__device__ __forceinline__ void gather_store(U *p, const U &v)
{
#if !RDG_HIP
    if constexpr (STREAM) {
        __stcs(p, v);
        return;
    }
#endif
    *p = v;
}

/* tokens[r, :] = input[row_token[r], :], U-sized units (16, 8, 4 or 2 bytes), rows of `units`. */
template <class U, bool STREAM>
__global__ void RDG_LAUNCH_BOUNDS(ROWS_THREADS, 4)
gather_kernel(const U *__restrict__ input, const uint32_t *__restrict__ row_token, U *__restrict__ tokens,
              int64_t rows, int64_t units, int tpr)
{
    const int64_t r = (int64_t)blockIdx.x * (ROWS_THREADS / tpr) + threadIdx.x / tpr;
    if (r >= rows)
        return;
    const U *src = input + (int64_t)row_token[r] * units;
    U *dst = tokens + r * units;
    /* GATHER_UNROLL loads in flight before their stores: one at a time waits a full latency each */
    for (int64_t u0 = threadIdx.x % tpr; u0 < units; u0 += GATHER_UNROLL * (int64_t)tpr) {
        U v[GATHER_UNROLL];
#pragma unroll
        for (int i = 0; i < GATHER_UNROLL; i++)
            if (u0 + i * tpr < units)
                v[i] = src[u0 + i * tpr];
#pragma unroll
        for (int i = 0; i < GATHER_UNROLL; i++)
            if (u0 + i * tpr < units)
                gather_store<STREAM>(&dst[u0 + i * tpr], v[i]);
    }
}

/* out[t, h] = round(sum_j w[t, j] * x[pos[t*k + j], h]), FP32, slot order. VEC elements per thread
 * (16-byte accesses; VEC = 1: scalar). */
template <int DT, int VEC>
__device__ __forceinline__ void load_vec(const void *x, int64_t i, float (&v)[VEC])
{
    if constexpr (VEC == 1) {
        v[0] = Elem<DT>::ld(x, i);
    } else if constexpr (DT == RUDNN_F32) {
        const float4 q = *(const float4 *)((const float *)x + i);
        v[0] = q.x;
        v[1] = q.y;
        v[2] = q.z;
        v[3] = q.w;
    } else {
        const uint4 q = *(const uint4 *)((const uint16_t *)x + i);
        const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int h = 0; h < 4; h++) {
            if constexpr (DT == RUDNN_BF16) {
                v[2 * h] = __uint_as_float(u[h] << 16);
                v[2 * h + 1] = __uint_as_float(u[h] & 0xffff0000u);
            } else {
                v[2 * h] = rdg_f16_to_f32((uint16_t)(u[h] & 0xffffu));
                v[2 * h + 1] = rdg_f16_to_f32((uint16_t)(u[h] >> 16));
            }
        }
    }
}

template <int DT, int VEC>
__device__ __forceinline__ void store_vec(void *y, int64_t i, const float (&v)[VEC])
{
    if constexpr (VEC == 1) {
        Elem<DT>::st(y, i, v[0]);
    } else if constexpr (DT == RUDNN_F32) {
        *(float4 *)((float *)y + i) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        uint32_t u[4];
#pragma unroll
        for (int h = 0; h < 4; h++) {
            if constexpr (DT == RUDNN_BF16)
                u[h] = rdg_pack_bf16x2(v[2 * h], v[2 * h + 1]);
            else
                u[h] = (uint32_t)rdg_f32_to_f16(v[2 * h]) | ((uint32_t)rdg_f32_to_f16(v[2 * h + 1]) << 16);
        }
        *(uint4 *)((uint16_t *)y + i) = make_uint4(u[0], u[1], u[2], u[3]);
    }
}

template <int DT, int VEC>
__global__ void RDG_LAUNCH_BOUNDS(ROWS_THREADS, 4)
combine_kernel(const void *__restrict__ x, const uint32_t *__restrict__ positions, const void *__restrict__ w,
               int wdt, void *__restrict__ out, int64_t tokens, int64_t hidden, int top_k, int tpr)
{
    const int64_t t = (int64_t)blockIdx.x * (ROWS_THREADS / tpr) + threadIdx.x / tpr;
    if (t >= tokens)
        return;
    const int64_t nv = hidden / VEC;
    const uint32_t *pos = positions + t * top_k;
    for (int64_t v = threadIdx.x % tpr; v < nv; v += tpr) {
        float acc[VEC];
#pragma unroll
        for (int q = 0; q < VEC; q++)
            acc[q] = 0.0f;
        for (int j = 0; j < top_k; j++) {
            const float wj = ld_any(wdt, w, t * top_k + j);
            float xv[VEC];
            load_vec<DT, VEC>(x, (int64_t)pos[j] * hidden + v * VEC, xv);
#pragma unroll
            for (int q = 0; q < VEC; q++)
                acc[q] = fmaf(wj, xv[q], acc[q]);
        }
        store_vec<DT, VEC>(out, t * hidden + v * VEC, acc);
    }
}

template <class U>
void launch_gather(bool stream, dim3 grid, cudaStream_t st, const void *src, const uint32_t *rt, void *dst,
                   int64_t rows, int64_t units, int tpr)
{
    if (stream)
        gather_kernel<U, true><<<grid, ROWS_THREADS, 0, st>>>((const U *)src, rt, (U *)dst, rows, units, tpr);
    else
        gather_kernel<U, false><<<grid, ROWS_THREADS, 0, st>>>((const U *)src, rt, (U *)dst, rows, units, tpr);
}

/* threads per row: a power of two covering `units` up to the block */
int threads_per_row(int64_t units, int w)
{
    int tpr = w < ROWS_THREADS ? w : ROWS_THREADS;
    while (tpr < ROWS_THREADS && tpr < units)
        tpr *= 2;
    return tpr;
}

int aligned(const void *p, size_t a)
{
    return ((uintptr_t)p % a) == 0;
}

typedef void (*combine_fn)(const void *, const uint32_t *, const void *, int, void *, int64_t, int64_t, int, int);

} // namespace

rudnn_status_t rdg_moe_dispatch_plan(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t indices,
                                     rudnn_mem_ref_t counts, rudnn_mem_ref_t offsets, rudnn_mem_ref_t positions,
                                     rudnn_mem_ref_t row_token)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const int64_t pairs = plan->rows;
    const int64_t experts = plan->experts;
    TRY(begin(q));
    const uint32_t *idx = (const uint32_t *)rdg_at(indices);
    uint32_t *cnt = (uint32_t *)rdg_at(counts);
    uint32_t *off = (uint32_t *)rdg_at(offsets);
    uint32_t *pos = (uint32_t *)rdg_at(positions);
    uint32_t *rtok = (uint32_t *)rdg_at(row_token);

    /* chunk >= 2E keeps nb * E <= pairs whenever nb >= 2 (then pairs > chunk, so E < pairs / 2 and
     * nb * E <= (pairs / chunk + 1) * E <= pairs / 2 + E); about PLAN_CHUNKS_PER_SM chunks per SM */
    const int sms = q->dev.sm_count > 0 ? q->dev.sm_count : 1;
    int64_t chunk = PLAN_CHUNK_MIN;
    if (chunk < 2 * experts)
        chunk = 2 * experts;
    if (chunk < rdg_ceil_div(pairs, PLAN_CHUNKS_PER_SM * (int64_t)sms))
        chunk = rdg_ceil_div(pairs, PLAN_CHUNKS_PER_SM * (int64_t)sms);
    chunk = rdg_ceil_div(chunk, PLAN_RANK_THREADS) * PLAN_RANK_THREADS;
    int64_t nb = rdg_ceil_div(pairs, chunk);
    const int alias = nb < 2;
    if (alias) {
        nb = 1;
        chunk = pairs;
    }
    uint32_t *m = alias ? cnt : rtok; /* nb x E */
    const int smem_bins = experts <= PLAN_SMEM_BINS;
    if (!smem_bins) {
        cudaError_t err = cudaMemsetAsync(m, 0, (size_t)nb * (size_t)experts * sizeof(uint32_t), q->stream);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "MemsetAsync (moe dispatch plan)");
    }
    rdg_note_kernel("moe.dispatch_plan");
    plan_hist_kernel<<<dim3((unsigned)nb), dim3(PLAN_HIST_THREADS),
                       smem_bins ? (size_t)experts * sizeof(uint32_t) : 0, q->stream>>>(idx, m, pairs, chunk,
                                                                                     (int)experts, smem_bins);
    TRY(rdg_launched("moe dispatch_plan histogram"));

    int slices = 1;
    while (slices < PLAN_SCAN_MAX_SLICES && (int64_t)(PLAN_SCAN_THREADS / (slices * 2)) >= experts &&
           slices * 2 <= nb)
        slices *= 2;
    plan_scan_kernel<<<dim3(1), dim3(PLAN_SCAN_THREADS), 0, q->stream>>>(m, cnt, off, nb, (int)experts, slices,
                                                                       alias);
    TRY(rdg_launched("moe dispatch_plan scan"));

    plan_rank_kernel<<<dim3((unsigned)nb), dim3(PLAN_RANK_THREADS), 0, q->stream>>>(idx, m, pos, pairs, chunk,
                                                                                   (int)experts);
    TRY(rdg_launched("moe dispatch_plan rank"));

    const int64_t n = pairs > experts ? pairs : experts;
    plan_finish_kernel<<<dim3((unsigned)rdg_ceil_div(n, PLAN_FINISH_THREADS)), dim3(PLAN_FINISH_THREADS), 0,
                         q->stream>>>(pos, rtok, cnt, off, pairs, plan->top_k, (int)experts, alias);
    return rdg_launched("moe dispatch_plan finish");
}

rudnn_status_t rdg_moe_dispatch_gather(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t input,
                                       rudnn_mem_ref_t row_token, rudnn_mem_ref_t tokens)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(begin(q));
    const void *src = rdg_at(input);
    void *dst = rdg_at(tokens);
    const size_t esize = plan->dtype == RUDNN_F32 ? 4 : 2;
    const size_t row_bytes = (size_t)plan->hidden * esize;
    size_t unit = 16;
    while (unit > esize && !(row_bytes % unit == 0 && aligned(src, unit) && aligned(dst, unit)))
        unit /= 2;
    const int64_t units = (int64_t)(row_bytes / unit);
    int tpr = threads_per_row(units, warp_size(q));
    if (tpr > GATHER_MAX_TPR && GATHER_MAX_TPR >= warp_size(q))
        tpr = GATHER_MAX_TPR;
    const dim3 grid((unsigned)rdg_ceil_div(plan->rows, ROWS_THREADS / tpr));
    const uint32_t *rt = (const uint32_t *)rdg_at(row_token);
    /* an output past GATHER_STREAM_MIN_L2S of L2 is streamed (moe_tuning.h) */
    const bool stream = q->dev.l2_bytes > 0 &&
                        (double)plan->rows * (double)row_bytes > GATHER_STREAM_MIN_L2S * (double)q->dev.l2_bytes;
    rdg_note_kernel("moe.gather");
    switch (unit) {
    case 16:
        launch_gather<uint4>(stream, grid, q->stream, src, rt, dst, plan->rows, units, tpr);
        break;
    case 8:
        launch_gather<uint2>(stream, grid, q->stream, src, rt, dst, plan->rows, units, tpr);
        break;
    case 4:
        launch_gather<uint32_t>(stream, grid, q->stream, src, rt, dst, plan->rows, units, tpr);
        break;
    default:
        launch_gather<uint16_t>(stream, grid, q->stream, src, rt, dst, plan->rows, units, tpr);
        break;
    }
    return rdg_launched("moe dispatch_gather");
}

rudnn_status_t rdg_moe_combine(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t expert_out,
                               rudnn_mem_ref_t positions, rudnn_mem_ref_t weights, rudnn_mem_ref_t out)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(begin(q));
    const void *x = rdg_at(expert_out);
    void *y = rdg_at(out);
    const int vec_elems = plan->dtype == RUDNN_F32 ? 4 : 8;
    const int vec = plan->hidden % vec_elems == 0 && aligned(x, 16) && aligned(y, 16);
    combine_fn fn;
    switch (plan->dtype) {
    case RUDNN_F32:
        fn = vec ? combine_kernel<RUDNN_F32, 4> : combine_kernel<RUDNN_F32, 1>;
        break;
    case RUDNN_F16:
        fn = vec ? combine_kernel<RUDNN_F16, 8> : combine_kernel<RUDNN_F16, 1>;
        break;
    default:
        fn = vec ? combine_kernel<RUDNN_BF16, 8> : combine_kernel<RUDNN_BF16, 1>;
        break;
    }
    const int64_t nv = vec ? plan->hidden / vec_elems : plan->hidden;
    const int tpr = threads_per_row(nv, warp_size(q));
    rdg_note_kernel("moe.combine");
    fn<<<dim3((unsigned)rdg_ceil_div(plan->tokens, ROWS_THREADS / tpr)), dim3(ROWS_THREADS), 0, q->stream>>>(
        x, (const uint32_t *)rdg_at(positions), rdg_at(weights), (int)plan->weight_dtype, y, plan->tokens, plan->hidden,
        plan->top_k, tpr);
    return rdg_launched("moe combine");
}
