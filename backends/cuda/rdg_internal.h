/* The CUDA/HIP plugin's internal interface: the device and queue types every launcher reads, the
 * error helpers of plugin.cu, and the entry points one source file calls in another. Each
 * function is declared here once; every .cu includes this header (gpu_compat.h, the portability
 * layer, comes with it).
 */
#ifndef RUDNN_RDG_INTERNAL_H
#define RUDNN_RDG_INTERNAL_H

#include "gpu_compat.h"

#include "backends/backend.h"

/* ---- devices and queues ---- */

/* What the kernel launchers need to know about a device (copied into every queue). Filled once
 * by device_open (plugin.cu); the capabilities at the end come from rdg_probe_caps. */
typedef struct rdg_devinfo {
    int index;
    int sm_count;
    int warp_size;
    int max_threads;   /* per block */
    size_t smem_optin; /* dynamic + static shared memory a block may use */
    int arch;          /* rdg_arch_number */
    /* capabilities of this device with the kernel binary the runtime loaded for it */
    int clusters; /* thread-block cluster launches usable (CUDA, sm_90+ binary) */
    int wgmma;    /* Hopper's wgmma compiled in (an sm_90a binary on an sm_90 device) */
    /* the driver's cuTensorMapEncodeTiled (PFN_cuTensorMapEncodeTiled_v12000 of cudaTypedefs.h), for
     * TMA loads; NULL where the driver has none, and under HIP */
    void *tensor_map_encode;
    size_t total_mem; /* global memory, bytes (the attention fallback's workspace limit) */
    size_t l2_bytes;  /* L2 cache, bytes (the gather streams outputs larger than it) */
} rdg_devinfo_t;

/* The device handle the HAL passes (plugin.cu's device starts with its rdg_devinfo_t). */
static inline const rdg_devinfo_t *rdg_devinfo_of(void *device)
{
    return (const rdg_devinfo_t *)device;
}

typedef struct rdg_queue {
    cudaStream_t stream;
    rdg_devinfo_t dev;
} rdg_queue_t;

/* device_caps.cu: fills the capability fields of info (the others already set) for the device of
 * prop, which is the current one. */
void rdg_probe_caps(const cudaDeviceProp *prop, rdg_devinfo_t *info);

/* Makes device `index` the calling thread's (cheap when it already is) and clears a launch error
 * left by an earlier failed call, so the checks after this call's launches see only its own. */
rudnn_status_t rdg_use_device(int index);

/* ---- errors (plugin.cu) ---- */

/* Records "<backend>: <what> failed: <runtime message>" through the host and returns status. */
rudnn_status_t rdg_fail(rudnn_status_t status, cudaError_t err, const char *what);
/* Same, printf-style message without a runtime error. */
rudnn_status_t rdg_error(rudnn_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* DEVICE_ERROR "<backend>: <api> kernel launch (<what>) failed: ..." when the last launch failed. */
rudnn_status_t rdg_launched(const char *what);
/* Tells rudnn_last_kernel() which kernel the calling thread launches next ("norm.bulk"). */
void rdg_note_kernel(const char *name);
/* Allocation-fault injection (host service fail_allocation, rudnn/debug.h): nonzero when the
 * allocation about to be made must fail. Called before every host or device allocation whose
 * failure the plugin reports. */
int rdg_fail_allocation(void);

#define TRY(expr) RUDNN_TRY(expr) /* backends/backend.h */

/* ---- host helpers ---- */

/* The device address of a memory reference (NULL stays NULL). */
static inline void *rdg_at(rudnn_mem_ref_t m)
{
    return m.mem ? (void *)((char *)m.mem + m.offset) : nullptr;
}

/* Shared memory the hardware keeps a block on sm_80+: an SM has smem_optin + this in all, so n
 * blocks of b bytes fit where n (b + this) <= smem_optin + this. */
#define RDG_SMEM_RESERVED 1024u

static inline int64_t rdg_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* ---- kernel tables ---- */

/* Each family's kernel table, one function per family of families.txt (norm.cu: rdg_norm_table,
 * moe_table.cu: rdg_moe_table, ...). Weak, so that a family whose kernels this plugin does not
 * build is absent (NULL) rather than a link error. */
#define RDG_TABLE_DECL(f) const rudnn_##f##_kernels_t *rdg_##f##_table(void) __attribute__((weak));
RUDNN_FAMILIES(RDG_TABLE_DECL)
#undef RDG_TABLE_DECL

/* The families plugin.cu leaves out of the backend unless built with RDG_UNVERIFIED_FAMILIES (meson
 * option gpu_unverified): their kernels have not yet passed their suites on a GPU. nullptr: none. */
#define RDG_UNVERIFIED_LIST "convolution", "pooling", "interpolation", "ctc", "grid_sample", "moe_train", nullptr
/* The attention backward (attention_backward.cu) is unverified the same way. */
#define RDG_ATTENTION_BACKWARD_VERIFIED 0

/* ---- entry points across files ---- */

/* norm.cu: 1 if the loaded kernel binary for the current device supports cluster launches. */
int rdg_norm_clusters_supported(const cudaDeviceProp *prop);

/* moe_route.cu, moe_permute.cu: the rudnn_moe_kernels_t entries of those names (hal/moe.h). */
rudnn_status_t rdg_moe_route_softmax(void *queue, const rudnn_route_kernel_plan_t *plan, rudnn_mem_ref_t logits,
                                     rudnn_mem_ref_t indices, rudnn_mem_ref_t weights);
rudnn_status_t rdg_moe_route_sigmoid_grouped(void *queue, const rudnn_route_kernel_plan_t *plan,
                                             rudnn_mem_ref_t logits, rudnn_mem_ref_t bias, rudnn_mem_ref_t indices,
                                             rudnn_mem_ref_t weights);
rudnn_status_t rdg_moe_dispatch_plan(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t indices,
                                     rudnn_mem_ref_t counts, rudnn_mem_ref_t offsets, rudnn_mem_ref_t positions,
                                     rudnn_mem_ref_t row_token);
rudnn_status_t rdg_moe_dispatch_gather(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t input,
                                       rudnn_mem_ref_t row_token, rudnn_mem_ref_t tokens);
rudnn_status_t rdg_moe_combine(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t expert_out,
                               rudnn_mem_ref_t positions, rudnn_mem_ref_t weights, rudnn_mem_ref_t out);

/* attention_backward.cu: the rudnn_attention_kernels_t entries backward_workspace and backward. */
rudnn_status_t rdg_attention_backward_workspace(void *device, const rudnn_attention_plan_t *plan, size_t *bytes);
rudnn_status_t rdg_attention_backward(void *queue, const rudnn_attention_plan_t *plan,
                                      const rudnn_attention_backward_operands_t *ops);

/* gated_delta_tc.cu (CUDA only): the chunked gated delta rule on tensor cores. plan_fits: the plan
 * (dtype, chunk 64, K and V of 64 or 128, shared memory) can take it; fits: also the operands'
 * alignment (16-byte rows); scratch: its bytes. */
int rdg_gdr_tc_plan_fits(const rdg_devinfo_t *dev, const rudnn_gated_delta_plan_t *p);
int rdg_gdr_tc_fits(const rdg_devinfo_t *dev, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o);
size_t rdg_gdr_tc_scratch(const rudnn_gated_delta_plan_t *p);
/* gated_delta_wg.cu (sm_90a): tc_pass's state and segment passes on wgmma for K = V = 128; pass is
 * gated_delta_tc.cuh's Pass, blocks its grid's x (segments). */
int rdg_gdr_wg_fits(const rdg_devinfo_t *dev, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o);
rudnn_status_t rdg_gdr_wg_pass(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p,
                               const rudnn_gated_delta_operands_t *o, int pass, int64_t blocks);
rudnn_status_t rdg_gdr_tc_chunked(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p,
                                  const rudnn_gated_delta_operands_t *o);

/* ffn_gemv.cu: the weight-only GEMM for few rows, where rdg_ffn_gemv_fits; scratch of
 * rdg_ffn_gemv_scratch bytes (the split-k partials). */
int rdg_ffn_gemv_fits(const rudnn_ffn_gemm_plan_t *p);
size_t rdg_ffn_gemv_scratch(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p);
rudnn_status_t rdg_ffn_gemv(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                            const void *scale, const void *offset, void *scratch, void *c);

/* ffn_mma_w4.cu (CUDA only): the int4 weight-only GEMM on tensor cores (sm_80+). plan_fits: the
 * plan can take it (BF16 / F16 A, m <= FFN_MMA_W4_MAX_M, n % 256, k % 16, groups of a multiple of 16
 * rows); fits: also 16-byte aligned weights, and a scratch where this m needs partials; scratch:
 * the partials' bytes for any m' <= the plan's m (0: none, the kernel then writes c itself). */
int rdg_ffn_mma_w4_plan_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p);
int rdg_ffn_mma_w4_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, const void *b, int has_scratch);
size_t rdg_ffn_mma_w4_scratch(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p);
/* ffn_split_sum.cu: the sum of split-k partials [splits, mn] (F32) into c in c_dtype, in split
 * order (deterministic); name: the kernel's, for errors. */
rudnn_status_t rdg_ffn_split_sum(rdg_queue_t *q, const char *name, const float *partial, void *c, int64_t mn,
                                 int splits, int c_dtype);
/* ffn_wgmma_w4.cu (sm_90a): the int4 weight-only product on wgmma, dense (offsets NULL) or for all
 * experts at once (offsets: U32 [experts + 1] on the device, b [experts, k, n / 2], scale
 * [experts, groups, n]); why not, or NULL. A dense product of few tiles splits k over the SMs where
 * a scratch is given: its partials' bytes for any m' <= the plan's m from rdg_ffn_wgmma_w4_scratch
 * (without it, no split). */
const char *rdg_ffn_wgmma_w4_why(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts);
size_t rdg_ffn_wgmma_w4_scratch(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p);
rudnn_status_t rdg_ffn_wgmma_w4(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                const void *b, const void *scale, const uint32_t *offsets, void *scratch, void *c);
/* All experts' products in one launch (hal/ffn.h gemm_grouped; no split of k, no scratch). */
int rdg_ffn_mma_w4_grouped_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts);
rudnn_status_t rdg_ffn_mma_w4_grouped(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                      const void *b, const void *scale, const void *offset, const uint32_t *offsets,
                                      void *c);
/* early: b, scale and offset were final before the stream's previous kernel began (that kernel and
 * the one before it do not write them): launched as a programmatic dependent (FFN_MMA_W4_EARLY),
 * the product loads its first weights while the previous kernel ends. */
rudnn_status_t rdg_ffn_mma_w4(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                              const void *scale, const void *offset, void *scratch, void *c, bool early);
/* The same product without the split sum: where the plan splits k, the splits' FP32 partials
 * [*splits, m, n] in scratch for the caller to add in split order; else c written (*splits 1). */
rudnn_status_t rdg_ffn_mma_w4_unsummed(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                                       const void *scale, const void *offset, void *scratch, void *c, int *splits,
                                       bool early);

/* ffn_cublas.cu (CUDA with cuBLAS's headers): the FFN's float GEMM (hal/ffn.h) on cuBLAS. */
rudnn_status_t rdg_ffn_gemm_cublas(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                                   void *c);
/* The int8 x int8 GEMM on cuBLAS where rdg_ffn_cublas_i8_fits and a, c are 16-byte aligned: W
 * transposed into scratch (n k bytes). */
int rdg_ffn_cublas_i8_fits(const rudnn_ffn_gemm_plan_t *p);
rudnn_status_t rdg_ffn_gemm_cublas_i8(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                                      void *scratch, void *c);

/* ep_combine.cu: the ep_combine_norm entry of hal/moe.h */
rudnn_status_t rdg_ep_combine_norm(void *queue, const rudnn_ep_combine_plan_t *plan, rudnn_mem_ref_t rows,
                                   rudnn_mem_ref_t src, rudnn_mem_ref_t scales, rudnn_mem_ref_t shared,
                                   rudnn_mem_ref_t ori_x, rudnn_mem_ref_t alpha1, rudnn_mem_ref_t alpha2,
                                   rudnn_mem_ref_t const_v, rudnn_mem_ref_t residual, rudnn_mem_ref_t gamma,
                                   rudnn_mem_ref_t y, rudnn_mem_ref_t rstd, rudnn_mem_ref_t x);

/* moe_experts.cu: the SwiGLU expert candidates (the experts_* entries of hal/moe.h) */
const rudnn_kernel_candidate_t *rdg_moe_experts_candidates(uint32_t *count);
void rdg_moe_experts_check(void *device, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                           rudnn_candidate_verdict_t *verdict);
rudnn_status_t rdg_moe_experts_run(void *queue, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                                   rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate,
                                   rudnn_mem_ref_t up, rudnn_mem_ref_t down, rudnn_mem_ref_t act,
                                   rudnn_mem_ref_t out);

/* moe_experts_tma.cu (CUDA only): both GEMMs of one forward, where rdg_moe_tma_why(plan) is NULL
 * (ops/ chose this kernel). ptrs: tokens, gate, up, down, act, out (16-byte aligned, H and I
 * multiples of 8: checked by the caller). */
rudnn_status_t rdg_moe_experts_tma(rdg_queue_t *q, const rudnn_moe_rows_plan_t *plan, const void *const *ptrs,
                                   const uint32_t *offsets);
/* Why the TMA kernel cannot run plan on dev (encoder, shared memory, 32-bit coordinates), or NULL. */
const char *rdg_moe_tma_why(const rdg_devinfo_t *dev, const rudnn_moe_rows_plan_t *plan);
/* The FFN expert form's grouped product on the same kernel (B [E, K, N] read MN-major, C stored
 * as computed, in a's dtype or F32): why it cannot take plan with `experts` experts, or NULL; then
 * the launch (a, b, c 16-byte aligned: checked by the caller). */
const char *rdg_ffn_grouped_tma_why(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts);
rudnn_status_t rdg_ffn_grouped_tma(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                   const void *b, const uint32_t *offsets, void *c);
/* The first product with the activation ap in its epilogue (hal/ffn.h gemm_grouped_act): why not,
 * or NULL; then the launch writing a [m, ap->k2] in a's dtype. */
const char *rdg_ffn_grouped_act_why(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p,
                                    const rudnn_ffn_act_plan_t *ap, int64_t experts);
rudnn_status_t rdg_ffn_grouped_act(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                                   int64_t experts, const void *a, const void *b, const uint32_t *offsets, void *out);

#ifndef RDG_HAVE_CUBLAS
#define RDG_HAVE_CUBLAS 0 /* meson: 1 where the CUDA toolkit has cuBLAS's headers */
#endif
#if !RDG_HIP && RDG_HAVE_CUBLAS
/* moe_experts_cublas.cu (CUDA only). ptrs: tokens, gate, up, down, act, out (F16/BF16, H and I
 * multiples of 8, 16-byte aligned: checked by the caller); offsets: device [E+1]; per_expert: 1
 * forces one cublasGemmEx per expert. */
rudnn_status_t rdg_moe_experts_cublas(rdg_queue_t *q, const rudnn_moe_rows_plan_t *plan, const void *const *ptrs,
                                      const uint32_t *offsets, int per_expert, int gu16);
/* cublas_loader.cu: NULL where cuBLAS loads (loading it once), else why not: the files tried and
 * their errors. */
const char *rdg_cublas_unavailable(void);
/* cublas_loader.cu: frees the device's cuBLAS handle and scratch, after its last work (the plugin
 * calls it when the device's last context closes; a later use creates them again). */
void rdg_cublas_release_device(int index);
#endif

#endif
