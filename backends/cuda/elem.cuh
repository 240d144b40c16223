/* Element access by dtype for the MoE kernels: Elem<DT>::ld / st convert one F32, F16 or BF16
 * element to and from FP32 (round to nearest even, gpu_compat.h). Include after rdg_internal.h. */
#ifndef RUDNN_ELEM_CUH
#define RUDNN_ELEM_CUH

namespace {

template <int DT>
struct Elem;
template <>
struct Elem<RUDNN_F32> {
    __device__ static float ld(const void *p, int64_t i) { return ((const float *)p)[i]; }
    __device__ static void st(void *p, int64_t i, float v) { ((float *)p)[i] = v; }
};
template <>
struct Elem<RUDNN_F16> {
    __device__ static float ld(const void *p, int64_t i) { return rdg_f16_to_f32(((const uint16_t *)p)[i]); }
    __device__ static void st(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = rdg_f32_to_f16(v); }
};
template <>
struct Elem<RUDNN_BF16> {
    __device__ static float ld(const void *p, int64_t i) { return rdg_bf16_to_f32(((const uint16_t *)p)[i]); }
    __device__ static void st(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = rdg_f32_to_bf16(v); }
};

} // namespace

#endif
