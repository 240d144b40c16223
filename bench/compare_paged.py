#!/usr/bin/env python3
"""Side-by-side tables of rudnn-bench-paged and bench/baselines/torch_paged.py (JSON lines), joined by case.

usage: compare_paged.py RUDNN.jsonl TORCH.jsonl

Three tables (decode, prefill, MLA decode) with issue 24's targets. Ratios are speedups, torch ms /
rudnn ms (> 1: rudnn faster); torch's ms are its dense kernel alone over pages gathered beforehand,
the gather's own time in its column. % copy: a rudnn row's GB/s over the copy timed in its own
process (the suite runs each case alone; what issue 24's targets read), torch's over rudnn's last; % size copy: over a copy of the case's own byte count timed beside it.
  decode    copy fraction >= 0.95 where the bytes moved exceed 256 MiB; >= 0.25 at B 1, KV 2k
  prefill   TFLOP/s >= 1.25x FlashAttention-2's (torch_flash over the gathered pages, same run; the
            issue names FA2's dense figures of issue 20, bench/RESULTS.md's attention table)
  MLA       H 16: copy fraction >= 0.80; H 128: >= 400 TFLOP/s
A row missing its target, or without a time, is marked MISS.
"""
import json
import sys

MIB = 1 << 20


def load(path):
    """(rows by case, with torch's several strategies in a list; the copy row or None)."""
    rows, copy = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("op") == "copy":
                copy = r
            elif "case" in r:
                rows.setdefault(r["case"], []).append(r)
    return rows, copy


def timed(r):
    return r is not None and r.get("median_ms", 0) > 0


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


def ms(r):
    return fmt(r["median_ms"], ".4f") if timed(r) else r.get("status", "—") if r else "—"


def speedup(theirs, ours):
    return fmt(theirs["median_ms"] / ours["median_ms"], ".2f") if timed(theirs) and timed(ours) else "—"


def pct(gbps, copy):
    return fmt(100.0 * gbps / copy, ".1f") if gbps is not None and copy else "—"


def own_pct(r, key="copy_fraction"):
    """% of the copy timed in the row's own process (each case may run in a process of its own)."""
    return fmt(100.0 * r[key] if timed(r) and r.get(key) is not None else None, ".1f")


def size_pct(r):
    """% of the size-matched copy (null where rudnn-bench-paged had no room for it)."""
    f = r.get("size_copy_fraction") if timed(r) else None
    return fmt(100.0 * f if f is not None else None, ".1f")


def strategy(rows, name):
    return next((r for r in rows if r.get("strategy") == name), None)


def note(r):
    """The reason of a row without a time."""
    return "%s: %s" % (r.get("status"), r.get("message", "")) if r and not timed(r) else ""


def decode_target(r):
    if r.get("status") == "SKIPPED":
        return "skipped"
    if not timed(r):
        return "MISS (%s)" % r.get("status")
    if r["bytes"] > 256 * MIB:
        want = 0.95
    elif r["sequences"] == 1 and r["max_kv"] == 2048:
        want = 0.25
    else:
        return "—"
    return "ok" if r["copy_fraction"] >= want else "MISS: < %.0f%% of copy" % (100 * want)


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    ours, ocopy = load(sys.argv[1])
    theirs, tcopy = load(sys.argv[2])
    copy = ocopy["copy_gbps"] if ocopy else None
    print("## Paged attention and MLA (issue 24): rudnn-bench-paged beside torch_paged.py\n")
    print("Device-to-device copy in the same run: rudnn %s GB/s, torch %s GB/s. Ratios: torch ms / rudnn ms "
          "(torch: the dense kernel over pages gathered beforehand; the gather's own time in its column). "
          "%% copy: GB/s over the copy timed in the same process (torch: over rudnn's last); %% size copy: over a copy of the case's own bytes.\n" % (
              fmt(copy, ".1f"), fmt(tcopy["copy_gbps"] if tcopy else None, ".1f")))
    kinds = {"decode": [], "prefill": [], "mla_decode": []}
    for case, rows in ours.items():
        kinds.setdefault(rows[0].get("kind"), []).append((case, rows[0], theirs.get(case, [])))

    print("### Decode (Hq 32, Hkv 8, D 128, bf16, one query per sequence, causal)\n")
    print("| case | MiB moved | rudnn kernel | splits | rudnn ms | GB/s | % copy | % size copy | cuDNN ms | "
          "cuDNN % copy | cuDNN / rudnn | FA2 ms | FA2 / rudnn | gather ms | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, r, t in kinds["decode"]:
        cu, fa = strategy(t, "torch_cudnn"), strategy(t, "torch_flash")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            case, fmt(r["bytes"] / MIB, ".0f") if timed(r) else "—", r.get("kernel", note(r)), r.get("splits", "—"),
            ms(r), fmt(r.get("gbps"), ".1f"), own_pct(r), size_pct(r),
            ms(cu), pct(cu.get("gbps") if timed(cu) else None, copy), speedup(cu, r), ms(fa), speedup(fa, r),
            fmt(cu["gather_ms"], ".4f") if timed(cu) else "—", decode_target(r)))
    graphs = [(case, r) for case, r, _ in kinds["decode"] if timed(r) and r.get("graph_ms")]
    if graphs:
        print("\nThe same calls replayed from a CUDA graph of 32 (launch-bound calls only, `graph_ms`): " + "; ".join(
            "%s %s ms, %s%% of copy" % (case, fmt(r["graph_ms"], ".4f"), own_pct(r, "graph_copy_fraction"))
            for case, r in graphs) + ".")

    print("\n### Prefill (varlen, 16384 tokens, Hq 32, Hkv 8, D 128, page 16, bf16, causal, fresh histories)\n")
    print("| case | rudnn kernel | rudnn ms | TFLOP/s | FA2 ms | FA2 TFLOP/s | rudnn TFLOP/s / FA2's | cuDNN ms | "
          "cuDNN TFLOP/s | cuDNN / rudnn | gather ms | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, r, t in kinds["prefill"]:
        cu, fa = strategy(t, "torch_cudnn"), strategy(t, "torch_flash")
        x = r["tflops"] / fa["tflops"] if timed(r) and timed(fa) else None
        target = "MISS (no time)" if x is None else "ok" if x >= 1.25 else "MISS: < 1.25x FA2"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            case, r.get("kernel", note(r)), ms(r), fmt(r.get("tflops"), ".1f"), ms(fa),
            fmt(fa["tflops"] if timed(fa) else None, ".1f"), fmt(x, ".2f"), ms(cu),
            fmt(cu["tflops"] if timed(cu) else None, ".1f"), speedup(cu, r),
            fmt(fa["gather_ms"], ".4f") if timed(fa) else "—", target))

    print("\n### MLA decode (R 512, P 64, page 64, KV 8192, bf16, causal)\n")
    print("| case | rudnn kernel | splits | rudnn ms | TFLOP/s | GB/s | % copy | % size copy | best torch | "
          "torch ms | torch / rudnn | gather ms | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, r, t in kinds["mla_decode"]:
        ok = timed(r)
        done = [x for x in t if timed(x)]
        b = min(done, key=lambda x: x["median_ms"]) if done else None
        if not ok:
            target = "MISS (%s)" % r.get("status")
        elif r["h"] <= 16:
            target = "ok" if r["copy_fraction"] >= 0.80 else "MISS: < 80% of copy"
        else:
            target = "ok" if r["tflops"] >= 400 else "MISS: < 400 TFLOP/s"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            case, r.get("kernel", note(r)), r.get("splits", "—"), ms(r), fmt(r.get("tflops"), ".1f"),
            fmt(r.get("gbps"), ".1f"), own_pct(r), size_pct(r), b["strategy"] if b else "—", ms(b),
            speedup(b, r), fmt(b["gather_ms"], ".4f") if b else "—", target))
    refused = [(case, x) for case, rows in theirs.items() for x in rows
               if not timed(x) and x.get("status") != "SKIPPED"]
    if refused:
        print("\ntorch rows without a time:\n")
        for case, x in refused:
            print("- %s %s: %s %s" % (case, x.get("strategy", ""), x.get("status"), x.get("message", "")[:200]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
