/* The host side of the TMA kernels' tensor maps (CUDA only): one encoding for every 16-bit map
 * that wgmma reads, so that the kernels' swizzle and the maps' cannot drift apart. */
#ifndef RUDNN_TENSOR_MAP_H
#define RUDNN_TENSOR_MAP_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "rdg_internal.h"

namespace {

/* A map of rank (<= 5) dims over the F16/BF16 tensor at base (dims innermost first, strides: the
 * byte strides of dims 1 .. rank - 1), boxes of box elements a dim, element strides 1, the 128-byte
 * swizzle (wgmma's 128B mode), 256-byte L2 promotion, zeros out of bounds. Whether the driver took it. */
inline bool rdg_encode_map16(PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *map, const void *base,
                             rudnn_dtype_t dt, cuuint32_t rank, const cuuint64_t *dims, const cuuint64_t *strides,
                             const cuuint32_t *box)
{
    const cuuint32_t estrides[5] = {1, 1, 1, 1, 1};
    return enc(map, dt == RUDNN_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank,
               const_cast<void *>(base), dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} // namespace

#endif
