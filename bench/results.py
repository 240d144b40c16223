#!/usr/bin/env python3
"""Rewrites one generated section of bench/RESULTS.md from a GPU run's JSON lines.

usage: results.py norm RUDNN.jsonl TORCH.jsonl [--target 0.85] [options]
       results.py moe RUDNN.jsonl TORCH.jsonl [RUDNN_CUBLAS.jsonl] [options]
       results.py attention RUDNN.jsonl TORCH.jsonl [options]

  norm   rudnn-bench's and bench/baselines/torch_norm.py's output (gpu-suite: rudnn-cuda.jsonl,
         torch.jsonl)
  moe    rudnn-bench-moe's and bench/baselines/torch_moe.py's output, and optionally
         rudnn-bench-moe's forward with the expert GEMMs through cuBLAS (gpu-suite:
         moe-rudnn.jsonl, moe-torch.jsonl, moe-rudnn-cublas.jsonl)
  attention  rudnn-bench-attention's and bench/baselines/torch_attention.py's output (gpu-suite:
         attention-rudnn.jsonl, attention-torch.jsonl)

options:
  --date YYYY-MM-DD  the day of the run (default: today, UTC)
  --gpu NAME         (default: the "device" field of rudnn's rows)
  --commit SHA       the commit the run built (default: $RUDNN_COMMIT, else `git describe
                     --always --dirty` of this checkout, else "unknown")
  --results FILE     the RESULTS.md to read (default: the one beside this script)
  --out FILE         where to write it (default: FILE of --results, in place)

Only the lines between "<!-- results:FAMILY begin -->" and "<!-- results:FAMILY end -->" are
replaced; the hand-written method around them stays as it is, and a second run on the same
input gives the same file. The tables are those of bench/compare.py, bench/compare_moe.py and
bench/compare_attention.py, imported: ratios, % of copy and target flags are computed there and nowhere else.

tools/gpu-suite.sh's compare, moe and attention stages run it into $OUT/RESULTS.md; where the tree there
has no .git, set RUDNN_COMMIT in the run's command. Or run it here on the JSONL files a run
brought back, from the repository root, with that run's date and commit (the defaults, today and
this checkout, may not be what ran):

  bench/results.py norm out/rudnn-cuda.jsonl out/torch.jsonl --date 2026-12-01 --commit 1234abc
  bench/results.py moe out/moe-rudnn.jsonl out/moe-torch.jsonl out/moe-rudnn-cublas.jsonl \\
      --date 2026-12-01 --commit 1234abc
"""

import argparse
import datetime
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ left in bench/
import compare  # noqa: E402  (beside this script, not a package)
import compare_attention  # noqa: E402
import compare_moe  # noqa: E402


def default_commit():
    if os.environ.get("RUDNN_COMMIT"):
        return os.environ["RUDNN_COMMIT"]
    try:
        return subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty", "--abbrev=7"],
                              capture_output=True, text=True, check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def iso_date(text):
    datetime.date.fromisoformat(text)  # ValueError: argparse reports it
    return text


def devices(rows):
    return ", ".join(sorted({r.get("device", "?") for r in rows})) or "?"


def norm_section(args):
    runs = compare.read_inputs(args.files[0], args.files[1], prog="results.py")
    if runs is None:
        return None
    ours, theirs = runs
    if not any(r.get("op") != "copy" and "skipped" not in r for r in ours):
        # a bench stage that died early must not wipe the last real table
        print("results.py: no timed rows in %s; %s left as it was" % (args.files[0], args.results),
              file=sys.stderr)
        return None
    head = "Run of %s on %s, commit %s." % (args.date, args.gpu or devices(ours), args.commit)
    return ([head, ""] + compare.copy_lines(ours, theirs) + [compare.target_line(args.target), ""]
            + compare.table_lines(ours, theirs, args.target))


def moe_section(args):
    try:
        ours, torch = compare_moe.load(args.files[0]), compare_moe.load(args.files[1])
        cublas = compare_moe.load(args.files[2]) if len(args.files) > 2 else {}
    except FileNotFoundError as e:
        print("results.py: %s not found" % e.filename, file=sys.stderr)
        return None
    if not ours:
        print("results.py: no rows in %s; %s left as it was" % (args.files[0], args.results), file=sys.stderr)
        return None
    head = "Run of %s on %s, commit %s." % (args.date, args.gpu or devices(ours.values()), args.commit)
    return [head, ""] + compare_moe.lines(ours, torch, cublas)


def attention_section(args):
    try:
        (ours, ours_copy), (theirs, torch_copy) = (compare_attention.load(args.files[0]),
                                                   compare_attention.load(args.files[1]))
    except FileNotFoundError as e:
        print("results.py: %s not found" % e.filename, file=sys.stderr)
        return None
    if not any(compare_attention.timed(r) for r in ours):
        print("results.py: no timed rows in %s; %s left as it was" % (args.files[0], args.results), file=sys.stderr)
        return None
    head = "Run of %s on %s, commit %s." % (args.date, args.gpu or devices(ours), args.commit)
    return [head, ""] + compare_attention.lines(ours, theirs, ours_copy, torch_copy)


def replace_section(text, family, body_lines):
    """text with the lines between the family's two marker lines replaced by body_lines, or None
    unless there is exactly one begin line and one end line after it."""
    lines = text.split("\n")
    begins = [i for i, line in enumerate(lines) if line == "<!-- results:%s begin -->" % family]
    ends = [i for i, line in enumerate(lines) if line == "<!-- results:%s end -->" % family]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        return None
    return "\n".join(lines[:begins[0] + 1] + body_lines + lines[ends[0]:])


def main():
    p = argparse.ArgumentParser(description="rewrite a generated section of bench/RESULTS.md")
    p.add_argument("family", choices=("norm", "moe", "attention"))
    p.add_argument("files", nargs="+", metavar="JSONL")
    p.add_argument("--target", type=float, default=compare.DEFAULT_TARGET,
                   help="norm: fraction of copy bandwidth a row must reach (default 0.85)")
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    p.add_argument("--date", type=iso_date, default=today)
    p.add_argument("--gpu", default=None)
    p.add_argument("--commit", default=None)
    p.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if len(args.files) != 2 and not (args.family == "moe" and len(args.files) == 3):
        p.error("norm and attention take 2 JSONL files, moe 2 or 3")
    if args.commit is None:
        args.commit = default_commit()

    body = {"norm": norm_section, "moe": moe_section, "attention": attention_section}[args.family](args)
    if body is None:
        return 1
    with open(args.results, encoding="utf-8") as f:
        text = f.read()
    new = replace_section(text, args.family, body)
    if new is None:
        print("results.py: %s needs exactly one '<!-- results:%s begin -->' line and one '... end -->'"
              " line after it" % (args.results, args.family), file=sys.stderr)
        return 2
    out = args.out or args.results
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, out)
    print("results.py: %s section of %s written (run of %s, commit %s)"
          % (args.family, out, args.date, args.commit), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
