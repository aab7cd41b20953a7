#!/usr/bin/env python3
"""Checks the tag matcher's scaling bars (issue 2) on Google Benchmark JSON output.

  bazel build -c opt //core:matcher_benchmark
  bazel-bin/core/matcher_benchmark --benchmark_filter='^BM_[A-Z]' \
      --benchmark_repetitions=9 --benchmark_min_time=0.2 \
      --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true --benchmark_format=json > /tmp/m.json
  python3 bench/matcher_bars.py /tmp/m.json

Random interleaving and the median of 9 keep a transient slowdown of a shared
machine from landing on one depth (the bars are ratios of two depths).

Bars: an exact match at depth 8192 costs at most 1.5x what it costs at depth 1; in the
mixed case (10% wildcard receives) cost grows by less than 1.5x per doubling of depth up to
8192. Both for the posted and the unexpected side. Uses the median of the repetitions when
present. Prints a table (also the naive baseline at the same depths) and exits 1 on a miss.
"""
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    times = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        base, _, depth = name.partition("/")
        times[(base, int(depth))] = b["real_time"]  # ns (the default time unit)
    return times


def main(path):
    t = load(path)
    ok = True
    depths = [1 << i for i in range(15)]
    print(f"{'case':<22}" + "".join(f"{d:>8}" for d in depths))
    for case in ["PostedExact", "PostedMixed", "UnexpectedExact", "UnexpectedExactChurn",
                 "UnexpectedMixed"]:
        for impl in ["BM_", "BM_Naive"]:
            if impl == "BM_Naive" and case.endswith("Churn"):
                continue
            row = [t.get((impl + case, d)) for d in depths]
            cells = "".join(f"{x:8.0f}" if x is not None else f"{'':>8}" for x in row)
            print(f"{impl[3:] + case:<22}" + cells)
    print()
    for case in ["PostedExact", "UnexpectedExact"]:
        r = t[("BM_" + case, 8192)] / t[("BM_" + case, 1)]
        good = r <= 1.5
        ok &= good
        print(f"{case}: cost(8192)/cost(1) = {r:.2f}  (bar <= 1.5)  {'ok' if good else 'MISS'}")
    # Reported, not a bar: exact receives against messages whose tags are all
    # fresh (one more cache miss per message to index a new key).
    if ("BM_UnexpectedExactChurn", 8192) in t:
        r = t[("BM_UnexpectedExactChurn", 8192)] / t[("BM_UnexpectedExactChurn", 1)]
        print(f"UnexpectedExactChurn: cost(8192)/cost(1) = {r:.2f}  (reported, no bar)")
    for case in ["PostedMixed", "UnexpectedMixed"]:
        ratios = [t[("BM_" + case, 2 * d)] / t[("BM_" + case, d)] for d in depths if 2 * d <= 8192]
        worst = max(ratios)
        good = worst < 1.5
        ok &= good
        print(f"{case}: worst cost(2d)/cost(d) up to 8192 = {worst:.2f}  (bar < 1.5)  "
              f"{'ok' if good else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
