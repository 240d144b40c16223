/* sm_80's tensor-core product and its operand loads, shared by the MoE expert GEMMs
 * (moe_experts.cu), decode attention (attention_decode.cu) and the gated delta rule
 * (gated_delta_tc.cu): mma.sync m16n8k16 on 16-bit operands with FP32 accumulators, and ldmatrix.
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

} // namespace

#endif /* !RDG_HIP */

#endif
