#!/usr/bin/env python3
"""PyTorch baselines of rudnn-bench-vision's cases (convolution, pooling, interpolation, grid sampling,
CTC), one JSON line per case, direction and layout, on the same GPU.

What a PyTorch user gets, each call named in "kernel":
  convolution      forward F.conv2d; data and weight backward torch.ops.aten.convolution_backward with
                   output_mask (True, False, False) / (False, True, False): the one call autograd
                   makes, so only the backward is timed. torch.backends.cudnn.benchmark = True before
                   any convolution: cuDNN times its algorithms per shape on the warm-up calls and keeps
                   the fastest (what a training loop gets). nhwc: x, w and dy in
                   torch.channels_last memory format (cuDNN's NHWC kernels)
  pooling          F.max_pool2d(return_indices=True) / F.avg_pool2d; backward the ATen call autograd
                   makes (aten.max_pool2d_with_indices_backward, aten.avg_pool2d_backward)
  interpolation    F.interpolate(size=..., align_corners=False); backward aten.upsample_*2d_backward
  grid sampling    F.grid_sample; backward aten.grid_sampler_2d_backward with output_mask (True, True)
  CTC              F.ctc_loss(reduction='none') and torch.autograd.grad of its loss (grad_outputs
                   ones): the loss and the gradient, as rudnn's one call computes them; PyTorch picks
                   its kernel (targets on the GPU: its native CUDA one)
The backward cases call the ATen backward ops directly rather than autograd.grad over a kept graph:
the same kernels, without the autograd engine's host time between the events.

Shapes, dtypes (bf16; CTC F32; --quick F32), layouts, case names, byte and FLOP counts and the JSON
fields are rudnn-bench-vision's (bench/vision_bench.c's header); backend "torch". Inputs: torch.rand
values in [-1, 1) (seeded; not rudnn's LCG values, which do not change the times); CTC's
log-probabilities a log_softmax, labels in 1..C-1, every input length T; the sampling grid is the
same affine warp as rudnn's (a rotation of 0.1 + 0.05 n rad, scale 1.05). Times: CUDA events around
each call after 3 warm-up calls, median and minimum of --reps (bench/baselines/torch_timing.py)."""
import argparse
import json

import torch
import torch.nn.functional as F

from torch_timing import copy_gbps, timed

# name, op, directions, both layouts, dtype, params (as bench/vision_bench.c's tables)
CONV_ALL = ("forward", "data_backward", "weight_backward")
FWD = ("forward",)
FWD_BWD = ("forward", "backward")


def conv(name, dirs, n, c, h, k, r, stride, pad, dt):
    return dict(name=name, op="conv2d", dirs=dirs, layouts=("nchw", "nhwc"), dt=dt, n=n, c=c, h=h, w=h, k=k,
                window=r, stride=stride, pad=pad)


def pool(name, mode, n, c, h, r, stride, pad, dt):
    return dict(name=name, op="pool2d", dirs=FWD_BWD, layouts=("nchw",), dt=dt, n=n, c=c, h=h, w=h, window=r,
                stride=stride, pad=pad, mode=mode)


def interp(name, mode, n, c, h, o, dt):
    return dict(name=name, op="interpolate2d", dirs=FWD_BWD, layouts=("nchw",), dt=dt, n=n, c=c, h=h, w=h, oh=o,
                ow=o, mode=mode)


def grid(name, mode, n, c, h, o, dt):
    return dict(name=name, op="grid_sample2d", dirs=FWD_BWD, layouts=("nchw",), dt=dt, n=n, c=c, h=h, w=h, oh=o,
                ow=o, mode=mode)


def ctc(name, t, n, c, s):
    return dict(name=name, op="ctc_loss", dirs=("forward_backward",), layouts=("tnc",), dt=torch.float32, n=n, c=c,
                t=t, s=s)


BF16, F32 = torch.bfloat16, torch.float32
FULL_CASES = [
    conv("conv_56_64_3x3", CONV_ALL, 32, 64, 56, 64, 3, 1, 1, BF16),
    conv("conv_56_256_1x1", FWD, 32, 256, 56, 64, 1, 1, 0, BF16),
    conv("conv_28_128_3x3", FWD, 32, 128, 28, 128, 3, 1, 1, BF16),
    conv("conv_14_256_3x3_s2", FWD, 32, 256, 28, 256, 3, 2, 1, BF16),
    conv("conv_7_512_3x3", FWD, 32, 512, 7, 512, 3, 1, 1, BF16),
    pool("maxpool_3x3_s2", "max", 32, 64, 112, 3, 2, 1, BF16),
    pool("avgpool_2x2_s2", "avg", 32, 256, 56, 2, 2, 0, BF16),
    interp("bilinear_up2", "bilinear", 8, 256, 64, 128, BF16),
    interp("nearest_up2", "nearest", 8, 256, 64, 128, BF16),
    interp("bicubic_up2", "bicubic", 8, 256, 64, 128, BF16),
    grid("bilinear_zeros", "bilinear", 8, 64, 128, 128, BF16),
    ctc("ctc_t256_n32_c64_s50", 256, 32, 64, 50),
]
QUICK_CASES = [
    conv("quick_conv_8_16_3x3", CONV_ALL, 2, 16, 8, 16, 3, 1, 1, F32),
    conv("quick_conv_4_16_3x3_s2", FWD, 2, 16, 8, 32, 3, 2, 1, F32),
    pool("quick_maxpool_3x3_s2", "max", 2, 8, 16, 3, 2, 1, F32),
    pool("quick_avgpool_2x2_s2", "avg", 2, 8, 16, 2, 2, 0, F32),
    interp("quick_bilinear_up2", "bilinear", 2, 8, 8, 16, F32),
    interp("quick_nearest_up2", "nearest", 2, 8, 8, 16, F32),
    interp("quick_bicubic_up2", "bicubic", 2, 8, 8, 16, F32),
    grid("quick_bilinear_zeros", "bilinear", 2, 8, 16, 16, F32),
    ctc("quick_ctc_t32_n4_c16_s8", 32, 4, 16, 8),
]
DTYPE_NAMES = {BF16: "bf16", F32: "f32", torch.float16: "f16"}


def describe(c):
    """bench/vision_bench.c's "shape" string."""
    if c["op"] == "conv2d":
        return "N%d C%d H%d W%d K%d R%d stride%d pad%d" % (c["n"], c["c"], c["h"], c["w"], c["k"], c["window"],
                                                          c["stride"], c["pad"])
    if c["op"] == "pool2d":
        return "N%d C%d H%d W%d window%d stride%d pad%d" % (c["n"], c["c"], c["h"], c["w"], c["window"], c["stride"],
                                                            c["pad"])
    if c["op"] == "ctc_loss":
        return "T%d N%d C%d S%d" % (c["t"], c["n"], c["c"], c["s"])
    return "N%d C%d H%d W%d -> %dx%d" % (c["n"], c["c"], c["h"], c["w"], c["oh"], c["ow"])


def emit(**kv):
    print(json.dumps(kv), flush=True)


class Case:
    """One case's inputs (made once, outside the timing) and its calls by (direction, layout)."""

    def __init__(self, c, gen):
        self.c = c
        self.gen = gen
        self.dev = torch.device("cuda")

    def uniform(self, *shape, dtype=None):
        x = torch.rand(shape, generator=self.gen, device=self.dev) * 2 - 1
        return x.to(dtype or self.c["dt"])

    # Each returns (kernel, fn, and flops or bytes) for one direction and layout.

    def conv2d(self, direction, layout):
        c = self.c
        fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
        x = self.uniform(c["n"], c["c"], c["h"], c["w"]).contiguous(memory_format=fmt)
        w = self.uniform(c["k"], c["c"], c["window"], c["window"]).contiguous(memory_format=fmt)
        stride, pad = (c["stride"],) * 2, (c["pad"],) * 2
        y = F.conv2d(x, w, None, stride, pad)
        p, q = y.shape[2], y.shape[3]
        flops = 2.0 * c["n"] * c["k"] * c["c"] * c["window"] ** 2 * p * q
        if direction == "forward":
            return "F.conv2d (cuDNN)", lambda: F.conv2d(x, w, None, stride, pad), flops
        dy = self.uniform(*y.shape).contiguous(memory_format=fmt)
        mask = [True, False, False] if direction == "data_backward" else [False, True, False]

        def bwd():
            return torch.ops.aten.convolution_backward.default(dy, x, w, None, stride, pad, (1, 1), False, (0, 0), 1,
                                                               mask)

        return "aten.convolution_backward " + ("input" if mask[0] else "weight"), bwd, flops

    def pool2d(self, direction, layout):
        c = self.c
        x = self.uniform(c["n"], c["c"], c["h"], c["w"])
        r, s, p = c["window"], c["stride"], c["pad"]
        es = x.element_size()
        if c["mode"] == "max":
            y, idx = F.max_pool2d(x, r, s, p, return_indices=True)
            if direction == "forward":
                return ("F.max_pool2d", lambda: F.max_pool2d(x, r, s, p, return_indices=True),
                        (x.numel() + y.numel()) * es + idx.numel() * 8)
            dy = self.uniform(*y.shape)
            # ATen's backward reads dy and the indices (rudnn's reads x instead of indices)
            aten_bwd = torch.ops.aten.max_pool2d_with_indices_backward.default
            return ("aten.max_pool2d_with_indices_backward",
                    lambda: aten_bwd(dy, x, [r, r], [s, s], [p, p], [1, 1], False, idx),
                    (dy.numel() + x.numel()) * es + idx.numel() * 8)
        y = F.avg_pool2d(x, r, s, p)
        if direction == "forward":
            return "F.avg_pool2d", lambda: F.avg_pool2d(x, r, s, p), (x.numel() + y.numel()) * es
        dy = self.uniform(*y.shape)
        return ("aten.avg_pool2d_backward",
                lambda: torch.ops.aten.avg_pool2d_backward.default(dy, x, [r, r], [s, s], [p, p], False, True, None),
                (dy.numel() + x.numel()) * es)

    def interpolate2d(self, direction, layout):
        c = self.c
        mode, size = c["mode"], (c["oh"], c["ow"])
        corners = None if mode == "nearest" else False
        x = self.uniform(c["n"], c["c"], c["h"], c["w"])
        es = x.element_size()
        nbytes = (x.numel() + c["n"] * c["c"] * c["oh"] * c["ow"]) * es
        if direction == "forward":
            return ("F.interpolate (%s)" % mode, lambda: F.interpolate(x, size=size, mode=mode, align_corners=corners),
                    nbytes)
        dy = self.uniform(c["n"], c["c"], c["oh"], c["ow"])
        in_size = list(x.shape)
        if mode == "nearest":
            fn = lambda: torch.ops.aten.upsample_nearest2d_backward.default(dy, list(size), in_size)  # noqa: E731
        else:
            op = getattr(torch.ops.aten, "upsample_%s2d_backward" % mode).default
            fn = lambda: op(dy, list(size), in_size, False)  # noqa: E731
        return "aten.upsample_%s2d_backward" % mode, fn, nbytes

    def grid_sample2d(self, direction, layout):
        c = self.c
        x = self.uniform(c["n"], c["c"], c["h"], c["w"])
        g = affine_grid(c["n"], c["oh"], c["ow"], self.dev).to(c["dt"])
        es = x.element_size()
        ny = c["n"] * c["c"] * c["oh"] * c["ow"]
        if direction == "forward":
            return ("F.grid_sample", lambda: F.grid_sample(x, g, "bilinear", "zeros", align_corners=False),
                    (x.numel() + g.numel() + ny) * es)
        dy = self.uniform(c["n"], c["c"], c["oh"], c["ow"])
        # interpolation_mode 0 = bilinear, padding_mode 0 = zeros; output_mask: dx and dgrid
        return ("aten.grid_sampler_2d_backward",
                lambda: torch.ops.aten.grid_sampler_2d_backward.default(dy, x, g, 0, 0, False, [True, True]),
                (2 * x.numel() + 2 * g.numel() + ny) * es)

    def ctc_loss(self, direction, layout):
        c = self.c
        T, N, C, S = c["t"], c["n"], c["c"], c["s"]
        logits = torch.rand((T, N, C), generator=self.gen, device=self.dev) * 6 - 3
        lp = logits.log_softmax(-1).to(c["dt"]).requires_grad_()
        targets = torch.randint(1, C, (N, S), generator=self.gen, device=self.dev, dtype=torch.int32)
        in_len, tg_len = (T,) * N, (S,) * N
        ones = torch.ones(N, device=self.dev)

        def fn():
            with torch.enable_grad():
                loss = F.ctc_loss(lp, targets, in_len, tg_len, blank=0, reduction="none", zero_infinity=False)
                return torch.autograd.grad(loss, lp, ones)

        es = lp.element_size()
        return "F.ctc_loss + autograd.grad", fn, 2 * lp.numel() * es + targets.numel() * 4 + N * 4


def affine_grid(n, oh, ow, dev):
    """bench/vision_bench.c's fill_grid: output pixel centres in [-1, 1] rotated by 0.1 + 0.05 i rad
    (image i) and scaled by 1.05, [N, Ho, Wo, 2] (x along W, y along H), computed in float64."""
    f = torch.float64
    u = (2 * torch.arange(ow, dtype=f, device=dev) + 1) / ow - 1
    v = (2 * torch.arange(oh, dtype=f, device=dev) + 1) / oh - 1
    theta = 0.1 + 0.05 * torch.arange(n, dtype=f, device=dev)
    cs, sn = (1.05 * theta.cos())[:, None, None], (1.05 * theta.sin())[:, None, None]
    uu, vv = u[None, None, :], v[None, :, None]
    return torch.stack((cs * uu - sn * vv, sn * uu + cs * vv), dim=-1).float()


def run_case(c, reps, copy, device_name):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    case = Case(c, gen)
    for layout in c["layouts"]:
        for direction in c["dirs"]:
            head = dict(op=c["op"], case=c["name"], direction=direction, shape=describe(c), dtype=DTYPE_NAMES[c["dt"]],
                        layout=layout, backend="torch", device=device_name)
            try:
                kernel, fn, count = getattr(case, c["op"])(direction, layout)
                med, mn = timed(fn, reps)
            except (RuntimeError, NotImplementedError) as e:  # a call torch refuses (a dtype, memory)
                emit(**head, status="FAILED", message=str(e)[:300])
                continue
            secs = med * 1e-3
            rec = dict(head, kernel=kernel, median_ms=med, min_ms=mn)
            if c["op"] == "conv2d":
                rec.update(strategy="cudnn.benchmark", flops=count, tflops=count / secs / 1e12)
            else:
                gbps = count / secs / 1e9
                rec.update(bytes=count, gbps=gbps, copy_gbps=copy, copy_fraction=gbps / copy)
            rec["reps"] = reps
            emit(**rec)
            del fn
    del case
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--case", help="comma-separated case names (default: all)")
    ap.add_argument("--quick", action="store_true", help="the tiny F32 shapes of rudnn-bench-vision --quick")
    o = ap.parse_args()
    if not 1 <= o.reps <= 1024:
        ap.error("--reps must be 1..1024")
    cases = QUICK_CASES if o.quick else FULL_CASES
    wanted = o.case.split(",") if o.case else None
    if wanted:
        unknown = [w for w in wanted if w not in {c["name"] for c in cases}]
        if unknown:
            ap.error("unknown case(s) %s%s" % (", ".join(unknown), " (with --quick)" if o.quick else ""))
    # cuDNN's autotuned best for every convolution shape (tuned on the warm-up calls), and no TF32 in
    # the F32 quick cases: the C bench computes them in F32
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    name = torch.cuda.get_device_name()
    copy_bytes = (16 << 20) if o.quick else (1 << 30)
    copy = copy_gbps(o.reps, copy_bytes)
    emit(op="copy", bytes=copy_bytes, backend="torch", device=name, gbps=copy, copy_gbps=copy, reps=o.reps)
    with torch.no_grad():
        for c in cases:
            if wanted is None or c["name"] in wanted:
                run_case(c, o.reps, copy, name)


if __name__ == "__main__":
    main()
