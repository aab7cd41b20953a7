#!/usr/bin/env python3
"""Splits a callgrind profile's instruction count by where the code lives.

    callgrind_by_file.py PROFILE   ->  one line per part: "<part> <instructions>"

The rule, applied to callgrind's self cost per (source file, function), where an
inlined function's instructions count for the file that defines it:
  api       files under api/          (the sf_* / sfv_* faces)
  core      files under core/ and transport/  (the messaging engine, its headers)
  sim       files under backends/sim/ (the simulated HCA)
  verbs     files under backends/verbs/
  harness   files under bench/, tests/, examples/ (the program driving the stack)
  libraries everything else: libc, libstdc++, the loader (called from either side)
softfab's own cost is api + core; the whole path is the total.
"""
import re
import subprocess
import sys

PARTS = [
    ("api", ("api/",)),
    ("core", ("core/", "transport/")),
    ("sim", ("backends/sim/",)),
    ("verbs", ("backends/verbs/",)),
    ("harness", ("bench/", "tests/", "examples/")),
]


def part_of(path):
    path = re.sub(r"^(/proc/self/cwd/|\./)+", "", path)
    for name, prefixes in PARTS:
        if path.startswith(prefixes):
            return name
    return "libraries"


def main():
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", sys.argv[1]],
        check=True, capture_output=True, text=True).stdout
    totals = {name: 0 for name, _ in PARTS}
    totals["libraries"] = 0
    program_total = 0
    in_table = False
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        rest = m.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            program_total = count
            in_table = True
            continue
        if not in_table:
            continue
        totals[part_of(rest.split(":", 1)[0])] += count
    # Functions below the threshold (none at 100%) would land here.
    totals["libraries"] += program_total - sum(totals.values())
    for name in [p for p, _ in PARTS] + ["libraries"]:
        print(f"{name} {totals[name]}")
    print(f"total {program_total}")


if __name__ == "__main__":
    main()
