#!/usr/bin/env python3
"""The table of a tools/gpu-ab.sh run: per case, each variant's median ms by round, the ratio of
the medians over rounds (each variant against the first), and the first variant's spread.

    tools/ab_table.py ab.jsonl [--base NAME]
"""
import argparse
import collections
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--base", help="the variant the others are compared with (default: the first seen)")
    args = ap.parse_args()
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))
    variants = []
    with open(args.jsonl) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "median_ms" not in r:
                continue
            key = (r.get("op", "?"), "x".join(str(d) for d in r.get("shape", [])) or r.get("case", "?"),
                   r.get("dtype", "?"))
            runs[key][r["variant"]][r["round"]] = r["median_ms"]
            if r["variant"] not in variants:
                variants.append(r["variant"])
    base = args.base or variants[0]
    others = [v for v in variants if v != base]
    head = ["op", "shape", "dtype", f"{base} ms (rounds)"] + [f"{v} ms (rounds)" for v in others]
    head += [f"{v} / {base} (median)" for v in others] + [f"{base} spread"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in sorted(runs):
        per = runs[key]
        if base not in per:
            continue
        cells = list(key)
        med = {}
        for v in [base] + others:
            ms = [per.get(v, {}).get(r) for r in sorted(per.get(v, {}))]
            cells.append(" / ".join(f"{m:.4f}" for m in ms) if ms else "-")
            med[v] = statistics.median(ms) if ms else None
        for v in others:
            cells.append(f"{med[v] / med[base]:.3f}" if med[v] and med[base] else "-")
        b = list(per[base].values())
        cells.append(f"{(max(b) - min(b)) / min(b) * 100:.1f}%")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
