#!/usr/bin/env python3
"""Checks the tag matcher's scaling bars (issue 2) on Google Benchmark JSON output.

  bazel build -c opt //core:matcher_benchmark
  taskset -c 1 bazel-bin/core/matcher_benchmark --benchmark_filter='^BM_[A-Z]' \
      --benchmark_repetitions=5 --benchmark_min_time=0.2 \
      --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true --benchmark_format=json > /tmp/m1.json
  python3 bench/matcher_bars.py /tmp/m1.json [/tmp/m2.json ...]   # or JSON on stdin

Each file is one run; within a run the median of the repetitions is used. With several
files the script judges each run, then judges the minimum over the runs of each median
("min of medians": noise on a shared machine only ever adds time, and taking each
benchmark's best run treats every depth the same way).

Cost is ns per message: 1e9 / items_per_second (the Drain benchmarks process `depth`
messages per iteration; the steady-state ones one).

Bars, for both protocols of core/matcher_benchmark.cc (Drain = UCX's protocol from
openucx/ucx test/gtest/ucp/test_ucp_tag_perf.cc; steady = constant depth, random targets):
- Exact (posted and unexpected side): cost(8192) / cost(1) <= 1.5.
- Mixed (10% wildcard receives): "cost grows by less than 1.5x per doubling of depth up to
  8192 (the bar UCX's own test suite sets)". UCX's check_scalability() averages
  cost(2d)/cost(d) over the doublings up to 8192, skipping depths below 16 as warm-up
  (d = 8..4096 here), and requires the average < 1.5; that is what is judged. The worst
  single doubling is printed beside it for information (below 16 it reflects the mask
  classes filling up, not the queue length).
Prints a table (also the naive baseline) and exits 1 when the judged result misses a bar.
"""
import json
import sys

DEPTHS = [1 << i for i in range(15)]
PROTOCOLS = [
    ("Drain (UCX protocol)", "Drain"),
    ("steady state, random targets", ""),
]


def load(text):
    data = json.loads(text)
    times = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            raise SystemExit(f"benchmark failed: {b['name']}: {b.get('error_message')}")
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        base, _, depth = name.partition("/")
        if "items_per_second" in b:
            ns = 1e9 / b["items_per_second"]
        else:
            ns = b["real_time"]  # ns (the default time unit), one item per iteration
        times[(base, int(depth))] = ns
    return times


def table(t, prefix):
    print(f"{'case':<26}" + "".join(f"{d:>7}" for d in DEPTHS))
    for case in ["PostedExact", "PostedMixed", "UnexpectedExact", "UnexpectedExactChurn",
                 "UnexpectedMixed"]:
        for impl in ["BM_", "BM_Naive"]:
            row = [t.get((impl + prefix + case, d)) for d in DEPTHS]
            if all(x is None for x in row):
                continue
            cells = "".join(f"{x:7.0f}" if x is not None else f"{'':>7}" for x in row)
            print(f"{impl[3:] + prefix + case:<26}" + cells)


def judge(t, prefix, label):
    """Prints the bar lines for one protocol; returns (ok, summary dict)."""
    ok = True
    summary = {}
    for case in ["PostedExact", "UnexpectedExact"]:
        key = "BM_" + prefix + case
        if (key, 8192) not in t or (key, 1) not in t:
            continue
        r = t[(key, 8192)] / t[(key, 1)]
        good = r <= 1.5
        ok &= good
        summary[case] = r
        print(f"  {label} {case}: cost(8192)/cost(1) = {r:.2f}  (bar <= 1.5)  "
              f"{'ok' if good else 'MISS'}")
    key = "BM_" + prefix + "UnexpectedExactChurn"
    if (key, 8192) in t:
        r = t[(key, 8192)] / t[(key, 1)]
        print(f"  {label} UnexpectedExactChurn: cost(8192)/cost(1) = {r:.2f}  "
              "(reported, no bar)")
    for case in ["PostedMixed", "UnexpectedMixed"]:
        key = "BM_" + prefix + case
        if not all((key, d) in t for d in DEPTHS if d <= 8192):
            continue
        ratios = {d: t[(key, 2 * d)] / t[(key, d)] for d in DEPTHS if 2 * d <= 8192}
        worst_d = max(ratios, key=ratios.get)
        worst = ratios[worst_d]
        ucx = [ratios[d] for d in ratios if d >= 8]
        ucx_mean = sum(ucx) / len(ucx)
        good = ucx_mean < 1.5
        ok &= good
        summary[case] = ucx_mean
        print(f"  {label} {case}: mean cost(2d)/cost(d), d=8..4096 = {ucx_mean:.2f} "
              f"(bar < 1.5)  {'ok' if good else 'MISS'};  worst doubling "
              f"{worst:.2f} (d={worst_d});  cost(8192)/cost(1) = "
              f"{t[(key, 8192)] / t[(key, 1)]:.2f}")
    return ok, summary


def report(t, title):
    print(f"== {title}: ns per message at queue depth")
    ok = True
    for label, prefix in PROTOCOLS:
        print(f"-- {label}")
        table(t, prefix)
    print()
    for label, prefix in PROTOCOLS:
        good, _ = judge(t, prefix, "Drain" if prefix else "Steady")
        ok &= good
    print(f"  verdict: {'all bars met' if ok else 'bars MISSED'}")
    print()
    return ok


def main(paths):
    texts = [open(p).read() for p in paths] if paths else [sys.stdin.read()]
    runs = [load(x) for x in texts]
    ok = True
    for i, t in enumerate(runs):
        ok = report(t, f"run {i + 1} of {len(runs)}")
    if len(runs) > 1:
        keys = set().union(*runs)
        best = {k: min(t[k] for t in runs if k in t) for k in keys}
        ok = report(best, f"min of medians over {len(runs)} runs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
