/* Expert parallelism (rudnn/ep.h), what the dispatch (ep_dispatch.c) and the combine (ep_combine.c)
 * share (ops/ep_common.h): the argument checks, who takes part, the send plan, the buffer rule.
 * Both run the host-staged path: the rows are read to the host and exchanged point to point among
 * the ranks that take part (so that ranks a scale-down excludes are neither sent to nor waited
 * for). The dispatch packs on the host after one read of x (fewer bytes over the bus than packing
 * K copies on the device); the combine's weighted sum, residual add and RMSNorm run on the device
 * over the rows that came back (ep_device.c). */
#include "ep_common.h"

#include <stdlib.h>

#include "core/comm.h"
#include "ep_host.h"
#include "validate.h"

rudnn_status_t ep_check_dims(const char *op, const char *arg, const rudnn_tensor_t *t, int rank,
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
rudnn_status_t ep_check_params(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p)
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
rudnn_status_t ep_check_routing_inputs(const char *op, rudnn_queue_t q, const rudnn_comm_info_t *ci,
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
        if (ep_check_dims(op, "active_mask", mask, 1, d1, "[BS] or [BS, K]") != RUDNN_STATUS_SUCCESS)
            TRY(ep_check_dims(op, "active_mask", mask, 2, d2, "[BS] or [BS, K]"));
    }
    return RUDNN_STATUS_SUCCESS;
}

/* A: rows per half of expand_x, and its lower bound. */
rudnn_status_t ep_check_rows(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p, int64_t bs,
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

/* Phase one: who takes part (the comm and the elastic info). A rank that cannot read them
 * returns at once: it cannot know whom to tell. The elastic info is a shared argument (the
 * same on every rank, as the seed requires), so every rank fails alike; a queue or comm bad on
 * one rank only is not seen by the others (they wait, as MPI would). Everything else is
 * checked in phase two and agreed on (ep_agree). */
rudnn_status_t ep_who_takes_part(const char *op, rudnn_queue_t q, rudnn_comm_t comm, const rudnn_tensor_t *elastic,
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
        TRY(ep_check_dims(op, "elastic_info", elastic, 1, d, "[4 + 2 ep_size]"));
        TRY(ep_read(op, q, elastic, (void **)&e));
    }
    const rudnn_status_t st = ep_layout_init(op, lay, ci, e);
    free(e);
    return st;
}

/* Phase two's shared part: the params, and the experts of the call. */
rudnn_status_t ep_params_layout(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                ep_layout_t *lay)
{
    TRY(rudnn_check_arg(op, "params", p));
    TRY(ep_check_params(op, ci, p));
    return ep_layout_params(op, lay, p);
}

void ep_send_plan_free(send_plan_t *sp)
{
    free(sp->counts);
    free(sp->offset);
    free(sp->pos);
}

rudnn_status_t ep_send_plan_make(const char *op, const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask,
                                 int mask_rank, send_plan_t *sp)
{
    const int64_t nl = (int64_t)lay->nact * lay->local;
    sp->counts = rudnn_host_calloc((size_t)nl, sizeof *sp->counts);
    sp->offset = rudnn_host_calloc((size_t)nl + 1, sizeof *sp->offset);
    sp->pos = rudnn_host_calloc((size_t)(lay->bs * lay->k), sizeof *sp->pos);
    if (!sp->counts || !sp->offset || !sp->pos) {
        ep_send_plan_free(sp);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (send plan)", op);
    }
    int64_t *le = rudnn_host_calloc((size_t)(lay->bs * lay->k), sizeof *le);
    if (!le) {
        ep_send_plan_free(sp);
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
        ep_send_plan_free(sp);
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
size_t ep_row_bytes(const ep_layout_t *lay, rudnn_dtype_t dt)
{
    return (size_t)lay->h * rudnn_dtype_size(dt);
}

/* The seed's buffer rule: (buffer - 2 MiB) / 2 >= maxBS e (H + 128) (W L + K + 1). */
rudnn_status_t ep_check_buffer(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
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
