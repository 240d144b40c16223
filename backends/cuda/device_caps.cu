/* Device capabilities that depend on the kernel binary the runtime loaded for a device, or on the
 * driver: probed once per device by device_open (plugin.cu) into rdg_devinfo_t, which every queue
 * copies, so that launchers read q->dev and never probe on a launch path.
 */
#include <string.h>

#include "rdg_internal.h"

namespace {

#if !RDG_HIP
/* Its launch bound tells the host (cudaFuncGetAttributes, no launch) whether the binary loaded for
 * the device was compiled with wgmma. Every .cu of the plugin is compiled for the same targets, so
 * the answer holds for the tensor-core kernels of moe_experts.cu as well. */
__global__ void __launch_bounds__(RDG_HAS_WGMMA ? 96 : 64) wgmma_probe_kernel() {}

int probe_wgmma(int arch)
{
    if (arch != 90)
        return 0;
    cudaFuncAttributes attr;
    memset(&attr, 0, sizeof attr);
    if (cudaFuncGetAttributes(&attr, (const void *)wgmma_probe_kernel) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.maxThreadsPerBlock == 96;
}

/* cuTensorMapEncodeTiled through the runtime (no link to libcuda); NULL when the driver lacks it */
void *probe_tensor_map_encoder(void)
{
    void *p = nullptr;
    cudaDriverEntryPointQueryResult res;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &res) ==
            cudaSuccess &&
        res == cudaDriverEntryPointSuccess)
        return p;
    (void)cudaGetLastError();
    return nullptr;
}
#endif

} // namespace

void rdg_probe_caps(const cudaDeviceProp *prop, rdg_devinfo_t *info)
{
    info->clusters = rdg_norm_clusters_supported(prop);
#if !RDG_HIP
    info->wgmma = probe_wgmma(info->arch);
    info->tensor_map_encode = probe_tensor_map_encoder();
#else
    info->wgmma = 0;
    info->tensor_map_encode = nullptr;
#endif
}
