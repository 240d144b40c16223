/* Host launchers of the normalization kernels (kernels/norm.cl). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"
#include "program_cache.h"

enum { K_LAYER_NORM, K_RMS_NORM, K_SOFTMAX, K_ADD_RMS_NORM, K_COUNT };

static const char *const k_names[K_COUNT] = {
    "rudnn_layer_norm",
    "rudnn_rms_norm",
    "rudnn_softmax",
    "rudnn_add_rms_norm",
};

/* Upper bound of the local size: wider groups only add reduction steps. */
#define NORM_MAX_LOCAL 256u

/* CPU devices (PoCL) run a work-group as loops over its work-items, vectorised
 * across them: narrow groups are 2-3x faster on many-row shapes than 256. They
 * get about cols / NORM_CPU_COLS_PER_ITEM work-items (at least 16, one AVX-512
 * vector of floats), which also bounds how many values one work-item sums in
 * sequence (accuracy). */
#define NORM_CPU_MIN_LOCAL 16u
#define NORM_CPU_COLS_PER_ITEM 64u

/* Work-items per launch stay below 2^31 (NVIDIA's grid limit, 32-bit size_t);
 * more rows are split into several launches with a row offset. */
#ifndef NORM_MAX_GLOBAL
#define NORM_MAX_GLOBAL ((size_t)INT32_MAX)
#endif

typedef struct norm_launch {
    ocl_queue_t *q;
    ocl_kernel_set_t *ks;
    size_t elem;  /* bytes per x/y element */
    size_t local; /* L */
    cl_uint cols;
} norm_launch_t;

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p <= v / 2) {
        p *= 2;
    }
    return p;
}

static size_t pow2_ceil(size_t v)
{
    size_t p = 1;
    while (p < v) {
        p *= 2;
    }
    return p;
}

/* Gets (building on first use) the program for the plan's dtype and picks L.
 * L depends only on the device, the program and cols, so that every kernel of
 * the program reduces a row in the same order. */
static rudnn_status_t norm_prepare(void *queue, const rudnn_norm_plan_t *plan, const char *op,
                                   norm_launch_t *nl)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    int code;
    switch (plan->dtype) {
    case RUDNN_F32: code = 0; nl->elem = 4; break;
    case RUDNN_F16: code = 1; nl->elem = 2; break;
    case RUDNN_BF16: code = 2; nl->elem = 2; break;
    default:
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: dtype %d not supported", op,
                        (int)plan->dtype);
    }
    if (plan->cols < 1 || (uint64_t)plan->cols > (uint64_t)UINT32_MAX || plan->rows < 1) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED,
                        "%s: opencl: rows %lld x cols %lld not supported (cols must be in "
                        "1..4294967295)",
                        op, (long long)plan->rows, (long long)plan->cols);
    }
    char options[64];
    snprintf(options, sizeof options, "-DRUDNN_DTYPE=%d", code);
    rudnn_status_t st =
        ocl_program_get(q->dev, "norm.cl", rudnn_ocl_src_norm, options, k_names, K_COUNT, &nl->ks);
    if (st != RUDNN_STATUS_SUCCESS) {
        return st;
    }
    size_t lmax = NORM_MAX_LOCAL;
    if (q->dev->max_group_size < lmax) {
        lmax = q->dev->max_group_size;
    }
    if (q->dev->max_item_size0 > 0 && q->dev->max_item_size0 < lmax) {
        lmax = q->dev->max_item_size0;
    }
    if (nl->ks->max_group < lmax) {
        lmax = nl->ks->max_group;
    }
    /* scratch of L floats must fit in local memory next to nothing else */
    while (lmax > 1 && (cl_ulong)lmax * sizeof(float) > q->dev->local_mem) {
        lmax /= 2;
    }
    lmax = pow2_floor(lmax ? lmax : 1);
    const size_t cols = (size_t)plan->cols;
    size_t want = pow2_ceil(cols);
    if (q->dev->is_cpu) {
        size_t cpu = pow2_ceil((cols + NORM_CPU_COLS_PER_ITEM - 1) / NORM_CPU_COLS_PER_ITEM);
        if (cpu < NORM_CPU_MIN_LOCAL) {
            cpu = NORM_CPU_MIN_LOCAL;
        }
        if (cpu < want) {
            want = cpu;
        }
    }
    nl->local = want < lmax ? want : lmax;
    nl->q = q;
    nl->cols = (cl_uint)plan->cols;
    return RUDNN_STATUS_SUCCESS;
}

typedef struct karg {
    size_t size;
    const void *value;
} karg_t;

/* Sets args[0..n) (args[row0_index] is replaced per launch), the local
 * scratch as the last argument, and enqueues rows/chunk launches. */
static rudnn_status_t norm_enqueue(const norm_launch_t *nl, int k, const char *op, karg_t *args,
                                   cl_uint nargs, cl_uint row0_index, int64_t rows)
{
    ocl_kernel_set_t *ks = nl->ks;
    cl_kernel kernel = ks->kernels[k];
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    char call[96];
    cl_int err = CL_SUCCESS;

    pthread_mutex_lock(&ks->launch_lock);
    for (cl_uint i = 0; i < nargs && err == CL_SUCCESS; i++) {
        if (i != row0_index) {
            err = clSetKernelArg(kernel, i, args[i].size, args[i].value);
            if (err != CL_SUCCESS) {
                snprintf(call, sizeof call, "clSetKernelArg(%s, %u)", k_names[k], (unsigned)i);
            }
        }
    }
    if (err == CL_SUCCESS) {
        err = clSetKernelArg(kernel, nargs, nl->local * sizeof(float), NULL);
        if (err != CL_SUCCESS) {
            snprintf(call, sizeof call, "clSetKernelArg(%s, %u, local scratch)", k_names[k],
                     (unsigned)nargs);
        }
    }
    uint64_t chunk = (uint64_t)(NORM_MAX_GLOBAL / nl->local);
    if (chunk == 0) {
        chunk = 1;
    }
    for (uint64_t row0 = 0; err == CL_SUCCESS && row0 < (uint64_t)rows; row0 += chunk) {
        const uint64_t left = (uint64_t)rows - row0;
        const uint64_t n = left < chunk ? left : chunk;
        const cl_ulong r0 = (cl_ulong)row0;
        err = clSetKernelArg(kernel, row0_index, sizeof r0, &r0);
        if (err != CL_SUCCESS) {
            snprintf(call, sizeof call, "clSetKernelArg(%s, row0)", k_names[k]);
            break;
        }
        const size_t global = (size_t)n * nl->local;
        const size_t local = nl->local;
        err = clEnqueueNDRangeKernel(nl->q->q, kernel, 1, NULL, &global, &local, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            snprintf(call, sizeof call, "clEnqueueNDRangeKernel(%s, global %zu, local %zu)",
                     k_names[k], global, local);
        }
    }
    pthread_mutex_unlock(&ks->launch_lock);
    if (err != CL_SUCCESS) {
        const rudnn_status_t code =
            (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
                ? RUDNN_STATUS_ALLOC_FAILED
                : RUDNN_STATUS_DEVICE_ERROR;
        st = ocl_fail(code, "%s: opencl: %s failed: %s (%d)", op, call, ocl_error_name(err),
                      (int)err);
    }
    return st;
}

#define ARG(v) {sizeof(v), &(v)}

static rudnn_status_t ocl_layer_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                     rudnn_mem_ref_t gamma, rudnn_mem_ref_t beta,
                                     rudnn_mem_ref_t y)
{
    norm_launch_t nl;
    rudnn_status_t st = norm_prepare(queue, plan, "layer_norm", &nl);
    if (st != RUDNN_STATUS_SUCCESS) {
        return st;
    }
    cl_mem xm = (cl_mem)x.mem, gm = (cl_mem)gamma.mem, ym = (cl_mem)y.mem;
    const cl_uint has_beta = beta.mem != NULL;
    cl_mem bm = has_beta ? (cl_mem)beta.mem : gm; /* placeholder, never read */
    cl_ulong xo = x.offset / nl.elem, go = gamma.offset / sizeof(float);
    cl_ulong bo = has_beta ? beta.offset / sizeof(float) : 0, yo = y.offset / nl.elem;
    cl_ulong row0 = 0;
    float eps = plan->eps;
    karg_t args[] = {ARG(xm), ARG(xo), ARG(gm), ARG(go),    ARG(bm),      ARG(bo),
                     ARG(has_beta), ARG(ym), ARG(yo), ARG(row0), ARG(nl.cols), ARG(eps)};
    return norm_enqueue(&nl, K_LAYER_NORM, "layer_norm", args, 12, 9, plan->rows);
}

static rudnn_status_t ocl_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                   rudnn_mem_ref_t gamma, rudnn_mem_ref_t y)
{
    norm_launch_t nl;
    rudnn_status_t st = norm_prepare(queue, plan, "rms_norm", &nl);
    if (st != RUDNN_STATUS_SUCCESS) {
        return st;
    }
    cl_mem xm = (cl_mem)x.mem, gm = (cl_mem)gamma.mem, ym = (cl_mem)y.mem;
    cl_ulong xo = x.offset / nl.elem, go = gamma.offset / sizeof(float), yo = y.offset / nl.elem;
    cl_ulong row0 = 0;
    float eps = plan->eps;
    karg_t args[] = {ARG(xm), ARG(xo), ARG(gm),      ARG(go), ARG(ym),
                     ARG(yo), ARG(row0), ARG(nl.cols), ARG(eps)};
    return norm_enqueue(&nl, K_RMS_NORM, "rms_norm", args, 9, 6, plan->rows);
}

static rudnn_status_t ocl_softmax(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                  rudnn_mem_ref_t y)
{
    norm_launch_t nl;
    rudnn_status_t st = norm_prepare(queue, plan, "softmax", &nl);
    if (st != RUDNN_STATUS_SUCCESS) {
        return st;
    }
    cl_mem xm = (cl_mem)x.mem, ym = (cl_mem)y.mem;
    cl_ulong xo = x.offset / nl.elem, yo = y.offset / nl.elem;
    cl_ulong row0 = 0;
    karg_t args[] = {ARG(xm), ARG(xo), ARG(ym), ARG(yo), ARG(row0), ARG(nl.cols)};
    return norm_enqueue(&nl, K_SOFTMAX, "softmax", args, 6, 4, plan->rows);
}

static rudnn_status_t ocl_add_rms_norm(void *queue, const rudnn_norm_plan_t *plan,
                                       rudnn_mem_ref_t a, rudnn_mem_ref_t r,
                                       rudnn_mem_ref_t gamma, rudnn_mem_ref_t y,
                                       rudnn_mem_ref_t rstd, rudnn_mem_ref_t x_out)
{
    norm_launch_t nl;
    rudnn_status_t st = norm_prepare(queue, plan, "add_rms_norm", &nl);
    if (st != RUDNN_STATUS_SUCCESS) {
        return st;
    }
    cl_mem am = (cl_mem)a.mem, rm = (cl_mem)r.mem, gm = (cl_mem)gamma.mem, ym = (cl_mem)y.mem;
    cl_mem sm = (cl_mem)rstd.mem, xm = (cl_mem)x_out.mem;
    cl_ulong ao = a.offset / nl.elem, ro = r.offset / nl.elem, go = gamma.offset / sizeof(float);
    cl_ulong yo = y.offset / nl.elem, so = rstd.offset / sizeof(float), xo = x_out.offset / nl.elem;
    cl_ulong row0 = 0;
    float eps = plan->eps;
    karg_t args[] = {ARG(am), ARG(ao), ARG(rm), ARG(ro),   ARG(gm),      ARG(go),  ARG(ym),
                     ARG(yo), ARG(sm), ARG(so), ARG(xm),   ARG(xo),      ARG(row0), ARG(nl.cols),
                     ARG(eps)};
    return norm_enqueue(&nl, K_ADD_RMS_NORM, "add_rms_norm", args, 15, 12, plan->rows);
}

const rudnn_norm_kernels_t ocl_norm_kernels = {
    .layer_norm = ocl_layer_norm,
    .rms_norm = ocl_rms_norm,
    .softmax = ocl_softmax,
    .add_rms_norm = ocl_add_rms_norm,
};
