"""Parsers of the three tools' outputs (pure functions; exercised by
bench/compare_perf_test.py with captured output)."""

import json
import re
import statistics

from .constants import MSG_SIZE, PINGPONG_BENCH, RATE_BENCH


class ParseError(Exception):
    """A tool's output does not contain the numbers we need."""


_TIME_UNIT_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def _extract_json_object(text):
    """Parses text as JSON; tolerates noise before the first '{' or after the last '}'."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ParseError("no JSON object in the benchmark output")
    try:
        return json.loads(text[start:end + 1])
    except ValueError as e:
        raise ParseError("benchmark output is not valid JSON: %s" % e)


def _gbench_entries(doc, base):
    """Entries of Google Benchmark JSON belonging to benchmark `base` (e.g. BM_X/8).

    Accepts the plain name and suffixed names (BM_X/8/real_time, BM_X/8/min_time:...),
    never BM_X/80. Returns (iteration_entries, aggregate_entries_by_name)."""
    iters, aggs = [], {}
    for b in doc.get("benchmarks", []):
        if not isinstance(b, dict):
            continue
        run_name = b.get("run_name") or b.get("name", "")
        if b.get("run_type") == "aggregate" and "run_name" not in b:
            # Old format without run_name: strip the _mean/_median/... suffix.
            run_name = re.sub(r"_(mean|median|stddev|cv)$", "", run_name)
        if run_name != base and not run_name.startswith(base + "/"):
            continue
        if b.get("run_type") == "aggregate":
            aggs[b.get("aggregate_name", "")] = b
        else:
            iters.append(b)
    return iters, aggs


def _gbench_value(doc, base, field):
    """One number for `field` of benchmark `base`: the median aggregate if the run had
    repetitions, else the median of the iteration entries (normally exactly one)."""
    iters, aggs = _gbench_entries(doc, base)
    errors = [b.get("error_message", "error") for b in iters if b.get("error_occurred")]
    if errors:
        raise ParseError("%s reported an error: %s" % (base, errors[0]))
    if "median" in aggs:
        chosen = [aggs["median"]]
    elif iters:
        chosen = iters
    else:
        names = sorted({b.get("name", "?") for b in doc.get("benchmarks", [])
                        if isinstance(b, dict)})
        raise ParseError("%s not found in the benchmark JSON (found: %s)"
                         % (base, ", ".join(names) or "no benchmarks"))
    values = []
    for b in chosen:
        if field not in b:
            raise ParseError("%s has no %r field" % (base, field))
        value = float(b[field])
        if field == "real_time":
            unit = b.get("time_unit", "ns")
            if unit not in _TIME_UNIT_TO_US:
                raise ParseError("%s: unknown time_unit %r" % (base, unit))
            value *= _TIME_UNIT_TO_US[unit]
        values.append(value)
    return statistics.median(values), len(iters), sorted(aggs)


def parse_softfab_json(text):
    """Google Benchmark JSON -> softfab's numbers.

    msg_rate          BM_TaggedMessageRate/8 items_per_second (8-byte tagged msgs/s)
    half_rtt_us       BM_TaggedPingPong/8 real_time converted to microseconds
    Either may be None with the reason in errors[...]; the caller decides what is fatal."""
    doc = _extract_json_object(text)
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise ParseError("not Google Benchmark JSON (no 'benchmarks' list)")
    out = {"msg_rate": None, "half_rtt_us": None, "errors": {},
           "context": {k: doc.get("context", {}).get(k)
                       for k in ("date", "host_name", "num_cpus", "mhz_per_cpu",
                                 "load_avg", "library_build_type")}}
    try:
        out["msg_rate"], n, aggs = _gbench_value(doc, RATE_BENCH, "items_per_second")
        out["msg_rate_runs"], out["msg_rate_aggregates"] = n, aggs
    except ParseError as e:
        out["errors"]["msg_rate"] = str(e)
    try:
        out["half_rtt_us"], n, aggs = _gbench_value(doc, PINGPONG_BENCH, "real_time")
        out["half_rtt_runs"], out["half_rtt_aggregates"] = n, aggs
    except ParseError as e:
        out["errors"]["half_rtt_us"] = str(e)
    return out


_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|inf|nan)"
_UCX_FINAL_RE = re.compile(r"^\s*Final:\s+" + r"\s+".join([_NUM] * 8) + r"\s*$", re.M)


def _num(s):
    return float(s.replace(",", ""))


def parse_ucx_perftest(text):
    """ucx_perftest client output (default table format) -> the 'Final:' row.

    Columns of the Final row: iterations; latency-or-overhead (usec) 50%ile, average,
    overall; bandwidth (MB/s) average, overall; message rate (msg/s) average, overall.
    'average' is the last report interval, 'overall' the whole run. For ping-pong tests
    (tag_lat) latency = half round trip and msg rate = 2 / round trip; for tag_bw the usec
    columns are per-message send overhead."""
    m = None
    for m in _UCX_FINAL_RE.finditer(text):
        pass  # keep the last Final row
    if m is None:
        errs = [l.strip() for l in text.splitlines() if "ERROR" in l or "error" in l]
        raise ParseError("no 'Final:' result row in ucx_perftest output"
                         + (": " + errs[-1] if errs else ""))
    v = [_num(x) for x in m.groups()]
    kind = "latency" if re.search(r"latency \(usec\)", text) else (
        "overhead" if re.search(r"overhead \(usec\)", text) else "unknown")
    return {
        "usec_kind": kind,
        "iterations": int(v[0]),
        "usec_median": v[1],
        "usec_average_last_interval": v[2],
        "usec_overall": v[3],
        "mb_per_s_average_last_interval": v[4],
        "mb_per_s_overall": v[5],
        "msg_rate_average_last_interval": v[6],
        "msg_rate_overall": v[7],
    }


_FI_ROW_RE = re.compile(
    r"^\s*(?P<bytes>[0-9.]+[kmg]?)\s+(?P<sent>[0-9]+[kmb]?)\s+(?P<ack>[=+-][0-9]+[kmb]?)\s+"
    r"(?P<total>[0-9.]+[kmg]?)\s+(?P<time>[0-9.]+)s\s+(?P<mbs>[0-9.]+|inf|nan)\s+"
    r"(?P<usec>[0-9.]+|inf|nan)\s+(?P<mxfers>[0-9.]+|inf|nan)\s*$", re.M)


def _size_from_str(s):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(s[-1:], 1)
    return int(round(float(s.rstrip("kmg")) * mult))


def _count_from_str(s):
    mult = {"k": 10 ** 3, "m": 10 ** 6, "b": 10 ** 9}.get(s[-1:], 1)
    return int(s.rstrip("kmb")) * mult


def parse_fi_pingpong(text, size=MSG_SIZE):
    """fi_pingpong output -> the result row for `size` bytes.

    usec/xfer = elapsed / iterations / 2 (half a round trip); Mxfers/sec = 1 / usec/xfer
    (printed with 2 decimals only, so the rate is recomputed from usec/xfer)."""
    rows = [m for m in _FI_ROW_RE.finditer(text) if _size_from_str(m.group("bytes")) == size]
    if not rows:
        errs = [l.strip() for l in text.splitlines() if "error" in l.lower() or "ret=" in l]
        raise ParseError("no %d-byte result row in fi_pingpong output" % size
                         + (": " + errs[-1] if errs else ""))
    m = rows[-1]
    usec = float(m.group("usec"))
    ack = m.group("ack")
    return {
        "bytes": size,
        "sent": _count_from_str(m.group("sent")),  # abbreviated by the tool (100k)
        "all_acked": ack.startswith("="),
        "ack_column": ack,
        "time_s": float(m.group("time")),
        "mb_per_s": float(m.group("mbs")),
        "usec_per_xfer": usec,  # half round trip
        "mxfers_per_s_printed": float(m.group("mxfers")),
        "pingpong_msg_rate": (1e6 / usec) if usec > 0 else None,
    }
