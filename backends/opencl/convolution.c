/* Host launchers of convolution (kernels/convolution.cl): the table of backends/hal/convolution.h.
 * One program per (dtype, direction); the plan comes validated from ops/convolution.c. Every
 * launch is one-dimensional, split by ocl_enqueue_groups below 2^31 work-items. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_convolution[];
extern const size_t rudnn_ocl_src_convolution_size;

enum { K_DIRECT, K_IGEMM, K_BIAS_GRAD, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_conv_direct", "rudnn_conv_igemm", "rudnn_conv_bias_grad"};

/* kernels/convolution.cl's tile: CONV_TM x CONV_TJ outputs, (32 / 4) x (32 / 4) work-items */
#define CONV_TM 32u
#define CONV_TJ 32u
#define CONV_IGEMM_ITEMS 64u
/* Direct: work-items a group (one output each) */
#define CONV_DIRECT_LOCAL 128u

enum { C_DIRECT_FWD, C_IGEMM_FWD, C_DIRECT_DATA, C_IGEMM_DATA, C_DIRECT_WEIGHT, C_IGEMM_WEIGHT, C_COUNT };

static const rudnn_kernel_candidate_t candidates[C_COUNT] = {
    {"convolution.direct_forward", RUDNN_CONV_DIRECT, 0},
    {"convolution.igemm_forward", RUDNN_CONV_IMPLICIT_GEMM, 0},
    {"convolution.direct_data", RUDNN_CONV_DIRECT, 0},
    {"convolution.igemm_data", RUDNN_CONV_IMPLICIT_GEMM, 0},
    {"convolution.direct_weight", RUDNN_CONV_DIRECT, 0},
    {"convolution.igemm_weight", RUDNN_CONV_IMPLICIT_GEMM, 0},
};
static const int directions[C_COUNT] = {
    RUDNN_CONV_FORWARD,       RUDNN_CONV_FORWARD,        RUDNN_CONV_DATA_BACKWARD,
    RUDNN_CONV_DATA_BACKWARD, RUDNN_CONV_WEIGHT_BACKWARD, RUDNN_CONV_WEIGHT_BACKWARD,
};

static int is_igemm(uint32_t c) { return candidates[c].strategy == RUDNN_CONV_IMPLICIT_GEMM; }

static void conv_check(void *device, const rudnn_conv_plan_t *p, uint32_t c, rudnn_candidate_verdict_t *v)
{
    const ocl_device_t *dev = (const ocl_device_t *)device;
    (void)p;
    v->runs = 1;
    v->preferred = 1;
    if (is_igemm(c) && dev->max_group_size < CONV_IGEMM_ITEMS) {
        v->runs = 0;
        snprintf(v->why, sizeof v->why, "needs work-groups of %u, the device allows %zu", CONV_IGEMM_ITEMS,
                 dev->max_group_size);
    } else if (is_igemm(c) == dev->is_cpu) {
        /* a CPU runs a work-group as a loop: the tiles' local copies and barriers cost more than the
         * reuse they buy there; a GPU reuses each gathered element CONV_TM or CONV_TJ times */
        v->preferred = 0;
        snprintf(v->why, sizeof v->why, "%s", dev->is_cpu ? "tiled kernels do not pay on a CPU device"
                                                          : "tiles reuse loads on a GPU: ImplicitGemm is preferred");
    }
}

static rudnn_status_t conv_workspace(void *device, const rudnn_conv_plan_t *p, uint32_t c, size_t *bytes)
{
    (void)device, (void)p, (void)c;
    *bytes = 0;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t program(ocl_queue_t *q, const rudnn_conv_plan_t *p, ocl_kernel_set_t **ks)
{
    char extra[32];
    snprintf(extra, sizeof extra, "-DCONV_DIR=%d", (int)p->direction);
    return ocl_dtype_program(q, p->dtype, "convolution", "x", "convolution.cl", rudnn_ocl_src_convolution, extra,
                             k_names, K_COUNT, ks);
}

/* Rows M, columns J of the product per group (hal/convolution.h). */
static void product_dims(const rudnn_conv_plan_t *p, uint64_t *M, uint64_t *J)
{
    const uint64_t S = (uint64_t)(p->in_size[0] * p->in_size[1] * p->in_size[2]);
    const uint64_t R = (uint64_t)(p->filter_size[0] * p->filter_size[1] * p->filter_size[2]);
    const uint64_t P = (uint64_t)(p->out_size[0] * p->out_size[1] * p->out_size[2]);
    const uint64_t Cg = (uint64_t)(p->in_channels / p->groups), Kg = (uint64_t)(p->out_channels / p->groups);
    switch (p->direction) {
    case RUDNN_CONV_DATA_BACKWARD: *M = (uint64_t)p->batch * S, *J = Cg; break;
    case RUDNN_CONV_WEIGHT_BACKWARD: *M = Kg, *J = Cg * R; break;
    default: *M = (uint64_t)p->batch * P, *J = Kg; break;
    }
}

static rudnn_status_t conv_run(void *queue, const rudnn_conv_plan_t *p, uint32_t c, const rudnn_conv_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(program(q, p, &ks));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    cl_mem x = (cl_mem)o->x.mem, w = (cl_mem)o->w.mem, y = (cl_mem)o->y.mem;
    cl_mem bias = o->bias.mem ? (cl_mem)o->bias.mem : x; /* never read without has_bias */
    const cl_ulong xo = o->x.offset / es, wo = o->w.offset / es, yo = o->y.offset / es;
    const cl_ulong bo = o->bias.mem ? o->bias.offset / es : 0;
    const cl_long N = p->batch, C = p->in_channels, K = p->out_channels, G = p->groups;
    const cl_long4 S = ocl_long4_of(p->in_size), R = ocl_long4_of(p->filter_size), P = ocl_long4_of(p->out_size);
    const cl_long4 st = ocl_long4_of(p->stride), pad = ocl_long4_of(p->padding), dil = ocl_long4_of(p->dilation);
    const cl_long8 xs = ocl_long8_of(p->x_stride), ws = ocl_long8_of(p->w_stride), ys = ocl_long8_of(p->y_stride);
    /* forward reads the bias in its kernel; weight backward writes dbias in a kernel of its own */
    const cl_int has_bias = p->has_bias && p->direction == RUDNN_CONV_FORWARD;
    const cl_long bias_stride = p->bias_stride;
    const karg_list_t args =
        KARGS(ARG(x), ARG(xo), ARG(w), ARG(wo), ARG(y), ARG(yo), ARG(bias), ARG(bo), GROUP0_ARG(), ARG(N), ARG(C),
              ARG(K), ARG(G), ARG(S), ARG(R), ARG(P), ARG(st), ARG(pad), ARG(dil), ARG(xs), ARG(ws), ARG(ys),
              ARG(has_bias), ARG(bias_stride));
    uint64_t M, J;
    product_dims(p, &M, &J);
    const uint64_t Gu = (uint64_t)p->groups;
    ocl_note_kernel(candidates[c].name);
    if (M && J) {
        if (is_igemm(c)) {
            if (ocl_local_cap(q->dev, ks, CONV_IGEMM_ITEMS) < CONV_IGEMM_ITEMS)
                return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "convolution: opencl: %s needs work-groups of %u "
                                "work-items, the compiled kernel allows fewer", candidates[c].name, CONV_IGEMM_ITEMS);
            const uint64_t tiles = Gu * ((M + CONV_TM - 1) / CONV_TM) * ((J + CONV_TJ - 1) / CONV_TJ);
            RUDNN_TRY(ocl_enqueue_groups(q, ks, K_IGEMM, k_names, "convolution", args, tiles, CONV_IGEMM_ITEMS));
        } else {
            const size_t local = ocl_local_cap(q->dev, ks, CONV_DIRECT_LOCAL);
            const uint64_t items = Gu * M * J;
            RUDNN_TRY(ocl_enqueue_groups(q, ks, K_DIRECT, k_names, "convolution", args, (items + local - 1) / local,
                                         local));
        }
    }
    if (p->direction == RUDNN_CONV_WEIGHT_BACKWARD && p->has_bias) {
        const size_t local = ocl_local_cap(q->dev, ks, CONV_DIRECT_LOCAL);
        RUDNN_TRY(ocl_enqueue_groups(q, ks, K_BIAS_GRAD, k_names, "convolution", args,
                                     ((uint64_t)K + local - 1) / local, local));
    }
    return RUDNN_STATUS_SUCCESS;
}

const rudnn_convolution_kernels_t ocl_convolution_kernels = {
    .struct_size = sizeof(rudnn_convolution_kernels_t),
    .candidates = candidates,
    .candidate_directions = directions,
    .candidate_count = C_COUNT,
    .check = conv_check,
    .workspace = conv_workspace,
    .run = conv_run,
};
