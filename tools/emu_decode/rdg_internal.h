/* Host emulation of the pieces of rdg_internal.h / gpu_compat.h that attention_decode.cu uses:
 * CUDA threads as cooperative fibers (ucontext), barriers, warp collectives. */
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#include <vector>
#include "backends/backend.h"

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define RDG_LAUNCH_BOUNDS(t, b)
#define RDG_HIP 0
#define RDG_WARP 32
#define RUDNN_GPU_BACKEND_NAME "emu"
#define RDG_MAX_WARPS 32
#define TRY(expr) RUDNN_TRY(expr)

struct dim3e { unsigned x, y, z; };
extern dim3e threadIdx, blockIdx, blockDim, gridDim;
extern unsigned char *emu_smem;

struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }

static inline float rdg_f16_to_f32(uint16_t h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline uint16_t rdg_f32_to_f16(float f) { _Float16 x = (_Float16)f; uint16_t h; memcpy(&h, &x, 2); return h; }
static inline float rdg_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
static inline uint32_t rdg_pack_bf16x2(float lo, float hi)
{
    uint32_t out[2];
    float in[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        uint32_t u = __float_as_uint(in[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            out[i] = (u >> 16) | 0x40u;
        else
            out[i] = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    }
    return out[0] | (out[1] << 16);
}
static inline uint16_t rdg_f32_to_bf16(float f) { return (uint16_t)(rdg_pack_bf16x2(f, 0.0f) & 0xffffu); }

/* fibers */
void emu_bar(int id, int count);
void emu_yield();
#define __syncthreads() emu_bar(0, (int)blockDim.x)
#define RDG_SYNCWARP() emu_bar(1 + (int)threadIdx.x / 32, 32)
#define __trap() abort()


/* warp exchange */
struct EmuWarpX { uint64_t v[32][16]; };
extern EmuWarpX emu_x[32];
template <class T>
static inline T emu_shfl_xor(T v, int m)
{
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    memcpy(&emu_x[w].v[lane][0], &v, sizeof v);
    RDG_SYNCWARP();
    T r;
    memcpy(&r, &emu_x[w].v[lane ^ m][0], sizeof r);
    RDG_SYNCWARP();
    return r;
}
#define __shfl_xor_sync(mask, v, m) emu_shfl_xor((v), (m))

typedef struct rdg_devinfo {
    int index, sm_count, warp_size, max_threads;
    size_t smem_optin;
    int arch, clusters, wgmma;
    void *tensor_map_encode;
    size_t total_mem;
} rdg_devinfo_t;
typedef int cudaError_t;
#define cudaSuccess 0
static inline cudaError_t cudaGetLastError() { return 0; }
rudnn_status_t rdg_fail(rudnn_status_t status, cudaError_t err, const char *what);
static inline int64_t rdg_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline void *rdg_at(rudnn_mem_ref_t m) { return m.mem ? (void *)((char *)m.mem + m.offset) : nullptr; }
/* cp.async emulation: copies queue per thread in commit groups and land at the latest moment
 * the wait allows (emu_late) or at once */
extern int emu_late;
void emu_cp16(void *dst, const void *src, bool valid);
void emu_commit();
void emu_wait(int n);
#undef rdg_copy_async_commit
#define rdg_copy_async_commit emu_commit
typedef struct rdg_queue { int stream; rdg_devinfo_t dev; } rdg_queue_t;
