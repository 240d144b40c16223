#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets: tests/fuzz/corpus/<family>/<name>.

Each seed is one op's call in the input format of fuzz_common.h: a 16-byte header slot, then
one 16-byte slot per argument in the order of the op's signature. An all-zero slot is the
intended (valid) argument, so each op gets one seed that reaches an accepted call and a few
that mutate one argument into an error branch (NULL, another context, bad dtype, overflowing
dims, a misaligned offset, a partial overlap, an option out of range). Rerun after changing
the format: python3 tests/fuzz/make_corpus.py
"""
import os
import struct

SLOT = 16
HERE = os.path.dirname(os.path.abspath(__file__))

# mutation kinds of fuzz_common.c (enum MUT_*)
NULL, NO_BUFFER, FOREIGN, DTYPE, RANK, DIM, OVERFLOW, STRIDE, OFFSET, ALIAS, OVERLAP = range(11)


def slot(mode=0, kind=0, index=0, pick=0, extra=(0, 0, 0, 0), raw=0):
    return bytes([mode, kind, index, pick, *extra]) + struct.pack("<Q", raw & (2**64 - 1))


def mutation(kind, index=0, pick=0, raw=None):
    """A mutated slot: an edge-table entry (pick), or the raw value when raw is given."""
    if raw is not None:
        return slot(0x80, kind, index, 0x80, raw=raw)
    return slot(0x80, kind, index, pick)


def seed(header, nslots, changes=None):
    """header: bytes 0.. of the header slot; changes: {argument slot number (0 = first
    after the header): slot bytes}."""
    out = bytearray(bytes(header).ljust(SLOT, b"\0"))
    for i in range(nslots):
        out += (changes or {}).get(i, slot())
    return bytes(out)


def write(family, seeds):
    folder = os.path.join(HERE, "corpus", family)
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        os.remove(os.path.join(folder, old))
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def norm_seeds():
    # op: (name, argument slots after the queue: tensors and eps, index of eps or None)
    ops = {0: ("layer_norm", 5, 3), 1: ("rms_norm", 4, 2), 2: ("softmax", 2, None), 3: ("add_rms_norm", 7, 3)}
    seeds = {}
    for op, (name, nargs, eps) in ops.items():
        # header: op, dtype, rank 2, dims 2 x 7 (last axis byte 6 -> 1 + 6 % 16)
        header = [op, op % 3, 1, 1, 0, 0, 6, 0]
        n = 1 + nargs  # the queue, then the arguments
        seeds[f"{name}-valid"] = seed(header, n)
        seeds[f"{name}-queue-null"] = seed(header, n, {0: mutation(0)})
        seeds[f"{name}-input-null"] = seed(header, n, {1: mutation(NULL)})
        seeds[f"{name}-input-foreign"] = seed(header, n, {1: mutation(FOREIGN)})
        seeds[f"{name}-input-dtype-invalid"] = seed(header, n, {1: mutation(DTYPE, pick=8)})
        seeds[f"{name}-input-dims-overflow"] = seed(header, n, {1: mutation(OVERFLOW)})
        seeds[f"{name}-input-offset-misaligned"] = seed(header, n, {1: mutation(OFFSET, pick=0)})
        seeds[f"{name}-output-overlaps-input"] = seed(header, n, {nargs: mutation(OVERLAP)})
        if eps is not None:
            seeds[f"{name}-eps-nan"] = seed(header, n, {1 + eps: mutation(0, pick=3)})
    # wide rows (1024) in bf16, and layer_norm without beta
    seeds["rms_norm-bf16-wide"] = seed([1, 2, 0, 0, 0, 0, 0xfb], 5)
    seeds["layer_norm-no-beta"] = seed([0, 1, 2, 2, 3, 0, 5, 1], 6)
    return seeds


def moe_seeds():
    # header: logits f32, tokens 2 (byte 1 -> 1 + 1 % 8), 2 groups of 2 experts, 1 selected,
    # top_k 2, hidden 4, inter 3
    def header(op, dtype=0, flags=0, strategy=0, query=0):
        return [op, dtype, 1, 1, 1, 0, 1, 3, 2, flags, strategy, 0, query]

    # op: (name, argument slots, {slot: (what, mutated slot)}); fz_int / fz_object_choice
    # read kind and pick of a mutated slot (fuzz_common.c)
    ops = {
        0: ("moe_route", 6, {1: ("logits-null", mutation(NULL)), 3: ("top_k-zero", slot(0x80, 1, 0, 0))}),
        1: ("moe_route_sigmoid_grouped", 11, {2: ("bias-foreign", mutation(FOREIGN)),
                                              5: ("groups-int-max", slot(0x80, 1, 0, 7)),
                                              9: ("scale-nan", slot(0x80, 0, 0, 3))}),
        2: ("moe_dispatch", 4, {1: ("plan-foreign", slot(0x80, 1)), 2: ("input-dtype-i4", mutation(DTYPE, pick=7))}),
        3: ("moe_combine", 4, {1: ("dispatched-other-hidden", slot(0x80, 2)),
                               3: ("output-offset-past-end", mutation(OFFSET, pick=6))}),
        4: ("swiglu_experts_create", 5, {0: ("context-null", slot(0x80, 0)),
                                         3: ("down-rank-9", mutation(RANK, pick=9))}),
        5: ("swiglu_experts_forward_dispatched", 6, {1: ("experts-other-count", slot(0x80, 2)),
                                                     4: ("workspace-too-small", slot(0x80, 0, 0, 2))}),
        6: ("swiglu_experts_forward", 9, {2: ("input-stride-zero", mutation(STRIDE, index=1, pick=0)),
                                          4: ("options-null", slot(0x80))}),
        7: ("swiglu_experts_forward_sigmoid_grouped", 14, {4: ("bias-dims-huge", mutation(DIM, pick=8)),
                                                           12: ("strategy-invalid", slot(0x80, 1, 0, 4))}),
    }
    seeds = {}
    for op, (name, n, errors) in ops.items():
        seeds[f"{name}-valid"] = seed(header(op), n)
        seeds[f"{name}-queue-null"] = seed(header(op), n, {0: slot(0x80)})
        for i, (what, s) in errors.items():
            seeds[f"{name}-{what}"] = seed(header(op), n, {i: s})
    # the other dtypes, tokens in another dtype than the logits, the TensorCore strategy (CLBlast)
    seeds["swiglu_experts_forward-bf16-tokens-f16-logits"] = seed(header(6, dtype=1, flags=8 | 2 << 4), 9)
    seeds["swiglu_experts_forward_sigmoid_grouped-f16-tensor-core"] = seed(header(7, dtype=1, strategy=2), 14)
    seeds["swiglu_experts_forward_dispatched-tokens-zero"] = seed([5, 0, 15, 1, 1, 0, 1, 3, 2], 6)
    # queries: choose, kernel_info out of range, plan views, dispatched views with NULL out
    seeds["query-choose"] = seed(header(8, query=0), 5)
    seeds["query-kernel-info-index"] = seed(header(8, query=4), 4, {3: slot(0x80, 1, 0, 7)})
    seeds["query-plan-views"] = seed(header(8, query=5), 3)
    seeds["query-dispatched-views-null"] = seed(header(8, query=6), 3, {0: slot(0x80)})
    return seeds


def attention_seeds():
    # header (fuzz_attention.c): op, dtype, B 1, Hkv 1, GQA 2, Sq 3, Skv 4, D 8, Dv 16, flags,
    # window, strategy
    def header(op, dtype=0, flags=0, window=0, strategy=0, sq=3, skv=4):
        return [op, dtype, 0, 0, 1, sq, skv, 1, 2, flags, window, strategy]

    # slots: queue, q, k, v, mask, bias, scale, softcap, causal, window_left, window_right,
    # strategy, then workspace, out, lse (attention) or the result pointer (resolve, size)
    nslots = {0: 15, 1: 13, 2: 13}
    seeds = {}
    for op, name in {0: "attention", 1: "attention_resolve", 2: "attention_workspace_size"}.items():
        n = nslots[op]
        seeds[f"{name}-valid"] = seed(header(op), n)
        seeds[f"{name}-all-options"] = seed(header(op, dtype=2, flags=1 | 2 | 8, window=1 | 2, strategy=1), n)
        seeds[f"{name}-queue-null"] = seed(header(op), n, {0: slot(0x80)})
        seeds[f"{name}-q-null"] = seed(header(op), n, {1: mutation(NULL)})
        seeds[f"{name}-k-dtype-bf16"] = seed(header(op), n, {2: mutation(DTYPE, pick=2)})
        seeds[f"{name}-v-foreign"] = seed(header(op), n, {3: mutation(FOREIGN)})
        seeds[f"{name}-mask-dims-huge"] = seed(header(op, flags=1), n, {4: mutation(DIM, pick=8)})
        seeds[f"{name}-scale-nan"] = seed(header(op), n, {6: slot(0x80, 0, 0, 3)})
        seeds[f"{name}-causal-window-right-2"] = seed(header(op, window=1), n, {10: slot(0x80, 0, 0, 0x80, raw=2)})
        seeds[f"{name}-strategy-invalid"] = seed(header(op), n, {11: slot(0x80, 1, 0, 4)})
    n = nslots[0]
    seeds["attention-bshd-gqa-lse"] = seed(header(0, dtype=1, flags=8 | 128, strategy=2), n)
    seeds["attention-skv-zero"] = seed(header(0, flags=8, skv=0), n)
    seeds["attention-sq-zero"] = seed(header(0, sq=0), n)
    seeds["attention-workspace-short"] = seed(header(0, strategy=1), n, {12: slot(0x80, 0, 0, 2)})
    seeds["attention-out-overlaps-q"] = seed(header(0), n, {13: mutation(OVERLAP)})
    seeds["attention-lse-stride"] = seed(header(0, flags=8), n, {14: mutation(STRIDE, index=1, pick=2)})
    seeds["query-kernel-info"] = seed([3], 2)
    seeds["query-kernel-info-index"] = seed([3], 2, {1: slot(0x80, 1, 0, 7)})
    # the backward (ops 4, 5): byte 12 writes (q, k or dout | lse, mask or v << 2 | seed << 4); slots:
    # queue, q, k, v, mask, bias, 5 options, strategy, out, lse, dout, dq, dk, dv, args NULL, workspace
    BWD, BWD_SIZE = 4, 5
    Q, K, DOUT = 1, 2, 3
    LSE, MASK, V = 4, 8, 12

    def bheader(op=BWD, writes=Q | LSE, seed=1, **kw):
        return header(op, **kw) + [writes | seed << 4]

    nb = 20
    bvalid = {
        "f32": bheader(),
        "f16-mask-bias-causal": bheader(dtype=1, flags=1 | 2 | 4, window=1, writes=DOUT | MASK),
        "bf16-window-softcap": bheader(dtype=2, window=2 | 4, writes=K | V, seed=3),
        "f32-bshd-bias-dtype": bheader(flags=2 | 128, writes=Q | LSE),
        "f32-mask-broadcast-bias-h": bheader(flags=1 | 2 | 16 | 32, writes=DOUT | MASK, seed=2),
        "f32-options-null": bheader(flags=64),
        "f16-sq-zero": bheader(dtype=1, sq=0),
        "f32-skv-zero": bheader(skv=0),
        "f32-fill-values-only": bheader(writes=0),
    }
    bvalid["f32-d33"] = bheader(writes=K | LSE)
    bvalid["f32-d33"][7:9] = [3, 3]  # D = Dv = 33 (header bytes 7, 8)
    for name, h in bvalid.items():
        seeds[f"attention_backward-{name}"] = seed(h, nb)
        seeds[f"attention_backward_workspace_size-{name}"] = seed([BWD_SIZE] + h[1:], nb)
    bfixed = bheader(flags=1 | 2, writes=Q | LSE)
    binvalid = {
        "queue-null": {0: slot(0x80)},
        "q-null": {1: mutation(NULL)},
        "k-dtype-f16": {2: mutation(DTYPE, pick=1)},
        "v-foreign": {3: mutation(FOREIGN)},
        "scale-inf": {6: slot(0x80, 0, 0, 5)},
        "softcap-negative": {7: slot(0x80, 0, 0, 2)},
        "scale-custom": {6: slot(0x80, 0, 0, 0x80, raw=0x3e800000)},
        "out-null": {12: mutation(NULL)},
        "out-dims-other": {12: mutation(DIM, index=2, pick=1)},
        "lse-null": {13: mutation(NULL)},
        "lse-dtype-f16": {13: mutation(DTYPE, pick=1)},
        "lse-stride": {13: mutation(STRIDE, index=1, pick=2)},
        "dout-dtype-other": {14: mutation(DTYPE, pick=2)},
        "dout-last-stride-2": {14: mutation(STRIDE, index=3, pick=3)},
        "dq-on-q": {15: mutation(ALIAS, index=0)},
        "dq-null": {15: mutation(NULL)},
        "dk-overlaps-v": {16: mutation(OVERLAP, index=2)},
        "dk-dims-other": {16: mutation(DIM, index=3, pick=2)},
        "dv-on-dout": {17: mutation(ALIAS, index=7)},
        "dv-offset-misaligned": {17: mutation(OFFSET, pick=0)},
        "args-null": {18: slot(0x80)},
    }
    for name, changes in binvalid.items():
        seeds[f"attention_backward-{name}"] = seed(bfixed, nb, changes)
        seeds[f"attention_backward_workspace_size-{name}"] = seed([BWD_SIZE] + bfixed[1:], nb, changes)
    seeds["attention_backward-workspace-given"] = seed(bfixed, nb, {19: slot(0x80, 0, 4, 0)})
    seeds["attention_backward-workspace-short"] = seed(bfixed, nb, {19: slot(0x80, 0, 4, 2)})
    seeds["attention_backward-workspace-foreign"] = seed(bfixed, nb, {19: slot(0x80, 2)})
    seeds["attention_backward-workspace-over-q"] = seed(bfixed, nb, {19: slot(0x80, 0, 0, 0)})
    seeds["attention_backward_workspace_size-bytes-null"] = seed([BWD_SIZE] + bfixed[1:], nb, {19: slot(0x80)})
    return seeds


def ffn_seeds():
    # header (fuzz_ffn.c): op, scenario, x's first dim, x's rank / middle dims, K1, K2, activation,
    # flags, E / deterministic, weight-only flags, expert_tokens' split, split covers M
    PLAIN_F32, PLAIN_F16, PLAIN_BF16, Q_F32, Q_I64, Q_BF16, WO8_F16, WO8_BF16, WO4_F16, WO4_BF16 = range(10)
    GELU, FASTGELU, RELU, SILU, GEGLU, SWIGLU, REGLU = range(7)
    EXPERTS, BIAS1, BIAS2, TOTALS, SCALE_PC, DEQ1_PC, DEQ2_PC, HIGH_PERF = (1 << i for i in range(8))

    def header(scenario, op=0, act=GELU, flags=BIAS1 | BIAS2, m=1, rank=0, k1=3, k2=3, e=1, wo=0,
               split=0x39, whole=1):
        # m 1 -> 2 rows, k1 3 -> 4, k2 3 -> 4, e 1 -> 2 experts
        return [op, scenario, m, rank, k1, k2, act, flags, e, wo, split, whole]

    n = 26  # slots: queue, 15 tensors, 4 token values, 4 options, args, workspace / bytes
    seeds = {}
    valid = {
        "f32-gelu-biases": header(PLAIN_F32),
        "f16-swiglu-high-performance": header(PLAIN_F16, act=SWIGLU, flags=HIGH_PERF, rank=1),
        "bf16-silu-rank4-bias2": header(PLAIN_BF16, act=SILU, flags=BIAS2, rank=2 | 4 | 16, k1=6),
        "f16-fastgelu-experts-counts": header(PLAIN_F16, act=FASTGELU, flags=EXPERTS | BIAS1 | BIAS2, m=5, e=2),
        "bf16-geglu-experts-totals-partial": header(PLAIN_BF16, act=GEGLU, flags=EXPERTS | TOTALS | BIAS1, m=3,
                                                    e=3, split=0x1d, whole=0),
        "f32-reglu-experts-deterministic": header(PLAIN_F32, act=REGLU, flags=EXPERTS, e=1 | 4),
        "w8a8-f32-deq-per-tensor": header(Q_F32, act=RELU),
        "w8a8-i64-deq-per-channel": header(Q_I64, flags=BIAS1 | SCALE_PC | DEQ1_PC | DEQ2_PC),
        "w8a8-bf16-deq-experts": header(Q_BF16, act=SILU, flags=EXPERTS | BIAS2 | DEQ1_PC, m=4),
        "w8a8-swiglu-experts-totals": header(Q_F32, act=SWIGLU, flags=EXPERTS | TOTALS | SCALE_PC, m=2),
        "weight-only-i8-f16-offsets": header(WO8_F16, wo=3),
        "weight-only-i8-bf16-experts": header(WO8_BF16, act=SWIGLU, flags=EXPERTS | BIAS1, wo=1),
        "weight-only-i4-f16-per-group": header(WO4_F16, act=RELU, flags=BIAS2, k1=7, k2=5, wo=2 << 2 | 3 << 4 | 2),
        "weight-only-i4-bf16-per-group-experts": header(WO4_BF16, act=GEGLU, flags=EXPERTS, k1=5,
                                                        wo=1 << 2 | 1 << 4 | 3),
        "weight-only-i4-f16-per-channel": header(WO4_F16, flags=0),
        "k1-zero": header(PLAIN_F16, k1=15),
        "k2-zero": header(PLAIN_F32, k2=15, flags=BIAS2),
        "m-zero": header(PLAIN_BF16, m=15),
        "experts-no-rows": header(PLAIN_F16, flags=EXPERTS, split=0, whole=0),
    }
    for name, h in valid.items():
        seeds[f"ffn-{name}"] = seed(h, n)
        seeds[f"ffn_workspace_size-{name}"] = seed([1] + h[1:], n)
    base = header(PLAIN_F16, flags=EXPERTS | BIAS1 | BIAS2)
    invalid = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "x-null": {1: mutation(NULL)},
        "x-rank-9": {1: mutation(RANK, pick=9)},
        "x-dims-overflow": {1: mutation(OVERFLOW)},
        "weight1-dtype-invalid": {2: mutation(DTYPE, pick=8)},
        "weight2-foreign": {3: mutation(FOREIGN)},
        "expert-tokens-dims-huge": {4: mutation(DIM, pick=8)},
        "bias1-dtype-bf16": {5: mutation(DTYPE, pick=2)},
        "scale-given-plain": {7: mutation(STRIDE, index=0, pick=2)},
        "y-overlaps-x": {8: mutation(OVERLAP)},
        "y-on-weight1": {8: mutation(ALIAS, index=1)},
        "y-offset-misaligned": {8: mutation(OFFSET, pick=0)},
        "deq-scale1-on-y": {10: mutation(ALIAS, index=7)},
        "expert-tokens-negative": {16: slot(0x80, 0, 0, 5)},
        "expert-tokens-int64-max": {17: slot(0x80, 0, 0, 8)},
        "expert-tokens-totals-int-min": {20: slot(0x80, 1, 0, 6)},
        "activation-past-reglu": {21: slot(0x80, 1, 0, 0x80, raw=7)},
        "precision-minus-one": {22: slot(0x80, 1, 0, 4)},
        "args-null": {24: slot(0x80)},
        "workspace-foreign": {25: slot(0x80, 2)},
        "workspace-short": {25: slot(0x80, 0, 6, 2)},
        "workspace-over-x": {25: slot(0x80, 0, 0, 0)},
    }
    for name, changes in invalid.items():
        seeds[f"ffn-{name}"] = seed(base, n, changes)
    # an explicit workspace in buffer 4 (bias1 and antiquant_offset1 absent), of the exact size
    seeds["ffn-workspace-given"] = seed(header(PLAIN_F32, flags=BIAS2), n, {25: slot(0x80, 0, 4, 0)})
    seeds["ffn-antiquant-scale2-null"] = seed(header(WO8_F16), n, {14: mutation(NULL)})
    seeds["ffn-activation-swiglu-odd-n1"] = seed(header(PLAIN_F32, act=GELU), n, {21: slot(0x80, 1, 0, 0x80, raw=5)})
    # y empty (K1 = 0) with K2 = 8 and M = 2^30 (x's and y's first dim): no workspace, no kernel
    # (it once asked the pool for 2^30 x 8 x 4 bytes and failed with ALLOC_FAILED)
    big_m = {1: mutation(DIM, index=0, raw=1 << 30), 8: mutation(DIM, index=0, raw=1 << 30)}
    seeds["ffn-empty-y-large-m"] = seed(header(PLAIN_F16, k1=15, k2=7, flags=0, m=0), n, big_m)
    seeds["ffn_workspace_size-empty-y-large-m"] = seed(header(PLAIN_F16, op=1, k1=15, k2=7, flags=0, m=0), n, big_m)
    seeds["ffn_workspace_size-bytes-null"] = seed([1] + base[1:], n, {25: slot(0x80)})
    seeds["ffn_workspace_size-y-dtype-f32"] = seed([1] + base[1:], n, {8: mutation(DTYPE, pick=0)})
    return seeds


def gated_delta_seeds():
    # header (fuzz_gated_delta.c): op, dtype, B, H, T, K, V, chunk, flags, N - 1, lengths, more
    CHUNK, CHUNK_SIZE, RECURRENT, RECURRENT_SIZE = range(4)
    VARLEN, INDICES, BTHD, BTH, TAIL = (1 << i for i in range(5))
    K1, K2, K3, K8, K16 = range(5)  # index into the K / V table

    def header(op=CHUNK, dtype=0, b=1, h=1, t=4, k=K8, v=K16, chunk=1, flags=0, n=1, lengths=0x0b, more=0x11):
        # b 1 -> 2 batch rows, h 1 -> 2 heads, t 4 -> 5 tokens, chunk 1 -> 2; varlen: n 1 -> 2
        # sequences of 3 + 4 and 2 tokens, one extra pool row
        return [op, dtype, b, h, t, k, v, chunk, flags, n, lengths, more]

    # slots: queue, 8 tensors, query_scale, chunk_size, varlen struct, sequences, cu_seqlens[0..4],
    # state_indices[0..3], state_indices NULL, input, output, workspace / bytes
    n = 26
    seeds = {}
    valid = {
        "fixed-f32": header(),
        "fixed-f16-chunk-3": header(dtype=1, chunk=2, t=8),
        "fixed-bf16-chunk-64-k16-v1": header(dtype=2, chunk=6, k=K16, v=K1, t=8),
        "fixed-bthd-bth-views": header(dtype=1, flags=BTHD | BTH, b=2, h=2),
        "fixed-t-zero": header(t=15),
        "fixed-one-token": header(t=0, b=2, h=2),
        "varlen-indices": header(flags=VARLEN | INDICES),
        "varlen-row-i": header(dtype=2, flags=VARLEN, n=3, lengths=0x1e, more=0x25),
        "varlen-tail-empty-sequence": header(dtype=1, flags=VARLEN | INDICES | TAIL, n=2, lengths=0x0c,
                                             more=0x32 | 0xc0),
        "varlen-views-chunk-1": header(flags=VARLEN | INDICES | BTHD | BTH, chunk=0, n=3, lengths=0x3f),
    }
    for name, h in valid.items():
        for op, op_name in ((CHUNK, "chunk"), (CHUNK_SIZE, "chunk_size"), (RECURRENT, "recurrent"),
                            (RECURRENT_SIZE, "recurrent_size")):
            seeds[f"{op_name}-{name}"] = seed([op] + h[1:], n)
    fixed = header(dtype=1)
    var = header(dtype=1, flags=VARLEN | INDICES)
    invalid = {
        "queue-null": (fixed, {0: slot(0x80)}),
        "queue-other-context": (fixed, {0: slot(0x80, 1)}),
        "query-null": (fixed, {1: mutation(NULL)}),
        "key-dtype-bf16": (fixed, {2: mutation(DTYPE, pick=2)}),
        "value-dims-huge": (fixed, {3: mutation(DIM, index=3, pick=8)}),
        "value-v-257": (fixed, {3: mutation(DIM, index=3, raw=257)}),
        "beta-foreign": (fixed, {4: mutation(FOREIGN)}),
        "beta-stride-zero": (fixed, {4: mutation(STRIDE, index=2, pick=0)}),
        "log-decay-dtype-f16": (fixed, {5: mutation(DTYPE, pick=1)}),
        "initial-state-rank-3": (fixed, {6: mutation(RANK, pick=3)}),
        "output-overlaps-query": (fixed, {7: mutation(OVERLAP)}),
        "output-offset-misaligned": (fixed, {7: mutation(OFFSET, pick=0)}),
        "final-state-on-initial-state": (fixed, {8: mutation(ALIAS, index=5)}),
        "final-state-dims-overflow": (fixed, {8: mutation(OVERFLOW)}),
        "query-scale-nan": (fixed, {9: slot(0x80, 0, 0, 3)}),
        "query-scale-inf": (fixed, {9: slot(0x80, 0, 0, 5)}),
        "chunk-zero": (fixed, {10: slot(0x80, 0, 0, 0)}),
        "chunk-minus-one": (fixed, {10: slot(0x80, 0, 0, 5)}),
        "chunk-int64-max": (fixed, {10: slot(0x80, 0, 0, 8)}),
        "chunk-4097": (fixed, {10: slot(0x80, 0, 0, 18)}),
        "varlen-on-batch-2": (fixed, {11: slot(0x80)}),
        "varlen-struct-dropped": (var, {11: slot(0x80)}),
        "sequences-zero": (var, {12: slot(0x80, 0, 0, 0)}),
        "sequences-minus-one": (var, {12: slot(0x80, 0, 0, 5)}),
        "sequences-three-last-empty": (var, {12: slot(0x80, 0, 0, 3)}),
        "cu-seqlens-0-is-1": (var, {13: slot(0x80, 0, 0, 1)}),
        "cu-seqlens-decreasing": (var, {15: slot(0x80, 0, 0, 0)}),
        "cu-seqlens-past-t": (var, {14: slot(0x80, 0, 0, 8)}),
        "cu-seqlens-negative": (var, {14: slot(0x80, 0, 0, 7)}),
        "state-index-repeated": (var, {19: slot(0x80, 1, 0, 0)}),
        "state-index-negative": (var, {18: slot(0x80, 1, 0, 4)}),
        "state-index-past-pool": (var, {18: slot(0x80, 1, 0, 7)}),
        "state-indices-dropped": (header(dtype=1, flags=VARLEN | INDICES, n=3, more=0xc0), {22: slot(0x80)}),
        "input-null": (fixed, {23: slot(0x80)}),
        "output-null": (fixed, {24: slot(0x80)}),
        "workspace-foreign": (var, {25: slot(0x80, 2)}),
        # beta past the workspace in its buffer (offset 7 x 256), the workspace one byte short
        "workspace-short": (var, {4: slot(0, extra=(7, 0, 0, 0)), 25: slot(0x80, 0, 3, 2)}),
        "workspace-over-query": (var, {25: slot(0x80, 0, 0, 0)}),
    }
    for name, (h, changes) in invalid.items():
        seeds[f"chunk-{name}"] = seed(h, n, changes)
        seeds[f"recurrent-{name}"] = seed([RECURRENT] + h[1:], n, changes)
    # an explicit workspace of the exact size in beta's buffer, beta placed past it (offset 7 x 256)
    ws_given = {4: slot(0, extra=(7, 0, 0, 0)), 25: slot(0x80, 0, 3, 0)}
    seeds["chunk-varlen-workspace-given"] = seed(var, n, ws_given)
    seeds["recurrent-varlen-workspace-given"] = seed([RECURRENT] + var[1:], n, ws_given)
    seeds["chunk_size-bytes-null"] = seed([CHUNK_SIZE] + fixed[1:], n, {25: slot(0x80)})
    seeds["recurrent_size-bytes-null"] = seed([RECURRENT_SIZE] + fixed[1:], n, {25: slot(0x80)})
    seeds["chunk_size-chunk-zero"] = seed([CHUNK_SIZE] + fixed[1:], n, {10: slot(0x80, 0, 0, 0)})
    return seeds


def paged_attention_seeds():
    # header (fuzz_paged_attention.c): op, dtype, page size / spare pages / rotation, N - 1 /
    # padding / prefix sharing, lengths, more lengths / long history, queries per sequence, flags,
    # heads, D, Dv, P, splits, -, foreign fill, fill
    HOST, PLAN, ATT, MLA, ATT_WS, MLA_WS, SPLIT, APPEND = range(8)
    CAUSAL, PAST, NO_V, SHARE_K, SHARE_V, ONE_BUFFER = (1 << i for i in range(6))
    PS1, PS2, PS3, PS4, PS5, PS8, PS16, PS7 = range(8)  # page_size index
    D1, D2, D3, D4, D8, D16, D32, D64, D128, D256, D1024 = range(11)  # D / Dv index
    P1, P2, P3, P8, P16, P64, P256 = range(7)
    S0, S2, S3, S4, S7, S8, S16, S32 = range(8)  # split count index
    # 0x15: the buffers' fills are 0x80, 0x41, 0xc7, 0xa5, 0x00, ...: finite in every dtype, so
    # the target checks the outputs' values
    FINITE, NAN_FILL = 0x15, 0x13

    def header(op, dtype=0, ps=PS3, spare=0, rot=0, n=2, pad=0, prefix=0, pad_repeat=0, lengths=0x0b,
               more=0x01, nq=0x05, flags=0, hkv=1, g=1, d=D4, dv=D8, p=P3, splits=S2, fill=FINITE):
        # defaults: page size 3, sequences of 3 + 4 and 2 tokens, one decode query each (at the
        # last position), Hkv 1 and Hq 2, D 4, Dv 8, 2 splits
        return [op, dtype, ps | spare << 3 | rot << 5, (n - 1) | pad << 2 | prefix << 4 | pad_repeat << 5,
                lengths, more, nq, flags, (hkv - 1) | g << 2, d, dv, p, splits, 0, fill, fill]

    slots = {HOST: 11, PLAN: 11, ATT: 17, MLA: 18, ATT_WS: 22, MLA_WS: 23, SPLIT: 20, APPEND: 19}
    names = {HOST: "host_plan", PLAN: "plan", ATT: "attention", MLA: "mla", ATT_WS: "attention_ws",
             MLA_WS: "mla_ws", SPLIT: "split", APPEND: "append"}

    def edit(kind, index=0, pick=0, other=0, raw=None):
        """A schedule entry edit: kind 0 an edge value (pick; raw), 1 a step, 2 entry `other`."""
        if raw is not None:
            return slot(0x80, kind, index, 0x80, raw=raw)
        return slot(0x80, kind, index, pick, extra=(0, other, 0, 0))

    def i64(pick=None, raw=None):
        return slot(0x80, 0, 0, 0x80, raw=raw) if raw is not None else slot(0x80, 0, 0, pick)

    choice = lambda k: slot(0x80, k - 1)  # fz_object_choice's variant k (1..)
    # indices of fz_common's dims table and of the target's edit tables
    I64_0, I64_1, I64_MINUS_1, I64_INT32_MAX, I64_INT32_MAX_1, I64_2_62, I64_65536, I64_1025, I64_1024 = \
        0, 1, 5, 9, 10, 15, 17, 19, 20
    E_MINUS_1, E_0, E_1, E_INT32_MAX, E_INT32_MAX_1, E_INT64_MAX, E_64 = 0, 1, 2, 5, 6, 7, 9
    S_PLUS_1, S_MINUS_1, S_PLUS_2, S_STEP = 0, 1, 2, 4

    seeds = {}
    valid = {
        "decode": header(0),
        "f16-prefill-causal": header(0, dtype=1, ps=PS1, nq=0x0f, flags=CAUSAL, lengths=0x0f, more=0x03),
        "bf16-mixed-gqa8": header(0, dtype=2, ps=PS4, n=4, nq=0x1d, flags=CAUSAL, hkv=2, g=3, d=D8, dv=D4,
                                  lengths=0xe7, more=0x05),
        "empty-history-past": header(0, lengths=0x03, more=0x00, nq=0x09, flags=PAST | CAUSAL),
        "long-600-page-16-splits-chosen": header(0, ps=PS16, n=1, lengths=1, more=0x30, nq=0x01, d=D1, dv=D1,
                                                 p=P1, splits=S0),
        "long-256-page-5-splits-32": header(0, dtype=1, ps=PS5, n=2, lengths=0x05, more=0x20, nq=0x07, d=D2,
                                            dv=D3, splits=S32, flags=CAUSAL),
        "padding-prefix-sharing": header(0, ps=PS2, n=3, pad=3, prefix=1, lengths=0x3b, more=0x02, nq=0x15),
        "padding-repeats": header(0, dtype=2, ps=PS7, n=2, pad=2, pad_repeat=1, rot=5, spare=3),
        "d1024": header(0, ps=PS1, n=1, lengths=1, more=0, nq=1, hkv=1, g=0, d=D1024, dv=D1024, p=P256),
        "queries-zero": header(0, nq=0),
        "nan-fill": header(0, dtype=1, fill=NAN_FILL, flags=CAUSAL),
    }
    for name, h in valid.items():
        for op in (ATT, MLA, ATT_WS, MLA_WS, SPLIT, APPEND):
            seeds[f"{names[op]}-{name}"] = seed([op] + h[1:], slots[op])
    for name in ("decode", "padding-prefix-sharing", "long-600-page-16-splits-chosen"):
        for op in (HOST, PLAN):
            seeds[f"{names[op]}-{name}"] = seed([op] + valid[name][1:], slots[op])

    # the schedule's rules, on the host plan alone and through an attention call
    # sequences of 3, 6 and 3 tokens in pages of 2, one padding entry a table (tables[2], [6],
    # [9]), one query each at positions 2, 5, 2
    base = header(0, ps=PS2, n=3, pad=1, lengths=0x3b, more=0x02, nq=0x15)
    schedule = {
        "page-size-zero": {0: i64(I64_0)},
        "page-size-minus-1": {0: i64(I64_MINUS_1)},
        "page-size-int32-max-1": {0: i64(I64_INT32_MAX_1)},
        "page-size-int32-max": {0: i64(I64_INT32_MAX)},
        "pages-zero": {1: i64(I64_0)},
        "pages-int32-max": {1: i64(I64_INT32_MAX)},
        "pages-int32-max-1": {1: i64(I64_INT32_MAX_1)},
        "pages-one-short": {1: i64(raw=6)},
        "sequences-zero": {2: i64(I64_0)},
        "sequences-int32-max": {2: i64(I64_INT32_MAX)},
        "sequences-2-62": {2: i64(I64_2_62)},
        "sequences-one-fewer": {2: i64(raw=2)},
        "queries-minus-1": {3: i64(I64_MINUS_1)},
        "queries-int32-max": {3: i64(I64_INT32_MAX)},
        "queries-zero": {3: i64(I64_0)},
        "length-negative": {4: edit(0, 1, E_MINUS_1)},
        "length-int32-max-1": {4: edit(0, 0, E_INT32_MAX_1)},
        "length-into-padding": {4: edit(1, 2, S_STEP)},
        "length-past-table": {4: edit(0, 1, raw=20)},
        "offset-0-is-1": {5: edit(0, 0, E_1)},
        "offsets-decreasing": {5: edit(2, 2, other=0)},
        "offset-n-int32-max-1": {5: edit(0, 3, E_INT32_MAX_1)},
        "offset-n-int64-max": {5: edit(0, 3, E_INT64_MAX)},
        "table-page-minus-1": {6: edit(0, 1, E_MINUS_1)},
        "table-page-past-pages": {6: edit(1, 0, S_STEP)},
        "table-page-repeated": {6: edit(2, 1, other=0)},
        "table-padding-edited": {6: edit(0, 6, E_INT32_MAX)},
        "sequence-id-unknown": {7: edit(0, 2, E_64)},
        "sequence-id-negative": {7: edit(0, 0, E_MINUS_1)},
        "sequence-ids-unsorted": {7: edit(2, 0, other=2)},
        "position-past-length": {8: edit(1, 0, S_PLUS_2)},
        "position-negative": {8: edit(0, 1, E_MINUS_1)},
        "position-int64-max": {8: edit(0, 2, E_INT64_MAX)},
        "position-at-length": {8: edit(1, 2, S_PLUS_1)},
        "position-back": {8: edit(1, 0, S_MINUS_1)},
        "lengths-null": {9: choice(1)},
        "table-offsets-null": {9: choice(2)},
        "tables-null": {9: choice(3)},
        "sequence-ids-null": {9: choice(4)},
        "positions-null": {9: choice(5)},
        "schedule-null": {9: choice(6)},
        "plan-out-null": {9: choice(7)},
    }
    for name, changes in schedule.items():
        seeds[f"host_plan-{name}"] = seed([HOST] + base[1:], slots[HOST], changes)
        seeds[f"attention-{name}"] = seed([ATT] + base[1:], slots[ATT], changes)
    seeds["host_plan-tables-null-no-history"] = seed(header(HOST, lengths=0, more=0), slots[HOST], {9: choice(3)})
    seeds["host_plan-ids-null-no-queries"] = seed(header(HOST, nq=0), slots[HOST], {9: choice(4)})
    plans = {"queue-null": 1, "queue-other-context": 2, "host-null": 3, "out-null": 4, "queue-destroyed": 5}
    for name, k in plans.items():
        for op in (PLAN, ATT, MLA_WS, SPLIT, APPEND):
            seeds[f"{names[op]}-plan-{name}"] = seed(header(op), slots[op], {10: choice(k)})

    # attention's and MLA's tensors, scale and causal
    att = header(ATT, hkv=2, g=2)
    tensor_errors = {
        "q-null": {11: mutation(NULL)},
        "q-heads-zero": {11: mutation(DIM, index=1, pick=0)},
        "k-cache-dtype-bf16": {12: mutation(DTYPE, pick=2)},
        "k-cache-pages-other": {12: mutation(DIM, index=0, raw=8)},
        "k-cache-hkv-3": {12: mutation(DIM, index=2, raw=3)},
        "v-cache-foreign": {13: mutation(FOREIGN)},
        "v-cache-stride": {13: mutation(STRIDE, index=1, pick=2)},
        "out-overlaps-q": {14: mutation(OVERLAP)},
        "out-on-q": {14: mutation(ALIAS, index=0)},
        "out-offset-misaligned": {14: mutation(OFFSET, pick=0)},
        "out-offset-one-element": {14: mutation(OFFSET, pick=13)},
        "scale-nan": {15: slot(0x80, 0, 0, 3)},
        "scale-zero": {15: slot(0x80, 0, 0, 0)},
        "scale-minus-1": {15: slot(0x80, 0, 0, 2)},
        "scale-inf": {15: slot(0x80, 0, 0, 5)},
        "scale-flt-max": {15: slot(0x80, 0, 0, 9)},
        "causal-int-min": {16: slot(0x80, 1, 0, 6)},
    }
    for name, changes in tensor_errors.items():
        seeds[f"attention-{name}"] = seed(att, slots[ATT], changes)
        seeds[f"attention_ws-{name}"] = seed([ATT_WS] + att[1:], slots[ATT_WS],
                                             {k + 5: v for k, v in changes.items()})
    mla = header(MLA, g=3, d=D16, p=P8)
    mla_errors = {
        "qp-null": {12: mutation(NULL)},
        "qp-heads-other": {12: mutation(DIM, index=1, raw=3)},
        "latent-two-heads": {13: mutation(DIM, index=2, raw=2)},
        "kp-foreign": {14: mutation(FOREIGN)},
        "kp-p-other": {14: mutation(DIM, index=3, raw=9)},
        "out-overlaps-latent": {15: mutation(OVERLAP, index=2)},
        "scale-denormal": {16: slot(0x80, 0, 0, 7)},
    }
    for name, changes in mla_errors.items():
        seeds[f"mla-{name}"] = seed(mla, slots[MLA], changes)
        seeds[f"mla_ws-{name}"] = seed([MLA_WS] + mla[1:], slots[MLA_WS], {k + 5: v for k, v in changes.items()})
    # one past each width limit, on one query, one head and one page that fit a buffer
    wide = header(0, ps=PS1, n=1, lengths=1, more=0, nq=1, hkv=1, g=0, d=D1024, dv=D1024, p=P256)
    for op, name, changes in ((ATT, "q-d-1025", {11: mutation(DIM, index=2, raw=1025)}),
                              (ATT, "v-cache-dv-1025", {13: mutation(DIM, index=3, raw=1025)}),
                              (ATT, "k-cache-d-1025", {12: mutation(DIM, index=3, raw=1025)}),
                              (MLA, "q-r-1025", {11: mutation(DIM, index=2, raw=1025)}),
                              (MLA, "qp-p-257", {12: mutation(DIM, index=2, raw=257)}),
                              (MLA, "kp-p-257", {14: mutation(DIM, index=3, raw=257)})):
        seeds[f"{names[op]}-{name}"] = seed([op] + wide[1:], slots[op], changes)

    # split workspaces: variants, shapes, counts (slots 11..15), then split_count (16..19)
    ws_errors = {
        "workspace-none": {11: choice(1)},
        "workspace-other-context": {11: choice(2)},
        "workspace-other-queue": {11: choice(3)},
        "workspace-out-null": {11: choice(4)},
        "workspace-queue-null": {11: choice(5)},
        "workspace-queries-other": {12: i64(raw=3)},
        "workspace-queries-zero": {12: i64(I64_0)},
        "workspace-heads-other": {13: i64(raw=2)},
        "workspace-value-dim-1025": {14: i64(I64_1025)},
        "workspace-value-dim-other": {14: i64(raw=4)},
        "splits-1": {15: slot(0x80, 1, 0, 1)},
        "splits-33": {15: slot(0x80, 1, 0, 0x80, raw=33)},
        "splits-minus-1": {15: slot(0x80, 1, 0, 4)},
        "splits-int-max": {15: slot(0x80, 1, 0, 7)},
        "splits-32": {15: slot(0x80, 1, 0, 0x80, raw=32)},
        "splits-0": {15: slot(0x80, 1, 0, 0)},
        # 2 x 65536 queries x 1024 heads x (8 + 2) x 4 bytes: far past 64 MiB (BAD_PARAM); with
        # splits 0 the count is capped instead
        "huge-fixed-splits": {12: i64(I64_65536), 13: i64(I64_1024)},
        "huge-splits-0": {12: i64(I64_65536), 13: i64(I64_1024), 15: slot(0x80, 1, 0, 0)},
        # 4097 x 4 x (1024 + 2) x 4 bytes = 64.2 MiB a split: splits 0 gets one
        "just-past-64-mib-splits-0": {12: i64(raw=4097), 13: i64(raw=4), 14: i64(I64_1024),
                                      15: slot(0x80, 1, 0, 0)},
        "just-under-64-mib-splits-0": {12: i64(raw=1024), 13: i64(raw=4), 14: i64(I64_1024),
                                       15: slot(0x80, 1, 0, 0)},
    }
    for name, changes in ws_errors.items():
        for op in (ATT_WS, MLA_WS, SPLIT):
            seeds[f"{names[op]}-{name}"] = seed(header(op, hkv=2, g=2), slots[op], changes)
    split_errors = {
        "count-workspace-null": {16: choice(1)},
        "count-heads-q-other": {17: i64(raw=2)},
        "count-heads-kv-zero": {18: i64(I64_0)},
        "count-heads-kv-past-heads-q": {18: i64(raw=9)},
        "count-heads-kv-not-dividing": {18: i64(raw=3)},
        "count-splits-null": {19: choice(1)},
    }
    for name, changes in split_errors.items():
        seeds[f"split-{name}"] = seed(header(SPLIT, hkv=2, g=2), slots[SPLIT], changes)
    seeds["split-long-splits-0-gqa8"] = seed(header(SPLIT, ps=PS16, n=1, lengths=1, more=0x30, nq=1, hkv=1,
                                                    g=3, splits=S0), slots[SPLIT])

    # append: copy on write, one buffer for both caches, no v, the schedule's append faults
    app = header(APPEND, hkv=2, d=D4, dv=D3)
    append_cases = {
        "shared-k": (header(APPEND, flags=SHARE_K), {}),
        "shared-k-and-v": (header(APPEND, dtype=1, flags=SHARE_K | SHARE_V), {}),
        "one-buffer": (header(APPEND, dtype=2, flags=ONE_BUFFER), {}),
        "one-buffer-shared": (header(APPEND, flags=ONE_BUFFER | SHARE_V), {}),
        "no-v-shared": (header(APPEND, flags=NO_V | SHARE_K), {}),
        "shared-queries-zero": (header(APPEND, nq=0, flags=SHARE_K), {}),
        "shared-by-slot": (app, {12: choice(3)}),
        "v-dropped": (app, {11: choice(1)}),
        "v-null-only": (app, {14: mutation(NULL)}),
        "v-cache-null-only": (app, {16: mutation(NULL)}),
        "k-cache-out-null": (app, {17: choice(1)}),
        "v-cache-out-null": (app, {18: choice(1)}),
        "k-dtype-f16": (app, {13: mutation(DTYPE, pick=1)}),
        "v-heads-other": (app, {14: mutation(DIM, index=1, raw=1)}),
        "k-cache-pages-other": (app, {15: mutation(DIM, index=0, raw=3)}),
        "v-cache-on-k-cache": (app, {16: mutation(ALIAS, index=2)}),
        "k-cache-overlaps-k": (app, {15: mutation(OVERLAP, index=0)}),
        "v-cache-foreign": (app, {16: mutation(FOREIGN)}),
        "k-cache-stride": (app, {15: mutation(STRIDE, index=2, pick=2)}),
        # positions at the length: no cache row (the length must count the appended tokens)
        "position-at-length": (header(APPEND, flags=PAST), {}),
        # sequences 0 and 1 of 2 tokens in pages of 4 share their first page: both write row 1
        "two-queries-one-row": (header(APPEND, ps=PS4, prefix=1, lengths=0x0a, more=0), {}),
        "prefill-shared": (header(APPEND, ps=PS2, n=3, nq=0x3f, lengths=0x3f, more=0x07, flags=SHARE_K | SHARE_V), {}),
        "nan-fill": (header(APPEND, dtype=1, fill=NAN_FILL), {}),
    }
    for name, (h, changes) in append_cases.items():
        seeds[f"append-{name}"] = seed(h, slots[APPEND], changes)

    # a plan on the other context's queue with every tensor there: accepted (q, k and v overlap
    # in one buffer: inputs may; v_cache at 4096 in k_cache's buffer)
    other = {10: choice(2), 11: mutation(FOREIGN), 12: mutation(FOREIGN), 13: mutation(FOREIGN),
             14: mutation(FOREIGN, index=1)}
    seeds["attention-other-context"] = seed(header(ATT), slots[ATT], other)
    seeds["mla-other-context"] = seed(header(MLA), slots[MLA], {**other, 14: mutation(FOREIGN),
                                                                15: mutation(FOREIGN, index=1)})
    app_other = {10: choice(2), 13: mutation(FOREIGN), 14: mutation(FOREIGN), 15: mutation(FOREIGN, index=1),
                 16: slot(0x80, 11, 1, 0x80, extra=(0, 0, FOREIGN, OFFSET), raw=4096)}
    seeds["append-other-context"] = seed(header(APPEND), slots[APPEND], app_other)
    seeds["append-other-context-shared"] = seed(header(APPEND, flags=SHARE_K | SHARE_V), slots[APPEND], app_other)
    return seeds


def moe_train_seeds():
    # header (fuzz_moe_train.c): op, logits dtype, T, E, top_k, index dtype, flags, bad index / row,
    # seed, scale, -, -, -, -, foreign fill, fill
    WEIGHTS, BACKWARD = range(2)
    SIGMOID, RENORM, W_IDX, W_LOGITS, W_GRAD, REPEAT, BAD, WIDE = (1 << i for i in range(8))
    E1, E2, E3, E5, E8, E16, E64, E65 = range(8)  # E index
    U32, I32, I64 = range(3)

    def header(op, dtype=0, t=2, e=E8, k=1, idt=I32, flags=W_IDX | W_LOGITS | W_GRAD, pick=0, seed=5, scale=0,
               fill=0):
        # t 2 -> 3 tokens, k 1 -> top-2 of 8 experts, I32 indices, values written
        return [op, dtype, t, e, k, idt, flags, pick, seed, scale, 0, 0, 0, 0, 0, fill]

    # slots: queue, logits, indices, [grad_weights,] options, scoring, renormalize, scale, output
    n = {WEIGHTS: 8, BACKWARD: 9}
    names = {WEIGHTS: "weights", BACKWARD: "backward"}
    seeds = {}
    valid = {
        "softmax": header(0),
        "softmax-renormalize": header(0, flags=RENORM | W_IDX | W_LOGITS | W_GRAD),
        "sigmoid": header(0, flags=SIGMOID | W_IDX | W_LOGITS | W_GRAD, scale=1),
        "sigmoid-renormalize-f16": header(0, dtype=1, flags=SIGMOID | RENORM | W_IDX | W_LOGITS | W_GRAD),
        "softmax-bf16-u32": header(0, dtype=2, idt=U32, flags=W_IDX | W_LOGITS),
        "softmax-renormalize-i64-wide": header(0, idt=I64, flags=RENORM | W_IDX | W_LOGITS | WIDE, scale=3),
        "sigmoid-wide-scale-3e4": header(0, flags=SIGMOID | W_IDX | W_GRAD | WIDE, scale=4),
        "repeated-index": header(0, flags=RENORM | W_IDX | W_LOGITS | REPEAT, pick=0x10),
        "top-1-of-1": header(0, e=E1, k=0, t=5, flags=RENORM | W_IDX | W_LOGITS),
        "top-64-of-64": header(0, e=E64, k=63, t=0, flags=RENORM | W_IDX | W_LOGITS),
        "top-64-of-65-f16": header(0, dtype=1, e=E65, k=63, t=0, flags=SIGMOID | W_IDX | W_GRAD),
        "top-3-of-5-six-tokens": header(0, e=E5, k=2, t=5, flags=RENORM | W_IDX | W_LOGITS),
        "tokens-zero": header(0, t=15),
        # indices from the fill alone: 0x00 (every index 0: repeated), 0x7f / 0xa5 (out of range)
        "fill-zero-indices-repeated": header(0, flags=RENORM, fill=1),
        "fill-huge-indices": header(0, flags=SIGMOID, fill=3),
        "fill-nan": header(0, flags=W_IDX | RENORM, fill=4),
        "fill-negative-logits": header(0, flags=W_IDX | SIGMOID | RENORM, fill=7),
    }
    # a bad index in row 1 (pick bits 4-7), entry pick % k, value bad_index(pick & 15)
    bad = {"e": 0, "minus-1": 1, "e-plus-1": 2, "int32-max": 3, "int32-min": 4, "2-32": 5, "2-32-plus-1": 6,
           "uint32-max": 7, "int64-min": 8, "int64-max": 9}
    for what, v in bad.items():
        for idt, idt_name in ((I64, "i64"), (I32, "i32"), (U32, "u32")):
            if idt != I64 and v in (8, 9):
                continue
            valid[f"bad-index-{what}-{idt_name}"] = header(0, idt=idt, flags=BAD | RENORM | W_IDX | W_LOGITS,
                                                           pick=0x10 | v)
    valid["bad-index-sigmoid-repeated"] = header(0, flags=BAD | REPEAT | SIGMOID | W_IDX | W_GRAD, pick=0x21)
    for name, h in valid.items():
        for op in (WEIGHTS, BACKWARD):
            seeds[f"{names[op]}-{name}"] = seed([op] + h[1:], n[op])

    base = header(0)
    errors = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "logits-null": {1: mutation(NULL)},
        "logits-no-buffer": {1: mutation(NO_BUFFER)},
        "logits-foreign": {1: mutation(FOREIGN)},
        "logits-dtype-i32": {1: mutation(DTYPE, pick=4)},
        "logits-dtype-invalid": {1: mutation(DTYPE, pick=8)},
        "logits-rank-3": {1: mutation(RANK, pick=3)},
        "logits-rank-1": {1: mutation(RANK, pick=1)},
        "logits-experts-zero": {1: mutation(DIM, index=1, pick=0)},
        "logits-experts-int32-max": {1: mutation(DIM, index=1, pick=9)},
        "logits-tokens-other": {1: mutation(DIM, index=0, raw=4)},
        "logits-dims-overflow": {1: mutation(OVERFLOW)},
        "logits-stride": {1: mutation(STRIDE, index=0, pick=2)},
        "logits-offset-misaligned": {1: mutation(OFFSET, pick=0)},
        "logits-offset-past-end": {1: mutation(OFFSET, pick=6)},
        "indices-null": {2: mutation(NULL)},
        "indices-dtype-f32": {2: mutation(DTYPE, pick=0)},
        "indices-dtype-i8": {2: mutation(DTYPE, pick=6)},
        "indices-dtype-bool": {2: mutation(DTYPE, pick=13)},
        "indices-top-k-zero": {2: mutation(DIM, index=1, pick=0)},
        "indices-top-k-past-experts": {2: mutation(DIM, index=1, raw=9)},
        "indices-tokens-other": {2: mutation(DIM, index=0, raw=2)},
        "indices-rank-3": {2: mutation(RANK, pick=3)},
        "indices-stride-zero": {2: mutation(STRIDE, index=1, pick=0)},
        "indices-foreign": {2: mutation(FOREIGN)},
        "indices-on-logits": {2: mutation(ALIAS, index=0)},
        "options-null": {3: slot(0x80)},
        "scoring-2": {4: slot(0x80, 0, 1)},
        "scoring-minus-1": {4: slot(0x80, 0, 0)},
        "scoring-int-min": {4: slot(0x80, 1, 0, 6)},
        "renormalize-int-max": {5: slot(0x80, 1, 0, 7)},
        "renormalize-minus-1": {5: slot(0x80, 1, 0, 4)},
        "scale-zero": {6: slot(0x80, 0, 0, 0)},
        "scale-minus-zero": {6: slot(0x80, 0, 0, 1)},
        "scale-minus-1": {6: slot(0x80, 0, 0, 2)},
        "scale-nan": {6: slot(0x80, 0, 0, 3)},
        "scale-inf": {6: slot(0x80, 0, 0, 5)},
        "scale-minus-inf": {6: slot(0x80, 0, 0, 6)},
        "scale-denormal": {6: slot(0x80, 0, 0, 7)},
        "scale-flt-max": {6: slot(0x80, 0, 0, 9)},
        "scale-1e30": {6: slot(0x80, 0, 0, 12)},
        "output-null": {7: mutation(NULL)},
        "output-no-buffer": {7: mutation(NO_BUFFER)},
        "output-foreign": {7: mutation(FOREIGN)},
        "output-dtype-bf16": {7: mutation(DTYPE, pick=2)},
        "output-dtype-i32": {7: mutation(DTYPE, pick=4)},
        "output-shape-other": {7: mutation(DIM, index=1, raw=3)},
        "output-rank-3": {7: mutation(RANK, pick=3)},
        "output-stride": {7: mutation(STRIDE, index=0, pick=3)},
        "output-offset-misaligned": {7: mutation(OFFSET, pick=1)},
        "output-offset-past-end": {7: mutation(OFFSET, pick=6)},
        "output-on-logits": {7: mutation(ALIAS, index=0)},
        "output-on-indices": {7: mutation(ALIAS, index=1)},
        "output-overlaps-logits": {7: mutation(OVERLAP, index=0)},
        "output-overlaps-indices": {7: mutation(OVERLAP, index=1)},
    }
    # backward: grad_weights takes slot 3, the later slots move by one
    for name, changes in errors.items():
        seeds[f"weights-{name}"] = seed(base, n[WEIGHTS], changes)
        seeds[f"backward-{name}"] = seed([BACKWARD] + base[1:], n[BACKWARD],
                                         {k + 1 if k >= 3 else k: v for k, v in changes.items()})
    grad_errors = {
        "grad-weights-null": {3: mutation(NULL)},
        "grad-weights-dtype-f16": {3: mutation(DTYPE, pick=1)},
        "grad-weights-top-k-other": {3: mutation(DIM, index=1, raw=3)},
        "grad-weights-tokens-other": {3: mutation(DIM, index=0, raw=4)},
        "grad-weights-foreign": {3: mutation(FOREIGN)},
        "grad-weights-stride": {3: mutation(STRIDE, index=1, pick=2)},
        "grad-weights-on-logits": {3: mutation(ALIAS, index=0)},
        "grad-logits-on-grad-weights": {8: mutation(ALIAS, index=2)},
        "grad-logits-overlaps-grad-weights": {8: mutation(OVERLAP, index=2)},
        "grad-logits-dtype-f32-for-f16": {8: mutation(DTYPE, pick=0)},
    }
    for name, changes in grad_errors.items():
        h = header(0, dtype=1) if name == "grad-logits-dtype-f32-for-f16" else base
        seeds[f"backward-{name}"] = seed([BACKWARD] + h[1:], n[BACKWARD], changes)

    # every tensor on the other context's queue: accepted (the output at offset 1024 of logits' buffer)
    other = {0: slot(0x80, 1), 1: mutation(FOREIGN), 2: mutation(FOREIGN, index=1)}
    seeds["weights-other-context"] = seed(base, n[WEIGHTS],
                                          {**other, 7: slot(0x80, FOREIGN, 0, 0, extra=(4, 0, 0, 0))})
    seeds["backward-other-context"] = seed([BACKWARD] + base[1:], n[BACKWARD],
                                           {**other, 3: slot(0x80, FOREIGN, 1, 0, extra=(4, 0, 0, 0)),
                                            8: slot(0x80, FOREIGN, 0, 0, extra=(4, 0, 0, 0))})
    seeds.update(moe_train_rows_seeds())
    seeds.update(moe_train_experts_seeds())
    return seeds


def moe_train_rows_seeds():
    # header (fuzz_moe_train.c, the rows ops): op, logits dtype, T, E, top_k, rows dtype, flags, -, seed,
    # scale, H, strategy, -, -, foreign fill, fill
    COMBINE, DISPATCH = 2, 3
    GROUPED, RENORM, W_ROWS, W_LOGITS, W_GRAD, WIDE = 1, 2, 4, 8, 16, 128
    E1, E2, E3, E5, E8, E16, E64, E65 = range(8)  # E index
    H1, H2, H3, H5, H8, H16, H33, H64 = range(8)  # H index
    F32, F16, BF16 = range(3)
    SERIAL, PLANE = range(2)

    def header(op, ldt=F32, t=2, e=E8, k=1, xdt=F32, flags=RENORM | W_ROWS | W_LOGITS | W_GRAD, seed=5, scale=0,
               h=H8, strategy=SERIAL, fill=0):
        # t 2 -> 3 tokens, k 1 -> top-2 of 8 experts, H 8, logits and values written
        return [op, ldt, t, e, k, xdt, flags, 0, seed, scale, h, strategy, 0, 0, 0, fill]

    # slots: combine: queue, dispatched, expert_output, grad_output, strategy, grad_expert_output,
    # grad_weights; dispatch: queue, dispatched, grad_rows, grad_input
    n = {COMBINE: 7, DISPATCH: 4}
    names = {COMBINE: "combine_backward", DISPATCH: "dispatch_backward"}
    seeds = {}
    valid = {
        "softmax-renormalize": header(0),
        "plane": header(0, strategy=PLANE),
        "softmax-top-1": header(0, k=0, flags=W_ROWS | W_LOGITS | W_GRAD),
        "grouped-sigmoid-scale-2.5": header(0, flags=GROUPED | W_ROWS | W_LOGITS | W_GRAD, scale=1),
        "grouped-sigmoid-renormalize-plane": header(0, flags=GROUPED | RENORM | W_ROWS | W_LOGITS | W_GRAD,
                                                    strategy=PLANE, scale=4),
        "f16-rows-f32-logits": header(0, xdt=F16),
        "bf16-rows-f16-logits-plane": header(0, ldt=F16, xdt=BF16, strategy=PLANE),
        "f32-rows-bf16-logits": header(0, ldt=BF16),
        "f16-rows-bf16-logits-wide": header(0, ldt=BF16, xdt=F16, flags=RENORM | W_ROWS | W_LOGITS | W_GRAD | WIDE),
        "bf16-rows-bf16-logits": header(0, ldt=BF16, xdt=BF16, h=H33),
        "hidden-1": header(0, h=H1),
        "hidden-33-plane": header(0, h=H33, strategy=PLANE),
        "hidden-64-six-tokens-plane": header(0, t=5, h=H64, strategy=PLANE),
        "top-1-of-1": header(0, e=E1, k=0, t=5),
        "top-3-of-5": header(0, e=E5, k=2, t=4, h=H5),
        "top-64-of-65-one-token": header(0, e=E65, k=63, t=0, h=H64, strategy=PLANE),
        "top-16-of-16-grouped": header(0, e=E16, k=15, t=1, flags=GROUPED | W_ROWS | W_LOGITS | W_GRAD),
        "tokens-zero": header(0, t=15),
        # logits from the fill alone: 0x00 (equal: ties), 0x7f (huge), 0xff (NaN weights); values unwritten
        "fill-zero-ties": header(0, flags=RENORM, fill=1),
        "fill-huge": header(0, flags=RENORM | W_ROWS, fill=3),
        "fill-nan": header(0, flags=0, fill=4),
        "fill-nan-plane": header(0, flags=W_LOGITS, strategy=PLANE, fill=4),
        "fill-negative-grouped": header(0, flags=GROUPED, fill=7),
    }
    for name, h in valid.items():
        for op in (COMBINE, DISPATCH):
            if op == DISPATCH and name.endswith("plane"):
                continue  # one kernel: the strategy is combine's
            seeds[f"{names[op]}-{name}"] = seed([op] + h[1:], n[op])

    # dispatched: fz_object_choice(7) takes 1 + kind % 6: NULL, other context, hidden + 1, another dtype,
    # tokens + 1, another top_k
    dispatched = {"null": 0, "other-context": 1, "other-hidden": 2, "other-dtype": 3, "other-tokens": 4,
                  "other-top-k": 5}
    common = {"queue-null": {0: slot(0x80)}, "queue-other-context": {0: slot(0x80, 1)}}
    for what, kind in dispatched.items():
        common[f"dispatched-{what}"] = {1: slot(0x80, kind)}
    # tensor slot numbers per op: (name, slot, is_rows)
    tensors = {COMBINE: (("expert-output", 2, True), ("grad-output", 3, False), ("grad-expert-output", 5, True),
                         ("grad-weights", 6, False)),
               DISPATCH: (("grad-rows", 2, True), ("grad-input", 3, False))}
    mutations = {
        "null": mutation(NULL),
        "no-buffer": mutation(NO_BUFFER),
        "foreign": mutation(FOREIGN),
        "dtype-i32": mutation(DTYPE, pick=4),
        "dtype-f16": mutation(DTYPE, pick=1),
        "dtype-invalid": mutation(DTYPE, pick=9),
        "rank-3": mutation(RANK, pick=3),
        "rank-1": mutation(RANK, pick=1),
        "rows-other": mutation(DIM, index=0, raw=7),
        "cols-other": mutation(DIM, index=1, raw=3),
        "dims-overflow": mutation(OVERFLOW),
        "stride": mutation(STRIDE, index=0, pick=4),
        "stride-zero": mutation(STRIDE, index=1, pick=0),
        "offset-misaligned": mutation(OFFSET, pick=1),
        "offset-past-end": mutation(OFFSET, pick=6),
    }
    for op in (COMBINE, DISPATCH):
        base = header(op)
        for what, changes in common.items():
            seeds[f"{names[op]}-{what}"] = seed(base, n[op], changes)
        for tname, i, _ in tensors[op]:
            for what, s in mutations.items():
                seeds[f"{names[op]}-{tname}-{what}"] = seed(base, n[op], {i: s})
    # the F16 rows get an F32 tensor (dtype pick 0): rejected, the dispatched dtype rules
    seeds["combine_backward-grad-output-f32-for-f16"] = seed(header(COMBINE, xdt=F16), n[COMBINE],
                                                             {3: mutation(DTYPE, pick=0)})
    seeds["dispatch_backward-grad-input-f32-for-bf16"] = seed(header(DISPATCH, xdt=BF16), n[DISPATCH],
                                                              {3: mutation(DTYPE, pick=0)})
    # combine's strategy (fz_int): one past either end, -2, INT_MIN, INT_MAX
    strategies = {"plane-plus-1": (PLANE, slot(0x80, 0, 1)), "serial-minus-1": (SERIAL, slot(0x80, 0, 0)),
                  "minus-2": (SERIAL, slot(0x80, 1, 0, 5)), "int-min": (SERIAL, slot(0x80, 1, 0, 6)),
                  "int-max": (PLANE, slot(0x80, 1, 0, 7))}
    for what, (strategy, s) in strategies.items():
        seeds[f"combine_backward-strategy-{what}"] = seed(header(COMBINE, strategy=strategy), n[COMBINE], {4: s})
    # outputs on or over inputs and each other (ALIAS / OVERLAP index: the tensor arguments so far); the
    # inputs may overlap (grad_output on expert_output: accepted)
    aliases = {
        "grad-expert-output-on-expert-output": {5: mutation(ALIAS, index=0)},
        "grad-expert-output-overlaps-expert-output": {5: mutation(OVERLAP, index=0)},
        "grad-weights-on-grad-output": {6: mutation(ALIAS, index=1)},
        "grad-weights-overlaps-grad-output": {6: mutation(OVERLAP, index=1)},
        "grad-weights-on-grad-expert-output": {6: mutation(ALIAS, index=2)},
        "grad-weights-overlaps-grad-expert-output": {6: mutation(OVERLAP, index=2)},
        "grad-output-on-expert-output": {3: mutation(ALIAS, index=0)},
    }
    for what, changes in aliases.items():
        seeds[f"combine_backward-{what}"] = seed(header(COMBINE), n[COMBINE], changes)
    seeds["dispatch_backward-grad-input-on-grad-rows"] = seed(header(DISPATCH), n[DISPATCH],
                                                              {3: mutation(ALIAS, index=0)})
    seeds["dispatch_backward-grad-input-overlaps-grad-rows"] = seed(header(DISPATCH), n[DISPATCH],
                                                                    {3: mutation(OVERLAP, index=0)})
    # queue, dispatched and every tensor on the other context: accepted (2 buffers there: the outputs at 256)
    def foreign(buffer, at):
        return slot(0x80, FOREIGN, buffer, 0, extra=(at, 0, 0, 0))

    other = {0: slot(0x80, 1), 1: slot(0x80, 1)}
    seeds["combine_backward-other-context"] = seed(header(COMBINE), n[COMBINE],
                                                   {**other, 2: foreign(0, 0), 3: foreign(1, 0), 5: foreign(0, 1),
                                                    6: foreign(1, 1)})
    seeds["combine_backward-other-context-plane"] = seed(header(COMBINE, strategy=PLANE), n[COMBINE],
                                                         {**other, 2: foreign(0, 0), 3: foreign(1, 0),
                                                          5: foreign(0, 1), 6: foreign(1, 1)})
    seeds["dispatch_backward-other-context"] = seed(header(DISPATCH), n[DISPATCH],
                                                    {**other, 2: foreign(0, 0), 3: foreign(1, 0)})
    # the tensors on the other context, the dispatched object on this one (and the reverse): rejected
    seeds["combine_backward-tensors-other-context"] = seed(header(COMBINE), n[COMBINE],
                                                           {0: slot(0x80, 1), 2: foreign(0, 0), 3: foreign(1, 0),
                                                            5: foreign(0, 1), 6: foreign(1, 1)})
    seeds["dispatch_backward-dispatched-other-context-queue-too"] = seed(header(DISPATCH), n[DISPATCH], other)
    return seeds


def moe_train_experts_seeds():
    # header (fuzz_moe_train.c, the experts ops): op, logits dtype, T, E, top_k, dtype, flags, -, seed, scale,
    # H, strategy, I, poison, foreign fill, fill
    FORWARD, BACKWARD = 4, 5
    GROUPED, RENORM, W_RESERVE, W_LOGITS, W_GRAD, POISON, SHARED, WIDE = 1, 2, 4, 8, 16, 32, 64, 128
    E1, E2, E3, E5, E8, E16, E64, E65 = range(8)
    F32, F16, BF16 = range(3)
    SCALAR, AUTO, TENSOR_CORE, PAST, MINUS_1, INT_MIN = range(6)
    NAN_, INF, MINUS_INF, HUGE, DENORMAL, F16_MAX, OVER_F16, MINUS_ZERO = range(8)

    def header(op, ldt=F32, t=2, e=E8, k=1, dt=F32, flags=RENORM | W_LOGITS | W_RESERVE | W_GRAD, seed=5, scale=0,
               h=7, strategy=SCALAR, i=5, poison=0, fill=2):
        # t 2 -> 3 tokens, k 1 -> top-2 of 8 experts, H 8, I 6; fill 2: 0x3f (0.75 in F32 and BF16, 1.8 in F16)
        return [op, ldt, t, e, k, dt, flags, 0, seed, scale, h, strategy, i, poison, 0, fill]

    # slots: forward: queue, experts, dispatched, strategy, workspace, reserve, expert_output, then the size
    # query's rows and bytes; backward: queue, experts, dispatched, reserve, grad_expert_output, strategy,
    # workspace, grad_rows, grad_gate, grad_up, grad_down, rows, bytes
    n = {FORWARD: 9, BACKWARD: 13}
    names = {FORWARD: "experts_forward", BACKWARD: "experts_backward"}
    ws_slot = {FORWARD: 4, BACKWARD: 6}
    seeds = {}
    for op in (FORWARD, BACKWARD):
        nm = names[op]
        seeds[f"{nm}-f32"] = seed(header(op), n[op])
        seeds[f"{nm}-f16-auto-grouped"] = seed(header(op, dt=F16, strategy=AUTO, ldt=F16,
                                                      flags=GROUPED | W_LOGITS | W_RESERVE | W_GRAD), n[op])
        seeds[f"{nm}-bf16-wide"] = seed(header(op, dt=BF16, flags=RENORM | W_LOGITS | W_RESERVE | W_GRAD | WIDE,
                                               fill=6), n[op])
        seeds[f"{nm}-tensor-core"] = seed(header(op, strategy=TENSOR_CORE), n[op])
        seeds[f"{nm}-tokens-zero"] = seed(header(op, t=15), n[op])
        # fz_object_choice(6): 1 + kind % 5: NULL, other context, E + 1, another dtype, H + 1
        seeds[f"{nm}-experts-{'null' if op == FORWARD else 'one-more'}"] = seed(header(op), n[op],
                                                                              {1: slot(0x80, 0 if op == FORWARD else 2)})
        # fz_workspace: a buffer of this context (kind 0) of the intended size, one byte short; the other context's
        seeds[f"{nm}-workspace-caller"] = seed(header(op), n[op], {ws_slot[op]: slot(0x80, 0, 1, 0)})
        seeds[f"{nm}-workspace-short"] = seed(header(op), n[op], {ws_slot[op]: slot(0x80, 0, 1, 2)})
        seeds[f"{nm}-poison-nan-token"] = seed(header(op, flags=RENORM | W_LOGITS | W_RESERVE | W_GRAD | POISON,
                                                      poison=0x30 | NAN_), n[op])
        seeds[f"{nm}-poison-over-f16-weight"] = seed(header(op, dt=F16, flags=W_LOGITS | W_GRAD | POISON,
                                                            poison=0x58 | OVER_F16), n[op])
        seeds[f"{nm}-shared-weights"] = seed(header(op, flags=RENORM | W_LOGITS | W_GRAD | SHARED), n[op])
        # 64 rows: one token to all 64 experts (H 8, I 2 after the caps)
        seeds[f"{nm}-top-64-of-64"] = seed(header(op, t=0, e=E64, k=63, h=7, i=3), n[op])
    # the experts of the other context (queue and dispatched of this one), another dtype, H + 1
    seeds["experts_forward-experts-other-context"] = seed(header(FORWARD), n[FORWARD], {1: slot(0x80, 1)})
    seeds["experts_forward-experts-other-dtype"] = seed(header(FORWARD, dt=BF16), n[FORWARD], {1: slot(0x80, 3)})
    seeds["experts_forward-experts-other-hidden"] = seed(header(FORWARD), n[FORWARD], {1: slot(0x80, 4)})
    seeds["experts_backward-experts-other-hidden"] = seed(header(BACKWARD), n[BACKWARD], {1: slot(0x80, 4)})
    seeds["experts_forward-dispatched-other-top-k"] = seed(header(FORWARD), n[FORWARD], {2: slot(0x80, 5)})
    seeds["experts_backward-f16-top-1-of-16"] = seed(header(BACKWARD, dt=F16, e=E16, k=0, t=1, h=23, i=23), n[BACKWARD])
    seeds["experts_forward-strategy-past"] = seed(header(FORWARD, strategy=PAST), n[FORWARD])
    seeds["experts_backward-strategy-int-min"] = seed(header(BACKWARD, strategy=INT_MIN), n[BACKWARD])
    seeds["experts_backward-workspace-foreign"] = seed(header(BACKWARD), n[BACKWARD], {6: slot(0x80, 2, 0, 0)})
    seeds["experts_backward-dispatched-other-hidden"] = seed(header(BACKWARD), n[BACKWARD], {2: slot(0x80, 2)})
    seeds["experts_backward-reserve-fill-huge"] = seed(header(BACKWARD, flags=RENORM | W_LOGITS | W_GRAD, fill=3),
                                                       n[BACKWARD])
    # outputs on an input (ALIAS index: the tensor arguments so far, the experts' three weights first)
    seeds["experts_forward-output-on-reserve"] = seed(header(FORWARD), n[FORWARD], {6: mutation(ALIAS, index=3)})
    seeds["experts_forward-output-on-up"] = seed(header(FORWARD), n[FORWARD], {6: mutation(ALIAS, index=1)})
    seeds["experts_backward-grad-gate-on-gate"] = seed(header(BACKWARD), n[BACKWARD], {8: mutation(ALIAS, index=0)})
    seeds["experts_backward-grad-rows-on-grad-expert-output"] = seed(header(BACKWARD), n[BACKWARD],
                                                                     {7: mutation(ALIAS, index=4)})
    seeds["experts_backward-grad-up-on-grad-gate"] = seed(header(BACKWARD), n[BACKWARD], {9: mutation(ALIAS, index=6)})
    seeds["experts_backward-grad-down-overlaps-shared-down"] = seed(
        header(BACKWARD, flags=RENORM | W_LOGITS | SHARED), n[BACKWARD], {10: mutation(OVERLAP, index=2)})
    seeds["experts_forward-reserve-dtype-f16"] = seed(header(FORWARD), n[FORWARD], {5: mutation(DTYPE, pick=1)})
    seeds["experts_backward-grad-up-rank-2"] = seed(header(BACKWARD), n[BACKWARD], {9: mutation(RANK, pick=2)})
    # the size query: rows -1 (dim edge 5), bytes NULL
    seeds["experts_forward-size-query-negative-rows"] = seed(header(FORWARD), n[FORWARD], {7: slot(0x80, 0, 0, 5)})
    seeds["experts_backward-size-query-bytes-null"] = seed(header(BACKWARD), n[BACKWARD], {12: slot(0x80, 0)})

    # queue, experts, dispatched and every tensor on the other context: accepted (2 buffers there)
    def foreign(buffer, at):
        return slot(0x80, FOREIGN, buffer, 0, extra=(at, 0, 0, 0))

    other = {0: slot(0x80, 1), 1: slot(0x80, 1), 2: slot(0x80, 1)}
    seeds["experts_forward-other-context"] = seed(header(FORWARD, h=3, i=3), n[FORWARD],
                                                  {**other, 5: foreign(0, 0), 6: foreign(1, 0)})
    seeds["experts_backward-other-context"] = seed(header(BACKWARD, h=3, i=3), n[BACKWARD],
                                                   {**other, 3: foreign(0, 0), 4: foreign(1, 0), 7: foreign(0, 1),
                                                    8: foreign(1, 1), 9: foreign(0, 2), 10: foreign(1, 4)})
    return seeds


def convolution_seeds():
    # header (fuzz_convolution.c): op, dtype, d - 1, N, G - 1, Cg - 1, Kg - 1, S1 | strategy << 4,
    # S2 | query direction << 4, S3 | w channels-last << 4, R | writes << 6, stride | bias << 6 |
    # channels-last << 7, padding, dilation | seed << 6
    FWD, DGRAD, WGRAD, RESOLVE, SIZE, OUTPUT_DIMS, CHANNELS_LAST, KERNEL_INFO = range(8)
    AUTO, DIRECT, IGEMM = range(3)
    WRITE_BOTH, BIAS, CL = 0xc0, 0x40, 0x80

    def header(op=FWD, dtype=0, d=2, n=1, g=1, cg=1, kg=2, s=(4, 5, 0), strategy=AUTO, qdir=0, cl_w=0,
               r=(2, 1, 0), stride=(1, 0, 0), pad=(1, 0, 0), dil=(0, 1, 0), flags_r=WRITE_BOTH, flags_s=BIAS,
               seed=1):
        # defaults: 2D, N 2, groups 2, Cg 2, Kg 3, S 5 x 6, R 3 x 2, stride {2, 1}, padding {1, 0},
        # dilation {1, 2}, bias, both inputs' first bytes written
        two = lambda v: v[0] | v[1] << 2 | v[2] << 4
        return [op, dtype, d - 1, n, g, cg, kg, s[0] | strategy << 4, s[1] | qdir << 4, s[2] | cl_w << 4,
                two(r) | flags_r, two(stride) | flags_s, two(pad), two(dil) | seed << 6]

    n_op, n_query = 18, 21  # slots of the ops (queue .. workspace), of the queries (.. extra field)
    seeds = {}
    valid = {
        "2d-grouped-f32": header(),
        "2d-grouped-f32-direct": header(strategy=DIRECT),
        "2d-grouped-f32-igemm": header(strategy=IGEMM),  # overridden to Direct (groups 2)
        "2d-one-group-f16-igemm": header(dtype=1, g=0, strategy=IGEMM),
        "2d-one-group-bf16": header(dtype=2, g=0, cg=2, kg=0, stride=(0, 1, 0), pad=(2, 1, 0)),
        "1d-f16-no-bias": header(dtype=1, d=1, s=(5, 0, 0), r=(1, 0, 0), flags_s=0),
        "3d-f32-igemm": header(d=3, g=0, s=(3, 2, 3), r=(1, 1, 0), stride=(1, 0, 1), pad=(1, 0, 1),
                               strategy=IGEMM),  # overridden to Direct (3D F32)
        "3d-bf16-grouped": header(dtype=2, d=3, s=(1, 3, 2), r=(0, 1, 1), pad=(0, 1, 0)),
        "channels-last": header(flags_s=BIAS | CL, cl_w=1),
        "channels-last-f16-direct": header(dtype=1, flags_s=CL, strategy=DIRECT),
        "n-zero": header(n=15),
        "fill-values-only": header(flags_r=0),
        "1x1-stride-3": header(g=0, r=(0, 0, 0), stride=(2, 2, 0), pad=(0, 0, 0)),
    }
    for name, h in valid.items():
        for op, op_name in ((FWD, "forward"), (DGRAD, "data_backward"), (WGRAD, "weight_backward")):
            seeds[f"{op_name}-{name}"] = seed([op] + h[1:], n_op)
    for name in ("2d-grouped-f32", "3d-bf16-grouped", "n-zero"):
        for q in range(3):
            h = valid[name][:]
            h[8] = (h[8] & 15) | q << 4
            seeds[f"resolve-dir{q}-{name}"] = seed([RESOLVE] + h[1:], n_query)
            seeds[f"workspace_size-dir{q}-{name}"] = seed([SIZE] + h[1:], n_query)
    fixed = header()
    invalid = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "x-null": {1: mutation(NULL)},
        "x-no-buffer": {1: mutation(NO_BUFFER)},
        "x-rank-2": {1: mutation(RANK, pick=2)},
        "x-offset-past-end": {1: mutation(OFFSET, pick=6)},
        "x-stride-zero": {1: mutation(STRIDE, index=2, pick=0)},
        "w-dtype-f16": {2: mutation(DTYPE, pick=1)},
        "w-dtype-i8": {2: mutation(DTYPE, pick=6)},
        "w-foreign": {2: mutation(FOREIGN)},
        "w-cg-huge": {2: mutation(DIM, index=1, pick=8)},
        "w-dims-overflow": {2: mutation(OVERFLOW)},
        "y-dims-huge": {3: mutation(DIM, index=2, pick=8)},
        "y-p-plus-one": {3: mutation(DIM, index=3, raw=5)},
        "y-overlaps-x": {3: mutation(OVERLAP, index=0)},
        "y-on-x": {3: mutation(ALIAS, index=0)},
        "y-on-w": {3: mutation(ALIAS, index=1)},
        "bias-foreign": {4: mutation(FOREIGN)},
        "bias-rank-2": {4: mutation(RANK, pick=2)},
        "bias-overlaps-y": {4: mutation(OVERLAP, index=2)},
        "options-null": {5: slot(0x80)},
        "stride-zero": {6: slot(0x80, 0, 0, 0)},
        "stride-int64-max": {7: slot(0x80, 0, 0, 8)},
        "padding-minus-one": {9: slot(0x80, 0, 0, 5)},
        "padding-2-pow-62": {10: slot(0x80, 0, 0, 15)},
        "dilation-int64-max": {12: slot(0x80, 0, 0, 8)},
        "dilation-huge-raw": {13: slot(0x80, 0, 0, 0x80, raw=2**40)},
        "groups-zero": {15: slot(0x80, 0, 0, 0)},
        "groups-minus-one": {15: slot(0x80, 0, 0, 5)},
        "groups-three": {15: slot(0x80, 0, 0, 3)},
        "groups-int64-max": {15: slot(0x80, 0, 0, 8)},
        "groups-2-pow-62": {15: slot(0x80, 0, 0, 15)},
        "strategy-three": {16: slot(0x80, 1, 0, 3)},
        "strategy-minus-one": {16: slot(0x80, 1, 0, 4)},
        "workspace-foreign": {17: slot(0x80, 2)},
        "workspace-over-x": {17: slot(0x80, 0, 0, 4)},
        "workspace-past-buffer": {17: slot(0x80, 0, 5, 5)},
        "workspace-given": {17: slot(0x80, 0, 5, 0)},
    }
    for name, changes in invalid.items():
        for op, op_name in ((FWD, "forward"), (DGRAD, "data_backward"), (WGRAD, "weight_backward")):
            seeds[f"{op_name}-{name}"] = seed([op] + fixed[1:], n_op, changes)
    query_invalid = {
        "result-null": {17: slot(0x80)},
        "tensors-null": {18: slot(0x80)},
        "direction-three": {19: slot(0x80, 1, 0, 3)},
        "direction-minus-one": {19: slot(0x80, 1, 0, 4)},
        "extra-field": {20: slot(0x80)},
        "w-null": {2: mutation(NULL)},
        "stride-zero": {6: slot(0x80, 0, 0, 0)},
    }
    for name, changes in query_invalid.items():
        for op, op_name in ((RESOLVE, "resolve"), (SIZE, "workspace_size")):
            seeds[f"{op_name}-{name}"] = seed([op] + fixed[1:], n_query, changes)
    # output_dims: 0 rank, 1..5 x_dims, 6..10 w_dims, 11 options present, 12..20 stride, padding, dilation,
    # 21 groups, 22 x_dims / w_dims NULL, 23 y_dims NULL
    for name, h in (("2d", fixed), ("1d", valid["1d-f16-no-bias"]), ("3d", valid["3d-f32-igemm"])):
        seeds[f"output_dims-{name}"] = seed([OUTPUT_DIMS] + h[1:], 24)
    od = {
        "rank-plus-one": {0: slot(0x80, 0, 1)},
        "rank-int-max": {0: slot(0x80, 1, 0, 7)},
        "rank-int-min": {0: slot(0x80, 1, 0, 6)},
        "c-huge": {2: slot(0x80, 0, 0, 8)},
        "s-2-pow-62": {3: slot(0x80, 0, 0, 15)},
        "r-zero": {8: slot(0x80, 0, 0, 0)},
        "options-null": {11: slot(0x80)},
        "padding-int64-max": {15: slot(0x80, 0, 0, 8)},
        "groups-int64-max": {21: slot(0x80, 0, 0, 8)},
        "groups-3037000500": {21: slot(0x80, 0, 0, 14)},
        "x-dims-null": {22: slot(0x80)},
        "w-dims-null": {22: slot(0x80, 1)},
        "y-dims-null": {23: slot(0x80)},
    }
    for name, changes in od.items():
        seeds[f"output_dims-{name}"] = seed([OUTPUT_DIMS] + fixed[1:], 24, changes)
    # channels_last: 0 rank, 1..5 dims, 6 dtype, 7 buffer, 8 offset, 9 tensor NULL
    seeds["channels_last-2d"] = seed([CHANNELS_LAST] + fixed[1:], 10)
    seeds["channels_last-3d"] = seed([CHANNELS_LAST] + valid["3d-f32-igemm"][1:], 10)
    seeds["channels_last-rank-6"] = seed([CHANNELS_LAST] + fixed[1:], 10, {0: slot(0x80, 0, 1, 0)})
    seeds["channels_last-dim-negative"] = seed([CHANNELS_LAST] + fixed[1:], 10, {2: slot(0x80, 0, 0, 5)})
    seeds["channels_last-dtype-invalid"] = seed([CHANNELS_LAST] + fixed[1:], 10, {6: slot(0x80, 1, 0, 7)})
    seeds["channels_last-no-buffer"] = seed([CHANNELS_LAST] + fixed[1:], 10, {7: slot(0x80)})
    seeds["channels_last-tensor-null"] = seed([CHANNELS_LAST] + fixed[1:], 10, {9: slot(0x80)})
    # kernel_info: 0 index, 1 context, 2 which result pointer is NULL
    seeds["kernel_info-valid"] = seed([KERNEL_INFO] + fixed[1:], 3)
    seeds["kernel_info-index-minus-one"] = seed([KERNEL_INFO] + fixed[1:], 3, {0: slot(0x80, 1, 0, 4)})
    seeds["kernel_info-index-1024"] = seed([KERNEL_INFO] + fixed[1:], 3, {0: slot(0x80, 1, 0, 16)})
    seeds["kernel_info-context-null"] = seed([KERNEL_INFO] + fixed[1:], 3, {1: slot(0x80)})
    seeds["kernel_info-name-null"] = seed([KERNEL_INFO] + fixed[1:], 3, {2: slot(0x80)})
    seeds["kernel_info-direction-null"] = seed([KERNEL_INFO] + fixed[1:], 3, {2: slot(0x80, 2)})
    return seeds


def pooling_seeds():
    # header (fuzz_pooling.c): op, dtype, d - 1, N, C, then per dim S | R << 4 | stride << 6, flags
    # (mode | ceil << 2 | extra << 3 | write x/dy << 4 | write x << 5 | channels-last << 6 | seed << 7),
    # padding (2 bits a dim), dilation (2 bits a dim) | seed << 6
    FWD, BWD, OUTPUT_DIMS = range(3)
    MAX, AVG_IN, AVG_EX = range(3)

    def header(op=FWD, dtype=0, d=2, n=1, c=2, s=(4, 5, 0), r=(2, 1, 0), st=(1, 0, 0), mode=MAX, ceil=0, extra=1,
               writes=3, cl=0, seed=0, pad=(1, 1, 0), dil=(0, 1, 0)):
        # defaults: 2D, N 2, C 3, S 5 x 6, window 3 x 2, stride {2, 1}, padding {1, 1}, dilation {1, 2},
        # indices (forward MAX) / x given, both inputs' first bytes written
        dims = [s[i] | r[i] << 4 | st[i] << 6 for i in range(3)]
        two = lambda v: v[0] | v[1] << 2 | v[2] << 4
        return [op, dtype, d - 1, n, c, *dims, mode | ceil << 2 | extra << 3 | writes << 4 | cl << 6 | (seed & 1) << 7,
                two(pad), two(dil) | (seed >> 1) << 6]

    n_op, n_dims = 19, 23
    seeds = {}
    valid = {
        "max-2d-f32-indices": header(),
        "max-2d-f16-ceil": header(dtype=1, ceil=1, extra=0),
        "max-3d-bf16-indices": header(dtype=2, d=3, s=(2, 3, 1), r=(1, 2, 1), st=(0, 1, 1), pad=(1, 1, 0),
                                      dil=(1, 0, 1)),
        "max-1d-f32-dilation": header(d=1, s=(5, 0, 0), r=(2, 0, 0), st=(0, 0, 0), pad=(0, 0, 0), dil=(1, 0, 0)),
        "avg-include-pad-2d-f32": header(mode=AVG_IN, dil=(0, 0, 0)),
        "avg-include-pad-3d-f16-ceil": header(mode=AVG_IN, dtype=1, d=3, s=(3, 2, 3), r=(1, 1, 2), st=(1, 1, 1),
                                              ceil=1, pad=(1, 1, 1), dil=(0, 0, 0)),
        "avg-exclude-pad-1d-bf16": header(mode=AVG_EX, dtype=2, d=1, s=(5, 0, 0), pad=(1, 0, 0), dil=(0, 0, 0)),
        "avg-exclude-pad-2d-f16-ceil": header(mode=AVG_EX, dtype=1, ceil=1, extra=0, dil=(0, 0, 0)),
        "channels-last-max": header(cl=1, seed=3),
        "channels-last-avg-bf16": header(mode=AVG_IN, dtype=2, cl=1, dil=(0, 0, 0)),
        "n-zero": header(n=15),
        "c-zero": header(c=15),
        "fill-values-only": header(writes=0),
        "window-1-stride-3": header(r=(0, 0, 0), st=(2, 2, 0), pad=(0, 0, 0)),
    }
    for name, h in valid.items():
        for op, op_name in ((FWD, "forward"), (BWD, "backward")):
            seeds[f"{op_name}-{name}"] = seed([op] + h[1:], n_op)
    fixed = header()
    invalid = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "x-null": {1: mutation(NULL)},
        "x-foreign": {1: mutation(FOREIGN)},
        "x-dtype-i8": {1: mutation(DTYPE, pick=6)},
        "x-rank-6": {1: mutation(RANK, pick=6)},
        "x-dims-overflow": {1: mutation(OVERFLOW)},
        "x-offset-misaligned": {1: mutation(OFFSET, pick=0)},
        "x-stride-transposed": {1: mutation(STRIDE, index=2, pick=2)},
        "y-dims-huge": {2: mutation(DIM, index=2, pick=8)},
        "y-p-plus-one": {2: mutation(DIM, index=3, raw=4)},
        "y-dtype-f16": {2: mutation(DTYPE, pick=1)},
        "y-overlaps-x": {2: mutation(OVERLAP, index=0)},
        "y-on-x": {2: mutation(ALIAS, index=0)},
        "third-dtype-f32": {3: mutation(DTYPE, pick=0)},
        "third-on-y": {3: mutation(ALIAS, index=1)},
        "third-null": {3: mutation(NULL)},
        "options-null": {4: slot(0x80)},
        "mode-three": {5: slot(0x80, 0, 1)},
        "mode-minus-one": {5: slot(0x80, 1, 0, 4)},
        "mode-average": {5: slot(0x80, 1, 0, 1)},
        "ceil-two": {6: slot(0x80, 1, 0, 2)},
        "window-zero": {7: slot(0x80, 0, 0, 0)},
        "window-2-pow-24-raw": {7: slot(0x80, 0, 0, 0x80, raw=1 << 24)},
        "window-int64-max": {8: slot(0x80, 0, 0, 8)},
        "stride-zero": {10: slot(0x80, 0, 0, 0)},
        "stride-minus-one": {11: slot(0x80, 0, 0, 5)},
        "padding-past-half": {13: slot(0x80, 0, 0, 2)},
        "padding-minus-one": {14: slot(0x80, 0, 0, 5)},
        "dilation-zero": {16: slot(0x80, 0, 0, 0)},
        "dilation-huge": {17: slot(0x80, 0, 0, 0x80, raw=2**40)},
    }
    for name, changes in invalid.items():
        for op, op_name in ((FWD, "forward"), (BWD, "backward")):
            seeds[f"{op_name}-{name}"] = seed([op] + fixed[1:], n_op, changes)
    avg = header(mode=AVG_EX, dil=(0, 0, 0))
    seeds["forward-avg-indices-given"] = seed([FWD] + avg[1:], n_op, {3: slot(0x80, 0, 0, 0)})
    seeds["forward-avg-dilation-2"] = seed([FWD] + avg[1:], n_op, {17: slot(0x80, 0, 0, 2)})
    seeds["backward-avg-x-null"] = seed([BWD] + header(mode=AVG_IN, extra=0, dil=(0, 0, 0))[1:], n_op)
    seeds["backward-avg-x-other-shape"] = seed([BWD] + avg[1:], n_op, {1: mutation(DIM, index=2, raw=4)})
    seeds["backward-max-x-null"] = seed([BWD] + fixed[1:], n_op, {1: mutation(NULL)})
    # a window of 2^16 in one dim over an input of 1 with padding 2^15: one output, accepted
    seeds["forward-window-65536"] = seed([FWD] + header(d=1, s=(0, 0, 0), r=(0, 0, 0), pad=(0, 0, 0))[1:], n_op,
                                         {7: slot(0x80, 0, 0, 17), 13: slot(0x80, 0, 0, 0x80, raw=1 << 15)})
    # output_dims: 0 rank, 1..5 x_dims, 6 options present, 7..20 the options, 21 x_dims NULL, 22 y_dims NULL
    for name in ("max-2d-f32-indices", "avg-include-pad-3d-f16-ceil", "max-1d-f32-dilation"):
        seeds[f"output_dims-{name}"] = seed([OUTPUT_DIMS] + valid[name][1:], n_dims)
    od = {
        "rank-plus-one": {0: slot(0x80, 0, 1)},
        "rank-int-min": {0: slot(0x80, 1, 0, 6)},
        "n-2-pow-31": {1: slot(0x80, 0, 0, 16)},
        "c-2-pow-31-plus-one": {2: slot(0x80, 0, 0, 10)},
        "s-zero": {3: slot(0x80, 0, 0, 0)},
        "s-int64-max": {4: slot(0x80, 0, 0, 8)},
        "options-null": {6: slot(0x80)},
        "mode-three": {7: slot(0x80, 0, 1)},
        "ceil-minus-one": {8: slot(0x80, 0, 0)},
        "window-int64-max": {9: slot(0x80, 0, 0, 8)},
        "stride-2-pow-62": {12: slot(0x80, 0, 0, 15)},
        "padding-int64-min": {15: slot(0x80, 0, 0, 7)},
        "dilation-2-pow-24-raw": {18: slot(0x80, 0, 0, 0x80, raw=1 << 24)},
        "x-dims-null": {21: slot(0x80)},
        "y-dims-null": {22: slot(0x80)},
    }
    for name, changes in od.items():
        seeds[f"output_dims-{name}"] = seed([OUTPUT_DIMS] + fixed[1:], n_dims, changes)
    return seeds


def interpolation_seeds():
    # header (fuzz_interpolation.c): op, dtype, d - 1, N, C, then per dim S | O << 4, flags (mode |
    # align << 2 | write << 3 | channels-last << 4 | seed << 5), scales (2 bits a dim: 0, 0.5, 1.7, 3)
    FWD, BWD = range(2)
    NEAREST, EXACT, LINEAR, CUBIC = range(4)

    def header(op=FWD, dtype=0, d=2, n=1, c=2, s=(3, 4, 0), o=(6, 2, 0), mode=LINEAR, align=0, write=1, cl=0,
               seed=0, scales=(0, 0, 0)):
        # defaults: 2D, N 2, C 3, S 4 x 5, O 7 x 3 (up along H, down along W), written values
        return [op, dtype, d - 1, n, c, *[s[i] | o[i] << 4 for i in range(3)],
                mode | align << 2 | write << 3 | cl << 4 | seed << 5, scales[0] | scales[1] << 2 | scales[2] << 4]

    n_slots = 9
    seeds = {}
    valid = {
        "nearest-2d-f32": header(mode=NEAREST),
        "nearest-exact-1d-bf16-scale": header(mode=EXACT, dtype=2, d=1, s=(5, 0, 0), o=(7, 0, 0), scales=(2, 0, 0)),
        "linear-2d-f32": header(),
        "linear-2d-f16-align": header(dtype=1, align=1, seed=3),
        "linear-3d-bf16": header(dtype=2, d=3, s=(1, 2, 3), o=(3, 1, 2)),
        "linear-3d-f32-align-scales": header(d=3, s=(2, 0, 3), o=(1, 3, 0), align=1, scales=(1, 2, 3)),
        "cubic-2d-f32": header(mode=CUBIC),
        "cubic-2d-f16-align": header(mode=CUBIC, dtype=1, align=1),
        "cubic-1d-bf16-scale": header(mode=CUBIC, dtype=2, d=1, s=(2, 0, 0), o=(7, 0, 0), scales=(3, 0, 0)),
        "cubic-3d-f32": header(mode=CUBIC, d=3, s=(3, 1, 2), o=(1, 3, 2)),
        "nearest-3d-f16-scales": header(mode=NEAREST, dtype=1, d=3, s=(2, 3, 1), o=(3, 1, 2), scales=(1, 3, 2)),
        "size-one-dims": header(s=(0, 4, 0), o=(4, 0, 0)),
        "channels-last": header(cl=1, mode=CUBIC),
        "channels-last-nearest-exact-f16": header(cl=1, mode=EXACT, dtype=1),
        "n-zero": header(n=15),
        "c-zero": header(c=15),
        "fill-values-only": header(write=0),
    }
    for name, h in valid.items():
        for op, op_name in ((FWD, "forward"), (BWD, "backward")):
            seeds[f"{op_name}-{name}"] = seed([op] + h[1:], n_slots)
    fixed = header()
    invalid = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "in-null": {1: mutation(NULL)},
        "in-no-buffer": {1: mutation(NO_BUFFER)},
        "in-foreign": {1: mutation(FOREIGN)},
        "in-dtype-i32": {1: mutation(DTYPE, pick=4)},
        "in-rank-2": {1: mutation(RANK, pick=2)},
        "in-dims-overflow": {1: mutation(OVERFLOW)},
        "in-offset-past-end": {1: mutation(OFFSET, pick=6)},
        "in-stride-padded": {1: slot(0x80, STRIDE, 2, 0, extra=(0, 1, 1, 0))},
        "out-dtype-bf16": {2: mutation(DTYPE, pick=2)},
        "out-rank-6": {2: mutation(RANK, pick=6)},
        "out-n-other": {2: mutation(DIM, index=0, pick=3)},
        "out-size-zero": {2: mutation(DIM, index=2, pick=0)},
        "out-size-huge": {2: mutation(DIM, index=3, pick=10)},
        "out-overlaps-in": {2: mutation(OVERLAP, index=0)},
        "out-on-in": {2: mutation(ALIAS, index=0)},
        "options-null": {3: slot(0x80)},
        "mode-four": {4: slot(0x80, 0, 1)},
        "mode-minus-one": {4: slot(0x80, 1, 0, 4)},
        "align-two": {5: slot(0x80, 1, 0, 2)},
        "scale-negative": {6: slot(0x80, 0, 0, 2)},
        "scale-nan": {6: slot(0x80, 0, 0, 3)},
        "scale-inf": {7: slot(0x80, 0, 0, 4)},
        "scale-denormal": {7: slot(0x80, 0, 0, 6)},
        "scale-reciprocal-overflows": {6: slot(0x80, 0, 0, 10)},
        "scale-reciprocal-near-flt-max": {7: slot(0x80, 0, 0, 11)},
        "scale-1e300": {6: slot(0x80, 0, 0, 9)},
        "scale-raw-bits": {7: slot(0x80, 0, 0, 0x80, raw=0x3fd5555555555555)},
    }
    for name, changes in invalid.items():
        for op, op_name in ((FWD, "forward"), (BWD, "backward")):
            seeds[f"{op_name}-{name}"] = seed([op] + fixed[1:], n_slots, changes)
    near = header(mode=NEAREST)
    seeds["forward-nearest-align-one"] = seed(near, n_slots, {5: slot(0x80, 1, 0, 1)})
    seeds["backward-nearest-exact-align-one"] = seed([BWD] + header(mode=EXACT)[1:], n_slots, {5: slot(0x80, 1, 0, 1)})
    seeds["forward-linear-huge-ratio"] = seed(fixed, n_slots, {7: slot(0x80, 0, 0, 11)})
    seeds["backward-cubic-huge-ratio"] = seed([BWD] + header(mode=CUBIC)[1:], n_slots, {6: slot(0x80, 0, 0, 11)})
    seeds["backward-cubic-tiny-ratio"] = seed([BWD] + header(mode=CUBIC)[1:], n_slots, {7: slot(0x80, 0, 0, 9)})
    # the input CI's fuzz run found (2026-12-08): LINEAR backward, a dx element no output reaches
    # along the innermost dim, a NaN weight along another must give 0, not NaN
    seeds["backward-empty-inner-row"] = bytes.fromhex(
        "01000101026324000a0000000000000000000000000000000000000000000000"
        "0000000800000000000000000000000000000000000000000080000000000000"
        "0000000000000000004000000000000000000000000000000000000000000000"
        "000000000000000000000000000000008000000b000000000000000000000000"
        "8000000b000000000000000000000000fb000000000001000101026324000000")
    return seeds


def ctc_seeds():
    # header (fuzz_ctc.c): op, dtype, T, N, C, S, flags, blank, input lengths (a nibble a sample), target
    # lengths (a nibble a sample), labels' seed, log-probabilities' seed
    LOSS, SIZE = range(2)
    I64, GRAD, GRAD_LOSS, ZERO_INF, LABELS, LP, NTC, BAD = (1 << i for i in range(8))

    def header(op=LOSS, dtype=0, t=5, n=1, c=3, s=3, flags=LABELS | LP, blank=0, lens=(5, 3), tlens=(3, 2),
               lseed=1, lpseed=0):
        # defaults: T 5, N 2, C 4, S 3, labels and log_softmax rows written, input lengths 5 and 3, target
        # lengths 3 and 2
        return [op, dtype, t, n, c, s, flags, blank, lens[0] | lens[1] << 4, tlens[0] | tlens[1] << 4, lseed, lpseed]

    n_slots = 17
    seeds = {}
    valid = {
        "loss-f32-i32": header(),
        "loss-f16-i64": header(dtype=1, flags=I64 | LABELS | LP),
        "loss-bf16-blank-2": header(dtype=2, blank=2, lseed=5),
        "grad-f32": header(flags=GRAD | LABELS | LP),
        "grad-f16-grad-loss": header(dtype=1, flags=GRAD | GRAD_LOSS | LABELS | LP | I64),
        "grad-bf16-ntc-view": header(dtype=2, flags=GRAD | NTC | LABELS | LP),
        "grad-repeats": header(t=6, c=1, flags=GRAD | LABELS | LP, lens=(6, 6), lseed=0),
        "grad-too-short": header(flags=GRAD | LABELS | LP, lens=(2, 1)),
        "grad-too-short-zero-infinity": header(flags=GRAD | ZERO_INF | LABELS | LP, lens=(2, 1)),
        "grad-bad-label": header(flags=GRAD | LABELS | LP | BAD),
        "grad-label-blank": header(flags=GRAD | LABELS | LP | BAD, lseed=16),
        "grad-fill-values-only": header(flags=GRAD | LABELS),
        "grad-empty-targets": header(s=0, flags=GRAD | LABELS | LP, tlens=(0, 0)),
        "grad-c-one": header(c=0, flags=GRAD | LABELS | LP),
        "t-zero": header(t=0, flags=GRAD | LABELS, lens=(0, 0)),
        "n-zero": header(n=15, flags=GRAD),
        "lengths-zero": header(flags=GRAD | LABELS | LP, lens=(0, 0), tlens=(0, 0)),
    }
    for name, h in valid.items():
        seeds[f"loss-{name}"] = seed(h, n_slots)
        seeds[f"workspace_size-{name}"] = seed([SIZE] + h[1:], n_slots)
    fixed = header(flags=GRAD | GRAD_LOSS | LABELS | LP)
    invalid = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "log-probs-null": {1: mutation(NULL)},
        "log-probs-foreign": {1: mutation(FOREIGN)},
        "log-probs-dtype-i32": {1: mutation(DTYPE, pick=4)},
        "log-probs-rank-4": {1: mutation(RANK, pick=4)},
        "log-probs-c-zero": {1: mutation(DIM, index=2, pick=0)},
        "log-probs-dims-overflow": {1: mutation(OVERFLOW)},
        "log-probs-offset-misaligned": {1: mutation(OFFSET, pick=0)},
        "targets-dtype-f32": {2: mutation(DTYPE, pick=0)},
        "targets-dtype-u32": {2: mutation(DTYPE, pick=3)},
        "targets-n-other": {2: mutation(DIM, index=0, pick=3)},
        "targets-s-4097": {2: mutation(DIM, index=1, pick=18)},
        "targets-stride-padded": {2: slot(0x80, STRIDE, 0, 0, extra=(0, 1, 1, 0))},
        "grad-loss-dtype-f16": {3: mutation(DTYPE, pick=1)},
        "grad-loss-n-other": {3: mutation(DIM, index=0, pick=1)},
        "loss-null": {4: mutation(NULL)},
        "loss-dtype-f16": {4: mutation(DTYPE, pick=1)},
        "loss-on-grad-loss": {4: mutation(ALIAS, index=3)},
        "loss-overlaps-log-probs": {4: mutation(OVERLAP, index=0)},
        "grad-dtype-other": {5: mutation(DTYPE, pick=2)},
        "grad-t-other": {5: mutation(DIM, index=0, pick=2)},
        "grad-on-log-probs": {5: mutation(ALIAS, index=0)},
        "grad-overlaps-loss": {5: mutation(OVERLAP, index=4)},
        "args-null": {6: slot(0x80)},
        "input-lengths-null": {7: slot(0x80)},
        "target-lengths-null": {8: slot(0x80)},
        "input-length-minus-one": {9: slot(0x80, 0, 0, 5)},
        "input-length-past-t": {10: slot(0x80, 0, 0, 4)},
        "input-length-int64-min": {9: slot(0x80, 0, 0, 7)},
        "target-length-past-s": {11: slot(0x80, 0, 0, 4)},
        "target-length-int64-max": {12: slot(0x80, 0, 0, 8)},
        "options-null": {13: slot(0x80)},
        "blank-minus-one": {14: slot(0x80, 0, 0, 5)},
        "blank-c": {14: slot(0x80, 0, 0, 4)},
        "blank-int64-max": {14: slot(0x80, 0, 0, 8)},
        "zero-infinity-two": {15: slot(0x80, 1, 0, 2)},
        "zero-infinity-int-min": {15: slot(0x80, 1, 0, 6)},
    }
    for name, changes in invalid.items():
        seeds[f"loss-{name}"] = seed(fixed, n_slots, changes)
        seeds[f"workspace_size-{name}"] = seed([SIZE] + fixed[1:], n_slots, changes)
    seeds["loss-workspace-given"] = seed(fixed, n_slots, {16: slot(0x80, 0, 6, 0)})
    seeds["loss-workspace-short"] = seed(fixed, n_slots, {16: slot(0x80, 0, 6, 2)})
    seeds["loss-workspace-foreign"] = seed(fixed, n_slots, {16: slot(0x80, 2)})
    seeds["loss-workspace-over-log-probs"] = seed(fixed, n_slots, {16: slot(0x80, 0, 0, 0)})
    seeds["loss-workspace-past-buffer"] = seed(fixed, n_slots, {16: slot(0x80, 0, 6, 5)})
    seeds["workspace_size-bytes-null"] = seed([SIZE] + fixed[1:], n_slots, {16: slot(0x80)})
    return seeds


def grid_sample_seeds():
    # header (fuzz_grid_sample.c): op, dtype, 3D, N, C, per dim S | P << 4, flags (mode | padding << 2 |
    # align << 4 | dx << 5 | dgrid << 6 | channels-last << 7), writes (grid | values << 1 | seed << 2 |
    # values into dy << 5 | span << 6)
    FWD, BWD, SIZE = range(3)
    BILINEAR, NEAREST, BICUBIC = range(3)
    ZEROS, BORDER, REFLECTION = range(3)

    def header(op=FWD, dtype=0, d3=0, n=1, c=1, dims=((3, 2), (4, 3), (0, 0)), mode=BILINEAR, padding=ZEROS,
               align=0, dx=1, dgrid=1, cl=0, writes=3, seed=0, to_dy=0, span=0):
        # defaults: 2D, N 2, C 2, x 4 x 5, grid 3 x 4 points, dx and dgrid, grid and x written
        return [op, dtype, d3, n, c, *[s | p << 4 for s, p in dims],
                mode | padding << 2 | align << 4 | dx << 5 | dgrid << 6 | cl << 7,
                writes | seed << 2 | to_dy << 5 | span << 6]

    n_fwd, n_bwd = 8, 11
    seeds = {}
    valid = {
        "bilinear-zeros-f32": header(),
        "bilinear-border-f16-align": header(dtype=1, padding=BORDER, align=1),
        "bilinear-reflection-bf16": header(dtype=2, padding=REFLECTION, span=2),
        "bilinear-reflection-align-far": header(padding=REFLECTION, align=1, span=3, seed=5),
        "nearest-zeros-f32": header(mode=NEAREST),
        "nearest-reflection-f16": header(mode=NEAREST, dtype=1, padding=REFLECTION, span=2),
        "bicubic-zeros-f32": header(mode=BICUBIC),
        "bicubic-border-bf16-align": header(mode=BICUBIC, dtype=2, padding=BORDER, align=1),
        "bicubic-reflection-f32": header(mode=BICUBIC, padding=REFLECTION, span=2, seed=3),
        "trilinear-zeros-f32": header(d3=1, dims=((2, 1), (1, 2), (3, 1))),
        "trilinear-reflection-bf16": header(d3=1, dtype=2, padding=REFLECTION, dims=((1, 2), (2, 1), (0, 2))),
        "nearest-3d-border-f16": header(d3=1, mode=NEAREST, dtype=1, padding=BORDER, dims=((3, 1), (2, 2), (1, 0))),
        "size-one-input": header(dims=((0, 2), (0, 3), (0, 0)), padding=REFLECTION),
        "channels-last": header(cl=1, mode=BICUBIC),
        "dx-only": header(dgrid=0, padding=BORDER),
        "dgrid-only": header(dx=0, padding=REFLECTION, align=1),
        "values-into-dy": header(to_dy=1, mode=BICUBIC, padding=BORDER),
        "fill-values-only": header(writes=0),
        "n-zero": header(n=15),
        "c-zero": header(c=15),
    }
    for name, h in valid.items():
        seeds[f"forward-{name}"] = seed(h, n_fwd)
        seeds[f"backward-{name}"] = seed([BWD] + h[1:], n_bwd)
    for name in ("bilinear-zeros-f32", "dgrid-only", "trilinear-zeros-f32", "n-zero"):
        seeds[f"workspace_size-{name}"] = seed([SIZE] + valid[name][1:], n_bwd)
    fixed = header()
    both = {
        "queue-null": {0: slot(0x80)},
        "queue-other-context": {0: slot(0x80, 1)},
        "x-null": {1: mutation(NULL)},
        "x-foreign": {1: mutation(FOREIGN)},
        "x-dtype-i4": {1: mutation(DTYPE, pick=7)},
        "x-rank-3": {1: mutation(RANK, pick=3)},
        "x-rank-6": {1: mutation(RANK, pick=6)},
        "x-dims-overflow": {1: mutation(OVERFLOW)},
        "x-offset-misaligned": {1: mutation(OFFSET, pick=0)},
        "grid-null": {2: mutation(NULL)},
        "grid-dtype-other": {2: mutation(DTYPE, pick=1)},
        "grid-last-dim-3": {2: mutation(DIM, index=3, pick=3)},
        "grid-n-other": {2: mutation(DIM, index=0, pick=3)},
        "grid-points-huge": {2: mutation(DIM, index=1, pick=10)},
        "grid-stride-zero": {2: mutation(STRIDE, index=1, pick=0)},
        "y-dims-other": {3: mutation(DIM, index=3, pick=2)},
        "y-overlaps-grid": {3: mutation(OVERLAP, index=1)},
        "y-on-x": {3: mutation(ALIAS, index=0)},
    }
    for name, changes in both.items():
        seeds[f"forward-{name}"] = seed(fixed, n_fwd, changes)
        seeds[f"backward-{name}"] = seed([BWD] + fixed[1:], n_bwd, changes)
    fwd_opts = {
        "options-null": {4: slot(0x80)},
        "mode-three": {5: slot(0x80, 0, 1)},
        "mode-int-max": {5: slot(0x80, 1, 0, 7)},
        "padding-three": {6: slot(0x80, 0, 1)},
        "padding-minus-one": {6: slot(0x80, 1, 0, 4)},
        "align-two": {7: slot(0x80, 1, 0, 2)},
    }
    for name, changes in fwd_opts.items():
        seeds[f"forward-{name}"] = seed(fixed, n_fwd, changes)
        seeds[f"backward-{name}"] = seed([BWD] + fixed[1:], n_bwd, {k + 2: v for k, v in changes.items()})
    seeds["forward-bicubic-3d"] = seed(header(d3=1, dims=((2, 1), (1, 2), (3, 1))), n_fwd, {5: slot(0x80, 1, 0, 2)})
    bwd = {
        "dx-dtype-other": {4: mutation(DTYPE, pick=2)},
        "dx-dims-other": {4: mutation(DIM, index=2, pick=2)},
        "dx-on-dy": {4: mutation(ALIAS, index=2)},
        "dx-overlaps-x": {4: mutation(OVERLAP, index=0)},
        "dx-null-dgrid-null": {4: mutation(NULL), 5: mutation(NULL)},
        "dgrid-null": {5: mutation(NULL)},
        "dgrid-on-grid": {5: mutation(ALIAS, index=1)},
        "dgrid-overlaps-dx": {5: mutation(OVERLAP, index=3)},
        "dgrid-foreign": {5: mutation(FOREIGN)},
        "workspace-given": {10: slot(0x80, 0, 6, 0)},
        "workspace-short": {10: slot(0x80, 0, 6, 2)},
        "workspace-foreign": {10: slot(0x80, 2)},
        "workspace-over-grid": {10: slot(0x80, 0, 1, 0)},
        "workspace-size-max": {10: slot(0x80, 0, 6, 6)},
    }
    for name, changes in bwd.items():
        seeds[f"backward-{name}"] = seed([BWD] + fixed[1:], n_bwd, changes)
        if not name.startswith("workspace"):
            seeds[f"workspace_size-{name}"] = seed([SIZE] + fixed[1:], n_bwd, changes)
    seeds["workspace_size-bytes-null"] = seed([SIZE] + fixed[1:], n_bwd, {10: slot(0x80)})
    return seeds


if __name__ == "__main__":
    write("norm", norm_seeds())
    write("moe", moe_seeds())
    write("attention", attention_seeds())
    write("ffn", ffn_seeds())
    write("gated_delta", gated_delta_seeds())
    write("paged_attention", paged_attention_seeds())
    write("moe_train", moe_train_seeds())
    write("convolution", convolution_seeds())
    write("pooling", pooling_seeds())
    write("interpolation", interpolation_seeds())
    write("ctc", ctc_seeds())
    write("grid_sample", grid_sample_seeds())
