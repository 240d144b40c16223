/* sm_80's tensor-core product and its operand loads, shared by the MoE expert GEMMs
 * (moe_experts.cu), decode attention (attention_decode.cu) and the gated delta rule
 * (gated_delta_tc.cu): mma.sync m16n8k16 on 16-bit operands with FP32 accumulators, ldmatrix, and
 * m16n8k8 on TF32 (three of them for an FP32-accurate product).
 * Include after gpu_compat.h (its rdg_copy16_async* stage the tiles); CUDA only (callers keep it out
 * of HIP builds). */
#ifndef RUDNN_MMA_SYNC_CUH
#define RUDNN_MMA_SYNC_CUH

#if !RDG_HIP

namespace {

__device__ __forceinline__ uint32_t rdg_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* "memory": the fragments are read after barriers that order the copies into the tiles */
__device__ __forceinline__ void rdg_ldsm_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void rdg_ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* d += a b: a the m16k16 fragment, b0 b1 the k16n8 fragment (BF16 or F16 by DT) */
template <int DT>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (DT == RUDNN_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d;
    (void)a;
    (void)b0;
    (void)b1;
    __trap(); /* the host never launches these below sm_80 */
#endif
}

/* x = hi + lo to about FP32's precision, both TF32 (round to nearest): the 3xTF32 product
 * a_hi b_hi + a_hi b_lo + a_lo b_hi */
__device__ __forceinline__ void rdg_tf32_split(float x, uint32_t &hi, uint32_t &lo)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(hi) : "f"(x));
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(lo) : "f"(x - __uint_as_float(hi)));
#else
    hi = __float_as_uint(x), lo = 0;
#endif
}

/* d += a b on TF32 operands: a the m16k8 fragment (a0 [g][t], a1 [g+8][t], a2 [g][t+4],
 * a3 [g+8][t+4]), b0 b1 the k8n8 one ([t][g], [t+4][g]); g = lane / 4, t = lane % 4 */
__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d;
    (void)a;
    (void)b0;
    (void)b1;
    __trap();
#endif
}

/* d += a b at about FP32's precision: three TF32 products, the small terms first */
__device__ __forceinline__ void mma1688_3xtf32(float (&d)[4], const float (&a)[4], float b0, float b1)
{
    uint32_t ah[4], al[4], bh0, bl0, bh1, bl1;
#pragma unroll
    for (int e = 0; e < 4; e++)
        rdg_tf32_split(a[e], ah[e], al[e]);
    rdg_tf32_split(b0, bh0, bl0);
    rdg_tf32_split(b1, bh1, bl1);
    mma1688_tf32(d, al, bh0, bh1);
    mma1688_tf32(d, ah, bl0, bl1);
    mma1688_tf32(d, ah, bh0, bh1);
}

} // namespace

#endif /* !RDG_HIP */

#endif
