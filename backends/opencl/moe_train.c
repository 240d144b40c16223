/* Host launchers of MoE first-order training (kernels/moe_train.cl): the table of
 * backends/hal/moe_train.h. The router's program per (logits dtype, index dtype), the rows' per
 * (rows dtype, weights dtype), one work-group a token row; the experts' per dtype, one work-item an
 * output element. Plans come validated from ops/moe_train.c. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"
#include "rudnn/moe_train.h"

extern const char rudnn_ocl_src_moe_train[];
extern const size_t rudnn_ocl_src_moe_train_size;

enum { K_WEIGHTS, K_BACKWARD, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_router_weights", "rudnn_router_backward"};
enum { K_COMBINE_BACKWARD, K_DISPATCH_BACKWARD, K_ROWS_COUNT };
static const char *const k_rows_names[K_ROWS_COUNT] = {"rudnn_combine_backward", "rudnn_dispatch_backward"};

/* Work-items a token row at most: the softmax's reductions over E, the router backward's pass over
 * the row's E gradients and the rows' passes over H stride by the local size (ocl_pick_local takes
 * fewer on CPUs). */
#define MOE_TRAIN_MAX_LOCAL 256u

/* The program of the plan's dtypes, and the element sizes of logits and indices. */
static rudnn_status_t program(ocl_queue_t *q, const rudnn_router_train_plan_t *p, ocl_kernel_set_t **ks,
                              size_t *elem, size_t *ielem)
{
    int code;
    RUDNN_TRY(ocl_dtype_code(p->dtype, "moe_train", "logits", &code, elem));
    *ielem = p->index_dtype == RUDNN_I64 ? 8u : 4u;
    const int idx = p->index_dtype == RUDNN_U32 ? 0 : p->index_dtype == RUDNN_I32 ? 1 : 2;
    char options[96];
    snprintf(options, sizeof options, "-DMOE_TRAIN_PART=1 -DRUDNN_DTYPE=%d -DRUDNN_IDX=%d -DMAX_TOP_K=%d", code,
             idx, RUDNN_MOE_TRAIN_MAX_TOP_K);
    return ocl_program_get(q->dev, "moe_train.cl (router)", rudnn_ocl_src_moe_train, options, k_names, K_COUNT,
                           ks);
}

static rudnn_status_t router_weights(void *queue, const rudnn_router_train_plan_t *p, rudnn_mem_ref_t logits,
                                     rudnn_mem_ref_t indices, rudnn_mem_ref_t weights)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    size_t elem, ielem;
    RUDNN_TRY(program(q, p, &ks, &elem, &ielem));
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)p->experts, MOE_TRAIN_MAX_LOCAL);
    const cl_mem lm = (cl_mem)logits.mem, im = (cl_mem)indices.mem, wm = (cl_mem)weights.mem;
    const cl_ulong lo = logits.offset / elem, io = indices.offset / ielem, wo = weights.offset / 4;
    const cl_uint experts = (cl_uint)p->experts, top_k = (cl_uint)p->top_k, sig = (cl_uint)p->sigmoid,
                  renorm = (cl_uint)p->renormalize;
    const float scale = p->scale;
    const karg_list_t args = KARGS(ARG(lm), ARG(lo), ARG(im), ARG(io), ARG(wm), ARG(wo), GROUP0_ARG(), ARG(experts),
                                   ARG(top_k), ARG(sig), ARG(renorm), ARG(scale), LOCAL_ARG(local * 4u));
    ocl_note_kernel("moe_train.router_weights");
    return ocl_enqueue_groups(q, ks, K_WEIGHTS, k_names, "moe_selected_router_weights", args, (uint64_t)p->rows,
                              local);
}

static rudnn_status_t router_backward(void *queue, const rudnn_router_train_plan_t *p, rudnn_mem_ref_t logits,
                                      rudnn_mem_ref_t indices, rudnn_mem_ref_t grad_weights,
                                      rudnn_mem_ref_t grad_logits)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    size_t elem, ielem;
    RUDNN_TRY(program(q, p, &ks, &elem, &ielem));
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)p->experts, MOE_TRAIN_MAX_LOCAL);
    const cl_mem lm = (cl_mem)logits.mem, im = (cl_mem)indices.mem, gm = (cl_mem)grad_weights.mem,
                 xm = (cl_mem)grad_logits.mem;
    const cl_ulong lo = logits.offset / elem, io = indices.offset / ielem, go = grad_weights.offset / 4,
                   xo = grad_logits.offset / elem;
    const cl_uint experts = (cl_uint)p->experts, top_k = (cl_uint)p->top_k, sig = (cl_uint)p->sigmoid,
                  renorm = (cl_uint)p->renormalize;
    const float scale = p->scale;
    const karg_list_t args =
        KARGS(ARG(lm), ARG(lo), ARG(im), ARG(io), ARG(gm), ARG(go), ARG(xm), ARG(xo), GROUP0_ARG(), ARG(experts),
              ARG(top_k), ARG(sig), ARG(renorm), ARG(scale), LOCAL_ARG(local * 4u));
    ocl_note_kernel("moe_train.router_backward");
    return ocl_enqueue_groups(q, ks, K_BACKWARD, k_names, "moe_selected_router_backward", args, (uint64_t)p->rows,
                              local);
}

/* The rows' program for the plan's dtypes, and the element sizes of rows and weights. */
static rudnn_status_t rows_program(ocl_queue_t *q, const rudnn_moe_rows_plan_t *p, ocl_kernel_set_t **ks,
                                   size_t *elem, size_t *welem)
{
    int code, wcode;
    RUDNN_TRY(ocl_dtype_code(p->dtype, "moe_train", "rows", &code, elem));
    RUDNN_TRY(ocl_dtype_code(p->weight_dtype, "moe_train", "routing weights", &wcode, welem));
    char options[64];
    snprintf(options, sizeof options, "-DMOE_TRAIN_PART=2 -DRUDNN_DTYPE=%d -DRUDNN_WDTYPE=%d", code, wcode);
    return ocl_program_get(q->dev, "moe_train.cl (rows)", rudnn_ocl_src_moe_train, options, k_rows_names,
                           K_ROWS_COUNT, ks);
}

static rudnn_status_t combine_backward(void *queue, const rudnn_moe_rows_plan_t *p, int plane,
                                       rudnn_mem_ref_t expert_out, rudnn_mem_ref_t positions, rudnn_mem_ref_t weights,
                                       rudnn_mem_ref_t grad_out, rudnn_mem_ref_t grad_expert,
                                       rudnn_mem_ref_t grad_weights)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    size_t elem, welem;
    RUDNN_TRY(rows_program(q, p, &ks, &elem, &welem));
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)p->hidden, MOE_TRAIN_MAX_LOCAL);
    const cl_mem em = (cl_mem)expert_out.mem, pm = (cl_mem)positions.mem, wm = (cl_mem)weights.mem,
                 gm = (cl_mem)grad_out.mem, xm = (cl_mem)grad_expert.mem, gwm = (cl_mem)grad_weights.mem;
    const cl_ulong eo = expert_out.offset / elem, po = positions.offset / 4, wo = weights.offset / welem,
                   go = grad_out.offset / elem, xo = grad_expert.offset / elem, gwo = grad_weights.offset / 4;
    const cl_uint top_k = (cl_uint)p->top_k, hidden = (cl_uint)p->hidden, pl = plane != 0;
    const karg_list_t args =
        KARGS(ARG(em), ARG(eo), ARG(pm), ARG(po), ARG(wm), ARG(wo), ARG(gm), ARG(go), ARG(xm), ARG(xo), ARG(gwm),
              ARG(gwo), GROUP0_ARG(), ARG(top_k), ARG(hidden), ARG(pl), LOCAL_ARG(local * 4u));
    ocl_note_kernel(plane ? "moe_train.combine_backward_plane" : "moe_train.combine_backward_serial");
    return ocl_enqueue_groups(q, ks, K_COMBINE_BACKWARD, k_rows_names, "moe_combine_backward", args,
                              (uint64_t)p->tokens, local);
}

static rudnn_status_t dispatch_backward(void *queue, const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t grad_rows,
                                        rudnn_mem_ref_t positions, rudnn_mem_ref_t grad_input)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    size_t elem, welem;
    RUDNN_TRY(rows_program(q, p, &ks, &elem, &welem));
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)p->hidden, MOE_TRAIN_MAX_LOCAL);
    const cl_mem rm = (cl_mem)grad_rows.mem, pm = (cl_mem)positions.mem, im = (cl_mem)grad_input.mem;
    const cl_ulong ro = grad_rows.offset / elem, po = positions.offset / 4, io = grad_input.offset / elem;
    const cl_uint top_k = (cl_uint)p->top_k, hidden = (cl_uint)p->hidden;
    const karg_list_t args = KARGS(ARG(rm), ARG(ro), ARG(pm), ARG(po), ARG(im), ARG(io), GROUP0_ARG(), ARG(top_k),
                                   ARG(hidden));
    ocl_note_kernel("moe_train.dispatch_backward");
    return ocl_enqueue_groups(q, ks, K_DISPATCH_BACKWARD, k_rows_names, "moe_dispatch_backward", args,
                              (uint64_t)p->tokens, local);
}

/* ---- SwiGLU experts' training: one work-item an output element ---- */

enum { K_GATE_UP, K_DOWN, K_DACT, K_DX, K_DW_GATE_UP, K_DW_DOWN, K_EXPERTS_COUNT };
static const char *const k_experts_names[K_EXPERTS_COUNT] = {"rudnn_train_gate_up", "rudnn_train_down",
                                                              "rudnn_train_dact",    "rudnn_train_dx",
                                                              "rudnn_train_dw_gate_up", "rudnn_train_dw_down"};

/* Work-items a group of the experts' kernels (fewer where the device allows fewer). */
#define MOE_TRAIN_ITEMS_LOCAL 64u

typedef struct experts_launch {
    ocl_queue_t *q;
    ocl_kernel_set_t *ks;
    size_t elem, local;
    cl_uint rows, experts, hidden, inter;
} experts_launch_t;

static rudnn_status_t experts_program(void *queue, const rudnn_moe_rows_plan_t *p, experts_launch_t *l)
{
    l->q = (ocl_queue_t *)queue;
    int code;
    RUDNN_TRY(ocl_dtype_code(p->dtype, "moe_train", "expert weights", &code, &l->elem));
    char options[64];
    snprintf(options, sizeof options, "-DMOE_TRAIN_PART=3 -DRUDNN_DTYPE=%d", code);
    RUDNN_TRY(ocl_program_get(l->q->dev, "moe_train.cl (experts)", rudnn_ocl_src_moe_train, options,
                              k_experts_names, K_EXPERTS_COUNT, &l->ks));
    l->local = ocl_local_cap(l->q->dev, l->ks, MOE_TRAIN_ITEMS_LOCAL);
    /* ops/ keeps rows, hidden and inter within 32 bits */
    l->rows = (cl_uint)p->rows, l->experts = (cl_uint)p->experts;
    l->hidden = (cl_uint)p->hidden, l->inter = (cl_uint)p->inter;
    return RUDNN_STATUS_SUCCESS;
}

/* Groups that cover a x b x c items. */
static uint64_t groups_for(const experts_launch_t *l, uint64_t a, uint64_t b, uint64_t c)
{
    return (a * b * c + l->local - 1) / l->local;
}

static rudnn_status_t experts_forward_train(void *queue, const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t tokens,
                                            rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                            rudnn_mem_ref_t down, rudnn_mem_ref_t reserve, rudnn_mem_ref_t act,
                                            rudnn_mem_ref_t out)
{
    const char *op = "swiglu_experts_forward_dispatched_training";
    experts_launch_t l;
    RUDNN_TRY(experts_program(queue, p, &l));
    const size_t es = l.elem;
    const cl_mem xm = (cl_mem)tokens.mem, om = (cl_mem)offsets.mem, gm = (cl_mem)gate.mem, um = (cl_mem)up.mem,
                 dm = (cl_mem)down.mem, rm = (cl_mem)reserve.mem, am = (cl_mem)act.mem, ym = (cl_mem)out.mem;
    const cl_ulong xo = tokens.offset / es, oo = offsets.offset / 4, go = gate.offset / es, uo = up.offset / es,
                   dof = down.offset / es, ro = reserve.offset / 4, ao = act.offset / es, yo = out.offset / es;
    ocl_note_kernel("moe_train.experts_forward_scalar");
    RUDNN_TRY(ocl_enqueue_groups(l.q, l.ks, K_GATE_UP, k_experts_names, op,
                                 KARGS(ARG(xm), ARG(xo), ARG(om), ARG(oo), ARG(gm), ARG(go), ARG(um), ARG(uo),
                                       ARG(rm), ARG(ro), ARG(am), ARG(ao), GROUP0_ARG(), ARG(l.rows),
                                       ARG(l.experts), ARG(l.hidden), ARG(l.inter)),
                                 groups_for(&l, l.rows, l.inter, 1), l.local));
    return ocl_enqueue_groups(l.q, l.ks, K_DOWN, k_experts_names, op,
                              KARGS(ARG(am), ARG(ao), ARG(om), ARG(oo), ARG(dm), ARG(dof), ARG(ym), ARG(yo),
                                    GROUP0_ARG(), ARG(l.rows), ARG(l.experts), ARG(l.hidden), ARG(l.inter)),
                              groups_for(&l, l.rows, l.hidden, 1), l.local);
}

static rudnn_status_t experts_backward(void *queue, const rudnn_moe_rows_plan_t *p, rudnn_mem_ref_t tokens,
                                       rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                       rudnn_mem_ref_t down, rudnn_mem_ref_t reserve, rudnn_mem_ref_t grad_out,
                                       rudnn_mem_ref_t work, rudnn_mem_ref_t grad_tokens, rudnn_mem_ref_t grad_gate,
                                       rudnn_mem_ref_t grad_up, rudnn_mem_ref_t grad_down)
{
    const char *op = "swiglu_experts_backward";
    experts_launch_t l;
    RUDNN_TRY(experts_program(queue, p, &l));
    const size_t es = l.elem;
    const cl_mem xm = (cl_mem)tokens.mem, om = (cl_mem)offsets.mem, gm = (cl_mem)gate.mem, um = (cl_mem)up.mem,
                 dm = (cl_mem)down.mem, rm = (cl_mem)reserve.mem, ym = (cl_mem)grad_out.mem, wm = (cl_mem)work.mem,
                 tm = (cl_mem)grad_tokens.mem, ggm = (cl_mem)grad_gate.mem, gum = (cl_mem)grad_up.mem,
                 gdm = (cl_mem)grad_down.mem;
    const cl_ulong xo = tokens.offset / es, oo = offsets.offset / 4, go = gate.offset / es, uo = up.offset / es,
                   dof = down.offset / es, ro = reserve.offset / 4, yo = grad_out.offset / es, wo = work.offset / 4,
                   to = grad_tokens.offset / es, ggo = grad_gate.offset / 4, guo = grad_up.offset / 4,
                   gdo = grad_down.offset / 4;
    ocl_note_kernel("moe_train.experts_backward_scalar");
    RUDNN_TRY(ocl_enqueue_groups(l.q, l.ks, K_DACT, k_experts_names, op,
                                 KARGS(ARG(ym), ARG(yo), ARG(om), ARG(oo), ARG(dm), ARG(dof), ARG(rm), ARG(ro),
                                       ARG(wm), ARG(wo), GROUP0_ARG(), ARG(l.rows), ARG(l.experts), ARG(l.hidden),
                                       ARG(l.inter)),
                                 groups_for(&l, l.rows, l.inter, 1), l.local));
    RUDNN_TRY(ocl_enqueue_groups(l.q, l.ks, K_DX, k_experts_names, op,
                                 KARGS(ARG(wm), ARG(wo), ARG(om), ARG(oo), ARG(gm), ARG(go), ARG(um), ARG(uo),
                                       ARG(tm), ARG(to), GROUP0_ARG(), ARG(l.rows), ARG(l.experts), ARG(l.hidden),
                                       ARG(l.inter)),
                                 groups_for(&l, l.rows, l.hidden, 1), l.local));
    RUDNN_TRY(ocl_enqueue_groups(l.q, l.ks, K_DW_GATE_UP, k_experts_names, op,
                                 KARGS(ARG(xm), ARG(xo), ARG(om), ARG(oo), ARG(wm), ARG(wo), ARG(ggm), ARG(ggo),
                                       ARG(gum), ARG(guo), GROUP0_ARG(), ARG(l.experts), ARG(l.hidden),
                                       ARG(l.inter)),
                                 groups_for(&l, l.experts, l.inter, l.hidden), l.local));
    return ocl_enqueue_groups(l.q, l.ks, K_DW_DOWN, k_experts_names, op,
                              KARGS(ARG(ym), ARG(yo), ARG(om), ARG(oo), ARG(rm), ARG(ro), ARG(gdm), ARG(gdo),
                                    GROUP0_ARG(), ARG(l.experts), ARG(l.hidden), ARG(l.inter)),
                              groups_for(&l, l.experts, l.hidden, l.inter), l.local);
}

const rudnn_moe_train_kernels_t ocl_moe_train_kernels = {
    .struct_size = sizeof(rudnn_moe_train_kernels_t),
    .router_weights = router_weights,
    .router_backward = router_backward,
    .combine_backward = combine_backward,
    .dispatch_backward = dispatch_backward,
    .experts_forward_train = experts_forward_train,
    .experts_backward = experts_backward,
};
