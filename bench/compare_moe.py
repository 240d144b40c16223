#!/usr/bin/env python3
"""Side-by-side table of rudnn-bench-moe and bench/baselines/torch_moe.py (JSON lines).

usage: compare_moe.py RUDNN.jsonl TORCH.jsonl
ratio = torch median / rudnn median (> 1: rudnn faster). Rows match on (op, case)."""
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


ours, torch = load(sys.argv[1]), load(sys.argv[2])
print("| op | case | strategy | ours ms | torch ms | ratio | our TFLOP/s | our weight GB/s |")
print("|---|---|---|---|---|---|---|---|")
for key in sorted(ours):
    o, t = ours[key], torch.get(key)
    tm = t["median_ms"] if t else float("nan")
    print(f"| {key[0]} | {key[1]} | {o['strategy']} | {o['median_ms']:.4f} | {tm:.4f} | {tm / o['median_ms']:.2f} "
          f"| {o.get('tflops', 0):.1f} | {o.get('weight_gbps', 0):.1f} |")
