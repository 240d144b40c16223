#!/usr/bin/env python3
"""Side-by-side table of rudnn-bench and the PyTorch baseline, in Markdown.

usage: compare.py RUDNN.jsonl TORCH.jsonl [--target 0.85]

Both files hold one JSON object per line (rudnn-bench, bench/baselines/torch_norm.py); other
lines are ignored. Rows are matched on (op, shape, dtype). Columns:

  ours ms / torch ms   median times; torch is the eager call, and "compile ms" is
                       torch.compile where the baseline ran it
  ratio                best torch time / ours: above 1 means rudnn is faster
  our GB/s             minimal bytes (inputs read once, outputs written once) / median time
  % copy               our GB/s as a share of the device-to-device copy bandwidth measured in
                       the same rudnn-bench run
  flag                 rows below the target: under --target of copy bandwidth, or slower
                       than the best torch time

bench/results.py writes the same lines (copy_lines, target_line, table_lines) into the norm
section of bench/RESULTS.md.
"""

import argparse
import json
import sys


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def key(r):
    return (r.get("op"), tuple(r.get("shape", [])), r.get("dtype"))


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


DEFAULT_TARGET = 0.85


def read_inputs(ours_path, torch_path, prog="compare.py"):
    """(ours, theirs) rows, or None when rudnn-bench's file is missing; a missing baseline file
    leaves the torch columns empty."""
    try:
        ours = load(ours_path)
    except FileNotFoundError:
        print("%s: %s not found (did rudnn-bench run?)" % (prog, ours_path), file=sys.stderr)
        return None
    try:
        theirs = load(torch_path)
    except FileNotFoundError:
        print("%s: %s not found; the torch columns stay empty" % (prog, torch_path), file=sys.stderr)
        theirs = []
    return ours, theirs


def copy_lines(ours, theirs):
    """The copy bandwidth each side measured in its own run, as Markdown list items."""
    out = []
    for r in ours:
        if r.get("op") == "copy" and "gbps" in r:
            out.append("- copy bandwidth, rudnn %s (rudnn_buffer_copy, %d MiB, read+write): %.1f GB/s"
                       % (r.get("backend"), r["shape"][0] >> 20, r["gbps"]))
    for r in theirs:
        if r.get("op") == "copy" and "gbps" in r:
            out.append("- copy bandwidth, torch (copy_, %d MiB, read+write): %.1f GB/s"
                       % (r["shape"][0] >> 20, r["gbps"]))
    return out


def target_line(target):
    return ("- target: %.0f%% of copy bandwidth and no slower than PyTorch; ratio = torch / ours"
            " (> 1: rudnn faster)" % (target * 100))


def table_lines(ours, theirs, target=DEFAULT_TARGET):
    """The side-by-side table, a blank line and the count of rows below target."""
    torch_eager, torch_compiled, torch_skipped = {}, {}, {}
    for r in theirs:
        if r.get("op") == "copy":
            continue
        if "skipped" in r:
            torch_skipped[(key(r), r.get("strategy"))] = r["skipped"]
            continue
        if r.get("strategy") == "torch.compile":
            torch_compiled[key(r)] = r
        else:
            torch_eager[key(r)] = r
    have_compile = bool(torch_compiled) or any(s == "torch.compile" for (_, s) in torch_skipped)
    backends = sorted({r.get("backend", "?") for r in ours if r.get("op") != "copy"})
    multi = len(backends) > 1

    out = []
    head = ["op", "shape", "dtype"]
    if multi:
        head.append("backend")
    head += ["ours ms", "torch ms"]
    if have_compile:
        head.append("compile ms")
    head += ["ratio", "our GB/s", "% copy", "flag"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---" for _ in head) + "|")

    flagged = 0
    total = 0
    for r in ours:
        if r.get("op") == "copy":
            continue
        k = key(r)
        shape = "x".join(str(d) for d in k[1])
        cells = [k[0], shape, k[2]]
        if multi:
            cells.append(r.get("backend", "?"))
        t_e = torch_eager.get(k)
        t_c = torch_compiled.get(k)
        t_e_ms = t_e.get("median_ms") if t_e else None
        t_c_ms = t_c.get("median_ms") if t_c else None
        if "skipped" in r:
            cells += ["skipped", fmt(t_e_ms, ".4f")]
            if have_compile:
                cells.append(fmt(t_c_ms, ".4f"))
            cells += ["-", "-", "-", "skipped: " + str(r["skipped"]).replace("|", "/")]
            out.append("| " + " | ".join(cells) + " |")
            continue
        total += 1
        ms = r.get("median_ms")
        best_torch = min([t for t in (t_e_ms, t_c_ms) if t is not None], default=None)
        ratio = best_torch / ms if best_torch is not None and ms else None
        frac = r.get("peak_fraction")
        flags = []
        if frac is not None and frac < target:
            flags.append("< %.0f%% copy" % (target * 100))
        if ratio is not None and ratio < 1.0:
            flags.append("slower than torch")
        if best_torch is None:
            why = torch_skipped.get((k, "eager"))
            flags.append("no torch row" + (" (%s)" % why if why else ""))
        if any(not f.startswith("no torch row") for f in flags):
            flagged += 1
        cells += [fmt(ms, ".4f"), fmt(t_e_ms, ".4f")]
        if have_compile:
            t_c_cell = fmt(t_c_ms, ".4f")
            if t_c_ms is None and (k, "torch.compile") in torch_skipped:
                t_c_cell = "skipped"
            cells.append(t_c_cell)
        cells += [fmt(ratio, ".2f"), fmt(r.get("gbps"), ".1f"),
                  "-" if frac is None else "%.1f%%" % (frac * 100),
                  ("**" + "; ".join(flags) + "**") if flags else "ok"]
        out.append("| " + " | ".join(cells) + " |")

    out.append("")
    out.append("%d of %d timed rows below target." % (flagged, total))
    return out


def main():
    p = argparse.ArgumentParser(description="compare rudnn-bench with the PyTorch baseline")
    p.add_argument("ours")
    p.add_argument("torch")
    p.add_argument("--target", type=float, default=DEFAULT_TARGET,
                   help="fraction of copy bandwidth a row must reach (default 0.85)")
    args = p.parse_args()

    runs = read_inputs(args.ours, args.torch)
    if runs is None:
        return 1
    ours, theirs = runs
    devices = sorted({r.get("device", "?") for r in ours + theirs})
    out = ["## rudnn vs PyTorch", ""]
    out.append("- device: %s" % (", ".join(devices) if devices else "?"))
    out += copy_lines(ours, theirs)
    out.append(target_line(args.target))
    out.append("")
    out += table_lines(ours, theirs, args.target)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
