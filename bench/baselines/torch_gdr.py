#!/usr/bin/env python3
"""PyTorch baselines of rudnn-bench-gdr's cases (the gated delta rule), one JSON line each, on the same GPU.

Plain PyTorch ops only (no FLA, no Triton kernels of its own): what a user writes from the formulas of
backends/hal/gated_delta.h. Inputs BF16 ([B, H, T, K] contiguous), log_decay and the state FP32, the
math in FP32 (inputs upcast once inside the call; --tf32 lets the FP32 matmuls use TF32):

  chunked   the WY form in chunks of C: gamma = cumsum(log_decay) per chunk; Lm, T = (I + Lm)^-1
            (torch.linalg.solve_triangular, unit lower), W, U and Pm for every chunk at once (batched
            matmuls), then a Python loop over the chunks for Delta = U - W S, O and S
            (op gated_delta_chunk, strategy "torch_chunk_wy")
  varlen    the packed sequences gathered into a zero-padded batch [N, H, T_max] (zero k, v, beta
            and log_decay leave the state and the real outputs alone), the chunked form over it, the
            outputs scattered back and the states read from / written to the pool rows (op
            gated_delta_chunk_varlen, strategy "torch_padded_batch"); next to it the same T as one
            sequence (fixed_ms, varlen_ratio as rudnn-bench-gdr)
  decode    the naive recurrent loop over T (here 1): S = g S; delta = beta (v - S^T k);
            S += k delta^T; o = S^T (scale q), einsum each (op gated_delta_recurrent, strategy
            "torch_recurrent"); step i reads one state and writes the other, as rudnn-bench-gdr

Shapes, inputs, FLOP and byte counts, and the JSON fields are rudnn-bench-gdr's (bench/gdr_bench.c's
header has the derivation of "flops"); backend "torch". Times: CUDA events around each call after 3
warm-up calls, median and minimum of --reps (bench/baselines/torch_timing.py)."""
import argparse
import json
import math

import torch

from torch_timing import copy_gbps, timed

# bench/gdr_bench.c's varlen_lengths and quick_lengths: the same lists
VARLEN_LENGTHS = [
    992, 1674, 190, 547, 15, 627, 2647, 274, 475, 44, 754, 63, 76, 72, 71, 49, 403, 503, 1947, 71, 48, 846,
    287, 443, 674, 135, 3, 222, 1, 63, 256, 62, 285, 2668, 754, 28, 22, 57, 346, 325, 18, 22, 359, 860,
    583, 726, 2140, 536, 872, 176, 742, 135, 1261, 11, 151, 11, 711, 402, 296, 112, 1299, 704, 837, 785,
]
QUICK_LENGTHS = [37, 100, 1, 0, 64, 54]

# name, kind, B, H, T, K, V, chunk, lengths, pool rows
FULL_CASES = [
    ("prefill_b1_h8_t32768", "chunked", 1, 8, 32768, 128, 128, 64, None, 0),
    ("prefill_b8_h16_t4096", "chunked", 8, 16, 4096, 128, 128, 64, None, 0),
    ("decode_b64_h16", "decode", 64, 16, 1, 128, 128, 0, None, 0),
    ("decode_b128_h16", "decode", 128, 16, 1, 128, 128, 0, None, 0),
    ("decode_b256_h16", "decode", 256, 16, 1, 128, 128, 0, None, 0),
    ("varlen_n64_h8_t32768", "varlen", 1, 8, 32768, 128, 128, 64, VARLEN_LENGTHS, 128),
]
QUICK_CASES = [
    ("quick_prefill_b1_h2_t256", "chunked", 1, 2, 256, 32, 32, 16, None, 0),
    ("quick_prefill_b2_h2_t128", "chunked", 2, 2, 128, 32, 32, 16, None, 0),
    ("quick_decode_b4_h2", "decode", 4, 2, 1, 32, 32, 0, None, 0),
    ("quick_decode_b8_h2", "decode", 8, 2, 1, 32, 32, 0, None, 0),
    ("quick_varlen_n6_h2_t256", "varlen", 1, 2, 256, 32, 32, 16, QUICK_LENGTHS, 12),
]

OPS = {"chunked": "gated_delta_chunk", "decode": "gated_delta_recurrent", "varlen": "gated_delta_chunk_varlen"}
WY_COUNT = "wy_chunk: K(3L^2-L) + 2VL^2 + (L^3-L)/3 + 6LKV per chunk of L tokens and head"
RECURRENT_COUNT = "recurrent: 7KV + 2V + K per token and head"
STATE_FILL = 0.011502913  # the float of the bytes 3c 3c 3c 3c, rudnn-bench-gdr's state fill


# ---- counts (bench/gdr_bench.c) ------------------------------------------------------------------

def chunk_flops(L, K, V):
    return K * (3 * L * L - L) + 2 * V * L * L + (L ** 3 - L) / 3 + 6 * L * K * V


def wy_flops(n, C, K, V):
    full, rest = divmod(n, C)
    return full * chunk_flops(C, K, V) + (chunk_flops(rest, K, V) if rest else 0.0)


def recurrent_flops(tokens, K, V):
    return tokens * (7.0 * K * V + 2.0 * V + K)


# ---- the math --------------------------------------------------------------------------------------

def chunk_gdr(q, k, v, beta, g, s0, scale, C):
    """The chunked WY form. q, k [B, H, T, K], v [B, H, T, V], beta [B, H, T] (any float dtype),
    g [B, H, T] and s0 [B, H, K, V] FP32. Returns (o [B, H, T, V], s1 [B, H, K, V]), both FP32."""
    B, H, T, K = q.shape
    V = v.shape[-1]
    n = (T + C - 1) // C
    pad = n * C - T
    f = torch.float32
    q, k, v, beta, g = q.to(f), k.to(f), v.to(f), beta.to(f), g.to(f)
    if pad:  # zero tokens: no change to the state, outputs dropped
        q = torch.nn.functional.pad(q, (0, 0, 0, pad))
        k = torch.nn.functional.pad(k, (0, 0, 0, pad))
        v = torch.nn.functional.pad(v, (0, 0, 0, pad))
        beta = torch.nn.functional.pad(beta, (0, pad))
        g = torch.nn.functional.pad(g, (0, pad))
    q = q.view(B, H, n, C, K)
    k = k.view(B, H, n, C, K)
    v = v.view(B, H, n, C, V)
    beta = beta.view(B, H, n, C)
    gamma = g.view(B, H, n, C).cumsum(-1)
    # exp(gamma_i - gamma_j) where j <= i (strict: j < i), 0 elsewhere (never exponentiated)
    diff = gamma[..., :, None] - gamma[..., None, :]
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = lower.tril(-1)
    decay_lower = diff.masked_fill(~lower, float("-inf")).exp()
    decay_strict = diff.masked_fill(~strict, float("-inf")).exp()
    lm = (beta[..., None] * (k @ k.transpose(-1, -2))) * decay_strict
    eye = torch.eye(C, dtype=f, device=q.device)
    t_inv = torch.linalg.solve_triangular(eye + lm, eye.expand_as(lm), upper=False, unitriangular=True)
    w = t_inv @ (k * (beta * gamma.exp())[..., None])
    u = t_inv @ (v * beta[..., None])
    pm = (q @ k.transpose(-1, -2)) * decay_lower
    eg = gamma.exp()[..., None]  # [B, H, n, C, 1]
    g_last = gamma[..., -1]  # [B, H, n]
    k_to_end = k * (g_last[..., None] - gamma).exp()[..., None]
    o = torch.empty(B, H, n, C, V, dtype=f, device=q.device)
    s = s0.to(f)
    for c in range(n):
        delta = u[:, :, c] - w[:, :, c] @ s
        o[:, :, c] = scale * (eg[:, :, c] * (q[:, :, c] @ s) + pm[:, :, c] @ delta)
        s = g_last[:, :, c, None, None].exp() * s + k_to_end[:, :, c].transpose(-1, -2) @ delta
    o = o.view(B, H, n * C, V)[:, :, :T]
    return o, s


def recurrent_gdr(q, k, v, beta, g, s0, scale):
    """The naive token loop. Shapes as chunk_gdr; returns (o FP32, s1 FP32)."""
    f = torch.float32
    q, k, v, beta, g = q.to(f), k.to(f), v.to(f), beta.to(f), g.to(f)
    s = s0.to(f)
    outs = []
    for t in range(q.shape[2]):
        s = s * g[:, :, t, None, None].exp()
        kv = torch.einsum("bhkv,bhk->bhv", s, k[:, :, t])
        delta = beta[:, :, t, None] * (v[:, :, t] - kv)
        s = s + torch.einsum("bhk,bhv->bhkv", k[:, :, t], delta)
        outs.append(torch.einsum("bhkv,bhk->bhv", s, scale * q[:, :, t]))
    return torch.stack(outs, dim=2), s


# ---- inputs ----------------------------------------------------------------------------------------

def make_inputs(B, H, T, K, V, gen, device):
    def l2_rows(shape):
        x = torch.rand(shape, generator=gen, device=device) * 2 - 1
        return (x / x.norm(dim=-1, keepdim=True)).to(torch.bfloat16)

    q = l2_rows((B, H, T, K))
    k = l2_rows((B, H, T, K))
    v = (torch.rand((B, H, T, V), generator=gen, device=device) * 2 - 1).to(torch.bfloat16)
    beta = (0.05 + 0.9 * torch.rand((B, H, T), generator=gen, device=device)).to(torch.bfloat16)
    g = -0.001 - 0.099 * torch.rand((B, H, T), generator=gen, device=device)
    return q, k, v, beta, g


class Varlen:
    """The padded-batch form of packed sequences: index tensors made once, outside the timing."""

    def __init__(self, lengths, pool_rows, device):
        self.n = len(lengths)
        self.t_max = max(1, max(lengths))
        starts = [sum(lengths[:i]) for i in range(self.n)]
        seq = torch.cat([torch.full((n,), i, dtype=torch.long) for i, n in enumerate(lengths)])
        pos = torch.cat([torch.arange(n, dtype=torch.long) for n in lengths])
        self.src = torch.tensor([s + p for s, n in zip(starts, lengths) for p in range(n)], dtype=torch.long)
        self.seq, self.pos = seq.to(device), pos.to(device)
        self.src = self.src.to(device)
        self.rows = torch.tensor([(37 * i + 11) % pool_rows for i in range(self.n)], dtype=torch.long,
                                 device=device)

    def pad(self, x):
        """[1, H, T, ...] packed -> [N, H, T_max, ...] zero-padded."""
        x0 = x[0]  # [H, T, ...]
        out = x0.new_zeros((self.n, x0.shape[0], self.t_max) + tuple(x0.shape[2:]))
        out[self.seq, :, self.pos] = x0[:, self.src].transpose(0, 1)
        return out

    def __call__(self, q, k, v, beta, g, pool_in, pool_out, out, scale, C):
        o, s = chunk_gdr(self.pad(q), self.pad(k), self.pad(v), self.pad(beta), self.pad(g), pool_in[self.rows],
                         scale, C)
        out[0][:, self.src] = o[self.seq, :, self.pos].transpose(0, 1).to(out.dtype)
        pool_out[self.rows] = s


# ---- cases -----------------------------------------------------------------------------------------

def emit(**kv):
    print(json.dumps(kv), flush=True)


def run_case(case, reps, copy, device_name):
    name, kind, B, H, T, K, V, C, lengths, pool_rows = case
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)
    scale = 1.0 / math.sqrt(K)
    q, k, v, beta, g = make_inputs(B, H, T, K, V, gen, dev)
    head = dict(op=OPS[kind], case=name, b=B, h=H, t=T, k=K, v=V, chunk=C,
                sequences=len(lengths) if lengths else B, dtype="bf16", backend="torch", device=device_name)
    tokens = B * H * T
    extra = {}
    if kind == "decode":
        states = [torch.full((B, H, K, V), STATE_FILL, device=dev), None]
        step = [0]

        def fn():
            i = step[0]
            o, s = recurrent_gdr(q, k, v, beta, g, states[i % 2], scale)
            states[(i + 1) % 2] = s
            step[0] = i + 1
            return o.to(torch.bfloat16)

        strategy, flops, state_rows, count = "torch_recurrent", B * H * recurrent_flops(T, K, V), B, RECURRENT_COUNT
    elif kind == "chunked":
        s0 = torch.full((B, H, K, V), STATE_FILL, device=dev)

        def fn():
            o, s = chunk_gdr(q, k, v, beta, g, s0, scale, C)
            return o.to(torch.bfloat16), s

        strategy, flops, state_rows, count = "torch_chunk_wy", B * H * wy_flops(T, C, K, V), B, WY_COUNT
    else:
        vl = Varlen(lengths, pool_rows, dev)
        pool_in = torch.full((pool_rows, H, K, V), STATE_FILL, device=dev)
        pool_out = torch.zeros_like(pool_in)
        out = torch.zeros((1, H, T, V), dtype=torch.bfloat16, device=dev)
        s_fixed = torch.full((1, H, K, V), STATE_FILL, device=dev)

        def fn():
            vl(q, k, v, beta, g, pool_in, pool_out, out, scale, C)

        fixed_med, fixed_min = timed(lambda: chunk_gdr(q, k, v, beta, g, s_fixed, scale, C), reps)
        strategy, state_rows, count = "torch_padded_batch", len(lengths), WY_COUNT
        flops = H * sum(wy_flops(n, C, K, V) for n in lengths)
        extra = dict(fixed_kernel="torch_chunk_wy", fixed_ms=fixed_med, fixed_min_ms=fixed_min)
    try:
        med, mn = timed(fn, reps)
    except torch.cuda.OutOfMemoryError as e:
        emit(**head, strategy=strategy, status="FAILED", message=str(e)[:300])
        return
    secs = med * 1e-3
    state_bytes = 2.0 * state_rows * H * K * V * 4
    nbytes = tokens * ((2 * K + 2 * V + 1) * 2.0 + 4.0) + state_bytes
    gbps = nbytes / secs / 1e9
    rec = dict(head, strategy=strategy, kernel=strategy, median_ms=med, min_ms=mn, flops=flops, flop_count=count,
               tflops=flops / secs / 1e12, bytes=nbytes, gbps=gbps, copy_gbps=copy, copy_fraction=gbps / copy)
    if kind == "decode":
        sg = state_bytes / secs / 1e9
        rec.update(state_bytes=state_bytes, state_gbps=sg, state_copy_fraction=sg / copy)
    if kind == "varlen":
        rec.update(extra, varlen_ratio=med / extra["fixed_ms"])
    rec["reps"] = reps
    emit(**rec)
    del q, k, v, beta, g
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--case", help="comma-separated case names (default: all)")
    ap.add_argument("--quick", action="store_true", help="the small shapes of rudnn-bench-gdr --quick")
    ap.add_argument("--tf32", action="store_true", help="let the FP32 matmuls use TF32")
    o = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = o.tf32
    cases = QUICK_CASES if o.quick else FULL_CASES
    wanted = o.case.split(",") if o.case else None
    if wanted:
        unknown = [w for w in wanted if w not in {c[0] for c in cases}]
        if unknown:
            ap.error("unknown case(s) %s%s" % (", ".join(unknown), " (with --quick)" if o.quick else ""))
    name = torch.cuda.get_device_name()
    copy = copy_gbps(o.reps, (16 << 20) if o.quick else (1 << 30))
    emit(op="copy", bytes=(16 << 20) if o.quick else (1 << 30), backend="torch", device=name, gbps=copy,
         copy_gbps=copy, reps=o.reps)
    with torch.no_grad():
        for case in cases:
            if wanted is None or case[0] in wanted:
                run_case(case, o.reps, copy, name)


if __name__ == "__main__":
    main()
