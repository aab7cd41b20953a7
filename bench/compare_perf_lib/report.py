"""The report (pure): the measurements combined into numbers, ratios with their verdicts
(never a guessed number), table rows, and the printed table."""

import statistics

from .constants import LATENCY_TARGET, RATE_TARGET


def ratio_verdict(numerator, denominator, target, higher_is_better,
                  num_name="numerator", den_name="denominator"):
    """{'value', 'target', 'verdict'}; verdict is 'meets target', 'misses target' or
    'not computed: ...' when an input is missing (never a guessed number)."""
    op = ">=" if higher_is_better else "<="
    res = {"value": None, "target": "%s %g" % (op, target), "verdict": None}
    missing = []
    if numerator is None:
        missing.append("no %s number" % num_name)
    if denominator is None:
        missing.append("no %s number" % den_name)
    elif not denominator > 0:
        missing.append("%s number is not positive" % den_name)
    if missing:
        res["verdict"] = "not computed (%s)" % ", ".join(missing)
        return res
    value = numerator / denominator
    res["value"] = value
    ok = value >= target if higher_is_better else value <= target
    res["verdict"] = "meets target" if ok else "misses target"
    return res


def _median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _fmt_rate(v):
    return "{:,.0f}".format(v) if v is not None else None


def _fmt_us(v):
    return "%.3f" % v if v is not None else None


def build_report(softfab, ucx_bw, ucx_lat, fi, meta):
    """Pure: combines the measurements into the numbers, ratios and table rows."""
    sf_rate = softfab.get("msg_rate")
    sf_lat = softfab.get("half_rtt_us")
    ucx_rate = _median_of(ucx_bw["runs"], "msg_rate_overall")
    ucx_lat_overall = _median_of(ucx_lat["runs"], "usec_overall")
    ucx_lat_median = _median_of(ucx_lat["runs"], "usec_median")
    ucx_pp_rate = _median_of(ucx_lat["runs"], "msg_rate_overall")
    fi_lat = _median_of(fi["runs"], "usec_per_xfer")
    fi_pp_rate = _median_of(fi["runs"], "pingpong_msg_rate")

    def cell(value, fmt, series=None, missing_word=None):
        """A number, or a plain word saying why there is none (never a made-up value)."""
        if value is not None:
            return fmt(value)
        if missing_word is not None:
            return missing_word
        status = series["status"]
        if status.startswith("skipped"):
            return "skipped"
        if "not installed" in status:
            return "not installed"
        return "FAILED"

    if softfab.get("target_missing"):
        sf_status = "pending"  # //bench:fabric_benchmark not written yet
    elif softfab.get("not_measured"):
        sf_status = "not measured"
    else:
        sf_status = "MISSING"
    rows = [
        ("8-byte tagged message rate, streaming (msg/s)",
         cell(sf_rate, _fmt_rate, missing_word=sf_status),
         cell(ucx_rate, _fmt_rate, ucx_bw) + (" (tag_bw)" if ucx_rate is not None else ""),
         "n/a (ping-pong only)"),
        ("half round trip, mean (usec)",
         cell(sf_lat, _fmt_us, missing_word=sf_status),
         cell(ucx_lat_overall, _fmt_us, ucx_lat) + (" (tag_lat)" if ucx_lat_overall is not None else ""),
         cell(fi_lat, _fmt_us, fi)),
        ("half round trip, median (usec)",
         "n/a", cell(ucx_lat_median, _fmt_us, ucx_lat), "n/a (not reported)"),
        ("ping-pong rate = 1 / half round trip (msg/s)",
         "n/a", cell(ucx_pp_rate, _fmt_rate, ucx_lat), cell(fi_pp_rate, _fmt_rate, fi)),
    ]
    ratios = {
        "softfab_rate_over_ucx_tag_bw_rate": ratio_verdict(sf_rate, ucx_rate, RATE_TARGET, True,
                                                            "softfab", "UCX tag_bw"),
        "softfab_half_rtt_over_fi_pingpong_half_rtt": ratio_verdict(
            sf_lat, fi_lat, LATENCY_TARGET, False, "softfab", "fi_pingpong"),
    }
    notes = []
    for key, why in sorted(softfab.get("errors", {}).items()):
        notes.append("softfab %s: %s" % (key, why))
    for label, series in (("UCX tag_bw", ucx_bw), ("UCX tag_lat", ucx_lat),
                          ("fi_pingpong", fi)):
        if not series["runs"]:
            notes.append("%s: %s" % (label, series["status"]))
        elif series["failures"]:
            notes.append("%s: %d run(s) used; a later run failed: %s"
                         % (label, len(series["runs"]), series["failures"][0]))
    for r in fi["runs"]:
        if not r.get("all_acked", True):
            notes.append("fi_pingpong: not every message was acknowledged (%s)"
                         % r.get("ack_column"))
            break
    numbers = {
        "softfab": {"msg_rate": sf_rate, "half_rtt_us": sf_lat,
                    "source": softfab.get("source"), "errors": softfab.get("errors", {})},
        "ucx": {"tag_bw_msg_rate_overall": ucx_rate,
                "tag_lat_half_rtt_us_overall": ucx_lat_overall,
                "tag_lat_half_rtt_us_median": ucx_lat_median,
                "tag_lat_pingpong_msg_rate": ucx_pp_rate,
                "tag_bw": ucx_bw, "tag_lat": ucx_lat},
        "fi_pingpong": {"half_rtt_us": fi_lat, "pingpong_msg_rate": fi_pp_rate,
                        "pingpong": fi},
    }
    return {"rows": rows, "ratios": ratios, "notes": notes, "numbers": numbers, "meta": meta}


def format_table(report):
    meta = report["meta"]
    head = ("metric", "softfab", "UCX (ucx_perftest)", "libfabric (fi_pingpong)")
    rows = [head] + [tuple(r) for r in report["rows"]]
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    lines = []
    lines.append("8-byte tagged messages, one machine (%s, %s CPUs, load average %s -> %s)"
                 % (meta.get("host"), meta.get("cpus"), meta.get("loadavg_start"),
                    meta.get("loadavg_end")))
    lines.append("%s, UCX_TLS=%s; %s, provider %s, RDM, %s mode; repeats: %s "
                 "(median)" % (meta.get("ucx_version"), meta.get("ucx_tls"),
                               meta.get("fi_version"), meta.get("fi_provider"),
                               meta.get("fi_mode"), meta.get("repeat")))
    lines.append("")
    for i, r in enumerate(rows):
        lines.append("  ".join(str(c).ljust(widths[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    labels = {
        "softfab_rate_over_ucx_tag_bw_rate":
            "softfab message rate / UCX tag_bw message rate",
        "softfab_half_rtt_over_fi_pingpong_half_rtt":
            "softfab half round trip / fi_pingpong half round trip",
    }
    rw = max(len(v) for v in labels.values())
    lines.append("%s  %-8s  %-6s  %s" % ("ratio".ljust(rw), "value", "target", "verdict"))
    lines.append("%s  %s  %s  %s" % ("-" * rw, "-" * 8, "-" * 6, "-" * 13))
    for key, label in labels.items():
        r = report["ratios"][key]
        val = "%.3f" % r["value"] if r["value"] is not None else "-"
        lines.append("%s  %-8s  %-6s  %s" % (label.ljust(rw), val, r["target"], r["verdict"]))
    if report["notes"]:
        lines.append("")
        lines.append("Notes:")
        for n in report["notes"]:
            lines.append("  - " + n)
    return "\n".join(lines)
