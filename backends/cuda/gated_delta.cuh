/* What the gated-delta kernels (gated_delta.cu, gated_delta_tc.cu) share: where a sequence and a
 * chunk of the plan live (hal/gated_delta.h's sequence table, or batch rows for fixed length). */
#ifndef RUDNN_GATED_DELTA_CUH
#define RUDNN_GATED_DELTA_CUH

namespace {

struct SeqInfo {
    int64_t batch, start, length, chunk_first;
    int64_t chunks; /* chunked: its chunks */
    int32_t row;
};

/* Sequence s of the plan: the varlen table, or batch row s of a fixed-length call. */
__device__ __forceinline__ SeqInfo seq_info(const rudnn_gated_delta_plan_t &p, const void *table, int64_t s)
{
    SeqInfo si;
    if (p.varlen) {
        const int64_t n = p.sequences;
        const int64_t *t = (const int64_t *)table;
        si.batch = 0, si.start = t[s], si.length = t[n + s], si.chunk_first = t[2 * n + s];
        si.chunks = t[2 * n + s + 1] - si.chunk_first;
        si.row = ((const int32_t *)(t + 3 * n + 1))[s];
    } else {
        si.batch = s, si.start = 0, si.length = p.seq_len, si.chunk_first = s * p.seq_chunks;
        si.chunks = p.seq_chunks, si.row = (int32_t)s;
    }
    return si;
}

/* The sequence chunk c belongs to (varlen: binary search of chunk_first). */
__device__ __forceinline__ int64_t seq_of_chunk(const rudnn_gated_delta_plan_t &p, const void *table, int64_t c)
{
    if (!p.varlen) /* 32-bit: the plan has fewer than 2^31 chunks */
        return (int64_t)((uint32_t)c / (uint32_t)p.seq_chunks);
    const int64_t *first = (const int64_t *)table + 2 * p.sequences;
    int64_t lo = 0, hi = p.sequences - 1; /* the last s with first[s] <= c (and a nonempty range) */
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (first[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ int64_t tok(const int64_t st[3], int64_t b, int64_t h, int64_t t)
{
    return b * st[0] + h * st[1] + t * st[2];
}

__device__ __forceinline__ const float *state_at(const void *base, const rudnn_gated_delta_plan_t &p, int64_t row,
                                                 int64_t h)
{
    return (const float *)base + (row * p.heads + h) * p.key_dim * p.value_dim;
}

} // namespace

#endif
