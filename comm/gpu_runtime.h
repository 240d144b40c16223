/* The runtime names comm/nccl_glue.c uses, so that one source makes both glues:
 * librudnn-nccl.so (NCCL, CUDA runtime) and, with RUDNN_GLUE_HIP defined, librudnn-rccl.so
 * (RCCL, HIP runtime, compiled as C with __HIP_PLATFORM_AMD__). RCCL keeps NCCL's API (the
 * ncclXxx names and types), so only the runtime calls and a few strings differ. Only what the
 * glue calls is mapped; each pair takes the same arguments. */
#ifndef RUDNN_COMM_GPU_RUNTIME_H
#define RUDNN_COMM_GPU_RUNTIME_H

#ifdef RUDNN_GLUE_HIP

#include <hip/hip_runtime_api.h>
/* ROCm 5.x installs include/rccl/rccl.h (Debian's librccl-dev too), older ones include/rccl.h:
 * comm/meson.build says which it found */
#ifdef RUDNN_RCCL_HEADER_IN_SUBDIR
#include <rccl/rccl.h>
#else
#include <rccl.h>
#endif

#define GLUE_ENGINE "RCCL"
#define GLUE_ENTRY rudnn_rccl_glue_entry_v1
#define GPU_NAME(call) "hip" call /* for messages: GPU_NAME("Malloc") is "hipMalloc" */
typedef hipError_t gpuError_t;
typedef hipStream_t gpuStream_t;
#define gpuSuccess hipSuccess
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuSetDevice hipSetDevice
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuGetErrorString hipGetErrorString

#else

#include <cuda_runtime_api.h>
#include <nccl.h>

#define GLUE_ENGINE "NCCL"
#define GLUE_ENTRY rudnn_nccl_glue_entry_v1
#define GPU_NAME(call) "cuda" call
typedef cudaError_t gpuError_t;
typedef cudaStream_t gpuStream_t;
#define gpuSuccess cudaSuccess
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuSetDevice cudaSetDevice
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuGetErrorString cudaGetErrorString

#endif

#endif
