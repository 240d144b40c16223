#!/usr/bin/env python3
"""Side-by-side table of rudnn-bench-vision and bench/baselines/torch_vision.py (JSON lines), joined by
(case, direction, layout).

usage: compare_vision.py RUDNN.jsonl TORCH.jsonl

One row per rudnn line (then any torch-only ones): rudnn's kernel (convolution: the strategy its
Autotune resolved to), both medians, the ratio torch ms / rudnn ms (> 1: rudnn faster), and rudnn's
TFLOP/s (convolution) or its GB/s as a percentage of the copy bandwidth timed in the same process
(the others). Rows without a time show their status; the messages follow the table.
"""
import json
import sys


def load(path):
    """(rows by (case, direction, layout) in file order, the copy row or None)."""
    rows, copy = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("op") == "copy":
                copy = r
            elif "case" in r:
                rows[(r["case"], r.get("direction", "forward"), r.get("layout", "nchw"))] = r
    return rows, copy


def timed(r):
    return r is not None and r.get("median_ms", 0) > 0


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


def ms(r):
    if timed(r):
        return fmt(r["median_ms"], ".4f")
    return r.get("status", "—") if r else "—"


def kernel(r):
    if not timed(r):
        return "—"
    k = r.get("kernel", "")
    return "%s (%s)" % (k, r["resolved"]) if r.get("resolved") else k


def rate(r):
    """TFLOP/s for a convolution, else % of the copy bandwidth."""
    if not timed(r):
        return "—"
    if "tflops" in r:
        return fmt(r["tflops"], ".1f") + " TFLOP/s"
    return fmt(100.0 * r["copy_fraction"] if r.get("copy_fraction") is not None else None, ".1f") + "% copy"


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    ours, ocopy = load(sys.argv[1])
    theirs, tcopy = load(sys.argv[2])
    print("## Convolution, pooling, interpolation, grid sampling, CTC: rudnn-bench-vision beside torch_vision.py\n")
    print("Device-to-device copy in the same runs: rudnn %s GB/s, torch %s GB/s. torch / rudnn: the ratio of the "
          "medians (> 1: rudnn faster). Convolution: rudnn's Autotune against cuDNN with "
          "cudnn.benchmark.\n" % (fmt(ocopy["copy_gbps"] if ocopy else None, ".1f"),
                                  fmt(tcopy["copy_gbps"] if tcopy else None, ".1f")))
    print("| case | direction | layout | dtype | rudnn kernel | rudnn ms | torch ms | torch / rudnn | "
          "rudnn TFLOP/s or % copy |")
    print("|---|---|---|---|---|---|---|---|---|")
    keys = list(ours) + [k for k in theirs if k not in ours]
    for key in keys:
        r, t = ours.get(key), theirs.get(key)
        ratio = t["median_ms"] / r["median_ms"] if timed(r) and timed(t) else None
        dtype = (r or t).get("dtype", "—")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], key[2], dtype, kernel(r), ms(r), ms(t), fmt(ratio, ".2f"), rate(r)))
    missing = [(side, key, x) for side, rows in (("rudnn", ours), ("torch", theirs)) for key, x in rows.items()
               if not timed(x)]
    if missing:
        print("\nRows without a time:\n")
        for side, key, x in missing:
            print("- %s %s %s %s: %s %s" % (side, key[0], key[1], key[2], x.get("status"),
                                             str(x.get("message", ""))[:200]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
