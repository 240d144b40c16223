/* Host launchers of the mixture-of-experts kernels (kernels/moe.cl).
 *
 * moe.cl is built as five programs (RUDNN_MOE_PART), each per dtype it needs:
 * route (logits dtype), dispatch (no dtype), experts (token dtype and tile
 * size; also holds gather), combine (token dtype x routing-weight dtype) and
 * ep (the expert-parallel combine + AddRmsNorm, token dtype).
 * Every launch is one-dimensional and split so that one NDRange stays below
 * 2^31 work-items; the kernels take the first work-group of the launch. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"
#include "rudnn/ep.h" /* RUDNN_EP_MAX_TOP_K */

/* ---- programs ------------------------------------------------------------------ */

enum { PART_ROUTE = 1, PART_DISPATCH = 2, PART_EXPERTS = 3, PART_COMBINE = 4, PART_EP = 5 };

enum { K_ROUTE_SOFTMAX, K_ROUTE_GROUPED, K_ROUTE_COUNT };
static const char *const k_route_names[K_ROUTE_COUNT] = {
    "rudnn_moe_route_softmax",
    "rudnn_moe_route_sigmoid_grouped",
};

enum { K_DISPATCH_RANK, K_DISPATCH_SCAN, K_DISPATCH_FINISH, K_DISPATCH_COUNT };
static const char *const k_dispatch_names[K_DISPATCH_COUNT] = {
    "rudnn_moe_dispatch_rank",
    "rudnn_moe_dispatch_scan",
    "rudnn_moe_dispatch_finish",
};

enum { K_GATHER, K_GATE_UP, K_DOWN, K_GATE_UP_DOT, K_DOWN_DOT, K_EXPERTS_COUNT };
static const char *const k_experts_names[K_EXPERTS_COUNT] = {
    "rudnn_moe_gather",      "rudnn_moe_gate_up",  "rudnn_moe_down",
    "rudnn_moe_gate_up_dot", "rudnn_moe_down_dot",
};

enum { K_COMBINE, K_COMBINE_COUNT };
static const char *const k_combine_names[K_COMBINE_COUNT] = {"rudnn_moe_combine"};

enum { K_EP_COMBINE_NORM, K_EP_COUNT };
static const char *const k_ep_names[K_EP_COUNT] = {"rudnn_moe_ep_combine_norm"};

/* Local-size bound of the routing kernels; the route program gets it as
 * -DMOE_ROUTE_MAX_LOCAL (the grouped router's static reduction scratch). The
 * grouped router's other arrays are sized by backends/limits.h, which the
 * build puts before moe.cl and ops/moe.c enforces. */
#define MOE_ROUTE_MAX_LOCAL 256u
/* Largest expert tile tried (T x T work-items); passed as -DMOE_TILE. */
#define MOE_TILE_MAX 16u

/* Upper bound of the local size of the row-wise kernels. */
#define MOE_MAX_LOCAL 256u

/* Work-items per group of the CPU dot-product kernels. */
#define MOE_CPU_DOT_LOCAL 16u

/* Bytes of local memory route_softmax may use to keep a row's probabilities;
 * bigger rows recompute them from the logits each selection round (same
 * bits). Overridable at build time to test the recompute path. */
#ifndef OCL_MOE_LOCAL_P_MAX_BYTES
#define OCL_MOE_LOCAL_P_MAX_BYTES ((cl_ulong)1 << 40)
#endif

/* Likewise for ep_combine_norm's FP32 x of a token (H floats); bigger rows are
 * computed twice (same bits). Overridable at build time to test that path. */
#ifndef OCL_EP_LOCAL_X_MAX_BYTES
#define OCL_EP_LOCAL_X_MAX_BYTES ((cl_ulong)1 << 40)
#endif

/* Each part's name in messages and its kernels, by PART_*. */
static const struct moe_part {
    const char *label;
    const char *const *names;
    size_t count;
} k_parts[] = {
    [PART_ROUTE] = {"moe.cl (route)", k_route_names, K_ROUTE_COUNT},
    [PART_DISPATCH] = {"moe.cl (dispatch)", k_dispatch_names, K_DISPATCH_COUNT},
    [PART_EXPERTS] = {"moe.cl (experts)", k_experts_names, K_EXPERTS_COUNT},
    [PART_COMBINE] = {"moe.cl (combine)", k_combine_names, K_COMBINE_COUNT},
    [PART_EP] = {"moe.cl (ep)", k_ep_names, K_EP_COUNT},
};

static rudnn_status_t get_program(ocl_queue_t *q, int part, int dtype, int wdtype, unsigned tile,
                                  ocl_kernel_set_t **ks)
{
    /* the part, then the build options that part reads */
    char options[256];
    const int n = snprintf(options, sizeof options, "-DRUDNN_MOE_PART=%d", part);
    char *rest = options + n;
    const size_t left = sizeof options - (size_t)n;
    switch (part) {
    case PART_ROUTE:
        snprintf(rest, left, " -DRUDNN_DTYPE=%d -DMOE_ROUTE_MAX_LOCAL=%u", dtype,
                 MOE_ROUTE_MAX_LOCAL);
        break;
    case PART_EXPERTS:
        snprintf(rest, left, " -DRUDNN_DTYPE=%d -DMOE_TILE=%u", dtype, tile);
        break;
    case PART_COMBINE:
        snprintf(rest, left, " -DRUDNN_DTYPE=%d -DRUDNN_WDTYPE=%d", dtype, wdtype);
        break;
    case PART_EP: /* the slot codes of hal/moe.h, so the kernel cannot disagree with them */
        snprintf(rest, left,
                 " -DRUDNN_DTYPE=%d -DEP_MAX_TOP_K=%d -DEP_SRC_OFF=%d -DEP_SRC_ZERO=%d"
                 " -DEP_SRC_COPY=%d -DEP_SRC_CONST0=%d",
                 dtype, RUDNN_EP_MAX_TOP_K, RUDNN_EP_SRC_OFF, RUDNN_EP_SRC_ZERO,
                 RUDNN_EP_SRC_COPY, RUDNN_EP_SRC_CONST0);
        break;
    default: /* dispatch: U32 indices only */
        break;
    }
    const struct moe_part *p = &k_parts[part];
    return ocl_program_get(q->dev, p->label, rudnn_ocl_src_moe, options, p->names, p->count, ks);
}

/* The experts program with the largest tile (T x T work-items per group) that
 * the device and the built kernels accept. */
static rudnn_status_t experts_program(ocl_queue_t *q, int dtype, const char *op,
                                      ocl_kernel_set_t **ks, unsigned *tile)
{
    size_t limit = q->dev->max_group_size;
    if (q->dev->max_item_size0 > 0 && q->dev->max_item_size0 < limit) {
        limit = q->dev->max_item_size0;
    }
    for (unsigned t = MOE_TILE_MAX; t >= 1; t /= 2) {
        if ((size_t)t * t > limit) {
            continue;
        }
        RUDNN_TRY(get_program(q, PART_EXPERTS, dtype, 0, t, ks));
        if ((*ks)->max_group >= (size_t)t * t) {
            *tile = t;
            return RUDNN_STATUS_SUCCESS;
        }
    }
    return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED,
                    "%s: opencl: %s allows no work-group for the expert kernels", op,
                    q->dev->name);
}

/* The kernels take sizes that ops/ does not bound (hidden, inter) as uint. */
static rudnn_status_t fits_u32(const char *op, const char *what, int64_t v)
{
    if ((uint64_t)v <= UINT32_MAX) {
        return RUDNN_STATUS_SUCCESS;
    }
    return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: %s = %lld exceeds %u", op, what,
                    (long long)v, (unsigned)UINT32_MAX);
}

/* What the gather and the expert kernels launch with: the experts program for
 * the plan's dtype and its tile. */
typedef struct experts_launch {
    ocl_queue_t *q;
    ocl_kernel_set_t *ks;
    size_t elem; /* bytes per token, weight and activation element */
    unsigned tile;
} experts_launch_t;

static rudnn_status_t experts_prepare(void *queue, const rudnn_moe_rows_plan_t *plan,
                                      const char *op, const char *what, experts_launch_t *el)
{
    el->q = (ocl_queue_t *)queue;
    int code;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, op, what, &code, &el->elem));
    RUDNN_TRY(fits_u32(op, "hidden", plan->hidden));
    return experts_program(el->q, code, op, &el->ks, &el->tile);
}

/* ---- routing -------------------------------------------------------------------- */

/* What both routers launch with: one work-group of `local` work-items per token. */
typedef struct route_launch {
    ocl_queue_t *q;
    ocl_kernel_set_t *ks;
    size_t elem; /* bytes per logit and per routing weight */
    size_t local;
} route_launch_t;

static rudnn_status_t route_prepare(void *queue, const rudnn_route_kernel_plan_t *plan,
                                    const char *op, route_launch_t *rl)
{
    rl->q = (ocl_queue_t *)queue;
    int code;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, op, "logits", &code, &rl->elem));
    RUDNN_TRY(get_program(rl->q, PART_ROUTE, code, 0, 0, &rl->ks));
    rl->local = ocl_pick_local(rl->q->dev, rl->ks, (uint64_t)plan->experts, MOE_ROUTE_MAX_LOCAL);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_route_softmax(void *queue, const rudnn_route_kernel_plan_t *plan,
                                        rudnn_mem_ref_t logits, rudnn_mem_ref_t indices,
                                        rudnn_mem_ref_t weights)
{
    const char *op = "moe_route";
    route_launch_t rl;
    RUDNN_TRY(route_prepare(queue, plan, op, &rl));
    const size_t elem = rl.elem, local = rl.local;
    const cl_ulong scratch = (cl_ulong)local * 8u;
    const cl_ulong p_bytes = (cl_ulong)plan->experts * 4u;
    cl_uint p_in_local = p_bytes <= OCL_MOE_LOCAL_P_MAX_BYTES &&
                         p_bytes + scratch <= rl.q->dev->local_mem / 2;

    cl_mem lm = (cl_mem)logits.mem, im = (cl_mem)indices.mem, wm = (cl_mem)weights.mem;
    cl_ulong lo = logits.offset / elem, io = indices.offset / 4u, wo = weights.offset / elem;
    cl_uint experts = (cl_uint)plan->experts, top_k = (cl_uint)plan->top_k;
    cl_uint renormalize = plan->renormalize != 0;
    const karg_list_t args = KARGS(ARG(lm), ARG(lo), ARG(im), ARG(io), ARG(wm), ARG(wo),
                                   GROUP0_ARG(), ARG(experts), ARG(top_k), ARG(renormalize),
                                   ARG(p_in_local), LOCAL_ARG(p_in_local ? (size_t)p_bytes : 4u),
                                   LOCAL_ARG(local * 4u), LOCAL_ARG(local * 4u));
    ocl_note_kernel("moe.route_softmax");
    return ocl_enqueue_groups(rl.q, rl.ks, K_ROUTE_SOFTMAX, k_route_names, op, args,
                              (uint64_t)plan->tokens, local);
}

static rudnn_status_t ocl_route_sigmoid_grouped(void *queue, const rudnn_route_kernel_plan_t *plan,
                                                rudnn_mem_ref_t logits, rudnn_mem_ref_t bias,
                                                rudnn_mem_ref_t indices, rudnn_mem_ref_t weights)
{
    const char *op = "moe_route_sigmoid_grouped";
    route_launch_t rl;
    RUDNN_TRY(route_prepare(queue, plan, op, &rl));
    const size_t elem = rl.elem;
    cl_mem lm = (cl_mem)logits.mem, im = (cl_mem)indices.mem, wm = (cl_mem)weights.mem;
    const cl_uint has_bias = bias.mem != NULL;
    cl_mem bm = has_bias ? (cl_mem)bias.mem : lm; /* placeholder, never read */
    cl_ulong lo = logits.offset / elem, bo = has_bias ? bias.offset / 4u : 0;
    cl_ulong io = indices.offset / 4u, wo = weights.offset / elem;
    cl_uint experts = (cl_uint)plan->experts, top_k = (cl_uint)plan->top_k;
    cl_uint renormalize = plan->renormalize != 0, groups = (cl_uint)plan->groups;
    cl_uint selected = (cl_uint)plan->selected_groups, top_two = plan->group_top_two != 0;
    float scale = plan->scale;
    const karg_list_t args = KARGS(ARG(lm), ARG(lo), ARG(bm), ARG(bo), ARG(has_bias), ARG(im),
                                   ARG(io), ARG(wm), ARG(wo), GROUP0_ARG(), ARG(experts),
                                   ARG(top_k), ARG(renormalize), ARG(groups), ARG(selected),
                                   ARG(top_two), ARG(scale));
    ocl_note_kernel("moe.route_grouped");
    return ocl_enqueue_groups(rl.q, rl.ks, K_ROUTE_GROUPED, k_route_names, op, args,
                              (uint64_t)plan->tokens, rl.local);
}

/* ---- dispatch ------------------------------------------------------------------- */

static rudnn_status_t ocl_dispatch_plan(void *queue, const rudnn_moe_rows_plan_t *plan,
                                        rudnn_mem_ref_t indices, rudnn_mem_ref_t counts,
                                        rudnn_mem_ref_t offsets, rudnn_mem_ref_t positions,
                                        rudnn_mem_ref_t row_token)
{
    const char *op = "moe_dispatch";
    ocl_queue_t *q = (ocl_queue_t *)queue;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(get_program(q, PART_DISPATCH, 0, 0, 0, &ks));
    cl_mem im = (cl_mem)indices.mem, cm = (cl_mem)counts.mem, om = (cl_mem)offsets.mem;
    cl_mem pm = (cl_mem)positions.mem, rm = (cl_mem)row_token.mem;
    cl_ulong io = indices.offset / 4u, co = counts.offset / 4u, oo = offsets.offset / 4u;
    cl_ulong po = positions.offset / 4u, ro = row_token.offset / 4u;
    /* ops/ keeps rows (tokens x top_k) in 1..UINT32_MAX */
    cl_uint pairs = (cl_uint)plan->rows, experts = (cl_uint)plan->experts;
    cl_uint top_k = (cl_uint)plan->top_k;

    /* ranks within each expert and counts: one work-group per expert */
    const size_t rank_local = ocl_pick_local(q->dev, ks, (uint64_t)pairs / 4u, MOE_MAX_LOCAL);
    const karg_list_t rank_args = KARGS(ARG(im), ARG(io), ARG(cm), ARG(co), ARG(pm), ARG(po),
                                        GROUP0_ARG(), ARG(pairs), LOCAL_ARG(rank_local * 4u));
    RUDNN_TRY(ocl_enqueue_groups(q, ks, K_DISPATCH_RANK, k_dispatch_names, op, rank_args,
                                 (uint64_t)experts, rank_local));
    /* offsets: one work-group */
    const size_t scan_local = ocl_pick_local(q->dev, ks, (uint64_t)experts / 4u, MOE_MAX_LOCAL);
    const karg_list_t scan_args = KARGS(ARG(cm), ARG(co), ARG(om), ARG(oo), GROUP0_ARG(),
                                        ARG(experts), LOCAL_ARG(scan_local * 4u));
    RUDNN_TRY(ocl_enqueue_groups(q, ks, K_DISPATCH_SCAN, k_dispatch_names, op, scan_args, 1,
                                 scan_local));
    /* global rows and row_token: one work-item per pair */
    const size_t local = ocl_local_cap(q->dev, ks, 64u);
    const karg_list_t args = KARGS(ARG(im), ARG(io), ARG(om), ARG(oo), ARG(pm), ARG(po), ARG(rm),
                                   ARG(ro), GROUP0_ARG(), ARG(pairs), ARG(top_k));
    ocl_note_kernel("moe.dispatch_plan");
    return ocl_enqueue_groups(q, ks, K_DISPATCH_FINISH, k_dispatch_names, op, args,
                              ((uint64_t)pairs + local - 1) / local, local);
}

static rudnn_status_t ocl_dispatch_gather(void *queue, const rudnn_moe_rows_plan_t *plan,
                                          rudnn_mem_ref_t input, rudnn_mem_ref_t row_token,
                                          rudnn_mem_ref_t tokens)
{
    const char *op = "moe_dispatch";
    experts_launch_t el;
    RUDNN_TRY(experts_prepare(queue, plan, op, "input", &el));
    ocl_queue_t *q = el.q;
    ocl_kernel_set_t *ks = el.ks;
    const size_t elem = el.elem;
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)plan->hidden, MOE_MAX_LOCAL);
    cl_mem xm = (cl_mem)input.mem, rm = (cl_mem)row_token.mem, tm = (cl_mem)tokens.mem;
    cl_ulong xo = input.offset / elem, ro = row_token.offset / 4u, to = tokens.offset / elem;
    cl_uint hidden = (cl_uint)plan->hidden;
    const karg_list_t args = KARGS(ARG(xm), ARG(xo), ARG(rm), ARG(ro), ARG(tm), ARG(to),
                                   GROUP0_ARG(), ARG(hidden));
    ocl_note_kernel("moe.gather");
    return ocl_enqueue_groups(q, ks, K_GATHER, k_experts_names, op, args, (uint64_t)plan->rows,
                              local);
}

/* ---- experts -------------------------------------------------------------------- */

rudnn_status_t ocl_experts_scalar(void *queue, const rudnn_moe_rows_plan_t *plan, int dot,
                                  rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets,
                                  rudnn_mem_ref_t gate, rudnn_mem_ref_t up, rudnn_mem_ref_t down,
                                  rudnn_mem_ref_t act, rudnn_mem_ref_t out)
{
    const char *op = "swiglu_experts_forward_dispatched";
    RUDNN_TRY(fits_u32(op, "inter", plan->inter));
    experts_launch_t el;
    RUDNN_TRY(experts_prepare(queue, plan, op, "weight", &el));
    ocl_queue_t *q = el.q;
    ocl_kernel_set_t *ks = el.ks;
    const size_t elem = el.elem;
    const unsigned tile = el.tile;
    const size_t local =
        dot ? ocl_local_cap(q->dev, ks, MOE_CPU_DOT_LOCAL) : (size_t)tile * tile;
    cl_mem xm = (cl_mem)tokens.mem, om = (cl_mem)offsets.mem, gm = (cl_mem)gate.mem;
    cl_mem um = (cl_mem)up.mem, dm = (cl_mem)down.mem, am = (cl_mem)act.mem;
    cl_mem ym = (cl_mem)out.mem;
    cl_ulong xo = tokens.offset / elem, oo = offsets.offset / 4u, go = gate.offset / elem;
    cl_ulong uo = up.offset / elem, dof = down.offset / elem, ao = act.offset / elem;
    cl_ulong yo = out.offset / elem;
    /* ops/ keeps rows (tokens x top_k) in 1..UINT32_MAX */
    cl_uint rows = (cl_uint)plan->rows, experts = (cl_uint)plan->experts;
    cl_uint hidden = (cl_uint)plan->hidden, inter = (cl_uint)plan->inter;
    const uint64_t row_tiles = ((uint64_t)rows + tile - 1) / tile;

    /* act = round(silu(x gate^T) * (x up^T)); the dot and tiled kernels share a signature */
    cl_uint out_tiles = (cl_uint)(((uint64_t)inter + tile - 1) / tile);
    const karg_list_t gate_up_args =
        KARGS(ARG(xm), ARG(xo), ARG(om), ARG(oo), ARG(gm), ARG(go), ARG(um), ARG(uo), ARG(am),
              ARG(ao), GROUP0_ARG(), ARG(rows), ARG(experts), ARG(hidden), ARG(inter),
              ARG(out_tiles));
    uint64_t groups = dot ? ((uint64_t)rows * inter + local - 1) / local : row_tiles * out_tiles;
    RUDNN_TRY(ocl_enqueue_groups(q, ks, dot ? K_GATE_UP_DOT : K_GATE_UP, k_experts_names, op,
                                 gate_up_args, groups, local));
    /* out = round(act down^T) */
    out_tiles = (cl_uint)(((uint64_t)hidden + tile - 1) / tile);
    const karg_list_t down_args =
        KARGS(ARG(am), ARG(ao), ARG(om), ARG(oo), ARG(dm), ARG(dof), ARG(ym), ARG(yo),
              GROUP0_ARG(), ARG(rows), ARG(experts), ARG(hidden), ARG(inter), ARG(out_tiles));
    groups = dot ? ((uint64_t)rows * hidden + local - 1) / local : row_tiles * out_tiles;
    return ocl_enqueue_groups(q, ks, dot ? K_DOWN_DOT : K_DOWN, k_experts_names, op, down_args,
                              groups, local);
}

/* ---- combine -------------------------------------------------------------------- */

static rudnn_status_t ocl_combine(void *queue, const rudnn_moe_rows_plan_t *plan,
                                  rudnn_mem_ref_t expert_out, rudnn_mem_ref_t positions,
                                  rudnn_mem_ref_t weights, rudnn_mem_ref_t out)
{
    const char *op = "moe_combine";
    ocl_queue_t *q = (ocl_queue_t *)queue;
    int code, wcode;
    size_t elem, welem;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, op, "expert output", &code, &elem));
    RUDNN_TRY(ocl_dtype_code(plan->weight_dtype, op, "routing weight", &wcode, &welem));
    RUDNN_TRY(fits_u32(op, "hidden", plan->hidden));
    ocl_kernel_set_t *ks;
    RUDNN_TRY(get_program(q, PART_COMBINE, code, wcode, 0, &ks));
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)plan->hidden, MOE_MAX_LOCAL);
    cl_mem em = (cl_mem)expert_out.mem, pm = (cl_mem)positions.mem, wm = (cl_mem)weights.mem;
    cl_mem ym = (cl_mem)out.mem;
    cl_ulong eo = expert_out.offset / elem, po = positions.offset / 4u;
    cl_ulong wo = weights.offset / welem, yo = out.offset / elem;
    cl_uint top_k = (cl_uint)plan->top_k, hidden = (cl_uint)plan->hidden;
    const karg_list_t args = KARGS(ARG(em), ARG(eo), ARG(pm), ARG(po), ARG(wm), ARG(wo), ARG(ym),
                                   ARG(yo), GROUP0_ARG(), ARG(top_k), ARG(hidden));
    ocl_note_kernel("moe.combine");
    return ocl_enqueue_groups(q, ks, K_COMBINE, k_combine_names, op, args, (uint64_t)plan->tokens,
                              local);
}

/* ---- expert-parallel combine + AddRmsNorm --------------------------------------- */

/* A mem ref's buffer and element offset; where the plan does not read it (mem NULL), the
 * placeholder's buffer at offset 0 (OpenCL takes no NULL cl_mem for a __global argument
 * portably; the kernel never dereferences it). */
static void ep_arg(rudnn_mem_ref_t ref, size_t elem, cl_mem placeholder, cl_mem *mem,
                   cl_ulong *off)
{
    *mem = ref.mem ? (cl_mem)ref.mem : placeholder;
    *off = ref.mem ? (cl_ulong)(ref.offset / elem) : 0u;
}

static rudnn_status_t ocl_ep_combine_norm(void *queue, const rudnn_ep_combine_plan_t *plan,
                                          rudnn_mem_ref_t rows, rudnn_mem_ref_t src,
                                          rudnn_mem_ref_t scales, rudnn_mem_ref_t shared,
                                          rudnn_mem_ref_t ori_x, rudnn_mem_ref_t alpha1,
                                          rudnn_mem_ref_t alpha2, rudnn_mem_ref_t const_v,
                                          rudnn_mem_ref_t residual, rudnn_mem_ref_t gamma,
                                          rudnn_mem_ref_t y, rudnn_mem_ref_t rstd,
                                          rudnn_mem_ref_t x)
{
    const char *op = "rudnn_ep_combine_add_rms_norm";
    ocl_queue_t *q = (ocl_queue_t *)queue;
    if (plan->top_k < 1 || plan->top_k > RUDNN_EP_MAX_TOP_K) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: top_k %d is past %d", op,
                        (int)plan->top_k, RUDNN_EP_MAX_TOP_K);
    }
    int code;
    size_t elem;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, op, "expand_x", &code, &elem));
    RUDNN_TRY(fits_u32(op, "hidden", plan->hidden));
    ocl_kernel_set_t *ks;
    RUDNN_TRY(get_program(q, PART_EP, code, 0, 0, &ks));
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)plan->hidden, MOE_MAX_LOCAL);
    const cl_ulong scratch = (cl_ulong)local * 4u;
    const cl_ulong x_bytes = (cl_ulong)plan->hidden * 4u;
    cl_uint sums_in_local = x_bytes <= OCL_EP_LOCAL_X_MAX_BYTES &&
                            x_bytes + scratch <= q->dev->local_mem / 2;

    const cl_mem res = (cl_mem)residual.mem;
    cl_mem rm, shm, om, a1m, a2m, cvm;
    cl_ulong ro, sho, oo, a1o, a2o, cvo;
    ep_arg(rows, elem, res, &rm, &ro);
    ep_arg(plan->has_shared ? shared : (rudnn_mem_ref_t){NULL, 0}, elem, res, &shm, &sho);
    ep_arg(ori_x, elem, res, &om, &oo);
    ep_arg(alpha1, elem, res, &a1m, &a1o);
    ep_arg(alpha2, elem, res, &a2m, &a2o);
    ep_arg(const_v, elem, res, &cvm, &cvo);
    cl_mem sm = (cl_mem)src.mem, wm = (cl_mem)scales.mem, resm = res, gm = (cl_mem)gamma.mem;
    cl_mem ym = (cl_mem)y.mem, rsm = (cl_mem)rstd.mem, xm = (cl_mem)x.mem;
    cl_ulong so = src.offset / 4u, wo = scales.offset / 4u, reso = residual.offset / elem;
    cl_ulong go = gamma.offset / elem, yo = y.offset / elem, rso = rstd.offset / 4u;
    cl_ulong xo = x.offset / elem;
    cl_uint top_k = (cl_uint)plan->top_k, hidden = (cl_uint)plan->hidden;
    cl_uint has_shared = plan->has_shared != 0;
    float eps = plan->eps;
    const karg_list_t args =
        KARGS(ARG(rm), ARG(ro), ARG(sm), ARG(so), ARG(wm), ARG(wo), ARG(shm), ARG(sho), ARG(om),
              ARG(oo), ARG(a1m), ARG(a1o), ARG(a2m), ARG(a2o), ARG(cvm), ARG(cvo), ARG(resm),
              ARG(reso), ARG(gm), ARG(go), ARG(ym), ARG(yo), ARG(rsm), ARG(rso), ARG(xm), ARG(xo),
              GROUP0_ARG(), ARG(top_k), ARG(hidden), ARG(has_shared), ARG(eps),
              ARG(sums_in_local), LOCAL_ARG(sums_in_local ? (size_t)x_bytes : 4u),
              LOCAL_ARG((size_t)scratch));
    ocl_note_kernel("moe.ep_combine_norm");
    return ocl_enqueue_groups(q, ks, K_EP_COMBINE_NORM, k_ep_names, op, args,
                              (uint64_t)plan->tokens, local);
}

const rudnn_moe_kernels_t ocl_moe_kernels = {
    .struct_size = sizeof(rudnn_moe_kernels_t),
    .route_softmax = ocl_route_softmax,
    .route_sigmoid_grouped = ocl_route_sigmoid_grouped,
    .dispatch_plan = ocl_dispatch_plan,
    .dispatch_gather = ocl_dispatch_gather,
    .combine = ocl_combine,
    .experts_candidates = ocl_experts_candidates,
    .experts_candidate_count = OCL_EXPERTS_CANDIDATES,
    .experts_check = ocl_experts_check,
    .experts_workspace = ocl_experts_workspace,
    .experts_run = ocl_experts_run,
    .ep_combine_norm = ocl_ep_combine_norm,
};
