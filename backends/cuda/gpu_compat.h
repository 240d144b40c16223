/* One portability header for the CUDA and HIP plugins (the sources in backends/cuda/ are
 * compiled by nvcc for librudnn-cuda.so and by hipcc for librudnn-hip.so).
 *
 * The sources use CUDA runtime names; under HIP they are mapped to hip* here. Everything
 * that differs between the two (backend name, warp size, shuffles, streaming loads, launch
 * bounds, fp16 intrinsics, clusters, device-property quirks) lives in this file, so the
 * kernels carry no #ifdef of their own. The plugin's own types and declarations are in
 * rdg_internal.h, which includes this file.
 */
#ifndef RUDNN_GPU_COMPAT_H
#define RUDNN_GPU_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__HIP__) || defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
/* ------------------------------------------------------------------ HIP */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#define RDG_HIP 1
#define RUDNN_GPU_BACKEND_NAME "hip"
#define RDG_API "hip"     /* prefix of runtime calls, for messages */
#define RDG_RUNTIME "HIP" /* for the driver string */

#define cudaDeviceProp hipDeviceProp_t
#define cudaError_t hipError_t
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDefault hipEventDefault
#define cudaEventDestroy hipEventDestroy
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEvent_t hipEvent_t
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaFree hipFree
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaMalloc hipMalloc
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemsetAsync hipMemsetAsync
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaSetDevice hipSetDevice
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess

/* Wavefront size: a compile-time constant in device code only (32 or 64 per target). Host
 * code must query cudaDeviceProp::warpSize instead; the host value here only sizes nothing. */
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define RDG_WARP __AMDGCN_WAVEFRONT_SIZE
#else
#define RDG_WARP 64
#endif
#define RDG_SHFL_XOR(v, mask) __shfl_xor((v), (mask))
#define RDG_SHFL(v, src) __shfl((v), (src))
/* a wavefront runs in lockstep: order its shared-memory accesses, no hardware barrier */
#define RDG_SYNCWARP()                                                                             \
    do {                                                                                           \
        __threadfence_block();                                                                     \
        __builtin_amdgcn_wave_barrier();                                                           \
    } while (0)
#define RDG_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads)
#define RDG_MAXNREG(threads, regs) __launch_bounds__(threads)
/* Loops that end early (break) are not unrolled by hipcc, which then warns about the pragma. */
#define RDG_UNROLL_EARLY_EXIT
/* Plain loads/stores (no cache-streaming hint). */
#define RDG_LDCS(ptr) (*(ptr))
#define RDG_STCS(ptr, v) (*(ptr) = (v))

/* No thread-block clusters on AMD (neither in device code nor in the host launch path). */
#define RUDNN_HAS_CLUSTERS 0
#define RDG_HOST_CLUSTERS 0

/* The MoE tensor-core experts use NVIDIA's mma.sync / wgmma PTX: none under HIP (the table entry is
 * NULL). */
#define RDG_MOE_TENSOR_CORES 0

#define RDG_SMEM_OPTIN(prop) ((prop).sharedMemPerBlock)

/* "gfx90a:sramecc+:xnack-" -> 910, "gfx1030" -> 1030, "gfx942" -> 942 (the gcnArch numbering:
 * major * 100 + minor * 10 + stepping, minor and stepping being hex digits). */
static inline int rdg_arch_number(const hipDeviceProp_t *p)
{
    const char *s = p->gcnArchName;
    if (s[0] != 'g' || s[1] != 'f' || s[2] != 'x')
        return 0;
    s += 3;
    int len = 0;
    while (s[len] && s[len] != ':')
        len++;
    if (len < 3)
        return 0;
    int major = 0;
    for (int i = 0; i < len - 2; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        major = major * 10 + (s[i] - '0');
    }
    int low[2];
    for (int i = 0; i < 2; i++) {
        char c = s[len - 2 + i];
        low[i] = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : 0;
    }
    return major * 100 + low[0] * 10 + low[1];
}

/* MFMA on CDNA (gfx908 and later gfx9), WMMA on RDNA3 (gfx11); none on gfx10. */
static inline void rdg_matrix_units(const hipDeviceProp_t *p, int *fp16, int *bf16)
{
    int a = rdg_arch_number(p);
    int yes = (a >= 908 && a < 1000) || a >= 1100;
    *fp16 = yes;
    *bf16 = yes;
}


#else
/* ----------------------------------------------------------------- CUDA */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define RDG_HIP 0
#define RUDNN_GPU_BACKEND_NAME "cuda"
#define RDG_API "cuda"
#define RDG_RUNTIME "CUDA"

#define RDG_WARP 32
#define RDG_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
#define RDG_SHFL(v, src) __shfl_sync(0xffffffffu, (v), (src))
#define RDG_SYNCWARP() __syncwarp()
#define RDG_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
/* A register cap instead of launch bounds (CUDA 12.4+; the two exclude each other): for a
 * kernel whose launch bounds would give either too few registers or too many. */
#if __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4)
#define RDG_MAXNREG(threads, regs) __maxnreg__(regs)
#else
#define RDG_MAXNREG(threads, regs) __launch_bounds__(threads)
#endif
/* #pragma unroll for loops that end early (break): nvcc unrolls them; not under HIP (above). */
#define RDG_UNROLL_EARLY_EXIT _Pragma("unroll")
/* Cache-streaming load/store (evict-first): the row data is touched once. */
#define RDG_LDCS(ptr) __ldcs(ptr)
#define RDG_STCS(ptr, v) __stcs((ptr), (v))

/* Thread-block clusters and distributed shared memory: device code compiled for sm_90+. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RUDNN_HAS_CLUSTERS 1
#else
#define RUDNN_HAS_CLUSTERS 0
#endif
/* Host side: the runtime has cudaLaunchKernelEx and cluster attributes (CUDA >= 12). Whether a
 * device can use them is decided at run time (compute capability and the loaded binary). */
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000
#define RDG_HOST_CLUSTERS 1
#else
#define RDG_HOST_CLUSTERS 0
#endif

#define RDG_SMEM_OPTIN(prop) ((prop).sharedMemPerBlockOptin)

/* MoE tensor-core experts: wgmma in sm_90a binaries, mma.sync elsewhere (sm_80+ at run time;
 * older devices fall back to the scalar kernels). */
#define RDG_MOE_TENSOR_CORES 1

static inline int rdg_arch_number(const cudaDeviceProp *p)
{
    return p->major * 10 + p->minor;
}

/* Tensor cores: fp16 from Volta (7.0), bf16 from Ampere (8.0). */
static inline void rdg_matrix_units(const cudaDeviceProp *p, int *fp16, int *bf16)
{
    *fp16 = p->major >= 7;
    *bf16 = p->major >= 8;
}

#endif

/* ------------------------------------------------- common device helpers */

#define RDG_MAX_WARPS 32 /* 1024 threads / the smallest warp */

/* fp16 bits <-> float (hardware conversions, round-to-nearest-even; NaN stays NaN) */
__device__ __forceinline__ float rdg_f16_to_f32(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ uint16_t rdg_f32_to_f16(float f)
{
    return __half_as_ushort(__float2half_rn(f));
}

/* 16-byte asynchronous global -> shared copies (sm_80+; elsewhere a plain copy): cp.async.cg
 * (L2 only), or with L1 cp.async.ca (through L1). */
template <bool L1 = false>
__device__ __forceinline__ void rdg_copy16_async(void *smem, const void *gmem)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    if constexpr (L1)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
    *(uint4 *)smem = *(const uint4 *)gmem;
#endif
}

#if !RDG_HIP
/* rdg_copy16_async, zero-filled when !valid (gmem is then not read, but must be a mapped address);
 * smem a shared-window address (CUDA only: what the wgmma kernels compute). */
__device__ __forceinline__ void rdg_copy16_async_zfill(unsigned smem, const void *gmem, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "r"(valid ? 16 : 0)
                 : "memory");
#else
    *(uint4 *)__cvta_shared_to_generic(smem) = valid ? *(const uint4 *)gmem : make_uint4(0u, 0u, 0u, 0u);
#endif
}
#endif

/* The same with smem a generic pointer. */
__device__ __forceinline__ void rdg_copy16_async_zfill(void *smem, const void *gmem, bool valid)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    rdg_copy16_async_zfill((unsigned)__cvta_generic_to_shared(smem), gmem, valid);
#else
    *(uint4 *)smem = valid ? *(const uint4 *)gmem : make_uint4(0u, 0u, 0u, 0u);
#endif
}

__device__ __forceinline__ void rdg_copy_async_commit(void)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* Waits for every copy this thread issued. */
__device__ __forceinline__ void rdg_copy_async_wait(void)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

/* Waits until at most n (0 .. 6) of this thread's copy groups are pending. */
__device__ __forceinline__ void rdg_copy_async_wait_n(int n)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    switch (n) {
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    }
#else
    (void)n;
#endif
}

/* bf16 bits <-> float. bf16 is the top half of an fp32. */
__device__ __forceinline__ float rdg_bf16_to_f32(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

/* Two floats -> two bf16 packed (lo in bits 0..15), round-to-nearest-even, NaN stays NaN. */
__device__ __forceinline__ uint32_t rdg_pack_bf16x2(float lo, float hi)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    uint32_t out[2];
    float in[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        uint32_t u = __float_as_uint(in[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            out[i] = (u >> 16) | 0x40u; /* quiet NaN, sign kept */
        else
            out[i] = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    }
    return out[0] | (out[1] << 16);
#endif
}

__device__ __forceinline__ uint16_t rdg_f32_to_bf16(float f)
{
    return (uint16_t)(rdg_pack_bf16x2(f, 0.0f) & 0xffffu);
}

/* Warp-wide u32 max / min, the result in every lane (moe_route.cu's top-k rounds): one redux.sync
 * on sm_80+, xor butterflies elsewhere (HIP: over the 32- or 64-wide wavefront). */
__device__ __forceinline__ uint32_t rdg_warp_max_u32(uint32_t v)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xffffffffu, v);
#else
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        v = max(v, (uint32_t)RDG_SHFL_XOR(v, m));
    return v;
#endif
}
__device__ __forceinline__ uint32_t rdg_warp_min_u32(uint32_t v)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_min_sync(0xffffffffu, v);
#else
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        v = min(v, (uint32_t)RDG_SHFL_XOR(v, m));
    return v;
#endif
}

/* 1 / (1 + e^-x) from the hardware exponential and reciprocal, within about 1e-6 relative of the
 * exact quotient; -inf and x < -88 give 0, +inf gives 1, NaN stays NaN. CUDA: ex2.approx.ftz and
 * rcp.approx.ftz (__expf without its subnormal fix-ups, which cannot change 1 + e^-x). */
__device__ __forceinline__ float rdg_sigmoid_approx(float x)
{
#if !RDG_HIP
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.4426950408889634f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
    return r;
#else
    return __fdividef(1.0f, 1.0f + __expf(-x));
#endif
}

/* Device code compiled for sm_90a (Hopper's wgmma): moe_experts.cu's tensor-core kernel uses it
 * there and mma.sync elsewhere, under one kernel symbol and launch configuration. */
#if !RDG_HIP && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define RDG_HAS_WGMMA 1
#else
#define RDG_HAS_WGMMA 0
#endif

#endif
