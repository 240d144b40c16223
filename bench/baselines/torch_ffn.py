#!/usr/bin/env python3
"""PyTorch baselines of rudnn-bench-ffn's cases (issue 22), one JSON line each, on the same GPU:

  bf16      x @ W1, swiglu (value = first half, gate = last half, as rudnn), @ W2 ("layer"), and the
            two GEMMs alone ("gemms"): TFLOP/s = (2 m k1 n1 + 2 m k2 n2) / time
  w8a8      torch._int_mm for both products ("int_mm_gemms"): TOPS
  w4a16     torch._weight_int4pack_mm for both products, group 128 ("int4pack_gemms"), and the
            bf16 layer beside it: weight_gbps = the int4 weights' bytes / time

Times: CUDA events around each call after warm-up, median of --reps."""
import argparse
import json

import torch
import torch.nn.functional as F

from torch_timing import copy_gbps, timed


def swiglu(h, k2):
    return h[:, :k2] * F.silu(h[:, k2:])


def emit(**kv):
    print(json.dumps(kv), flush=True)


def bf16_case(name, m, k1, k2, reps, copy):
    n1, n2 = 2 * k2, k1
    x = torch.randn(m, k1, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(k1, n1, device="cuda", dtype=torch.bfloat16) * 0.02
    w2 = torch.randn(k2, n2, device="cuda", dtype=torch.bfloat16) * 0.02
    flops = 2.0 * m * (k1 * n1 + k2 * n2)
    wbytes = 2.0 * (k1 * n1 + k2 * n2)
    h = x @ w1
    a = swiglu(h, k2)
    for what, fn in (("layer", lambda: swiglu(x @ w1, k2) @ w2), ("gemms", lambda: (x @ w1, a @ w2))):
        med, mn = timed(fn, reps)
        emit(op="torch_ffn", case=name, what=what, m=m, k1=k1, n1=n1, k2=k2, median_ms=med, min_ms=mn,
             tflops=flops / (med * 1e9), weight_gbps=wbytes / (med * 1e6), copy_gbps=copy,
             weight_copy_fraction=wbytes / (med * 1e6) / copy)


def w8a8_case(name, m, k1, k2, reps):
    n1, n2 = 2 * k2, k1
    x = torch.randint(-128, 127, (m, k1), device="cuda", dtype=torch.int8)
    w1 = torch.randint(-128, 127, (k1, n1), device="cuda", dtype=torch.int8)
    a = torch.randint(-128, 127, (m, k2), device="cuda", dtype=torch.int8)
    w2 = torch.randint(-128, 127, (k2, n2), device="cuda", dtype=torch.int8)
    ops = 2.0 * m * (k1 * n1 + k2 * n2)
    try:
        med, mn = timed(lambda: (torch._int_mm(x, w1), torch._int_mm(a, w2)), reps)
        emit(op="torch_ffn", case=name, what="int_mm_gemms", m=m, k1=k1, n1=n1, k2=k2, median_ms=med, min_ms=mn,
             tops=ops / (med * 1e9))
    except Exception as e:  # noqa: BLE001 - a baseline that does not run is reported, not fatal
        emit(op="torch_ffn", case=name, what="int_mm_gemms", status="FAILED", message=str(e)[:300])


def int4_weight(k, n, group):
    w = torch.randint(0, 16, (n, k), device="cuda", dtype=torch.int32)
    packed_u8 = (w[:, ::2] << 4 | w[:, 1::2]).to(torch.uint8)
    packed = torch._convert_weight_to_int4pack(packed_u8, 8)
    sz = torch.ones(k // group, n, 2, device="cuda", dtype=torch.bfloat16)
    return packed, sz


def w4a16_case(name, m, k1, k2, reps, copy):
    n1, n2, group = 2 * k2, k1, 128
    x = torch.randn(m, k1, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k2, device="cuda", dtype=torch.bfloat16)
    wbytes = 0.5 * (k1 * n1 + k2 * n2)
    try:
        p1, s1 = int4_weight(k1, n1, group)
        p2, s2 = int4_weight(k2, n2, group)
        med, mn = timed(lambda: (torch._weight_int4pack_mm(x, p1, group, s1),
                                 torch._weight_int4pack_mm(a, p2, group, s2)), reps)
        emit(op="torch_ffn", case=name, what="int4pack_gemms", m=m, k1=k1, n1=n1, k2=k2, median_ms=med, min_ms=mn,
             weight_gbps=wbytes / (med * 1e6), copy_gbps=copy, weight_copy_fraction=wbytes / (med * 1e6) / copy)
    except Exception as e:  # noqa: BLE001
        emit(op="torch_ffn", case=name, what="int4pack_gemms", status="FAILED", message=str(e)[:300])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    o = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    copy = copy_gbps(o.reps)
    emit(op="copy", gbps=copy, device=torch.cuda.get_device_name())
    bf16_case("bf16_m4096_swiglu", 4096, 4096, 14336, o.reps, copy)
    w8a8_case("w8a8_m4096_swiglu", 4096, 4096, 14336, o.reps)
    for m in (1, 4, 16, 64, 256):
        w4a16_case("w4a16_g128_m%d" % m, m, 8192, 14336, o.reps, copy)
        bf16_case("bf16_k8192_m%d" % m, m, 8192, 14336, o.reps, copy)


if __name__ == "__main__":
    main()
