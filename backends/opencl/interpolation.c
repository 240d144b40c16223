/* Host launchers of interpolation (kernels/interpolation.cl): the table of
 * backends/hal/interpolation.h. One program per dtype; the plan comes validated from
 * ops/interpolation.c. Launches are one-dimensional, a work-item an output (forward) or a dx element
 * (backward), split by ocl_enqueue_groups below 2^31. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_interpolation[];
extern const size_t rudnn_ocl_src_interpolation_size;

enum { K_FORWARD, K_BACKWARD, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_interp_forward", "rudnn_interp_backward"};

/* work-items a group */
#define INTERP_LOCAL 128u

/* Forward (k K_FORWARD: x in, y out) or backward (K_BACKWARD: dy in, dx out): the same arguments,
 * x being x or dx and y being y or dy. */
static rudnn_status_t interp_launch(void *queue, const rudnn_interp_plan_t *p, const rudnn_interp_operands_t *o, int k)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_dtype_program(q, p->dtype, "interpolation", "x", "interpolation.cl", rudnn_ocl_src_interpolation, "",
                                k_names, K_COUNT,
                                &ks));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    cl_mem x = (cl_mem)o->x.mem, y = (cl_mem)o->y.mem;
    const cl_ulong xo = o->x.offset / es, yo = o->y.offset / es;
    const cl_long N = p->batch, C = p->channels;
    const cl_long4 S = ocl_long4_of(p->in_size), O = ocl_long4_of(p->out_size);
    cl_float4 r;
    r.s[0] = p->ratio[0], r.s[1] = p->ratio[1], r.s[2] = p->ratio[2], r.s[3] = 0.0f;
    const cl_long8 xs = ocl_long8_of(p->x_stride), ys = ocl_long8_of(p->y_stride);
    const cl_int mode = (cl_int)p->mode, align = p->align_corners != 0;
    const karg_list_t args = KARGS(ARG(x), ARG(xo), ARG(y), ARG(yo), GROUP0_ARG(), ARG(N), ARG(C), ARG(S), ARG(O),
                                   ARG(r), ARG(xs), ARG(ys), ARG(mode), ARG(align));
    const int64_t *box = k == K_FORWARD ? p->out_size : p->in_size;
    const uint64_t items = (uint64_t)N * (uint64_t)C * (uint64_t)box[0] * (uint64_t)box[1] * (uint64_t)box[2];
    const size_t local = ocl_local_cap(q->dev, ks, INTERP_LOCAL);
    ocl_note_kernel(k == K_FORWARD ? "interpolation.forward" : "interpolation.backward");
    return ocl_enqueue_groups(q, ks, k, k_names, "interpolation", args, (items + local - 1) / local, local);
}

static rudnn_status_t interp_forward(void *queue, const rudnn_interp_plan_t *p, const rudnn_interp_operands_t *o)
{
    return interp_launch(queue, p, o, K_FORWARD);
}

static rudnn_status_t interp_backward(void *queue, const rudnn_interp_plan_t *p, const rudnn_interp_operands_t *o)
{
    return interp_launch(queue, p, o, K_BACKWARD);
}

const rudnn_interpolation_kernels_t ocl_interpolation_kernels = {
    .struct_size = sizeof(rudnn_interpolation_kernels_t),
    .forward = interp_forward,
    .backward = interp_backward,
};
