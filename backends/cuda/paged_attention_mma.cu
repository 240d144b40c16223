/* paged_attention.mma_decode and paged_attention.mma_prefill (CUDA only, sm_80+): paged attention
 * on mma.sync m16n8k16 with FP32 accumulation, F16/BF16, D and Dv multiples of 8 up to 256,
 * 16-byte aligned operands. Decode streams K and V from the pages once for every query head of a
 * KV head, and that is all it does, so everything here serves the stream:
 *   - one CTA per (KV head, row chunk, split, query block), the KV head fastest (its neighbours
 *     read the other heads of the same pages at about the same time); its rows are the G = Hq /
 *     Hkv query heads of the block's queries (row r: query r / G, head hk G + r % G), so each K/V
 *     row is read once for all of them (a block of 2^kind queries, kind chosen so rows fill the
 *     CTA; one query with more than a CTA's rows takes several row chunks);
 *   - K and V tiles of TK keys are staged raw with 16-byte cp.async (the page of each key from the
 *     plan's table, keys past the split's end zero-filled) into a ring of `stages` buffers, about
 *     PA_INFLIGHT_PER_SM bytes an SM in flight while one tile is computed;
 *   - S = Q K^T and O += P V on m16n8k16 from ldmatrix fragments; the scores in base 2 (scale *
 *     log2 e folded in), masked per row at its own limit (causal: min(len, pos + 1); the split's
 *     end), online softmax per row in FP32; P rounded to the dtype for P V (as FlashAttention and
 *     cuDNN do). A P V step whose 16 keys some row sees only in part (causal diagonals) first has
 *     the warp check V there for non-finite values, and if it finds one runs on the SIMT cores
 *     with each row's own mask: the MMA would hand that row 0 x NaN (the contract: a NaN reaches
 *     only the rows it enters).
 * Two shapes of a CTA (mma_config chooses, the one place: prefill where G > 16, or where its
 * blocks of up to 64 / G queries number at most 1 / PA_PRE_BLOCK_RATIO of decode's of 16 / G):
 *   - decode: one m16 tile of rows; PA_DEC_KEY_WARPS warps split each 64-key tile (16 keys each),
 *     each with its own softmax state, merged through shared memory at the end;
 *   - prefill: PA_PRE_ROW_WARPS warps of 16 rows each (64 rows), every warp all keys of a tile, so
 *     a staged tile serves 64 rows; a warp skips the tiles past its rows' limits (causal).
 * Shared memory (MmaShape offsets): Q [rows][qpitch] | PaRow [rows] | K ring [stages][TK][kpitch]
 * | V ring [stages][TK][vpitch]. Pitches are the row padded to 16 elements plus 16 bytes: an odd
 * number of 16-byte units, so the 8 rows of an ldmatrix fall in distinct banks. K's pad columns
 * D .. D16 are zeroed (they meet Q's zero pad); V's pad feeds only columns never stored. The decode
 * merge reuses the rings: acc [warps][rows][Dv] | m, l, weight [warps][rows] | L [rows].
 * Split decode with workspace counters (PA_FUSED_MERGE) merges the splits in the same launch: the
 * last CTA of a (query block, row chunk, KV head) group to count in merges (mma_ticket_merge). */
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"

#include "mma_sync.cuh"
#include "paged_attention.cuh"
#include "pdl.cuh"
#include "paged_attention_tuning.h"

static_assert(PA_MAX_STAGES >= 2 && PA_MAX_STAGES <= 8, "rdg_copy_async_wait_n covers 0 .. 6 pending groups");
static_assert(PA_PRE_KEYS % 16 == 0 && PA_PRE_KEYS_D256 % 16 == 0, "prefill keys: whole k16 steps of P V");

namespace {

constexpr int DEC_KW = 16; /* decode: keys a warp takes of each tile (the k of one P V MMA) */

/* What the kernel reads besides PaDev; mma_config fills it. */
struct MmaShape {
    int chunks;                          /* row chunks of a block */
    int stages;                          /* ring buffers */
    int dk16, dv16;                      /* D, Dv rounded up to 16 */
    int kpitch, vpitch, qpitch;          /* bytes a staged K row, V row, Q row */
    int off_rows, off_k, off_v;          /* shared-memory byte offsets (file comment) */
    int dv;                              /* Dv: V's columns that hold data (the pad does not) */
    int stage_k, stage_v;                /* bytes of one K tile, one V tile */
};

struct MmaConfig {
    MmaShape s;
    int prefill; /* warps over rows (else over the keys of a tile) */
    int kind;    /* the query blocks' kind */
    int dmax;    /* max(D16, Dv16) as 64, 128 or 256: the accumulator's columns */
    int threads;
    size_t smem;
    int64_t items;
};

/* ---------------------------------------------------------------------------- device helpers */

/* Stages keys j0 .. j0 + TK - 1 of KV head hk (keys at or past k1 zero-filled) into a K and a V
 * slot. Thread -> (16-byte chunk c of the widest row, rows r0 + RPP n): one division places its
 * first row in a page; later rows step by RPP, adding to byte offsets within the page, and only a
 * row that enters another page reads the table and multiplies. The division and the 64-bit
 * products of every row were most of the decode kernel's instructions (issue-bound). */
template <int DMAX, int NT, int TK>
__device__ __forceinline__ void mma_stage(const PaDev &d, const MmaShape &s, const int32_t *table, int hk,
                                          int64_t j0, int k1, unsigned char *ks, unsigned char *vs)
{
    constexpr int CPR = DMAX / 8, RPP = NT / CPR;
    static_assert(NT % CPR == 0 && TK % RPP == 0, "whole rows a pass");
    const int tid = (int)threadIdx.x, c = tid % CPR, r0 = tid / CPR;
    const bool kc = c < d.d / 8, vc = c < d.dv / 8;
    /* bytes a cache row of K and of V (page_size rows a page); head hk's chunk c within a row */
    const int64_t krow = (int64_t)d.heads_kv * d.d * 2, vrow = (int64_t)d.heads_kv * d.dv * 2;
    const char *kb = (const char *)d.k + ((int64_t)hk * d.d * 2 + c * 16);
    const char *vb = (const char *)d.v + ((int64_t)hk * d.dv * 2 + c * 16);
    const uint32_t ps = (uint32_t)d.page_size;
    const uint32_t j = (uint32_t)j0 + (uint32_t)r0; /* keys are below 2^31 */
    uint32_t pi = pa_div(d.ps, j), slot = j - pi * ps;
    const char *kp = kb, *vp = vb; /* the row's page (row 0, a valid address, past k1) */
    int64_t ko = 0, vo = 0;        /* the row's offset in it */
    const int64_t left = k1 - j0; /* rows r below this hold keys */
    auto enter = [&](int r) { /* a new page for row r (past k1: none, no table read) */
        if (r < left) {
            const int64_t first = (int64_t)table[pi] * ps;
            kp = kb + first * krow, vp = vb + first * vrow;
            ko = slot * krow, vo = slot * vrow;
        } else {
            kp = kb, vp = vb, ko = 0, vo = 0;
        }
    };
    enter(r0);
#pragma unroll
    for (int n = 0; n < TK / RPP; n++) {
        const int r = r0 + n * RPP;
        const bool ok = r < left;
        if (kc)
            rdg_copy16_async_zfill(ks + r * s.kpitch + c * 16, kp + ko, ok);
        if (vc)
            rdg_copy16_async_zfill(vs + r * s.vpitch + c * 16, vp + vo, ok);
        if (n + 1 < TK / RPP) {
            slot += RPP;
            if (slot < ps) {
                ko += RPP * krow, vo += RPP * vrow;
            } else {
                do { /* once where page_size >= RPP */
                    slot -= ps;
                    pi++;
                } while (slot >= ps);
                enter(r + RPP);
            }
        }
    }
}

#if PA_STAGE_BLOCKED
/* 16 bytes global -> shared (a shared-window address), zeros where !ok (src-size 0: nothing read). */
__device__ __forceinline__ void mma_cp16(uint32_t dst, const void *src, bool ok)
{
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0)
                 : "memory");
}

/* RB rows of one page (pitch bytes apart in shared memory, step bytes in the cache) from src, the
 * first nok of them (the rest zero-filled). Full blocks take the path without a predicate: an
 * add to each address and the copy, 4 instructions a row. */
template <int RB>
__device__ __forceinline__ void mma_cp_rows(uint32_t dst, int pitch, const char *src, int64_t step, int nok)
{
    if (nok == RB) {
#pragma unroll
        for (int n = 0; n < RB; n++, dst += pitch, src += step)
            mma_cp16(dst, src, true);
    } else {
#pragma unroll
        for (int n = 0; n < RB; n++, dst += pitch, src += step)
            mma_cp16(dst, src, n < nok);
    }
}

/* The blocked staging's map: thread -> 16-byte chunk c of the widest row, rows RB b .. RB b + RB - 1
 * (b = thread / CPR). A tile's first key is a multiple of 16 (whole 16-key split chunks, TK a
 * multiple of 16) and RB divides 16, so where page_size % RB == 0 a thread's rows lie in one page:
 * one table entry a tile, read a tile ahead (mma_stage_page) off the dependent path. */
template <int DMAX, int NT, int TK>
struct StageMap {
    static constexpr int CPR = DMAX / 8, RPP = NT / CPR, RB = TK / RPP;
    static_assert(NT % CPR == 0 && TK % RPP == 0 && 16 % RB == 0, "whole rows a pass, blocks inside 16 keys");
};

/* The page id of the thread's first row of the tile at key j0 (0 where it holds no key). */
template <int DMAX, int NT, int TK>
__device__ __forceinline__ int32_t mma_stage_page(const PaDev &d, const int32_t *table, int64_t j0, int k1)
{
    using M = StageMap<DMAX, NT, TK>;
    const int64_t j = j0 + (int64_t)((int)threadIdx.x / M::CPR) * M::RB;
    return j < k1 ? table[pa_div(d.ps, (uint32_t)j)] : 0;
}

/* mma_stage with the blocked map: page, the thread's page (mma_stage_page) where page_size % RB ==
 * 0; else a walk row by row, the table read at each page it enters. Past k1 the source stays
 * inside a page of the cache (zero-filled, never read). */
template <int DMAX, int NT, int TK>
__device__ __forceinline__ void mma_stage_blocked(const PaDev &d, const MmaShape &s, const int32_t *table, int hk,
                                                  int64_t j0, int k1, unsigned char *ks, unsigned char *vs,
                                                  int32_t page)
{
    using M = StageMap<DMAX, NT, TK>;
    constexpr int RB = M::RB;
    const int tid = (int)threadIdx.x, c = tid % M::CPR, r0 = tid / M::CPR * RB;
    const bool kc = c < d.d / 8, vc = c < d.dv / 8;
    const int64_t krow = (int64_t)d.heads_kv * d.d * 2, vrow = (int64_t)d.heads_kv * d.dv * 2;
    const char *kb = (const char *)d.k + ((int64_t)hk * d.d * 2 + c * 16);
    const char *vb = (const char *)d.v + ((int64_t)hk * d.dv * 2 + c * 16);
    const uint32_t ps = (uint32_t)d.page_size;
    const uint32_t j = (uint32_t)j0 + (uint32_t)r0;
    uint32_t pi = pa_div(d.ps, j), slot = j - pi * ps;
    const int64_t left = k1 - j0;
    const uint32_t kd = rdg_smem_addr(ks + r0 * s.kpitch + c * 16), vd = rdg_smem_addr(vs + r0 * s.vpitch + c * 16);
    if (ps % RB == 0) {
        const int64_t row = r0 < left ? (int64_t)page * ps + slot : slot;
        const int nok = left - r0 <= 0 ? 0 : left - r0 >= RB ? RB : (int)(left - r0);
        if (kc)
            mma_cp_rows<RB>(kd, s.kpitch, kb + row * krow, krow, nok);
        if (vc)
            mma_cp_rows<RB>(vd, s.vpitch, vb + row * vrow, vrow, nok);
        return;
    }
    const char *ka, *va;
    auto enter = [&](int r) {
        const int64_t row = r < left ? (int64_t)table[pi] * ps + slot : slot;
        ka = kb + row * krow, va = vb + row * vrow;
    };
    enter(r0);
#pragma unroll
    for (int n = 0; n < RB; n++) {
        const bool ok = r0 + n < left;
        if (kc)
            mma_cp16(kd + n * s.kpitch, ka, ok);
        if (vc)
            mma_cp16(vd + n * s.vpitch, va, ok);
        if (n + 1 < RB) {
            if (++slot < ps) {
                ka += krow, va += vrow;
            } else {
                slot = 0;
                pi++;
                enter(r0 + n + 1);
            }
        }
    }
}
#endif

/* The fused merge's end of a split CTA (d.tickets): its partials (written) counted in on the
 * group's counter; the CTA that draws the last ticket merges the group's rows over every split
 * into out, a warp an (output row, 128 columns) unit, and resets the counter. flag: an int of
 * shared memory free here. The count-in is one gpu-scope acquire-release atomic after the CTA's
 * barrier (as CUTLASS's semaphores): one L2 round trip where a fence by every thread, the ticket
 * and a fence in the merging CTA took two (B 1 KV 2k, whose slowest CTA waits out this chain: 3%
 * faster on an H100). */
template <int DT, int NW>
__device__ __forceinline__ void mma_ticket_merge(const PaDev &d, const PaRow *rows, int nrows, int64_t group,
                                                 int *flag, int warp, int lane)
{
    __syncthreads(); /* the CTA's partials written: the release below is cumulative over them */
    if (threadIdx.x == 0) {
        uint32_t t;
        asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;\n" : "=r"(t) : "l"(d.tickets + group) : "memory");
        const int last = t == (uint32_t)d.splits - 1;
        if (last)
            d.tickets[group] = 0; /* every split counted: zero for the next call (and graph replays) */
        *flag = last;
    }
    __syncthreads(); /* the acquire's view of the others' partials, for every thread of the CTA */
    if (!*flag)
        return;
    const int chunks = (d.dv + 127) / 128;
    for (int u = warp; u < nrows * chunks; u += NW) {
        const int r = u / chunks, ch = u - r * chunks;
        pa_merge_row<DT>(d, rows[r].i, rows[r].h, ch * 128 + 4 * lane, lane);
    }
}

/* A warp's 16 rows (r0 .. r0 + 15 of the CTA) over its KW keys of every tile: its online softmax
 * (m, l in base 2) and FP32 accumulators. Lane (g, t) = (lane / 4, lane % 4) holds rows g and
 * g + 8 (h = 0, 1): scores of keys 8 n + 2 t + {0, 1} and output columns 8 n + 2 t + {0, 1}; l
 * is the lane's share of its row sum (the quad's four are added at the end), m the quad's. */
template <int DT, int DMAX, int KW>
struct MmaWarp {
    float acc[DMAX / 8][4];
    float m[2], l[2];
    int lim[2];
    int wlim; /* the largest limit of the warp's rows: tiles from it on are skipped */
    int wmin; /* the smallest nonzero one: keys from it on are not seen by every row */
    int k1;   /* the CTA's last key + 1 (every limit is at most this) */

    __device__ __forceinline__ void init(const PaRow *rows, int r0, int cta_k1, int lane)
    {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            lim[h] = rows[r0 + lane / 4 + 8 * h].lim;
            m[h] = -INFINITY;
            l[h] = 0.0f;
        }
        k1 = cta_k1;
        wlim = max(lim[0], lim[1]);
        wmin = min(lim[0] > 0 ? lim[0] : k1, lim[1] > 0 ? lim[1] : k1);
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            wlim = max(wlim, __shfl_xor_sync(0xffffffffu, wlim, o));
            wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
        }
#pragma unroll
        for (int n = 0; n < DMAX / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[n][e] = 0.0f;
    }

    /* One tile: q_sm the warp's first Q row, k_sm / v_sm its first key's rows, jw that key. */
    __device__ __forceinline__ void tile(const MmaShape &s, const unsigned char *q_sm, const unsigned char *k_sm,
                                         const unsigned char *v_sm, int64_t jw, float scale_log2, int lane)
    {
        const int t = lane % 4;
        int rel[2]; /* the rows' limits from jw on, 0 .. KW */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t x = lim[h] - jw;
            rel[h] = x < 0 ? 0 : x > KW ? KW : (int)x;
        }
        /* ldmatrix row addresses (8 lanes an 8x8 matrix, in fragment order): Q (A): rows lane % 8
         * + 8 ((lane / 8) % 2), d 8 (lane / 16); K (B of S, n = key): keys lane % 8 + 8 (lane /
         * 16), d 8 ((lane / 8) % 2); V (B of P V, transposed): keys lane % 8 + 8 ((lane / 8) % 2),
         * columns 8 (lane / 16). */
        const uint32_t qa = rdg_smem_addr(q_sm) + (uint32_t)(((lane % 8) + 8 * ((lane / 8) % 2)) * s.qpitch +
                                                             16 * (lane / 16));
        const uint32_t ka = rdg_smem_addr(k_sm) + (uint32_t)(((lane % 8) + 8 * (lane / 16)) * s.kpitch +
                                                             16 * ((lane / 8) % 2));
        const uint32_t va = rdg_smem_addr(v_sm) + (uint32_t)(((lane % 8) + 8 * ((lane / 8) % 2)) * s.vpitch +
                                                             16 * (lane / 16));

        /* S = Q K^T: sc[n] is the m16n8 tile of keys 8 n .. 8 n + 7 */
        float sc[KW / 8][4];
#pragma unroll
        for (int n = 0; n < KW / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sc[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DMAX / 16; kk++) {
            if (kk * 16 < s.dk16) {
                uint32_t af[4];
                rdg_ldsm_x4(qa + kk * 32, af);
#pragma unroll
                for (int kb = 0; kb < KW / 16; kb++) {
                    uint32_t bf[4];
                    rdg_ldsm_x4(ka + (uint32_t)(kb * 16 * s.kpitch) + kk * 32, bf);
                    mma16816<DT>(sc[2 * kb], af, bf[0], bf[1]);
                    mma16816<DT>(sc[2 * kb + 1], af, bf[2], bf[3]);
                }
            }
        }

        /* base-2 scores, -inf past each row's limit; element e: row g + 8 (e / 2), key 2 t + e % 2 */
#pragma unroll
        for (int n = 0; n < KW / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sc[n][e] = 8 * n + 2 * t + e % 2 < rel[e / 2] ? sc[n][e] * scale_log2 : -INFINITY;

        /* online softmax per row: the quad's maximum, p in place, acc rescaled (skipped by the warp
         * where no row's maximum moved: after the first tiles, almost always) */
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mt = -INFINITY;
#pragma unroll
            for (int n = 0; n < KW / 8; n++)
                mt = fmaxf(mt, fmaxf(sc[n][2 * h], sc[n][2 * h + 1]));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
            const float m_new = fmaxf(m[h], mt);
            alpha[h] = m_new == -INFINITY ? 1.0f : exp2f(m[h] - m_new); /* never exp2(-inf - -inf) */
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < KW / 8; n++)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; e++) {
                    const float p = pa_weight(sc[n][e], m_new);
                    sc[n][e] = p;
                    sum += p;
                }
            l[h] = l[h] * alpha[h] + sum;
            m[h] = m_new;
        }
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f))
#pragma unroll
            for (int n = 0; n < DMAX / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[n][e] *= alpha[e / 2];

        /* acc += P V by k16 steps of keys: P as the A fragment (rows g, g + 8; keys 2 t .. and
         * 8 + 2 t ..), V by ldmatrix.trans, 16 output columns (two n8 tiles) an ldmatrix; where
         * some row sees only part of the step's keys and V holds a non-finite value there, the
         * step on the SIMT cores (pv_masked) */
#pragma unroll
        for (int kq = 0; kq < KW / 16; kq++) {
            const int64_t ks = jw + 16 * kq, ke = ks + 16 < k1 ? ks + 16 : k1;
            if (wmin < ke && !pa_finite16<DT>(v_sm + kq * 16 * s.vpitch, s.vpitch, s.dv / 8, lane)) {
                pv_masked(s, sc[2 * kq], sc[2 * kq + 1], v_sm + kq * 16 * s.vpitch, 16 * kq, rel, lane);
                continue;
            }
            uint32_t pa[4];
            pa[0] = pa_pack2<DT>(sc[2 * kq][0], sc[2 * kq][1]);
            pa[1] = pa_pack2<DT>(sc[2 * kq][2], sc[2 * kq][3]);
            pa[2] = pa_pack2<DT>(sc[2 * kq + 1][0], sc[2 * kq + 1][1]);
            pa[3] = pa_pack2<DT>(sc[2 * kq + 1][2], sc[2 * kq + 1][3]);
#pragma unroll
            for (int np = 0; np < DMAX / 16; np++) {
                if (np * 16 < s.dv16) {
                    uint32_t bv[4];
                    rdg_ldsm_x4_trans(va + (uint32_t)(kq * 16 * s.vpitch) + np * 32, bv);
                    mma16816<DT>(acc[2 * np], pa, bv[0], bv[1]);
                    mma16816<DT>(acc[2 * np + 1], pa, bv[2], bv[3]);
                }
            }
        }
    }

    /* acc += P V over 16 keys (their rows at v_sm, key k0 of the warp's tile part first) on the
     * SIMT cores, each row only over the keys it sees: lo and hi are the P fragments of keys
     * 0 .. 7 and 8 .. 15 (lane (g, t): keys 2 t, 2 t + 1), fetched from the quad a key at a time. */
    __device__ __forceinline__ void pv_masked(const MmaShape &s, const float (&lo)[4], const float (&hi)[4],
                                              const unsigned char *v_sm, int k0, const int (&rel)[2], int lane)
    {
        const int t = lane % 4;
#pragma unroll 1
        for (int kk = 0; kk < 16; kk++) {
            const uint16_t *vr = (const uint16_t *)(v_sm + kk * s.vpitch);
            const int src = (lane & ~3) | ((kk % 8) / 2);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float mine = kk < 8 ? (kk % 2 ? lo[2 * h + 1] : lo[2 * h]) : (kk % 2 ? hi[2 * h + 1] : hi[2 * h]);
                const float p = __shfl_sync(0xffffffffu, mine, src);
                if (k0 + kk < rel[h])
#pragma unroll
                    for (int n = 0; n < DMAX / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            if (8 * n + 2 * t + e < s.dv)
                                acc[n][2 * h + e] = fmaf(p, pa_half<DT>(vr[8 * n + 2 * t + e]), acc[n][2 * h + e]);
            }
        }
    }

    /* The quad's row sums into every lane of it. */
    __device__ __forceinline__ void sum_rows(void)
    {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        }
    }

    /* Prefill: the warp's rows (below nrows) straight to out, or to the split's partials. */
    __device__ __forceinline__ void store(const PaDev &d, const PaRow *rows, int r0, int nrows, int split, int lane)
    {
        const int g = lane / 4, t = lane % 4;
        sum_rows();
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + g + 8 * h;
            if (r >= nrows)
                continue;
            const PaRow rw = rows[r];
            if (d.splits > 1) {
                float *o = pa_ws_acc(d, split, rw.i, rw.h);
#pragma unroll
                for (int n = 0; n < DMAX / 8; n++)
                    if (8 * n + 2 * t < d.dv) /* Dv is even: the pair's second column too */
                        *(float2 *)(o + 8 * n + 2 * t) = make_float2(acc[n][2 * h], acc[n][2 * h + 1]);
                if (t == 0)
                    pa_put_ml(d, split, rw.i, rw.h, m[h], l[h]);
            } else {
                const float inv = l[h] != 0.0f ? 1.0f / l[h] : 0.0f;
                uint32_t *o = (uint32_t *)((uint16_t *)d.out + ((int64_t)rw.i * d.heads_q + rw.h) * d.dv);
#pragma unroll
                for (int n = 0; n < DMAX / 8; n++)
                    if (8 * n + 2 * t < d.dv)
                        o[4 * n + t] = pa_pack2<DT>(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
            }
        }
    }

    /* Decode: the warp's rows below nrows (the merge reads no other) into the merge area: acc
     * [rows][Dv], m and l [rows]. */
    __device__ __forceinline__ void flush(float *mg_acc, float *mg_m, float *mg_l, int r0, int nrows, int Dv,
                                          int lane)
    {
        const int g = lane / 4, t = lane % 4;
        sum_rows();
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + g + 8 * h;
            if (r >= nrows)
                continue;
            float *row = mg_acc + (size_t)r * Dv;
#pragma unroll
            for (int n = 0; n < DMAX / 8; n++)
                if (8 * n + 2 * t < Dv)
                    *(float2 *)(row + 8 * n + 2 * t) = make_float2(acc[n][2 * h], acc[n][2 * h + 1]);
            if (t == 0) {
                mg_m[r] = m[h];
                mg_l[r] = l[h];
            }
        }
    }
};

/* Row r of the CTA (below nrows): its query and query head, and its limit in the split [k0, k1):
 * plan data only (written by its upload), so it may be read before the programmatic wait. */
template <int RC>
__device__ __forceinline__ PaRow mma_row(const PaDev &d, const rudnn_paged_block_t &b, int hk, int rc, int nrows,
                                         int k0, int k1, int r)
{
    PaRow rw = {0, 0, 0, 0};
    if (r < nrows) {
        const int br = rc * RC + r, qi = br / d.group;
        rw.i = b.q0 + qi;
        rw.h = hk * d.group + (br - qi * d.group);
        rw.lim = pa_lim(d, rw.i, k0, k1);
    }
    return rw;
}

/* The CTA's Q rows (raw dtype bits; zeros past nrows and past D) copied by cp.async into the
 * group that is committed next (the first tile's), so that they are issued before the K/V tiles
 * and land with the first one (loaded after them, they returned behind the 64 KiB of K/V: H100,
 * B 1 KV 2k from a graph 0.0118 -> 0.0109 ms a call, bench/RESULTS.md). */
template <int RC>
__device__ __forceinline__ void mma_copy_q(const PaDev &d, const MmaShape &s, const rudnn_paged_block_t &b, int hk,
                                           int rc, int nrows, unsigned char *q_sm)
{
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x, G = d.group, cpr = s.dk16 / 8;
    for (int e = tid; e < RC * cpr; e += nt) {
        const int r = e / cpr, c = e - r * cpr;
        const bool ok = r < nrows && c < d.d / 8;
        const char *src = (const char *)d.q; /* a valid address where nothing is read */
        if (ok) {
            const int br = rc * RC + r, qi = br / G;
            const int64_t h = (int64_t)hk * G + (br - qi * G);
            src += (((int64_t)b.q0 + qi) * d.heads_q + h) * d.d * 2 + c * 16;
        }
        rdg_copy16_async_zfill(q_sm + r * s.qpitch + c * 16, src, ok);
    }
}

/* Decode's end: the key warps' states merged per row (weights e^(m_w - M)), then each output
 * element (or partial) written by the CTA's threads. */
template <int DT, int DMAX, int RC, int WK, int KW>
__device__ __forceinline__ void mma_merge(const PaDev &d, const PaRow *rows, MmaWarp<DT, DMAX, KW> &st,
                                          unsigned char *area, int nrows, int split, int wr, int wk, int lane)
{
    const int tid = (int)threadIdx.x, nt = (int)blockDim.x, Dv = d.dv;
    float *mg_acc = (float *)area;
    float *mg_m = mg_acc + (size_t)WK * RC * Dv, *mg_l = mg_m + WK * RC, *mg_w = mg_l + WK * RC;
    float *mg_L = mg_w + WK * RC;
    st.flush(mg_acc + (size_t)wk * RC * Dv, mg_m + wk * RC, mg_l + wk * RC, 16 * wr, nrows, Dv, lane);
    __syncthreads();
    if (tid < nrows) {
        float M = -INFINITY;
        for (int w = 0; w < WK; w++)
            M = fmaxf(M, mg_m[w * RC + tid]);
        float L = 0.0f;
        for (int w = 0; w < WK; w++) {
            const float f = M == -INFINITY ? 0.0f : exp2f(mg_m[w * RC + tid] - M); /* a warp that saw nothing: 0 */
            mg_w[w * RC + tid] = f;
            L = fmaf(mg_l[w * RC + tid], f, L);
        }
        mg_L[tid] = L;
        pa_put_ml(d, split, rows[tid].i, rows[tid].h, M, L);
    }
    __syncthreads();
    for (int e = tid; e < nrows * Dv; e += nt) {
        const int r = e / Dv, c = e - r * Dv;
        float o = 0.0f;
        for (int w = 0; w < WK; w++)
            o = fmaf(mg_w[w * RC + r], mg_acc[((size_t)w * RC + r) * Dv + c], o);
        pa_put<DT>(d, split, rows[r].i, rows[r].h, c, o, mg_L[r]);
    }
}

/* ------------------------------------------------------------------------------- the kernel */

/* WR row warps x WK key warps, KW keys a warp a tile; work items (KV head, row chunk, split,
 * block) in a grid-stride loop, the KV head fastest. */
template <int DT, int DMAX, int WR, int WK, int KW>
__global__ void RDG_LAUNCH_BOUNDS(WR *WK * 32, PA_CTAS_PER_SM) mma_kernel(const PaDev d, const MmaShape s)
{
    extern __shared__ __align__(16) unsigned char pa_smem[];
    constexpr int NT = WR * WK * 32, RC = 16 * WR, TK = WK * KW;
    const int tid = (int)threadIdx.x, lane = tid % 32, warp = tid / 32, wr = warp / WK, wk = warp % WK;
    unsigned char *q_sm = pa_smem;
    PaRow *rows = (PaRow *)(pa_smem + s.off_rows);
    unsigned char *k_ring = pa_smem + s.off_k, *v_ring = pa_smem + s.off_v;
    const int64_t items = (int64_t)d.heads_kv * s.chunks * d.splits * d.nblocks;
    /* a programmatic dependent (PA_PDL): the plan (blocks, tables, lengths: written by its upload,
     * never by a kernel) is read before the wait, Q, the caches, the workspace and out after it;
     * the next kernel may be scheduled at once (it waits for this grid's end the same way) */
    rdg_pdl_trigger();
    bool waited = false;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int hk = (int)(item % d.heads_kv);
        int64_t rest = item / d.heads_kv;
        const int rc = (int)(rest % s.chunks);
        rest /= s.chunks;
        const int split = (int)(rest % d.splits);
        const rudnn_paged_block_t b = d.blocks[rest / d.splits];
        const int nrows = min(RC, b.nq * d.group - rc * RC);
        if (nrows <= 0)
            continue; /* a query's last row chunk past its heads (uniform over the CTA) */
        int k0, k1;
        pa_split_range(d, d.causal ? b.kv_causal : d.seq_len[b.seq], split, &k0, &k1);
        const int ntiles = k1 > k0 ? (int)(((int64_t)k1 - k0 + TK - 1) / TK) : 0;
        const int32_t *table = d.pages + d.seq_table[b.seq];

#if PA_STAGE_BLOCKED
        const bool one_page = d.page_size % StageMap<DMAX, NT, TK>::RB == 0;
        auto page_of = [&](int t) -> int32_t {
            return one_page && t < ntiles ? mma_stage_page<DMAX, NT, TK>(d, table, k0 + (int64_t)t * TK, k1) : 0;
        };
        auto stage = [&](int t, int slot, int32_t page) {
            mma_stage_blocked<DMAX, NT, TK>(d, s, table, hk, k0 + (int64_t)t * TK, k1, k_ring + slot * s.stage_k,
                                            v_ring + slot * s.stage_v, page);
        };
#else
        auto page_of = [&](int) -> int32_t { return 0; };
        auto stage = [&](int t, int slot, int32_t) {
            mma_stage<DMAX, NT, TK>(d, s, table, hk, k0 + (int64_t)t * TK, k1, k_ring + slot * s.stage_k,
                                    v_ring + slot * s.stage_v);
        };
#endif
        /* the first two tiles' pages (and the rows' limits): the end of the plan's dependent
         * reads, before the wait */
        const int32_t page0 = page_of(0), page1 = s.stages > 2 ? page_of(1) : 0;
        const PaRow myrow = tid < RC ? mma_row<RC>(d, b, hk, rc, nrows, k0, k1, tid) : PaRow{0, 0, 0, 0};
        if (!waited) {
            rdg_pdl_wait();
            waited = true;
        }
        __syncthreads(); /* the previous item's readers of shared memory are done */
        /* the ring: tiles 0 .. stages - 2 in flight before the first is computed (and while the
         * rows load); one group a tile (empty ones too), so that "stages - 2 pending" means "tile
         * t has landed". Q goes first, in tile 0's group. */
        mma_copy_q<RC>(d, s, b, hk, rc, nrows, q_sm);
        for (int t = 0; t < s.stages - 1; t++) {
            if (t < ntiles)
                stage(t, t, t == 0 ? page0 : t == 1 ? page1 : page_of(t));
            rdg_copy_async_commit();
        }
        if (tid < RC)
            rows[tid] = myrow;
        if (s.dk16 > d.d) /* K's pad columns (never copied into): one 16-byte chunk at D of every ring row */
            for (int r = tid; r < s.stages * TK; r += NT)
                *(uint4 *)(k_ring + r * s.kpitch + d.d * 2) = make_uint4(0u, 0u, 0u, 0u);
        __syncthreads();

        MmaWarp<DT, DMAX, KW> st;
        st.init(rows, 16 * wr, k1, lane);
        int32_t page = page_of(s.stages - 1); /* the next staging's page, read a tile ahead */
        for (int t = 0, slot = 0; t < ntiles; t++, slot = slot + 1 < s.stages ? slot + 1 : 0) {
            rdg_copy_async_wait_n(s.stages - 2);
            __syncthreads(); /* tile t is in for every thread; tile t - 1's readers are done */
            if (t + s.stages - 1 < ntiles)
                stage(t + s.stages - 1, slot ? slot - 1 : s.stages - 1, page); /* into tile t - 1's slot */
            rdg_copy_async_commit();
            page = page_of(t + s.stages); /* lands while tile t is computed */
            const int64_t jw = k0 + (int64_t)t * TK + wk * KW;
            if (jw < st.wlim)
                st.tile(s, q_sm + 16 * wr * s.qpitch, k_ring + slot * s.stage_k + wk * KW * s.kpitch,
                        v_ring + slot * s.stage_v + wk * KW * s.vpitch, jw, d.scale_log2, lane);
        }
        rdg_copy_async_wait_n(0);
        __syncthreads(); /* the rings are free for the merge */
        if constexpr (WK == 1)
            st.store(d, rows, 16 * wr, nrows, split, lane);
        else {
            mma_merge<DT, DMAX, RC, WK, KW>(d, rows, st, k_ring, nrows, split, wr, wk, lane);
            if (d.tickets) /* group: the item less its split */
                mma_ticket_merge<DT, WR * WK>(d, rows, nrows, ((rest / d.splits) * s.chunks + rc) * d.heads_kv + hk,
                                              (int *)k_ring, warp, lane);
        }
    }
}

/* ------------------------------------------------------------------------------------- host */

typedef void (*mma_fn)(const PaDev, const MmaShape);

template <int DT, int DMAX>
mma_fn mma_kernel_of(int prefill)
{
    if (prefill)
        return mma_kernel<DT, DMAX, PA_PRE_ROW_WARPS, 1, DMAX == 256 ? PA_PRE_KEYS_D256 : PA_PRE_KEYS>;
    return mma_kernel<DT, DMAX, 1, PA_DEC_KEY_WARPS, DEC_KW>;
}

template <int DT>
mma_fn mma_kernel_dt(const MmaConfig &c)
{
    return c.dmax == 64 ? mma_kernel_of<DT, 64>(c.prefill)
           : c.dmax == 128 ? mma_kernel_of<DT, 128>(c.prefill)
                           : mma_kernel_of<DT, 256>(c.prefill);
}

/* Stages for bytes `stage` a tile: enough for PA_INFLIGHT_PER_SM at `ctas` CTAs an SM, at most what
 * fits beside `fixed` bytes in the SM's shared memory (`extra`: bytes the rings must also hold);
 * 0 where two do not fit. */
int mma_stages(const rdg_devinfo_t *dev, size_t fixed, size_t stage, size_t extra, int ctas)
{
    size_t budget = (dev->smem_optin + RDG_SMEM_RESERVED) / (size_t)ctas;
    budget = budget > RDG_SMEM_RESERVED ? budget - RDG_SMEM_RESERVED : 0;
    budget = budget < dev->smem_optin ? budget : dev->smem_optin;
    int stages = 1 + (int)rdg_ceil_div((int64_t)(PA_INFLIGHT_PER_SM / (unsigned)ctas), (int64_t)stage);
    stages = stages < 2 ? 2 : stages > PA_MAX_STAGES ? PA_MAX_STAGES : stages;
    for (; stages >= 2; stages--) {
        const size_t rings = (size_t)stages * stage;
        if (fixed + (rings > extra ? rings : extra) <= budget)
            return stages;
    }
    return 0;
}

/* The kernel's shape for a call on dev, or why it does not take it: the one place it is chosen
 * (dtype, arch, dims, alignment; decode or prefill from the plan's blocks; stages and CTAs an SM
 * from the shared memory). */
const char *mma_config(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                       MmaConfig *c, char *why, size_t cap)
{
    memset(c, 0, sizeof *c);
    MmaShape &s = c->s;
    const rudnn_paged_layout_t &l = a->layout;
    if (a->mla || a->dtype == RUDNN_F32 || dev->arch < 80) {
        snprintf(why, cap, "mma.sync needs F16 or BF16 attention on sm_80+");
        return why;
    }
    if (a->head_dim > 256 || a->value_dim > 256 || a->head_dim % 8 || a->value_dim % 8) {
        snprintf(why, cap, "D %lld and Dv %lld: the tensor-core kernel takes multiples of 8 up to 256",
                 (long long)a->head_dim, (long long)a->value_dim);
        return why;
    }
    if (a->heads_q > PA_MMA_MAX_HEADS) {
        snprintf(why, cap, "%lld query heads: the tensor-core kernel's 32-bit row indices take %d",
                 (long long)a->heads_q, PA_MMA_MAX_HEADS);
        return why;
    }
    if (!pa_aligned16(rdg_at(o->q), rdg_at(o->k), rdg_at(o->v), rdg_at(o->out), rdg_at(o->workspace))) {
        snprintf(why, cap, "q, caches and out must be 16-byte aligned for 16-byte copies");
        return why;
    }
    const int64_t G = a->heads_q / a->heads_kv;
    const int kind_dec = pa_block_kind(16, G), kind_pre = pa_block_kind(16 * PA_PRE_ROW_WARPS, G);
    c->prefill = G > 16 || l.block_count[kind_pre] * PA_PRE_BLOCK_RATIO <= l.block_count[kind_dec];
    c->kind = c->prefill ? kind_pre : kind_dec;
    const int wr = c->prefill ? PA_PRE_ROW_WARPS : 1, wk = c->prefill ? 1 : PA_DEC_KEY_WARPS;
    s.dv = (int)a->value_dim;
    s.dk16 = (int)((a->head_dim + 15) / 16 * 16);
    s.dv16 = (int)((a->value_dim + 15) / 16 * 16);
    const int dmax = s.dk16 > s.dv16 ? s.dk16 : s.dv16;
    c->dmax = dmax <= 64 ? 64 : dmax <= 128 ? 128 : 256;
    const int kw = c->prefill ? (c->dmax == 256 ? PA_PRE_KEYS_D256 : PA_PRE_KEYS) : DEC_KW;
    const int rows = 16 * wr, tk = wk * kw;
    s.chunks = (int)rdg_ceil_div(((int64_t)1 << c->kind) * G, rows);
    s.kpitch = s.dk16 * 2 + 16;
    s.vpitch = s.dv16 * 2 + 16;
    s.qpitch = s.kpitch;
    s.off_rows = rows * s.qpitch;
    s.off_k = (int)pa_align16((size_t)s.off_rows + rows * sizeof(PaRow));
    s.stage_k = tk * s.kpitch;
    s.stage_v = tk * s.vpitch;
    const size_t merge = wk > 1 ? ((size_t)wk * rows * ((size_t)a->value_dim + 3) + rows) * sizeof(float) : 0;
    int ctas = PA_CTAS_PER_SM;
    for (; ctas >= 1; ctas--)
        if ((s.stages = mma_stages(dev, (size_t)s.off_k, (size_t)(s.stage_k + s.stage_v), merge, ctas)) > 0)
            break;
    if (s.stages == 0) {
        snprintf(why, cap, "two K/V stages of D %lld, Dv %lld exceed the device's shared memory (%zu bytes)",
                 (long long)a->head_dim, (long long)a->value_dim, dev->smem_optin);
        return why;
    }
    const size_t rings = (size_t)s.stages * (s.stage_k + s.stage_v);
    s.off_v = s.off_k + s.stages * s.stage_k;
    c->smem = (size_t)s.off_k + (rings > merge ? rings : merge);
    c->threads = wr * wk * 32;
    c->items = a->heads_kv * s.chunks * (int64_t)(a->splits > 1 ? a->splits : 1) * l.block_count[c->kind];
    return nullptr;
}

} // namespace

const char *rdg_pa_mma_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                           char *why, size_t cap)
{
    MmaConfig c;
    return mma_config(dev, a, o, &c, why, cap);
}

rudnn_status_t rdg_pa_mma_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    MmaConfig c;
    char why[192];
    if (mma_config(&q->dev, a, o, &c, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, PA_OP ": %s: %s", RUDNN_GPU_BACKEND_NAME, why);
    PaDev d = pa_make_dev(a, o, c.kind);
    /* decode's split CTAs merge themselves where the workspace has counters (at least one per row
     * group: a group holds a row, so groups <= Q x Hq) */
    const int64_t groups = a->heads_kv * c.s.chunks * a->layout.block_count[c.kind];
    const int64_t grid = c.items < PA_MAX_GRID ? c.items : PA_MAX_GRID;
    const bool fused = PA_FUSED_MERGE && !c.prefill && d.splits > 1 && o->tickets.mem && grid > 0 &&
                       groups <= a->layout.queries * a->heads_q;
    if (fused)
        d.tickets = (uint32_t *)rdg_at(o->tickets);
    const mma_fn fn = a->dtype == RUDNN_F16 ? mma_kernel_dt<RUDNN_F16>(c) : mma_kernel_dt<RUDNN_BF16>(c);
    TRY(pa_allow_smem(q, (const void *)fn, c.smem));
    const char *name = c.prefill ? PA_MMA_PREFILL_NAME : PA_MMA_DECODE_NAME;
    if (grid > 0) {
        rdg_note_kernel(name);
        rdg_launch_pdl_raw(q, PA_PDL, fn, dim3((unsigned)grid), dim3((unsigned)c.threads), c.smem, d, c.s);
        TRY(pa_launched(name, grid, c.threads, c.smem));
    }
    return d.splits > 1 && !fused ? pa_run_merge(q, a, d) : RUDNN_STATUS_SUCCESS;
}
