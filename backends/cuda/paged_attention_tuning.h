/* Tuning values of the CUDA/HIP paged-attention kernels (paged_attention*.cu), one a line with
 * why. None is measured yet: the kernels were written without a GPU; the figures are the design's
 * estimates for an H200 (132 SMs, ~4.2 TB/s copy, 228 KiB of shared memory an SM). The shapes
 * under #ifndef can be set from the build (tools/gpu-ab.sh -v NAME=-DPA_CTAS_PER_SM=1). */
#ifndef RUDNN_PAGED_ATTENTION_TUNING_H
#define RUDNN_PAGED_ATTENTION_TUNING_H

/* ---- generic (paged_attention.cu): SIMT, every shape ---- */
/* Threads a CTA (one CTA per (query, query head, split)): 4 warps score keys in parallel, and 128
 * threads hold the 1024 output columns of the widest Dv in 8 registers each. */
#define PA_GEN_THREADS 128
/* Keys a round (three barriers: scores, probabilities, P V): 16 a warp; their scores and rows in
 * shared memory. */
#define PA_GEN_KEYS 64
/* CTAs a launch at most (every paged kernel loops over its work items past it): far inside
 * gridDim.x's 2^31 - 1 whatever the batch. */
#define PA_MAX_GRID (1 << 20)
/* Merge kernel threads: a warp an (output row, 128 columns) unit (pa_merge_row), 4 a CTA; also
 * the append kernel's. */
#define PA_MERGE_THREADS 128
/* Splits whose partials a merging lane loads at once (16 float4 = 64 registers): 32 splits in two
 * L2 round trips. */
#ifndef PA_MERGE_BATCH
#define PA_MERGE_BATCH 16
#endif
/* 1: the decode kernel merges its splits itself (the last CTA of a row group to finish, by a
 * counter in the split workspace); 0: the merge kernel after it (the old path, for A/B). */
#ifndef PA_FUSED_MERGE
#define PA_FUSED_MERGE 1
#endif

/* ---- mma (paged_attention_mma.cu): mma.sync m16n8k16, F16/BF16, D and Dv <= 256 ---- */
/* decode: 4 warps split each 64-key tile (16 keys each, the k of one P V MMA) over one m16 tile of
 * rows, so each K/V row is read once for all Hq / Hkv heads of up to 16 / G queries. */
#ifndef PA_DEC_KEY_WARPS
#define PA_DEC_KEY_WARPS 4
#endif
/* prefill: warps over the rows instead (16 rows each, every key of the tile), so a staged K/V
 * tile serves 64 rows: 4x fewer K/V reads from L2 than the decode shape on packed prefill. */
#ifndef PA_PRE_ROW_WARPS
#define PA_PRE_ROW_WARPS 4
#endif
/* prefill: keys a tile (each warp's S is 16 x this): 64 keeps S at 32 registers; 32 at D 256 so
 * that S and the 16 x 256 accumulator stay under 255 registers. */
#ifndef PA_PRE_KEYS
#define PA_PRE_KEYS 64
#endif
#ifndef PA_PRE_KEYS_D256
#define PA_PRE_KEYS_D256 32
#endif
/* Prefill shape where its blocks (of up to 64 / G queries) are at most this share of the decode
 * shape's (up to 16 / G): halving the K/V reads is worth 4x fewer CTAs. */
#ifndef PA_PRE_BLOCK_RATIO
#define PA_PRE_BLOCK_RATIO 2
#endif
/* K/V bytes in flight per SM the ring aims for: Little's law at ~17 bytes a clock an SM (4.2 TB/s
 * over 132 SMs at 1.8 GHz) and ~2000 clocks of loaded DRAM latency is ~34 KiB; 3x that for the
 * barrier bubbles of the CTAs. */
#ifndef PA_INFLIGHT_PER_SM
#define PA_INFLIGHT_PER_SM (96u * 1024u)
#endif
/* CTAs an SM aimed for: two, so one CTA's loads run through the other's barriers and epilogue. */
#ifndef PA_CTAS_PER_SM
#define PA_CTAS_PER_SM 2
#endif
/* 1: each staging thread takes RB = TK / (threads / 16-byte chunks a row) consecutive rows of a
 * tile (one page where page_size % RB == 0: one table entry a tile, read a tile ahead) and walks
 * them by additions; 0: rows RPP apart, the page found by stepping (the old path, for A/B). */
#ifndef PA_STAGE_BLOCKED
#define PA_STAGE_BLOCKED 1
#endif
/* 1: the mma kernel (decode, prefill) launched as a programmatic dependent: its launch and its
 * plan reads (item, split range, first two tiles' pages) overlap the previous kernel's end; 0: a
 * plain launch. H100, bf16, B 1 KV 2k replayed from a CUDA graph: 0.0129 against 0.0131 ms a call
 * (page 16 and 64); a call between its own events, B 8 KV 8k, B 64 KV 2k, B 1 KV 128k: within
 * 0.5% (bench/RESULTS.md). */
#ifndef PA_PDL
#define PA_PDL 1
#endif
/* Ring stages at most (cp.async.wait_group takes an immediate: 0 .. this - 2). */
#define PA_MAX_STAGES 8

/* ---- mla (paged_attention_mla.cu): MLA with R 512, P 64 on mma.sync ---- */
/* Warps a CTA: 8, so that the 512 output columns split 64 a warp (a 16-row accumulator is then 32
 * registers a row tile) and the 36 k-steps of S split in 4-5 a warp. */
#define PA_MLA_WARPS 8
/* Keys a staged tile (rows of 1152 bytes: latent and rope part), for the 16-row shape and the
 * 64-row one. 16 rows: 64 keys (73 KiB a stage) halve the barriers a key; H100, bf16, H 16 decode
 * B 64 / 128: 0.893 and 0.893 of 32 keys' time (bench/RESULTS.md). 64 rows: 32 keys (36 KiB), so
 * that two stages fit beside the 73 KiB of Q (64 spills 24-48 bytes there). */
#ifndef PA_MLA_KEYS
#define PA_MLA_KEYS 64
#endif
#ifndef PA_MLA_WIDE_KEYS
#define PA_MLA_WIDE_KEYS 32
#endif
/* The 64-row shape (4 m16 tiles: H 128 decode, or several H 16 queries) where its blocks are at
 * most this share of the 16-row shape's. */
#ifndef PA_MLA_BLOCK_RATIO
#define PA_MLA_BLOCK_RATIO 2
#endif
/* Latent bytes in flight per SM the ring aims for (one CTA an SM: its shared memory). */
#ifndef PA_MLA_INFLIGHT_PER_SM
#define PA_MLA_INFLIGHT_PER_SM (96u * 1024u)
#endif

/* ---- wgmma prefill (paged_attention_wgmma.cu): sm_90a, F16/BF16, D and Dv <= 128 ---- */
/* Keys a tile: S is 64 x 128 a warpgroup (64 registers a thread), attention_wgmma.cu's tile. */
#ifndef PA_WG_BN
#define PA_WG_BN 128
#endif
/* K/V stages: two of 64 KiB beside Q's 32 KiB (three fit in 227 KiB at D 128). */
#ifndef PA_WG_STAGES
#define PA_WG_STAGES 2
#endif
/* setmaxnreg of the producer (cp.async gathers, a table entry read a tile ahead, the next item's
 * row limits) and consumer warpgroups: 128 x 56 + 256 x 224 = the 384 x 168 the launch gives the
 * CTA; with 40 or 24 the producer spills (ptxas -v). */
#ifndef PA_WG_PRODUCER_REGS
#define PA_WG_PRODUCER_REGS 56
#endif
#ifndef PA_WG_CONSUMER_REGS
#define PA_WG_CONSUMER_REGS 224
#endif
/* 1: a consumer fences the async proxy after each full barrier (the stages are written by
 * cp.async, the generic proxy, and read by wgmma); 0: not (FlashAttention-3's paged cp.async
 * path does not). For A/B only. */
#ifndef PA_WG_CONSUMER_FENCE
#define PA_WG_CONSUMER_FENCE 1
#endif
/* The wgmma prefill takes a plan whose blocks of 128 queries hold this many or more on average
 * (fewer: decode-like, mma_decode reads each page once for all the heads of a KV head). */
#ifndef PA_WG_MIN_QUERIES
#define PA_WG_MIN_QUERIES 16
#endif
/* ---- mla_wgmma (paged_attention_mla_wgmma.cu): MLA with R 512, P 64 on sm_90a wgmma ---- */
/* Registers a thread after setmaxnreg: the two consumer warpgroups hold the 64 x 256 FP32 output
 * accumulator (128 registers) and the 64 x 32 scores (16); the producer warpgroup (one thread
 * issuing TMA) gives its share to them: 2 x 128 x 240 + 128 x 24 = 64512 of 65536. */
#define PA_MLA_WG_CONSUMER_REGS 240
#define PA_MLA_WG_PRODUCER_REGS 24

#endif
