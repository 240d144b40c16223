/* attention.wgmma_tma: FlashBlackboxAccelerated on CUDA, for sm_90a (Hopper's warpgroup MMA fed by
 * the tensor-memory accelerator). F16/BF16, D and Dv up to 128.
 *
 * A CTA takes 64 NC query rows of one (b, h) and walks the key tiles (ATT_WG_BN keys) its
 * rows can see, 1 + NC warpgroups with one role each (NC = 2, or 3 at D <= 64: wg_tile):
 *   - warpgroup 0, the producer: one thread loads the Q tile once and then K and V tiles into
 *     ATT_WG_STAGES stages with TMA (128-byte swizzle, 64 columns per box: a head dim of 128 is
 *     two boxes side by side); mbarriers k_full / v_full count the bytes in, k_empty / v_empty
 *     the consumer warps done reading. K and V have barriers of their own, so that S = Q K^T
 *     starts before V has landed;
 *   - warpgroups 1 .. NC, the consumers: 64 query rows each. S = Q K^T with wgmma m64n128k16
 *     (both operands K-major in shared memory), the scores masked and scaled in registers, the
 *     online softmax in the log2 domain (a row lives on the 4 lanes of a quad: two shuffles per
 *     reduction), P converted to 16 bits in place (the m64n16 accumulator fragment is the A
 *     fragment of the next wgmma), then O += P V with wgmma's A from registers and V read
 *     MN-major (transposed) straight from its stage.
 * The epilogue stages each warpgroup's O rows in its own part of the Q tile (no longer read) and
 * writes them as 16-byte pieces.
 * Rows and keys past Sq / Skv (and head-dim columns past D / Dv) are TMA's zero fill: the keys
 * are masked to -inf, the rows and columns never stored. A tile every one of whose keys every
 * row sees (no mask, inside the window and Skv) skips the per-element checks; bias and softcap
 * take the per-element path (attention.cuh's rules, in the contract's order).
 * Work items in (b, h)-major order, the q tiles of a head last-to-first: CTAs running together
 * share their head's K and V in L2, and causal's longest tiles start first.
 * The tensor maps are encoded per call on the host (the driver's cuTensorMapEncodeTiled), the
 * three outer dims ordered by stride so that any last-dim-contiguous layout ([B, H, S, D] or
 * [B, S, H, D]) maps without a copy. */
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <type_traits>

#include "rdg_internal.h"

#include "attention.cuh"
#include "attention_tuning.h"
#include "mbarrier.cuh"
#include "tensor_map.h"
#include "wgmma.cuh"
#include "wgmma_softmax.cuh"

namespace {

constexpr int BN = ATT_WG_BN, STAGES = ATT_WG_STAGES;
constexpr int BOX_BYTES_ROW = 128; /* 64 16-bit elements: one swizzled shared row */
/* named barriers of the staged epilogue: this one plus the consumer warpgroup's index (the
 * ping-pong turns take 1 .. 3) */
constexpr int ATT_WG_EPI_BARRIER = 8;

/* Threads of a CTA with nc consumer warpgroups (and the producer's). */
constexpr int wg_threads(int nc)
{
    return 128 * (nc + 1);
}

static_assert(setmaxnreg_fits(ATT_WG_PRODUCER_REGS, 2, ATT_WG_CONSUMER_REGS) &&
                  setmaxnreg_fits(ATT_WG3_PRODUCER_REGS, 3, ATT_WG3_CONSUMER_REGS),
              "the warpgroups' registers after setmaxnreg exceed the launch's");

/* Shared memory of a CTA with nc consumer warpgroups and qb (vb) 64-column blocks of Q and K (V). */
constexpr size_t wg_smem_bytes(int nc, int qb, int vb)
{
    return 1024 /* alignment slack: the swizzle atom */ + (size_t)qb * 64 * nc * BOX_BYTES_ROW +
           (size_t)STAGES * (qb + vb) * BN * BOX_BYTES_ROW + 8 * (1 + 4 * STAGES);
}

/* The order of a map's outer dims (s, h, b) and where each coordinate goes. */
struct MapPerm {
    int slot[3]; /* slot[k]: the map dim (1..3) of outer dim k (0: s, 1: h, 2: b) */
};

/* A CTA's query rows: sqt consecutive queries of gp consecutive heads (the query heads of one K/V
 * head, packed, where they fit: K and V are read once for all of them), rows = sqt * gp <= 64 nc,
 * in the order the Q box lands in shared memory (h_inner: row = query * gp + head, else head *
 * sqt + query). A consumer warpgroup whose 64 rows are all past `rows` skips its MMAs. */
struct WgTile {
    int nc;      /* consumer warpgroups: 2, or 3 (the kernel's NC) */
    int q_tiles; /* ceil(Sq / sqt) */
    int sqt, gp, rows, h_inner;
};

#if RDG_HAS_WGMMA
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

/* tanh to about 2^-11 relative: below the 16-bit rounding of P that follows */
__device__ __forceinline__ float fast_tanh(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* box (col, s, h, b) of map -> dst, counted on bar */
__device__ __forceinline__ void load_box(uint32_t dst, const CUtensorMap *map, const MapPerm &p, int col, int s, int h,
                                         int b, uint32_t bar)
{
    int c[4] = {col, 0, 0, 0};
    /* slots are a permutation of 1..3: unrolled selects, no local-memory array */
    c[1] = p.slot[0] == 1 ? s : p.slot[1] == 1 ? h : b;
    c[2] = p.slot[0] == 2 ? s : p.slot[1] == 2 ? h : b;
    c[3] = p.slot[0] == 3 ? s : p.slot[1] == 3 ? h : b;
    tma_load_4d(dst, map, c[0], c[1], c[2], c[3], bar);
}
#endif

template <int DT, int QB, int VB, bool GEN, int NC>
__global__ void __launch_bounds__(wg_threads(NC), 1)
att_wgmma_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                 const __grid_constant__ CUtensorMap tv, const MapPerm pq, const MapPerm pk, const MapPerm pv,
                 const rdg_att_args a, const WgTile tile)
{
#if RDG_HAS_WGMMA
    constexpr int BM = 64 * NC;          /* query rows of the CTA */
    constexpr int NV = VB * 64;          /* O columns per wgmma: 64 or 128 */
    constexpr int Q_BYTES = QB * BM * BOX_BYTES_ROW;
    constexpr int K_BYTES = QB * BN * BOX_BYTES_ROW; /* one stage */
    constexpr int V_BYTES = VB * BN * BOX_BYTES_ROW;
    extern __shared__ __align__(1024) uint8_t att_wg_smem[];
    const uint32_t sq = (smem_u32(att_wg_smem) + 1023u) & ~1023u;
    const uint32_t sk = sq + Q_BYTES, sv = sk + STAGES * K_BYTES;
    const uint32_t bars = sv + STAGES * V_BYTES;
    const uint32_t q_full = bars;
    auto k_full = [&](int s) { return bars + 8u * (1 + s); };
    auto k_empty = [&](int s) { return bars + 8u * (1 + STAGES + s); };
    auto v_full = [&](int s) { return bars + 8u * (1 + 2 * STAGES + s); };
    auto v_empty = [&](int s) { return bars + 8u * (1 + 3 * STAGES + s); };

    const int tid = (int)threadIdx.x, wg = tid / 128;
    const int q_tiles = tile.q_tiles, sqt = tile.sqt, gp = tile.gp;
    const int64_t groups = a.heads_q / gp; /* head groups of a batch */
    const int64_t bg = (int64_t)blockIdx.x / q_tiles;
    const int qt = q_tiles - 1 - (int)((int64_t)blockIdx.x - bg * q_tiles);
    const int64_t b = bg / groups, h0 = (bg - b * groups) * gp, hk = h0 / a.group;
    /* full-height tiles (sqt == BM): the first one holds the rows past a multiple of sqt
     * (ATT_WG_REMAINDER_FIRST); the rows it loads past them are the next tile's, not stored */
    const bool rem_first = ATT_WG_REMAINDER_FIRST && sqt == BM;
    const int64_t first_rows = a.seq_q - (int64_t)(q_tiles - 1) * sqt;
    const int64_t i0 = rem_first && qt > 0 ? first_rows + (int64_t)(qt - 1) * sqt : (int64_t)qt * sqt;
    const int64_t i_end = rem_first && qt == 0 ? first_rows : i0 + sqt;
    const int64_t i_last = (i_end < a.seq_q ? i_end : a.seq_q) - 1;
    /* the key tiles any row of the CTA sees */
    const int64_t lo0 = att_lo(a, i0), hi_last = att_hi(a, i_last);
    const int64_t j_begin = lo0 > 0 ? lo0 : 0;
    const int64_t j_end = hi_last < a.seq_kv - 1 ? hi_last : a.seq_kv - 1;
    const int t_begin = (int)(j_begin / BN);
    const int ntiles = j_end >= j_begin ? (int)(j_end / BN) + 1 - t_begin : 0;

    if (tid == 0) {
        mbar_init(q_full, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(k_full(s), 1);
            mbar_init(v_full(s), 1);
            mbar_init(k_empty(s), 4 * NC); /* one arrival per consumer warp */
            mbar_init(v_empty(s), 4 * NC);
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) {
        set_max_regs_dec<NC == 3 ? ATT_WG3_PRODUCER_REGS : ATT_WG_PRODUCER_REGS>();
        if (tid == 0) {
            mbar_expect_tx(q_full, QB * tile.rows * BOX_BYTES_ROW);
            for (int c = 0; c < QB; c++)
                load_box(sq + c * BM * BOX_BYTES_ROW, &tq, pq, c * 64, (int)i0, (int)h0, (int)b, q_full);
            for (int t = 0; t < ntiles; t++) {
                const int s = t % STAGES;
                const uint32_t parity = ((t / STAGES) & 1) ^ 1;
                const int j0 = (t_begin + t) * BN;
                mbar_wait(k_empty(s), parity);
                mbar_expect_tx(k_full(s), K_BYTES);
                for (int c = 0; c < QB; c++)
                    load_box(sk + s * K_BYTES + c * BN * BOX_BYTES_ROW, &tk, pk, c * 64, j0, (int)hk, (int)b,
                             k_full(s));
                mbar_wait(v_empty(s), parity);
                mbar_expect_tx(v_full(s), V_BYTES);
                for (int c = 0; c < VB; c++)
                    load_box(sv + s * V_BYTES + c * BN * BOX_BYTES_ROW, &tv, pv, c * 64, j0, (int)hk, (int)b,
                             v_full(s));
            }
        }
    } else {
        /* the consumers (one branch of the if/else: setmaxnreg needs each role in its own) */
        set_max_regs_inc<NC == 3 ? ATT_WG3_CONSUMER_REGS : ATT_WG_CONSUMER_REGS>();
        const int cw = wg - 1, warp = (tid / 32) % 4, lane = tid % 32, quad = lane % 4;
        /* the queries this warpgroup's rows hold (packed tiles: those of the whole CTA) */
        /* 32-bit row indices (rdg_att_wgmma_why keeps Sq and Hq so): fewer registers held */
        const int wg_first = (int)(sqt == BM ? i0 + cw * 64 : i0);
        const int wg_last = (int)(sqt == BM && wg_first + 63 < i_last ? wg_first + 63 : i_last);
        /* only rows past the tile's: no MMA, no store */
        const bool idle = cw * 64 >= tile.rows || wg_first > i_last;
        /* this thread's two rows: r = 0 (lane / 4) and r = 1 (lane / 4 + 8) of its warp's 16 */
        /* this thread's row r: its query index (Sq: not a row of the tile) and head; recomputed
         * where needed rather than held across the key loop (registers) */
        auto row_at = [&](int t_row) { /* of the tile's row t_row */
            const int qi = tile.h_inner ? t_row / gp : t_row % sqt;
            return (int)(t_row < tile.rows && i0 + qi <= i_last ? i0 + qi : a.seq_q);
        };
        auto head_at = [&](int t_row) {
            const int g = tile.h_inner ? t_row % gp : t_row / sqt;
            return (int)(h0 + (t_row < tile.rows ? g : 0));
        };
        auto row_of = [&](int r) { return row_at(cw * 64 + warp * 16 + lane / 4 + r * 8); };
        auto head_of = [&](int r) { return head_at(cw * 64 + warp * 16 + lane / 4 + r * 8); };
        /* the keys row r sees, [klo, khi] within [0, Skv) (empty for rows past Sq): held in 32
         * bits across the key loop so that a masked tile needs no 64-bit arithmetic */
        int klo[2], khi[2];
        float m[2], l[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = row_of(r);
            klo[r] = (int)a.seq_kv;
            khi[r] = -1;
            if (row < a.seq_q) {
                const int64_t lo = att_lo(a, row), hi = att_hi(a, row);
                klo[r] = (int)(lo < 0 ? 0 : lo < a.seq_kv ? lo : a.seq_kv);
                khi[r] = (int)(hi < -1 ? -1 : hi < a.seq_kv - 1 ? hi : a.seq_kv - 1);
            }
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        /* the key tiles every row of the warpgroup sees whole: [w_lo, w_hi] (att_lo and att_hi
         * grow with the row) */
        int w_lo, w_hi;
        {
            const int64_t lo = att_lo(a, wg_last), hi = att_hi(a, wg_first);
            w_lo = (int)(lo < 0 ? 0 : lo < a.seq_kv ? lo : a.seq_kv);
            w_hi = (int)(hi < -1 ? -1 : hi < a.seq_kv - 1 ? hi : a.seq_kv - 1);
        }
        float o[NV / 2];
#pragma unroll
        for (int i = 0; i < NV / 2; i++)
            o[i] = 0.0f;
        const float scale_log2 = a.scale * LOG2E;

        mbar_wait(q_full, 0);
        const uint32_t q_rows = sq + cw * 64 * BOX_BYTES_ROW;
        float sc[BN / 2];       /* S of the tile in flight, then its P (FP32) */
        uint32_t pa[BN / 16][4]; /* P of the tile whose P V is next, 16-bit A fragments */
        float alpha[2];

        /* S = Q K^T of tile t, issued (not waited for) */
        auto issue_s = [&](int t) {
            const int s = t % STAGES;
            mbar_wait(k_full(s), (t / STAGES) & 1);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < QB * 4; kk++)
                wgmma_ss<DT, BN>(sc, wgmma_desc(q_rows + (kk / 4) * BM * BOX_BYTES_ROW + (kk % 4) * 32),
                                 wgmma_desc(sk + s * K_BYTES + (kk / 4) * BN * BOX_BYTES_ROW + (kk % 4) * 32), kk > 0);
            wgmma_commit();
        };
        /* O += P V of tile t, issued (not waited for) */
        auto issue_pv = [&](int t) {
            const int s = t % STAGES;
            mbar_wait(v_full(s), (t / STAGES) & 1);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                wgmma_rs_t<DT, NV>(o, pa[kk],
                                   wgmma_desc_mn(sv + s * V_BYTES + kk * 16 * BOX_BYTES_ROW, BN * BOX_BYTES_ROW), 1);
            wgmma_commit();
        };
        /* whether tile t needs no per-element check for this warpgroup's rows */
        auto tile_whole = [&](int t) {
            const int j0 = (t_begin + t) * BN;
            return j0 >= w_lo && w_hi - j0 >= BN - 1; /* no overflow near Skv 2^31 */
        };
        /* tile t's scores (in sc) -> p = 2^(s - m) in the log2 domain, new maxima and sums; alpha:
         * the factor O must be rescaled by. Invisible keys are -inf. MAY_MASK false: the caller
         * knows the tile is whole (no masking code, fewer registers live). */
        auto softmax = [&](int t, auto may_mask) {
            constexpr bool MAY_MASK = decltype(may_mask)::value;
            const bool whole = !MAY_MASK || tile_whole(t);
            /* raw: a whole tile under a positive scale keeps the dot products; the scale joins the
             * maximum (it commutes with it) and the exponent's FMA, a multiply less per score */
            const bool raw = !GEN && whole && a.scale > 0.0f;
            if (!GEN && whole) {
                if (!raw) {
#pragma unroll
                    for (int i = 0; i < BN / 2; i++)
                        sc[i] *= scale_log2;
                }
            } else if constexpr (MAY_MASK) {
                /* the visible keys as a range of this tile's columns per row; GEN adds the mask,
                 * softcap and bias per element (att_finish's order, with the approximate tanh
                 * and no division: a call would spill the accumulators) */
                const int j0 = (t_begin + t) * BN;
                const float inv_softcap = GEN && a.softcap > 0.0f ? __frcp_rn(a.softcap) : 0.0f;
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int lo = klo[r] - j0, hi = khi[r] - j0;
                    const int c_lo = lo < 0 ? 0 : lo < BN ? lo : BN;
                    const int c_hi = hi < -1 ? -1 : hi < BN ? hi : BN;
                    const uint8_t *mrow = nullptr;
                    int64_t brow = 0;
                    (void)mrow;
                    (void)brow;
                    (void)inv_softcap;
                    if constexpr (GEN) {
                        const int row = row_of(r), hrow = head_of(r);
                        if (row < a.seq_q) {
                            mrow = a.mask ? att_mask_row(a, b, hrow, row) + j0 : nullptr;
                            brow = att_bias_row(a, b, hrow, row) + j0;
                        }
                    }
#pragma unroll
                    for (int u = 0; u < BN / 4; u++) {
                        const int i = 4 * (u / 2) + 2 * r + u % 2; /* row r's elements */
                        const int c = 8 * (i / 4) + 2 * quad + (i % 2);
                        bool seen = c >= c_lo && c <= c_hi;
                        float v = sc[i] * a.scale;
                        if constexpr (GEN) {
                            seen = seen && !(mrow && mrow[c]);
                            if (a.softcap > 0.0f)
                                v = a.softcap * fast_tanh(v * inv_softcap);
                            if (seen && a.bias_dtype != ATT_NO_BIAS)
                                v += att_bias(a, brow + c);
                        }
                        sc[i] = seen ? v * LOG2E : -INFINITY;
                    }
                }
            }
            const float f = raw ? scale_log2 : 1.0f;
            wg_softmax<BN>(sc, m, l, alpha, f);
        };
        const std::true_type may_mask;
        const std::false_type known_whole;
        /* O *= alpha, and P to the A fragments of the next P V: P's m64n16 accumulator blocks are
         * those fragments (rows r0 / r0 + 8, columns 2 quad and 8 + 2 quad) */
        auto rescale_pack = [&]() { wg_rescale_pack<DT, BN, NV>(o, alpha, sc, pa); };

        /* the CTA's key tiles this warpgroup's rows see: the first wg_n (att_hi grows with the row,
         * so the later ones are invisible to all of them: causal's diagonal past its last row) */
        int wg_n = 0;
        if (!idle && ntiles > 0) {
            const int64_t hi = att_hi(a, wg_last), je = hi < a.seq_kv - 1 ? hi : a.seq_kv - 1;
            wg_n = je >= j_begin ? (int)(je / BN) + 1 - t_begin : 0;
            wg_n = wg_n < ntiles ? wg_n : ntiles;
        }
        /* Ping-pong (FlashAttention-3's inter-warpgroup schedule): the consumer warpgroups take
         * turns at issuing their products, in order 0, 1, .., NC - 1, 0, ..: a turn starts on the
         * warpgroup's named barrier (1 + cw) and ends by arriving at the next one's, so that one
         * warpgroup's softmax runs while the others' products keep the tensor cores busy. Every
         * warpgroup takes exactly ntiles + 1 turns (S of the first tile, one per later tile, P V
         * of the last; a skipped tile is an empty turn), so none waits for a turn never given. */
        constexpr bool PP = !GEN && (NC == 3 ? ATT_WG_PINGPONG3 : ATT_WG_PINGPONG2);
        auto turn_begin = [&]() {
            if constexpr (PP)
                asm volatile("bar.sync %0, %1;" ::"r"(1 + cw), "n"(256) : "memory");
        };
        auto turn_end = [&]() {
            if constexpr (PP)
                asm volatile("bar.arrive %0, %1;" ::"r"(1 + (cw + 1) % NC), "n"(256) : "memory");
        };
        if (PP && cw == NC - 1)
            turn_end(); /* the first turn is warpgroup 0's */
        if (wg_n > 0) {
            turn_begin();
            issue_s(0);
            turn_end();
            wgmma_wait<0>();
            fence_operands(sc);
            if (lane == 0)
                mbar_arrive(k_empty(0));
            softmax(0, may_mask);
            rescale_pack();
            for (int t = 1; t < wg_n; t++) {
                /* with three consumer warpgroups only whole tiles overlap: a masked tile's
                 * softmax with P held for P V passes their 160 registers */
                if (ATT_WG_OVERLAP && !GEN && (NC == 2 || (ATT_WG3_OVERLAP && tile_whole(t)))) {
                    /* S of tile t and P V of tile t - 1 go to the tensor cores together; the softmax
                     * of t runs while P V of t - 1 is still in flight */
                    turn_begin();
                    issue_s(t);
                    issue_pv(t - 1);
                    turn_end();
                    wgmma_wait<1>();
                    fence_operands(sc);
                    if (lane == 0)
                        mbar_arrive(k_empty(t % STAGES));
                    if (NC == 2)
                        softmax(t, may_mask);
                    else
                        softmax(t, known_whole);
                    wgmma_wait<0>();
                    fence_operands(o);
                    fence_operands(pa); /* read by the finished P V: no other value lived in them */
                    if (lane == 0)
                        mbar_arrive(v_empty((t - 1) % STAGES));
                } else {
                    turn_begin();
                    issue_pv(t - 1);
                    wgmma_wait<0>();
                    fence_operands(o);
                    fence_operands(pa);
                    if (lane == 0)
                        mbar_arrive(v_empty((t - 1) % STAGES));
                    issue_s(t);
                    turn_end();
                    wgmma_wait<0>();
                    fence_operands(sc);
                    if (lane == 0)
                        mbar_arrive(k_empty(t % STAGES));
                    softmax(t, may_mask);
                }
                rescale_pack();
            }
            turn_begin();
            issue_pv(wg_n - 1);
            turn_end();
            wgmma_wait<0>();
            fence_operands(o);
            fence_operands(pa);
            if (lane == 0)
                mbar_arrive(v_empty((wg_n - 1) % STAGES));
        } else {
            turn_begin(); /* the turn the first tile's S and the last P V would take */
            turn_end();
        }
        /* the tiles it does not read (all of them when idle): each stage released once it is full,
         * since the producer counts every consumer warp's arrival */
        for (int t = wg_n; t < ntiles; t++) {
            const int s = t % STAGES;
            turn_begin();
            turn_end();
            mbar_wait(k_full(s), (t / STAGES) & 1);
            if (lane == 0)
                mbar_arrive(k_empty(s));
            mbar_wait(v_full(s), (t / STAGES) & 1);
            if (lane == 0)
                mbar_arrive(v_empty(s));
        }
        if (PP && cw == 0)
            turn_begin(); /* the last warpgroup's last turn ends on warpgroup 0's barrier */

        /* out = O / l (a row that saw nothing: zeros), lse = ln(sum) */
        constexpr int EB = att_elem_bytes<DT>();
        /* staged: the rows go through this warpgroup's own part of the Q tile (free once its
         * last S is done; O's 64-column blocks where Q's were) and leave as whole 16-byte pieces,
         * instead of 2-byte stores from the fragments (H200: 3-6% faster prefill); a warpgroup
         * with fewer rows (packed decode: a few) stores them directly, without the barrier */
        const bool staged = VB <= QB && a.vec_out && tile.rows >= (cw + 1) * 64;
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
            inv[r] = l[r] > 0.0f ? __frcp_rn(l[r]) : 0.0f;
            const int row = row_of(r), hrow = head_of(r);
            if (row >= a.seq_q)
                continue;
            if (a.lse && quad == 0)
                a.lse[(b * a.heads_q + hrow) * a.seq_q + row] = l[r] > 0.0f ? (m[r] + __log2f(l[r])) * LN2 : -INFINITY;
            if (staged)
                continue;
            void *ob = (char *)a.out + (b * a.os[0] + hrow * a.os[1] + row * a.os[2]) * EB;
#pragma unroll
            for (int nb = 0; nb < NV / 8; nb++) {
                const int c = nb * 8 + 2 * quad;
                if (c < a.dv)
                    Elem<DT>::st(ob, c, o[4 * nb + 2 * r] * inv[r]);
                if (c + 1 < a.dv)
                    Elem<DT>::st(ob, c + 1, o[4 * nb + 2 * r + 1] * inv[r]);
            }
        }
        if (staged) {
            /* 128-byte rows, 16-byte pieces XOR-swizzled by the row (conflict-free both ways) */
            const uint32_t base = sq + cw * 64 * BOX_BYTES_ROW;
            auto piece = [&](int blk, int srow, int chunk) {
                return base + blk * BM * BOX_BYTES_ROW + srow * BOX_BYTES_ROW + ((chunk ^ (srow & 7)) << 4);
            };
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int srow = warp * 16 + lane / 4 + r * 8;
#pragma unroll
                for (int nb = 0; nb < NV / 8; nb++) {
                    const uint32_t v = pack2(DT, o[4 * nb + 2 * r] * inv[r], o[4 * nb + 2 * r + 1] * inv[r]);
                    asm volatile("st.shared.b32 [%0], %1;" ::"r"(piece(nb / 8, srow, nb % 8) + 4 * quad), "r"(v)
                                 : "memory");
                }
            }
            asm volatile("bar.sync %0, 128;" ::"r"(ATT_WG_EPI_BARRIER + cw) : "memory");
            const int t = tid % 128;
#pragma unroll
            for (int blk = 0; blk < VB; blk++)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int srow = t / 8 + 16 * k, chunk = t % 8, col = blk * 64 + chunk * 8;
                    const int row = row_at(cw * 64 + srow);
                    if (row >= a.seq_q || col >= a.dv)
                        continue;
                    uint32_t w0, w1, w2, w3;
                    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                                 : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3)
                                 : "r"(piece(blk, srow, chunk))
                                 : "memory");
                    char *ob = (char *)a.out + (b * a.os[0] + head_at(cw * 64 + srow) * a.os[1] + row * a.os[2] + col) * EB;
                    *(uint4 *)ob = make_uint4(w0, w1, w2, w3);
                }
        }
    }
#else
    (void)tq;
    (void)tk;
    (void)tv;
    (void)pq;
    (void)pk;
    (void)pv;
    (void)a;
    (void)tile;
    __trap(); /* the host launches it only where the binary has wgmma */
#endif
}

typedef void (*wg_fn)(CUtensorMap, CUtensorMap, CUtensorMap, MapPerm, MapPerm, MapPerm, rdg_att_args, WgTile);

template <int DT, bool GEN>
wg_fn wg_kernel_gen(int qb, int vb)
{
    return qb == 1 ? (vb == 1 ? att_wgmma_kernel<DT, 1, 1, GEN, 2> : att_wgmma_kernel<DT, 1, 2, GEN, 2>)
                   : (vb == 1 ? att_wgmma_kernel<DT, 2, 1, GEN, 2> : att_wgmma_kernel<DT, 2, 2, GEN, 2>);
}

/* GEN: a mask, bias or softcap (the per-element score path); nc 3 only at D, Dv <= 64 without
 * it (wg_tile) */
template <int DT>
wg_fn wg_kernel_dt(int qb, int vb, bool gen, int nc)
{
    if (nc == 3)
        return att_wgmma_kernel<DT, 1, 1, false, 3>;
    return gen ? wg_kernel_gen<DT, true>(qb, vb) : wg_kernel_gen<DT, false>(qb, vb);
}

/* dynamic shared memory limit raised once per (kernel, device) */
std::atomic<int> g_wg_smem_done[20][64];

int blocks_of(int64_t d)
{
    return d <= 64 ? 1 : 2;
}

/* A last-dim-contiguous [B, H, S, D] operand (element strides st of b, h, s) as a 4-D map
 * (D, then the outer dims by increasing stride), boxes of 64 columns x rows x hrows heads. Outer dims of
 * extent 1 go last with a stride that nests (never used: their coordinate is 0). */
bool encode_operand(PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *map, MapPerm *perm, const void *base,
                    rudnn_dtype_t dt, int64_t d, int64_t s, int64_t hds, int64_t bs, const int64_t st[3], int rows,
                    int hrows)
{
    const int64_t ext[3] = {s, hds, bs};
    const int64_t str[3] = {st[2], st[1], st[0]}; /* of s, h, b */
    int order[3] = {0, 1, 2};
    /* insertion sort: extent-1 dims last, the rest by stride */
    for (int i = 1; i < 3; i++)
        for (int j = i; j > 0; j--) {
            const int x = order[j - 1], y = order[j];
            const bool swap = (ext[x] == 1 && ext[y] != 1) || (ext[x] != 1 && ext[y] != 1 && str[x] > str[y]);
            if (!swap)
                break;
            order[j - 1] = y;
            order[j] = x;
        }
    cuuint64_t dims[4] = {(cuuint64_t)d, 0, 0, 0};
    cuuint64_t strides[3];
    int64_t span = d; /* elements the dims so far cover */
    for (int i = 0; i < 3; i++) {
        const int k = order[i];
        const int64_t sb = ext[k] == 1 ? span : str[k];
        dims[1 + i] = (cuuint64_t)ext[k];
        strides[i] = (cuuint64_t)sb * 2;
        perm->slot[k] = 1 + i;
        const int64_t reach = sb * ext[k];
        span = reach > span ? reach : span;
    }
    cuuint32_t box[4] = {64, 1, 1, 1};
    box[perm->slot[0]] = (cuuint32_t)rows; /* the rows run along s, wherever its stride put it */
    box[perm->slot[1]] = (cuuint32_t)hrows; /* and hrows heads of them (packed GQA; else 1) */
    return rdg_encode_map16(enc, map, base, dt, 4, dims, strides, box);
}

/* The query tile of plan (WgTile; h_inner comes from Q's map): the one place it is chosen. Three
 * consumer warpgroups at D, Dv <= 64 without the per-element path from ATT_WG3_MIN_SQ up, else
 * two. Sq below BM takes a tile of the next power of two (so that a decode step leaves the
 * second consumer idle); grouped-query heads are packed up to ATT_WG_PACK_MAX_SQ. */
WgTile wg_tile(const rudnn_attention_plan_t *p)
{
    WgTile t;
    const int64_t group = p->heads_q / p->heads_kv;
    const bool gen = p->has_mask || p->has_bias || p->softcap > 0.0f;
    t.nc = p->head_dim <= 64 && p->head_dim_v <= 64 && !gen && p->seq_q >= ATT_WG3_MIN_SQ ? 3 : 2;
    const int BM = t.nc == 3 ? 192 : ATT_WG_BM;
    t.sqt = 1;
    while (t.sqt < p->seq_q && t.sqt < BM)
        t.sqt *= 2;
    if (t.sqt > BM) /* 192 rows */
        t.sqt = BM;
    t.gp = 1;
    if (group > 1 && BM % group == 0 && p->seq_q <= ATT_WG_PACK_MAX_SQ) {
        t.gp = (int)group;
        if (t.sqt > BM / t.gp)
            t.sqt = BM / t.gp;
    }
    t.rows = t.sqt * t.gp;
    t.q_tiles = (int)rdg_ceil_div(p->seq_q, t.sqt);
    t.h_inner = 0;
    return t;
}

/* Whether the strides of an operand suit TMA: 16-byte multiples (16-bit elements: multiples of
 * 8) on every outer dim of extent > 1, and under 2^40 bytes. */
bool strides_ok(const int64_t st[3], int64_t s, int64_t hds, int64_t bs)
{
    const int64_t ext[3] = {bs, hds, s};
    for (int k = 0; k < 3; k++)
        if (ext[k] > 1 && (st[k] % 8 != 0 || st[k] <= 0 || st[k] >= ((int64_t)1 << 39)))
            return false;
    return true;
}

} // namespace

const char *rdg_att_wgmma_why(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *p, char *why, size_t cap)
{
    if (!dev->wgmma) {
        snprintf(why, cap, "wgmma needs an sm_90a device and binary (the device is sm_%d)", dev->arch);
        return why;
    }
    if (!dev->tensor_map_encode) {
        snprintf(why, cap, "the driver has no tensor-map encoder (cuTensorMapEncodeTiled)");
        return why;
    }
    if (p->dtype != RUDNN_F16 && p->dtype != RUDNN_BF16) {
        snprintf(why, cap, "F16 and BF16 only (no wgmma kernel for F32 inputs)");
        return why;
    }
    if (p->head_dim > 128 || p->head_dim_v > 128) {
        snprintf(why, cap, "D and Dv up to 128 (D %lld, Dv %lld)", (long long)p->head_dim, (long long)p->head_dim_v);
        return why;
    }
    if (p->head_dim % 8 || p->head_dim_v % 8) {
        snprintf(why, cap, "D and Dv multiples of 8 (16-byte TMA rows; D %lld, Dv %lld)", (long long)p->head_dim,
                 (long long)p->head_dim_v);
        return why;
    }
    if (!strides_ok(p->q_stride, p->seq_q, p->heads_q, p->batch) ||
        !strides_ok(p->k_stride, p->seq_kv, p->heads_kv, p->batch) ||
        !strides_ok(p->v_stride, p->seq_kv, p->heads_kv, p->batch)) {
        snprintf(why, cap, "q, k and v strides must be multiples of 8 elements (16 bytes, for TMA)");
        return why;
    }
    const WgTile t = wg_tile(p);
    const int64_t items = p->batch * (p->heads_q / t.gp) * rdg_ceil_div(p->seq_q, t.sqt);
    if (items > INT32_MAX || p->seq_q > INT32_MAX || p->seq_kv > INT32_MAX || p->heads_q > INT32_MAX ||
        p->batch > INT32_MAX) {
        snprintf(why, cap, "a grid or tensor-map coordinate passes 32 bits");
        return why;
    }
    if (wg_smem_bytes(t.nc, blocks_of(p->head_dim), blocks_of(p->head_dim_v)) > dev->smem_optin) {
        snprintf(why, cap, "the tiles need more shared memory than the device's %zu bytes", dev->smem_optin);
        return why;
    }
    return nullptr;
}

int rdg_att_wgmma_preferred(const rudnn_attention_plan_t *p)
{
    /* long enough for full tiles, or grouped-query heads packed into one (decode: K and V read
     * once per K/V head, 0.94x cuDNN on the H200, twice flash_decode's speed; bench/RESULTS.md) */
    return p->seq_q >= ATT_WG_PREFER_MIN_SQ || wg_tile(p).gp > 1;
}

rudnn_status_t rdg_att_run_wgmma(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a)
{
    const PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)q->dev.tensor_map_encode;
    if (((uintptr_t)a.q | (uintptr_t)a.k | (uintptr_t)a.v) & 15u)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": %s: " ATT_WGMMA_NAME " reads q, k and v with TMA: "
                         "each must start on 16 bytes", RUDNN_GPU_BACKEND_NAME);
    CUtensorMap tq, tk, tv;
    MapPerm pq, pk, pv;
    const int qb = blocks_of(plan->head_dim), vb = blocks_of(plan->head_dim_v);
    /* Skv 0: no key tile is loaded; k and v may be NULL, so their maps describe q */
    const bool keys = plan->seq_kv > 0;
    WgTile tile = wg_tile(plan);
    bool ok = encode_operand(enc, &tq, &pq, a.q, plan->dtype, plan->head_dim, plan->seq_q, plan->heads_q,
                             plan->batch, plan->q_stride, tile.sqt, tile.gp);
    tile.h_inner = pq.slot[1] < pq.slot[0]; /* the box lands head-fastest */
    ok = ok && encode_operand(enc, &tk, &pk, keys ? a.k : a.q, plan->dtype, plan->head_dim,
                              keys ? plan->seq_kv : plan->seq_q, keys ? plan->heads_kv : plan->heads_q, plan->batch,
                              keys ? plan->k_stride : plan->q_stride, BN, 1);
    ok = ok && encode_operand(enc, &tv, &pv, keys ? a.v : a.q, plan->dtype, keys ? plan->head_dim_v : plan->head_dim,
                              keys ? plan->seq_kv : plan->seq_q, keys ? plan->heads_kv : plan->heads_q, plan->batch,
                              keys ? plan->v_stride : plan->q_stride, BN, 1);
    if (!ok)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": %s: " ATT_WGMMA_NAME ": cuTensorMapEncodeTiled refused "
                         "an operand's layout", RUDNN_GPU_BACKEND_NAME);
    const bool bf16 = plan->dtype == RUDNN_BF16;
    const bool gen = plan->has_mask || plan->has_bias || plan->softcap > 0.0f;
    const wg_fn fn = bf16 ? wg_kernel_dt<RUDNN_BF16>(qb, vb, gen, tile.nc) : wg_kernel_dt<RUDNN_F16>(qb, vb, gen, tile.nc);
    const size_t smem = wg_smem_bytes(tile.nc, qb, vb);
    const int slot = tile.nc == 3 ? 16 + bf16 : (bf16 ? 0 : 8) + (gen ? 4 : 0) + (qb - 1) * 2 + (vb - 1);
    TRY(allow_smem_once(g_wg_smem_done, slot, (const void *)fn, q->dev.index, (int)smem, "attention wgmma"));
    const int64_t items = plan->batch * (plan->heads_q / tile.gp) * tile.q_tiles;
    (void)cudaGetLastError(); /* the check below sees this launch only */
    rdg_note_kernel(ATT_WGMMA_NAME);
    fn<<<dim3((unsigned)items), dim3(wg_threads(tile.nc)), smem, q->stream>>>(tq, tk, tv, pq, pk, pv, a, tile);
    return rdg_launched(ATT_WGMMA_NAME);
}
