/* Bit tools of the int4 weight kernels (ffn_mma_w4.cu, ffn_wgmma_w4.cu): a byte permute and the
 * lop3 that lays a nibble field under a float's exponent bits. */
#ifndef RUDNN_CUDA_INT4_BITS_CUH
#define RUDNN_CUDA_INT4_BITS_CUH

#include <stdint.h>

namespace {

/* prmt.b32: the 4 bytes picked by sel's nibbles from the 8 of (b, a) */
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

/* (a & MASK) ^ C, bitwise: the masked bits of a, those also set in C inverted, the other bits C's
 * (lop3 0x6A = F(0xF0, 0xCC, 0xAA) for (b & (a ^ c)) | (~b & c)) */
template <uint32_t MASK, uint32_t C>
__device__ __forceinline__ uint32_t and_xor(uint32_t a)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(r) : "r"(a), "n"(MASK), "n"(C));
    return r;
}

} // namespace

#endif
