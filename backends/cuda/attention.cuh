/* What the CUDA/HIP attention sources share: attention.cu (the family's table), attention_flash.cu
 * attention_fallback.cu and attention_wgmma.cu (the candidates' kernels and launchers). The kernels' arguments,
 * the contract's score rules as device functions, and the launchers' declarations. Include after
 * rdg_internal.h. */
#ifndef RUDNN_ATTENTION_CUH
#define RUDNN_ATTENTION_CUH

#include "elem.cuh"

#define ATT_OP "attention"
#define ATT_FLASH_DECODE_NAME "attention.flash_decode"
#define ATT_FLASH_UNIT_NAME "attention.flash_unit"
#define ATT_FALLBACK_NAME "attention.fallback"
#define ATT_WGMMA_NAME "attention.wgmma_tma"
#define ATT_NO_BIAS (-1) /* rdg_att_args::bias_dtype without a bias */

/* The plan and device addresses as every attention kernel takes them (by value). Strides are
 * element strides of dims (b, h, s) (mask: bytes; bias: bias elements; 0 on a broadcast dim). */
struct rdg_att_args {
    const void *q, *k, *v; /* k, v: NULL when Skv is 0 (never read then) */
    const uint8_t *mask;   /* NULL: none */
    const void *bias;      /* NULL: none */
    void *out;
    float *lse; /* NULL: none */
    int64_t qs[3], ks[3], vs[3], os[3], ms[3], bs[3];
    int64_t batch, heads_q, group; /* group: Hq / Hkv query heads per K/V head */
    int64_t seq_q, seq_kv, window_left, window_right;
    int d, dv;
    int bias_dtype; /* RUDNN_F32, RUDNN_F16, RUDNN_BF16 or ATT_NO_BIAS */
    int vec_q, vec_kv; /* 1: q (k and v) rows may be read in 16-byte pieces (attention.cu) */
    int vec_out;       /* 1: out rows may be written in 16-byte pieces */
    float scale, softcap;
};

/* attention.cu: the args of a plan and its buffers (vec_* from the alignment of the addresses). */
/* Whether rows of `width` elements at `base` + r * stride (for each of the three strides) all
 * start on 16 bytes and span whole 16-byte pieces: the one place the 16-byte loads are allowed. */
static inline int rdg_att_vec_ok(const void *base, const int64_t stride[3], int64_t width, size_t elem)
{
    const int64_t ve = (int64_t)(16 / elem);
    if (((uintptr_t)base & 15u) != 0 || width % ve != 0)
        return 0;
    for (int s = 0; s < 3; s++)
        if (stride[s] % ve != 0)
            return 0;
    return 1;
}

void rdg_att_make_args(const rudnn_attention_plan_t *plan, rudnn_mem_ref_t q, rudnn_mem_ref_t k,
                       rudnn_mem_ref_t v, rudnn_mem_ref_t mask, rudnn_mem_ref_t bias, rudnn_mem_ref_t out,
                       rudnn_mem_ref_t lse, rdg_att_args *a);

/* attention.cu: lets kernel fn take smem bytes of dynamic shared memory (the opt-in past the
 * default 48 KiB), before a launch. */
rudnn_status_t rdg_att_allow_smem(const rdg_queue_t *q, const void *fn, size_t smem);

/* attention_flash.cu: whether flash_unit's CTA fits dev (shared memory, threads), and its launch. */
int rdg_att_flash_fits(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan);
rudnn_status_t rdg_att_run_flash(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a);

/* attention_wgmma.cu (CUDA only): why the wgmma + TMA kernel does not run plan on dev (NULL when it
 * does; written into why), and its launch. */
const char *rdg_att_wgmma_why(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, char *why, size_t cap);
int rdg_att_wgmma_preferred(const rudnn_attention_plan_t *plan); /* where it runs: its static choice */
rudnn_status_t rdg_att_run_wgmma(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a);

/* attention_decode.cu: why flash_decode does not run plan on dev (NULL when it does; decode
 * shapes only), its split-KV workspace bytes (0: none), and its launches. */
const char *rdg_att_decode_unfit(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, char *why,
                                 size_t cap);
uint64_t rdg_att_decode_ws_bytes(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan);
rudnn_status_t rdg_att_run_decode(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a,
                                  rudnn_mem_ref_t workspace);

/* attention_fallback.cu: the score matrix's bytes (B * Hq * Sq * Skv * 4; 0 on overflow), why it
 * does not fit dev (NULL when it does), and the launches. */
uint64_t rdg_att_scores_bytes(const rudnn_attention_plan_t *plan);
const char *rdg_att_scores_unfit(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, char *why,
                                 size_t cap);
rudnn_status_t rdg_att_run_fallback(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a,
                                    rudnn_mem_ref_t workspace);

namespace {

/* The first and last key query row i sees (hal/attention.h), before clamping to [0, Skv - 1];
 * lo > hi: none. o = Skv - Sq aligns the last query with the last key. */
__device__ __forceinline__ int64_t att_lo(const rdg_att_args &a, int64_t i)
{
    return a.window_left < 0 ? 0 : i + (a.seq_kv - a.seq_q) - a.window_left;
}
__device__ __forceinline__ int64_t att_hi(const rdg_att_args &a, int64_t i)
{
    return a.window_right < 0 ? a.seq_kv - 1 : i + (a.seq_kv - a.seq_q) + a.window_right;
}

/* A bias element in its storage type, as float. */
__device__ __forceinline__ float att_bias(const rdg_att_args &a, int64_t idx)
{
    if (a.bias_dtype == RUDNN_F32)
        return Elem<RUDNN_F32>::ld(a.bias, idx);
    if (a.bias_dtype == RUDNN_F16)
        return Elem<RUDNN_F16>::ld(a.bias, idx);
    return Elem<RUDNN_BF16>::ld(a.bias, idx);
}

/* The row's mask (NULL without one) and the element index of its bias row. */
__device__ __forceinline__ const uint8_t *att_mask_row(const rdg_att_args &a, int64_t b, int64_t h, int64_t i)
{
    return a.mask ? a.mask + b * a.ms[0] + h * a.ms[1] + i * a.ms[2] : nullptr;
}
__device__ __forceinline__ int64_t att_bias_row(const rdg_att_args &a, int64_t b, int64_t h, int64_t i)
{
    return b * a.bs[0] + h * a.bs[1] + i * a.bs[2];
}

/* Whether key j (0 <= j < Skv) is visible to a row: inside [lo, hi] and not masked. */
__device__ __forceinline__ bool att_visible(int64_t j, int64_t lo, int64_t hi, const uint8_t *mask_row)
{
    return j >= lo && j <= hi && !(mask_row && mask_row[j] != 0);
}

/* A visible key's score from its dot product, in the contract's order: scale, softcap, bias. */
__device__ __forceinline__ float att_finish(const rdg_att_args &a, float dot, int64_t j, int64_t bias_row)
{
    float s = dot * a.scale;
    if (a.softcap > 0.0f)
        s = a.softcap * tanhf(s / a.softcap);
    if (a.bias_dtype != ATT_NO_BIAS)
        s += att_bias(a, bias_row + j);
    return s;
}

/* Bytes of one q/k/v/out element. */
template <int DT>
__host__ __device__ constexpr int att_elem_bytes()
{
    return DT == RUDNN_F32 ? 4 : 2;
}

/* 16 / elem_bytes consecutive elements from p + idx (16-byte aligned) as floats. */
template <int DT>
__device__ __forceinline__ void att_ld16(const void *p, int64_t idx, float *out)
{
    if constexpr (DT == RUDNN_F32) {
        const float4 v = *(const float4 *)((const float *)p + idx);
        out[0] = v.x;
        out[1] = v.y;
        out[2] = v.z;
        out[3] = v.w;
    } else {
        const uint4 v = *(const uint4 *)((const uint16_t *)p + idx);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if constexpr (DT == RUDNN_F16) {
                out[2 * u] = rdg_f16_to_f32((uint16_t)(w[u] & 0xffffu));
                out[2 * u + 1] = rdg_f16_to_f32((uint16_t)(w[u] >> 16));
            } else {
                out[2 * u] = rdg_bf16_to_f32((uint16_t)(w[u] & 0xffffu));
                out[2 * u + 1] = rdg_bf16_to_f32((uint16_t)(w[u] >> 16));
            }
        }
    }
}

/* Copies rows row0 .. row0 + nrows - 1 (width elements each, row r at src + r * stride) into dst as
 * floats with row pitch `pitch`; rows at or past `limit` become zeros. Every thread of the CTA
 * takes part; vec: 16-byte loads (src, stride and width aligned to them: the launcher checked). */
template <int DT>
__device__ __forceinline__ void att_stage(float *dst, int pitch, const void *src, int64_t stride, int64_t row0,
                                          int nrows, int64_t limit, int width, bool vec)
{
    if (vec) {
        constexpr int VE = 16 / att_elem_bytes<DT>();
        const int per_row = width / VE;
        for (int e = threadIdx.x; e < nrows * per_row; e += blockDim.x) {
            const int r = e / per_row, c = (e - r * per_row) * VE;
            float *d = dst + r * pitch + c;
            if (row0 + r < limit) {
                float x[VE];
                att_ld16<DT>(src, (row0 + r) * stride + c, x);
#pragma unroll
                for (int u = 0; u < VE; u++)
                    d[u] = x[u];
            } else {
#pragma unroll
                for (int u = 0; u < VE; u++)
                    d[u] = 0.0f;
            }
        }
    } else {
        for (int e = threadIdx.x; e < nrows * width; e += blockDim.x) {
            const int r = e / width, c = e - r * width;
            dst[r * pitch + c] = row0 + r < limit ? Elem<DT>::ld(src, (row0 + r) * stride + c) : 0.0f;
        }
    }
}

} // namespace

#endif
