/* The launchers of the CUDA/HIP normalization kernels (layer_norm, rms_norm, softmax,
 * add_rms_norm) and their rudnn_norm_kernels_t table.
 *
 * Numerics follow backends/README.md. The pieces:
 *   norm_policy.h    which kernel kind and launch shape a row gets (plain C, tested on the CPU)
 *   norm_tuning.h    the measured values the policy and the kernels share
 *   norm_access.cuh  arguments, storage types, gamma/beta staging, prefetch copies
 *   norm_math.cuh    exp, the unscaled bounds, the scaled statistics
 *   norm_reg.cuh     the register kernel (a row in the registers of a warp, a CTA or a cluster)
 *   norm_pair.cuh    two 16-bit rows per thread
 *   norm_bulk.cuh    16-bit rows streamed by bulk copies (sm_90)
 *   norm_loop.cuh    any length and alignment
 * Reductions are deterministic (reduce.cuh). Each launch names its kind for rudnn_last_kernel().
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"
#include "norm_bulk.cuh"
#include "norm_loop.cuh"
#include "norm_pair.cuh"
#include "norm_policy.h"
#include "norm_reg.cuh"

namespace {

static_assert(RDG_NORM_MAX_CLUSTER <= RDG_RED_MAX_CLUSTER, "reduce.cuh holds the partials of RDG_RED_MAX_CLUSTER CTAs");

/* ---- the kernel of a launch (rdg_norm_launch): nullptr where none is built ---- */

typedef void (*kernel_fn)(NormArgs);

template <class S>
constexpr bool is_16bit()
{
    return sizeof(typename S::elem_t) == 2;
}

template <class S, int OP>
kernel_fn warp_kernel(int f, int stage)
{
    if (stage != RDG_NORM_STAGE_GAMMA_BETA)
        return nullptr;
    return f == 8 ? norm_reg_kernel<S, OP, 8, RED_WARP> : f == 32 ? norm_reg_kernel<S, OP, 32, RED_WARP> : nullptr;
}

/* F = 16 (F32 data) or 32 (16-bit data, and F32 rows on devices without clusters); 16-bit
 * layer_norm has its own register-capped kernel */
template <class S, int OP>
kernel_fn cta_kernel(int f, int stage)
{
    if constexpr (OP == OP_LN && is_16bit<S>()) {
        if (f != 32)
            return nullptr;
        return stage == RDG_NORM_STAGE_GAMMA ? norm_reg_kernel_ln16<S, RDG_NORM_STAGE_GAMMA>
                                             : norm_reg_kernel_ln16<S, RDG_NORM_STAGE_GAMMA_BETA>;
    } else {
        if (stage != RDG_NORM_STAGE_GAMMA_BETA)
            return nullptr;
        if (f == 32)
            return norm_reg_kernel<S, OP, 32, RED_BLOCK>;
        if constexpr (!is_16bit<S>())
            if (f == 16)
                return norm_reg_kernel<S, OP, 16, RED_BLOCK>;
        return nullptr;
    }
}

/* F = 16 (F32 data) or 32; 16-bit layer_norm stages gamma only; packed ops have none at F = 32 */
template <class S, int OP>
kernel_fn cluster_kernel(int f, int stage)
{
#if RDG_HOST_CLUSTERS
    if constexpr (OP == OP_LN && is_16bit<S>())
        if (f == 32 && stage == RDG_NORM_STAGE_GAMMA)
            return norm_reg_kernel<S, OP_LN, 32, RED_CLUSTER, RDG_NORM_STAGE_GAMMA>;
    if (stage != RDG_NORM_STAGE_GAMMA_BETA)
        return nullptr;
    if constexpr (!(kPacked16 && is_16bit<S>() && OP == OP_RMS))
        if (f == 32)
            return norm_reg_kernel<S, OP, 32, RED_CLUSTER>;
    if constexpr (!is_16bit<S>())
        if (f == 16)
            return norm_reg_kernel<S, OP, 16, RED_CLUSTER>;
#endif
    (void)f, (void)stage;
    return nullptr;
}

template <class S, int OP, int SCOPE>
kernel_fn packed_kernel(int f)
{
    if constexpr (kPacked16 && is_16bit<S>() && OP == OP_RMS)
        if (f == 64)
            return norm_reg_kernel<S, OP, 64, SCOPE>;
    (void)f;
    return nullptr;
}

template <class S, int OP, int SCOPE>
kernel_fn pair_kernel_for()
{
    if constexpr (kStageAffine && kPrefetch && is_16bit<S>() && (OP == OP_LN || OP == OP_SOFTMAX))
        return pair_kernel<S, OP, SCOPE>;
    else
        return nullptr;
}

/* sm_90 device code: the policy takes it only where the device has clusters */
template <class S, int OP, int SCOPE>
kernel_fn bulk_kernel_for()
{
#if RDG_HOST_CLUSTERS && !RDG_HIP
    if constexpr (is_16bit<S>() && (OP == OP_LN || OP == OP_RMS))
        return bulk_kernel<S, OP, SCOPE>;
#endif
    return nullptr;
}

template <class S, int OP>
kernel_fn kernel_of(const rdg_norm_launch &c)
{
    switch (c.kind) {
    case RDG_NORM_LOOP:
        return norm_loop_kernel<S, OP>;
    case RDG_NORM_WARP:
        return warp_kernel<S, OP>(c.f, c.stage);
    case RDG_NORM_CTA:
        return cta_kernel<S, OP>(c.f, c.stage);
    case RDG_NORM_CLUSTER:
        return cluster_kernel<S, OP>(c.f, c.stage);
    case RDG_NORM_PACKED:
        return c.stage == RDG_NORM_STAGE_GAMMA_BETA ? packed_kernel<S, OP, RED_BLOCK>(c.f) : nullptr;
    case RDG_NORM_PAIR:
        return pair_kernel_for<S, OP, RED_BLOCK>();
    case RDG_NORM_BULK:
        return bulk_kernel_for<S, OP, RED_GROUP>();
#if RDG_HOST_CLUSTERS
    case RDG_NORM_PACKED_CLUSTER:
        return c.stage == RDG_NORM_STAGE_GAMMA_BETA ? packed_kernel<S, OP, RED_CLUSTER>(c.f) : nullptr;
    case RDG_NORM_PAIR_CLUSTER:
        return pair_kernel_for<S, OP, RED_CLUSTER>();
    case RDG_NORM_BULK_CLUSTER:
        return bulk_kernel_for<S, OP, RED_GROUP_CLUSTER>();
#endif
    default:
        return nullptr;
    }
}

template <int OP>
kernel_fn kernel_of_op(rudnn_dtype_t dt, const rdg_norm_launch &c)
{
    switch (dt) {
    case RUDNN_F32:
        return kernel_of<StoreF32, OP>(c);
    case RUDNN_F16:
        return kernel_of<StoreF16, OP>(c);
    default:
        return kernel_of<StoreBF16, OP>(c);
    }
}

kernel_fn kernel_for(int op, rudnn_dtype_t dt, const rdg_norm_launch &c)
{
    switch (op) {
    case OP_LN:
        return kernel_of_op<OP_LN>(dt, c);
    case OP_RMS:
        return kernel_of_op<OP_RMS>(dt, c);
    case OP_SOFTMAX:
        return kernel_of_op<OP_SOFTMAX>(dt, c);
    default:
        return kernel_of_op<OP_ADD_RMS>(dt, c);
    }
}

/* what the policy reads of a device: its cache from when it was opened (plugin.cu) */
rdg_norm_caps caps_of(const rdg_devinfo_t *d)
{
    rdg_norm_caps c;
    memset(&c, 0, sizeof c);
    c.backend = RDG_HIP ? RDG_NORM_BACKEND_HIP : RDG_NORM_BACKEND_CUDA;
    c.warp_size = d->warp_size;
    c.max_threads = d->max_threads;
    c.smem_optin = d->smem_optin;
    c.clusters = d->clusters;
    return c;
}

/* Occupancy cache: resident CTAs (or clusters) per device for a (kernel, block, smem, cluster)
 * configuration. The first lookup of a configuration with dynamic shared
 * memory also raises the kernel's limit on that device. */
struct OccEntry {
    int device;
    kernel_fn fn;
    int threads;
    size_t smem;
    int csize;
    int resident; /* CTAs per SM (csize 1) or clusters per device (csize > 1) */
};

#define RDG_OCC_CACHE 256
OccEntry occ_cache[RDG_OCC_CACHE];
int occ_count;
pthread_mutex_t occ_lock = PTHREAD_MUTEX_INITIALIZER;

rudnn_status_t occupancy(const rdg_devinfo_t *d, kernel_fn fn, int threads, size_t smem, int csize,
                         int *resident)
{
    pthread_mutex_lock(&occ_lock);
    for (int i = 0; i < occ_count; i++) {
        const OccEntry &e = occ_cache[i];
        if (e.device == d->index && e.fn == fn && e.threads == threads && e.smem == smem && e.csize == csize) {
            *resident = e.resident;
            pthread_mutex_unlock(&occ_lock);
            return RUDNN_STATUS_SUCCESS;
        }
    }
    pthread_mutex_unlock(&occ_lock);

    cudaError_t err;
    if (smem > 0) {
        /* dynamic plus static shared memory above 48 KiB needs the opt-in (exactly 48 KiB of
         * dynamic memory already does); always the device's whole allowance, so that no
         * configuration lowers it for another */
        cudaFuncAttributes fa;
        err = cudaFuncGetAttributes(&fa, (const void *)fn);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncGetAttributes");
        const int allow = (int)(d->smem_optin - fa.sharedSizeBytes);
        err = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, allow);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
    int n = 0;
    if (csize > 1) {
#if RDG_HOST_CLUSTERS
        cudaLaunchConfig_t cfg = cudaLaunchConfig_t();
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)csize;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)(csize * d->sm_count), 1, 1);
        cfg.blockDim = dim3((unsigned)threads, 1, 1);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        err = cudaOccupancyMaxActiveClusters(&n, (const void *)fn, &cfg);
        if (err != cudaSuccess) {
            /* a capability question: a configuration the device cannot schedule (n = 0) makes
             * the caller use the looped kernel */
            (void)cudaGetLastError();
            n = 0;
        }
#else
        n = 0;
#endif
    } else {
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void *)fn, threads, smem);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "OccupancyMaxActiveBlocksPerMultiprocessor");
    }

    pthread_mutex_lock(&occ_lock);
    if (occ_count < RDG_OCC_CACHE) {
        OccEntry &e = occ_cache[occ_count++];
        e.device = d->index;
        e.fn = fn;
        e.threads = threads;
        e.smem = smem;
        e.csize = csize;
        e.resident = n;
    }
    pthread_mutex_unlock(&occ_lock);
    *resident = n;
    return RUDNN_STATUS_SUCCESS;
}

const char *op_name(int op)
{
    switch (op) {
    case OP_LN:
        return "layer_norm";
    case OP_RMS:
        return "rms_norm";
    case OP_SOFTMAX:
        return "softmax";
    default:
        return "add_rms_norm";
    }
}

int aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}


rudnn_status_t launch(void *queue, int op, const rudnn_norm_plan_t *plan, NormArgs a)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const rdg_devinfo_t *d = &q->dev;
    if (plan->rows <= 0 || plan->cols <= 0)
        return RUDNN_STATUS_SUCCESS;

    const rudnn_status_t selected = rdg_use_device(d->index);
    if (selected != RUDNN_STATUS_SUCCESS)
        return selected;
    cudaError_t err;

    a.rows = plan->rows;
    a.cols = plan->cols;
    a.eps = plan->eps;
    a.csize = 1;

    const int aligned = aligned16(a.x) && aligned16(a.y) && (!a.r || aligned16(a.r)) &&
                        (!a.xout || aligned16(a.xout)) && (!a.gamma || aligned16(a.gamma)) &&
                        (!a.beta || aligned16(a.beta));
    const rdg_norm_caps caps = caps_of(d);
    rdg_norm_launch c = rdg_norm_choose(&caps, (rdg_norm_op)op, plan->dtype, plan->cols, aligned);

    kernel_fn fn = kernel_for(op, plan->dtype, c);
    if (!fn)
        return rdg_error(RUDNN_STATUS_INTERNAL, "%s: %s: no %s kernel of F = %d", RUDNN_GPU_BACKEND_NAME,
                         op_name(op), rdg_norm_kind_name(c.kind), c.f);
    int resident = 0;
    rudnn_status_t st = occupancy(d, fn, c.threads, c.smem, c.csize, &resident);
    if (st != RUDNN_STATUS_SUCCESS)
        return st;
    if (resident <= 0 && c.kind != RDG_NORM_LOOP) {
        /* cannot be resident (cluster, shared memory): the looped kernel */
        c = rdg_norm_loop_launch(&caps, plan->cols);
        fn = kernel_for(op, plan->dtype, c);
        st = occupancy(d, fn, c.threads, c.smem, c.csize, &resident);
        if (st != RUDNN_STATUS_SUCCESS)
            return st;
    }
    if (resident <= 0)
        return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s: no CTA of %d threads fits on the device",
                         RUDNN_GPU_BACKEND_NAME, op_name(op), c.threads);

    /* persistent grid: as many CTAs as can be resident, at most one per row (slice) */
    int64_t grid;
    if (c.csize > 1)
        grid = (int64_t)resident * c.csize; /* resident clusters on the whole device */
    else
        grid = (int64_t)resident * d->sm_count;
    const int64_t need = rdg_ceil_div(plan->rows, c.rows_per_cta) * c.csize;
    /* the hardware scheduler hands out the row groups instead (the policy's grid_per_group) */
    if (c.grid_per_group)
        grid = need;
    if (grid > need)
        grid = need;
    if (grid > INT_MAX - 8)
        grid = ((int64_t)(INT_MAX - 8) / c.csize) * c.csize;
    if (grid < c.csize)
        grid = c.csize;

    a.csize = c.csize;
    a.slice_vec = c.slice_vec;
    a.prefetch = c.prefetch;
    a.stages = c.stages;
    a.group_threads = c.group_threads;

    /* any error left from an earlier failed call was reported then: start clean, so that the
     * check after the launch sees only this launch */
    (void)cudaGetLastError();
    rdg_note_kernel(rdg_norm_kind_name(c.kind));
    if (c.csize > 1) {
#if RDG_HOST_CLUSTERS
        cudaLaunchConfig_t cfg = cudaLaunchConfig_t();
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)c.csize;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)grid, 1, 1);
        cfg.blockDim = dim3((unsigned)c.threads, 1, 1);
        cfg.dynamicSmemBytes = c.smem;
        cfg.stream = q->stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        err = cudaLaunchKernelEx(&cfg, fn, a);
        if (err == cudaSuccess)
            err = cudaGetLastError();
#else
        return rdg_error(RUDNN_STATUS_INTERNAL, "%s: cluster launch without cluster support", RUDNN_GPU_BACKEND_NAME);
#endif
    } else {
        fn<<<dim3((unsigned)grid), dim3((unsigned)c.threads), c.smem, q->stream>>>(a);
        err = cudaGetLastError();
    }
    if (err != cudaSuccess) {
        char what[160];
        snprintf(what, sizeof what, " kernel launch (%s %s, grid %lld, block %d, cluster %d, smem %zu)",
                 op_name(op), rdg_norm_kind_name(c.kind), (long long)grid, c.threads, c.csize, c.smem);
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, what);
    }
    return RUDNN_STATUS_SUCCESS;
}

NormArgs empty_args()
{
    NormArgs a;
    memset(&a, 0, sizeof a);
    return a;
}

rudnn_status_t k_layer_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x, rudnn_mem_ref_t gamma,
                            rudnn_mem_ref_t beta, rudnn_mem_ref_t y)
{
    NormArgs a = empty_args();
    a.x = rdg_at(x);
    a.gamma = (const float *)rdg_at(gamma);
    a.beta = (const float *)rdg_at(beta);
    a.y = (void *)rdg_at(y);
    return launch(queue, OP_LN, plan, a);
}

rudnn_status_t k_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x, rudnn_mem_ref_t gamma,
                          rudnn_mem_ref_t y)
{
    NormArgs a = empty_args();
    a.x = rdg_at(x);
    a.gamma = (const float *)rdg_at(gamma);
    a.y = (void *)rdg_at(y);
    return launch(queue, OP_RMS, plan, a);
}

rudnn_status_t k_softmax(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x, rudnn_mem_ref_t y)
{
    NormArgs a = empty_args();
    a.x = rdg_at(x);
    a.y = (void *)rdg_at(y);
    return launch(queue, OP_SOFTMAX, plan, a);
}

rudnn_status_t k_add_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t a_in,
                              rudnn_mem_ref_t r, rudnn_mem_ref_t gamma, rudnn_mem_ref_t y, rudnn_mem_ref_t rstd,
                              rudnn_mem_ref_t x_out)
{
    NormArgs a = empty_args();
    a.x = rdg_at(a_in);
    a.r = rdg_at(r);
    a.gamma = (const float *)rdg_at(gamma);
    a.y = (void *)rdg_at(y);
    a.rstd = (float *)rdg_at(rstd);
    a.xout = (void *)rdg_at(x_out);
    return launch(queue, OP_ADD_RMS, plan, a);
}

} // namespace

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
const rudnn_norm_kernels_t *rdg_norm_table(void)
{
    static const rudnn_norm_kernels_t table = {(uint32_t)sizeof(rudnn_norm_kernels_t), k_layer_norm, k_rms_norm, k_softmax, k_add_rms_norm};
    return &table;
}

int rdg_norm_clusters_supported(const cudaDeviceProp *prop)
{
#if RDG_HOST_CLUSTERS
    if (prop->major < 9)
        return 0;
    /* the code the runtime loaded for this device must come from sm_90+ source (clusters compiled
     * in): binaryVersion is the machine code's arch, ptxVersion the virtual arch it came from */
    cudaFuncAttributes attr;
    memset(&attr, 0, sizeof attr);
    if (cudaFuncGetAttributes(&attr, (const void *)norm_reg_kernel<StoreF32, OP_RMS, 16, RED_CLUSTER>) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.binaryVersion >= 90 && attr.ptxVersion >= 90;
#else
    (void)prop;
    return 0;
#endif
}
