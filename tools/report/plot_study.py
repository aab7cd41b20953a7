#!/usr/bin/python3
"""softfab study report: plots (PNG and SVG) and a one-page index.html.

Reads the results.json that `softfab study` / `softfab merge` wrote and draws,
with matplotlib (Debian's python3-matplotlib; run with /usr/bin/python3):
  latency_cdf      latency distribution (CDF) per workload phase, all seeds
  throughput       delivered throughput over virtual time (mean and p10-p90
                   band over the seeds)
  repairs          retransmissions, RNR NAKs and flushes per seed
then index.html, which embeds the SVGs and lists the worst seeds with the
command that replays each.

usage: plot_study.py RESULTS_JSON OUT_DIR
"""
import html
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Reproducible SVGs: no date, fixed ids.
matplotlib.rcParams["svg.hashsalt"] = "softfab"
matplotlib.rcParams["font.size"] = 10
METADATA = {"png": {"Software": None}, "svg": {"Date": None}}

PLOTS = [
    ("latency_cdf", "Latency distribution per phase"),
    ("throughput", "Throughput over virtual time"),
    ("repairs", "Repairs per seed"),
]


def save(fig, out_dir, name):
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out_dir, f"{name}.{ext}"), dpi=110,
                    metadata=METADATA[ext])
    plt.close(fig)


def human_ns(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def plot_latency(summary, out_dir):
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    drawn = 0
    for phase in summary.get("latency_phases", []):
        points = phase.get("cdf", [])
        if not points:
            continue
        # From 0 at the first sample, so a phase whose samples share one
        # bucket still shows as a rise; markers keep overlapping phases apart.
        xs = [max(points[0][0], 1) / 1e3] + [max(p[0], 1) / 1e3 for p in points]
        ys = [0.0] + [p[1] for p in points]
        label = (f"{phase['phase']} (p50 {human_ns(phase['p50_ns'])}, "
                 f"p99 {human_ns(phase['p99_ns'])})")
        ax.step(xs, ys, where="post", label=label,
                marker="ox^sDv"[drawn % 6], markersize=3)
        drawn += 1
    ax.set_xscale("log")
    ax.set_xlabel("latency (us of virtual time, log scale)")
    ax.set_ylabel("fraction of messages")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no latency samples", ha="center",
                transform=ax.transAxes)
    ax.set_title(f"{summary['scenario']}: latency CDF per phase "
                 f"({summary['runs']} runs)")
    save(fig, out_dir, "latency_cdf")


def plot_throughput(summary, out_dir):
    t = summary.get("throughput", {})
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    mean = t.get("mean_mb_per_s", [])
    if mean:
        # Milliseconds once the run is longer than 10 ms, else microseconds.
        unit, scale = (("ms", 1e6) if t["bucket_ns"] * len(mean) > 1e7
                       else ("us", 1e3))
        width = t["bucket_ns"] / scale
        # Steps: each bucket's average over its width of virtual time.
        xs = [i * width for i in range(len(mean) + 1)]
        last = lambda v: list(v) + [v[-1]]
        ax.fill_between(xs, last(t["p10_mb_per_s"]), last(t["p90_mb_per_s"]),
                        step="post", alpha=0.25, label="p10-p90 over seeds")
        ax.step(xs, last(mean), where="post", label="mean over seeds")
        ax.set_xlim(0, len(mean) * width)
        ax.set_xlabel(f"virtual time ({unit}; buckets of {width:g} {unit})")
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no throughput samples", ha="center",
                transform=ax.transAxes)
        ax.set_xlabel("virtual time")
    ax.set_ylabel("delivered (MB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"{summary['scenario']}: throughput over virtual time")
    save(fig, out_dir, "throughput")


def plot_repairs(per_seed, summary, out_dir):
    """Per seed on the left, the spread over seeds on the right."""
    from matplotlib.ticker import MaxNLocator
    seeds = per_seed.get("seed", [])
    failed = per_seed.get("failed_seeds", [])
    series = [("retransmissions", "retransmissions"), ("rnr_naks", "RNR NAKs"),
              ("flushes", "flushed completions")]
    fig, axes = plt.subplots(3, 2, figsize=(8.5, 6.0), sharex="col",
                             gridspec_kw={"width_ratios": [3, 1]})
    for row, (key, label) in zip(axes, series):
        ax, spread = row
        values = per_seed.get(key, [])
        if len(seeds) <= 200:
            ax.bar(seeds, values, width=0.8)
        else:
            ax.plot(seeds, values, marker=".", markersize=2, linestyle="none")
        for s in failed:
            ax.axvline(s, color="red", alpha=0.3, linewidth=0.8)
        ax.set_ylabel(label, fontsize=8)
        top = max(values + [1]) * 1.08
        for a in row:
            a.grid(True, alpha=0.3)
            a.set_ylim(0, top)
            a.yaxis.set_major_locator(MaxNLocator(integer=True))
        if not any(values):
            spread.text(0.5, 0.5, "0 in every seed", ha="center",
                        va="center", transform=spread.transAxes, fontsize=8)
        else:
            spread.hist(values, bins=min(30, max(values) + 1),
                        orientation="horizontal",
                        range=(-0.5, max(values) + 0.5))
        spread.tick_params(labelleft=False)
    axes[-1][0].set_xlabel("seed" + (" (red lines: failed seeds)"
                                     if failed else ""))
    axes[-1][1].set_xlabel("seeds")
    axes[0][0].set_title(f"{summary['scenario']}: what the fabric repaired, "
                         "per seed")
    axes[0][1].set_title("spread", fontsize=9)
    save(fig, out_dir, "repairs")


def write_html(data, s, out_dir):
    rows = []
    for w in s.get("worst", []):
        rows.append(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>"
            "</tr>".format(w["seed"], html.escape(w["outcome"]),
                           html.escape(w["why"]), html.escape(w["replay"])))
    outcomes = ", ".join(f"{html.escape(k)}: {v}"
                         for k, v in sorted(s.get("outcomes", {}).items()))
    counters = "".join(
        "<tr><td>{}</td><td>{:,.2f}</td><td>{:,}</td><td>{}</td></tr>".format(
            html.escape(name), c["mean"], c["max"], c["max_seed"])
        for name, c in s.get("counters", {}).items())
    figures = "".join(
        '<figure><img src="{0}.svg" alt="{1}"><figcaption>{1} '
        '(<a href="{0}.png">PNG</a>)</figcaption></figure>'.format(name, title)
        for name, title in PLOTS)
    verdict = "all runs passed" if s["failed"] == 0 else (
        f"{s['failed']} of {s['runs']} runs failed")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>softfab study: {html.escape(s['scenario'])}</title>
<style>
body {{ font-family: sans-serif; max-width: 60em; margin: 1em auto; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
td, th {{ border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }}
figure {{ margin: 1em 0; }} img {{ max-width: 100%; }}
.bad {{ color: #b00; }} .good {{ color: #070; }}
</style></head><body>
<h1>softfab study: {html.escape(s['scenario'])}</h1>
<p>Scenario file <code>{html.escape(data['scenario']['path'])}</code>, expected
outcome <code>{html.escape(data['scenario']['expect'])}</code>; seeds
{data['seeds']['first']} to {data['seeds']['last']} ({data['seeds']['count']}
runs).</p>
<p class="{'good' if s['failed'] == 0 else 'bad'}"><b>{verdict}</b>.
Outcomes: {outcomes}. Broken invariants: {s['broken_invariants']}.</p>
<h2>Counters per seed</h2>
<table><tr><th>counter</th><th>mean</th><th>max</th><th>seed of max</th></tr>
{counters}</table>
<h2>Plots</h2>
{figures}
<h2>Worst seeds</h2>
<p>Failed runs first, then the highest p99 latency. Each command replays the
seed bit for bit and writes its trace and capture.</p>
<table><tr><th>seed</th><th>outcome</th><th>why</th><th>replay</th></tr>
{''.join(rows)}</table>
</body></html>
"""
    with open(os.path.join(out_dir, "index.html"), "w") as f:
        f.write(page)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    out_dir = argv[2]
    summary = dict(data["summary"])
    summary["scenario"] = data["scenario"]["name"]
    plot_latency(summary, out_dir)
    plot_throughput(summary, out_dir)
    plot_repairs(data.get("per_seed", {}), summary, out_dir)
    write_html(data, summary, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
