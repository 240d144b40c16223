#!/usr/bin/env python3
"""Side-by-side table of rudnn-bench-moe and bench/baselines/torch_moe.py (JSON lines).

usage: compare_moe.py RUDNN.jsonl TORCH.jsonl [RUDNN_CUBLAS.jsonl]
ratio = torch median / rudnn median (> 1: rudnn faster). Rows match on (op, case); the MoE
forward also against the baseline's cuBLAS-per-expert form (op moe_forward_cublas) and, with the
third file (rudnn-bench-moe run with --kernel moe.cublas_grouped), against rudnn's own forward with
its expert GEMMs through cuBLAS's grouped GEMM instead of our kernels.
Routing rows also give the back-to-back time per call (b2b) and rudnn's host time per call."""
import json
import sys


def load(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("{"):
                r = json.loads(line)
                out[(r["op"], r["case"])] = r
    return out


def lines(ours, torch, cublas):
    """Both tables (forward and routing rows; routing split per call / back to back / host) as
    Markdown lines; bench/results.py writes the same lines into RESULTS.md's MoE section."""
    out = ["| op | case | strategy | ours ms | torch ms | ratio | torch cuBLAS per expert ms | ratio "
           "| rudnn cuBLAS grouped ms | ratio | our TFLOP/s | our weight GB/s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(ours):
        o, t = ours[key], torch.get(key)
        tm = t["median_ms"] if t else float("nan")
        c = torch.get(("moe_forward_cublas", key[1])) if key[0] == "moe_forward" else None
        cm = c["median_ms"] if c else float("nan")
        g = cublas.get(key) if key[0] == "moe_forward" else None
        gm = g["median_ms"] if g else float("nan")
        out.append(f"| {key[0]} | {key[1]} | {o['strategy']} | {o['median_ms']:.4f} | {tm:.4f} "
                   f"| {tm / o['median_ms']:.2f} | {cm:.4f} | {cm / o['median_ms']:.2f} | {gm:.4f} "
                   f"| {gm / o['median_ms']:.2f} | {o.get('tflops', 0):.1f} "
                   f"| {o.get('weight_gbps', 0):.1f} |")
    routes = [k for k in sorted(ours) if "b2b_ms" in ours[k]]
    if routes:
        out.append("")
        out.append("| op | case | ours per call us | ours back to back us | ours host us | torch per call us "
                   "| torch back to back us |")
        out.append("|---|---|---|---|---|---|---|")
        for key in routes:
            o, t = ours[key], torch.get(key, {})
            tm, tb = t.get("median_ms", float("nan")), t.get("b2b_ms", float("nan"))
            out.append(f"| {key[0]} | {key[1]} | {o['median_ms'] * 1e3:.1f} | {o['b2b_ms'] * 1e3:.1f} "
                       f"| {o.get('host_us', float('nan')):.1f} | {tm * 1e3:.1f} | {tb * 1e3:.1f} |")
    return out


def main(argv):
    ours, torch = load(argv[1]), load(argv[2])
    cublas = load(argv[3]) if len(argv) > 3 else {}
    print("\n".join(lines(ours, torch, cublas)))


if __name__ == "__main__":
    main(sys.argv)
