/* Expert parallelism, the dispatch (rudnn_ep_dispatch): its checks, the EP and TP exchanges of
 * the rows (host-staged, or device to device over NCCL: packed with the MoE gather) and the
 * outputs. */
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/pool.h"
#include "ep_common.h"
#include "ep_host.h"
#include "validate.h"

#define OP_DISPATCH "rudnn_ep_dispatch"

/* This rank's tensors (after ep_who_takes_part): a failure here is agreed on with the others. */
static rudnn_status_t check_dispatch(rudnn_queue_t q, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                     const rudnn_ep_dispatch_in_t *in, const rudnn_ep_dispatch_out_t *out, int64_t *a)
{
    const char *op = OP_DISPATCH;
    TRY(ep_check_routing_inputs(op, q, ci, p, "x", in->x, in->expert_ids, in->active_mask));
    if (in->x->rank != 2)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: x must be [BS, H] (rank 2)", op);
    const int64_t bs = in->x->dims[0], h = in->x->dims[1], k = in->expert_ids->dims[1];
    const int64_t halves = ci->tp_size > 1 ? ci->tp_size : 1, local = p->moe_expert_num / ci->ep_size;
    TRY(rudnn_check_tensor(op, "out->expand_x", q, out->expand_x, 2));
    if (out->expand_x->dtype != in->x->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: out->expand_x is %s, not x's dtype %s", op,
                               rudnn_dtype_name(out->expand_x->dtype), rudnn_dtype_name(in->x->dtype));
    if (out->expand_x->rank != 2 || out->expand_x->dims[1] != h)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: out->expand_x must be [T A, H = %lld]", op, (long long)h);
    TRY(ep_check_rows(op, ci, p, bs, k, out->expand_x->dims[0], a));
    const int64_t d_assist[2] = {out->expand_x->dims[0], 3}, d_nums[1] = {local},
                  d_counts[1] = {halves * local * ci->ep_size}, d_tp[1] = {halves};
    TRY(rudnn_check_tensor(op, "out->assist_info", q, out->assist_info, 2));
    TRY(rudnn_check_dtype(op, "out->assist_info", out->assist_info, RUDNN_I32, "(rank, token, slot) per row"));
    TRY(ep_check_dims(op, "out->assist_info", out->assist_info, 2, d_assist, "[T A, 3]"));
    TRY(rudnn_check_tensor(op, "out->expert_token_nums", q, out->expert_token_nums, 1));
    TRY(rudnn_check_dtype(op, "out->expert_token_nums", out->expert_token_nums, RUDNN_I64, "rows per local expert"));
    TRY(ep_check_dims(op, "out->expert_token_nums", out->expert_token_nums, 1, d_nums, "[local experts]"));
    TRY(rudnn_check_tensor(op, "out->ep_recv_counts", q, out->ep_recv_counts, 1));
    TRY(rudnn_check_dtype(op, "out->ep_recv_counts", out->ep_recv_counts, RUDNN_I32, "rows per (half, expert, rank)"));
    TRY(ep_check_dims(op, "out->ep_recv_counts", out->ep_recv_counts, 1, d_counts, "[T x local experts x ep_size]"));
    if (ci->tp_size > 1) {
        TRY(rudnn_check_tensor(op, "out->tp_recv_counts", q, out->tp_recv_counts, 1));
        TRY(rudnn_check_dtype(op, "out->tp_recv_counts", out->tp_recv_counts, RUDNN_I32, "rows per half"));
        TRY(ep_check_dims(op, "out->tp_recv_counts", out->tp_recv_counts, 1, d_tp, "[tp_size]"));
    } else if (out->tp_recv_counts) {
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: out->tp_recv_counts must be NULL without a TP group", op);
    }
    /* the outputs must not touch the inputs or each other */
    const rudnn_tensor_t *outs[4] = {out->expand_x, out->assist_info, out->expert_token_nums, out->ep_recv_counts};
    const char *names[4] = {"out->expand_x", "out->assist_info", "out->expert_token_nums", "out->ep_recv_counts"};
    for (int i = 0; i < 4; i++) {
        TRY(rudnn_check_disjoint(op, names[i], outs[i], "x", in->x));
        TRY(rudnn_check_disjoint(op, names[i], outs[i], "expert_ids", in->expert_ids));
        TRY(rudnn_check_disjoint(op, names[i], outs[i], "active_mask", in->active_mask));
        TRY(rudnn_check_disjoint(op, names[i], outs[i], "elastic_info", in->elastic_info));
        TRY(rudnn_check_disjoint(op, names[i], outs[i], "out->tp_recv_counts", out->tp_recv_counts));
        for (int j = i + 1; j < 4; j++)
            TRY(rudnn_check_disjoint(op, names[i], outs[i], names[j], outs[j]));
    }
    return RUDNN_STATUS_SUCCESS;
}

/* What one half of expand_x holds on the host: rows, (rank, token, slot), counts per (e, s). */
typedef struct half_rows {
    int64_t n;
    uint8_t *rows;
    int32_t *assist;
    int32_t *counts; /* [L W] rows (not yet running totals) */
} half_rows_t;

static void half_free(half_rows_t *hr)
{
    free(hr->rows);
    free(hr->assist);
    free(hr->counts);
    memset(hr, 0, sizeof *hr);
}

/* row 0: the rows stay on the device (a device exchange put them into expand_x). */
static rudnn_status_t half_alloc(const char *op, half_rows_t *hr, int64_t n, size_t row, int64_t lw)
{
    hr->n = n;
    hr->rows = rudnn_host_malloc(n && row ? (size_t)n * row : 1);
    hr->assist = rudnn_host_malloc(n ? (size_t)n * 3 * sizeof(int32_t) : 1);
    hr->counts = rudnn_host_calloc((size_t)lw, sizeof(int32_t));
    if (!hr->rows || !hr->assist || !hr->counts) {
        half_free(hr);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (%lld received rows)", op,
                               (long long)n);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* Rows on the device (a device communicator): the packed rows in send order, and expand_x. */
typedef struct dev_rows {
    rudnn_mem_ref_t packed, expand;
} dev_rows_t;

/* The rows' exchange over a device communicator: each (destination, local expert) block of the
 * packed rows goes straight into the destination's expand_x, at its (expert, source) place;
 * blocks between two ranks go in expert order on both sides, so NCCL matches them. */
static rudnn_status_t rows_device(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, const send_plan_t *sp,
                                  const int32_t *rc, size_t row, const dev_rows_t *dev)
{
    const int n = lay->nact;
    const int64_t L = lay->local, m = (int64_t)n * L;
    int *speers = rudnn_host_calloc((size_t)m + 1, sizeof *speers), *rpeers = rudnn_host_calloc((size_t)m + 1,
                                                                                                 sizeof *rpeers);
    rudnn_mem_ref_t *sref = rudnn_host_calloc((size_t)m + 1, sizeof *sref),
                    *rref = rudnn_host_calloc((size_t)m + 1, sizeof *rref);
    size_t *sbytes = rudnn_host_calloc((size_t)m + 1, sizeof *sbytes),
           *rbytes = rudnn_host_calloc((size_t)m + 1, sizeof *rbytes);
    int64_t *start = rudnn_host_calloc((size_t)m + 1, sizeof *start); /* expand_x row of block (i, e) */
    rudnn_status_t st = !speers || !rpeers || !sref || !rref || !sbytes || !rbytes || !start
                            ? rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send lists)", op)
                            : RUDNN_STATUS_SUCCESS;
    int ns = 0, nr = 0;
    int64_t at = 0;
    for (int64_t e = 0; st == RUDNN_STATUS_SUCCESS && e < L; e++) /* expand_x: expert, then source */
        for (int i = 0; i < n; i++) {
            start[i * L + e] = at;
            at += rc[i * L + e];
        }
    for (int i = 0; st == RUDNN_STATUS_SUCCESS && i < n; i++)
        for (int64_t e = 0; e < L; e++) {
            const int64_t c = sp->counts[i * L + e], r = rc[i * L + e];
            if (c > 0) {
                speers[ns] = lay->act[i];
                sref[ns] = (rudnn_mem_ref_t){dev->packed.mem, dev->packed.offset + (size_t)sp->offset[i * L + e] * row};
                sbytes[ns++] = (size_t)c * row;
            }
            if (r > 0) {
                rpeers[nr] = lay->act[i];
                rref[nr] = (rudnn_mem_ref_t){dev->expand.mem, dev->expand.offset + (size_t)start[i * L + e] * row};
                rbytes[nr++] = (size_t)r * row;
            }
        }
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_comm_exchange_device(comm, RUDNN_COMM_GROUP_EP, op, ns, speers, sref, sbytes, nr, rpeers, rref,
                                        rbytes);
    free(speers), free(rpeers), free(sref), free(rref), free(sbytes), free(rbytes), free(start);
    return st;
}

/* The EP exchange: this rank's rows go to the experts' ranks; what comes back is laid out as
 * expand_x's half (local expert, source, token, slot). x: the host copy of x, or NULL with dev
 * (the rows move on the device; mine then holds no rows). */
static rudnn_status_t dispatch_ep(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, const send_plan_t *sp,
                                  const void *x, size_t row, const dev_rows_t *dev, half_rows_t *mine)
{
    const int n = lay->nact;
    const int64_t L = lay->local, sent = sp->offset[(int64_t)n * L];
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    int32_t *rc = rudnn_host_calloc((size_t)(n * L), sizeof *rc);
    void **sb = rudnn_host_calloc((size_t)n, sizeof *sb), **rb = rudnn_host_calloc((size_t)n, sizeof *rb);
    size_t *sbytes = rudnn_host_calloc((size_t)n, sizeof *sbytes), *rbytes = rudnn_host_calloc((size_t)n, sizeof *rbytes);
    int64_t *roff = rudnn_host_calloc((size_t)n + 1, sizeof *roff);
    uint8_t *srows = rudnn_host_malloc(sent && !dev ? (size_t)sent * row : 1), *rrows = NULL;
    int32_t *smeta = rudnn_host_malloc(sent ? (size_t)sent * 2 * sizeof(int32_t) : 1), *rmeta = NULL;
    if (!rc || !sb || !rb || !sbytes || !rbytes || !roff || !srows || !smeta) {
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send buffers)", op);
        goto done;
    }
    for (int i = 0; i < n; i++) { /* the counts per local expert, each way */
        sb[i] = &sp->counts[i * L];
        rb[i] = &rc[i * L];
        sbytes[i] = rbytes[i] = (size_t)L * sizeof(int32_t);
    }
    if ((st = ep_exchange(op, comm, lay, sb, sbytes, rb, rbytes, TAG_COUNTS)) != RUDNN_STATUS_SUCCESS)
        goto done;
    for (int i = 0; i < n; i++) {
        int64_t c = 0;
        for (int64_t e = 0; e < L; e++)
            c += rc[i * L + e];
        roff[i + 1] = roff[i] + c;
    }
    /* a rank with more tokens than the others said (global_bs 0) would overflow A here */
    st = roff[n] > lay->a ? rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                                            "%s: %lld rows are coming to this rank, more than A = %lld (do all ranks "
                                            "have the same BS? else set global_bs)", op, (long long)roff[n],
                                            (long long)lay->a)
                          : RUDNN_STATUS_SUCCESS;
    if ((st = ep_agree(op, comm, lay, st)) != RUDNN_STATUS_SUCCESS)
        goto done;
    for (int64_t s = 0; s < lay->bs * lay->k; s++) {
        const int64_t p = sp->pos[s];
        if (p < 0)
            continue;
        if (!dev)
            memcpy(srows + (size_t)p * row, (const uint8_t *)x + (size_t)(s / lay->k) * row, row);
        smeta[2 * p] = (int32_t)(s / lay->k);
        smeta[2 * p + 1] = (int32_t)(s % lay->k);
    }
    rrows = rudnn_host_malloc(roff[n] && !dev ? (size_t)roff[n] * row : 1);
    rmeta = rudnn_host_malloc(roff[n] ? (size_t)roff[n] * 2 * sizeof(int32_t) : 1);
    if (!rrows || !rmeta) {
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (%lld received rows)", op,
                             (long long)roff[n]);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const int64_t s0 = sp->offset[i * L], s1 = sp->offset[(i + 1) * L];
        sb[i] = smeta + 2 * s0;
        sbytes[i] = (size_t)(s1 - s0) * 2 * sizeof(int32_t);
        rb[i] = rmeta + 2 * roff[i];
        rbytes[i] = (size_t)(roff[i + 1] - roff[i]) * 2 * sizeof(int32_t);
    }
    if ((st = ep_exchange(op, comm, lay, sb, sbytes, rb, rbytes, TAG_META)) != RUDNN_STATUS_SUCCESS)
        goto done;
    for (int i = 0; i < n; i++) {
        const int64_t s0 = sp->offset[i * L], s1 = sp->offset[(i + 1) * L];
        sb[i] = srows + (size_t)s0 * row;
        sbytes[i] = (size_t)(s1 - s0) * row;
        rb[i] = rrows + (size_t)roff[i] * row;
        rbytes[i] = (size_t)(roff[i + 1] - roff[i]) * row;
    }
    st = dev ? rows_device(op, comm, lay, sp, rc, row, dev)
             : ep_exchange(op, comm, lay, sb, sbytes, rb, rbytes, TAG_ROWS);
    if (st != RUDNN_STATUS_SUCCESS)
        goto done;
    if ((st = half_alloc(op, mine, roff[n], dev ? 0 : row, L * lay->ep_size)) != RUDNN_STATUS_SUCCESS)
        goto done;
    int64_t at = 0;
    for (int64_t e = 0; e < L; e++)
        for (int i = 0; i < n; i++) {
            int64_t from = roff[i];
            for (int64_t e2 = 0; e2 < e; e2++)
                from += rc[i * L + e2];
            const int64_t c = rc[i * L + e];
            if (!dev)
                memcpy(mine->rows + (size_t)at * row, rrows + (size_t)from * row, (size_t)c * row);
            for (int64_t r = 0; r < c; r++) {
                mine->assist[3 * (at + r)] = lay->act[i];
                mine->assist[3 * (at + r) + 1] = rmeta[2 * (from + r)];
                mine->assist[3 * (at + r) + 2] = rmeta[2 * (from + r) + 1];
            }
            mine->counts[e * lay->ep_size + lay->act[i]] = (int32_t)c;
            at += c;
        }
done:
    free(rc), free(sb), free(rb), free(sbytes), free(rbytes), free(roff);
    free(srows), free(smeta), free(rrows), free(rmeta);
    return st;
}

/* The TP exchange: the peer's half, as it laid its own out. */
static rudnn_status_t dispatch_tp(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, size_t row,
                                  const half_rows_t *mine, half_rows_t *peer)
{
    int64_t n = 0;
    TRY(ep_exchange_tp(op, comm, lay, &mine->n, sizeof mine->n, &n, sizeof n, TAG_TP));
    const int64_t lw = lay->local * lay->ep_size;
    TRY(n < 0 || n > lay->a ? rudnn_set_error(RUDNN_STATUS_INTERNAL, "%s: the TP peer sends %lld rows (A = %lld)", op,
                                              (long long)n, (long long)lay->a)
                            : RUDNN_STATUS_SUCCESS);
    TRY(half_alloc(op, peer, n, row, lw));
    rudnn_status_t st = ep_exchange_tp(op, comm, lay, mine->counts, (size_t)lw * sizeof(int32_t), peer->counts,
                                       (size_t)lw * sizeof(int32_t), TAG_TP);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_exchange_tp(op, comm, lay, mine->assist, (size_t)mine->n * 3 * sizeof(int32_t), peer->assist,
                            (size_t)n * 3 * sizeof(int32_t), TAG_TP);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_exchange_tp(op, comm, lay, mine->rows, (size_t)mine->n * row, peer->rows, (size_t)n * row, TAG_TP);
    if (st != RUDNN_STATUS_SUCCESS)
        half_free(peer);
    return st;
}

static rudnn_status_t write_at(rudnn_queue_t q, const rudnn_tensor_t *t, size_t at, const void *host, size_t bytes)
{
    return bytes ? rudnn_buffer_write(q, t->buffer, t->offset + at, host, bytes) : RUDNN_STATUS_SUCCESS;
}

/* The outputs from the halves (half 0: this rank's rows, half 1: the TP peer's). */
static rudnn_status_t dispatch_write(const char *op, rudnn_queue_t q, const ep_layout_t *lay,
                                     const rudnn_ep_params_t *p, size_t row, int rows_on_device,
                                     const half_rows_t *halves, const rudnn_ep_dispatch_out_t *out)
{
    const int64_t L = lay->local, W = lay->ep_size, lw = L * W;
    int32_t *counts = rudnn_host_calloc((size_t)(lay->halves * lw), sizeof *counts);
    int64_t *nums = rudnn_host_calloc((size_t)L, sizeof *nums);
    int32_t tp[2] = {0, 0};
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (!counts || !nums) {
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (counts)", op);
        goto done;
    }
    for (int h = 0; h < lay->halves; h++) {
        int64_t total = 0;
        for (int64_t c = 0; c < lw; c++) { /* running totals in expand_x's order, as Ascend */
            total += halves[h].counts[c];
            counts[h * lw + c] = (int32_t)total;
            nums[c / W] += halves[h].counts[c];
        }
        if (!rows_on_device)
            st = write_at(q, out->expand_x, (size_t)h * (size_t)lay->a * row, halves[h].rows,
                          (size_t)halves[h].n * row);
        if (st == RUDNN_STATUS_SUCCESS)
            st = write_at(q, out->assist_info, (size_t)h * (size_t)lay->a * 3 * sizeof(int32_t), halves[h].assist,
                          (size_t)halves[h].n * 3 * sizeof(int32_t));
        if (st != RUDNN_STATUS_SUCCESS)
            goto done;
    }
    if (p->expert_token_nums_type == 0)
        for (int64_t e = 1; e < L; e++)
            nums[e] += nums[e - 1];
    st = write_at(q, out->ep_recv_counts, 0, counts, (size_t)(lay->halves * lw) * sizeof(int32_t));
    if (st == RUDNN_STATUS_SUCCESS)
        st = write_at(q, out->expert_token_nums, 0, nums, (size_t)L * sizeof(int64_t));
    if (st == RUDNN_STATUS_SUCCESS && lay->halves > 1) {
        tp[lay->tp_rank] = (int32_t)halves[0].n;
        tp[1 - lay->tp_rank] = (int32_t)halves[1].n;
        st = write_at(q, out->tp_recv_counts, 0, tp, sizeof tp);
    }
done:
    free(counts);
    free(nums);
    return st;
}

/* The rows to send, packed on the device in send order (the MoE gather), for a device exchange. */
typedef struct packed {
    void *mem; /* a pooled block of the queue: the rows, then their tokens */
    size_t bytes;
} packed_t;

static rudnn_status_t pack_device(const char *op, rudnn_queue_t q, const ep_layout_t *lay, const send_plan_t *sp,
                                  const rudnn_tensor_t *x, packed_t *pk)
{
    const int64_t sent = sp->offset[(int64_t)lay->nact * lay->local];
    const size_t row = ep_row_bytes(lay, x->dtype), rows = (size_t)sent * row;
    const size_t tok_at = (rows + 255) / 256 * 256;
    const rudnn_moe_kernels_t *k = RUDNN_FAMILY_TABLE(q->context->backend, moe);
    if (!k || !k->dispatch_gather)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend %s has no MoE gather kernel", op,
                               q->context->backend->name);
    if (sent == 0)
        return RUDNN_STATUS_SUCCESS;
    uint32_t *tok = rudnn_host_malloc((size_t)sent * sizeof *tok);
    if (!tok)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (packing)", op);
    for (int64_t s = 0; s < lay->bs * lay->k; s++)
        if (sp->pos[s] >= 0)
            tok[sp->pos[s]] = (uint32_t)(s / lay->k);
    pk->bytes = tok_at + (size_t)sent * sizeof *tok;
    rudnn_status_t st = rudnn_kernel_status(op, rudnn_pool_acquire(q, pk->bytes, &pk->mem));
    const rudnn_mem_ref_t rows_ref = {pk->mem, 0}, tok_ref = {pk->mem, tok_at};
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_kernel_status(op, q->context->backend->mem_write(q->handle, tok_ref, tok,
                                                                    (size_t)sent * sizeof *tok));
    if (st == RUDNN_STATUS_SUCCESS) {
        const rudnn_moe_rows_plan_t plan = {.dtype = x->dtype, .weight_dtype = x->dtype, .tokens = lay->bs,
                                            .top_k = (int32_t)lay->k, .hidden = lay->h, .rows = sent};
        st = rudnn_kernel_status(op, k->dispatch_gather(q->handle, &plan, rudnn_mem_of(x), tok_ref, rows_ref));
    }
    if (st == RUDNN_STATUS_SUCCESS) /* NCCL reads the rows on its own stream */
        st = rudnn_queue_synchronize(q);
    free(tok);
    if (st != RUDNN_STATUS_SUCCESS && pk->mem) {
        rudnn_pool_release(q, pk->mem, pk->bytes);
        pk->mem = NULL;
    }
    return st;
}

rudnn_status_t rudnn_ep_dispatch(rudnn_queue_t queue, rudnn_comm_t comm, const rudnn_ep_params_t *params,
                                 const rudnn_ep_dispatch_in_t *in, const rudnn_ep_dispatch_out_t *out)
{
    const char *op = OP_DISPATCH;
    rudnn_comm_info_t ci;
    ep_layout_t lay;
    TRY(ep_who_takes_part(op, queue, comm, in ? in->elastic_info : NULL, &ci, &lay));
    if (!lay.active) { /* scaled out: nobody sends to it or waits for it */
        ep_layout_free(&lay);
        return RUDNN_STATUS_SUCCESS;
    }
    void *x = NULL, *ids = NULL, *mask = NULL;
    send_plan_t sp = {0};
    half_rows_t halves[2] = {{0}, {0}};
    int64_t a = 0;
    rudnn_status_t st = rudnn_check_arg(op, "in", in);
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_check_arg(op, "out", out);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_params_layout(op, &ci, params, &lay);
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_dispatch(queue, &ci, params, in, out, &a);
    if (st == RUDNN_STATUS_SUCCESS) {
        lay.bs = in->x->dims[0], lay.h = in->x->dims[1], lay.k = in->expert_ids->dims[1], lay.a = a;
        st = ep_check_buffer(op, &ci, params, &lay, in->x->dtype);
    }
    const int mask_rank = st == RUDNN_STATUS_SUCCESS && in->active_mask ? in->active_mask->rank : 0;
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_read(op, queue, in->expert_ids, &ids);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_read(op, queue, in->active_mask, &mask);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_check_routes(op, &lay, ids, mask, mask_rank);
    /* rows through device memory only: NCCL, and no TP exchange (done on the host) */
    const int device = rudnn_comm_is_device(comm) && lay.halves == 1;
    if (st == RUDNN_STATUS_SUCCESS && !device)
        st = ep_read(op, queue, in->x, &x);
    if (st == RUDNN_STATUS_SUCCESS)
        st = ep_send_plan_make(op, &lay, ids, mask, mask_rank, &sp);
    packed_t pk = {0};
    if (st == RUDNN_STATUS_SUCCESS && device)
        st = pack_device(op, queue, &lay, &sp, in->x, &pk);
    st = ep_agree(op, comm, &lay, st); /* nothing moves unless every rank can go on */
    const size_t row = st == RUDNN_STATUS_SUCCESS ? ep_row_bytes(&lay, in->x->dtype) : 0;
    const dev_rows_t dev = {{pk.mem, 0}, st == RUDNN_STATUS_SUCCESS ? rudnn_mem_of(out->expand_x)
                                                                    : (rudnn_mem_ref_t){NULL, 0}};
    if (st == RUDNN_STATUS_SUCCESS)
        st = dispatch_ep(op, comm, &lay, &sp, x, row, device ? &dev : NULL, &halves[0]);
    if (st == RUDNN_STATUS_SUCCESS && lay.halves > 1)
        st = dispatch_tp(op, comm, &lay, row, &halves[0], &halves[1]);
    if (st == RUDNN_STATUS_SUCCESS)
        st = dispatch_write(op, queue, &lay, params, row, device, halves, out);
    if (pk.mem)
        rudnn_pool_release(queue, pk.mem, pk.bytes);
    half_free(&halves[0]);
    half_free(&halves[1]);
    ep_send_plan_free(&sp);
    free(x), free(ids), free(mask);
    ep_layout_free(&lay);
    return st;
}
