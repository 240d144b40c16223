/* Tuning values of the CUDA/HIP attention kernels (attention_flash.cu, attention_fallback.cu), in
 * one place, each with why. None is measured yet: the kernels were written without a GPU; these
 * are the OpenCL kernels' shapes (backends/opencl/attention_tuning.h) carried over. */
#ifndef RUDNN_ATTENTION_TUNING_H
#define RUDNN_ATTENTION_TUNING_H

/* flash_unit: warps per CTA. 4 warps share each staged K/V tile (4x less K/V traffic than a warp
 * alone) and leave room for 2 CTAs per SM at D 128 (about 77 KiB of shared memory each). */
#define ATT_FLASH_WARPS 4
/* flash_unit: query rows per warp for prefill (Sq >= ATT_FLASH_WARPS * this): each staged K row
 * and V row read from shared memory serves 4 rows (the OpenCL kernel's 16 rows per group). */
#define ATT_FLASH_ROWS_PER_WARP 4
/* flash_unit: keys per staged tile, by the largest head dim (64 / 128 / 256): 64 keys as on
 * OpenCL; 32 at 256 so that K + V tiles stay at 64 KiB. Halved (not below ATT_FLASH_MIN_KEYS)
 * until the CTA fits the device's shared memory. */
#define ATT_FLASH_KEYS_D64 64
#define ATT_FLASH_KEYS_D128 64
#define ATT_FLASH_KEYS_D256 32
#define ATT_FLASH_MIN_KEYS 8
/* Dynamic shared memory a launch may use without the opt-in attribute. */
#define ATT_SMEM_DEFAULT_LIMIT (48u * 1024u)
/* CTAs per launch at most: larger problems loop over their work in a grid-stride loop (keeps
 * gridDim.x far inside its 2^31 - 1 limit, whatever B * Hq * Sq is). */
#define ATT_MAX_GRID (1 << 20)

/* wgmma_tma (attention_wgmma.cu): query rows per CTA with two consumer warpgroups of 64 (wgmma's
 * M; three at D <= 64, below) and keys per tile (S = Q K^T is one m64n128 accumulator: 64
 * registers a thread, leaving room for O's 64 and P's 32 under the consumers' register budget). */
#define ATT_WG_BM 128
#define ATT_WG_BN 128
/* wgmma_tma: K and V stages in flight (2: 160 KiB of shared memory at D 128 with the Q tile). */
#define ATT_WG_STAGES 2
/* wgmma_tma: setmaxnreg budgets; (240 * 2 + 24) * 128 threads stay under the SM's 64 Ki. */
#define ATT_WG_CONSUMER_REGS 240
#define ATT_WG_PRODUCER_REGS 24
/* wgmma_tma with D and Dv <= 64 and no per-element path: three consumer warpgroups (192 query
 * rows a CTA; FlashAttention-3's tile for head dim 64) from this Sq up, with their own register
 * budgets ((160 * 3 + 32) * 128 = 64 Ki; no spills once the key ranges are held in 32 bits). At D 64 a key
 * tile is half the MMA work of D 128 for the same softmax: a third warpgroup's softmax hides
 * behind the others' MMAs (H200, bf16, B 8 H 16 S 2048: 1.28x faster than two, bench/RESULTS.md). */
#ifndef ATT_WG3_MIN_SQ
#define ATT_WG3_MIN_SQ 192
#endif
#define ATT_WG3_CONSUMER_REGS 160
#define ATT_WG3_PRODUCER_REGS 32
/* wgmma_tma: 1 makes the consumer warpgroups take turns at issuing their products (ping-pong),
 * with two warpgroups (PINGPONG2) and with three (PINGPONG3); 0 lets them issue freely. H200,
 * bf16, same run: two, 4% faster at D 128 prefill and 2.5% at decode; three, 1.5-2% slower at
 * D 64 (each of its warpgroups already waits for its own products). */
#ifndef ATT_WG_PINGPONG2
#define ATT_WG_PINGPONG2 1
#endif
#ifndef ATT_WG_PINGPONG3
#define ATT_WG_PINGPONG3 0
#endif
/* wgmma_tma: 1 issues S = Q K^T of the next tile together with P V of the current one and runs
 * the next softmax while P V is in flight (FlashAttention-3's intra-warpgroup overlap); 0 waits
 * for each product before the softmax. */
#ifndef ATT_WG_OVERLAP
#define ATT_WG_OVERLAP 1
#endif
/* wgmma_tma with three consumer warpgroups: 1 overlaps as above on the tiles every row of a
 * warpgroup sees whole (a masked tile waits for its products: its checks and P do not fit in the
 * 160 registers together). Fits without spills, but H200, bf16, D 64, same run: 7-8% slower
 * (the other warpgroups' products already fill the tensor cores). */
#ifndef ATT_WG3_OVERLAP
#define ATT_WG3_OVERLAP 0
#endif
/* wgmma_tma with full-height query tiles: 1 gives the first tile the rows of Sq past a multiple
 * of the tile (the shortest under causal), instead of the last (the longest: at Sq 2048 and 192-row
 * tiles the last one ran all 2048 keys with a third of its rows empty) */
#ifndef ATT_WG_REMAINDER_FIRST
#define ATT_WG_REMAINDER_FIRST 1
#endif
/* wgmma_tma packs the query heads of one K/V head into a CTA (K and V read once for all of them)
 * up to this Sq: decode and short chunks, where reading K and V is the cost (measured on decode
 * only; longer prefill keeps one head per CTA). */
#ifndef ATT_WG_PACK_MAX_SQ
#define ATT_WG_PACK_MAX_SQ 64
#endif
/* wgmma_tma is the static choice from this Sq up (below it, most of a 128-row tile is padding),
 * and wherever it packs grouped-query heads (attention_wgmma.cu: rdg_att_wgmma_preferred). */
#define ATT_WG_PREFER_MIN_SQ 64

/* fallback: threads per CTA of the scores and softmax kernels (one CTA per score row; the scores
 * kernel gives each warp one key at a time, lanes over D: coalesced K rows). */
#define ATT_FB_THREADS 256
/* fallback P V: at most this many threads, over the output columns (one CTA per row). */
#define ATT_FB_PV_MAX_THREADS 256
/* fallback: the score matrix may take at most this share (1/N) of the device's memory. */
#define ATT_FB_MEM_DIVISOR 2

/* ---- flash_decode (attention_decode.cu) ---- */
/* flash_decode: query rows per CTA at most (Sq * Hq / Hkv): one m16 tile of mma.sync. Past it a
 * shape is prefill, where flash_unit's CTAs per query head re-read K/V from L2, not DRAM. */
#define ATT_DEC_MAX_ROWS 16
/* flash_decode: warps per CTA (halved, down to 1, where the tiles do not fit), each taking 16 keys
 * of every staged tile (the k of P V's m16n8k16): 64-key tiles of 34 KiB at D 128 bf16. */
#define ATT_DEC_WARPS 4
#define ATT_DEC_KEYS_PER_WARP 16
/* flash_decode: K/V bytes in flight per SM the stage count aims for. Little's law: ~4 TB/s over
 * 132 SMs with ~1 us of loaded DRAM latency needs ~30 KiB; 4x that covers barrier bubbles. */
#define ATT_DEC_INFLIGHT_PER_SM (128u * 1024u)
/* flash_decode: CTAs per SM aimed for: two, so that one CTA's loads run through the other's
 * barrier and epilogue; one where two do not fit with 2 stages each (D 256). */
#define ATT_DEC_CTAS_PER_SM 2
/* flash_decode: staged tiles at most (cp.async.wait_group takes an immediate: 0 .. this - 2). */
#define ATT_DEC_MAX_STAGES 8
/* flash_decode split-KV: splits of one (b, hk) key range at most (the merge kernel's weights
 * live in shared memory), and the split choice's cost model (dec_splits), in tile times of one
 * CTA: CTAs per SM taken to saturate DRAM (one, with ~64 KiB of stages in flight), a CTA's
 * pipeline fill and epilogue, and the merge kernel (launch and partials), paid once with splits. */
#define ATT_DEC_MAX_SPLITS 64
#define ATT_DEC_SATURATING_CTAS_PER_SM 1
#define ATT_DEC_FILL_TILES 1
#define ATT_DEC_MERGE_TILES 2
/* flash_decode merge kernel: threads per CTA (one CTA per output row, threads over Dv). */
#define ATT_DEC_MERGE_THREADS 128

#endif
