/* Host launchers of the FFN kernels (kernels/ffn.cl): the table of backends/hal/ffn.h.
 *
 * ffn.cl is built as two programs: the GEMM, one per (A, B, C dtypes) and tile size, and the
 * element-wise epilogues (act, out), whose dtypes are run-time arguments. Every launch is
 * one-dimensional, split by ocl_enqueue_groups below 2^31 work-items. The plan comes validated
 * from ops/ffn.c: the entries only map it onto kernel arguments. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

/* ffn.cl, embedded by embed_cl.py (meson.build). */
extern const char rudnn_ocl_src_ffn[];
extern const size_t rudnn_ocl_src_ffn_size;

/* The kernels' dtype codes, passed to every build as -DFFN_DT_* (so ffn.cl cannot disagree). */
enum { DT_F32, DT_F16, DT_BF16, DT_I32, DT_I64, DT_I8, DT_I4 };
#define FFN_DT_OPTIONS                                                                                        \
    "-DFFN_DT_F32=0 -DFFN_DT_F16=1 -DFFN_DT_BF16=2 -DFFN_DT_I32=3 -DFFN_DT_I64=4 -DFFN_DT_I8=5 -DFFN_DT_I4=6"
_Static_assert(DT_F32 == 0 && DT_F16 == 1 && DT_BF16 == 2 && DT_I32 == 3 && DT_I64 == 4 && DT_I8 == 5 &&
                   DT_I4 == 6,
               "FFN_DT_OPTIONS spells these codes");
/* ffn.cl's ffn_activate switches on the enum's values, and treats >= GEGLU as gated. */
_Static_assert(RUDNN_FFN_GELU == 0 && RUDNN_FFN_FASTGELU == 1 && RUDNN_FFN_RELU == 2 && RUDNN_FFN_SILU == 3 &&
                   RUDNN_FFN_GEGLU == 4 && RUDNN_FFN_SWIGLU == 5 && RUDNN_FFN_REGLU == 6,
               "ffn.cl hard-codes the activation values");

enum { K_GEMM, K_GEMM_COUNT };
static const char *const k_gemm_names[K_GEMM_COUNT] = {"rudnn_ffn_gemm"};
enum { K_ACT, K_OUT, K_EPI_COUNT };
static const char *const k_epi_names[K_EPI_COUNT] = {"rudnn_ffn_act", "rudnn_ffn_out"};

/* Outputs per work-item along each dimension of a C tile (a 4 x 4 register block). */
#define FFN_WPT 4u
/* Largest C tile tried (32 x 32: 64 work-items of 4 x 4); halved while the device or the built
 * kernel refuses that many work-items. */
#define FFN_TILE_MAX 32u
/* ffn.cl's FFN_TK: the K step of the local-memory tiles. */
#define FFN_TK 16u

/* Work-items per group of the element-wise kernels: wide on GPUs, narrower on CPUs (PoCL
 * vectorises across a group's work-items; wider groups only cost scheduling). */
#define FFN_EPI_LOCAL_GPU 256u
#define FFN_EPI_LOCAL_CPU 64u

/* The kernels' code and element bytes of dtype; NOT_SUPPORTED for one the kernels do not take. */
static rudnn_status_t dt_code(rudnn_dtype_t dtype, const char *op, const char *what, int *code, size_t *elem)
{
    switch (dtype) {
    case RUDNN_F32: *code = DT_F32; *elem = 4; return RUDNN_STATUS_SUCCESS;
    case RUDNN_F16: *code = DT_F16; *elem = 2; return RUDNN_STATUS_SUCCESS;
    case RUDNN_BF16: *code = DT_BF16; *elem = 2; return RUDNN_STATUS_SUCCESS;
    case RUDNN_I32: *code = DT_I32; *elem = 4; return RUDNN_STATUS_SUCCESS;
    case RUDNN_I64: *code = DT_I64; *elem = 8; return RUDNN_STATUS_SUCCESS;
    case RUDNN_I8: *code = DT_I8; *elem = 1; return RUDNN_STATUS_SUCCESS;
    case RUDNN_I4: *code = DT_I4; *elem = 1; return RUDNN_STATUS_SUCCESS; /* addressed in bytes */
    default:
        *code = 0;
        *elem = 1;
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: %s dtype %d not supported", op, what,
                        (int)dtype); /* the plugin links no librudnn: no rudnn_dtype_name */
    }
}

/* The kernels take sizes as uint (ops/ bounds them far below: m < 2^31, n and k < 2^17). */
static rudnn_status_t fits_u32(const char *op, const char *what, int64_t v)
{
    if (v >= 0 && (uint64_t)v <= UINT32_MAX) {
        return RUDNN_STATUS_SUCCESS;
    }
    return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: %s = %lld exceeds %u", op, what, (long long)v,
                    (unsigned)UINT32_MAX);
}

/* A mem ref's buffer, or the placeholder where the plan reads none (OpenCL takes no NULL cl_mem
 * for a __global argument portably; the kernel never dereferences it). */
static cl_mem mem_or(rudnn_mem_ref_t ref, cl_mem placeholder)
{
    return ref.mem ? (cl_mem)ref.mem : placeholder;
}

/* ---- gemm ----------------------------------------------------------------------------------- */

/* The GEMM program for (A, B, C) with the largest tile whose work-group the device and the built
 * kernel accept. */
static rudnn_status_t gemm_program(ocl_queue_t *q, int a_code, int b_code, int c_code, const char *op,
                                   ocl_kernel_set_t **ks, unsigned *tile)
{
    size_t limit = q->dev->max_group_size;
    if (q->dev->max_item_size0 > 0 && q->dev->max_item_size0 < limit) {
        limit = q->dev->max_item_size0;
    }
    for (unsigned t = FFN_TILE_MAX; t >= FFN_WPT; t /= 2) {
        const size_t items = (size_t)(t / FFN_WPT) * (t / FFN_WPT);
        const cl_ulong local_bytes = (cl_ulong)FFN_TK * (2u * t + 1u) * 4u;
        if (items > limit || local_bytes > q->dev->local_mem) {
            continue;
        }
        char options[256];
        snprintf(options, sizeof options,
                 "-DFFN_PART=1 %s -DFFN_A=%d -DFFN_B=%d -DFFN_C=%d -DFFN_TILE=%u -DFFN_WPT=%u", FFN_DT_OPTIONS,
                 a_code, b_code, c_code, t, FFN_WPT);
        RUDNN_TRY(ocl_program_get(q->dev, "ffn.cl (gemm)", rudnn_ocl_src_ffn, options, k_gemm_names,
                                  K_GEMM_COUNT, ks));
        if ((*ks)->max_group >= items) {
            *tile = t;
            return RUDNN_STATUS_SUCCESS;
        }
    }
    return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: %s allows no work-group for the FFN GEMM", op,
                    q->dev->name);
}

static rudnn_status_t ocl_ffn_gemm(void *queue, const rudnn_ffn_gemm_plan_t *plan, rudnn_mem_ref_t a,
                                   rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset,
                                   rudnn_mem_ref_t scratch, rudnn_mem_ref_t c)
{
    (void)scratch; /* no gemm_workspace */
    const char *op = "ffn";
    ocl_queue_t *q = (ocl_queue_t *)queue;
    int a_code, b_code, c_code;
    size_t a_elem, b_elem, c_elem;
    RUDNN_TRY(dt_code(plan->a_dtype, op, "gemm A", &a_code, &a_elem));
    RUDNN_TRY(dt_code(plan->b_dtype, op, "gemm B", &b_code, &b_elem));
    RUDNN_TRY(dt_code(plan->c_dtype, op, "gemm C", &c_code, &c_elem));
    RUDNN_TRY(fits_u32(op, "m", plan->m));
    RUDNN_TRY(fits_u32(op, "n", plan->n));
    RUDNN_TRY(fits_u32(op, "k", plan->k));
    const int weight_only = (b_code == DT_I8 || b_code == DT_I4) && a_code != DT_I8;
    const int64_t groups = weight_only && plan->groups > 0 ? plan->groups : 1;

    ocl_kernel_set_t *ks = NULL;
    unsigned tile = FFN_WPT;
    RUDNN_TRY(gemm_program(q, a_code, b_code, c_code, op, &ks, &tile));

    const cl_mem am = (cl_mem)a.mem, bm = (cl_mem)b.mem, cm = (cl_mem)c.mem;
    const cl_mem sm = weight_only ? mem_or(scale, am) : am;
    const cl_mem om = weight_only && plan->has_offset ? mem_or(offset, am) : am;
    const cl_ulong ao = a.offset / a_elem, bo = b.offset / b_elem, co = c.offset / c_elem;
    const cl_ulong so = weight_only && scale.mem ? scale.offset / a_elem : 0;
    const cl_ulong oo = weight_only && plan->has_offset && offset.mem ? offset.offset / a_elem : 0;
    const cl_uint m = (cl_uint)plan->m, n = (cl_uint)plan->n, k = (cl_uint)plan->k;
    const cl_uint tiles_n = (cl_uint)((n + tile - 1) / tile);
    const uint64_t tiles_m = ((uint64_t)m + tile - 1) / tile;
    const cl_uint group_rows = (cl_uint)(plan->k / groups);
    const cl_uint has_offset = weight_only && plan->has_offset && offset.mem != NULL;
    const karg_list_t args = KARGS(ARG(am), ARG(ao), ARG(bm), ARG(bo), ARG(sm), ARG(so), ARG(om), ARG(oo), ARG(cm),
                                   ARG(co), GROUP0_ARG(), ARG(m), ARG(n), ARG(k), ARG(tiles_n), ARG(group_rows),
                                   ARG(has_offset));
    const size_t local = (size_t)(tile / FFN_WPT) * (tile / FFN_WPT);
    ocl_note_kernel("ffn.gemm");
    return ocl_enqueue_groups(q, ks, K_GEMM, k_gemm_names, op, args, tiles_m * tiles_n, local);
}

/* ---- epilogues ---------------------------------------------------------------------------- */

typedef struct epi_launch {
    ocl_queue_t *q;
    ocl_kernel_set_t *ks;
    size_t local;
    uint64_t groups;
} epi_launch_t;

static rudnn_status_t epi_prepare(void *queue, uint64_t items, epi_launch_t *el)
{
    el->q = (ocl_queue_t *)queue;
    RUDNN_TRY(ocl_program_get(el->q->dev, "ffn.cl (epilogue)", rudnn_ocl_src_ffn, "-DFFN_PART=2 " FFN_DT_OPTIONS,
                              k_epi_names, K_EPI_COUNT, &el->ks));
    el->local = ocl_local_cap(el->q->dev, el->ks, el->q->dev->is_cpu ? FFN_EPI_LOCAL_CPU : FFN_EPI_LOCAL_GPU);
    el->groups = (items + el->local - 1) / el->local;
    return RUDNN_STATUS_SUCCESS;
}

/* A float-valued input (bias, deq scale) the plan may leave out: its code, buffer and byte offset. */
typedef struct epi_in {
    cl_mem mem;
    cl_ulong off;
    cl_uint code;
} epi_in_t;

static rudnn_status_t epi_input(rudnn_mem_ref_t ref, int used, rudnn_dtype_t dtype, cl_mem placeholder,
                                const char *op, const char *what, epi_in_t *in)
{
    in->mem = placeholder;
    in->off = 0;
    in->code = DT_F32;
    if (!used) {
        return RUDNN_STATUS_SUCCESS;
    }
    int code;
    size_t elem;
    RUDNN_TRY(dt_code(dtype, op, what, &code, &elem));
    in->mem = mem_or(ref, placeholder);
    in->off = ref.mem ? ref.offset : 0;
    in->code = (cl_uint)code;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_ffn_act(void *queue, const rudnn_ffn_act_plan_t *plan, rudnn_mem_ref_t h,
                                  rudnn_mem_ref_t bias, rudnn_mem_ref_t deq, rudnn_mem_ref_t scale,
                                  rudnn_mem_ref_t offset, rudnn_mem_ref_t a)
{
    const char *op = "ffn";
    int h_code, pre_code, out_code;
    size_t elem;
    RUDNN_TRY(dt_code(plan->h_dtype, op, "hidden", &h_code, &elem));
    RUDNN_TRY(dt_code(plan->pre_dtype, op, "pre-activation rounding", &pre_code, &elem));
    RUDNN_TRY(dt_code(plan->out_dtype, op, "activation output", &out_code, &elem));
    const cl_mem hm = (cl_mem)h.mem;
    epi_in_t b, d;
    RUDNN_TRY(epi_input(bias, plan->has_bias, plan->bias_dtype, hm, op, "bias", &b));
    RUDNN_TRY(epi_input(deq, plan->deq_len > 0, plan->deq_dtype, hm, op, "deq scale", &d));
    const int quant = out_code == DT_I8;
    const cl_mem sm = quant ? mem_or(scale, hm) : hm, om = quant ? mem_or(offset, hm) : hm;
    const cl_ulong so = quant && scale.mem ? scale.offset / 4u : 0;
    const cl_ulong oo = quant && offset.mem ? offset.offset / 4u : 0;

    epi_launch_t el;
    const uint64_t items = (uint64_t)plan->rows * (uint64_t)plan->k2;
    RUDNN_TRY(epi_prepare(queue, items, &el));
    const cl_mem am = (cl_mem)a.mem;
    const cl_ulong ho = h.offset, ao = a.offset;
    const cl_ulong rows = (cl_ulong)plan->rows, n1 = (cl_ulong)plan->n1, k2 = (cl_ulong)plan->k2;
    const cl_uint act = (cl_uint)plan->activation, h_dt = (cl_uint)h_code, has_bias = plan->has_bias != 0;
    const cl_ulong deq_len = (cl_ulong)plan->deq_len, scale_len = quant ? (cl_ulong)plan->scale_len : 1u;
    const cl_uint pre_dt = (cl_uint)pre_code, out_dt = (cl_uint)out_code;
    const karg_list_t args =
        KARGS(ARG(hm), ARG(ho), ARG(b.mem), ARG(b.off), ARG(d.mem), ARG(d.off), ARG(sm), ARG(so), ARG(om), ARG(oo),
              ARG(am), ARG(ao), GROUP0_ARG(), ARG(rows), ARG(n1), ARG(k2), ARG(act), ARG(h_dt), ARG(has_bias),
              ARG(b.code), ARG(d.code), ARG(deq_len), ARG(pre_dt), ARG(out_dt), ARG(scale_len));
    ocl_note_kernel("ffn.act");
    return ocl_enqueue_groups(el.q, el.ks, K_ACT, k_epi_names, op, args, el.groups, el.local);
}

static rudnn_status_t ocl_ffn_out(void *queue, const rudnn_ffn_out_plan_t *plan, rudnn_mem_ref_t h,
                                  rudnn_mem_ref_t bias, rudnn_mem_ref_t deq, rudnn_mem_ref_t y)
{
    const char *op = "ffn";
    int h_code, y_code;
    size_t elem;
    RUDNN_TRY(dt_code(plan->h_dtype, op, "hidden", &h_code, &elem));
    RUDNN_TRY(dt_code(plan->y_dtype, op, "y", &y_code, &elem));
    const cl_mem hm = (cl_mem)h.mem;
    epi_in_t b, d;
    RUDNN_TRY(epi_input(bias, plan->has_bias, plan->bias_dtype, hm, op, "bias", &b));
    RUDNN_TRY(epi_input(deq, plan->deq_len > 0, plan->deq_dtype, hm, op, "deq scale", &d));

    epi_launch_t el;
    RUDNN_TRY(epi_prepare(queue, (uint64_t)plan->rows * (uint64_t)plan->n, &el));
    const cl_mem ym = (cl_mem)y.mem;
    const cl_ulong ho = h.offset, yo = y.offset;
    const cl_ulong rows = (cl_ulong)plan->rows, n = (cl_ulong)plan->n, deq_len = (cl_ulong)plan->deq_len;
    const cl_uint h_dt = (cl_uint)h_code, has_bias = plan->has_bias != 0, y_dt = (cl_uint)y_code;
    const karg_list_t args = KARGS(ARG(hm), ARG(ho), ARG(b.mem), ARG(b.off), ARG(d.mem), ARG(d.off), ARG(ym),
                                   ARG(yo), GROUP0_ARG(), ARG(rows), ARG(n), ARG(h_dt), ARG(has_bias),
                                   ARG(b.code), ARG(d.code), ARG(deq_len), ARG(y_dt));
    ocl_note_kernel("ffn.out");
    return ocl_enqueue_groups(el.q, el.ks, K_OUT, k_epi_names, op, args, el.groups, el.local);
}

const rudnn_ffn_kernels_t ocl_ffn_kernels = {
    .struct_size = sizeof(rudnn_ffn_kernels_t),
    .gemm_workspace = NULL,
    .gemm = ocl_ffn_gemm,
    .act = ocl_ffn_act,
    .out = ocl_ffn_out,
};
