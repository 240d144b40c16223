#!/usr/bin/env python3
"""PyTorch baselines of rudnn-bench-paged's cases (paged attention and MLA), one JSON line each, on the same GPU.

What a PyTorch user without a paged kernel writes: gather the pages into dense tensors, then run a
dense kernel. The two are timed apart: "median_ms" / "min_ms" are the dense kernel alone over
tensors gathered beforehand, "gather_ms" / "gather_min_ms" the gather alone (page-table index of
the caches, the copy into [B, H, S, D] contiguous, q into the same layout; MLA: the latent and kp
gathered and concatenated, q and qp concatenated). Putting the output back into packed rows is not
timed. Sequences of one length (and query count) are gathered and run as one batch; the mixed
prefill case runs one call per distinct length.

  paged_attention  F.scaled_dot_product_attention with enable_gqa=True (Hq 32 over Hkv 8), each
                   backend forced with sdpa_kernel: strategy torch_cudnn (SDPBackend.CUDNN_ATTENTION)
                   and torch_flash (FLASH_ATTENTION, FlashAttention-2). Decode: one query at the last
                   position, which sees every key: is_causal=False (torch's causal mask is top-left
                   aligned, it would show the query key 0 only). Prefill: fresh histories, Sq = Skv
                   per sequence, so is_causal=True is rudnn's causal mask.
  paged_mla        torch_matmul: scores = [q | qp] @ [latent | kp]^T in BF16 (one GEMM, the two dot
                   products of MLA's score at once), scale and softmax in FP32, back to BF16, out =
                   P @ latent; the heads of a sequence are rows of one GEMM (one shared latent per
                   sequence). torch_sdpa_cudnn / _flash / _efficient: SDPA with [q | qp] as the query
                   (H T rows of one head), [latent | kp] as the key and the latent as the value
                   (D 576, Dv 512: backends that refuse it print NOT_SUPPORTED). Two queries per
                   sequence: a boolean mask hides the last key from the first (SDPA's attn_mask).

Shapes, case names, FLOP and byte counts, and the JSON head are rudnn-bench-paged's (bench/paged_bench.c's
header has the counts), "backend":"torch", plus "strategy", "kernel", "gather_ms", "gather_min_ms" and
"torch". Inputs: random BF16 in [-1, 1), the pages a random permutation; several input sets in turn
while one is under 4x a 60 MB L2 (as rudnn-bench-paged). Times: CUDA events around each call after
max(3, sets) warm-up calls, median and minimum of --reps (bench/baselines/torch_timing.py). A "copy"
line first: min(2 GiB, memory / 8) copied, read + write counted."""
import argparse
import json
import math
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import copy_gbps, timed

# bench/paged_bench.c's lists
PREFILL_MIXED = [4096, 3072, 2560, 2048, 1536, 1024, 768, 512, 384, 256, 100, 28]
QUICK_MIXED = [37, 64, 3, 24]
L2_ROTATE_BYTES = 4 * 60e6
MAX_SETS = 16
MEMORY_SHARE = 0.85
MLA_SCALE = 1.0 / math.sqrt(192.0)  # DeepSeek-V3's QK scale (128 + 64 dims before absorption)
ATTENTION_BACKENDS = [("torch_cudnn", "CUDNN_ATTENTION"), ("torch_flash", "FLASH_ATTENTION")]
MLA_SDPA_BACKENDS = [("torch_sdpa_cudnn", "CUDNN_ATTENTION"), ("torch_sdpa_flash", "FLASH_ATTENTION"),
                     ("torch_sdpa_efficient", "EFFICIENT_ATTENTION")]


# ---- cases (bench/paged_bench.c's make_cases) -------------------------------------------------------

def case(name, kind, hq, hkv, d, dv, rope, page, lengths, nq):
    return dict(name=name, kind=kind, hq=hq, hkv=hkv, d=d, dv=dv, rope=rope, page=page, lengths=lengths, nq=nq)


def decode(page, b, kv, hq, hkv, d, quick):
    name = "quick_decode_p%d_b%d_kv%d" % (page, b, kv) if quick else "decode_p%d_b%d_kv%dk" % (page, b, kv // 1024)
    return case(name, "decode", hq, hkv, d, d, 0, page, [kv] * b, [1] * b)


def prefill(name, lengths, hq, hkv, d):
    return case(name, "prefill", hq, hkv, d, d, 0, 16, list(lengths), list(lengths))


def mla(b, h, tq, r, p, page, kv, quick):
    name = "%smla_decode_b%d_h%d_t%d" % ("quick_" if quick else "", b, h, tq)
    return case(name, "mla_decode", h, 1, r, r, p, page, [kv] * b, [tq] * b)


def make_cases(quick):
    if quick:
        return [decode(16, 1, 1024, 4, 2, 32, True), decode(5, 3, 100, 4, 2, 32, True),
                prefill("quick_prefill_p16_mixed_t128", QUICK_MIXED, 4, 2, 32),
                mla(2, 4, 1, 64, 16, 16, 200, True), mla(2, 4, 2, 64, 16, 16, 200, True)]
    cases = [decode(p, b, kv, 32, 8, 128, False)
             for p in (16, 64) for b in (1, 8, 64, 128) for kv in (2048, 8192, 32768, 131072)]
    cases += [prefill("prefill_p16_n8_s2048", [2048] * 8, 32, 8, 128),
              prefill("prefill_p16_mixed_t16384", PREFILL_MIXED, 32, 8, 128)]
    cases += [mla(b, h, t, 512, 64, 64, 8192, False)
              for b, h, t in ((64, 16, 1), (128, 16, 1), (64, 128, 1), (64, 128, 2), (128, 128, 1), (128, 128, 2))]
    return cases


def counts(c):
    """rudnn-bench-paged's counts: queries, pages, kv_tokens, max_kv, flops, cache_bytes, bytes."""
    lengths, nq = c["lengths"], c["nq"]
    queries = sum(nq)
    pairs = sum(n * (length - n) + n * (n + 1) / 2 for length, n in zip(lengths, nq))
    second = c["rope"] if c["kind"] == "mla_decode" else c["dv"]
    cache_bytes = sum(lengths) * c["hkv"] * (c["d"] + second) * 2.0
    nbytes = cache_bytes + queries * c["hq"] * (c["d"] + c["rope"] + c["dv"]) * 2.0
    return dict(queries=queries, pages=sum((n + c["page"] - 1) // c["page"] for n in lengths),
                kv_tokens=sum(lengths), max_kv=max(lengths),
                flops=2.0 * c["hq"] * pairs * (c["d"] + c["rope"] + c["dv"]), cache_bytes=cache_bytes, bytes=nbytes)


def head(c, n, device_name):
    h = {"op": "paged_mla" if c["kind"] == "mla_decode" else "paged_attention", "case": c["name"],
         "kind": c["kind"], "sequences": len(c["lengths"]), "queries": n["queries"], "page_size": c["page"],
         "max_kv": n["max_kv"], "kv_tokens": n["kv_tokens"], "causal": True}
    if c["kind"] == "mla_decode":
        h.update(h=c["hq"], r=c["d"], p=c["rope"])
    else:
        h.update(hq=c["hq"], hkv=c["hkv"], d=c["d"], dv=c["dv"])
    h.update(dtype="bf16", backend="torch", device=device_name)
    return h


def emit(record):
    print(json.dumps(record, separators=(",", ":")), flush=True)


# ---- inputs -----------------------------------------------------------------------------------------

def rand(*shape):
    return torch.empty(shape, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)


class Schedule:
    """The page tables (a random permutation of the pages, handed to the sequences in turn) and the
    sequences grouped by (length, queries): per group its page ids [g, pages] and its query rows."""

    def __init__(self, c, n):
        perm = torch.randperm(n["pages"], device="cuda")
        page = c["page"]
        groups = {}
        at, row = 0, 0
        for length, nq in zip(c["lengths"], c["nq"]):
            np_ = (length + page - 1) // page
            g = groups.setdefault((length, nq), ([], []))
            g[0].append(perm[at:at + np_])
            g[1].append(torch.arange(row, row + nq, device="cuda"))
            at, row = at + np_, row + nq
        self.groups = [(length, nq, torch.stack(p), torch.cat(r)) for (length, nq), (p, r) in groups.items()]


def dense_cache(cache, pidx, length):
    """[pages, page, H, D] through page ids [g, np] -> [g, H, length, D] contiguous."""
    g, np_ = pidx.shape
    x = cache[pidx]  # [g, np, page, H, D]
    return x.view(g, np_ * x.shape[2], x.shape[3], x.shape[4])[:, :length].transpose(1, 2).contiguous()


def dense_rows(x, rows, g, nq):
    """Packed [Q, H, D] rows of g sequences of nq queries -> [g, H, nq, D] contiguous."""
    return x[rows].view(g, nq, x.shape[1], x.shape[2]).transpose(1, 2).contiguous()


def gather(c, sched, s):
    """The dense operands of every group: attention (q, k, v, causal); MLA (qcat, kcat, latent, mask)."""
    out = []
    for length, nq, pidx, rows in sched.groups:
        g = pidx.shape[0]
        if c["kind"] == "mla_decode":
            latent = dense_cache(s["k"], pidx, length)[:, 0]  # [g, length, R]
            kp = dense_cache(s["k2"], pidx, length)[:, 0]
            # query rows of a sequence: t H + h (packed [Q, H, *] viewed as [g, nq H, *])
            qcat = torch.cat([s["q"][rows], s["qp"][rows]], -1).view(g, nq * c["hq"], -1)
            mask = None
            if nq > 1:  # query t at position length - nq + t sees keys [0, length - nq + t + 1)
                pos = torch.arange(length - nq, length, device="cuda").repeat_interleave(c["hq"])
                mask = torch.arange(length, device="cuda")[None, :] <= pos[:, None]  # True: attend
            out.append((qcat, torch.cat([latent, kp], -1), latent, mask))
        else:
            causal = nq == length  # fresh histories (prefill); else one query at the last position
            if not causal and nq != 1:
                raise ValueError("%s: %d queries over %d keys: no SDPA mask for that" % (c["name"], nq, length))
            out.append((dense_rows(s["q"], rows, g, nq), dense_cache(s["k"], pidx, length),
                        dense_cache(s["k2"], pidx, length), causal))
    return out


def make_set(c, n):
    q_rows, hq = n["queries"], c["hq"]
    rows = n["pages"]
    mla_case = c["kind"] == "mla_decode"
    s = {"k": rand(rows, c["page"], c["hkv"], c["d"]),
         "k2": rand(rows, c["page"], c["hkv"], c["rope"] if mla_case else c["dv"]),
         "q": rand(q_rows, hq, c["d"])}
    if mla_case:
        s["qp"] = rand(q_rows, hq, c["rope"])
    return s


# ---- the dense calls -------------------------------------------------------------------------------

# Each returns the groups' outputs: attention [g, Hq, nq, Dv]; MLA [g, nq H, R] (row t H + h).

def sdpa_attention(dense, scale):
    return [F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
            for q, k, v, causal in dense]


def mla_matmul(dense, r, scale):
    out = []
    for qcat, kcat, latent, mask in dense:
        s = torch.matmul(qcat, kcat.transpose(1, 2)).float() * scale
        if mask is not None:
            s.masked_fill_(~mask, float("-inf"))
        p = torch.softmax(s, dim=-1).to(torch.bfloat16)
        out.append(torch.matmul(p, kcat[..., :r]))
    return out


def mla_sdpa(dense, scale):
    return [F.scaled_dot_product_attention(qcat.unsqueeze(1), kcat.unsqueeze(1), latent.unsqueeze(1),
                                           attn_mask=mask, scale=scale)[:, 0]
            for qcat, kcat, latent, mask in dense]


# ---- one case --------------------------------------------------------------------------------------

def rotating(fn, items):
    """fn over items in turn, one per call."""
    at = [0]

    def call():
        item = items[at[0] % len(items)]
        at[0] += 1
        return fn(item)
    return call


def run_case(c, args, copy, device_name):
    n = counts(c)
    hd = head(c, n, device_name)
    gib = n["cache_bytes"] / 2 ** 30
    if gib > args.max_cache_gib:
        emit(dict(hd, status="SKIPPED", message="the %s cache of %.1f GiB exceeds --max-cache-gib %g" % (
            "latent + kp" if c["kind"] == "mla_decode" else "K + V", gib, args.max_cache_gib)))
        return
    free, _ = torch.cuda.mem_get_info()
    nsets = 1
    while nsets < MAX_SETS and nsets * n["bytes"] < L2_ROTATE_BYTES:
        nsets += 1
    # each set paged and dense, and while the gather is timed its pages indexed and its new dense copy
    while nsets > 1 and (2 * nsets + 2) * n["bytes"] > MEMORY_SHARE * free:
        nsets -= 1
    if 4 * n["bytes"] > MEMORY_SHARE * free:
        emit(dict(hd, status="SKIPPED", message="the paged and gathered inputs do not fit in device memory"))
        return
    sched = Schedule(c, n)
    sets = [make_set(c, n) for _ in range(nsets)]
    dense = [gather(c, sched, s) for s in sets]
    warmup = max(3, nsets)
    gather_ms, gather_min = timed(rotating(lambda s: gather(c, sched, s), sets), args.reps, warmup)
    if c["kind"] == "mla_decode":
        scale = MLA_SCALE
        strategies = [("torch_matmul", "matmul_softmax_matmul", None, lambda d: mla_matmul(d, c["d"], scale))]
        strategies += [(name, "sdpa." + b.lower(), getattr(SDPBackend, b), lambda d: mla_sdpa(d, scale))
                       for name, b in MLA_SDPA_BACKENDS]
    else:
        scale = 1.0 / math.sqrt(c["d"])
        strategies = [(name, "sdpa." + b.lower(), getattr(SDPBackend, b), lambda d: sdpa_attention(d, scale))
                      for name, b in ATTENTION_BACKENDS]
    for name, kernel, backend, fn in strategies:
        # SDPA says why a backend refuses a shape only in warnings: they become the refusal's message
        with warnings.catch_warnings(record=True) as why:
            warnings.simplefilter("always")
            try:
                if backend is None:
                    med, mn = timed(rotating(fn, dense), args.reps, warmup)
                else:
                    with sdpa_kernel([backend]):
                        med, mn = timed(rotating(fn, dense), args.reps, warmup)
            except torch.cuda.OutOfMemoryError as e:
                emit(dict(hd, strategy=name, status="SKIPPED", message="out of memory: " + str(e).split("\n")[0],
                          torch=torch.__version__))
                continue
            except RuntimeError as e:  # the backend refuses the shape ("No available kernel")
                reasons = [str(w.message).split(" (Triggered")[0] for w in why]
                reasons = [r for r in reasons if not r.endswith("because:") and "runtime disabled" not in r]
                message = " ".join(" ".join([str(e)] + reasons).split())
                emit(dict(hd, strategy=name, status="NOT_SUPPORTED", message=message[:600], torch=torch.__version__))
                continue
        secs = med * 1e-3
        gbps = n["bytes"] / secs / 1e9
        emit(dict(hd, strategy=name, kernel=kernel, median_ms=round(med, 6), min_ms=round(mn, 6),
                  flops=n["flops"], tflops=round(n["flops"] / secs / 1e12, 3), bytes=n["bytes"],
                  cache_bytes=n["cache_bytes"], gbps=round(gbps, 2), copy_gbps=round(copy, 2),
                  copy_fraction=round(gbps / copy, 4), gather_ms=round(gather_ms, 6),
                  gather_min_ms=round(gather_min, 6), reps=args.reps, sets=nsets, torch=torch.__version__))
    del sets, dense, sched
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--case", help="comma-separated case names (default: all)")
    ap.add_argument("--quick", action="store_true", help="the small shapes of rudnn-bench-paged --quick")
    ap.add_argument("--max-cache-gib", type=float, default=24.0,
                    help="skip cases whose K + V (latent + kp) cache is larger (default 24)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_paged.py: no CUDA device", file=sys.stderr)
        return 1
    cases = make_cases(args.quick)
    wanted = args.case.split(",") if args.case else None
    if wanted:
        unknown = [w for w in wanted if w not in {c["name"] for c in cases}]
        if unknown:
            ap.error("unknown case(s) %s%s" % (", ".join(unknown), " (with --quick)" if args.quick else ""))
    name = torch.cuda.get_device_name()
    _, total = torch.cuda.mem_get_info()
    nbytes = (16 << 20) if args.quick else min(2 << 30, total // 8) & ~4095
    copy = copy_gbps(args.reps, nbytes)
    emit(dict(op="copy", bytes=nbytes, backend="torch", device=name, gbps=round(copy, 2), copy_gbps=round(copy, 2),
              reps=args.reps))
    torch.manual_seed(0)
    with torch.no_grad():
        for c in cases:
            if wanted is None or c["name"] in wanted:
                run_case(c, args, copy, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
