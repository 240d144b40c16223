/* Host launchers of the normalization kernels (kernels/norm.cl). */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

enum { K_LAYER_NORM, K_RMS_NORM, K_SOFTMAX, K_ADD_RMS_NORM, K_COUNT };

static const char *const k_names[K_COUNT] = {
    "rudnn_layer_norm",
    "rudnn_rms_norm",
    "rudnn_softmax",
    "rudnn_add_rms_norm",
};
/* What rudnn_last_kernel() reports for each: one work-group per row, every op. */
static const char *const k_report[K_COUNT] = {
    "norm.layer_norm_rows",
    "norm.rms_norm_rows",
    "norm.softmax_rows",
    "norm.add_rms_norm_rows",
};


/* Upper bound of the local size: wider groups only add reduction steps. */
#define NORM_MAX_LOCAL 256u

typedef struct norm_launch {
    ocl_queue_t *q;
    ocl_kernel_set_t *ks;
    size_t elem;  /* bytes per x/y element */
    size_t local; /* L */
    cl_uint cols;
} norm_launch_t;

/* Gets (building on first use) the program for the plan's dtype and picks L.
 * L depends only on the device, the program and cols, so that every kernel of
 * the program reduces a row in the same order. */
static rudnn_status_t norm_prepare(void *queue, const rudnn_norm_plan_t *plan, const char *op,
                                   norm_launch_t *nl)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    int code;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, op, "x", &code, &nl->elem));
    char options[64];
    snprintf(options, sizeof options, "-DRUDNN_DTYPE=%d", code);
    RUDNN_TRY(ocl_program_get(q->dev, "norm.cl", rudnn_ocl_src_norm, options, k_names, K_COUNT,
                              &nl->ks));
    /* scratch of L floats must fit in local memory next to nothing else */
    size_t cap = NORM_MAX_LOCAL;
    while (cap > 1 && (cl_ulong)cap * sizeof(float) > q->dev->local_mem) {
        cap /= 2;
    }
    nl->local = ocl_pick_local(q->dev, nl->ks, (uint64_t)plan->cols, cap);
    nl->q = q;
    nl->cols = (cl_uint)plan->cols; /* ops/ keeps cols in 1..INT32_MAX */
    return RUDNN_STATUS_SUCCESS;
}

/* Every kernel's last argument: the local scratch of L floats. */
#define SCRATCH_ARG(nl) LOCAL_ARG((nl).local * sizeof(float))

/* One work-group of L work-items per row; the GROUP0_ARG() is the kernel's row0. */
static rudnn_status_t norm_enqueue(const norm_launch_t *nl, int k, const char *op,
                                   karg_list_t args, int64_t rows)
{
    ocl_note_kernel(k_report[k]);
    return ocl_enqueue_groups(nl->q, nl->ks, k, k_names, op, args, (uint64_t)rows, nl->local);
}

static rudnn_status_t ocl_layer_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                     rudnn_mem_ref_t gamma, rudnn_mem_ref_t beta,
                                     rudnn_mem_ref_t y)
{
    norm_launch_t nl;
    RUDNN_TRY(norm_prepare(queue, plan, "layer_norm", &nl));
    cl_mem xm = (cl_mem)x.mem, gm = (cl_mem)gamma.mem, ym = (cl_mem)y.mem;
    const cl_uint has_beta = beta.mem != NULL;
    cl_mem bm = has_beta ? (cl_mem)beta.mem : gm; /* placeholder, never read */
    cl_ulong xo = x.offset / nl.elem, go = gamma.offset / sizeof(float);
    cl_ulong bo = has_beta ? beta.offset / sizeof(float) : 0, yo = y.offset / nl.elem;
    float eps = plan->eps;
    const karg_list_t args = KARGS(ARG(xm), ARG(xo), ARG(gm), ARG(go), ARG(bm), ARG(bo),
                                   ARG(has_beta), ARG(ym), ARG(yo), GROUP0_ARG(), ARG(nl.cols),
                                   ARG(eps), SCRATCH_ARG(nl));
    return norm_enqueue(&nl, K_LAYER_NORM, "layer_norm", args, plan->rows);
}

static rudnn_status_t ocl_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                   rudnn_mem_ref_t gamma, rudnn_mem_ref_t y)
{
    norm_launch_t nl;
    RUDNN_TRY(norm_prepare(queue, plan, "rms_norm", &nl));
    cl_mem xm = (cl_mem)x.mem, gm = (cl_mem)gamma.mem, ym = (cl_mem)y.mem;
    cl_ulong xo = x.offset / nl.elem, go = gamma.offset / sizeof(float), yo = y.offset / nl.elem;
    float eps = plan->eps;
    const karg_list_t args = KARGS(ARG(xm), ARG(xo), ARG(gm), ARG(go), ARG(ym), ARG(yo),
                                   GROUP0_ARG(), ARG(nl.cols), ARG(eps), SCRATCH_ARG(nl));
    return norm_enqueue(&nl, K_RMS_NORM, "rms_norm", args, plan->rows);
}

static rudnn_status_t ocl_softmax(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                  rudnn_mem_ref_t y)
{
    norm_launch_t nl;
    RUDNN_TRY(norm_prepare(queue, plan, "softmax", &nl));
    cl_mem xm = (cl_mem)x.mem, ym = (cl_mem)y.mem;
    cl_ulong xo = x.offset / nl.elem, yo = y.offset / nl.elem;
    const karg_list_t args = KARGS(ARG(xm), ARG(xo), ARG(ym), ARG(yo), GROUP0_ARG(), ARG(nl.cols),
                                   SCRATCH_ARG(nl));
    return norm_enqueue(&nl, K_SOFTMAX, "softmax", args, plan->rows);
}

static rudnn_status_t ocl_add_rms_norm(void *queue, const rudnn_norm_plan_t *plan,
                                       rudnn_mem_ref_t a, rudnn_mem_ref_t r,
                                       rudnn_mem_ref_t gamma, rudnn_mem_ref_t y,
                                       rudnn_mem_ref_t rstd, rudnn_mem_ref_t x_out)
{
    norm_launch_t nl;
    RUDNN_TRY(norm_prepare(queue, plan, "add_rms_norm", &nl));
    cl_mem am = (cl_mem)a.mem, rm = (cl_mem)r.mem, gm = (cl_mem)gamma.mem, ym = (cl_mem)y.mem;
    cl_mem sm = (cl_mem)rstd.mem, xm = (cl_mem)x_out.mem;
    cl_ulong ao = a.offset / nl.elem, ro = r.offset / nl.elem, go = gamma.offset / sizeof(float);
    cl_ulong yo = y.offset / nl.elem, so = rstd.offset / sizeof(float), xo = x_out.offset / nl.elem;
    float eps = plan->eps;
    const karg_list_t args = KARGS(ARG(am), ARG(ao), ARG(rm), ARG(ro), ARG(gm), ARG(go), ARG(ym),
                                   ARG(yo), ARG(sm), ARG(so), ARG(xm), ARG(xo), GROUP0_ARG(),
                                   ARG(nl.cols), ARG(eps), SCRATCH_ARG(nl));
    return norm_enqueue(&nl, K_ADD_RMS_NORM, "add_rms_norm", args, plan->rows);
}

const rudnn_norm_kernels_t ocl_norm_kernels = {
    .struct_size = sizeof(rudnn_norm_kernels_t),
    .layer_norm = ocl_layer_norm,
    .rms_norm = ocl_rms_norm,
    .softmax = ocl_softmax,
    .add_rms_norm = ocl_add_rms_norm,
};
