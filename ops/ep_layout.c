/* Expert parallelism: the layout of one call (ops/ep_layout.h). */
#include "ep_layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* Scale-down (elastic info [4 + 2 W]: flag, ranks after, shared-expert ranks after, routed
 * experts after, then rank -> local index (-1: excluded) and local index -> rank). */
static rudnn_status_t read_elastic(const char *op, ep_layout_t *lay, const int32_t *e)
{
    const int w = lay->ep_size;
    if (e[0] != 0 && e[0] != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: elastic_info[0] (scale-down flag) is %d, not 0 or 1", op,
                               e[0]);
    if (e[0] == 0)
        return RUDNN_STATUS_SUCCESS;
    if (lay->tp_size > 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: elastic_info: scale-down is not supported with a TP group",
                               op);
    const int after = e[1];
    if (after < 1 || after > w)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: elastic_info[1] (ranks after) is %d, not in 1..%d", op,
                               after, w);
    if (e[2] != 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: elastic_info[2] (shared-expert ranks after) is %d: shared-expert ranks are not "
                               "supported (0)", op, e[2]);
    const int32_t *to_local = e + 4, *to_rank = e + 4 + w;
    int seen = 0;
    for (int r = 0; r < w; r++) {
        const int li = to_local[r];
        if (li == -1)
            continue;
        if (li < 0 || li >= after || to_rank[li] != r)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                   "%s: elastic_info: rank %d maps to local index %d, which is not -1 or an index "
                                   "below %d whose entry in the second table is %d", op, r, li, after, r);
        seen++;
    }
    if (seen != after)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: elastic_info: %d ranks take part, not %d", op, seen, after);
    lay->nact = after;
    lay->experts_after = e[3];
    for (int i = 0; i < after; i++)
        lay->act[i] = to_rank[i];
    for (int r = 0; r < w; r++)
        lay->local_of[r] = to_local[r];
    lay->active = to_local[lay->ep_rank] >= 0;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t ep_layout_init(const char *op, ep_layout_t *lay, const rudnn_comm_info_t *ci, const int32_t *elastic)
{
    memset(lay, 0, sizeof *lay);
    lay->ep_size = ci->ep_size;
    lay->ep_rank = ci->ep_rank;
    lay->tp_size = ci->tp_size;
    lay->tp_rank = ci->tp_rank;
    lay->halves = ci->tp_size > 1 ? ci->tp_size : 1;
    lay->experts_after = -1;
    lay->act = rudnn_host_calloc((size_t)ci->ep_size, sizeof *lay->act);
    lay->local_of = rudnn_host_calloc((size_t)ci->ep_size, sizeof *lay->local_of);
    if (!lay->act || !lay->local_of) {
        ep_layout_free(lay);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (layout of %d ranks)", op,
                               ci->ep_size);
    }
    lay->active = 1;
    lay->nact = ci->ep_size;
    for (int r = 0; r < ci->ep_size; r++)
        lay->act[r] = r, lay->local_of[r] = r;
    if (elastic) {
        const rudnn_status_t st = read_elastic(op, lay, elastic);
        if (st != RUDNN_STATUS_SUCCESS) {
            ep_layout_free(lay);
            return st;
        }
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t ep_layout_params(const char *op, ep_layout_t *lay, const rudnn_ep_params_t *p)
{
    lay->local = p->moe_expert_num / lay->ep_size;
    lay->special0 = p->moe_expert_num;
    lay->experts = p->moe_expert_num;
    lay->zero = p->zero_expert_num;
    lay->copy = p->copy_expert_num;
    lay->konst = p->const_expert_num;
    if (lay->experts_after >= 0) { /* the local experts per rank stay L */
        if (lay->experts_after != (int64_t)lay->nact * lay->local)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                   "%s: elastic_info[3] (routed experts after) is %lld, not ranks after (%d) x "
                                   "local experts per rank (%lld)", op, (long long)lay->experts_after, lay->nact,
                                   (long long)lay->local);
        lay->experts = lay->experts_after;
    }
    return RUDNN_STATUS_SUCCESS;
}

void ep_layout_free(ep_layout_t *lay)
{
    free(lay->act);
    free(lay->local_of);
    lay->act = lay->local_of = NULL;
}

static int slot_on(const uint8_t *mask, int mask_rank, int64_t k, int64_t t, int64_t j)
{
    if (!mask)
        return 1;
    return mask_rank == 1 ? mask[t] != 0 : mask[t * k + j] != 0;
}

int ep_slot_dest(const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask, int mask_rank, int64_t t,
                 int64_t j, int64_t *le)
{
    if (!slot_on(mask, mask_rank, lay->k, t, j))
        return EP_SLOT_OFF;
    const int64_t id = ids[t * lay->k + j];
    if (id < lay->experts) {
        *le = id % lay->local;
        return lay->act[id / lay->local];
    }
    if (id < lay->special0 + lay->zero)
        return EP_SLOT_ZERO;
    if (id < lay->special0 + lay->zero + lay->copy)
        return EP_SLOT_COPY;
    return EP_SLOT_CONST;
}

rudnn_status_t ep_check_routes(const char *op, const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask,
                               int mask_rank)
{
    const int64_t kinds = lay->special0 + lay->zero + lay->copy + lay->konst;
    for (int64_t t = 0; t < lay->bs; t++) {
        if (mask && mask_rank == 1 && t > 0 && mask[t] && !mask[t - 1])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                   "%s: active_mask [BS]: token %lld is active after inactive token %lld (the "
                                   "trues must come first)", op, (long long)t, (long long)(t - 1));
        for (int64_t j = 0; j < lay->k; j++) {
            if (!slot_on(mask, mask_rank, lay->k, t, j))
                continue;
            const int64_t id = ids[t * lay->k + j];
            if (id >= lay->experts && id < lay->special0)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                       "%s: expert_ids[%lld, %lld] is %lld: a routed expert the scale-down removed "
                                       "(%lld remain; special experts start at %lld)", op, (long long)t, (long long)j,
                                       (long long)id, (long long)lay->experts, (long long)lay->special0);
            if (id < 0 || id >= kinds)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                       "%s: expert_ids[%lld, %lld] is %lld, outside 0..%lld (routed experts %lld, "
                                       "zero %lld, copy %lld, const %lld)", op, (long long)t, (long long)j,
                                       (long long)id, (long long)(kinds - 1), (long long)lay->special0,
                                       (long long)lay->zero, (long long)lay->copy, (long long)lay->konst);
        }
    }
    return RUDNN_STATUS_SUCCESS;
}
