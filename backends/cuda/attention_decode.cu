/* attention.flash_decode on CUDA/HIP: a fused online-softmax kernel (FP32 accumulation, no score
 * matrix in memory) for decode shapes, R = Sq * G <= ATT_DEC_MAX_ROWS query rows per K/V head
 * (G = Hq / Hkv), its shape on a device (dec_config: the one place it is chosen, for the check,
 * the workspace and the launch alike) and its launches.
 *
 * Why this shape: decode reads each K and V row once for a handful of query rows (~2 FLOPs per
 * byte), so it runs at the speed K and V stream from DRAM, and everything here serves that:
 *   - one CTA per (b, hk) serves all R rows of K/V head hk (row r = g * Sq + i: query head
 *     hk * G + g, query i), so K/V are read once, not G times;
 *   - K and V tiles of TK = warps * 16 keys are staged raw (the input dtype) in a ring of
 *     `stages` buffers with 16-byte cp.async copies (rows past the last key zero-filled), so that
 *     stages - 1 tiles, about ATT_DEC_INFLIGHT_PER_SM per SM, are in flight while one is
 *     computed; rows that are not 16-byte aligned (rdg_att_args vec_kv 0) are staged by element
 *     loads instead (correct, not fast);
 *   - split-KV: where B * Hkv CTAs leave the GPU short of CTAs (small B), the key range of one
 *     (b, hk) is split over several CTAs (dec_splits, from the SM count); each writes its rows' normalized partial output and lse to the workspace
 *     and a second kernel (att_decode_merge_kernel) combines them.
 * Warp w takes keys w * 16 .. w * 16 + 15 of every tile with its own online softmax (m, l) and
 * FP32 accumulators; the warps' partials are merged in shared memory at the end of the CTA's
 * range. Two ways to do a warp's tile (DecWarp):
 *   - MMA (F16/BF16 on sm_80+, CUDA): mma.sync m16n8k16 with the rows padded to 16. S = Q K^T
 *     from ldmatrix fragments of the staged tiles (products exact, FP32 sums); the contract's
 *     score rules (attention.cuh) on the accumulator fragments; P = exp(S - m) in FP32, split
 *     into hi + lo parts in the dtype so that P V (two MMAs, V from ldmatrix.trans) keeps ~16
 *     bits of P rather than the dtype's 8 or 11;
 *   - SIMT (F32; every dtype under HIP and below sm_80): lanes score (row, key) pairs from the
 *     tiles (Q as FP32 in shared memory), lane r updates row r's softmax, lanes own the output
 *     columns (c = lane + u * W) of every row.
 * A row that sees no key stays at m = -inf, l = 0: zeros, lse -inf (Skv 0: no tile at all).
 *
 * Shared memory (bytes, DecShape offsets): Q 16 rows x qpitch (MMA: the dtype, D padded to 16,
 * + 16 bytes; SIMT: FP32, D padded to 16, + 4 floats) | 16 DecRow | SIMT scratch per warp (p
 * [16 keys][16 rows], alpha [16]) | K ring stages x TK x kpitch | V ring stages x TK x vpitch. Row
 * pitches are the padded row + 16 bytes: an odd number of 16-byte units, so that the 8 rows an
 * ldmatrix (or 8 lanes' 16-byte loads) touch fall in distinct banks. K's pad columns D .. D16
 * are zeroed (they meet Q's zero pad in the MMA); V's are never used in a kept column. The merge
 * of the warps reuses the rings: acc [warps][16][Dv] | m, l, weight [warps][16] | M, L [16]. */
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"

#include "attention.cuh"
#include "attention_tuning.h"
#include "mma_sync.cuh"

static_assert(ATT_DEC_MAX_ROWS == 16, "flash_decode's rows are one m16 tile");
static_assert(ATT_DEC_KEYS_PER_WARP == 16, "flash_decode's keys per warp are the k of one m16n8k16");
static_assert(ATT_DEC_MAX_STAGES >= 2 && ATT_DEC_MAX_STAGES <= 8, "rdg_copy_async_wait_n covers 0 .. 6 pending groups");

namespace {

#define DEC_RM ATT_DEC_MAX_ROWS
#define DEC_KW ATT_DEC_KEYS_PER_WARP
/* SIMT scratch floats per warp: p [key][row] and the rows' alpha */
#define DEC_SCR_FLOATS (DEC_KW * DEC_RM + DEC_RM)

/* What the kernels read besides rdg_att_args; dec_config fills it. */
struct DecShape {
    int warps, tk, stages;      /* warps per CTA, keys per staged tile (warps * 16), ring buffers */
    int rows;                   /* R = Sq * G */
    int dk16, dv16;             /* D, Dv rounded up to 16 */
    int kpitch, vpitch, qpitch; /* bytes per staged K row, V row, Q row */
    int off_rows, off_scr, off_k, off_v; /* shared-memory byte offsets (file comment) */
    int stage_k, stage_v;       /* bytes of one K tile, one V tile */
    int splits;                 /* CTAs per (b, hk); 1: no workspace, no merge kernel */
    int64_t tiles_per_split;
    int64_t heads_kv;
    int64_t j_begin, j_end, n_tiles; /* the keys some row sees: [j_begin, j_end], n_tiles tiles from j_begin */
};

/* A query row's key range and where its mask and bias rows start (shared memory). */
struct DecRow {
    int64_t lo, hi, mask_off, bias_off;
};

struct DecConfig {
    DecShape s;
    int mma;  /* the MMA way (else SIMT) */
    int dmax; /* max(D, Dv) rounded up to 64, 128 or 256 (output columns a thread may hold) */
    int threads, ctas_per_sm;
    size_t smem;
    int64_t items;     /* CTAs' work items: B * Hkv * splits */
    uint64_t ws_bytes; /* splits > 1: partial outputs [items][R][Dv] and lse [items][R], FP32 */
};

/* ---------------------------------------------------------------------------- device helpers */

/* Stages rows j0 .. j0 + nrows - 1 of one K or V head (row j at src + j * stride bytes, width
 * elements) into dst (pitch bytes per row); rows past j_end become zeros. Every thread takes
 * part. vec: 16-byte copies (rows aligned: rdg_att_args vec_kv), else element loads. */
template <int DT>
__device__ __forceinline__ void dec_stage_rows(unsigned char *dst, int pitch, const char *src, int64_t stride,
                                               int64_t j0, int nrows, int64_t j_end, int width, bool vec)
{
    constexpr int EB = att_elem_bytes<DT>();
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    if (vec) {
        /* thread -> (row, 16-byte chunk), the same chunk of every rstep-th row */
        const int cpr = width * EB / 16;
        int r0, rstep, c0, cstep;
        if (cpr <= nt) {
            rstep = nt / cpr;
            r0 = tid / cpr;
            c0 = tid - r0 * cpr;
            cstep = cpr;
            if (r0 >= rstep)
                r0 = nrows; /* a thread past the last whole row of chunks idles */
        } else {
            rstep = 1;
            r0 = 0;
            c0 = tid;
            cstep = nt;
        }
        for (int r = r0; r < nrows; r += rstep) {
            const int64_t j = j0 + r;
            const bool ok = j <= j_end;
            const char *srow = src + (ok ? j : 0) * stride; /* row 0 exists whenever a tile is staged */
            unsigned char *drow = dst + r * pitch;
            for (int c = c0; c < cpr; c += cstep)
                rdg_copy16_async_zfill(drow + c * 16, srow + c * 16, ok);
        }
    } else {
        for (int e = tid; e < nrows * width; e += nt) {
            const int r = e / width, c = e - r * width;
            const int64_t j = j0 + r;
            if constexpr (EB == 4)
                ((uint32_t *)(dst + r * pitch))[c] = j <= j_end ? ((const uint32_t *)(src + j * stride))[c] : 0u;
            else
                ((uint16_t *)(dst + r * pitch))[c] = j <= j_end ? ((const uint16_t *)(src + j * stride))[c] : (uint16_t)0;
        }
    }
}

/* Whether a staged key j (>= the CTA's j_begin; past j_end: a zero-filled row) is visible to a
 * row with range [lo, hi] and mask row mask_row. */
__device__ __forceinline__ bool dec_sees(int64_t j, int64_t j_end, int64_t lo, int64_t hi, const uint8_t *mask_row)
{
    return j <= j_end && att_visible(j, lo, hi, mask_row);
}

/* ------------------------------------------------------------------------------ MMA helpers */

#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DEC_HAS_MMA 1

/* (x0, x1) -> two dtype values packed (x0 in bits 0..15), round to nearest even; *rest gets
 * what the rounding left out, x - float(packed), for the lo part. */
template <int DT>
__device__ __forceinline__ uint32_t dec_pack(float x0, float x1, float *rest0, float *rest1)
{
    uint32_t r;
    float y0, y1;
    if constexpr (DT == RUDNN_BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
        y0 = __uint_as_float(r << 16);
        y1 = __uint_as_float(r & 0xffff0000u);
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
        y0 = __half2float(__ushort_as_half((unsigned short)(r & 0xffffu)));
        y1 = __half2float(__ushort_as_half((unsigned short)(r >> 16)));
    }
    *rest0 = x0 - y0;
    *rest1 = x1 - y1;
    return r;
}
template <int DT>
__device__ __forceinline__ uint32_t dec_pack(float x0, float x1)
{
    float u, v;
    return dec_pack<DT>(x0, x1, &u, &v);
}
#else
#define DEC_HAS_MMA 0
#endif

/* ------------------------------------------------------------------------- a warp's state */

/* A warp's online softmax over its keys of every tile and its FP32 accumulators, for the MMA or
 * the SIMT way (the file comment). init after the CTA's rows are in shared memory; tile once
 * per staged tile; flush leaves (m, l, acc) of each row in the merge area. */
template <int DT, int DMAX, bool MMA>
struct DecWarp;

#if !RDG_HIP
/* MMA: lane (g, t) = (lane / 4, lane % 4) holds rows g and g + 8 (h = 0, 1) of the m16 tiles:
 * scores of keys 8 nb + 2 t + {0, 1} (nb = 0, 1) and output columns 8 n + 2 t + {0, 1}. l is
 * this lane's share of the row sum (the quad's four are added in flush); m is the quad's. */
template <int DT, int DMAX>
struct DecWarp<DT, DMAX, true> {
    float acc[DMAX / 8][4];
    float m[2], l[2];
    int64_t lo[2], hi[2], bias_row[2];
    const uint8_t *mask_row[2];
    bool ok[2];

    __device__ __forceinline__ void init(const rdg_att_args &a, const DecShape &s, const DecRow *rows, int lane)
    {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = lane / 4 + 8 * h;
            ok[h] = r < s.rows;
            lo[h] = ok[h] ? rows[r].lo : 1; /* lo > hi: sees nothing */
            hi[h] = ok[h] ? rows[r].hi : 0;
            mask_row[h] = ok[h] && a.mask ? a.mask + rows[r].mask_off : nullptr;
            bias_row[h] = ok[h] ? rows[r].bias_off : 0;
            m[h] = -INFINITY;
            l[h] = 0.0f;
        }
#pragma unroll
        for (int n = 0; n < DMAX / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[n][e] = 0.0f;
    }

    __device__ __forceinline__ void tile(const rdg_att_args &a, const DecShape &s, const unsigned char *q_sm,
                                         const unsigned char *k_sm, const unsigned char *v_sm, int64_t tj0,
                                         float *scr, int warp, int lane)
    {
        (void)scr;
#if DEC_HAS_MMA
        const int t = lane % 4;
        /* ldmatrix row addresses of this lane (8 lanes per 8x8 matrix, in fragment order):
         * Q (A, 16 rows x 16 d): rows lane % 8 + 8 ((lane / 8) % 2), d 8 (lane / 16);
         * K (B of S, n = key, k = d): keys lane % 8 + 8 (lane / 16), d 8 ((lane / 8) % 2);
         * V (B of P V, k = key, n = column, transposed): keys lane % 8 + 8 ((lane / 8) % 2),
         * columns 8 (lane / 16). */
        const uint32_t qa = rdg_smem_addr(q_sm) + (uint32_t)(((lane % 8) + 8 * ((lane / 8) % 2)) * s.qpitch +
                                                             16 * (lane / 16));
        const uint32_t ka = rdg_smem_addr(k_sm) + (uint32_t)((warp * DEC_KW + (lane % 8) + 8 * (lane / 16)) * s.kpitch +
                                                             16 * ((lane / 8) % 2));
        const uint32_t va = rdg_smem_addr(v_sm) +
                            (uint32_t)((warp * DEC_KW + (lane % 8) + 8 * ((lane / 8) % 2)) * s.vpitch + 16 * (lane / 16));

        /* S = Q K^T over this warp's 16 keys: sc[nb] is the m16n8 tile of keys 8 nb .. 8 nb + 7 */
        float sc[2][4];
#pragma unroll
        for (int nb = 0; nb < 2; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sc[nb][e] = 0.0f;
        const int ksteps = s.dk16 / 16;
#pragma unroll 4
        for (int kk = 0; kk < ksteps; kk++) {
            uint32_t af[4], bf[4];
            rdg_ldsm_x4(qa + kk * 32, af);
            rdg_ldsm_x4(ka + kk * 32, bf);
            mma16816<DT>(sc[0], af, bf[0], bf[1]);
            mma16816<DT>(sc[1], af, bf[2], bf[3]);
        }

        /* the contract's rules; element e of sc[nb]: row g + 8 (e / 2), key 8 nb + 2 t + e % 2 */
#pragma unroll
        for (int nb = 0; nb < 2; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int h = e / 2;
                const int64_t j = tj0 + warp * DEC_KW + nb * 8 + 2 * t + e % 2;
                sc[nb][e] = ok[h] && dec_sees(j, s.j_end, lo[h], hi[h], mask_row[h])
                                ? att_finish(a, sc[nb][e], j, bias_row[h])
                                : -INFINITY;
            }

        /* online softmax per row: the quad's maximum, p in place, acc rescaled */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mt = fmaxf(fmaxf(sc[0][2 * h], sc[0][2 * h + 1]), fmaxf(sc[1][2 * h], sc[1][2 * h + 1]));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
            const float m_new = fmaxf(m[h], mt);
            const bool none = m_new == -INFINITY; /* never exp(-inf - -inf) */
            const float alpha = none ? 1.0f : expf(m[h] - m_new); /* exp(-inf) = 0 at first */
            float sum = 0.0f;
#pragma unroll
            for (int nb = 0; nb < 2; nb++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float p = none ? 0.0f : expf(sc[nb][2 * h + e] - m_new);
                    sc[nb][2 * h + e] = p;
                    sum += p;
                }
            l[h] = l[h] * alpha + sum;
            m[h] = m_new;
#pragma unroll
            for (int n = 0; n < DMAX / 8; n++) {
                acc[n][2 * h] *= alpha;
                acc[n][2 * h + 1] *= alpha;
            }
        }

        /* P as the A fragment (rows g, g + 8; keys 2t.. and 8 + 2t..), hi and lo parts */
        uint32_t ph[4], pl[4];
#pragma unroll
        for (int x = 0; x < 4; x++) {
            const int nb = x / 2, h = x % 2; /* a0a1: (g, nb 0), a2a3: (g+8, nb 0), a4a5: (g, nb 1), ... */
            float r0, r1;
            ph[x] = dec_pack<DT>(sc[nb][2 * h], sc[nb][2 * h + 1], &r0, &r1);
            pl[x] = dec_pack<DT>(r0, r1);
        }

        /* acc += P V, 16 output columns (two n8 tiles) per ldmatrix */
#pragma unroll
        for (int np = 0; np < DMAX / 16; np++) {
            if (np * 16 < s.dv16) {
                uint32_t bv[4];
                rdg_ldsm_x4_trans(va + np * 32, bv);
                mma16816<DT>(acc[2 * np], ph, bv[0], bv[1]);
                mma16816<DT>(acc[2 * np], pl, bv[0], bv[1]);
                mma16816<DT>(acc[2 * np + 1], ph, bv[2], bv[3]);
                mma16816<DT>(acc[2 * np + 1], pl, bv[2], bv[3]);
            }
        }
#else
        (void)a, (void)s, (void)q_sm, (void)k_sm, (void)v_sm, (void)tj0, (void)warp, (void)lane;
        __trap(); /* the host runs the MMA way only on CUDA sm_80+ (dec_config) */
#endif
    }

    /* this warp's rows into the merge area: acc [warp][16][Dv], m and l [warp][16] */
    __device__ __forceinline__ void flush(const DecShape &s, int Dv, float *mg_acc, float *mg_m, float *mg_l,
                                          int warp, int lane)
    {
#if DEC_HAS_MMA
        const int g = lane / 4, t = lane % 4;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = g + 8 * h;
            if (r >= s.rows)
                continue;
            float *row = mg_acc + (size_t)(warp * DEC_RM + r) * Dv;
#pragma unroll
            for (int n = 0; n < DMAX / 8; n++) {
                const int c = n * 8 + 2 * t;
                if (c < Dv)
                    row[c] = acc[n][2 * h];
                if (c + 1 < Dv)
                    row[c + 1] = acc[n][2 * h + 1];
            }
            if (t == 0) {
                mg_m[warp * DEC_RM + r] = m[h];
                mg_l[warp * DEC_RM + r] = l[h];
            }
        }
#else
        (void)s, (void)Dv, (void)mg_acc, (void)mg_m, (void)mg_l, (void)warp, (void)lane;
        __trap();
#endif
    }
};
#endif /* !RDG_HIP */

/* SIMT: per tile, (1) lanes score (row, key) pairs into p [key][row] (scratch), (2) lane r < R
 * turns row r's scores into p and its alpha, (3) lane owns columns lane + u W of every row. m, l
 * of row r live in lane r. */
template <int DT, int DMAX>
struct DecWarp<DT, DMAX, false> {
    static constexpr int W = RDG_WARP;
    static constexpr int ACC = (DMAX + W - 1) / W;
    float acc[DEC_RM][ACC];
    float m, l;

    __device__ __forceinline__ void init(const rdg_att_args &, const DecShape &, const DecRow *, int)
    {
        m = -INFINITY;
        l = 0.0f;
#pragma unroll
        for (int r = 0; r < DEC_RM; r++)
#pragma unroll
            for (int u = 0; u < ACC; u++)
                acc[r][u] = 0.0f;
    }

    __device__ __forceinline__ void tile(const rdg_att_args &a, const DecShape &s, const DecRow *rows,
                                         const unsigned char *q_sm, const unsigned char *k_sm,
                                         const unsigned char *v_sm, int64_t tj0, float *scr, int warp, int lane)
    {
        constexpr int VE = 16 / att_elem_bytes<DT>();
        const int R = s.rows, D = a.d, Dv = a.dv;
        float *pt = scr;                 /* [key][row] */
        float *al = scr + DEC_KW * DEC_RM; /* [row] */

        /* (1) scores: pair idx = key * R + row, so that lanes of one key read its K row once */
        for (int idx = lane; idx < R * DEC_KW; idx += W) {
            const int jj = idx / R, r = idx - jj * R;
            const int64_t j = tj0 + warp * DEC_KW + jj;
            const DecRow &row = rows[r];
            float sc = -INFINITY;
            if (dec_sees(j, s.j_end, row.lo, row.hi, a.mask ? a.mask + row.mask_off : nullptr)) {
                const unsigned char *kr = k_sm + (warp * DEC_KW + jj) * s.kpitch;
                const float *qr = (const float *)(q_sm + r * s.qpitch);
                float dot = 0.0f;
                for (int d = 0; d < D; d += VE) { /* past D: K's zeroed pad and Q's zeros */
                    float kx[VE];
                    att_ld16<DT>(kr, d, kx);
#pragma unroll
                    for (int u = 0; u < VE; u += 4) {
                        const float4 q4 = *(const float4 *)(qr + d + u);
                        dot = fmaf(q4.x, kx[u], dot);
                        dot = fmaf(q4.y, kx[u + 1], dot);
                        dot = fmaf(q4.z, kx[u + 2], dot);
                        dot = fmaf(q4.w, kx[u + 3], dot);
                    }
                }
                sc = att_finish(a, dot, j, row.bias_off);
            }
            pt[jj * DEC_RM + r] = sc;
        }
        RDG_SYNCWARP();

        /* (2) row r's softmax step, by lane r */
        if (lane < R) {
            float mt = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < DEC_KW; jj++)
                mt = fmaxf(mt, pt[jj * DEC_RM + lane]);
            const float m_new = fmaxf(m, mt);
            const bool none = m_new == -INFINITY;
            const float alpha = none ? 1.0f : expf(m - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int jj = 0; jj < DEC_KW; jj++) {
                const float p = none ? 0.0f : expf(pt[jj * DEC_RM + lane] - m_new);
                pt[jj * DEC_RM + lane] = p;
                sum += p;
            }
            l = l * alpha + sum;
            m = m_new;
            al[lane] = alpha;
        }
        RDG_SYNCWARP();

        /* (3) acc = acc * alpha + P V */
#pragma unroll
        for (int r = 0; r < DEC_RM; r++) {
            if (r < R) {
                const float alpha = al[r];
#pragma unroll
                for (int u = 0; u < ACC; u++)
                    acc[r][u] *= alpha;
            }
        }
        for (int jj = 0; jj < DEC_KW; jj++) {
            const unsigned char *vr = v_sm + (warp * DEC_KW + jj) * s.vpitch;
            float vc[ACC];
#pragma unroll
            for (int u = 0; u < ACC; u++) {
                const int c = lane + u * W;
                vc[u] = c < Dv ? Elem<DT>::ld(vr, c) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < DEC_RM; r++) {
                if (r < R) {
                    const float p = pt[jj * DEC_RM + r];
#pragma unroll
                    for (int u = 0; u < ACC; u++)
                        acc[r][u] = fmaf(p, vc[u], acc[r][u]);
                }
            }
        }
        RDG_SYNCWARP(); /* the next tile's scores overwrite p */
    }

    __device__ __forceinline__ void flush(const DecShape &s, int Dv, float *mg_acc, float *mg_m, float *mg_l,
                                          int warp, int lane)
    {
        if (lane < s.rows) {
            mg_m[warp * DEC_RM + lane] = m;
            mg_l[warp * DEC_RM + lane] = l;
        }
#pragma unroll
        for (int r = 0; r < DEC_RM; r++) {
            if (r < s.rows) {
                float *row = mg_acc + (size_t)(warp * DEC_RM + r) * Dv;
#pragma unroll
                for (int u = 0; u < ACC; u++) {
                    const int c = lane + u * W;
                    if (c < Dv)
                        row[c] = acc[r][u];
                }
            }
        }
    }
};

/* ------------------------------------------------------------------------------- the kernels */

/* One work item per (b, hk, split) in a grid-stride loop (the file comment). ws: with splits, the
 * partial outputs [items][R][Dv] then the partial lse [items][R]. */
template <int DT, int DMAX, bool MMA>
__global__ void RDG_LAUNCH_BOUNDS(ATT_DEC_WARPS *RDG_WARP, ATT_DEC_CTAS_PER_SM)
    att_decode_kernel(const rdg_att_args a, const DecShape s, float *ws)
{
    extern __shared__ __align__(16) unsigned char dec_smem[];
    constexpr int W = RDG_WARP;
    constexpr int EB = att_elem_bytes<DT>();
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x, lane = tid % W, warp = tid / W;
    const int R = s.rows, D = a.d, Dv = a.dv, nw = s.warps;
    const int64_t Sq = a.seq_q, G = a.group;
    unsigned char *q_sm = dec_smem;
    DecRow *rows = (DecRow *)(dec_smem + s.off_rows);
    float *scr = (float *)(dec_smem + s.off_scr) + (size_t)warp * DEC_SCR_FLOATS;
    unsigned char *k_ring = dec_smem + s.off_k, *v_ring = dec_smem + s.off_v;
    /* the merge area, over the rings once the last tile is done */
    float *mg_acc = (float *)(dec_smem + s.off_k);
    float *mg_m = mg_acc + (size_t)nw * DEC_RM * Dv, *mg_l = mg_m + nw * DEC_RM, *mg_w = mg_l + nw * DEC_RM;
    float *mg_M = mg_w + nw * DEC_RM, *mg_L = mg_M + DEC_RM;

    const int64_t items = a.batch * s.heads_kv * s.splits;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t bk = item / s.splits;
        const int64_t split = item - bk * s.splits;
        const int64_t hk = bk % s.heads_kv, b = bk / s.heads_kv;
        const int64_t t0 = split * s.tiles_per_split;
        const int64_t t1 = t0 + s.tiles_per_split < s.n_tiles ? t0 + s.tiles_per_split : s.n_tiles;
        const int ntiles = t1 > t0 ? (int)(t1 - t0) : 0;

        __syncthreads(); /* the previous item's readers of shared memory are done */
        /* Q rows (zeros past R and past D), the rows' ranges, K's pad columns */
        for (int e = tid; e < DEC_RM * s.dk16; e += nt) {
            const int r = e / s.dk16, d = e - r * s.dk16;
            float x = 0.0f;
            uint16_t raw = 0;
            if (r < R && d < D) {
                const int64_t h = hk * G + r / Sq, i = r % Sq;
                const int64_t idx = b * a.qs[0] + h * a.qs[1] + i * a.qs[2] + d;
                if constexpr (MMA)
                    raw = ((const uint16_t *)a.q)[idx];
                else
                    x = Elem<DT>::ld(a.q, idx);
            }
            if constexpr (MMA)
                ((uint16_t *)(q_sm + r * s.qpitch))[d] = raw;
            else
                ((float *)(q_sm + r * s.qpitch))[d] = x;
        }
        if (tid < R) {
            const int64_t h = hk * G + tid / Sq, i = tid % Sq;
            DecRow row;
            row.lo = att_lo(a, i);
            row.hi = att_hi(a, i);
            row.mask_off = a.mask ? b * a.ms[0] + h * a.ms[1] + i * a.ms[2] : 0;
            row.bias_off = att_bias_row(a, b, h, i);
            rows[tid] = row;
        }
        if (s.dk16 > D) {
            const int pad = s.dk16 - D;
            for (int e = tid; e < s.stages * s.tk * pad; e += nt) {
                const int r = e / pad, c = D + (e - r * pad);
                unsigned char *p = k_ring + r * s.kpitch + c * EB; /* rows of all stages: one pitch */
                if constexpr (EB == 4)
                    *(uint32_t *)p = 0u;
                else
                    *(uint16_t *)p = 0;
            }
        }
        __syncthreads();

        DecWarp<DT, DMAX, MMA> st;
        st.init(a, s, rows, lane);
        const char *kb = (const char *)a.k + (b * a.ks[0] + hk * a.ks[1]) * EB;
        const char *vb = (const char *)a.v + (b * a.vs[0] + hk * a.vs[1]) * EB;
        auto stage = [&](int t) {
            const int slot = t % s.stages;
            const int64_t j0 = s.j_begin + (t0 + t) * s.tk;
            dec_stage_rows<DT>(k_ring + (size_t)slot * s.stage_k, s.kpitch, kb, a.ks[2] * EB, j0, s.tk, s.j_end, D,
                               a.vec_kv != 0);
            dec_stage_rows<DT>(v_ring + (size_t)slot * s.stage_v, s.vpitch, vb, a.vs[2] * EB, j0, s.tk, s.j_end, Dv,
                               a.vec_kv != 0);
        };

        /* the ring: tiles 0 .. stages - 2 in flight before the first is computed; one group per
         * tile (empty ones too), so that "stages - 2 pending" means "tile t has landed" */
        for (int t = 0; t < s.stages - 1; t++) {
            if (t < ntiles)
                stage(t);
            rdg_copy_async_commit();
        }
        for (int t = 0; t < ntiles; t++) {
            rdg_copy_async_wait_n(s.stages - 2);
            __syncthreads(); /* tile t is in for every thread; tile t - 1's readers are done */
            if (t + s.stages - 1 < ntiles)
                stage(t + s.stages - 1); /* into tile t - 1's slot */
            rdg_copy_async_commit();
            const int slot = t % s.stages;
            const int64_t tj0 = s.j_begin + (t0 + t) * s.tk;
            if constexpr (MMA)
                st.tile(a, s, q_sm, k_ring + (size_t)slot * s.stage_k, v_ring + (size_t)slot * s.stage_v, tj0, scr,
                        warp, lane);
            else
                st.tile(a, s, rows, q_sm, k_ring + (size_t)slot * s.stage_k, v_ring + (size_t)slot * s.stage_v, tj0,
                        scr, warp, lane);
        }
        rdg_copy_async_wait_n(0);
        __syncthreads(); /* the rings are free for the merge */

        /* merge the warps: weights exp(m_w - M) / L per row, then each output element */
        st.flush(s, Dv, mg_acc, mg_m, mg_l, warp, lane);
        __syncthreads();
        if (tid < R) {
            float M = -INFINITY;
            for (int w = 0; w < nw; w++)
                M = fmaxf(M, mg_m[w * DEC_RM + tid]);
            float L = 0.0f;
            for (int w = 0; w < nw; w++) {
                const float f = M == -INFINITY ? 0.0f : expf(mg_m[w * DEC_RM + tid] - M); /* a warp that saw nothing: 0 */
                mg_w[w * DEC_RM + tid] = f;
                L = fmaf(mg_l[w * DEC_RM + tid], f, L);
            }
            const float inv = L > 0.0f ? 1.0f / L : 0.0f;
            for (int w = 0; w < nw; w++)
                mg_w[w * DEC_RM + tid] *= inv;
            mg_M[tid] = M;
            mg_L[tid] = L;
        }
        __syncthreads();
        for (int e = tid; e < R * Dv; e += nt) {
            const int r = e / Dv, c = e - r * Dv;
            float o = 0.0f;
            for (int w = 0; w < nw; w++)
                o = fmaf(mg_w[w * DEC_RM + r], mg_acc[(size_t)(w * DEC_RM + r) * Dv + c], o);
            if (s.splits == 1) {
                const int64_t h = hk * G + r / Sq, i = r % Sq;
                Elem<DT>::st((char *)a.out + (b * a.os[0] + h * a.os[1] + i * a.os[2]) * EB, c, o);
            } else {
                ws[(item * R + r) * Dv + c] = o;
            }
        }
        if (tid < R) {
            const float L = mg_L[tid];
            const float lse = L > 0.0f ? mg_M[tid] + logf(L) : -INFINITY;
            if (s.splits == 1) {
                const int64_t h = hk * G + tid / Sq, i = tid % Sq;
                if (a.lse)
                    a.lse[(b * a.heads_q + h) * Sq + i] = lse;
            } else {
                ws[items * R * Dv + item * R + tid] = lse;
            }
        }
    }
}

/* Split-KV's second step: each output row (b, hk, r) from its splits' normalized partials and
 * lse: out = sum_x exp(lse_x - M) o_x / sum_x exp(lse_x - M), lse = M + log(sum). One CTA per
 * row in a grid-stride loop, threads over the columns. */
template <int DT>
__global__ void RDG_LAUNCH_BOUNDS(ATT_DEC_MERGE_THREADS, 1)
    att_decode_merge_kernel(const rdg_att_args a, const DecShape s, const float *ws)
{
    constexpr int EB = att_elem_bytes<DT>();
    __shared__ float part[ATT_DEC_MAX_SPLITS], weight[ATT_DEC_MAX_SPLITS];
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
    const int R = s.rows, Dv = a.dv, S = s.splits;
    const int64_t items = a.batch * s.heads_kv * S;
    const float *ws_lse = ws + items * R * Dv;
    const int64_t nrows = a.batch * s.heads_kv * R;
    for (int64_t row = blockIdx.x; row < nrows; row += gridDim.x) {
        const int64_t bk = row / R;
        const int r = (int)(row - bk * R);
        __syncthreads(); /* the previous row's readers are done */
        if (tid < S)
            part[tid] = ws_lse[(bk * S + tid) * R + r];
        __syncthreads();
        float M = -INFINITY;
        for (int x = 0; x < S; x++)
            M = fmaxf(M, part[x]);
        float L = 0.0f;
        if (M != -INFINITY)
            for (int x = 0; x < S; x++)
                L += expf(part[x] - M); /* a split that saw nothing: 0 */
        if (tid < S)
            weight[tid] = M == -INFINITY ? 0.0f : expf(part[tid] - M) / L;
        __syncthreads();
        const int64_t hk = bk % s.heads_kv, b = bk / s.heads_kv;
        const int64_t h = hk * a.group + r / a.seq_q, i = r % a.seq_q;
        void *ob = (char *)a.out + (b * a.os[0] + h * a.os[1] + i * a.os[2]) * EB;
        for (int c = tid; c < Dv; c += nt) {
            float o = 0.0f;
            for (int x = 0; x < S; x++)
                o = fmaf(weight[x], ws[((bk * S + x) * R + r) * Dv + c], o);
            Elem<DT>::st(ob, c, o);
        }
        if (tid == 0 && a.lse)
            a.lse[(b * a.heads_q + h) * a.seq_q + i] = M == -INFINITY ? -INFINITY : M + logf(L);
    }
}

/* ------------------------------------------------------------------------------------- host */

size_t dec_align16(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

/* Bytes of the warps' merge area (the file comment). */
size_t dec_merge_bytes(int warps, int64_t dv)
{
    return ((size_t)warps * DEC_RM * ((size_t)dv + 3) + 2 * DEC_RM) * sizeof(float);
}

/* The split count of the keys of one (b, hk), from the device's SM count: the count (<=
 * ATT_DEC_MAX_SPLITS, <= tiles, no empty split) that minimises the modelled time, ties to fewer.
 * The model: the kernel streams at full speed while at least sat = SMs x
 * ATT_DEC_SATURATING_CTAS_PER_SM CTAs run, so n CTAs of `per` tiles cost their work n (per +
 * ATT_DEC_FILL_TILES), plus, where the last wave of CTA slots (SMs x CTAs per SM) holds fewer
 * than sat CTAs, the idle share of the GPU; splitting adds the merge kernel (ATT_DEC_MERGE_TILES
 * of a saturated GPU). B 64 and 128 of the benchmark (512, 1024 CTAs on 132 SMs x 2): no split;
 * B 1: 16 splits of Skv 8192. Sets tiles_per_split and splits. */
void dec_splits(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, int ctas_per_sm, DecShape *s)
{
    const int64_t items0 = plan->batch * plan->heads_kv, tiles = s->n_tiles;
    const int64_t sms = dev->sm_count > 0 ? dev->sm_count : 1;
    const int64_t slots = sms * ctas_per_sm, sat = sms * ATT_DEC_SATURATING_CTAS_PER_SM;
    int64_t best = 1, best_cost = -1;
    for (int64_t want = 1; want <= ATT_DEC_MAX_SPLITS && want <= (tiles > 1 ? tiles : 1); want++) {
        const int64_t per = tiles > 0 ? rdg_ceil_div(tiles, want) : 0;
        const int64_t n = tiles > 0 ? rdg_ceil_div(tiles, per) : 1; /* no empty split */
        if (n != want)
            continue;
        const int64_t ctas = items0 * n, tail = ctas % slots;
        const int64_t idle = tail > 0 && tail < sat ? sat - tail : 0;
        const int64_t cost = (ctas + idle) * (per + ATT_DEC_FILL_TILES) + (n > 1 ? ATT_DEC_MERGE_TILES * sat : 0);
        if (best_cost < 0 || cost < best_cost) {
            best = n;
            best_cost = cost;
        }
    }
    s->splits = (int)best;
    s->tiles_per_split = tiles > 0 ? rdg_ceil_div(tiles, best) : 0;
}

/* The shape of flash_decode for plan on dev: 1, or 0 with why. The one place it is chosen:
 * the way (MMA or SIMT), warps, stages (enough for ATT_DEC_INFLIGHT_PER_SM at
 * ATT_DEC_CTAS_PER_SM CTAs per SM, else at fewer CTAs, else with fewer warps), the key range and
 * the split. */
int dec_config(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, DecConfig *c, char *why, size_t cap)
{
    memset(c, 0, sizeof *c);
    DecShape &s = c->s;
    const int64_t group = plan->heads_q / plan->heads_kv;
    if (group > ATT_DEC_MAX_ROWS || plan->seq_q * group > ATT_DEC_MAX_ROWS) {
        snprintf(why, cap, "decode shapes only: Sq * (Hq/Hkv) = %lld * %lld exceeds %d query rows per K/V head",
                 (long long)plan->seq_q, (long long)group, ATT_DEC_MAX_ROWS);
        return 0;
    }
    const int eb = plan->dtype == RUDNN_F32 ? 4 : 2;
    c->mma = !RDG_HIP && plan->dtype != RUDNN_F32 && dev->arch >= 80;
    const int64_t dmax = plan->head_dim > plan->head_dim_v ? plan->head_dim : plan->head_dim_v;
    c->dmax = dmax <= 64 ? 64 : dmax <= 128 ? 128 : 256;
    const int w = dev->warp_size > 0 ? dev->warp_size : 32;
    s.rows = (int)(plan->seq_q * group);
    s.dk16 = (int)((plan->head_dim + 15) / 16 * 16);
    s.dv16 = (int)((plan->head_dim_v + 15) / 16 * 16);
    s.kpitch = s.dk16 * eb + 16;
    s.vpitch = s.dv16 * eb + 16;
    s.qpitch = c->mma ? s.dk16 * 2 + 16 : (s.dk16 + 4) * 4;
    s.off_rows = DEC_RM * s.qpitch;
    s.off_scr = s.off_rows + DEC_RM * (int)sizeof(DecRow);
    s.heads_kv = plan->heads_kv;

    const size_t smem_sm = dev->smem_optin + RDG_SMEM_RESERVED;
    int found = 0;
    for (int nw = ATT_DEC_WARPS; nw >= 1 && !found; nw /= 2) {
        if (dev->max_threads > 0 && nw * w > dev->max_threads)
            continue;
        const int tk = nw * DEC_KW;
        const size_t off_k = dec_align16((size_t)s.off_scr + (c->mma ? 0 : (size_t)nw * DEC_SCR_FLOATS * 4));
        const size_t stage_k = (size_t)tk * s.kpitch, stage_v = (size_t)tk * s.vpitch;
        const size_t stage = stage_k + stage_v, merge = dec_merge_bytes(nw, plan->head_dim_v);
        for (int ctas = ATT_DEC_CTAS_PER_SM; ctas >= 1 && !found; ctas--) {
            size_t budget = smem_sm / ctas;
            budget = budget > RDG_SMEM_RESERVED ? budget - RDG_SMEM_RESERVED : 0;
            if (budget > dev->smem_optin)
                budget = dev->smem_optin;
            /* stages - 1 tiles in flight while one is computed */
            int stages = 1 + (int)rdg_ceil_div(ATT_DEC_INFLIGHT_PER_SM / ctas, stage);
            stages = stages < 2 ? 2 : stages > ATT_DEC_MAX_STAGES ? ATT_DEC_MAX_STAGES : stages;
            for (; stages >= 2; stages--) {
                const size_t rings = (size_t)stages * stage;
                if (off_k + (rings > merge ? rings : merge) <= budget)
                    break;
            }
            if (stages < 2)
                continue;
            const size_t rings = (size_t)stages * stage;
            s.warps = nw;
            s.tk = tk;
            s.stages = stages;
            s.off_k = (int)off_k;
            s.stage_k = (int)stage_k;
            s.stage_v = (int)stage_v;
            s.off_v = (int)(off_k + (size_t)stages * stage_k);
            c->threads = nw * w;
            c->ctas_per_sm = ctas;
            c->smem = off_k + (rings > merge ? rings : merge);
            found = 1;
        }
    }
    if (!found) {
        snprintf(why, cap, "the decode tiles for D %lld, Dv %lld (%d-byte elements) exceed the device's shared "
                 "memory (%zu bytes)", (long long)plan->head_dim, (long long)plan->head_dim_v, eb, dev->smem_optin);
        return 0;
    }

    /* the keys any row sees: from row 0's lo to row Sq - 1's hi (both grow with i) */
    const int64_t off = plan->seq_kv - plan->seq_q;
    const int64_t lo0 = plan->window_left < 0 ? 0 : off - plan->window_left;
    const int64_t hi_last = plan->window_right < 0 ? plan->seq_kv - 1 : plan->seq_q - 1 + off + plan->window_right;
    s.j_begin = lo0 > 0 ? lo0 : 0;
    s.j_end = hi_last < plan->seq_kv - 1 ? hi_last : plan->seq_kv - 1;
    s.n_tiles = s.j_end >= s.j_begin ? rdg_ceil_div(s.j_end - s.j_begin + 1, s.tk) : 0;
    dec_splits(dev, plan, c->ctas_per_sm, &s);
    c->items = plan->batch * plan->heads_kv * s.splits;
    c->ws_bytes = 0;
    if (s.splits > 1) {
        const uint64_t per_item = (uint64_t)s.rows * ((uint64_t)plan->head_dim_v + 1) * sizeof(float);
        if ((uint64_t)c->items > UINT64_MAX / per_item || (uint64_t)c->items * per_item > (uint64_t)SIZE_MAX) {
            snprintf(why, cap, "the split-KV workspace of %lld work items overflows", (long long)c->items);
            return 0;
        }
        c->ws_bytes = (uint64_t)c->items * per_item;
    }
    return 1;
}

typedef void (*dec_fn)(const rdg_att_args, const DecShape, float *);
typedef void (*dec_merge_fn)(const rdg_att_args, const DecShape, const float *);

template <int DT, bool MMA>
dec_fn dec_kernel_d(int dmax)
{
    return dmax == 64 ? att_decode_kernel<DT, 64, MMA>
           : dmax == 128 ? att_decode_kernel<DT, 128, MMA>
                         : att_decode_kernel<DT, 256, MMA>;
}

dec_fn dec_kernel(rudnn_dtype_t dt, const DecConfig &c)
{
#if !RDG_HIP
    if (c.mma)
        return dt == RUDNN_F16 ? dec_kernel_d<RUDNN_F16, true>(c.dmax) : dec_kernel_d<RUDNN_BF16, true>(c.dmax);
#endif
    return dt == RUDNN_F32   ? dec_kernel_d<RUDNN_F32, false>(c.dmax)
           : dt == RUDNN_F16 ? dec_kernel_d<RUDNN_F16, false>(c.dmax)
                             : dec_kernel_d<RUDNN_BF16, false>(c.dmax);
}

dec_merge_fn dec_merge_kernel(rudnn_dtype_t dt)
{
    return dt == RUDNN_F32   ? att_decode_merge_kernel<RUDNN_F32>
           : dt == RUDNN_F16 ? att_decode_merge_kernel<RUDNN_F16>
                             : att_decode_merge_kernel<RUDNN_BF16>;
}

/* DEVICE_ERROR naming the kernel when the launch just made failed. */
rudnn_status_t dec_launched(const char *what, int64_t grid, int threads, size_t smem)
{
    const cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        return RUDNN_STATUS_SUCCESS;
    char msg[192];
    snprintf(msg, sizeof msg, " kernel launch (" ATT_FLASH_DECODE_NAME "%s, grid %lld, block %d, smem %zu)", what,
             (long long)grid, threads, smem);
    return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, msg);
}

} // namespace

const char *rdg_att_decode_unfit(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, char *why, size_t cap)
{
    DecConfig c;
    return dec_config(dev, plan, &c, why, cap) ? nullptr : why;
}

uint64_t rdg_att_decode_ws_bytes(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan)
{
    DecConfig c;
    char why[256];
    return dec_config(dev, plan, &c, why, sizeof why) ? c.ws_bytes : 0;
}

rudnn_status_t rdg_att_run_decode(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a,
                                  rudnn_mem_ref_t workspace)
{
    DecConfig c;
    char why[256];
    if (!dec_config(&q->dev, plan, &c, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": %s: " ATT_FLASH_DECODE_NAME ": %s",
                         RUDNN_GPU_BACKEND_NAME, why);
    float *ws = (float *)rdg_at(workspace);
    if (c.s.splits > 1 && (!ws || ((uintptr_t)ws & 3u) != 0))
        return rdg_error(RUDNN_STATUS_INTERNAL, ATT_OP ": %s: " ATT_FLASH_DECODE_NAME " got no (aligned) workspace",
                         RUDNN_GPU_BACKEND_NAME);
    const dec_fn fn = dec_kernel(plan->dtype, c);
    TRY(rdg_att_allow_smem(q, (const void *)fn, c.smem));
    const int64_t grid = c.items < ATT_MAX_GRID ? c.items : ATT_MAX_GRID;
    (void)cudaGetLastError(); /* the checks below see these launches only */
    rdg_note_kernel(ATT_FLASH_DECODE_NAME);
    fn<<<dim3((unsigned)grid), dim3((unsigned)c.threads), c.smem, q->stream>>>(a, c.s, ws);
    TRY(dec_launched("", grid, c.threads, c.smem));
    if (c.s.splits > 1) {
        const int64_t rows = plan->batch * plan->heads_kv * c.s.rows;
        const int64_t mgrid = rows < ATT_MAX_GRID ? rows : ATT_MAX_GRID;
        dec_merge_kernel(plan->dtype)<<<dim3((unsigned)mgrid), dim3(ATT_DEC_MERGE_THREADS), 0, q->stream>>>(a, c.s,
                                                                                                          ws);
        TRY(dec_launched(" merge", mgrid, ATT_DEC_MERGE_THREADS, 0));
    }
    return RUDNN_STATUS_SUCCESS;
}
