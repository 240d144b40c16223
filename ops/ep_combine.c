/* Expert parallelism, the combine + AddRmsNorm (rudnn_ep_combine_add_rms_norm) and its workspace
 * size: its checks and the rows' way back (TP reduction, EP exchange, host-staged or over NCCL);
 * the device side is ep_device.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "ep_common.h"
#include "ep_device.h"
#include "ep_host.h"
#include "validate.h"

#define OP_COMBINE "rudnn_ep_combine_add_rms_norm"

/* [n] of dtype like (or [n, 1, ..]): a helper for the optional inputs of the combine. */
static rudnn_status_t check_opt(const char *op, rudnn_queue_t q, const char *arg, const rudnn_tensor_t *t,
                                const rudnn_tensor_t *like, int rank, const int64_t *dims, const char *what)
{
    TRY(rudnn_check_tensor(op, arg, q, t, 1));
    if (t->dtype != like->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s is %s, not %s (expand_x's dtype)", op, arg,
                               rudnn_dtype_name(t->dtype), rudnn_dtype_name(like->dtype));
    return ep_check_dims(op, arg, t, rank, dims, what);
}

static rudnn_status_t check_combine(rudnn_queue_t q, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                    const rudnn_ep_combine_in_t *in, const rudnn_ep_combine_out_t *out, int64_t *a)
{
    const char *op = OP_COMBINE;
    TRY(ep_check_routing_inputs(op, q, ci, p, "residual", in->residual, in->expert_ids, in->active_mask));
    if (in->residual->rank != 3)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: residual must be [BS, 1, H] (rank 3)", op);
    const rudnn_tensor_t *r = in->residual;
    const int64_t bs = r->dims[0], h = r->dims[2], k = in->expert_ids->dims[1];
    const int64_t halves = ci->tp_size > 1 ? ci->tp_size : 1, local = p->moe_expert_num / ci->ep_size;
    TRY(rudnn_check_tensor(op, "expand_x", q, in->expand_x, 2));
    if (in->expand_x->dtype != r->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: residual is %s, not expand_x's dtype %s", op,
                               rudnn_dtype_name(r->dtype), rudnn_dtype_name(in->expand_x->dtype));
    if (in->expand_x->rank != 2 || in->expand_x->dims[1] != h)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: expand_x must be [T A, H = %lld]", op, (long long)h);
    TRY(ep_check_rows(op, ci, p, bs, k, in->expand_x->dims[0], a));
    const int64_t d_assist[2] = {in->expand_x->dims[0], 3}, d_counts[1] = {halves * local * ci->ep_size},
                  d_tp[1] = {halves}, d_bk[2] = {bs, k}, d_h[1] = {h}, d_bh[2] = {bs, h}, d_b1h[3] = {bs, 1, h},
                  d_b11[3] = {bs, 1, 1};
    TRY(rudnn_check_tensor(op, "assist_info", q, in->assist_info, 2));
    TRY(rudnn_check_dtype(op, "assist_info", in->assist_info, RUDNN_I32, "the dispatch's assist_info"));
    TRY(ep_check_dims(op, "assist_info", in->assist_info, 2, d_assist, "[T A, 3]"));
    TRY(rudnn_check_tensor(op, "ep_send_counts", q, in->ep_send_counts, 1));
    TRY(rudnn_check_dtype(op, "ep_send_counts", in->ep_send_counts, RUDNN_I32, "the dispatch's ep_recv_counts"));
    TRY(ep_check_dims(op, "ep_send_counts", in->ep_send_counts, 1, d_counts, "[T x local experts x ep_size]"));
    if (ci->tp_size > 1) {
        TRY(rudnn_check_tensor(op, "tp_send_counts", q, in->tp_send_counts, 1));
        TRY(rudnn_check_dtype(op, "tp_send_counts", in->tp_send_counts, RUDNN_I32, "the dispatch's tp_recv_counts"));
        TRY(ep_check_dims(op, "tp_send_counts", in->tp_send_counts, 1, d_tp, "[tp_size]"));
    } else if (in->tp_send_counts) {
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: tp_send_counts must be NULL without a TP group", op);
    }
    TRY(rudnn_check_tensor(op, "expert_scales", q, in->expert_scales, 2));
    TRY(rudnn_check_dtype(op, "expert_scales", in->expert_scales, RUDNN_F32, "the routing weights"));
    TRY(ep_check_dims(op, "expert_scales", in->expert_scales, 2, d_bk, "[BS, K]"));
    TRY(check_opt(op, q, "gamma", in->gamma, r, 1, d_h, "[H]"));
    if (in->shared_expert_x && check_opt(op, q, "shared_expert_x", in->shared_expert_x, r, 2, d_bh, "[BS, H]"))
        TRY(check_opt(op, q, "shared_expert_x", in->shared_expert_x, r, 3, d_b1h, "[BS, H] or [BS, 1, H]"));
    if (p->copy_expert_num > 0 || p->const_expert_num > 0) {
        TRY(rudnn_check_arg(op, "ori_x (copy and const experts)", in->ori_x));
        TRY(check_opt(op, q, "ori_x", in->ori_x, r, 2, d_bh, "[BS, H]"));
    }
    if (p->const_expert_num > 0) {
        const int64_t d_n[1] = {p->const_expert_num}, d_nh[2] = {p->const_expert_num, h};
        TRY(rudnn_check_arg(op, "const_alpha1", in->const_alpha1));
        TRY(check_opt(op, q, "const_alpha1", in->const_alpha1, r, 1, d_n, "[const experts]"));
        TRY(rudnn_check_arg(op, "const_alpha2", in->const_alpha2));
        TRY(check_opt(op, q, "const_alpha2", in->const_alpha2, r, 1, d_n, "[const experts]"));
        TRY(rudnn_check_arg(op, "const_v", in->const_v));
        TRY(check_opt(op, q, "const_v", in->const_v, r, 2, d_nh, "[const experts, H]"));
    }
    if (!(in->norm_eps > 0.0f) || in->norm_eps == INFINITY)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: norm_eps is %g: it must be finite and > 0", op,
                               (double)in->norm_eps);
    TRY(check_opt(op, q, "out->y", out->y, r, 3, d_b1h, "[BS, 1, H]"));
    TRY(check_opt(op, q, "out->x", out->x, r, 3, d_b1h, "[BS, 1, H]"));
    TRY(rudnn_check_tensor(op, "out->rstd", q, out->rstd, 3));
    TRY(rudnn_check_dtype(op, "out->rstd", out->rstd, RUDNN_F32, "1 / RMS per token"));
    TRY(ep_check_dims(op, "out->rstd", out->rstd, 3, d_b11, "[BS, 1, 1]"));
    const rudnn_tensor_t *ins[15] = {in->expand_x, in->expert_ids, in->assist_info, in->ep_send_counts,
                                     in->tp_send_counts, in->expert_scales, in->residual, in->gamma,
                                     in->active_mask, in->shared_expert_x, in->elastic_info, in->ori_x,
                                     in->const_alpha1, in->const_alpha2, in->const_v};
    const rudnn_tensor_t *outs[3] = {out->y, out->x, out->rstd};
    const char *names[3] = {"out->y", "out->x", "out->rstd"};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 15; j++)
            TRY(rudnn_check_disjoint(op, names[i], outs[i], "an input", ins[j]));
        for (int j = i + 1; j < 3; j++)
            TRY(rudnn_check_disjoint(op, names[i], outs[i], names[j], outs[j]));
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_ep_combine_workspace_size(rudnn_queue_t queue, rudnn_comm_t comm,
                                               const rudnn_ep_params_t *params, const rudnn_ep_combine_in_t *in,
                                               const rudnn_ep_combine_out_t *out, size_t *bytes)
{
    const char *op = "rudnn_ep_combine_workspace_size";
    TRY(rudnn_check_arg(op, "bytes", bytes));
    TRY(rudnn_check_arg(op, "in", in));
    TRY(rudnn_check_arg(op, "out", out));
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "comm", comm));
    TRY(rudnn_check_arg(op, "params", params));
    rudnn_comm_info_t ci;
    TRY(rudnn_comm_get_info(comm, &ci));
    TRY(ep_check_params(op, &ci, params));
    int64_t a = 0;
    TRY(check_combine(queue, &ci, params, in, out, &a));
    *bytes = ep_combine_workspace_bytes(in->residual->dims[0], in->expert_ids->dims[1], in->residual->dims[2],
                                        in->residual->dtype);
    return RUDNN_STATUS_SUCCESS;
}

/* This rank's rows of expand_x after the TP reduction: in half 0's order, rounded to the dtype
 * (the peer's partial sums of them added in FP32, rounded once). */
static rudnn_status_t combine_tp(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, rudnn_dtype_t dt,
                                 size_t row, int64_t own, int64_t peer_rows, uint8_t *ex)
{
    const size_t bytes = (size_t)own * row;
    uint8_t *from_peer = rudnn_host_malloc(bytes ? bytes : 1);
    if (!from_peer)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (TP rows)", op);
    /* half 1 holds the peer's rows: its partial sums go back to it */
    const rudnn_status_t st = ep_exchange_tp(op, comm, lay, ex + (size_t)lay->a * row, (size_t)peer_rows * row,
                                             from_peer, bytes, TAG_TP);
    if (st == RUDNN_STATUS_SUCCESS)
        for (int64_t i = 0; i < own * lay->h; i++)
            ep_put(dt, ex, i, ep_get(dt, ex, i) + ep_get(dt, from_peer, i));
    free(from_peer);
    return st;
}

/* The EP exchange back: the rows of half 0 to their source ranks; what comes back lands in
 * this rank's send order (sp), where each slot finds its row. */
static rudnn_status_t combine_ep(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, const send_plan_t *sp,
                                 const int32_t *totals, const uint8_t *ex, size_t row, uint8_t *back)
{
    const int n = lay->nact;
    const int64_t L = lay->local, W = lay->ep_size;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    void **sb = rudnn_host_calloc((size_t)n, sizeof *sb), **rb = rudnn_host_calloc((size_t)n, sizeof *rb);
    size_t *sbytes = rudnn_host_calloc((size_t)n, sizeof *sbytes), *rbytes = rudnn_host_calloc((size_t)n, sizeof *rbytes);
    int64_t *off = rudnn_host_calloc((size_t)n + 1, sizeof *off);
    uint8_t *gather = NULL;
    if (!sb || !rb || !sbytes || !rbytes || !off) {
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send buffers)", op);
        goto done;
    }
    const int64_t own = totals[L * W - 1];
    gather = rudnn_host_malloc(own ? (size_t)own * row : 1);
    if (!gather) {
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (%lld rows)", op, (long long)own);
        goto done;
    }
    /* rows of (e, s) start at totals[e W + s - 1]; source i's rows are its blocks of every e */
    for (int i = 0; i < n; i++) {
        int64_t c = 0;
        for (int64_t e = 0; e < L; e++) {
            const int64_t at = e * W + lay->act[i];
            c += totals[at] - (at > 0 ? totals[at - 1] : 0);
        }
        off[i + 1] = off[i] + c;
    }
    for (int i = 0; i < n; i++) {
        int64_t to = off[i];
        for (int64_t e = 0; e < L; e++) {
            const int64_t at = e * W + lay->act[i], from = at > 0 ? totals[at - 1] : 0, c = totals[at] - from;
            memcpy(gather + (size_t)to * row, ex + (size_t)from * row, (size_t)c * row);
            to += c;
        }
        sb[i] = gather + (size_t)off[i] * row;
        sbytes[i] = (size_t)(off[i + 1] - off[i]) * row;
        rb[i] = back + (size_t)sp->offset[i * L] * row;
        rbytes[i] = (size_t)(sp->offset[(i + 1) * L] - sp->offset[i * L]) * row;
    }
    st = ep_exchange(op, comm, lay, sb, sbytes, rb, rbytes, TAG_ROWS);
done:
    free(sb), free(rb), free(sbytes), free(rbytes), free(off), free(gather);
    return st;
}

/* The same over a device communicator (NCCL, no TP group): each (source, local expert) block of
 * expand_x goes straight from the device to the source rank's workspace, where it lands at that
 * rank's send order; blocks to one peer go in expert order on both sides, so NCCL matches them. */
static rudnn_status_t combine_ep_device(const char *op, rudnn_queue_t q, rudnn_comm_t comm, const ep_layout_t *lay,
                                        const send_plan_t *sp, const int32_t *totals,
                                        const rudnn_tensor_t *expand_x, rudnn_buffer_t ws, size_t row)
{
    const int n = lay->nact;
    const int64_t L = lay->local, W = lay->ep_size, m = (int64_t)n * L;
    int *speers = rudnn_host_calloc((size_t)m + 1, sizeof *speers), *rpeers = rudnn_host_calloc((size_t)m + 1,
                                                                                                 sizeof *rpeers);
    rudnn_mem_ref_t *sref = rudnn_host_calloc((size_t)m + 1, sizeof *sref),
                    *rref = rudnn_host_calloc((size_t)m + 1, sizeof *rref);
    size_t *sbytes = rudnn_host_calloc((size_t)m + 1, sizeof *sbytes),
           *rbytes = rudnn_host_calloc((size_t)m + 1, sizeof *rbytes);
    rudnn_status_t st = !speers || !rpeers || !sref || !rref || !sbytes || !rbytes
                            ? rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send lists)", op)
                            : RUDNN_STATUS_SUCCESS;
    int ns = 0, nr = 0;
    const rudnn_mem_ref_t ex = rudnn_mem_of(expand_x);
    for (int i = 0; st == RUDNN_STATUS_SUCCESS && i < n; i++)
        for (int64_t e = 0; e < L; e++) {
            const int64_t at = e * W + lay->act[i], from = at > 0 ? totals[at - 1] : 0, c = totals[at] - from;
            if (c > 0) {
                speers[ns] = lay->act[i];
                sref[ns] = (rudnn_mem_ref_t){ex.mem, ex.offset + (size_t)from * row};
                sbytes[ns++] = (size_t)c * row;
            }
            const int64_t back = sp->counts[i * L + e];
            if (back > 0) {
                rpeers[nr] = lay->act[i];
                rref[nr] = ep_combine_rows_at(ws, sp->offset[i * L + e], row);
                rbytes[nr++] = (size_t)back * row;
            }
        }
    if (st == RUDNN_STATUS_SUCCESS) /* the caller's writes into expand_x are finished first */
        st = rudnn_queue_synchronize(q);
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_comm_exchange_device(comm, RUDNN_COMM_GROUP_EP, op, ns, speers, sref, sbytes, nr, rpeers, rref,
                                        rbytes);
    free(speers), free(rpeers), free(sref), free(rref), free(sbytes), free(rbytes);
    return st;
}

/* The host copies the combine's exchanges need (the rest stays on the device: ep_device.c). */
typedef struct combine_inputs {
    void *ex;
    int32_t *totals, *tp;
} combine_inputs_t;

static void combine_inputs_free(combine_inputs_t *c)
{
    free(c->ex), free(c->totals), free(c->tp);
}

static rudnn_status_t combine_read(const char *op, rudnn_queue_t q, const rudnn_ep_combine_in_t *in, int device,
                                   combine_inputs_t *c)
{
    if (!device) /* a device exchange sends expand_x's rows from where they are */
        TRY(ep_read(op, q, in->expand_x, &c->ex));
    TRY(ep_read(op, q, in->ep_send_counts, (void **)&c->totals));
    return ep_read(op, q, in->tp_send_counts, (void **)&c->tp);
}

/* The counts the dispatch wrote must describe at most A rows a half, growing. */
static rudnn_status_t check_totals(const char *op, const ep_layout_t *lay, const int32_t *totals, const int32_t *tp)
{
    const int64_t lw = lay->local * lay->ep_size;
    for (int h = 0; h < lay->halves; h++)
        for (int64_t c = 0; c < lw; c++) {
            const int64_t v = totals[h * lw + c], prev = c > 0 ? totals[h * lw + c - 1] : 0;
            if (v < prev || v > lay->a)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                       "%s: ep_send_counts[%lld] is %lld: running totals must grow and stay within "
                                       "A = %lld (pass the dispatch's ep_recv_counts)", op,
                                       (long long)(h * lw + c), (long long)v, (long long)lay->a);
        }
    if (tp && (tp[lay->tp_rank] != totals[lw - 1] || tp[1 - lay->tp_rank] != totals[2 * lw - 1]))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: tp_send_counts (%d, %d) disagree with ep_send_counts' totals (%d, %d)", op, tp[0],
                               tp[1], totals[lw - 1], totals[2 * lw - 1]);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_ep_combine_add_rms_norm(rudnn_queue_t queue, rudnn_comm_t comm, const rudnn_ep_params_t *params,
                                             const rudnn_ep_combine_in_t *in, rudnn_buffer_t workspace,
                                             size_t workspace_bytes, const rudnn_ep_combine_out_t *out)
{
    const char *op = OP_COMBINE;
    rudnn_comm_info_t ci;
    ep_layout_t lay;
    TRY(ep_who_takes_part(op, queue, comm, in ? in->elastic_info : NULL, &ci, &lay));
    if (!lay.active) {
        ep_layout_free(&lay);
        return RUDNN_STATUS_SUCCESS;
    }
    void *ids = NULL, *mask = NULL;
    uint8_t *back = NULL;
    send_plan_t sp = {0};
    combine_inputs_t c = {0};
    int64_t a = 0;
    rudnn_status_t st = rudnn_check_arg(op, "in", in);
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_check_arg(op, "out", out);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_params_layout(op, &ci, params, &lay);
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_combine(queue, &ci, params, in, out, &a);
    const rudnn_dtype_t dt = st == RUDNN_STATUS_SUCCESS ? in->residual->dtype : RUDNN_F32;
    if (st == RUDNN_STATUS_SUCCESS) {
        lay.bs = in->residual->dims[0], lay.h = in->residual->dims[2], lay.k = in->expert_ids->dims[1], lay.a = a;
        st = ep_check_buffer(op, &ci, params, &lay, dt);
    }
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_combine_device_check(op, queue, in, out, workspace, workspace_bytes,
                                     ep_combine_workspace_bytes(lay.bs, lay.k, lay.h, dt));
    const int mask_rank = st == RUDNN_STATUS_SUCCESS && in->active_mask ? in->active_mask->rank : 0;
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_read(op, queue, in->expert_ids, &ids);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_read(op, queue, in->active_mask, &mask);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_check_routes(op, &lay, ids, mask, mask_rank);
    /* rows through device memory only: NCCL, and no TP reduction (done on the host) */
    const int device = rudnn_comm_is_device(comm) && lay.halves == 1;
    if (st == RUDNN_STATUS_SUCCESS)
        st = combine_read(op, queue, in, device, &c);
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_totals(op, &lay, c.totals, c.tp);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_send_plan_make(op, &lay, ids, mask, mask_rank, &sp);
    if (st == RUDNN_STATUS_SUCCESS && !device) {
        const int64_t sent = sp.offset[(int64_t)lay.nact * lay.local];
        back = rudnn_host_malloc(sent ? (size_t)sent * ep_row_bytes(&lay, dt) : 1);
        if (!back)
            st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (%lld returning rows)", op,
                                 (long long)sent);
    }
    st = ep_agree(op, comm, &lay, st);
    const size_t row = st == RUDNN_STATUS_SUCCESS ? ep_row_bytes(&lay, dt) : 0;
    const int64_t lw = lay.local * lay.ep_size;
    if (st == RUDNN_STATUS_SUCCESS && lay.halves > 1)
        st = combine_tp(op, comm, &lay, dt, row, c.totals[lw - 1], c.totals[2 * lw - 1], c.ex);
    if (st == RUDNN_STATUS_SUCCESS)
        st = device ? combine_ep_device(op, queue, comm, &lay, &sp, c.totals, in->expand_x, workspace, row)
                    : combine_ep(op, comm, &lay, &sp, c.totals, c.ex, row, back);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_combine_device(op, queue, &lay, dt, ids, mask, mask_rank, sp.pos, back,
                               sp.offset[(int64_t)lay.nact * lay.local], in, workspace, out);
    combine_inputs_free(&c);
    ep_send_plan_free(&sp);
    free(ids), free(mask), free(back);
    ep_layout_free(&lay);
    return st;
}
