/* Host helpers that the launchers of the MoE routing (moe_route.cu) and permutation
 * (moe_permute.cu) kernels share. Include after rdg_internal.h. */
#ifndef RUDNN_MOE_HOST_H
#define RUDNN_MOE_HOST_H

namespace {

/* Makes q's device the calling thread's before a launch. */
inline rudnn_status_t begin(rdg_queue_t *q)
{
    return rdg_use_device(q->dev.index);
}

/* q's warp width (32 for a device that reported none) */
inline int warp_size(const rdg_queue_t *q)
{
    return q->dev.warp_size > 0 ? q->dev.warp_size : 32;
}

} // namespace

#endif
