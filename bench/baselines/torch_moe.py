#!/usr/bin/env python3
"""PyTorch MoE forward baseline, the same cases as rudnn-bench-moe (bf16 on one GPU).

What a user would write with stock PyTorch: softmax + topk (renormalized), argsort by expert,
torch._grouped_mm for gate, up and down, silu(gate) * up, and a weighted index_add back to
token order (op moe_forward). The same forward with one cuBLAS GEMM per expert and matrix
(op moe_forward_cublas). Routing alone is softmax + topk. Prints one JSON line per case and op.
"""
import json
import math

import torch
import torch.nn.functional as F

from torch_timing import timed

CASES = [
    # name, E, top_k, H, I, T
    ("mixtral", 8, 2, 4096, 14336, 4096),
    ("deepseek_v3_t4096", 256, 8, 7168, 2048, 4096),
    ("deepseek_v3_t128", 256, 8, 7168, 2048, 128),
    ("qwen3", 128, 8, 2048, 768, 4096),
]


def route(logits, k):
    probs = torch.softmax(logits.float(), dim=-1)
    w, idx = torch.topk(probs, k, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), idx


def by_expert(x, logits, k, e):
    """Routing, then the token rows sorted by expert: weights, expert ids, order, token of each
    sorted row, the sorted rows, and the end offset of each expert's rows."""
    w, idx = route(logits, k)
    flat = idx.flatten()
    order = torch.argsort(flat, stable=True)
    tok = order // k
    offs = torch.cumsum(torch.bincount(flat, minlength=e), 0, dtype=torch.int32)
    return w, flat, order, tok, x[tok], offs


def moe_forward(x, logits, gate_t, up_t, down_t, k):
    """gate_t, up_t: [E, H, I] and down_t: [E, I, H], column-major views (transposes of the
    [E, I, H] / [E, H, I] weights), as torch._grouped_mm wants its second operand."""
    w, _, order, tok, xs, offs = by_expert(x, logits, k, gate_t.shape[0])
    g = torch._grouped_mm(xs, gate_t, offs=offs)
    u = torch._grouped_mm(xs, up_t, offs=offs)
    o = torch._grouped_mm(F.silu(g) * u, down_t, offs=offs)
    out = torch.zeros_like(x)
    out.index_add_(0, tok, o * w.flatten()[order].unsqueeze(1).to(o.dtype))
    return out


def moe_forward_cublas(x, logits, gate, up, down, k):
    """The same forward with the expert GEMMs done by cuBLAS instead of a grouped kernel: the
    expert row counts read back to the host (one synchronisation per forward), then per expert
    torch.mm for gate, up and down (gate/up [E, I, H], down [E, H, I] row-major, used transposed)
    and an unfused silu(g) * u. The "cuBLAS" alternative of issue 3 (grouped GEMM through
    cuBLAS or own kernels, whichever is faster)."""
    e = gate.shape[0]
    w, _, order, tok, xs, offs = by_expert(x, logits, k, e)
    ends = offs.tolist()
    o = torch.empty(xs.shape[0], down.shape[1], device=x.device, dtype=x.dtype)
    start = 0
    for j in range(e):
        end = ends[j]
        if end > start:
            xj = xs[start:end]
            act = F.silu(torch.mm(xj, gate[j].t())) * torch.mm(xj, up[j].t())
            torch.mm(act, down[j].t(), out=o[start:end])
        start = end
    out = torch.zeros_like(x)
    out.index_add_(0, tok, o * w.flatten()[order].unsqueeze(1).to(o.dtype))
    return out


def back_to_back_ms(fn, n=50):
    """n calls queued between two events, per call: throughput when the GPU never waits."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / n


def parts(case, x, logits, gate_t, up_t, down_t, k, name):
    """Each stage of moe_forward timed alone (--parts): where PyTorch's time goes, and its
    grouped GEMMs against one dense cuBLAS GEMM of the same rows (torch.mm)."""
    _, flat, _, _, xs, offs = by_expert(x, logits, k, gate_t.shape[0])
    g = torch._grouped_mm(xs, gate_t, offs=offs)
    u = torch._grouped_mm(xs, up_t, offs=offs)
    act = F.silu(g) * u
    rows, h, inter = xs.shape[0], xs.shape[1], gate_t.shape[2]
    dense_w1 = gate_t[0][:, :inter]
    dense_w2 = down_t[0]
    stages = [
        ("route", lambda: route(logits, k), 0),
        ("sort_gather", lambda: x[torch.argsort(flat, stable=True) // k], 0),
        ("grouped_mm_gate", lambda: torch._grouped_mm(xs, gate_t, offs=offs), 2.0 * rows * h * inter),
        ("grouped_mm_up", lambda: torch._grouped_mm(xs, up_t, offs=offs), 2.0 * rows * h * inter),
        ("silu_mul", lambda: F.silu(g) * u, 0),
        ("grouped_mm_down", lambda: torch._grouped_mm(act, down_t, offs=offs), 2.0 * rows * h * inter),
        ("dense_mm_gate_shape", lambda: torch.mm(xs, dense_w1), 2.0 * rows * h * inter),
        ("dense_mm_down_shape", lambda: torch.mm(act, dense_w2), 2.0 * rows * h * inter),
    ]
    for stage, fn, flops in stages:
        med, mn = timed(fn, 20, warmup=2)
        print(json.dumps({"op": "moe_part", "case": case, "part": stage, "dtype": "bf16", "backend": "torch",
                          "device": name, "median_ms": round(med, 4), "min_ms": round(mn, 4),
                          "tflops": round(flops / (med * 1e9), 1) if flops else None}), flush=True)


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", action="append", help="only these cases (repeatable)")
    ap.add_argument("--parts", action="store_true", help="time each stage of the forward alone")
    opts = ap.parse_args()
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name()
    torch.manual_seed(0)
    for case, e, k, h, i, t in CASES:
        if opts.case and case not in opts.case:
            continue
        gate = torch.randn(e, i, h, device=dev, dtype=torch.bfloat16) / math.sqrt(h)
        up = torch.randn(e, i, h, device=dev, dtype=torch.bfloat16) / math.sqrt(h)
        down = torch.randn(e, h, i, device=dev, dtype=torch.bfloat16) / math.sqrt(i)
        x = torch.randn(t, h, device=dev, dtype=torch.bfloat16)
        logits = torch.randn(t, e, device=dev, dtype=torch.bfloat16) * 2
        gate_t, up_t, down_t = gate.transpose(1, 2), up.transpose(1, 2), down.transpose(1, 2)
        if opts.parts:
            parts(case, x, logits, gate_t, up_t, down_t, k, name)
            continue
        med, mn = timed(lambda: moe_forward(x, logits, gate_t, up_t, down_t, k), 10, warmup=2)
        flops = 6.0 * t * k * h * i
        wbytes = 3.0 * e * h * i * 2
        print(json.dumps({"op": "moe_forward", "case": case, "shape": {"T": t, "E": e, "top_k": k, "H": h, "I": i},
                          "dtype": "bf16", "backend": "torch", "device": name, "strategy": "grouped_mm",
                          "median_ms": round(med, 4), "min_ms": round(mn, 4),
                          "tflops": round(flops / (med * 1e9), 1), "weight_gbps": round(wbytes / (med * 1e6), 1)}),
              flush=True)
        med, mn = timed(lambda: moe_forward_cublas(x, logits, gate, up, down, k), 10, warmup=2)
        print(json.dumps({"op": "moe_forward_cublas", "case": case,
                          "shape": {"T": t, "E": e, "top_k": k, "H": h, "I": i}, "dtype": "bf16",
                          "backend": "torch", "device": name, "strategy": "cublas_per_expert",
                          "median_ms": round(med, 4), "min_ms": round(mn, 4),
                          "tflops": round(flops / (med * 1e9), 1)}), flush=True)
        if t == 4096:
            med, mn = timed(lambda: route(logits, k), 50, warmup=2)
            b2b = back_to_back_ms(lambda: route(logits, k))
            print(json.dumps({"op": "moe_route", "case": case, "shape": {"T": t, "E": e, "top_k": k},
                              "dtype": "bf16", "backend": "torch", "device": name, "strategy": "softmax_topk",
                              "median_ms": round(med, 4), "min_ms": round(mn, 4), "b2b_ms": round(b2b, 4)}),
                  flush=True)
        del gate, up, down, gate_t, up_t, down_t
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
