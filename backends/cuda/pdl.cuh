/* Programmatic dependent launch (sm_90, CUDA and HIP sources): a kernel launched by rdg_launch_pdl
 * may be scheduled while the stream's previous kernel ends, so that its launch and the tail of that
 * kernel overlap. Such a kernel calls rdg_pdl_wait() before it touches memory: the wait returns once
 * the previous kernel has finished and its writes are visible (that kernel waited for its own
 * predecessor the same way, or was launched plainly). rdg_pdl_trigger() lets the kernel's own
 * dependent be scheduled. Elsewhere (HIP, older devices, a plain launch) both are no-ops. */
#ifndef RUDNN_PDL_CUH
#define RUDNN_PDL_CUH

#include "rdg_internal.h"

__device__ __forceinline__ void rdg_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void rdg_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* fn<<<grid, block, smem, q's stream>>>(args), as a programmatic dependent where pdl is set and the
 * device and the runtime allow it (sm_90, CUDA 12); a failed launch is left for cudaGetLastError
 * (callers that report launches their own way). */
template <typename... P, typename... A>
void rdg_launch_pdl_raw(rdg_queue_t *q, bool pdl, void (*fn)(P...), dim3 grid, dim3 block, size_t smem, A... args)
{
#if !RDG_HIP && RDG_HOST_CLUSTERS
    if (pdl && q->dev.arch >= 90) {
        cudaLaunchConfig_t cfg = cudaLaunchConfig_t();
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = q->stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        (void)cudaLaunchKernelEx(&cfg, fn, args...);
        return;
    }
#else
    (void)pdl;
#endif
    fn<<<grid, block, smem, q->stream>>>(args...);
}

/* rdg_launch_pdl_raw, then rdg_launched(what). */
template <typename... P, typename... A>
rudnn_status_t rdg_launch_pdl(rdg_queue_t *q, bool pdl, const char *what, void (*fn)(P...), dim3 grid, dim3 block,
                              size_t smem, A... args)
{
    rdg_launch_pdl_raw(q, pdl, fn, grid, block, smem, args...);
    return rdg_launched(what);
}

#endif
