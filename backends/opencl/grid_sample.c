/* Host launchers of grid sampling (kernels/grid_sample.cl): the table of backends/hal/grid_sample.h.
 * One program per dtype; the plan comes validated from ops/grid_sample.c. The backward's dx is a
 * counting sort in the workspace (counts, cursors, entries: uint each), so that each dx element is
 * one sum in a fixed order. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_grid_sample[];
extern const size_t rudnn_ocl_src_grid_sample_size;

enum { K_FORWARD, K_DGRID, K_ZERO, K_COUNT_TAPS, K_SCAN, K_FILL, K_SORT, K_GATHER, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_gs_forward", "rudnn_gs_dgrid", "rudnn_gs_zero",
                                             "rudnn_gs_count",   "rudnn_gs_scan",  "rudnn_gs_fill",
                                             "rudnn_gs_sort",    "rudnn_gs_gather"};

/* work-items a group; the scan is one group of at most GS_SCAN_LOCAL */
#define GS_LOCAL 128u
#define GS_SCAN_LOCAL 256u
/* kernels/grid_sample.cl's taps a point at most (a pair's id is point * GS_TAPS + tap, a uint) */
#define GS_TAPS 16u

static uint64_t points(const rudnn_grid_sample_plan_t *p)
{
    return (uint64_t)p->batch * (uint64_t)p->out_size[0] * (uint64_t)p->out_size[1] * (uint64_t)p->out_size[2];
}

static uint64_t elements(const rudnn_grid_sample_plan_t *p)
{
    return (uint64_t)p->batch * (uint64_t)p->in_size[0] * (uint64_t)p->in_size[1] * (uint64_t)p->in_size[2];
}

static uint64_t taps_a_point(const rudnn_grid_sample_plan_t *p)
{
    const uint64_t per_dim = p->mode == RUDNN_GRID_SAMPLE_BICUBIC ? 4 : p->mode == RUDNN_GRID_SAMPLE_NEAREST ? 1 : 2;
    return per_dim * per_dim * (p->spatial == 3 ? per_dim : 1);
}

static rudnn_status_t launch(ocl_queue_t *q, ocl_kernel_set_t *ks, int k, karg_list_t args, uint64_t items)
{
    if (!items)
        return RUDNN_STATUS_SUCCESS;
    const size_t local = ocl_local_cap(q->dev, ks, GS_LOCAL);
    return ocl_enqueue_groups(q, ks, k, k_names, "grid_sample", args, (items + local - 1) / local, local);
}

/* The shape arguments every kernel ends with (GS_PARAMS). */
typedef struct gs_shape_args {
    cl_long N, C;
    cl_long4 S, P;
    cl_int mode, padding, align, spatial;
} gs_shape_args_t;

static gs_shape_args_t shape_args(const rudnn_grid_sample_plan_t *p)
{
    gs_shape_args_t s;
    s.N = p->batch, s.C = p->channels, s.S = ocl_long4_of(p->in_size), s.P = ocl_long4_of(p->out_size);
    s.mode = (cl_int)p->mode, s.padding = (cl_int)p->padding, s.align = p->align_corners != 0, s.spatial = p->spatial;
    return s;
}

#define SHAPE_ARGS(s) ARG(s.N), ARG(s.C), ARG(s.S), ARG(s.P), ARG(s.mode), ARG(s.padding), ARG(s.align), ARG(s.spatial)

static rudnn_status_t gs_forward(void *queue, const rudnn_grid_sample_plan_t *p, const rudnn_grid_sample_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_dtype_program(q, p->dtype, "grid_sample", "x", "grid_sample.cl", rudnn_ocl_src_grid_sample, "",
                                k_names, K_COUNT,
                                &ks));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    cl_mem x = (cl_mem)o->x.mem, grid = (cl_mem)o->grid.mem, y = (cl_mem)o->y.mem;
    const cl_ulong xo = o->x.offset / es, go = o->grid.offset / es, yo = o->y.offset / es;
    const cl_long8 xs = ocl_long8_of(p->x_stride), gs = ocl_long8_of(p->grid_stride), ys = ocl_long8_of(p->y_stride);
    const gs_shape_args_t s = shape_args(p);
    ocl_note_kernel("grid_sample.forward");
    return launch(q, ks, K_FORWARD,
                  KARGS(ARG(x), ARG(xo), ARG(xs), ARG(grid), ARG(go), ARG(gs), ARG(y), ARG(yo), ARG(ys), GROUP0_ARG(),
                        SHAPE_ARGS(s)),
                  points(p));
}

/* The counting sort's arrays in the workspace, in uints: counts [E + 1], cursors [E], entries. */
static rudnn_status_t gs_backward_workspace(void *device, const rudnn_grid_sample_plan_t *p, size_t *bytes)
{
    (void)device;
    *bytes = 0;
    if (!p->has_dx)
        return RUDNN_STATUS_SUCCESS;
    if (points(p) * GS_TAPS >= ((uint64_t)1 << 32) || elements(p) >= ((uint64_t)1 << 31))
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "grid_sample: opencl: the backward's dx sorts %llu points (2^28 at "
                        "most) over %llu x positions (2^31 at most)", (unsigned long long)points(p),
                        (unsigned long long)elements(p));
    const uint64_t uints = 2 * elements(p) + 1 + points(p) * taps_a_point(p);
    *bytes = (size_t)(uints * 4 + 255) / 256 * 256;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t gs_backward(void *queue, const rudnn_grid_sample_plan_t *p, const rudnn_grid_sample_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_dtype_program(q, p->dtype, "grid_sample", "x", "grid_sample.cl", rudnn_ocl_src_grid_sample, "",
                                k_names, K_COUNT,
                                &ks));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    cl_mem x = (cl_mem)o->x.mem, grid = (cl_mem)o->grid.mem, dy = (cl_mem)o->y.mem;
    const cl_ulong xo = o->x.offset / es, go = o->grid.offset / es, yo = o->y.offset / es;
    const cl_long8 xs = ocl_long8_of(p->x_stride), gs = ocl_long8_of(p->grid_stride), ys = ocl_long8_of(p->y_stride);
    const gs_shape_args_t s = shape_args(p);
    ocl_note_kernel("grid_sample.backward");
    if (p->has_dgrid) {
        cl_mem dg = (cl_mem)o->dgrid.mem;
        const cl_ulong dgo = o->dgrid.offset / es;
        const cl_long8 dgs = ocl_long8_of(p->dgrid_stride);
        RUDNN_TRY(launch(q, ks, K_DGRID,
                         KARGS(ARG(x), ARG(xo), ARG(xs), ARG(grid), ARG(go), ARG(gs), ARG(dy), ARG(yo), ARG(ys),
                               ARG(dg), ARG(dgo), ARG(dgs), GROUP0_ARG(), SHAPE_ARGS(s)),
                         points(p)));
    }
    if (!p->has_dx)
        return RUDNN_STATUS_SUCCESS;
    size_t need;
    RUDNN_TRY(gs_backward_workspace(q->dev, p, &need));
    if (!o->workspace.mem)
        return ocl_fail(RUDNN_STATUS_INTERNAL, "grid_sample: opencl: the backward got no workspace for dx");
    cl_mem ws = (cl_mem)o->workspace.mem;
    const cl_ulong E = elements(p), base = o->workspace.offset / 4;
    const cl_ulong counts = base, cursors = base + E + 1, entries = base + 2 * E + 1, zero_n = 2 * E + 1;
    RUDNN_TRY(launch(q, ks, K_ZERO, KARGS(ARG(ws), ARG(counts), ARG(zero_n), GROUP0_ARG()), zero_n));
    RUDNN_TRY(launch(q, ks, K_COUNT_TAPS,
                     KARGS(ARG(grid), ARG(go), ARG(gs), ARG(ws), ARG(counts), GROUP0_ARG(), SHAPE_ARGS(s)), points(p)));
    const size_t scan_local = ocl_local_cap(q->dev, ks, GS_SCAN_LOCAL);
    RUDNN_TRY(ocl_enqueue_groups(q, ks, K_SCAN, k_names, "grid_sample",
                                 KARGS(ARG(ws), ARG(counts), ARG(E), GROUP0_ARG(), LOCAL_ARG(scan_local * 4)), 1,
                                 scan_local));
    RUDNN_TRY(launch(q, ks, K_FILL,
                     KARGS(ARG(grid), ARG(go), ARG(gs), ARG(ws), ARG(counts), ARG(ws), ARG(cursors), ARG(ws),
                           ARG(entries), GROUP0_ARG(), SHAPE_ARGS(s)),
                     points(p)));
    RUDNN_TRY(launch(q, ks, K_SORT, KARGS(ARG(ws), ARG(counts), ARG(ws), ARG(entries), ARG(E), GROUP0_ARG()), E));
    cl_mem dx = (cl_mem)o->dx.mem;
    const cl_ulong dxo = o->dx.offset / es;
    const cl_long8 dxs = ocl_long8_of(p->dx_stride);
    return launch(q, ks, K_GATHER,
                  KARGS(ARG(grid), ARG(go), ARG(gs), ARG(dy), ARG(yo), ARG(ys), ARG(ws), ARG(counts), ARG(ws),
                        ARG(entries), ARG(dx), ARG(dxo), ARG(dxs), GROUP0_ARG(), SHAPE_ARGS(s)),
                  E * (uint64_t)p->channels);
}

const rudnn_grid_sample_kernels_t ocl_grid_sample_kernels = {
    .struct_size = sizeof(rudnn_grid_sample_kernels_t),
    .forward = gs_forward,
    .backward_workspace = gs_backward_workspace,
    .backward = gs_backward,
};
