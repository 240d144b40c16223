/* The FFN's int4 weight-only GEMM on tensor cores (CUDA only, sm_80+: mma.sync): C [m, n] = A [m, k]
 * W' [k, n], A BF16 / F16, W int4 (I4 storage: byte (r, c / 2) holds column c in its low nibble and
 * c + 1 in its high one), W' = round_A((w + offset) scale) per hal/ffn.h, FP32 sums. Kernel
 * "ffn.mma_w4", for m <= FFN_MMA_W4_MAX_M where rdg_ffn_mma_w4_fits.
 *
 * It computes C^T = W'^T A^T with mma.sync.m16n8k16 (row.col): the weights are the A operand (16
 * weight columns x 16 k), the tokens the B operand (8 a tile). Two freedoms make the weights' loads
 * plain: an A fragment's 16 rows may be any 16 columns of W (C is written with the same map), and
 * the 16 k slots of a k16 step any 16 rows of W, the tokens' fragment taking the same order.
 *   - lane = 4 g + t. Per k16 step at rows k0 .. k0 + 15 a thread holds VB bytes (2 VB columns) of
 *     each of the rows k0 + 4 t + i, i = 0..3, at the columns col_w + 2 VB g + [0, 2 VB): a warp
 *     covers 16 VB columns (VB 8: 128), each row's 8 VB bytes contiguous.
 *   - k slots 2t, 2t+1 are rows 4t, 4t+1; slots 2t+8, 2t+9 rows 4t+2, 4t+3. Tile j (0 .. VB - 1):
 *     fragment row g is column col_w + 2 VB g + 2 j (the low nibbles of byte j), row g + 8 the column
 *     after it (the high nibbles). So a0a1 = low nibbles of byte j of rows 4t, 4t+1, a2a3 their high
 *     nibbles, a4a5 / a6a7 the same of rows 4t+2, 4t+3.
 *   - The tokens' fragment of token g is A[g][k0 + 4t .. k0 + 4t + 3]: 8 contiguous bytes of the
 *     activations staged in shared memory (tokens past m are zeros).
 * Dequantization without offset: a prmt pairs two rows' bytes ([x.b0, x.b1, y.b0, y.b1]), a lop3
 * puts a nibble (XOR 8: w + 8) under a magic exponent (bf16 128, f16 1024: 128 + 8 + w), a packed
 * subtract leaves w exactly, a packed multiply by the column's scale rounds w s once (exact in FP32,
 * so it is hal/ffn.h's rounding). F16's high nibbles stay in place (1024 + 16 (w + 8), one fma by
 * 1/16 gives w). With an offset: FP32 (w + o) s, rounded once, as hal/ffn.h.
 *
 * Memory: each weight byte is read once, by cp.async (evicted first from L2) into a ring of
 * FFN_MMA_W4_STAGES k16 steps a warp (each lane reads back only what its warp copied: __syncwarp, no
 * block barrier), so that the bytes in flight do not hold registers. The activations of the
 * block's k slice are staged in chunks of kc rows (double-buffered, one block barrier a chunk). A
 * block is 4 warps: wc warps side by side along n and wk along k (interleaved k16 steps), summed in
 * shared memory in a fixed order (wk 1, VB 8: each warp stores its own sums from its registers);
 * the grid splits k (so that one wave of blocks fills the GPU) and, past FFN_MMA_W4_TOKENS_MAX
 * tokens, the tokens. Splits write FP32 partials [split, m, n] that a second kernel adds in split
 * order. Every sum has one fixed order: deterministic. */
#include <math.h>
#include <string.h>

#include "rdg_internal.h"
#include "ffn_tuning.h"
#include "int4_bits.cuh"
#include "mma_sync.cuh"
#include "pdl.cuh"

namespace {

constexpr int THREADS = FFN_MMA_W4_THREADS;
constexpr int WARPS = THREADS / 32;
constexpr int STAGES = FFN_MMA_W4_STAGES;
/* 1: the weights enter the products as their raw codes (bias + w, exact), and each group's sums are
 * scaled in FP32 at the group's end (see the header); 0: each weight is dequantized and rounded first */
constexpr bool FOLD = FFN_MMA_W4_FOLD != 0;
static_assert(FFN_MMA_W4_FOLD_NT == 1 || FFN_MMA_W4_FOLD_NT == 2 || FFN_MMA_W4_FOLD_NT == 4,
              "FFN_MMA_W4_FOLD_NT: 1, 2 or 4 token tiles");

/* whether a variant of nt token tiles a warp folds its groups' sums */
__host__ __device__ constexpr bool folds(int nt)
{
    return FOLD && nt <= FFN_MMA_W4_FOLD_NT;
}

/* whether a folding variant keeps its FP32 sums in shared memory (more than one tile: only the
 * group ends touch them, and the registers then fit more blocks an SM) */
__host__ __device__ constexpr bool acc_smem(int nt)
{
    return FFN_MMA_W4_FOLD_SMEM && nt > 1 && folds(nt);
}

/* bytes a row a thread of a variant of nt token tiles: 8 up to two tiles (a warp 128 columns; 4
 * at two tiles and 3 blocks an SM was as slow on an H100 as the fold's 2), else 4 */
__host__ __device__ constexpr int vb_of(int nt)
{
    return nt <= 2 ? 8 : 4;
}

/* blocks an SM of a variant (its registers): 8 tiles' accumulators, the FP32 scales and offsets, or
 * the group sums of more than one tile take the larger count of registers */
constexpr int blocks_sm(int nt, bool off)
{
    return nt == 8 || off ? FFN_MMA_W4_BLOCKS_SM_LARGE
           : nt > 1 && folds(nt) ? FFN_MMA_W4_BLOCKS_SM_FOLD
                                 : FFN_MMA_W4_BLOCKS_SM_SMALL;
}
static_assert(WARPS == 4, "a block is 4 warps (wc x wk of 4 x 1, 2 x 2, 1 x 4)");
static_assert(STAGES >= 2 && STAGES <= 8, "cp.async waits are written for 2 .. 8 stages");

struct MmaArgs {
    const void *a;         /* [m, k] */
    const uint8_t *b;      /* [k, n / 2] */
    const uint16_t *scale; /* [groups, n] */
    const uint16_t *offset;
    float *partial; /* [splits, m, n] when splits > 1 */
    void *c;        /* [m, n] when splits == 1 */
    int64_t n;
    int m, k;
    int group_rows;
    int steps_per_group; /* a warp's k16 steps in a group (gs / wk) */
    int steps_per_split; /* k16 steps a split */
    int splits;
    int wk;      /* warps along k in a block */
    int kc;      /* activation rows a chunk (a multiple of 16) */
    int a_async; /* A 16-byte aligned: staged with cp.async */
    int scale4;  /* scale (and offset) 4-byte aligned: column pairs loaded as words */
    int out16;   /* what the epilogue writes (partial, else c) 16-byte aligned */
    int c_dtype;
};

/* The grouped launch's experts: blockIdx.x = expert e tblocks + token block; expert e's rows
 * [offsets[e], offsets[e + 1]) of a and c, its weights b + e b_stride, scale / offset + e s_stride. */
struct MmaExperts {
    const uint32_t *offsets;
    int tblocks;
    int64_t b_stride, s_stride;
};

/* ---- PTX helpers -------------------------------------------------------------------------------- */

template <int ADT>
__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t r;
    if constexpr (ADT == RUDNN_BF16)
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    else
        asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

template <int N>
__device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* waits until at most n (clamped to 0 .. 7) of this thread's copy groups are pending */
__device__ __forceinline__ void cp_wait_runtime(int n)
{
    switch (n < 0 ? 0 : n) {
    case 0: cp_wait<0>(); break;
    case 1: cp_wait<1>(); break;
    case 2: cp_wait<2>(); break;
    case 3: cp_wait<3>(); break;
    case 4: cp_wait<4>(); break;
    case 5: cp_wait<5>(); break;
    case 6: cp_wait<6>(); break;
    default: cp_wait<7>(); break;
    }
}

__device__ __forceinline__ void cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp16(uint32_t smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
}

/* An L2 policy that evicts first what it covers: the weights are read once, while the partials
 * written at the end (and read by the split sum) and the activations stay in L2 instead of being
 * written back to DRAM and read again. H100, K1 8192 N1 28672 g128: M 1 / 8 / 16 0.960 / 0.935 /
 * 0.963 of the time without it (bench/RESULTS.md). */
__device__ __forceinline__ uint64_t evict_first_policy()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

/* cp16 of a weight piece under pol (evict_first_policy), with a 256-byte L2 prefetch: a lane's
 * pieces of a step are 16 bytes of rows that the next steps continue */
__device__ __forceinline__ void cp16_once(uint32_t smem, const void *gmem, uint64_t pol)
{
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "l"(pol)
                 : "memory");
}

/* ---- dequantization ----------------------------------------------------------------------------- */

/* The 16-bit pair holding 128 + 8 + w (bf16) or 1024 + 8 + w (f16) of the nibbles at bits 0..3 and
 * 16..19 of v (two's complement nibbles: XOR 8 gives w + 8). */
template <int ADT>
__device__ __forceinline__ uint32_t nib_lo(uint32_t v)
{
    if constexpr (ADT == RUDNN_BF16)
        return and_xor<0x000f000fu, 0x43084308u>(v);
    else
        return and_xor<0x000f000fu, 0x64086408u>(v);
}

/* without offset: the low-nibble pair t as w s, each half rounded once */
template <int ADT>
__device__ __forceinline__ uint32_t deq_lo(uint32_t t, uint32_t s2)
{
    constexpr uint32_t one = ADT == RUDNN_BF16 ? 0x3F803F80u : 0x3C003C00u;
    constexpr uint32_t bias = ADT == RUDNN_BF16 ? 0xC308C308u : 0xE408E408u; /* -136, -1032 */
    return hfma2<ADT>(hfma2<ADT>(t, one, bias), s2, 0x80008000u);            /* + -0: the product's sign */
}

/* The pair from the nibbles at bits 4..7 and 20..23 of v: bf16 shifts them down (its mantissa has
 * no room for them in place); f16 keeps them: 1024 + 16 (w + 8), and fma(t, 1/16, -72) = w exactly. */
template <int ADT>
__device__ __forceinline__ uint32_t deq_hi(uint32_t v, uint32_t s2)
{
    if constexpr (ADT == RUDNN_BF16) {
        return deq_lo<ADT>(nib_lo<ADT>(v >> 4), s2);
    } else {
        const uint32_t t = and_xor<0x00f000f0u, 0x64806480u>(v);
        return hfma2<ADT>(hfma2<ADT>(t, 0x2C002C00u, 0xD480D480u), s2, 0x80008000u);
    }
}

/* FOLD: the pair of codes bias + w, exact in A's dtype, of the low (HI 0) or high (HI 1) nibbles at
 * bits 0..7 and 16..23 of v. BF16: the nibble at bits 0..3 under 128 (136 + w); F16: at bits 4..7
 * under 64 (72 + w), a bias 14x smaller than 1024's, so that the FP32 group sums lose less to it. */
template <int ADT, int HI>
__device__ __forceinline__ uint32_t raw_code(uint32_t v)
{
    if constexpr (ADT == RUDNN_BF16)
        return nib_lo<ADT>(HI ? v >> 4 : v);
    else
        return and_xor<0x00f000f0u, 0x54805480u>(HI ? v : v << 4);
}

/* with offset: the pair t of nib_lo as round_A((w + o) s) in FP32 (o, s: the column's) */
template <int ADT>
__device__ __forceinline__ uint32_t deq_off(uint32_t t, float o, float s)
{
    float lo, hi;
    if constexpr (ADT == RUDNN_BF16) {
        lo = __uint_as_float(t << 16) - 136.0f;
        hi = __uint_as_float(t & 0xffff0000u) - 136.0f;
    } else {
        lo = rdg_f16_to_f32((uint16_t)t) - 1032.0f;
        hi = rdg_f16_to_f32((uint16_t)(t >> 16)) - 1032.0f;
    }
    lo = __fmul_rn(__fadd_rn(lo, o), s);
    hi = __fmul_rn(__fadd_rn(hi, o), s);
    if constexpr (ADT == RUDNN_BF16)
        return rdg_pack_bf16x2(lo, hi);
    else
        return (uint32_t)rdg_f32_to_f16(lo) | (uint32_t)rdg_f32_to_f16(hi) << 16;
}

/* ---- the kernel --------------------------------------------------------------------------------- */

/* Shared memory: the weight rings (WARPS x STAGES x 128 VB bytes), then the two activation chunk
 * buffers (MT rows of kc + 16 elements: the pad spreads the tokens' fragment loads over the banks);
 * the epilogue reuses it from 0 for the warps' sums. */
template <int VB, int NT>
struct Smem {
    static constexpr int MT = 8 * NT;
    static constexpr int STAGE = 128 * VB;
    static constexpr int RING = WARPS * STAGES * STAGE;
    static constexpr int REGS = 4 * VB * NT;
    static constexpr int EPI = WARPS * REGS * 33 * 4;
    static constexpr bool ACCS = acc_smem(NT);
    __host__ __device__ static size_t a_stride(int kc) { return (size_t)kc + 16; }
    /* the FP32 sums ([REGS][THREADS] floats where ACCS) past the main loop's and the epilogue's */
    __host__ __device__ static size_t acc_off(int kc)
    {
        const size_t main = (size_t)RING + 2 * (size_t)MT * a_stride(kc) * 2;
        return main > (size_t)EPI ? main : (size_t)EPI;
    }
    static size_t bytes(int kc) { return acc_off(kc) + (ACCS ? (size_t)THREADS * REGS * 4 : 0); }
};

template <int ADT, int VB, int NT, bool OFF, int MINB, bool GROUPED>
__global__ void __launch_bounds__(THREADS, MINB) ffn_mma_w4(MmaArgs g, MmaExperts ex)
{
    using SM = Smem<VB, NT>;
    constexpr int MT = SM::MT, STAGE = SM::STAGE, COLS_W = 16 * VB, WORDS = VB / 4;
    constexpr int CPL = STAGE / 16 / 32; /* 16-byte copies a lane a stage */
    constexpr float MAGIC_BIAS = ADT == RUDNN_BF16 ? 136.0f : 72.0f; /* FOLD: raw_code's value less w */
    constexpr bool FOLDV = folds(NT);
    constexpr bool ACCS = SM::ACCS; /* acc in shared memory: accs[(j NT + nt) 4 + i][THREADS] */
    static_assert(VB == 4 || VB == 8 || VB == 16, "VB: 4, 8 or 16 bytes a row a thread");
    extern __shared__ __align__(16) uint8_t smem[];

    rdg_pdl_trigger(); /* the split sum may be scheduled now: it waits for this grid's end */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gq = lane >> 2, tq = lane & 3;
    const int wk = g.wk, wcn = WARPS / wk;
    const int wc = warp % wcn, kw = warp / wcn;
    const int cols_cta = wcn * COLS_W;
    const int64_t col_cta = (int64_t)blockIdx.y * cols_cta;
    const int64_t col_w = col_cta + (int64_t)wc * COLS_W;
    int tok0 = (int)blockIdx.x * MT, mrows;
    const uint8_t *gb = g.b;
    const uint16_t *gscale = g.scale, *goffset = g.offset;
    if constexpr (GROUPED) { /* one expert's token block (none: the whole block leaves) */
        const int e = (int)blockIdx.x / ex.tblocks;
        const int r1 = (int)ex.offsets[e + 1];
        tok0 = (int)ex.offsets[e] + ((int)blockIdx.x - e * ex.tblocks) * MT;
        if (tok0 >= r1)
            return;
        mrows = r1 - tok0 < MT ? r1 - tok0 : MT;
        gb += e * ex.b_stride;
        gscale += e * ex.s_stride;
        if constexpr (OFF)
            goffset += e * ex.s_stride;
    } else {
        mrows = g.m - tok0 < MT ? g.m - tok0 : MT;
    }
    const int steps = g.k / 16;
    const int s0 = (int)blockIdx.z * g.steps_per_split;
    const int s1 = s0 + g.steps_per_split < steps ? s0 + g.steps_per_split : steps;
    const int kc = g.kc, cs = kc / 16;
    const int ast = kc + 16;
    const int64_t rowbytes = g.n / 2;

    uint8_t *ring = smem + warp * STAGES * STAGE;
    uint16_t *abuf = (uint16_t *)(smem + SM::RING);
    const uint32_t ring_s = rdg_smem_addr(ring);

    /* tokens past m read zeros (ast is a multiple of 8: whole 16-byte words) */
    for (int b = 0; b < 2; b++)
        for (int r = mrows; r < MT; r++) {
            uint4 *row = (uint4 *)(abuf + ((size_t)b * MT + r) * ast);
            for (int c = tid; c < ast / 8; c += THREADS)
                row[c] = make_uint4(0u, 0u, 0u, 0u);
        }

    /* the activation rows of chunk ch into buffer ch & 1 (cp.async when aligned, else plain) */
    auto stage_a = [&](int ch) {
        const int r0 = 16 * (s0 + ch * cs);
        const int krows = 16 * s1 - r0 < kc ? 16 * s1 - r0 : kc;
        uint16_t *dst = abuf + (size_t)(ch & 1) * MT * ast;
        const uint16_t *src = (const uint16_t *)g.a + (int64_t)tok0 * g.k + r0;
        if (g.a_async) {
            const int per = krows / 8;
            for (int e = tid; e < mrows * per; e += THREADS) {
                const int tk = e / per, p = e % per;
                cp16(rdg_smem_addr(dst + (size_t)tk * ast + 8 * p), src + (int64_t)tk * g.k + 8 * p);
            }
        } else {
            for (int e = tid; e < mrows * krows; e += THREADS) {
                const int tk = e / krows, p = e % krows;
                dst[(size_t)tk * ast + p] = __ldg(src + (int64_t)tk * g.k + p);
            }
        }
    };

    /* this warp's k16 steps: s0 + kw + wk i, i < nsteps */
    const int nsteps = s1 - s0 - kw > 0 ? (s1 - s0 - kw + wk - 1) / wk : 0;
    const int64_t step_bytes = 16 * (int64_t)wk * rowbytes;
    /* lane copy q takes 16-byte piece cidx = lane + 32 q of the stage: slot cidx / (VB / 2) (slot
     * i * 4 + t holds row 4 t + i), part cidx % (VB / 2); with 32 lanes covering whole rows' worth of
     * slots, copy q is copy 0 of the row 16 / VB q further down (one pointer, no offsets held) */
    static_assert(CPL == 1 || 32 % (VB / 2) == 0, "a lane's copies: one per row block");
    const int slot0 = lane / (VB / 2), part0 = lane % (VB / 2);
    const uint8_t *src = gb + (int64_t)16 * (s0 + kw) * rowbytes + col_w / 2 +
                         (int64_t)(4 * (slot0 & 3) + (slot0 >> 2)) * rowbytes + 16 * part0;
    const int64_t qstride = (int64_t)(16 / VB) * rowbytes;
    const uint32_t dst0 = ring_s + (uint32_t)lane * 16u;
    int issued = 0, slot_in = 0;
    const uint64_t pol = evict_first_policy();
    auto issue = [&]() {
        if (issued < nsteps) {
#pragma unroll
            for (int q = 0; q < CPL; q++)
                cp16_once(dst0 + (uint32_t)(slot_in * STAGE + 512 * q), src + q * qstride, pol);
            src += step_bytes;
        }
        cp_commit();
        issued++;
        slot_in = slot_in + 1 == STAGES ? 0 : slot_in + 1;
    };

    /* scales (and offsets) of the columns col_w + 2 VB gq + c, the next group's loaded ahead. The
     * warp's steps s0 + kw + wk i fall gs / wk to a group past the first (the plan makes wk divide
     * gs where there are several groups; one group is never left), so a countdown finds the
     * boundaries: no division a group. */
    const int gs = g.group_rows / 16;
    const int s_first = s0 + kw;
    int grp = s_first / gs;
    int left = nsteps > 0 ? ((grp + 1) * gs - s_first + wk - 1) / wk : 0; /* its steps left in grp */
    const int64_t col_t = col_w + 2 * VB * gq;
    /* column pairs (2i, 2i + 1) in one word each: one 32-bit load where the arrays allow it */
    uint32_t pre_s[VB], pre_o[OFF ? VB : 1];
    auto load_pairs = [&](const uint16_t *p, uint32_t *dst) {
        if (g.scale4) {
#pragma unroll
            for (int i = 0; i < VB; i++)
                dst[i] = __ldg((const uint32_t *)p + i);
        } else {
#pragma unroll
            for (int i = 0; i < VB; i++)
                dst[i] = (uint32_t)__ldg(p + 2 * i) | (uint32_t)__ldg(p + 2 * i + 1) << 16;
        }
    };
    auto prefetch = [&](int grp) {
        load_pairs(gscale + (int64_t)grp * g.n + col_t, pre_s);
        if constexpr (OFF)
            load_pairs(goffset + (int64_t)grp * g.n + col_t, pre_o);
    };
    uint32_t s2[OFF || FOLDV ? 1 : 2 * VB];
    float sf[OFF || FOLDV ? 2 * VB : 1], of[OFF || FOLDV ? 2 * VB : 1];
    /* the loaded group's values into the form the dequantization (or the fold: of = offset - bias)
     * takes */
    auto unpack = [&]() {
#pragma unroll
        for (int c = 0; c < 2 * VB; c++) {
            const int sh = 16 * (c & 1);
            if constexpr (FOLDV) {
                const uint16_t sv = (uint16_t)(pre_s[c / 2] >> sh);
                sf[c] = ADT == RUDNN_BF16 ? rdg_bf16_to_f32(sv) : rdg_f16_to_f32(sv);
                float o = 0.0f;
                if constexpr (OFF) {
                    const uint16_t ov = (uint16_t)(pre_o[c / 2] >> sh);
                    o = ADT == RUDNN_BF16 ? rdg_bf16_to_f32(ov) : rdg_f16_to_f32(ov);
                }
                of[c] = o - MAGIC_BIAS;
            } else if constexpr (OFF) {
                const uint16_t sv = (uint16_t)(pre_s[c / 2] >> sh), ov = (uint16_t)(pre_o[c / 2] >> sh);
                sf[c] = ADT == RUDNN_BF16 ? rdg_bf16_to_f32(sv) : rdg_f16_to_f32(sv);
                of[c] = ADT == RUDNN_BF16 ? rdg_bf16_to_f32(ov) : rdg_f16_to_f32(ov);
            } else {
                s2[c] = prmt(pre_s[c / 2], 0u, (c & 1) ? 0x3232u : 0x1010u); /* the half twice */
            }
        }
    };
    if (nsteps > 0)
        prefetch(grp);

    float acc[ACCS ? 1 : VB][ACCS ? 1 : NT][4];
    float *accs = (float *)(smem + SM::acc_off(kc)) + tid;
    /* the FP32 sum of fragment row pair (j, i) of token tile nt, in registers or shared memory */
    auto sum = [&](int j, int nt, int i) -> float & {
        if constexpr (ACCS)
            return accs[((j * NT + nt) * 4 + i) * THREADS];
        else
            return acc[j][nt][i];
    };
#pragma unroll
    for (int j = 0; j < VB; j++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                sum(j, nt, i) = 0.0f;
    /* FOLD: the group's sums of the raw codes (bias + w) and of the tokens (the all-ones product, in
     * the accumulators' layout: token 2 tq + (i & 1) of tile nt), folded into acc at its end */
    float accg[FOLDV ? VB : 1][NT][4], xg[NT][4];
    auto zero_group = [&]() {
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                xg[nt][i] = 0.0f;
#pragma unroll
                for (int j = 0; j < (FOLDV ? VB : 1); j++)
                    accg[j][nt][i] = 0.0f;
            }
        }
    };
    /* acc += scale ((bias + w) x sums + (offset - bias) x sums), per column (fragment rows g: the
     * even column 2 j, g + 8: the odd one) */
    auto fold = [&]() {
        if constexpr (FOLDV) {
#pragma unroll
            for (int j = 0; j < VB; j++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int c = 2 * j + (i >> 1);
                        float &a = sum(j, nt, i);
                        a = fmaf(sf[c], fmaf(of[c], xg[nt][i & 1], accg[j][nt][i]), a);
                    }
            zero_group();
        }
    };
    zero_group();

    /* prologue: chunk 0 of the activations, STAGES - 1 steps of weights */
    const int nch = s1 > s0 ? (s1 - s0 + cs - 1) / cs : 0;
    int after_a = 0; /* copy groups committed after the latest activation chunk's */
    constexpr bool WEIGHTS_FIRST = FFN_MMA_W4_EARLY && !GROUPED;
    if constexpr (WEIGHTS_FIRST) {
        /* launched early (Plan::early), the weights first: final before the previous kernel began,
         * they are read while it ends; the activations, its output, after the wait (a no-op where
         * the launch was plain). The chunk's group is then the newest: its wait takes all. */
#pragma unroll
        for (int p = 0; p < STAGES - 1; p++)
            issue();
        rdg_pdl_wait();
    }
    if (nch > 0)
        stage_a(0);
    cp_commit();
    if constexpr (!WEIGHTS_FIRST) {
#pragma unroll
        for (int p = 0; p < STAGES - 1; p++)
            issue();
        after_a = STAGES - 1;
    }
    if (nsteps > 0) {
        unpack();
        if ((grp + 1) * gs < s1)
            prefetch(grp + 1);
    }

    int slot_out = 0, done = 0;
    for (int ch = 0; ch < nch; ch++) {
        cp_wait_runtime(after_a < STAGES - 1 ? after_a : STAGES - 1); /* this chunk's own copies */
        __syncthreads(); /* every thread's copies of it, and everyone past the chunk before */
        if (ch + 1 < nch) {
            stage_a(ch + 1);
            cp_commit();
            after_a = 0;
        }
        const uint16_t *ab = abuf + (size_t)(ch & 1) * MT * ast;
        const int cs0 = s0 + ch * cs, cs1 = cs0 + cs < s1 ? cs0 + cs : s1;
        for (int s = s0 + kw + wk * done; s < cs1; s += wk, done++) {
            cp_wait<STAGES - 2>(); /* this step's weights (copies of this thread) */
            __syncwarp();          /* ... of every lane; and every lane past the slot issue() refills */
            issue();
            after_a++;
            const uint8_t *st = ring + slot_out * STAGE;
            slot_out = slot_out + 1 == STAGES ? 0 : slot_out + 1;
            uint32_t w[4][WORDS];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint8_t *p = st + (i * 4 + tq) * (8 * VB) + gq * VB;
                if constexpr (VB == 16) {
                    const uint4 v = *(const uint4 *)p;
                    w[i][0] = v.x, w[i][1] = v.y, w[i][2] = v.z, w[i][3] = v.w;
                } else if constexpr (VB == 8) {
                    const uint2 v = *(const uint2 *)p;
                    w[i][0] = v.x, w[i][1] = v.y;
                } else {
                    w[i][0] = *(const uint32_t *)p;
                }
            }
            uint32_t bf[NT][2];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const uint2 v = *(const uint2 *)(ab + (size_t)(8 * nt + gq) * ast + (s - cs0) * 16 + 4 * tq);
                bf[nt][0] = v.x, bf[nt][1] = v.y;
            }
            if (left == 0) { /* a new group: its scales were loaded ahead */
                fold();
                unpack();
                grp++;
                left = g.steps_per_group;
                if ((grp + 1) * gs < s1)
                    prefetch(grp + 1);
            }
            left--;
#pragma unroll
            for (int wd = 0; wd < WORDS; wd++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    /* [x.b, x.b+1, y.b, y.b+1] of rows 4t, 4t+1 (k slots 2t, 2t+1) and 4t+2, 4t+3 */
                    const uint32_t sel = h ? 0x7632u : 0x5410u;
                    const uint32_t p01 = prmt(w[0][wd], w[1][wd], sel), p23 = prmt(w[2][wd], w[3][wd], sel);
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int j = 4 * wd + 2 * h + e;
                        const uint32_t v01 = p01 >> (8 * e), v23 = p23 >> (8 * e);
                        uint32_t a[4]; /* a0a1, a4a5: the even column (fragment row g); a2a3, a6a7: the odd */
                        if constexpr (FOLDV) { /* the raw codes bias + w, exact in A's dtype */
                            a[0] = raw_code<ADT, 0>(v01);
                            a[1] = raw_code<ADT, 1>(v01);
                            a[2] = raw_code<ADT, 0>(v23);
                            a[3] = raw_code<ADT, 1>(v23);
#pragma unroll
                            for (int nt = 0; nt < NT; nt++)
                                mma16816<ADT>(accg[j][nt], a, bf[nt][0], bf[nt][1]);
                        } else {
                            if constexpr (OFF) {
                                a[0] = deq_off<ADT>(nib_lo<ADT>(v01), of[2 * j], sf[2 * j]);
                                a[1] = deq_off<ADT>(nib_lo<ADT>(v01 >> 4), of[2 * j + 1], sf[2 * j + 1]);
                                a[2] = deq_off<ADT>(nib_lo<ADT>(v23), of[2 * j], sf[2 * j]);
                                a[3] = deq_off<ADT>(nib_lo<ADT>(v23 >> 4), of[2 * j + 1], sf[2 * j + 1]);
                            } else {
                                a[0] = deq_lo<ADT>(nib_lo<ADT>(v01), s2[2 * j]);
                                a[1] = deq_hi<ADT>(v01, s2[2 * j + 1]);
                                a[2] = deq_lo<ADT>(nib_lo<ADT>(v23), s2[2 * j]);
                                a[3] = deq_hi<ADT>(v23, s2[2 * j + 1]);
                            }
#pragma unroll
                            for (int nt = 0; nt < NT; nt++)
                                mma16816<ADT>(acc[j][nt], a, bf[nt][0], bf[nt][1]);
                        }
                    }
                }
            }
            if constexpr (FOLDV) { /* the tokens' sums over the step's 16 rows */
                constexpr uint32_t one2 = ADT == RUDNN_BF16 ? 0x3F803F80u : 0x3C003C00u;
                const uint32_t ones[4] = {one2, one2, one2, one2};
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    mma16816<ADT>(xg[nt], ones, bf[nt][0], bf[nt][1]);
            }
        }
    }
    if (nsteps > 0)
        fold(); /* the last group */

    /* ---- epilogue ---- */
    cp_wait<0>();
    const int64_t mn = (int64_t)g.m * g.n;
    if (VB >= 8 && wk == 1 && g.out16) {
        /* each warp's sums are whole: stored from the registers, a thread's 2 VB consecutive columns
         * of each of its tokens in 16-byte pieces (no shared memory, no barrier; at VB 4, M 32, it
         * was no faster than the shared-memory path) */
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int tk = 8 * nt + 2 * tq + e;
                if (tk >= mrows)
                    continue;
                float v[2 * VB];
#pragma unroll
                for (int c = 0; c < 2 * VB; c++)
                    v[c] = sum(c >> 1, nt, 2 * (c & 1) + e);
                const int64_t o = (int64_t)(tok0 + tk) * g.n + col_t;
                if (g.splits > 1 || g.c_dtype == RUDNN_F32) {
                    float *out = g.splits > 1 ? g.partial + (int64_t)blockIdx.z * mn + o : (float *)g.c + o;
                    float4 *dst = (float4 *)out;
#pragma unroll
                    for (int q = 0; q < VB / 2; q++)
                        dst[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
                } else {
                    uint4 *dst = (uint4 *)((uint16_t *)g.c + o);
#pragma unroll
                    for (int q = 0; q < VB / 4; q++) {
                        uint32_t w[4];
#pragma unroll
                        for (int h = 0; h < 4; h++) {
                            const float lo = v[8 * q + 2 * h], hi = v[8 * q + 2 * h + 1];
                            w[h] = g.c_dtype == RUDNN_F16
                                       ? (uint32_t)rdg_f32_to_f16(lo) | (uint32_t)rdg_f32_to_f16(hi) << 16
                                       : (uint32_t)rdg_f32_to_bf16(lo) | (uint32_t)rdg_f32_to_bf16(hi) << 16;
                        }
                        dst[q] = make_uint4(w[0], w[1], w[2], w[3]);
                    }
                }
            }
        return;
    }
    /* the warps' sums in shared memory, added over wk in order, stored */
    __syncthreads();
    float *ep = (float *)smem;
    constexpr int REGS = SM::REGS;
#pragma unroll
    for (int j = 0; j < VB; j++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                ep[(warp * REGS + (nt * VB + j) * 4 + i) * 33 + lane] = sum(j, nt, i);
    __syncthreads();
    for (int e = tid; e < mrows * cols_cta; e += THREADS) {
        const int tk = e / cols_cta, col = e % cols_cta;
        const int wcx = col / COLS_W, r = col % COLS_W;
        const int gg = r / (2 * VB), j = (r % (2 * VB)) >> 1, hh = r & 1;
        const int nt = tk >> 3, tt = (tk & 7) >> 1, ee = tk & 1;
        const int at = ((nt * VB + j) * 4 + 2 * hh + ee) * 33 + 4 * gg + tt;
        float v = ep[(wcx * REGS) * 33 + at];
        for (int kx = 1; kx < wk; kx++)
            v += ep[((kx * wcn + wcx) * REGS) * 33 + at];
        const int64_t o = (int64_t)(tok0 + tk) * g.n + col_cta + col;
        if (g.splits > 1)
            g.partial[(int64_t)blockIdx.z * mn + o] = v;
        else if (g.c_dtype == RUDNN_F16)
            ((uint16_t *)g.c)[o] = rdg_f32_to_f16(v);
        else if (g.c_dtype == RUDNN_BF16)
            ((uint16_t *)g.c)[o] = rdg_f32_to_bf16(v);
        else
            ((float *)g.c)[o] = v;
    }
}

/* ---- the launch plan ------------------------------------------------------------------------------ */

/* What a launch runs: the variant (VB bytes a row a thread, NT token tiles a warp), the block's
 * shape (wk warps along k), the grid (token blocks, column tiles, splits of k). */
struct Plan {
    int vb, nt, minb, kc;
    int tblocks, wk, splits, steps_per_split;
    int64_t coltiles;
    bool early; /* launched as a programmatic dependent, the weights loaded before the wait */
};

/* The variant by the rows of A. */
void variant(int64_t m, bool off, Plan *pl)
{
    pl->nt = m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8;
    pl->vb = vb_of(pl->nt);
    pl->minb = blocks_sm(pl->nt, off);
    pl->kc = FFN_MMA_W4_CHUNK_ELEMS / (8 * pl->nt) / (acc_smem(pl->nt) ? 2 : 1); /* room for the sums */
    pl->tblocks = (int)rdg_ceil_div(m, 8 * pl->nt);
}

/* The block shape and the split of k. For each wk whose block width divides n, every split count
 * up to FFN_MMA_W4_MIN_STEPS steps a warp is costed in bytes moved at full bandwidth:
 *   - one wave (blocks <= slots): the weights' bytes, times the shortfall of warps in flight below
 *     FFN_MMA_W4_WARPS_SM an SM, or times the busiest SM's share of the work over the average one's
 *     where that share at the variant's issue load (issue_pct % of the issue slots an evenly loaded
 *     SM spends at full bandwidth) exceeds the SM (blocks of equal work sharing DRAM evenly finish
 *     together otherwise);
 *   - several waves: the weights' bytes over the fill of the waves (blocks / (waves x slots));
 * plus FFN_MMA_W4_PARTIAL_COST % of the partials' traffic (written once, read once). The cheapest
 * wins (the first of equals: fewer warps along k, fewer splits). */
Plan make_plan(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t grouped_experts = 0)
{
    Plan best;
    memset(&best, 0, sizeof best);
    /* grouped: every expert's weights, token blocks of its most rows, k never split */
    const int64_t experts = grouped_experts > 0 ? grouped_experts : 1;
    variant(grouped_experts > 0 ? p->rows_max : p->m, p->has_offset != 0, &best);
    const int64_t steps = p->k / 16;
    const double wbytes = (double)p->k * (double)p->n / 2.0 * (double)experts;
    const double sms = (double)(dev->sm_count > 0 ? dev->sm_count : 1), slots = sms * best.minb;
    const double issue = (best.nt <= 2 ? FFN_MMA_W4_ISSUE_PCT_16 : best.nt == 4 ? FFN_MMA_W4_ISSUE_PCT_32
                                                                                : FFN_MMA_W4_ISSUE_PCT_64) / 100.0;
    double best_cost = -1.0;
    for (int wk = 1; wk <= WARPS; wk *= 2) {
        const int64_t cols = (int64_t)(WARPS / wk) * 16 * best.vb;
        if (p->n % cols != 0 || (p->groups > 1 && p->k / p->groups / 16 % wk != 0))
            continue; /* the column tiles, and the kernel's group countdown (see ffn_mma_w4) */
        if (folds(best.nt) && wk > 1 && p->groups > 1 && p->n % ((int64_t)WARPS * 16 * best.vb) == 0)
            continue; /* a fold a group a warp: whole groups a warp where the columns allow it */
        const int64_t units = p->n / cols * best.tblocks * experts;
        int64_t smax = steps / ((int64_t)wk * FFN_MMA_W4_MIN_STEPS);
        smax = smax < 1 || grouped_experts > 0 ? 1 : smax > FFN_MMA_W4_MAX_SPLITS ? FFN_MMA_W4_MAX_SPLITS : smax;
        for (int64_t s = 1; s <= smax; s++) {
            const int64_t sps = rdg_ceil_div(steps, s), se = rdg_ceil_div(steps, sps);
            if (se != s)
                continue; /* the same split as a smaller s */
            const double blocks = (double)(units * se);
            double factor;
            if (blocks <= slots) {
                const double shortfall = sms * FFN_MMA_W4_WARPS_SM / (blocks * WARPS);
                const double busiest = std::ceil(blocks / sms) / (blocks / sms) * issue;
                factor = shortfall > busiest ? shortfall : busiest;
                factor = factor > 1.0 ? factor : 1.0;
            } else {
                factor = std::ceil(blocks / slots) * slots / blocks;
            }
            const double partial = se > 1 ? 2.0 * (double)se * (double)p->m * (double)p->n * 4.0 : 0.0;
            const double cost = wbytes * factor + partial * FFN_MMA_W4_PARTIAL_COST / 100.0;
            if (best_cost < 0 || cost < best_cost) {
                best_cost = cost;
                best.wk = wk;
                best.splits = (int)se;
                best.steps_per_split = (int)sps;
                best.coltiles = p->n / cols;
            }
        }
    }
    return best;
}

/* Partial bytes of a plan (none for one split). */
size_t plan_scratch(const Plan &pl, const rudnn_ffn_gemm_plan_t *p)
{
    return pl.splits > 1 ? (size_t)pl.splits * (size_t)p->m * (size_t)p->n * sizeof(float) : 0;
}

template <int ADT, int VB, int NT, bool OFF, int MINB, bool GROUPED>
rudnn_status_t launch_variant(rdg_queue_t *q, const Plan &pl, const MmaArgs &g, const MmaExperts &ex)
{
    const auto fn = ffn_mma_w4<ADT, VB, NT, OFF, MINB, GROUPED>;
    const dim3 grid((unsigned)pl.tblocks, (unsigned)pl.coltiles, (unsigned)pl.splits);
    /* Launched early (pdl.cuh), the blocks land first on the SMs the previous kernels free first, up
     * to 3 an SM, unevenly (M 1 .. 16 ran 1.03 .. 1.05x slower so): where the grid fits 2 an SM,
     * shared memory for no more than 2. A plain launch elsewhere. */
    const bool early = FFN_MMA_W4_EARLY && pl.early && !GROUPED;
    size_t smem = Smem<VB, NT>::bytes(g.kc);
    if (early && MINB > 2 && (int64_t)grid.x * grid.y * grid.z <= 2 * (int64_t)q->dev.sm_count) {
        const size_t two = (q->dev.smem_optin + RDG_SMEM_RESERVED) / 3 - RDG_SMEM_RESERVED + 16;
        smem = smem > two ? smem : two;
    }
    if (smem > 48 * 1024) {
        const cudaError_t err = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     (int)smem);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
    return rdg_launch_pdl(q, early, "ffn.mma_w4", fn, grid, dim3(THREADS), smem, g, ex);
}

template <int ADT, bool OFF, bool GROUPED>
rudnn_status_t launch_dtype(rdg_queue_t *q, const Plan &pl, const MmaArgs &g, const MmaExperts &ex)
{
    if (pl.nt == 1)
        return launch_variant<ADT, vb_of(1), 1, OFF, blocks_sm(1, OFF), GROUPED>(q, pl, g, ex);
    if (pl.nt == 2)
        return launch_variant<ADT, vb_of(2), 2, OFF, blocks_sm(2, OFF), GROUPED>(q, pl, g, ex);
    if (pl.nt == 4)
        return launch_variant<ADT, vb_of(4), 4, OFF, blocks_sm(4, OFF), GROUPED>(q, pl, g, ex);
    return launch_variant<ADT, vb_of(8), 8, OFF, blocks_sm(8, OFF), GROUPED>(q, pl, g, ex);
}

} // namespace

int rdg_ffn_mma_w4_plan_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p)
{
    if (p->b_dtype != RUDNN_I4 || (p->a_dtype != RUDNN_BF16 && p->a_dtype != RUDNN_F16))
        return 0;
    if (p->c_dtype != RUDNN_F32 && p->c_dtype != p->a_dtype)
        return 0;
    if (dev->arch < 80 || p->m < 1 || p->m > FFN_MMA_W4_MAX_M || p->n % 256 != 0 || p->k % 16 != 0)
        return 0;
    if (p->k > (1 << 26) || p->n > ((int64_t)1 << 40) / (p->k > 0 ? p->k : 1))
        return 0; /* rows and group indices in 32-bit ints */
    const int64_t groups = p->groups > 0 ? p->groups : 1;
    return p->k % groups == 0 && (p->k / groups) % 16 == 0;
}

int rdg_ffn_mma_w4_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, const void *b, int has_scratch)
{
    if (!rdg_ffn_mma_w4_plan_fits(dev, p) || (uintptr_t)b % 16 != 0)
        return 0;
    const Plan pl = make_plan(dev, p);
    return pl.wk > 0 && (has_scratch || pl.splits == 1);
}

/* The largest partials of any m' <= m (ops/ffn.c sizes the workspace once with all the rows, then
 * runs each expert with its own): the plan depends on m only through the variant and the token
 * blocks, and within those grows with m, so the classes' last rows up to m and m itself cover it. */
size_t rdg_ffn_mma_w4_scratch(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p)
{
    if (!rdg_ffn_mma_w4_plan_fits(dev, p))
        return 0;
    size_t most = 0;
    rudnn_ffn_gemm_plan_t q = *p;
    for (int64_t m = 8;; m = m < 64 ? 2 * m : m + 64) {
        q.m = m < p->m ? m : p->m;
        const size_t b = plan_scratch(make_plan(dev, &q), &q);
        most = b > most ? b : most;
        if (m >= p->m)
            break;
    }
    return most;
}

namespace {

MmaArgs make_args(const rudnn_ffn_gemm_plan_t *p, const Plan &pl, const void *a, const void *b, const void *scale,
                  const void *offset, void *scratch, void *c)
{
    MmaArgs g;
    memset(&g, 0, sizeof g);
    g.a = a;
    g.b = (const uint8_t *)b;
    g.scale = (const uint16_t *)scale;
    g.offset = (const uint16_t *)offset;
    g.partial = (float *)scratch;
    g.c = c;
    g.n = p->n;
    g.m = (int)p->m;
    g.k = (int)p->k;
    g.group_rows = (int)(p->k / (p->groups > 0 ? p->groups : 1));
    g.steps_per_group = g.group_rows / 16 / pl.wk;
    g.steps_per_split = pl.steps_per_split;
    g.splits = pl.splits;
    g.wk = pl.wk;
    g.kc = pl.kc;
    g.a_async = (uintptr_t)a % 16 == 0;
    g.scale4 = (uintptr_t)scale % 4 == 0 && (uintptr_t)offset % 4 == 0; /* offset NULL: aligned */
    g.out16 = (uintptr_t)(pl.splits > 1 ? scratch : c) % 16 == 0;
    g.c_dtype = p->c_dtype;
    return g;
}

template <bool GROUPED>
rudnn_status_t launch(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const Plan &pl, const MmaArgs &g,
                      const MmaExperts &ex)
{
    rdg_note_kernel("ffn.mma_w4");
    const bool off = g.offset != nullptr;
    if (p->a_dtype == RUDNN_BF16)
        return off ? launch_dtype<RUDNN_BF16, true, GROUPED>(q, pl, g, ex)
                   : launch_dtype<RUDNN_BF16, false, GROUPED>(q, pl, g, ex);
    return off ? launch_dtype<RUDNN_F16, true, GROUPED>(q, pl, g, ex)
               : launch_dtype<RUDNN_F16, false, GROUPED>(q, pl, g, ex);
}

} // namespace

rudnn_status_t rdg_ffn_mma_w4_unsummed(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                                       const void *scale, const void *offset, void *scratch, void *c, int *splits,
                                       bool early)
{
    Plan pl = make_plan(&q->dev, p);
    pl.early = early;
    if (pl.wk == 0)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm: ffn.mma_w4 has no block shape for n = %lld",
                         (long long)p->n);
    if (pl.splits > 1 && !scratch)
        return rdg_error(RUDNN_STATUS_INTERNAL, "ffn gemm: ffn.mma_w4 without its scratch");
    *splits = pl.splits;
    return launch<false>(q, p, pl, make_args(p, pl, a, b, scale, offset, scratch, c), MmaExperts{});
}

rudnn_status_t rdg_ffn_mma_w4(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                              const void *scale, const void *offset, void *scratch, void *c, bool early)
{
    int splits = 1;
    TRY(rdg_ffn_mma_w4_unsummed(q, p, a, b, scale, offset, scratch, c, &splits, early));
    if (splits == 1)
        return RUDNN_STATUS_SUCCESS;
    return rdg_ffn_split_sum(q, "ffn.mma_w4_reduce", (const float *)scratch, c, p->m * p->n, splits, p->c_dtype);
}

/* The expert form's product for all experts in one launch: plan p with m the rows of all experts
 * and rows_max the most of one; b [experts, k, n / 2], scale / offset [experts, groups, n]. */
int rdg_ffn_mma_w4_grouped_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts)
{
    if (experts < FFN_MMA_W4_GROUPED_MIN_EXPERTS || experts > INT32_MAX || p->rows_max < 1 || p->m > INT32_MAX)
        return 0;
    rudnn_ffn_gemm_plan_t one = *p;
    one.m = p->rows_max;
    if (!rdg_ffn_mma_w4_plan_fits(dev, &one))
        return 0;
    const Plan pl = make_plan(dev, p, experts);
    return pl.wk > 0 && (int64_t)pl.tblocks * experts <= INT32_MAX;
}

rudnn_status_t rdg_ffn_mma_w4_grouped(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                      const void *b, const void *scale, const void *offset, const uint32_t *offsets,
                                      void *c)
{
    if (!rdg_ffn_mma_w4_grouped_fits(&q->dev, p, experts))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm_grouped: ffn.mma_w4 does not take this product");
    Plan pl = make_plan(&q->dev, p, experts);
    MmaArgs g = make_args(p, pl, a, b, scale, offset, nullptr, c);
    MmaExperts ex;
    ex.offsets = offsets;
    ex.tblocks = pl.tblocks;
    ex.b_stride = p->k * p->n / 2;
    ex.s_stride = (p->groups > 0 ? p->groups : 1) * p->n;
    pl.tblocks *= (int)experts; /* the grid's x: expert e's token blocks at e tblocks */
    TRY(launch<true>(q, p, pl, g, ex));
    rdg_note_kernel("ffn.mma_w4_grouped");
    return RUDNN_STATUS_SUCCESS;
}
