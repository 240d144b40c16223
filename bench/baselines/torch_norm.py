#!/usr/bin/env python3
"""PyTorch baseline for the rudnn normalization family, run on the same GPU in the same session.

Prints one JSON line per case in rudnn-bench's format, with "backend": "torch":

  {"op","shape":[R,C],"dtype","backend":"torch","device","strategy","median_ms","min_ms",
   "gbps","tflops","peak_fraction","copy_gbps","reps","buffers"}

What is timed (what a PyTorch user would write):
  rms_norm      F.rms_norm(x, (C,), weight, eps)
  layer_norm    F.layer_norm(x, (C,), weight, bias, eps)
  softmax       torch.softmax(x, dim=-1)
  add_rms_norm  x = a + r; y = F.rms_norm(x, ...): the unfused eager baseline
                (strategy "eager"); with --compile also torch.compile of that same
                function (strategy "torch.compile"), if it compiles within the budget.
  copy          dst.copy_(src) of min(2 GiB, memory/8) bytes (read + write counted),
                the device-to-device bandwidth that peak_fraction refers to.

Weights: rudnn takes gamma/beta in F32, but PyTorch's fused norm kernels want the weight in
the input dtype (a float32 weight with a bf16 input makes it upcast the whole tensor, which is
not what a user runs), so the weight and bias here are in the input dtype. GB/s uses exactly
rudnn-bench's byte count (F32 gamma/beta, F32 rstd for add_rms_norm) so the two columns are
comparable; the difference is C * 2 bytes, negligible at these shapes.

Timing: torch.cuda.Event around each call, 3 warm-up calls, median and min of --reps; inputs
rotate among several independent sets when one set is smaller than 4x a 60 MB L2.
"""

import argparse
import importlib
import json
import math
import signal
import statistics
import sys
import time

import torch
import torch.nn.functional as F

OPS = ("rms_norm", "layer_norm", "add_rms_norm", "softmax")
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
DEFAULT_SHAPES = "16384x8192,4096x65536,65536x1024"
QUICK_SHAPES = "64x1024,8x4097"
FLOPS_PER_ELEMENT = {"rms_norm": 4.0, "layer_norm": 8.0, "add_rms_norm": 5.0, "softmax": 5.0}
WARMUP = 3
L2_ROTATE_BYTES = 4 * 60e6
MAX_SETS = 64
EPS = 1e-5


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        r, _, c = item.lower().partition("x")
        shapes.append((int(r), int(c)))
    return shapes


def time_calls(fn, sets, reps):
    """Median and min milliseconds of fn(set) over reps calls, rotating among sets."""
    for i in range(WARMUP):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn(sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(ms), min(ms)


def emit(record):
    print(json.dumps(record, separators=(",", ":")), flush=True)


def measure_copy(args, device_name):
    free, total = torch.cuda.mem_get_info()
    nbytes = min(2 << 30, total // 8)
    if args.copy_mib:
        nbytes = args.copy_mib << 20
    nbytes &= ~4095
    src = torch.full((nbytes,), 0x5A, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    median, minimum = time_calls(lambda _: dst.copy_(src), [None], args.reps)
    gbps = 2.0 * nbytes / (median * 1e-3) / 1e9
    emit({"op": "copy", "shape": [nbytes], "dtype": "u8", "backend": "torch",
          "device": device_name, "strategy": "copy_", "median_ms": round(median, 6),
          "min_ms": round(minimum, 6), "gbps": round(gbps, 2), "tflops": 0,
          "peak_fraction": 1, "copy_gbps": round(gbps, 2), "reps": args.reps, "buffers": 1})
    del src, dst
    torch.cuda.empty_cache()
    return gbps


def minimal_bytes(op, rows, cols, elem):
    """The same count as rudnn-bench: inputs read once, outputs written once, F32 params."""
    t = rows * cols * elem
    if op == "rms_norm":
        return 2 * t + cols * 4
    if op == "layer_norm":
        return 2 * t + 2 * cols * 4
    if op == "add_rms_norm":
        return 4 * t + cols * 4 + rows * 4
    return 2 * t  # softmax


def add_rms_norm_eager(a, r, w, eps):
    x = a + r
    return F.rms_norm(x, (x.shape[-1],), w, eps), x


class CompileTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CompileTimeout()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--op", default=",".join(OPS))
    p.add_argument("--dtype", default="f32,f16,bf16")
    p.add_argument("--shape", default=None, help="RxC[,RxC] (default %s)" % DEFAULT_SHAPES)
    p.add_argument("--quick", action="store_true", help="tiny shapes %s" % QUICK_SHAPES)
    p.add_argument("--reps", type=int, default=None, help="timed calls per case (default 50, 5 with --quick)")
    p.add_argument("--copy-mib", type=int, default=0, help="size of the reference copy in MiB")
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile of the add + rms_norm function")
    p.add_argument("--compile-budget", type=float, default=240.0,
                   help="seconds of compilation allowed in total; later cases are skipped")
    args = p.parse_args()

    if not torch.cuda.is_available():
        print("torch_norm.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    ops = [o for o in args.op.split(",") if o]
    for o in ops:
        if o not in OPS:
            p.error("unknown op %r" % o)
    dtypes = [d for d in args.dtype.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            p.error("unknown dtype %r" % d)
    shapes = parse_shapes(args.shape or (QUICK_SHAPES if args.quick else DEFAULT_SHAPES))
    if args.reps is None:
        args.reps = 5 if args.quick else 50

    device_name = torch.cuda.get_device_name()
    print("torch_norm.py: torch %s, %s" % (torch.__version__, device_name), file=sys.stderr)
    copy_gbps = measure_copy(args, device_name)
    compiled = None
    if args.compile:
        dynamo = importlib.import_module("torch._dynamo")
        # One static kernel per (shape, dtype), as a user with fixed shapes would get; the
        # default cache limit (8) is below the 9 default cases and would fall back to eager.
        for knob in ("cache_size_limit", "recompile_limit"):
            if hasattr(dynamo.config, knob):
                setattr(dynamo.config, knob, 64)
        compiled = torch.compile(add_rms_norm_eager, dynamic=False)
    compile_left = args.compile_budget
    _, total_mem = torch.cuda.mem_get_info()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(12345)

    for rows, cols in shapes:
        for dname in dtypes:
            dt = DTYPES[dname]
            elem = torch.tensor([], dtype=dt).element_size()
            t_bytes = rows * cols * elem
            w = (torch.rand(cols, device="cuda", generator=gen) + 0.5).to(dt)
            b = ((torch.rand(cols, device="cuda", generator=gen) - 0.5) * 0.5).to(dt)
            for op in ops:
                n_tensors = 4 if op == "add_rms_norm" else 2
                set_bytes = n_tensors * t_bytes
                sets_n = 1
                if set_bytes < L2_ROTATE_BYTES:
                    sets_n = min(MAX_SETS, int(L2_ROTATE_BYTES / set_bytes) + 1)
                budget = 0.85 * total_mem
                while sets_n > 1 and sets_n * set_bytes > budget:
                    sets_n -= 1
                base = {"op": op, "shape": [rows, cols], "dtype": dname, "backend": "torch",
                        "device": device_name}
                if set_bytes > budget:
                    emit(dict(base, strategy="eager", skipped="does not fit in device memory"))
                    continue

                # Inputs only: PyTorch allocates the outputs itself (from its caching
                # allocator), as a user's call would.
                def rand_input(lo, hi):
                    t = torch.rand(rows, cols, device="cuda", generator=gen, dtype=torch.float32)
                    t = t.mul_(hi - lo).add_(lo)
                    t[t == 0] = 0.5  # never exact zeros, as in rudnn-bench
                    return t.to(dt)

                if op == "add_rms_norm":
                    sets = [(rand_input(-2.0, 2.0), rand_input(-1.0, 1.0)) for _ in range(sets_n)]
                else:
                    sets = [rand_input(-2.0, 2.0) for _ in range(sets_n)]

                variants = []
                if op == "rms_norm":
                    variants.append(("eager", lambda x: F.rms_norm(x, (cols,), w, EPS)))
                elif op == "layer_norm":
                    variants.append(("eager", lambda x: F.layer_norm(x, (cols,), w, b, EPS)))
                elif op == "softmax":
                    variants.append(("eager", lambda x: torch.softmax(x, dim=-1)))
                else:
                    variants.append(("eager", lambda s: add_rms_norm_eager(s[0], s[1], w, EPS)))
                    if compiled is not None:
                        variants.append(("torch.compile",
                                         lambda s: compiled(s[0], s[1], w, EPS)))

                for strategy, fn in variants:
                    if strategy == "torch.compile":
                        if compile_left <= 0:
                            emit(dict(base, strategy=strategy, skipped="compile budget spent"))
                            continue
                        t0 = time.monotonic()
                        old = signal.signal(signal.SIGALRM, _alarm)
                        signal.alarm(max(1, int(math.ceil(compile_left))))
                        try:
                            fn(sets[0])
                            torch.cuda.synchronize()
                        except CompileTimeout:
                            emit(dict(base, strategy=strategy, skipped="compile exceeded budget"))
                            compile_left = 0
                            continue
                        except Exception as e:  # noqa: BLE001 - report, keep benchmarking
                            emit(dict(base, strategy=strategy,
                                      skipped="compile failed: %s" % str(e).splitlines()[0][:300]))
                            continue
                        finally:
                            signal.alarm(0)
                            signal.signal(signal.SIGALRM, old)
                            compile_left -= time.monotonic() - t0
                    median, minimum = time_calls(fn, sets, args.reps)
                    secs = median * 1e-3
                    gbps = minimal_bytes(op, rows, cols, elem) / secs / 1e9
                    tflops = FLOPS_PER_ELEMENT[op] * rows * cols / secs / 1e12
                    emit(dict(base, strategy=strategy, median_ms=round(median, 6),
                              min_ms=round(minimum, 6), gbps=round(gbps, 2),
                              tflops=round(tflops, 4), peak_fraction=round(gbps / copy_gbps, 4),
                              copy_gbps=round(copy_gbps, 2), reps=args.reps, buffers=sets_n))
                del sets
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
