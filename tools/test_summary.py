#!/usr/bin/env python3
"""Prints one line per test and a closing 'N passed, N failed, N skipped' from meson's testlog.json."""
import json
import sys

counts = {"passed": 0, "failed": 0, "skipped": 0}
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
        print(f"  {result:8} {t['name']} ({t.get('duration', 0):.1f}s)")
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
sys.exit(1 if counts["failed"] else 0)
