#!/usr/bin/env python3
"""Prints one line per test and a closing 'N passed, N failed, N skipped' from meson's testlog.json.

A failed test's exit status, environment seed and the tail of its output come after the list, just
before the closing line, so that a log cut to its last lines (CI's) still says why it failed."""
import json
import sys

TAIL_LINES = 15  # of each stream

counts = {"passed": 0, "failed": 0, "skipped": 0}
failures = []
with open(sys.argv[1]) as log:
    for line in log:
        if not line.strip():
            continue
        t = json.loads(line)
        result = t.get("result", "")
        if result in ("OK", "EXPECTEDFAIL"):
            counts["passed"] += 1
        elif result == "SKIP":
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
            failures.append(t)
        print(f"  {result:8} {t['name']} ({t.get('duration', 0):.1f}s)")
for t in failures:
    rc = t.get("returncode")
    how = f"killed by signal {-rc}" if isinstance(rc, int) and rc < 0 else f"exit status {rc}"
    perturb = t.get("env", {}).get("MALLOC_PERTURB_")
    print(f"--- {t['name']}: {t.get('result')}, {how}"
          + (f", MALLOC_PERTURB_={perturb}" if perturb is not None else "") + "; last lines of its output:")
    for stream in ("stdout", "stderr"):
        text = (t.get(stream) or "").rstrip("\n")
        for out in text.split("\n")[-TAIL_LINES:] if text else []:
            print(f"    {stream}: {out[:300]}")
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
sys.exit(1 if counts["failed"] else 0)
