/* Host launchers of pooling (kernels/pooling.cl): the table of backends/hal/pooling.h. One program
 * per dtype; the plan comes validated from ops/pooling.c. Launches are one-dimensional, a work-item
 * an output (forward) or a dx element (backward), split by ocl_enqueue_groups below 2^31. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_pooling[];
extern const size_t rudnn_ocl_src_pooling_size;

enum { K_FORWARD, K_BACKWARD, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_pool_forward", "rudnn_pool_backward"};

/* work-items a group */
#define POOL_LOCAL 128u

static uint64_t box(const int64_t v[3]) { return (uint64_t)v[0] * (uint64_t)v[1] * (uint64_t)v[2]; }

static rudnn_status_t launch(ocl_queue_t *q, ocl_kernel_set_t *ks, int k, karg_list_t args, uint64_t items)
{
    const size_t local = ocl_local_cap(q->dev, ks, POOL_LOCAL);
    return ocl_enqueue_groups(q, ks, k, k_names, "pooling", args, (items + local - 1) / local, local);
}

static rudnn_status_t pool_forward(void *queue, const rudnn_pool_plan_t *p, const rudnn_pool_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_dtype_program(q, p->dtype, "pooling", "x", "pooling.cl", rudnn_ocl_src_pooling, "", k_names, K_COUNT,
                                &ks));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    cl_mem x = (cl_mem)o->x.mem, y = (cl_mem)o->y.mem;
    cl_mem idx = o->indices.mem ? (cl_mem)o->indices.mem : y; /* never written without has_idx */
    const cl_ulong xo = o->x.offset / es, yo = o->y.offset / es, io = o->indices.mem ? o->indices.offset / 8 : 0;
    const cl_long N = p->batch, C = p->channels;
    const cl_long4 S = ocl_long4_of(p->in_size), P = ocl_long4_of(p->out_size), R = ocl_long4_of(p->window);
    const cl_long4 st = ocl_long4_of(p->stride), pad = ocl_long4_of(p->padding), dil = ocl_long4_of(p->dilation);
    const cl_long8 xs = ocl_long8_of(p->x_stride), ys = ocl_long8_of(p->y_stride), is = ocl_long8_of(p->idx_stride);
    const cl_int mode = (cl_int)p->mode, has_idx = p->has_indices != 0;
    const karg_list_t args = KARGS(ARG(x), ARG(xo), ARG(y), ARG(yo), ARG(idx), ARG(io), GROUP0_ARG(), ARG(N), ARG(C),
                                   ARG(S), ARG(P), ARG(R), ARG(st), ARG(pad), ARG(dil), ARG(xs), ARG(ys), ARG(is),
                                   ARG(mode), ARG(has_idx));
    ocl_note_kernel("pooling.forward");
    return launch(q, ks, K_FORWARD, args, (uint64_t)N * (uint64_t)C * box(p->out_size));
}

static rudnn_status_t pool_backward(void *queue, const rudnn_pool_plan_t *p, const rudnn_pool_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_dtype_program(q, p->dtype, "pooling", "x", "pooling.cl", rudnn_ocl_src_pooling, "", k_names, K_COUNT,
                                &ks));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    cl_mem dy = (cl_mem)o->y.mem, dx = (cl_mem)o->dx.mem;
    cl_mem x = p->has_x ? (cl_mem)o->x.mem : dy; /* the averages never read x */
    const cl_ulong xo = p->has_x ? o->x.offset / es : 0, yo = o->y.offset / es, dxo = o->dx.offset / es;
    const cl_long N = p->batch, C = p->channels;
    const cl_long4 S = ocl_long4_of(p->in_size), P = ocl_long4_of(p->out_size), R = ocl_long4_of(p->window);
    const cl_long4 st = ocl_long4_of(p->stride), pad = ocl_long4_of(p->padding), dil = ocl_long4_of(p->dilation);
    const cl_long8 dxs = ocl_long8_of(p->x_stride), ys = ocl_long8_of(p->y_stride), srcs = ocl_long8_of(p->src_stride);
    const cl_int mode = (cl_int)p->mode;
    const karg_list_t args = KARGS(ARG(x), ARG(xo), ARG(dy), ARG(yo), ARG(dx), ARG(dxo), GROUP0_ARG(), ARG(N), ARG(C),
                                   ARG(S), ARG(P), ARG(R), ARG(st), ARG(pad), ARG(dil), ARG(dxs), ARG(ys), ARG(srcs),
                                   ARG(mode));
    ocl_note_kernel("pooling.backward");
    return launch(q, ks, K_BACKWARD, args, (uint64_t)N * (uint64_t)C * box(p->in_size));
}

const rudnn_pooling_kernels_t ocl_pooling_kernels = {
    .struct_size = sizeof(rudnn_pooling_kernels_t),
    .forward = pool_forward,
    .backward = pool_backward,
};
