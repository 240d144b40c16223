/* The online softmax of the wgmma attention kernels (attention_wgmma.cu, paged_attention_wgmma.cu)
 * on a warpgroup's m64nBN score fragment. A thread holds BN / 2 scores of two rows (lane / 4 and
 * lane / 4 + 8 of its warp's 16; element i is row (i % 4) / 2, column 8 (i / 4) + 2 (lane % 4) +
 * i % 2), a row's scores spread over the 4 lanes of a quad. Scores are in the log2 domain.
 * Include after wgmma.cuh; CUDA only. */
#ifndef RUDNN_WGMMA_SOFTMAX_CUH
#define RUDNN_WGMMA_SOFTMAX_CUH

#if !RDG_HIP && RDG_HAS_WGMMA

namespace {

__device__ __forceinline__ float wg_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* The scores of a tile (times f: raw dot products of a tile with no mask take the scale here, a
 * multiply less a score) -> p = 2^(s f - m) in place, with the rows' running maxima m and sums l
 * updated and alpha the factor the accumulator must be rescaled by. A row that has seen nothing
 * (all -inf) gets p = 0, not NaN. */
template <int BN>
__device__ __forceinline__ void wg_softmax(float (&sc)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                           float f)
{
    float mx[2] = {-INFINITY, -INFINITY}, m_use[2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        mx[(i % 4) / 2] = fmaxf(mx[(i % 4) / 2], sc[i]);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(m[r], mx[r] * f);
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        m_use[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
        alpha[r] = wg_exp2(m[r] - m_use[r]); /* m = -inf at first: 0 */
        m[r] = mx[r];
        l[r] *= alpha[r];
    }
#pragma unroll
    for (int i = 0; i < BN / 2; i++) {
        const int r = (i % 4) / 2;
        sc[i] = wg_exp2(fmaf(sc[i], f, -m_use[r]));
        l[r] += sc[i];
    }
}

/* O *= alpha, and P to the A fragments of the next P V: P's m64n16 accumulator blocks are those
 * fragments (rows r0 / r0 + 8, columns 2 quad and 8 + 2 quad), rounded to the dtype. */
template <int DT, int BN, int NV>
__device__ __forceinline__ void wg_rescale_pack(float (&o)[NV / 2], const float (&alpha)[2], const float (&sc)[BN / 2],
                                                uint32_t (&pa)[BN / 16][4])
{
#pragma unroll
    for (int i = 0; i < NV / 2; i++)
        o[i] *= alpha[(i % 4) / 2];
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        pa[kk][0] = pack2(DT, sc[8 * kk + 0], sc[8 * kk + 1]);
        pa[kk][1] = pack2(DT, sc[8 * kk + 2], sc[8 * kk + 3]);
        pa[kk][2] = pack2(DT, sc[8 * kk + 4], sc[8 * kk + 5]);
        pa[kk][3] = pack2(DT, sc[8 * kk + 6], sc[8 * kk + 7]);
    }
}

} // namespace

#endif

#endif
