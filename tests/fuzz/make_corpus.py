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
    return seeds


if __name__ == "__main__":
    write("norm", norm_seeds())
    write("moe", moe_seeds())
    write("attention", attention_seeds())
