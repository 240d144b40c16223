/* The FFN family's kernel table (ops/ffn.c plans; include/rudnn/ffn.h has the contract).
 * Included through backends/backend.h.
 *
 * ops/ffn.c runs an FFN as four steps per expert (one "expert" without expert_tokens), each a table
 * entry: gemm (x W1 -> h), act (h + b1, dequantize, activate, round or requantize -> a), gemm
 * (a W2 -> h2), out (h2 + b2, dequantize -> y). h and h2 live in the workspace in FP32 (INT32 for
 * the quantized products), a in the second product's input dtype; h in x's dtype where the
 * precision rounds it there anyway (HIGH_PERFORMANCE without bias1), and the second gemm writes y
 * itself where out would only round (float scenarios without bias2). Every matrix is row-major and
 * contiguous; ops/ offsets the references to an expert's rows and weights. The backend picks how
 * gemm runs (a vendor BLAS, its own kernels), as a BLAS picks its kernels. */
#ifndef RUDNN_HAL_FFN_H
#define RUDNN_HAL_FFN_H

#include "table.h"
#include "rudnn/ffn.h" /* rudnn_ffn_activation_t */

/* C [m, n] = A [m, k] B [k, n].
 *   a_dtype F32 / F16 / BF16, b_dtype the same:   C F32, FP32 accumulation (c_dtype F32, or A's dtype:
 *                                                 the FP32 sum rounded once to it);
 *   a_dtype I8, b_dtype I8:                       C I32, exact (|C| <= k 128 128 < 2^31 for k < 65536);
 *   a_dtype F16 / BF16, b_dtype I8 or I4:         weight-only: each weight dequantized as
 *                                                 w' = round_a((w + offset[g][j]) * scale[g][j])
 *                                                 (FP32 arithmetic, rounded to A's dtype), then as
 *                                                 the float case; scale and offset [groups, n] in
 *                                                 A's dtype, group g = rows [g k / groups, ...).
 *                                                 A kernel may skip round_a and apply (w + offset)
 *                                                 scale to FP32 sums instead (CUDA's int4 tensor-
 *                                                 core kernel at m <= 8: closer to the exact
 *                                                 value; the suite's tolerances allow either).
 * I4 storage: two values a byte along n, the even column in the low nibble (rudnn_ffn_pack_int4). */
typedef struct rudnn_ffn_gemm_plan {
    rudnn_dtype_t a_dtype;
    rudnn_dtype_t b_dtype;
    rudnn_dtype_t c_dtype; /* I32 for I8 A; F32 or A's dtype otherwise */
    int64_t m, n, k;       /* m >= 1, n >= 1, k >= 1 */
    int64_t groups;        /* weight-only: rows of scale / offset (1: per channel); k % groups == 0 */
    int32_t has_offset;    /* weight-only: offset given (else 0) */
    int32_t deterministic; /* bitwise-identical results run to run (no order-varying split-K) */
    int64_t rows_max;      /* gemm_grouped: the most rows of one expert (0 elsewhere) */
} rudnn_ffn_gemm_plan_t;

/* a [rows, k2] from h [rows, n1], per element (FP32 unless said):
 *   v = h (+ bias)                   I32 h: exact integer sum (int64), then FP32
 *   v = v * deq                      quantized only (deq_len 1: one scale, n1: per column)
 *   v = round(v, pre_dtype)          F32 (nothing) or F16 (the F16 HIGH_PERFORMANCE mode)
 *   non-gated: a[j] = f(v[j]);  gated (n1 = 2 k2): a[j] = v[j] * f(v[k2 + j])
 *   out_dtype F32/F16/BF16:          a rounded to it (round to nearest even)
 *   out_dtype I8:                    q = a * scale + offset, rounded half to even, saturated to
 *                                    [-128, 127], NaN to 0 (scale_len 1 or k2; offset one value)
 * f: gelu (erf), fastgelu x sigmoid(1.702 x), relu, silu x sigmoid(x); geglu/swiglu/reglu use
 * gelu/silu/relu on the gate. Deq dtypes: F32, I64 (the F32 in its low 32 bits), BF16. */
typedef struct rudnn_ffn_act_plan {
    int64_t rows, n1, k2;
    rudnn_ffn_activation_t activation;
    rudnn_dtype_t h_dtype;    /* F32, I32, or F16 / BF16 (then no bias, pre_dtype h_dtype) */
    int32_t has_bias;
    rudnn_dtype_t bias_dtype; /* F16, F32 (float h) or I32 (I32 h) */
    rudnn_dtype_t pre_dtype;  /* F32, F16 or BF16 */
    rudnn_dtype_t out_dtype;  /* F32, F16, BF16 or I8 */
    rudnn_dtype_t deq_dtype;  /* quantized (I32 h) only */
    int64_t deq_len;          /* 1 or n1; 0 when not quantized */
    int64_t scale_len;        /* I8 out: 1 or k2 */
} rudnn_ffn_act_plan_t;

/* y [rows, n] = round_y((h (+ bias)) (* deq)): I32 h with an I32 bias summed exactly, then FP32. */
typedef struct rudnn_ffn_out_plan {
    int64_t rows, n;
    rudnn_dtype_t h_dtype;    /* F32 or I32 */
    int32_t has_bias;
    rudnn_dtype_t bias_dtype; /* F16, F32 or I32 */
    rudnn_dtype_t deq_dtype;  /* when deq_len > 0 */
    int64_t deq_len;          /* 0 (none), 1 or n */
    rudnn_dtype_t y_dtype;    /* F32, F16 or BF16 */
} rudnn_ffn_out_plan_t;

/* The second product of gemm_act_gemm: c = a' b per plan, a' the activation's output. */
typedef struct rudnn_ffn_second {
    const rudnn_ffn_gemm_plan_t *plan;
    rudnn_mem_ref_t b, scale, offset, c;
} rudnn_ffn_second_t;

typedef struct rudnn_ffn_kernels {
    uint32_t struct_size; /* sizeof(rudnn_ffn_kernels_t) the plugin was built with */
    /* Extra workspace bytes gemm needs for plan (beyond h, a and h2), given to it as scratch;
     * enough for any m' rows with m / 2 < m' <= m (ops/ffn.c asks every power of two up to M for
     * the expert form, whose experts' rows are known only at the call). NULL: none. Sets an
     * error on failure. */
    rudnn_status_t (*gemm_workspace)(void *device, const rudnn_ffn_gemm_plan_t *plan, size_t *bytes);
    /* scale / offset only for weight-only (offset.mem NULL without one); scratch of
     * gemm_workspace bytes (mem NULL when 0). Writes c only. */
    rudnn_status_t (*gemm)(void *queue, const rudnn_ffn_gemm_plan_t *plan, rudnn_mem_ref_t a, rudnn_mem_ref_t b,
                           rudnn_mem_ref_t scale, rudnn_mem_ref_t offset, rudnn_mem_ref_t scratch,
                           rudnn_mem_ref_t c);
    /* bias / deq / scale / offset mem NULL where the plan takes none. */
    rudnn_status_t (*act)(void *queue, const rudnn_ffn_act_plan_t *plan, rudnn_mem_ref_t h, rudnn_mem_ref_t bias,
                          rudnn_mem_ref_t deq, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset, rudnn_mem_ref_t a);
    rudnn_status_t (*out)(void *queue, const rudnn_ffn_out_plan_t *plan, rudnn_mem_ref_t h, rudnn_mem_ref_t bias,
                          rudnn_mem_ref_t deq, rudnn_mem_ref_t y);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
    /* The expert form's products in one launch (optional; gemm_grouped_fits first, then
     * gemm_grouped): for every expert e at once, c[r] = a[r] b[e] for the rows r in
     * [offsets[e], offsets[e + 1]), offsets U32 [experts + 1] on the device (offsets[0] = 0).
     * plan: one expert's product, m the rows of all experts, rows_max the most of one; b
     * [experts, k, n]; float or weight-only operands without bias (scale / offset [experts,
     * groups, n] as gemm's; offset.mem NULL without one, both NULL for float), c as gemm's.
     * Rows past offsets[experts] are neither read nor written. */
    int (*gemm_grouped_fits)(void *device, const rudnn_ffn_gemm_plan_t *plan, int64_t experts);
    rudnn_status_t (*gemm_grouped)(void *queue, const rudnn_ffn_gemm_plan_t *plan, int64_t experts,
                                   rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale,
                                   rudnn_mem_ref_t offset, rudnn_mem_ref_t offsets, rudnn_mem_ref_t c);
    /* The first grouped product with the activation in its epilogue (optional; its _fits first):
     * out [m, act->k2] = act applied to a b[e] as the act entry computes it from an h in FP32
     * (act: rows m, n1 = plan->n, no bias, no quantization), without h in memory. */
    int (*gemm_grouped_act_fits)(void *device, const rudnn_ffn_gemm_plan_t *plan, const rudnn_ffn_act_plan_t *act,
                                 int64_t experts);
    rudnn_status_t (*gemm_grouped_act)(void *queue, const rudnn_ffn_gemm_plan_t *plan,
                                       const rudnn_ffn_act_plan_t *act, int64_t experts, rudnn_mem_ref_t a,
                                       rudnn_mem_ref_t b, rudnn_mem_ref_t offsets, rudnn_mem_ref_t out);
    /* gemm into h, then act from h into out, in one call (optional): the same bits as the two
     * entries, with act->h_dtype = plan->c_dtype, act->rows = plan->m, act->n1 = plan->n, and no
     * quantization (deq, scale and offset none); bias as act's. The backend may leave h unwritten
     * (it fuses the activation with the sum of a split k, h's round trip and a launch fewer). */
    rudnn_status_t (*gemm_act)(void *queue, const rudnn_ffn_gemm_plan_t *plan, const rudnn_ffn_act_plan_t *act,
                               rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset,
                               rudnn_mem_ref_t bias, rudnn_mem_ref_t scratch, rudnn_mem_ref_t h,
                               rudnn_mem_ref_t out);
    /* The second product after gemm_act, in one call (optional; ops/ffn.c calls it where present,
     * else gemm_act and gemm): gemm_act(plan, act, a, b, scale, offset, bias, scratch, h, out), then
     * gemm(second->plan, out, second->b, second->scale, second->offset, scratch, second->c); the same
     * bits. second's weights are inputs of the op, final before the call: the backend may read them
     * (into a cache, or to start the second product) while the first product still runs. */
    rudnn_status_t (*gemm_act_gemm)(void *queue, const rudnn_ffn_gemm_plan_t *plan, const rudnn_ffn_act_plan_t *act,
                                    rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale,
                                    rudnn_mem_ref_t offset, rudnn_mem_ref_t bias, rudnn_mem_ref_t scratch,
                                    rudnn_mem_ref_t h, rudnn_mem_ref_t out, const rudnn_ffn_second_t *second);
} rudnn_ffn_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_ffn_kernels_min_size RUDNN_TABLE_END(rudnn_ffn_kernels_t, out)

#endif
