/* The CUDA/HIP norm kernel kinds a device can get: the policy of backends/cuda/norm_policy.h
 * asked about every op, dtype and row length up to twice the longest row a register kernel
 * takes, aligned and not. Shared by tests/test_norm_policy.c and tests/test_norm.c. */
#ifndef RUDNN_TESTS_NORM_KINDS_H
#define RUDNN_TESTS_NORM_KINDS_H

#include "../backends/cuda/norm_policy.h"

/* bit k: rdg_norm_kind k */
static unsigned norm_kinds_reachable(const rdg_norm_caps *caps)
{
    static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    const int64_t longest = 2 * (int64_t)RDG_NORM_MAX_CLUSTER * RDG_NORM_CTA_ELEMS_32_PER_THREAD;
    unsigned kinds = 0;
    for (int op = RDG_NORM_LAYER_NORM; op <= RDG_NORM_ADD_RMS_NORM; op++)
        for (int d = 0; d < 3; d++)
            for (int64_t cols = 1; cols <= longest; cols++)
                for (int aligned = 0; aligned < 2; aligned++)
                    kinds |= 1u << rdg_norm_choose(caps, (rdg_norm_op)op, dtypes[d], cols, aligned).kind;
    return kinds;
}

#endif
