#!/usr/bin/env python3
"""Side-by-side tables of rudnn-bench-attention and bench/baselines/torch_attention.py (JSON lines).

usage: compare_attention.py RUDNN.jsonl TORCH.jsonl

A summary table (one row per case) with issue 20's targets, then one table per case with every
rudnn strategy and torch backend: ms and TFLOP/s (decode cases: GB/s and % of the copy bandwidth
measured in the same run by the same program). Ratios are speedups (> 1: rudnn faster):
  accel / FA2    torch_flash ms / the best FlashBlackboxAccelerated ms (strategy
                 flash_accelerated, or autotune when it resolved to that); target >= 1.25 on the
                 prefill cases
  best / cuDNN   torch_cudnn ms / the best rudnn ms (any strategy); target >= 0.9 on decode
A row missing a target, or lacking what its ratio needs, is marked MISS.
"""
import json
import math
import sys

FA2_TARGET = 1.25
CUDNN_DECODE_TARGET = 0.9
NAN = float("nan")


def load(path):
    """(attention rows in file order, the copy row or None)."""
    rows, copy = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("op") == "copy":
                copy = r
            elif r.get("op") == "attention":
                rows.append(r)
    return rows, copy


def timed(r):
    return r is not None and "median_ms" in r and r["median_ms"] > 0


def is_decode(r):
    return r["sq"] == 1


def fmt(x, spec):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def ratio(num_row, den_ms):
    if not timed(num_row) or not den_ms or math.isnan(den_ms):
        return NAN
    return num_row["median_ms"] / den_ms


def best(rows, pred=lambda r: True):
    ok = [r for r in rows if timed(r) and pred(r)]
    return min(ok, key=lambda r: r["median_ms"]) if ok else None


def accelerated(r):
    return r.get("strategy") == "flash_accelerated" or r.get("resolved") == "flash_accelerated"


def by_case(ours, theirs):
    """Case names in the order rudnn ran them (then torch-only ones), with each side's rows."""
    names = []
    for r in ours + theirs:
        if r["case"] not in names:
            names.append(r["case"])
    return [(n, [r for r in ours if r["case"] == n], [r for r in theirs if r["case"] == n]) for n in names]


def targets(case, ours, theirs):
    """(accel row, best rudnn row, torch_flash row, torch_cudnn row, accel/FA2, best/cuDNN, misses)."""
    t = {r["strategy"]: r for r in theirs}
    acc, top = best(ours, accelerated), best(ours)
    fa2, cudnn = t.get("torch_flash"), t.get("torch_cudnn")
    r_fa2 = ratio(fa2, acc["median_ms"] if acc else NAN)
    r_cudnn = ratio(cudnn, top["median_ms"] if top else NAN)
    decode = is_decode((ours or theirs)[0])
    misses = []
    if not decode and not r_fa2 >= FA2_TARGET:  # NaN (a side missing) misses too
        misses.append("accel/FA2 < %.2f" % FA2_TARGET if not math.isnan(r_fa2) else "no accel/FA2")
    if decode and not r_cudnn >= CUDNN_DECODE_TARGET:
        misses.append("best/cuDNN < %.2f" % CUDNN_DECODE_TARGET if not math.isnan(r_cudnn) else "no best/cuDNN")
    return acc, top, fa2, cudnn, r_fa2, r_cudnn, misses


def shape_text(r):
    s = "B %d, Hq %d" % (r["b"], r["hq"])
    if r["hkv"] != r["hq"]:
        s += ", Hkv %d" % r["hkv"]
    s += ", Sq %d, Skv %d, D %d" % (r["sq"], r["skv"], r["d"])
    if r["dv"] != r["d"]:
        s += ", Dv %d" % r["dv"]
    return s + (", causal" if r["causal"] else "") + ", " + r["dtype"]


def copy_lines(ours_copy, torch_copy):
    parts = []
    for who, c in (("rudnn", ours_copy), ("torch", torch_copy)):
        if c:
            parts.append("%s %.1f GB/s" % (who, c["gbps"]))
    return ["Device-to-device copy in the same run: " + (", ".join(parts) or "not measured") + "."]


def summary_lines(cases):
    out = ["| case | best rudnn | ms | accel ms | torch_flash ms | accel / FA2 | torch_cudnn ms | best / cuDNN "
           "| target |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, ours, theirs in cases:
        acc, top, fa2, cudnn, r_fa2, r_cudnn, misses = targets(name, ours, theirs)
        ms = lambda r: fmt(r["median_ms"], ".4f") if timed(r) else "—"  # noqa: E731
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, (top["strategy"] + (" (%s)" % top["resolved"] if top.get("resolved", top["strategy"])
                                      != top["strategy"] else "")) if top else "—",
            ms(top), ms(acc), ms(fa2), fmt(r_fa2, ".2f"), ms(cudnn), fmt(r_cudnn, ".2f"),
            "MISS: " + "; ".join(misses) if misses else "ok"))
    return out


def case_lines(name, ours, theirs):
    rows = ours + theirs
    decode = is_decode(rows[0])
    out = ["#### %s (%s)" % (name, shape_text(rows[0])), ""]
    if decode:
        out += ["| side | strategy | kernel | ms | min ms | GB/s | % of copy | note |", "|---|---|---|---|---|---|---|---|"]
    else:
        out += ["| side | strategy | kernel | ms | min ms | TFLOP/s | note |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        side = "torch" if r.get("backend") == "torch" else "rudnn"
        if not timed(r):
            note = "%s: %s" % (r.get("status", "no time"), r.get("message", "")[:160].replace("|", "/"))
            cells = ["—"] * (4 if decode else 3)
        else:
            note = "gqa " + r["gqa"] if r.get("gqa") not in (None, "none") else ""
            if r.get("resolved") not in (None, r["strategy"]):
                note = "ran " + r["resolved"]
            cells = [fmt(r["median_ms"], ".4f"), fmt(r["min_ms"], ".4f")]
            cells += ([fmt(r["gbps"], ".1f"), fmt(100 * r["peak_fraction"], ".1f")] if decode
                      else [fmt(r["tflops"], ".1f")])
        out.append("| %s | %s | %s | %s | %s |" % (side, r["strategy"], r.get("kernel", ""), " | ".join(cells), note))
    return out + [""]


def lines(ours, theirs, ours_copy=None, torch_copy=None):
    """Everything as Markdown lines; bench/results.py writes the same lines into RESULTS.md."""
    cases = by_case(ours, theirs)
    out = copy_lines(ours_copy, torch_copy) + [""]
    out += ["Targets (issue 20): FlashBlackboxAccelerated >= %.2fx FlashAttention-2 (torch_flash) on the "
            "prefill cases; decode >= %.2fx torch cuDNN. Ratios: torch ms / rudnn ms." % (FA2_TARGET, CUDNN_DECODE_TARGET),
            ""]
    out += summary_lines(cases) + [""]
    for name, o, t in cases:
        out += case_lines(name, o, t)
    while out and out[-1] == "":
        out.pop()
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    (ours, ours_copy), (theirs, torch_copy) = load(argv[1]), load(argv[2])
    if not ours and not theirs:
        print("compare_attention.py: no attention rows in %s or %s" % (argv[1], argv[2]), file=sys.stderr)
        return 1
    print("\n".join(lines(ours, theirs, ours_copy, torch_copy)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
