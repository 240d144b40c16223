/* What the tensor-core gated-delta kernels share (gated_delta_tc.cu: mma.sync, sm_80+;
 * gated_delta_wg.cu: wgmma, sm_90a): the chunk size, the scratch records tc_prep writes, how a
 * sequence's state pass is cut into segments and where their carried states live. */
#ifndef RUDNN_GATED_DELTA_TC_CUH
#define RUDNN_GATED_DELTA_TC_CUH

namespace {

constexpr int CH = 64; /* chunk rows (the only chunk size of these paths) */

/* The scratch record of one (chunk, head), bytes: W [CH][KD], U [CH][VD] in the dtype, gamma [CH]
 * FP32. */
template <int KD, int VD>
struct Rec {
    static constexpr size_t w = 0;
    static constexpr size_t u = w + (size_t)CH * KD * 2;
    static constexpr size_t gamma = u + (size_t)CH * VD * 2;
    static constexpr size_t bytes = gamma + CH * 4;
};

/* A sequence's chunks cut into plan.segments (ceil(n / segments) chunks each; the empty ones last).
 * Segment j > 0 of a cut pass first runs from a zero state (tc_segment: S_local_j) and from I over
 * the same chunks (its transition M_j, as a state of K columns with U = 0); tc_carry then walks the
 * segments, S_(j+1) = M_j S_j + S_local_j; tc_state runs every segment from its true state. */
enum Pass {
    PASS_STATE,
    PASS_LOCAL,
    PASS_TRANSITION,
    PASS_SEGMENT /* wgmma only: S_local_j and M_j in one block, each chunk's W and K read once */
};

__device__ __forceinline__ void segment_range(int64_t n, int64_t segs, int64_t j, int64_t &begin, int64_t &end)
{
    const int64_t len = (n + segs - 1) / segs;
    begin = min(j * len, n), end = min(begin + len, n);
}

/* Segments holding chunks (a prefix of them). */
__device__ __forceinline__ int64_t live_segments(int64_t n, int64_t segs)
{
    const int64_t len = (n + segs - 1) / segs;
    return len ? (n + len - 1) / len : 0;
}

/* Scratch after the chunk records (a cut pass only), bytes: X [sequence][segment][head][K][V] F32, the
 * entering states (S_local_j until tc_carry makes them true), then M [sequence][segment][head][K][K] F32. */
__host__ __device__ __forceinline__ size_t rec_bytes(const rudnn_gated_delta_plan_t &p)
{
    return (size_t)2 * (size_t)(CH * p.key_dim + CH * p.value_dim) + CH * 4;
}

__host__ __device__ __forceinline__ size_t carry_x(const rudnn_gated_delta_plan_t &p)
{
    return ((size_t)p.chunks * (size_t)p.heads * rec_bytes(p) + 255) / 256 * 256;
}

__host__ __device__ __forceinline__ size_t carry_m(const rudnn_gated_delta_plan_t &p)
{
    return carry_x(p) +
           (size_t)p.sequences * (size_t)p.segments * (size_t)p.heads * (size_t)(p.key_dim * p.value_dim) * 4;
}

} // namespace

#endif
