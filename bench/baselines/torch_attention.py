#!/usr/bin/env python3
"""PyTorch baseline for rudnn-bench-attention: issue 20's cases through
torch.nn.functional.scaled_dot_product_attention, each SDPA backend forced in turn.

Prints one JSON line per (case, backend) in rudnn-bench-attention's format, "backend": "torch":

  {"op":"attention","case","b","hq","hkv","sq","skv","d","dv","causal","dtype","backend","device",
   "strategy","kernel","median_ms","min_ms","tflops","gbps","copy_gbps","peak_fraction","reps",
   "sets","gqa","torch"}

strategy: torch_flash (FlashAttention-2), torch_cudnn, torch_efficient, torch_math: the backend
forced with torch.nn.attention.sdpa_kernel. A backend that refuses the case prints
"status":"NOT_SUPPORTED" with torch's message; one that would not fit in memory (math materializes
the scores) "status":"SKIPPED". A "copy" line first: dst.copy_(src), read + write counted, the
bandwidth that peak_fraction refers to.

GQA (decode: Hq 32, Hkv 8): enable_gqa=True (torch 2.5+), "gqa":"enable_gqa"; where that is
refused, K and V repeated to Hq heads before timing, "gqa":"expanded" (the kernel then reads
Hq/Hkv times the bytes gbps counts). Causal: is_causal=True is top-left aligned in PyTorch, rudnn
bottom-right; the same mask for the causal cases here, all with Sq == Skv; decode is not causal.

tflops and gbps use rudnn-bench-attention's counts. Timing: torch.cuda.Event around each call,
3 warm-up calls, median and min of --reps (fewer, not under 10, where they would take over 5 s);
inputs rotate among at least 2 sets where they fit (more while a set is under 4x a 60 MB L2).
Stock PyTorch only (2.3+ for sdpa_kernel).
"""

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
WARMUP = 3
L2_ROTATE_BYTES = 4 * 60e6
MAX_SETS = 16
MIN_REPS = 10
STRATEGY_BUDGET_MS = 5000.0
MEMORY_SHARE = 0.85

# name, B, Hq, Hkv, Sq, Skv, D, Dv, causal: rudnn-bench-attention's table
CASES = [
    ("prefill_b4_h32_s4096_d128", 4, 32, 32, 4096, 4096, 128, 128, False),
    ("prefill_b4_h32_s4096_d128_causal", 4, 32, 32, 4096, 4096, 128, 128, True),
    ("prefill_b1_h32_s16384_d128", 1, 32, 32, 16384, 16384, 128, 128, False),
    ("prefill_b1_h32_s16384_d128_causal", 1, 32, 32, 16384, 16384, 128, 128, True),
    ("prefill_b8_h16_s2048_d64", 8, 16, 16, 2048, 2048, 64, 64, False),
    ("prefill_b8_h16_s2048_d64_causal", 8, 16, 16, 2048, 2048, 64, 64, True),
    ("decode_b64_skv8192", 64, 32, 8, 1, 8192, 128, 128, False),
    ("decode_b128_skv32768", 128, 32, 8, 1, 32768, 128, 128, False),
]
QUICK_CASES = [
    ("quick_prefill_b1_h4_s128_d64", 1, 4, 4, 128, 128, 64, 64, False),
    ("quick_prefill_b1_h4_s128_d64_causal", 1, 4, 4, 128, 128, 64, 64, True),
    ("quick_decode_b2_skv512", 2, 8, 2, 1, 512, 64, 64, False),
]
BACKENDS = [
    ("torch_flash", "FLASH_ATTENTION"),
    ("torch_cudnn", "CUDNN_ATTENTION"),
    ("torch_efficient", "EFFICIENT_ATTENTION"),
    ("torch_math", "MATH"),
]


def emit(record):
    print(json.dumps(record, separators=(",", ":")), flush=True)


def time_calls(fn, sets, reps):
    """Median and min milliseconds of fn(set) over reps calls, rotating among sets, and the
    number of calls timed: fewer (not under MIN_REPS) where reps would take over
    STRATEGY_BUDGET_MS, as in rudnn-bench-attention."""
    warmup = max(WARMUP, len(sets))
    for i in range(warmup):
        if i == warmup - 1:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
        fn(sets[i % len(sets)])
    b.record()
    torch.cuda.synchronize()
    last = a.elapsed_time(b)
    if last > 0 and reps > MIN_REPS and reps * last > STRATEGY_BUDGET_MS:
        reps = max(MIN_REPS, int(STRATEGY_BUDGET_MS / last))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn(sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(ms), min(ms), reps


def measure_copy(args, device_name):
    _, total = torch.cuda.mem_get_info()
    nbytes = (args.copy_mib << 20) if args.copy_mib else min(2 << 30, total // 8)
    nbytes &= ~4095
    src = torch.full((nbytes,), 0x5A, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    median, minimum, reps = time_calls(lambda _: dst.copy_(src), [None], args.reps)
    gbps = 2.0 * nbytes / (median * 1e-3) / 1e9
    emit({"op": "copy", "bytes": nbytes, "backend": "torch", "device": device_name,
          "median_ms": round(median, 6), "min_ms": round(minimum, 6), "gbps": round(gbps, 2),
          "copy_gbps": round(gbps, 2), "reps": reps})
    del src, dst
    torch.cuda.empty_cache()
    return gbps


def counts(case, elem):
    """rudnn-bench-attention's flops (halved when causal) and bytes (q, k, v, out once)."""
    _, b, hq, hkv, sq, skv, d, dv, causal = case
    flops = 2.0 * b * hq * sq * skv * (d + dv)
    return (flops / 2 if causal else flops), elem * (b * hq * sq * (d + dv) + b * hkv * skv * (d + dv))


def make_set(case, dtype, expand):
    """Random q, k, v in [-1, 1) (never a zero tensor), and out; K/V repeated to Hq heads when
    expand. [B, H, S, D], contiguous."""
    _, b, hq, hkv, sq, skv, d, dv, _ = case

    def rnd(*shape):
        return torch.rand(*shape, device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)

    q, k, v = rnd(b, hq, sq, d), rnd(b, hkv, skv, d), rnd(b, hkv, skv, dv)
    if expand and hq != hkv:
        k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
    return q, k, v


def set_count(set_bytes, free, reps):
    n = 2
    while n < MAX_SETS and n * set_bytes < L2_ROTATE_BYTES:
        n += 1
    n = min(n, max(reps, 1))
    while n > 1 and n * set_bytes > MEMORY_SHARE * free:
        n -= 1
    return n


def run_backend(case, strategy, backend, args, head, copy_gbps):
    """Times one forced backend on the case; prints its line."""
    name, b, hq, hkv, sq, skv, d, dv, causal = case
    dtype = DTYPES[args.dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    flops, nbytes = counts(case, elem)
    free, _ = torch.cuda.mem_get_info()
    if backend == SDPBackend.MATH:
        # the math path holds the scores and their softmax, in float32 at worst
        scores = 3.0 * b * hq * sq * skv * 4
        if scores + nbytes > MEMORY_SHARE * free:
            emit(dict(head, strategy=strategy, status="SKIPPED",
                      message="the math backend's %.0f GiB of scores do not fit" % (scores / 2**30)))
            return
    modes = ["enable_gqa", "expanded"] if hq != hkv else ["none"]
    last_error = ""
    for mode in modes:
        expand = mode == "expanded"
        set_bytes = nbytes * (hq // hkv if expand else 1)
        if set_bytes > MEMORY_SHARE * free:
            last_error = "the inputs (%s) do not fit in device memory" % mode
            continue
        sets = []
        try:
            n = set_count(set_bytes, free, args.reps)
            sets = [make_set(case, dtype, expand) for _ in range(n)]
            kw = {"is_causal": causal}
            if mode == "enable_gqa":
                kw["enable_gqa"] = True

            def call(s):
                return F.scaled_dot_product_attention(s[0], s[1], s[2], **kw)

            with sdpa_kernel([backend]):
                median, minimum, reps = time_calls(call, sets, args.reps)
        except TypeError as e:  # torch before 2.5: no enable_gqa
            last_error = str(e).split("\n")[0]
            continue
        except torch.cuda.OutOfMemoryError as e:
            last_error = "out of memory: " + str(e).split("\n")[0]
            continue
        except RuntimeError as e:  # the backend refuses the case ("No available kernel")
            last_error = " ".join(str(e).split())[:600]
            continue
        finally:
            del sets
            torch.cuda.empty_cache()
        secs = median * 1e-3
        gbps = nbytes / secs / 1e9
        emit(dict(head, strategy=strategy, kernel="sdpa." + backend.name.lower(),
                  median_ms=round(median, 6), min_ms=round(minimum, 6),
                  tflops=round(flops / secs / 1e12, 3), gbps=round(gbps, 2),
                  copy_gbps=round(copy_gbps, 2), peak_fraction=round(gbps / copy_gbps, 4),
                  reps=reps, sets=n, gqa=mode, torch=torch.__version__))
        return
    status = "SKIPPED" if "memory" in last_error else "NOT_SUPPORTED"
    emit(dict(head, strategy=strategy, status=status, message=last_error, torch=torch.__version__))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--case", default="", help="comma list of case names (default: all)")
    p.add_argument("--strategy", default="all",
                   help="comma list of %s, or all" % ", ".join(s for s, _ in BACKENDS))
    p.add_argument("--quick", action="store_true", help="the tiny cases")
    p.add_argument("--reps", type=int, default=0, help="timed calls per case (default 50, quick 5)")
    p.add_argument("--copy-mib", type=int, default=0, help="size of the reference copy in MiB")
    args = p.parse_args()
    args.reps = args.reps if args.reps > 0 else (5 if args.quick else 50)
    if not torch.cuda.is_available():
        print("torch_attention.py: no CUDA device", file=sys.stderr)
        return 1
    cases = QUICK_CASES if args.quick else CASES
    wanted = [c for c in args.case.split(",") if c]
    unknown = [c for c in wanted if c not in {case[0] for case in cases}]
    if unknown:
        p.error("unknown case(s): %s" % ", ".join(unknown))
    strategies = [s for s in args.strategy.split(",") if s]
    backends = [(s, getattr(SDPBackend, b)) for s, b in BACKENDS
                if "all" in strategies or s in strategies]
    if not backends:
        p.error("no strategy among %s" % args.strategy)
    device_name = torch.cuda.get_device_name()
    torch.manual_seed(0)
    copy_gbps = measure_copy(args, device_name)
    for case in cases:
        if wanted and case[0] not in wanted:
            continue
        name, b, hq, hkv, sq, skv, d, dv, causal = case
        head = {"op": "attention", "case": name, "b": b, "hq": hq, "hkv": hkv, "sq": sq, "skv": skv,
                "d": d, "dv": dv, "causal": causal, "dtype": args.dtype, "backend": "torch",
                "device": device_name}
        for strategy, backend in backends:
            run_backend(case, strategy, backend, args, head, copy_gbps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
