#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Prints each suite's time of a meson test run and every test that took more than a third of
its timeout (scripts/test.sh calls it for each build; a warning, not a failure: times vary).

usage: test-times.py BUILD_DIR"""
import json
import subprocess
import sys


def main():
    build = sys.argv[1]
    tests = json.loads(subprocess.run(["meson", "introspect", "--tests", build], check=True,
                                      capture_output=True, text=True).stdout)
    timeout = {t["name"]: t.get("timeout") or 30 for t in tests}
    suites = {}
    over = []
    with open(f"{build}/meson-logs/testlog.json") as f:
        for line in f:
            r = json.loads(line)
            name = r["name"].split(" / ")[-1]
            suite = r["name"].split(":")[1].split(" /")[0] if ":" in r["name"] else "-"
            d = float(r.get("duration") or 0)
            s = suites.setdefault(suite, [0.0, 0, "", 0.0])
            s[0] += d
            s[1] += 1
            if d > s[3]:
                s[2], s[3] = name, d
            t = timeout.get(name)
            if t and d > t / 3:
                over.append(f"  {name}: {d:.0f} s, more than a third of its {t} s timeout")
    print(f"suite times in {build}:")
    for suite, (total, n, slow, slow_d) in sorted(suites.items(), key=lambda x: -x[1][0]):
        print(f"  {suite:12s} {total:7.1f} s in {n:2d} tests (slowest {slow}: {slow_d:.1f} s)")
    if over:
        print("warning: tests over a third of their timeout:")
        print("\n".join(over))
    return 0


if __name__ == "__main__":
    sys.exit(main())
