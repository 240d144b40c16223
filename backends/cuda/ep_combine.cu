/* Expert parallelism: the combine's weighted sum fused with the shared-expert term, the residual
 * add and RMSNorm (the ep_combine_norm entry of hal/moe.h), one block per token.
 *
 * The token's sum stays in registers (VPT vectors of VEC elements per thread), so each input row
 * is read once and x, y are written once: the bytes of the op and no more. One thread first lists
 * the token's terms (row, weight) in shared memory, so that the loop over them issues the loads
 * of several rows before it waits for any.
 */
#include "rdg_internal.h"
#include "elem.cuh"
#include "moe_tuning.h"
#include "rudnn/ep.h" /* RUDNN_EP_MAX_TOP_K */

namespace {

struct EpArgs {
    const void *rows, *shared, *ori, *alpha1, *alpha2, *cv, *res, *gamma;
    const int32_t *src;
    const float *scales;
    void *y, *x;
    float *rstd;
    int64_t h;
    int k, has_shared;
    float eps;
};

/* VEC consecutive elements as loaded (16 bytes when VEC > 1), unpacked to FP32 only when added:
 * the loads of several rows in flight then cost 4 registers a vector, not VEC. */
template <int DT, int VEC>
struct Raw {
    float v; /* VEC == 1: the element, already FP32 */
};
template <>
struct Raw<RUDNN_F32, 4> {
    float4 v;
};
template <>
struct Raw<RUDNN_F16, 8> {
    uint4 v;
};
template <>
struct Raw<RUDNN_BF16, 8> {
    uint4 v;
};

template <int DT, int VEC>
__device__ __forceinline__ void ld_raw(const void *p, int64_t i, Raw<DT, VEC> &r)
{
    if constexpr (VEC == 1)
        r.v = Elem<DT>::ld(p, i);
    else if constexpr (DT == RUDNN_F32)
        r.v = *(const float4 *)((const float *)p + i);
    else
        r.v = *(const uint4 *)((const uint16_t *)p + i);
}

template <int DT, int VEC>
__device__ __forceinline__ void unpack(const Raw<DT, VEC> &r, float (&v)[VEC])
{
    if constexpr (VEC == 1) {
        v[0] = r.v;
    } else if constexpr (DT == RUDNN_F32) {
        v[0] = r.v.x, v[1] = r.v.y, v[2] = r.v.z, v[3] = r.v.w;
    } else {
        const uint32_t u[4] = {r.v.x, r.v.y, r.v.z, r.v.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if constexpr (DT == RUDNN_BF16) {
                v[2 * e] = __uint_as_float(u[e] << 16);
                v[2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
            } else {
                v[2 * e] = rdg_f16_to_f32((uint16_t)(u[e] & 0xffffu));
                v[2 * e + 1] = rdg_f16_to_f32((uint16_t)(u[e] >> 16));
            }
        }
    }
}

template <int DT, int VEC>
__device__ __forceinline__ void ld_vec(const void *p, int64_t i, float (&v)[VEC])
{
    Raw<DT, VEC> r;
    ld_raw<DT, VEC>(p, i, r);
    unpack<DT, VEC>(r, v);
}

template <int DT, int VEC>
__device__ __forceinline__ void st_vec(void *p, int64_t i, const float (&v)[VEC])
{
    if constexpr (VEC == 1) {
        Elem<DT>::st(p, i, v[0]);
    } else if constexpr (DT == RUDNN_F32) {
        *(float4 *)((float *)p + i) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        uint32_t u[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if constexpr (DT == RUDNN_BF16)
                u[e] = rdg_pack_bf16x2(v[2 * e], v[2 * e + 1]);
            else
                u[e] = (uint32_t)rdg_f32_to_f16(v[2 * e]) | ((uint32_t)rdg_f32_to_f16(v[2 * e + 1]) << 16);
        }
        *(uint4 *)((uint16_t *)p + i) = make_uint4(u[0], u[1], u[2], u[3]);
    }
}

/* The terms of a token, in the order they are added: each a row and its weight. */
#define EP_MAX_TERMS (2 * RUDNN_EP_MAX_TOP_K + 2) /* const experts bring two rows; shared, residual */

template <int DT, int VEC, int VPT, int NT>
__global__ void __launch_bounds__(NT) ep_combine_norm_kernel(EpArgs a)
{
    constexpr size_t ESZ = DT == RUDNN_F32 ? 4 : 2;
    __shared__ const uint8_t *s_row[EP_MAX_TERMS];
    __shared__ float s_w[EP_MAX_TERMS];
    __shared__ int s_n;
    __shared__ float s_red[NT / 32 + 1];
    const int64_t t = blockIdx.x, h = a.h, nv = h / VEC;
    const size_t rb = (size_t)h * ESZ;
    if (threadIdx.x == 0) { /* K <= 16 slots: one thread lists them */
        int n = 0, any = 0;
        for (int j = 0; j < a.k; j++) {
            const int32_t c = a.src[t * a.k + j];
            const float w = a.scales[t * a.k + j];
            if (c == RUDNN_EP_SRC_OFF)
                continue;
            any = 1;
            if (c >= 0) {
                s_row[n] = (const uint8_t *)a.rows + (size_t)c * rb, s_w[n++] = w;
            } else if (c == RUDNN_EP_SRC_COPY) {
                s_row[n] = (const uint8_t *)a.ori + (size_t)t * rb, s_w[n++] = w;
            } else if (c <= RUDNN_EP_SRC_CONST0) {
                const int64_t e = RUDNN_EP_SRC_CONST0 - c;
                s_row[n] = (const uint8_t *)a.ori + (size_t)t * rb, s_w[n++] = w * Elem<DT>::ld(a.alpha1, e);
                s_row[n] = (const uint8_t *)a.cv + (size_t)e * rb, s_w[n++] = w * Elem<DT>::ld(a.alpha2, e);
            } /* zero experts add nothing */
        }
        if (any && a.has_shared)
            s_row[n] = (const uint8_t *)a.shared + (size_t)t * rb, s_w[n++] = 1.0f;
        s_row[n] = (const uint8_t *)a.res + (size_t)t * rb, s_w[n++] = 1.0f;
        s_n = n;
    }
    __syncthreads();
    float acc[VPT][VEC];
#pragma unroll
    for (int i = 0; i < VPT; i++)
#pragma unroll
        for (int e = 0; e < VEC; e++)
            acc[i][e] = 0.0f;
    /* the loads of U terms in flight at once (about 16 vectors a thread); the sums still go term
     * by term */
    constexpr int U = 16 / VPT < 1 ? 1 : 16 / VPT < EP_COMBINE_UNROLL ? 16 / VPT : EP_COMBINE_UNROLL;
    const int n = s_n;
    for (int m0 = 0; m0 < n; m0 += U) {
        Raw<DT, VEC> raw[U][VPT];
#pragma unroll
        for (int m = 0; m < U; m++)
#pragma unroll
            for (int i = 0; i < VPT; i++) {
                const int64_t u = (int64_t)i * NT + threadIdx.x;
                if (m0 + m < n && u < nv)
                    ld_raw<DT, VEC>(s_row[m0 + m], u * VEC, raw[m][i]);
            }
#pragma unroll
        for (int m = 0; m < U; m++)
            if (m0 + m < n) {
                const float w = s_w[m0 + m];
#pragma unroll
                for (int i = 0; i < VPT; i++) {
                    float v[VEC];
                    unpack<DT, VEC>(raw[m][i], v);
#pragma unroll
                    for (int e = 0; e < VEC; e++)
                        acc[i][e] = fmaf(w, v[e], acc[i][e]);
                }
            }
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; i++)
        if ((int64_t)i * NT + threadIdx.x < nv)
#pragma unroll
            for (int e = 0; e < VEC; e++)
                ss = fmaf(acc[i][e], acc[i][e], ss);
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        ss += RDG_SHFL_XOR(ss, m);
    const int warps = NT / RDG_WARP;
    if (threadIdx.x % RDG_WARP == 0)
        s_red[threadIdx.x / RDG_WARP] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float tot = 0.0f;
        for (int w = 0; w < warps; w++)
            tot += s_red[w];
        s_red[NT / 32] = 1.0f / sqrtf(tot / (float)h + a.eps);
    }
    __syncthreads();
    const float r = s_red[NT / 32];
    if (threadIdx.x == 0)
        a.rstd[t] = r;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
        const int64_t u = (int64_t)i * NT + threadIdx.x;
        if (u >= nv)
            continue;
        float g[VEC], yv[VEC];
        ld_vec<DT, VEC>(a.gamma, u * VEC, g);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            yv[e] = acc[i][e] * r * g[e];
        st_vec<DT, VEC>(a.x, t * h + u * VEC, acc[i]);
        st_vec<DT, VEC>(a.y, t * h + u * VEC, yv);
    }
}

typedef void (*ep_fn)(EpArgs);

/* The kernel for DT: 16-byte vectors when H and every row allow them, else scalars; VPT the
 * fewest vectors a thread that cover H. NULL: H is past what a block holds in registers. */
template <int DT>
ep_fn pick(int vec, int64_t units, int *threads)
{
    constexpr int V = DT == RUDNN_F32 ? 4 : 8;
    if (vec) {
        *threads = EP_COMBINE_THREADS;
        const int64_t vpt = (units + EP_COMBINE_THREADS - 1) / EP_COMBINE_THREADS;
        return vpt <= 1 ? ep_combine_norm_kernel<DT, V, 1, EP_COMBINE_THREADS>
             : vpt <= 2 ? ep_combine_norm_kernel<DT, V, 2, EP_COMBINE_THREADS>
             : vpt <= 4 ? ep_combine_norm_kernel<DT, V, 4, EP_COMBINE_THREADS>
             : vpt <= 8 ? ep_combine_norm_kernel<DT, V, 8, EP_COMBINE_THREADS>
                        : nullptr;
    }
    *threads = EP_COMBINE_SCALAR_THREADS;
    const int64_t vpt = (units + EP_COMBINE_SCALAR_THREADS - 1) / EP_COMBINE_SCALAR_THREADS;
    return vpt <= 2 ? ep_combine_norm_kernel<DT, 1, 2, EP_COMBINE_SCALAR_THREADS>
         : vpt <= 8 ? ep_combine_norm_kernel<DT, 1, 8, EP_COMBINE_SCALAR_THREADS>
         : vpt <= 16 ? ep_combine_norm_kernel<DT, 1, 16, EP_COMBINE_SCALAR_THREADS>
                     : nullptr;
}

int aligned16(const void *p)
{
    return p == nullptr || ((uintptr_t)p % 16) == 0;
}

} // namespace

rudnn_status_t rdg_ep_combine_norm(void *queue, const rudnn_ep_combine_plan_t *plan, rudnn_mem_ref_t rows,
                                   rudnn_mem_ref_t src, rudnn_mem_ref_t scales, rudnn_mem_ref_t shared,
                                   rudnn_mem_ref_t ori_x, rudnn_mem_ref_t alpha1, rudnn_mem_ref_t alpha2,
                                   rudnn_mem_ref_t const_v, rudnn_mem_ref_t residual, rudnn_mem_ref_t gamma,
                                   rudnn_mem_ref_t y, rudnn_mem_ref_t rstd, rudnn_mem_ref_t x)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    if (plan->top_k < 1 || plan->top_k > RUDNN_EP_MAX_TOP_K)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: ep combine: top_k %d is past %d",
                         RUDNN_GPU_BACKEND_NAME, plan->top_k, RUDNN_EP_MAX_TOP_K);
    EpArgs a;
    a.rows = rows.mem ? rdg_at(rows) : nullptr;
    a.shared = shared.mem ? rdg_at(shared) : nullptr;
    a.ori = ori_x.mem ? rdg_at(ori_x) : nullptr;
    a.alpha1 = alpha1.mem ? rdg_at(alpha1) : nullptr;
    a.alpha2 = alpha2.mem ? rdg_at(alpha2) : nullptr;
    a.cv = const_v.mem ? rdg_at(const_v) : nullptr;
    a.res = rdg_at(residual);
    a.gamma = rdg_at(gamma);
    a.src = (const int32_t *)rdg_at(src);
    a.scales = (const float *)rdg_at(scales);
    a.y = rdg_at(y);
    a.x = rdg_at(x);
    a.rstd = (float *)rdg_at(rstd);
    a.h = plan->hidden;
    a.k = plan->top_k;
    a.has_shared = plan->has_shared;
    a.eps = plan->eps;
    const int v_elems = plan->dtype == RUDNN_F32 ? 4 : 8;
    const int vec = plan->hidden % v_elems == 0 && aligned16(a.rows) && aligned16(a.shared) && aligned16(a.ori) &&
                    aligned16(a.cv) && aligned16(a.res) && aligned16(a.gamma) && aligned16(a.y) && aligned16(a.x);
    const int64_t units = vec ? plan->hidden / v_elems : plan->hidden;
    int threads = 0;
    const ep_fn fn = plan->dtype == RUDNN_F32 ? pick<RUDNN_F32>(vec, units, &threads)
                   : plan->dtype == RUDNN_F16 ? pick<RUDNN_F16>(vec, units, &threads)
                                              : pick<RUDNN_BF16>(vec, units, &threads);
    if (!fn)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: ep combine: hidden %lld is more than a block holds",
                         RUDNN_GPU_BACKEND_NAME, (long long)plan->hidden);
    rdg_note_kernel(vec ? "moe.ep_combine_norm" : "moe.ep_combine_norm_scalar");
    fn<<<dim3((unsigned)plan->tokens), dim3((unsigned)threads), 0, q->stream>>>(a);
    return rdg_launched("ep combine + rms norm");
}
