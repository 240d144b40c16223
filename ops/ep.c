/* Expert parallelism (rudnn/ep.h): argument checks, then the host-staged path: the rows are
 * read to the host and exchanged point to point among the ranks that take part (so that ranks a
 * scale-down excludes are neither sent to nor waited for). The dispatch packs on the host after
 * one read of x (fewer bytes over the bus than packing K copies on the device); the combine's
 * weighted sum, residual add and RMSNorm run on the device over the rows that came back
 * (ep_device.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/pool.h"
#include "ep_device.h"
#include "ep_host.h"
#include "ep_layout.h"
#include "validate.h"

#define OP_DISPATCH "rudnn_ep_dispatch"
#define OP_COMBINE "rudnn_ep_combine_add_rms_norm"

/* message tags (1: the status agreement, ops/ep_host.c) */
enum { TAG_COUNTS = 2, TAG_META = 3, TAG_ROWS = 4, TAG_TP = 5 };

/* ---- checks ------------------------------------------------------------------------------ */

static rudnn_status_t check_dims(const char *op, const char *arg, const rudnn_tensor_t *t, int rank,
                                 const int64_t *dims, const char *what)
{
    int ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = t->dims[i] == dims[i];
    if (!ok) {
        char got[96];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s is %s, not %s", op, arg,
                               rudnn_shape_str(t, got, sizeof got), what);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* The parameters every rank shares (the same error on every rank for the same values). */
static rudnn_status_t check_params(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p)
{
    if (p->shared_expert_num != 0 || p->shared_expert_rank_num != 0)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED,
                               "%s: params: shared_expert_num and shared_expert_rank_num are reserved (0), as in the "
                               "seed (got %lld and %lld)", op, (long long)p->shared_expert_num,
                               (long long)p->shared_expert_rank_num);
    if (p->expert_shard_type != 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: params: expert_shard_type is %lld; only 0 is defined", op,
                               (long long)p->expert_shard_type);
    if (p->moe_expert_num < 1 || p->moe_expert_num > RUDNN_EP_MAX_EXPERTS ||
        p->moe_expert_num % (ci->ep_size - p->shared_expert_rank_num) != 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: params: moe_expert_num is %lld, not in 1..%d and divisible by the EP ranks (%d)",
                               op, (long long)p->moe_expert_num, RUDNN_EP_MAX_EXPERTS, ci->ep_size);
    if (p->zero_expert_num < 0 || p->copy_expert_num < 0 || p->const_expert_num < 0 ||
        p->moe_expert_num + p->zero_expert_num + p->copy_expert_num + p->const_expert_num >= INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: params: special expert counts must be >= 0 with all experts below 2^31 - 1", op);
    if (p->global_bs < 0 || (p->global_bs > 0 && p->global_bs % ci->ep_size != 0))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: params: global_bs is %lld, not 0 or a multiple of the EP ranks (%d)", op,
                               (long long)p->global_bs, ci->ep_size);
    if (p->expert_token_nums_type != 0 && p->expert_token_nums_type != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: params: expert_token_nums_type is %lld, not 0 (running totals) or 1 (counts)", op,
                               (long long)p->expert_token_nums_type);
    if (ci->tp_size > 1 && p->moe_expert_num / ci->ep_size != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: a TP group needs one local expert per rank (moe_expert_num %lld over %d ranks)",
                               op, (long long)p->moe_expert_num, ci->ep_size);
    return RUDNN_STATUS_SUCCESS;
}

/* The tokens' tensor (x [BS, H], or the combine's residual [BS, 1, H]: name), expert_ids
 * [BS, K] and the mask: shared limits and this rank's tensors. */
static rudnn_status_t check_routing_inputs(const char *op, rudnn_queue_t q, const rudnn_comm_info_t *ci,
                                           const rudnn_ep_params_t *p, const char *name, const rudnn_tensor_t *x,
                                           const rudnn_tensor_t *ids, const rudnn_tensor_t *mask)
{
    TRY(rudnn_check_tensor(op, name, q, x, 2));
    TRY(rudnn_check_float_dtype(op, name, x));
    const int three = x->rank == 3;
    const int64_t bs = x->dims[0], h = x->dims[x->rank - 1];
    if ((x->rank != 2 && !(three && x->dims[1] == 1)) || bs < 1 || bs > RUDNN_EP_MAX_BS || h < RUDNN_EP_MIN_HIDDEN ||
        h > RUDNN_EP_MAX_HIDDEN)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s must be %s with BS in 1..%d and H in %d..%d", op, name,
                               three ? "[BS, 1, H]" : "[BS, H]", RUDNN_EP_MAX_BS, RUDNN_EP_MIN_HIDDEN,
                               RUDNN_EP_MAX_HIDDEN);
    if (p->global_bs > 0 && bs * ci->ep_size > p->global_bs)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                               "%s: x has %lld tokens, more than global_bs / ep_size (%lld / %d)", op, (long long)bs,
                               (long long)p->global_bs, ci->ep_size);
    TRY(rudnn_check_tensor(op, "expert_ids", q, ids, 2));
    TRY(rudnn_check_dtype(op, "expert_ids", ids, RUDNN_I32, "global expert ids"));
    const int64_t k = ids->rank == 2 ? ids->dims[1] : 0;
    const int64_t kinds = p->moe_expert_num + p->zero_expert_num + p->copy_expert_num + p->const_expert_num;
    if (ids->rank != 2 || ids->dims[0] != bs || k < 1 || k > RUDNN_EP_MAX_TOP_K || k > kinds)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                               "%s: expert_ids must be [BS, K] with BS = %lld (x's) and K in 1..%lld (at most %d and "
                               "the experts of all kinds)", op, (long long)bs,
                               (long long)(kinds < RUDNN_EP_MAX_TOP_K ? kinds : RUDNN_EP_MAX_TOP_K), RUDNN_EP_MAX_TOP_K);
    if (mask) {
        TRY(rudnn_check_tensor(op, "active_mask", q, mask, 1));
        TRY(rudnn_check_dtype(op, "active_mask", mask, RUDNN_BOOL, "true = takes part"));
        const int64_t d1[1] = {bs}, d2[2] = {bs, k};
        if (check_dims(op, "active_mask", mask, 1, d1, "[BS] or [BS, K]") != RUDNN_STATUS_SUCCESS)
            TRY(check_dims(op, "active_mask", mask, 2, d2, "[BS] or [BS, K]"));
    }
    return RUDNN_STATUS_SUCCESS;
}

/* A: rows per half of expand_x, and its lower bound. */
static rudnn_status_t check_rows(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p, int64_t bs,
                                 int64_t k, int64_t rows, int64_t *a)
{
    const int64_t halves = ci->tp_size > 1 ? ci->tp_size : 1, local = p->moe_expert_num / ci->ep_size;
    const int64_t per = local < k ? local : k;
    const int64_t need = (p->global_bs > 0 ? p->global_bs : bs * ci->ep_size) * per;
    if (rows % halves != 0 || rows / halves < need)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                               "%s: expand_x has %lld rows: it needs %lld x A rows with A >= %lld (%s x min(local "
                               "experts %lld, K %lld))", op, (long long)rows, (long long)halves, (long long)need,
                               p->global_bs > 0 ? "global_bs" : "BS x ep_size", (long long)local, (long long)k);
    *a = rows / halves;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

/* This rank's tensors (after who_takes_part): a failure here is agreed on with the others. */
static rudnn_status_t check_dispatch(rudnn_queue_t q, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                     const rudnn_ep_dispatch_in_t *in, const rudnn_ep_dispatch_out_t *out, int64_t *a)
{
    const char *op = OP_DISPATCH;
    TRY(check_routing_inputs(op, q, ci, p, "x", in->x, in->expert_ids, in->active_mask));
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
    TRY(check_rows(op, ci, p, bs, k, out->expand_x->dims[0], a));
    const int64_t d_assist[2] = {out->expand_x->dims[0], 3}, d_nums[1] = {local},
                  d_counts[1] = {halves * local * ci->ep_size}, d_tp[1] = {halves};
    TRY(rudnn_check_tensor(op, "out->assist_info", q, out->assist_info, 2));
    TRY(rudnn_check_dtype(op, "out->assist_info", out->assist_info, RUDNN_I32, "(rank, token, slot) per row"));
    TRY(check_dims(op, "out->assist_info", out->assist_info, 2, d_assist, "[T A, 3]"));
    TRY(rudnn_check_tensor(op, "out->expert_token_nums", q, out->expert_token_nums, 1));
    TRY(rudnn_check_dtype(op, "out->expert_token_nums", out->expert_token_nums, RUDNN_I64, "rows per local expert"));
    TRY(check_dims(op, "out->expert_token_nums", out->expert_token_nums, 1, d_nums, "[local experts]"));
    TRY(rudnn_check_tensor(op, "out->ep_recv_counts", q, out->ep_recv_counts, 1));
    TRY(rudnn_check_dtype(op, "out->ep_recv_counts", out->ep_recv_counts, RUDNN_I32, "rows per (half, expert, rank)"));
    TRY(check_dims(op, "out->ep_recv_counts", out->ep_recv_counts, 1, d_counts, "[T x local experts x ep_size]"));
    if (ci->tp_size > 1) {
        TRY(rudnn_check_tensor(op, "out->tp_recv_counts", q, out->tp_recv_counts, 1));
        TRY(rudnn_check_dtype(op, "out->tp_recv_counts", out->tp_recv_counts, RUDNN_I32, "rows per half"));
        TRY(check_dims(op, "out->tp_recv_counts", out->tp_recv_counts, 1, d_tp, "[tp_size]"));
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

/* Phase one: who takes part (the comm and the elastic info). A rank that cannot read them
 * returns at once: it cannot know whom to tell. The elastic info is a shared argument (the
 * same on every rank, as the seed requires), so every rank fails alike; a queue or comm bad on
 * one rank only is not seen by the others (they wait, as MPI would). Everything else is
 * checked in phase two and agreed on (ep_agree). */
static rudnn_status_t who_takes_part(const char *op, rudnn_queue_t q, rudnn_comm_t comm, const rudnn_tensor_t *elastic,
                                     rudnn_comm_info_t *ci, ep_layout_t *lay)
{
    TRY(rudnn_check_arg(op, "comm", comm));
    TRY(rudnn_comm_get_info(comm, ci));
    TRY(rudnn_check_queue(op, q));
    if (comm->context != q->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: comm belongs to another context than queue", op);
    int32_t *e = NULL;
    if (elastic) {
        const int64_t d[1] = {4 + 2 * (int64_t)ci->ep_size};
        TRY(rudnn_check_tensor(op, "elastic_info", q, elastic, 1));
        TRY(rudnn_check_dtype(op, "elastic_info", elastic, RUDNN_I32, "the scale-down table"));
        TRY(check_dims(op, "elastic_info", elastic, 1, d, "[4 + 2 ep_size]"));
        TRY(ep_read(op, q, elastic, (void **)&e));
    }
    const rudnn_status_t st = ep_layout_init(op, lay, ci, e);
    free(e);
    return st;
}

/* Phase two's shared part: the params, and the experts of the call. */
static rudnn_status_t params_layout(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                    ep_layout_t *lay)
{
    TRY(rudnn_check_arg(op, "params", p));
    TRY(check_params(op, ci, p));
    return ep_layout_params(op, lay, p);
}

/* Rows this rank sends: per (active destination i, local expert e) counts, and for each
 * routed slot its place in the send order (i, e, token, slot) (-1: not sent). */
typedef struct send_plan {
    int32_t *counts; /* [nact L] */
    int64_t *offset; /* [nact L + 1] exclusive prefix of counts */
    int64_t *pos;    /* [BS K] */
} send_plan_t;

static void send_plan_free(send_plan_t *sp)
{
    free(sp->counts);
    free(sp->offset);
    free(sp->pos);
}

static rudnn_status_t send_plan_make(const char *op, const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask,
                                     int mask_rank, send_plan_t *sp)
{
    const int64_t nl = (int64_t)lay->nact * lay->local;
    sp->counts = rudnn_host_calloc((size_t)nl, sizeof *sp->counts);
    sp->offset = rudnn_host_calloc((size_t)nl + 1, sizeof *sp->offset);
    sp->pos = rudnn_host_calloc((size_t)(lay->bs * lay->k), sizeof *sp->pos);
    if (!sp->counts || !sp->offset || !sp->pos) {
        send_plan_free(sp);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send plan)", op);
    }
    int64_t *le = rudnn_host_calloc((size_t)(lay->bs * lay->k), sizeof *le);
    if (!le) {
        send_plan_free(sp);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send plan)", op);
    }
    for (int64_t s = 0; s < lay->bs * lay->k; s++) {
        const int d = ep_slot_dest(lay, ids, mask, mask_rank, s / lay->k, s % lay->k, &le[s]);
        sp->pos[s] = d >= 0 ? (int64_t)lay->local_of[d] * lay->local + le[s] : -1; /* the (i, e) slot first */
        if (d >= 0)
            sp->counts[sp->pos[s]]++;
    }
    for (int64_t c = 0; c < nl; c++)
        sp->offset[c + 1] = sp->offset[c] + sp->counts[c];
    free(le);
    int64_t *next = rudnn_host_calloc((size_t)nl + 1, sizeof *next); /* next free place of each (i, e) */
    if (!next) {
        send_plan_free(sp);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send plan)", op);
    }
    for (int64_t c = 0; c < nl; c++)
        next[c] = sp->offset[c];
    for (int64_t s = 0; s < lay->bs * lay->k; s++) /* token-major: (token, slot) order kept */
        if (sp->pos[s] >= 0)
            sp->pos[s] = next[sp->pos[s]]++;
    free(next);
    return RUDNN_STATUS_SUCCESS;
}

/* Element size and row bytes of x. */
static size_t row_bytes(const ep_layout_t *lay, rudnn_dtype_t dt)
{
    return (size_t)lay->h * rudnn_dtype_size(dt);
}

/* The seed's buffer rule: (buffer - 2 MiB) / 2 >= maxBS e (H + 128) (W L + K + 1). */
static rudnn_status_t check_buffer(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                   const ep_layout_t *lay, rudnn_dtype_t dt)
{
    const int64_t max_bs = p->global_bs > 0 ? p->global_bs / ci->ep_size : lay->bs;
    const double need = (double)max_bs * (double)rudnn_dtype_size(dt) * (double)(lay->h + 128) *
                        (double)((int64_t)ci->ep_size * lay->local + lay->k + 1);
    const double have = ci->buffer_bytes > (2u << 20) ? ((double)ci->buffer_bytes - (double)(2u << 20)) / 2 : 0;
    if (have < need)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: the comm's buffer of %zu bytes is too small: it needs 2 MiB + 2 x %.0f bytes "
                               "(maxBS %lld x %zu x (H %lld + 128) x (ep_size x local experts + K + 1))", op,
                               ci->buffer_bytes, need, (long long)max_bs, rudnn_dtype_size(dt), (long long)lay->h);
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
    const size_t row = row_bytes(lay, x->dtype), rows = (size_t)sent * row;
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
    TRY(who_takes_part(op, queue, comm, in ? in->elastic_info : NULL, &ci, &lay));
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
        st = params_layout(op, &ci, params, &lay);
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_dispatch(queue, &ci, params, in, out, &a);
    if (st == RUDNN_STATUS_SUCCESS) {
        lay.bs = in->x->dims[0], lay.h = in->x->dims[1], lay.k = in->expert_ids->dims[1], lay.a = a;
        st = check_buffer(op, &ci, params, &lay, in->x->dtype);
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
        st = send_plan_make(op, &lay, ids, mask, mask_rank, &sp);
    packed_t pk = {0};
    if (st == RUDNN_STATUS_SUCCESS && device)
        st = pack_device(op, queue, &lay, &sp, in->x, &pk);
    st = ep_agree(op, comm, &lay, st); /* nothing moves unless every rank can go on */
    const size_t row = st == RUDNN_STATUS_SUCCESS ? row_bytes(&lay, in->x->dtype) : 0;
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
    send_plan_free(&sp);
    free(x), free(ids), free(mask);
    ep_layout_free(&lay);
    return st;
}

/* ---- combine + AddRmsNorm ----------------------------------------------------------------- */

/* [n] of dtype like (or [n, 1, ..]): a helper for the optional inputs of the combine. */
static rudnn_status_t check_opt(const char *op, rudnn_queue_t q, const char *arg, const rudnn_tensor_t *t,
                                const rudnn_tensor_t *like, int rank, const int64_t *dims, const char *what)
{
    TRY(rudnn_check_tensor(op, arg, q, t, 1));
    if (t->dtype != like->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s is %s, not %s (expand_x's dtype)", op, arg,
                               rudnn_dtype_name(t->dtype), rudnn_dtype_name(like->dtype));
    return check_dims(op, arg, t, rank, dims, what);
}

static rudnn_status_t check_combine(rudnn_queue_t q, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                    const rudnn_ep_combine_in_t *in, const rudnn_ep_combine_out_t *out, int64_t *a)
{
    const char *op = OP_COMBINE;
    TRY(check_routing_inputs(op, q, ci, p, "residual", in->residual, in->expert_ids, in->active_mask));
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
    TRY(check_rows(op, ci, p, bs, k, in->expand_x->dims[0], a));
    const int64_t d_assist[2] = {in->expand_x->dims[0], 3}, d_counts[1] = {halves * local * ci->ep_size},
                  d_tp[1] = {halves}, d_bk[2] = {bs, k}, d_h[1] = {h}, d_bh[2] = {bs, h}, d_b1h[3] = {bs, 1, h},
                  d_b11[3] = {bs, 1, 1};
    TRY(rudnn_check_tensor(op, "assist_info", q, in->assist_info, 2));
    TRY(rudnn_check_dtype(op, "assist_info", in->assist_info, RUDNN_I32, "the dispatch's assist_info"));
    TRY(check_dims(op, "assist_info", in->assist_info, 2, d_assist, "[T A, 3]"));
    TRY(rudnn_check_tensor(op, "ep_send_counts", q, in->ep_send_counts, 1));
    TRY(rudnn_check_dtype(op, "ep_send_counts", in->ep_send_counts, RUDNN_I32, "the dispatch's ep_recv_counts"));
    TRY(check_dims(op, "ep_send_counts", in->ep_send_counts, 1, d_counts, "[T x local experts x ep_size]"));
    if (ci->tp_size > 1) {
        TRY(rudnn_check_tensor(op, "tp_send_counts", q, in->tp_send_counts, 1));
        TRY(rudnn_check_dtype(op, "tp_send_counts", in->tp_send_counts, RUDNN_I32, "the dispatch's tp_recv_counts"));
        TRY(check_dims(op, "tp_send_counts", in->tp_send_counts, 1, d_tp, "[tp_size]"));
    } else if (in->tp_send_counts) {
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: tp_send_counts must be NULL without a TP group", op);
    }
    TRY(rudnn_check_tensor(op, "expert_scales", q, in->expert_scales, 2));
    TRY(rudnn_check_dtype(op, "expert_scales", in->expert_scales, RUDNN_F32, "the routing weights"));
    TRY(check_dims(op, "expert_scales", in->expert_scales, 2, d_bk, "[BS, K]"));
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
    TRY(check_dims(op, "out->rstd", out->rstd, 3, d_b11, "[BS, 1, 1]"));
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
    TRY(check_params(op, &ci, params));
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
    TRY(who_takes_part(op, queue, comm, in ? in->elastic_info : NULL, &ci, &lay));
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
        st = params_layout(op, &ci, params, &lay);
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_combine(queue, &ci, params, in, out, &a);
    const rudnn_dtype_t dt = st == RUDNN_STATUS_SUCCESS ? in->residual->dtype : RUDNN_F32;
    if (st == RUDNN_STATUS_SUCCESS) {
        lay.bs = in->residual->dims[0], lay.h = in->residual->dims[2], lay.k = in->expert_ids->dims[1], lay.a = a;
        st = check_buffer(op, &ci, params, &lay, dt);
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
        st = send_plan_make(op, &lay, ids, mask, mask_rank, &sp);
    if (st == RUDNN_STATUS_SUCCESS && !device) {
        const int64_t sent = sp.offset[(int64_t)lay.nact * lay.local];
        back = rudnn_host_malloc(sent ? (size_t)sent * row_bytes(&lay, dt) : 1);
        if (!back)
            st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (%lld returning rows)", op,
                                 (long long)sent);
    }
    st = ep_agree(op, comm, &lay, st);
    const size_t row = st == RUDNN_STATUS_SUCCESS ? row_bytes(&lay, dt) : 0;
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
    send_plan_free(&sp);
    free(ids), free(mask), free(back);
    ep_layout_free(&lay);
    return st;
}
