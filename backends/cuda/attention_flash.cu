/* attention.flash_unit on CUDA/HIP: one fused online-softmax kernel (SIMT, FP32 accumulation), its
 * shape on a device (the one place it is chosen, for the check and the launch alike) and its
 * launch.
 *
 * A CTA of ATT_FLASH_WARPS warps takes `rows` consecutive query rows of one (b, h) and walks the
 * key tiles its rows can see (tiles wholly outside the rows' windows are skipped), staging each
 * K and V tile in shared memory as FP32 (16-byte loads where aligned). Warps are split into row
 * groups and key slices: warp w owns ROWS query rows (row group w / split) and, of every tile,
 * the keys of slice w % split. Prefill: split 1, ROWS 4 (each K/V element read from shared
 * memory serves 4 rows). Decode (Sq < 16): ROWS 1 and up to ATT_FLASH_WARPS slices, so the warps
 * of a CTA share the keys of its few rows; their partial (m, l, acc) are merged in shared memory
 * at the end.
 *
 * In a warp, lanes score keys (lane jj: key jj of the slice, a dot product over D from the
 * staged tile, padded to D + 1 floats per key so that lanes hit different banks), and own output
 * columns (lane c: columns c, c + W, ...; FP32 registers, rescaled by exp(m_old - m_new) as the
 * running maximum grows). A row that sees no key stays at m = -inf, l = 0: zeros, lse -inf.
 *
 * Shared memory (floats): q rows * D | K tile keys * (D + 1) | V tile keys * Dv | p warps * ROWS *
 * keys / split; the merge of slices reuses the tiles (warps * ROWS * (Dv + 2)). */
#include <stdio.h>

#include "rdg_internal.h"

#include "attention.cuh"
#include "attention_tuning.h"
#include "reduce.cuh"

namespace {

/* The launch shape the kernel reads (besides blockDim). */
struct FlashShape {
    int rows;  /* query rows per CTA: (warps / split) * ROWS */
    int keys;  /* keys per staged tile (a multiple of split) */
    int split; /* warps sharing the keys of one row group */
    int64_t q_tiles;
};

struct FlashConfig {
    FlashShape s;
    int rows_per_warp; /* ROWS: 1 or ATT_FLASH_ROWS_PER_WARP */
    int dmax;          /* max(D, Dv) rounded up to 64, 128 or 256 */
    int threads;
    size_t smem;
};

/* Shared memory floats of a shape (the file comment's layout). */
size_t flash_smem_floats(const rudnn_attention_plan_t *plan, int warps, int rows_per_warp, const FlashShape &s)
{
    const size_t d = (size_t)plan->head_dim, dv = (size_t)plan->head_dim_v, keys = (size_t)s.keys;
    const size_t tiles = keys * (d + 1) + keys * dv + (size_t)warps * rows_per_warp * (keys / s.split);
    const size_t merge = s.split > 1 ? (size_t)warps * rows_per_warp * (dv + 2) : 0;
    return (size_t)s.rows * d + (tiles > merge ? tiles : merge);
}

/* The shape for plan on dev, with the keys per tile halved until it fits the device's shared
 * memory; 0 when even ATT_FLASH_MIN_KEYS does not. */
int flash_config(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, FlashConfig *c)
{
    const int w = dev->warp_size > 0 ? dev->warp_size : 32;
    c->threads = ATT_FLASH_WARPS * w;
    if (dev->max_threads > 0 && c->threads > dev->max_threads)
        return 0;
    const int64_t dmax = plan->head_dim > plan->head_dim_v ? plan->head_dim : plan->head_dim_v;
    c->dmax = dmax <= 64 ? 64 : dmax <= 128 ? 128 : 256;
    if (plan->seq_q >= ATT_FLASH_WARPS * ATT_FLASH_ROWS_PER_WARP) {
        c->rows_per_warp = ATT_FLASH_ROWS_PER_WARP;
        c->s.split = 1;
    } else {
        /* decode: a row group per query row (a power of two), the rest of the warps split keys */
        c->rows_per_warp = 1;
        int groups = 1;
        while (groups < ATT_FLASH_WARPS && groups < plan->seq_q)
            groups *= 2;
        c->s.split = ATT_FLASH_WARPS / groups;
    }
    c->s.rows = ATT_FLASH_WARPS / c->s.split * c->rows_per_warp;
    c->s.q_tiles = rdg_ceil_div(plan->seq_q, c->s.rows);
    c->s.keys = c->dmax == 64 ? ATT_FLASH_KEYS_D64 : c->dmax == 128 ? ATT_FLASH_KEYS_D128 : ATT_FLASH_KEYS_D256;
    for (;;) {
        c->smem = flash_smem_floats(plan, ATT_FLASH_WARPS, c->rows_per_warp, c->s) * sizeof(float);
        if (c->smem <= dev->smem_optin)
            return 1;
        if (c->s.keys / 2 < ATT_FLASH_MIN_KEYS || c->s.keys / 2 < c->s.split)
            return 0;
        c->s.keys /= 2;
    }
}

/* The kernel (the file comment). DMAX: max(D, Dv) rounded up (each lane holds DMAX / W output
 * columns per row); ROWS: query rows per warp. */
template <int DT, int DMAX, int ROWS>
__global__ void RDG_LAUNCH_BOUNDS(ATT_FLASH_WARPS *RDG_WARP, 1) att_flash_kernel(const rdg_att_args a, const FlashShape s)
{
    constexpr int W = RDG_WARP;
    constexpr int ACC = (DMAX + W - 1) / W;
    extern __shared__ float att_flash_smem[];

    const int lane = (int)threadIdx.x % W, warp = (int)threadIdx.x / W;
    const int grp = warp / s.split, slice = warp % s.split;
    const int D = a.d, Dv = a.dv, keys = s.keys;
    const int kpitch = D + 1;
    const int slice_len = keys / s.split;
    float *q_tile = att_flash_smem;
    float *k_tile = q_tile + (size_t)s.rows * D;
    float *v_tile = k_tile + (size_t)keys * kpitch;
    float *p_w = v_tile + (size_t)keys * Dv + (size_t)warp * ROWS * slice_len; /* this warp's p */
    constexpr int EB = att_elem_bytes<DT>();
    const int64_t total = a.batch * a.heads_q * s.q_tiles;

    for (int64_t g = blockIdx.x; g < total; g += gridDim.x) {
        const int64_t bh = g / s.q_tiles;
        const int64_t i0 = (g - bh * s.q_tiles) * s.rows;
        const int64_t h = bh % a.heads_q, b = bh / a.heads_q;
        const int64_t hk = h / a.group;

        __syncthreads(); /* the previous work item's readers of shared memory are done */
        att_stage<DT>(q_tile, D, (const char *)a.q + (b * a.qs[0] + h * a.qs[1]) * EB, a.qs[2], i0, s.rows, a.seq_q,
                      D, a.vec_q);

        /* keys any row of the CTA sees (lo and hi grow with i) */
        const int64_t i_last = (i0 + s.rows < a.seq_q ? i0 + s.rows : a.seq_q) - 1;
        const int64_t lo0 = att_lo(a, i0), hi_last = att_hi(a, i_last);
        const int64_t j_begin = lo0 > 0 ? lo0 : 0;
        const int64_t j_end = hi_last < a.seq_kv - 1 ? hi_last : a.seq_kv - 1;

        int64_t lo[ROWS], hi[ROWS], bias_row[ROWS];
        const uint8_t *mask_row[ROWS];
        bool row_ok[ROWS];
        float m[ROWS], l[ROWS], acc[ROWS][ACC];
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int64_t i = i0 + grp * ROWS + r;
            row_ok[r] = i < a.seq_q;
            lo[r] = att_lo(a, i);
            hi[r] = att_hi(a, i);
            mask_row[r] = row_ok[r] ? att_mask_row(a, b, h, i) : nullptr;
            bias_row[r] = att_bias_row(a, b, h, i);
            m[r] = -INFINITY;
            l[r] = 0.0f;
#pragma unroll
            for (int u = 0; u < ACC; u++)
                acc[r][u] = 0.0f;
        }
        const float *q_rows = q_tile + (size_t)grp * ROWS * D;
        const char *kb = (const char *)a.k + (b * a.ks[0] + hk * a.ks[1]) * EB;
        const char *vb = (const char *)a.v + (b * a.vs[0] + hk * a.vs[1]) * EB;
        const int kb0 = slice * slice_len; /* this warp's first key of a tile */

        for (int64_t j0 = (j_begin / keys) * keys; j0 <= j_end; j0 += keys) {
            __syncthreads(); /* q is in; the last tile's readers are done */
            att_stage<DT>(k_tile, kpitch, kb, a.ks[2], j0, keys, a.seq_kv, D, a.vec_kv);
            att_stage<DT>(v_tile, Dv, vb, a.vs[2], j0, keys, a.seq_kv, Dv, a.vec_kv);
            __syncthreads();

            /* scores of this lane's keys for each row, and their maxima */
            float mt[ROWS];
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                mt[r] = -INFINITY;
            for (int jj = lane; jj < slice_len; jj += W) {
                const int64_t j = j0 + kb0 + jj;
                float dot[ROWS];
#pragma unroll
                for (int r = 0; r < ROWS; r++)
                    dot[r] = 0.0f;
                if (j < a.seq_kv) {
                    const float *kr = k_tile + (size_t)(kb0 + jj) * kpitch;
#pragma unroll 4
                    for (int d = 0; d < D; d++) {
                        const float kv = kr[d];
#pragma unroll
                        for (int r = 0; r < ROWS; r++)
                            dot[r] = fmaf(q_rows[r * D + d], kv, dot[r]);
                    }
                }
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    float sc = -INFINITY;
                    if (row_ok[r] && j < a.seq_kv && att_visible(j, lo[r], hi[r], mask_row[r]))
                        sc = att_finish(a, dot[r], j, bias_row[r]);
                    p_w[r * slice_len + jj] = sc;
                    mt[r] = fmaxf(mt[r], sc);
                }
            }

            /* p = exp(s - m_new) in place (each lane its own keys); nothing seen yet: all 0 */
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                const float m_new = fmaxf(m[r], warp_allreduce<MaxOp>(mt[r]));
                const bool none = m_new == -INFINITY;
                float sum = 0.0f;
                for (int jj = lane; jj < slice_len; jj += W) {
                    const float p = none ? 0.0f : expf(p_w[r * slice_len + jj] - m_new);
                    p_w[r * slice_len + jj] = p;
                    sum += p;
                }
                const float l_tile = warp_allreduce<SumOp>(sum);
                const float alpha = none ? 1.0f : expf(m[r] - m_new); /* exp(-inf) = 0 at first */
                l[r] = l[r] * alpha + l_tile;
                m[r] = m_new;
#pragma unroll
                for (int u = 0; u < ACC; u++)
                    acc[r][u] *= alpha;
            }
            RDG_SYNCWARP(); /* every lane's p are in */

            /* acc += p V over this warp's keys */
            for (int jj = 0; jj < slice_len; jj++) {
                const float *vr = v_tile + (size_t)(kb0 + jj) * Dv;
                float vc[ACC];
#pragma unroll
                for (int u = 0; u < ACC; u++) {
                    const int c = lane + u * W;
                    vc[u] = c < Dv ? vr[c] : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    const float p = p_w[r * slice_len + jj];
#pragma unroll
                    for (int u = 0; u < ACC; u++)
                        acc[r][u] = fmaf(p, vc[u], acc[r][u]);
                }
            }
        }

        if (s.split > 1) {
            /* merge the slices' partials: every warp leaves its own in the (now free) tiles, the
             * group's first warp combines them in slice order */
            __syncthreads();
            float *merge = k_tile;
            const int pitch = Dv + 2;
            float *mine = merge + (size_t)warp * ROWS * pitch;
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                if (lane == 0) {
                    mine[r * pitch] = m[r];
                    mine[r * pitch + 1] = l[r];
                }
#pragma unroll
                for (int u = 0; u < ACC; u++) {
                    const int c = lane + u * W;
                    if (c < Dv)
                        mine[r * pitch + 2 + c] = acc[r][u];
                }
            }
            __syncthreads();
            if (slice == 0) {
#pragma unroll
                for (int r = 0; r < ROWS; r++) {
                    float mm = -INFINITY;
                    for (int t = 0; t < s.split; t++)
                        mm = fmaxf(mm, merge[(size_t)((grp * s.split + t) * ROWS + r) * pitch]);
                    float ll = 0.0f;
#pragma unroll
                    for (int u = 0; u < ACC; u++)
                        acc[r][u] = 0.0f;
                    if (mm != -INFINITY) {
                        for (int t = 0; t < s.split; t++) {
                            const float *part = merge + (size_t)((grp * s.split + t) * ROWS + r) * pitch;
                            const float f = expf(part[0] - mm); /* a slice that saw nothing: 0 */
                            ll = fmaf(part[1], f, ll);
#pragma unroll
                            for (int u = 0; u < ACC; u++) {
                                const int c = lane + u * W;
                                if (c < Dv)
                                    acc[r][u] = fmaf(part[2 + c], f, acc[r][u]);
                            }
                        }
                    }
                    m[r] = mm;
                    l[r] = ll;
                }
            }
        }

        if (slice == 0) {
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                if (!row_ok[r])
                    continue;
                const int64_t i = i0 + grp * ROWS + r;
                const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
                void *ob = (char *)a.out + (b * a.os[0] + h * a.os[1] + i * a.os[2]) * EB;
#pragma unroll
                for (int u = 0; u < ACC; u++) {
                    const int c = lane + u * W;
                    if (c < Dv)
                        Elem<DT>::st(ob, c, acc[r][u] * inv);
                }
                if (a.lse && lane == 0)
                    a.lse[bh * a.seq_q + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
            }
        }
    }
}

typedef void (*flash_fn)(const rdg_att_args, const FlashShape);

template <int DT, int DMAX>
flash_fn flash_kernel_rows(int rows_per_warp)
{
    return rows_per_warp == 1 ? att_flash_kernel<DT, DMAX, 1> : att_flash_kernel<DT, DMAX, ATT_FLASH_ROWS_PER_WARP>;
}

template <int DT>
flash_fn flash_kernel_dt(const FlashConfig &c)
{
    return c.dmax == 64    ? flash_kernel_rows<DT, 64>(c.rows_per_warp)
           : c.dmax == 128 ? flash_kernel_rows<DT, 128>(c.rows_per_warp)
                           : flash_kernel_rows<DT, 256>(c.rows_per_warp);
}

flash_fn flash_kernel(rudnn_dtype_t dt, const FlashConfig &c)
{
    return dt == RUDNN_F32   ? flash_kernel_dt<RUDNN_F32>(c)
           : dt == RUDNN_F16 ? flash_kernel_dt<RUDNN_F16>(c)
                             : flash_kernel_dt<RUDNN_BF16>(c);
}

} // namespace

int rdg_att_flash_fits(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan)
{
    FlashConfig c;
    return flash_config(dev, plan, &c);
}

rudnn_status_t rdg_att_run_flash(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a)
{
    FlashConfig c;
    if (!flash_config(&q->dev, plan, &c))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED,
                         ATT_OP ": %s: the flash tiles for D %lld, Dv %lld exceed the device's shared memory",
                         RUDNN_GPU_BACKEND_NAME, (long long)plan->head_dim, (long long)plan->head_dim_v);
    const flash_fn fn = flash_kernel(plan->dtype, c);
    cudaError_t err;
    TRY(rdg_att_allow_smem(q, (const void *)fn, c.smem));
    const int64_t total = plan->batch * plan->heads_q * c.s.q_tiles;
    const int64_t grid = total < ATT_MAX_GRID ? total : ATT_MAX_GRID;
    (void)cudaGetLastError(); /* the check below sees this launch only */
    rdg_note_kernel(ATT_FLASH_UNIT_NAME);
    fn<<<dim3((unsigned)grid), dim3((unsigned)c.threads), c.smem, q->stream>>>(a, c.s);
    err = cudaGetLastError();
    if (err != cudaSuccess) {
        char what[160];
        snprintf(what, sizeof what, " kernel launch (" ATT_FLASH_UNIT_NAME ", grid %lld, block %d, smem %zu)",
                 (long long)grid, c.threads, c.smem);
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, what);
    }
    return RUDNN_STATUS_SUCCESS;
}
