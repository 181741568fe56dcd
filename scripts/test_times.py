#!/usr/bin/env python3
"""Time per suite (and ctest label) from ctest's JUnit file: scripts/test_times.py FILE.

A suite is the part of a test's name before ': ' (the doctest binary, or python, cuda, docs...).
Prints one row per suite: tests, skipped, failed and the seconds its tests took, summed (with
ctest -j N the sum is up to N times the wall time), slowest suite first.
"""

import sys
import xml.etree.ElementTree as ET


def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test_times.py: {path}: cannot read ctest's JUnit file: {e}", file=sys.stderr)
        return 2
    rows = {}
    for case in root.iter("testcase"):
        name = case.get("name", "")
        suite = name.split(":", 1)[0] if ":" in name else name
        r = rows.setdefault(suite, {"tests": 0, "skipped": 0, "failed": 0, "seconds": 0.0})
        r["tests"] += 1
        r["seconds"] += float(case.get("time", "0") or 0)
        status = case.get("status", "")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            r["skipped"] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            r["failed"] += 1
    total = sum(r["seconds"] for r in rows.values())
    print(f"{'suite':<18} {'tests':>6} {'skipped':>8} {'failed':>7} {'seconds':>9}")
    for suite, r in sorted(rows.items(), key=lambda kv: -kv[1]["seconds"]):
        print(f"{suite:<18} {r['tests']:>6} {r['skipped']:>8} {r['failed']:>7} {r['seconds']:>9.1f}")
    print(f"{'all':<18} {sum(r['tests'] for r in rows.values()):>6} "
          f"{sum(r['skipped'] for r in rows.values()):>8} "
          f"{sum(r['failed'] for r in rows.values()):>7} {total:>9.1f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: scripts/test_times.py CTEST_JUNIT_XML", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
