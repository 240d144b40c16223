#!/usr/bin/env python3
"""Issue 25's table: rudnn-bench-ep-comm (rudnn's dispatch and combine + AddRmsNorm across ranks, over
NCCL and over MPI) beside bench/baselines/torch_ep.py (NCCL's all-to-all of the same bytes, and the
layer written in PyTorch), both run with the same --bs/--k/--h/--experts on the same GPUs.

    bench/compare_ep.py RUDNN.jsonl TORCH.jsonl

Prints a markdown table: per op, rudnn's median ms over NCCL (and MPI), NCCL's all-to-all of the same
bytes, rudnn's share of that all-to-all's bandwidth (all-to-all ms / rudnn ms; the issue asks 0.80),
the same op written in PyTorch and rudnn's speed-up over it (the issue asks > 1), and the bandwidth NCCL's
all-to-all reached on the rows that cross between GPUs."""
import json
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def pick(rows, op, **match):
    for r in rows:
        if r.get("op") == op and all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def ms(r):
    return "-" if r is None else f"{r['median_ms']:.4f}"


def ratio(a, b):
    """a / b of two lines' medians, or '-'."""
    if a is None or b is None or not b["median_ms"]:
        return "-"
    return f"{a['median_ms'] / b['median_ms']:.2f}"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ours, torch = load(sys.argv[1]), load(sys.argv[2])
    first = pick(ours, "ep_dispatch", comm="nccl") or pick(ours, "ep_dispatch")
    if first is None:
        print("compare_ep.py: no ep_dispatch line in " + sys.argv[1], file=sys.stderr)
        return 1
    print(f"{first['ranks']} ranks, {first['device']}, BS {first['bs']} a rank, K {first['k']}, H {first['h']}, "
          f"{first['experts']} experts, {first['dtype']}\n")
    print("| op | rudnn NCCL ms | rudnn MPI ms | NCCL all-to-all ms (same bytes) | share of its bandwidth "
          "(target 0.80) | PyTorch ms (the same op) | rudnn speed-up (target > 1) | NCCL all-to-all GB/s between GPUs |")
    print("|---|---|---|---|---|---|---|---|")
    for op, a2a_op, torch_op in (("ep_dispatch", "nccl_all_to_all_dispatch", "torch_dispatch"),
                                 ("ep_combine", "nccl_all_to_all_combine", "torch_combine"),
                                 ("ep_layer", None, "torch_layer")):
        n, m = pick(ours, op, comm="nccl"), pick(ours, op, comm="mpi")
        t = pick(torch, torch_op)
        if a2a_op:
            a2a = pick(torch, a2a_op)
            share, gbps = ratio(a2a, n), "-" if a2a is None else f"{a2a['gbps']:.1f}"
            a2a_ms = ms(a2a)
        else:  # the layer: both all-to-alls
            d, c = pick(torch, "nccl_all_to_all_dispatch"), pick(torch, "nccl_all_to_all_combine")
            both = None if d is None or c is None else {"median_ms": d["median_ms"] + c["median_ms"]}
            share = ratio(both, n)
            a2a_ms = "-" if both is None else f"{both['median_ms']:.4f}"
            gbps = "-"
        print(f"| {op} | {ms(n)} | {ms(m)} | {a2a_ms} | {share} | {ms(t)} | {ratio(t, n)} | {gbps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
