#!/usr/bin/env python3
"""Side-by-side speed comparison: softfab vs UCX vs libfabric, 8-byte tagged messages.

One invocation measures, on the same machine and one after the other:

  softfab    `bazel run -c opt //bench:fabric_benchmark -- --benchmark_format=json
             --benchmark_filter=...` (Google Benchmark JSON on stdout), or a saved JSON
             given with --softfab-json.
               BM_TaggedMessageRate/8  items_per_second = 8-byte tagged messages per second
               BM_TaggedPingPong/8     real_time (in time_unit) = one half round trip
  UCX        ucx_perftest (Debian ucx-utils), UCP tag matching over shared memory
             (UCX_TLS=posix,self by default), server and client on 127.0.0.1:
               -t tag_bw  -> "message rate (msg/s)", column "overall" (whole run)
               -t tag_lat -> "latency (usec)", columns 50%ile and "overall" (whole run)
  libfabric  fi_pingpong (Debian libfabric-bin), provider shm, RDM endpoint, tagged mode,
             server and client on 127.0.0.1:
               usec/xfer (and Mxfers/sec = 1 / usec/xfer)

What each tool's "latency" is (checked in the sources of the installed versions and against
the numbers they print; see bench/README.md):
  * ucx_perftest tag_lat: a ping-pong; ucx_perf_calc_result() divides the time per
    iteration (one full round trip) by 2 for ping-pong tests, so "latency" is HALF a round
    trip, i.e. one-way. Its message rate in the latency test is likewise 2 / round trip.
    For tag_bw (a stream) the factor is 1: "overhead" is sender time per message and
    "message rate" is messages per second over the whole run ("overall") or over the last
    report interval ("average").
  * fi_pingpong: show_perf(..., xfers_per_iter = 2): usec/xfer = elapsed / iterations / 2,
    i.e. HALF a round trip (one-way); Mxfers/sec = 1 / usec/xfer, a ping-pong rate, not a
    streaming message rate. (Verified here: "time" / (2 x #sent) equals usec/xfer.)
  * softfab BM_TaggedPingPong/8: by the benchmark's contract real_time is one half round
    trip.

Ratios printed (issue 4, "Speed"):
  softfab message rate / UCX tag_bw message rate        target >= 1
  softfab half round trip / fi_pingpong half round trip target <= 1

Safety: every subprocess runs with a timeout in its own process group and is killed with
its group on timeout, failure or interruption; servers are killed when their client ends;
clients connect only to 127.0.0.1 (the tools' servers listen on INADDR_ANY, which neither
tool lets us change, for the few seconds of a run). Iteration counts are bounded.

Exit status: 0, except 1 when softfab's own numbers are missing and were not given by file
(--softfab-json), and 2 for a bad command line or an unreadable/unparsable --softfab-json.
A missing or failing UCX / libfabric tool is reported in the table, never invented, and does
not change the exit status.

Python 3 standard library only.
"""

import argparse
import atexit
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

SOFTFAB_TARGET = "//bench:fabric_benchmark"
RATE_BENCH = "BM_TaggedMessageRate/8"
PINGPONG_BENCH = "BM_TaggedPingPong/8"
# Matches exactly the two /8 instances (also with suffixes such as /real_time), not /80.
BENCH_FILTER = "^BM_Tagged(MessageRate|PingPong)/8(/|$)"
MSG_SIZE = 8
LOOPBACK = "127.0.0.1"

RATE_TARGET = 1.0  # softfab rate / UCX rate >= 1
LATENCY_TARGET = 1.0  # softfab half RTT / fi_pingpong half RTT <= 1


class ParseError(Exception):
    """A tool's output does not contain the numbers we need."""


# --------------------------------------------------------------------------------------
# Parsers (pure functions; exercised by bench/compare_perf_test.py with captured output)
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Process handling: own process groups, timeouts, no leftovers
# --------------------------------------------------------------------------------------

_LIVE = set()


def _kill_group(proc, grace=2.0):
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    else:
        # The leader exited; make sure nothing it started lingers in its group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    _LIVE.discard(proc)


def _cleanup_all():
    for proc in list(_LIVE):
        _kill_group(proc, grace=0.5)


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


class Spawned:
    """A child in its own session/process group with stdout+stderr captured to files."""

    def __init__(self, cmd, env=None, cwd=None):
        import tempfile
        self.cmd = cmd
        self._out = tempfile.TemporaryFile()
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err, env=env, cwd=cwd,
                                     start_new_session=True)
        _LIVE.add(self.proc)
        self.timed_out = False

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
        self.kill()
        return self.proc.returncode

    def kill(self):
        _kill_group(self.proc)

    def output(self):
        res = []
        for f in (self._out, self._err):
            f.seek(0)
            res.append(f.read().decode("utf-8", "replace"))
        return res

    def close(self):
        self.kill()
        self._out.close()
        self._err.close()


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _listening_inodes(port):
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 9 and parts[3] == "0A" and \
                            int(parts[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(parts[9])
        except OSError:
            return None
    return inodes


def _pid_socket_inodes(pid):
    res = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                res.add(link[8:-1])
    except OSError:
        return None
    return res


def wait_until_listening(server, port, timeout):
    """Waits until `server` itself listens on `port` (checked in /proc, without connecting:
    both tools' servers accept exactly one connection). Returns None or an error string."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return "server exited early with status %s" % server.proc.returncode
        listening = _listening_inodes(port)
        mine = _pid_socket_inodes(server.proc.pid)
        if listening is None or mine is None:
            time.sleep(1.0)  # no /proc: give the server a moment and hope for the best
            return None
        if listening & mine:
            return None
        time.sleep(0.05)
    return "server did not listen on port %d within %.0f s" % (port, timeout)


def run_server_client(server_cmd, client_cmd, port, env, timeout):
    """Starts the server, waits for it to listen, runs the client with a timeout, then
    gives the server a few seconds to finish by itself and kills it (and its group)."""
    res = {"server_cmd": server_cmd, "client_cmd": client_cmd, "error": None}
    server = client = None
    try:
        server = Spawned(server_cmd, env=env)
        err = wait_until_listening(server, port, min(15.0, timeout))
        if err:
            res["error"] = err
            return res
        client = Spawned(client_cmd, env=env)
        rc = client.wait(timeout)
        res["client_rc"] = rc
        if client.timed_out:
            res["error"] = "client timed out after %.0f s (killed)" % timeout
        elif rc != 0:
            res["error"] = "client exited with status %s" % rc
        server.wait(5.0 if not client.timed_out else 0.1)
        res["server_rc"] = server.proc.returncode
        res["server_killed"] = server.timed_out
        return res
    finally:
        for name, sp in (("client", client), ("server", server)):
            if sp is not None:
                sp.kill()
                res[name + "_stdout"], res[name + "_stderr"] = sp.output()
                sp.close()


def _tail(text, n=3):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])


# --------------------------------------------------------------------------------------
# The three measurements
# --------------------------------------------------------------------------------------

_MISSING_TARGET_PATTERNS = ("no such package", "no such target", "BUILD file not found",
                            "not declared in package", "couldn't find target")


def classify_softfab_failure(rc, stderr):
    """(message, target_missing) for a failed 'bazel run' of the benchmark."""
    hits = [l.strip() for l in stderr.splitlines()
            if any(p in l for p in _MISSING_TARGET_PATTERNS)]
    if hits:
        return ("%s does not exist yet; softfab's column is pending (bazel: %s)"
                % (SOFTFAB_TARGET, hits[-1]), True)
    return "exited with status %s: %s" % (rc, _tail(stderr)), False


def measure_softfab(args, repo_root):
    """Returns (result dict, given_by_file)."""
    if args.softfab_json:
        try:
            with open(args.softfab_json) as f:
                text = f.read()
        except OSError as e:
            raise SystemExit("compare_perf: cannot read --softfab-json: %s" % e)
        try:
            res = parse_softfab_json(text)
        except ParseError as e:
            print("compare_perf: --softfab-json %s: %s" % (args.softfab_json, e),
                  file=sys.stderr)
            sys.exit(2)
        res["source"] = "file %s" % args.softfab_json
        return res, True

    res = {"msg_rate": None, "half_rtt_us": None, "errors": {}}
    # The same number of runs as the external tools get, median reported.
    flags = ["--benchmark_format=json", "--benchmark_filter=" + BENCH_FILTER,
             "--benchmark_repetitions=%d" % max(1, args.repeat)]
    if args.softfab_binary:
        cmd = [os.path.abspath(args.softfab_binary)] + flags
        res["source"] = "binary %s" % args.softfab_binary
    else:
        bazel = shutil.which(args.bazel) or (args.bazel if os.path.exists(args.bazel) else None)
        if not bazel:
            res["errors"]["run"] = "bazel not found (%s)" % args.bazel
            return res, False
        cmd = [bazel, "run", "-c", "opt", SOFTFAB_TARGET, "--"] + flags
        res["source"] = "bazel run -c opt %s" % SOFTFAB_TARGET
    res["cmd"] = cmd
    print("softfab: running %s ..." % " ".join(cmd), file=sys.stderr, flush=True)
    sp = Spawned(cmd, cwd=repo_root)
    try:
        rc = sp.wait(args.softfab_timeout)
        out, err = sp.output()
    finally:
        sp.close()
    res["stdout"], res["stderr"] = out, err
    if sp.timed_out:
        res["errors"]["run"] = "timed out after %.0f s (killed)" % args.softfab_timeout
        return res, False
    if rc != 0:
        res["errors"]["run"], res["target_missing"] = classify_softfab_failure(rc, err)
        return res, False
    try:
        parsed = parse_softfab_json(out)
    except ParseError as e:
        res["errors"]["run"] = str(e)
        return res, False
    parsed.update({k: res[k] for k in ("source", "cmd", "stdout", "stderr")})
    return parsed, False


def _median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


class ToolSeries:
    """Repeated runs of one server/client test; stops repeating after the first failure."""

    def __init__(self, name, tool_path, missing_reason=None):
        self.name = name
        self.tool_path = tool_path
        self.runs = []
        self.failures = []
        self.unavailable = missing_reason  # skipped or not installed: not a failure
        self.disabled = missing_reason

    def record(self, parsed, raw, save_dir, rep):
        if save_dir:
            base = os.path.join(save_dir, "%s.rep%d" % (self.name, rep))
            for key in ("client_stdout", "client_stderr", "server_stdout", "server_stderr"):
                if raw.get(key):
                    with open("%s.%s.txt" % (base, key), "w") as f:
                        f.write(raw[key])
        if parsed is not None:
            self.runs.append(parsed)

    def fail(self, why):
        self.failures.append(why)
        self.disabled = why

    def summary(self):
        if self.runs:
            status = "ok"
        elif self.unavailable:
            status = self.unavailable
        else:
            status = "failed: " + (self.disabled or "no runs")
        return {"runs": self.runs, "failures": self.failures, "status": status}


def run_ucx(series, test, iters, args, env):
    port = args.ucx_port or free_loopback_port()
    base = [series.tool_path, "-p", str(port)]
    client = [series.tool_path, LOOPBACK, "-p", str(port), "-t", test, "-s", str(MSG_SIZE),
              "-n", str(iters)]
    raw = run_server_client(base, client, port, env, args.timeout)
    parsed = None
    try:
        parsed = parse_ucx_perftest(raw.get("client_stdout", "") + raw.get("client_stderr", ""))
    except ParseError as e:
        why = raw["error"] or str(e)
        series.fail("%s (%s)" % (why, _tail(raw.get("client_stdout", "") + "\n"
                                            + raw.get("client_stderr", ""), 2)))
    if parsed is not None and raw["error"]:
        series.fail(raw["error"])
        parsed = None
    return parsed, raw


def run_fi(series, iters, args, env):
    port = args.fi_port or free_loopback_port()
    common = [series.tool_path, "-p", args.fi_provider, "-e", "rdm", "-m", args.fi_mode,
              "-S", str(MSG_SIZE), "-I", str(iters)]
    raw = run_server_client(common + ["-B", str(port)],
                            common + ["-P", str(port), LOOPBACK], port, env, args.timeout)
    parsed = None
    try:
        parsed = parse_fi_pingpong(raw.get("client_stdout", "") + raw.get("client_stderr", ""))
        try:
            parsed["server_usec_per_xfer"] = parse_fi_pingpong(
                raw.get("server_stdout", ""))["usec_per_xfer"]
        except ParseError:
            parsed["server_usec_per_xfer"] = None
    except ParseError as e:
        why = raw["error"] or str(e)
        series.fail("%s (%s)" % (why, _tail(raw.get("client_stdout", "") + "\n"
                                            + raw.get("client_stderr", ""), 2)))
    if parsed is not None and raw["error"]:
        series.fail(raw["error"])
        parsed = None
    return parsed, raw


def _tool_version(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=10, stdin=subprocess.DEVNULL)
        return p.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError) as e:
        return "unknown (%s)" % e


def _version(cmd, pattern, name):
    if not shutil.which(cmd[0]):
        return "%s (version unknown: %s not found)" % (name, cmd[0])
    m = re.search(pattern, _tool_version(cmd))
    return "%s %s" % (name, m.group(1)) if m else "%s (version unknown)" % name


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Measure softfab, ucx_perftest (tag_bw, tag_lat) and fi_pingpong (shm) "
                    "for 8-byte tagged messages and print them side by side with the "
                    "issue-4 ratios.")
    p.add_argument("--softfab-json", metavar="FILE",
                   help="read softfab's Google Benchmark JSON from FILE instead of running "
                        "bazel")
    p.add_argument("--softfab-binary", metavar="PATH",
                   help="run this already-built benchmark binary instead of 'bazel run' "
                        "(same arguments)")
    p.add_argument("--no-softfab", action="store_true",
                   help="do not measure softfab (only the other tools; exit status 0)")
    p.add_argument("--bazel", default="bazel", help="bazel executable (default: bazel)")
    p.add_argument("--softfab-timeout", type=float, default=900.0,
                   help="seconds for 'bazel run' incl. a build (default 900)")
    p.add_argument("--iters", type=int, default=100000,
                   help="ping-pong iterations for ucx_perftest tag_lat and fi_pingpong "
                        "(default 100000)")
    p.add_argument("--bw-iters", type=int, default=1000000,
                   help="messages for ucx_perftest tag_bw (default 1000000)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each external test; the median is reported (default 3)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds per external client run before it and its server are "
                        "killed (default 30)")
    p.add_argument("--ucx-tls", default="posix,self",
                   help="UCX_TLS for ucx_perftest (default posix,self: shared memory)")
    p.add_argument("--ucx-port", type=int, default=0,
                   help="TCP port for ucx_perftest's setup connection (default: a free one)")
    p.add_argument("--fi-port", type=int, default=0,
                   help="control port for fi_pingpong (default: a free one)")
    p.add_argument("--fi-provider", default="shm", help="libfabric provider (default shm)")
    p.add_argument("--fi-mode", choices=("tagged", "msg"), default="tagged",
                   help="fi_pingpong transmit mode (default tagged, like softfab's benchmark)")
    p.add_argument("--ucx-perftest", default="ucx_perftest", help="ucx_perftest executable")
    p.add_argument("--fi-pingpong", default="fi_pingpong", help="fi_pingpong executable")
    p.add_argument("--skip-ucx", action="store_true", help="do not run ucx_perftest")
    p.add_argument("--skip-fi", action="store_true", help="do not run fi_pingpong")
    p.add_argument("--json", metavar="OUT", help="also write all numbers to OUT as JSON")
    p.add_argument("--save-raw", metavar="DIR",
                   help="save every tool's raw stdout/stderr under DIR")
    p.add_argument("--repo-root", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), help="where to run bazel (default: this script's ../)")
    args = p.parse_args(argv)
    for name, lo, hi in (("iters", 1, 10_000_000), ("bw_iters", 1, 100_000_000),
                         ("repeat", 1, 20)):
        v = getattr(args, name)
        if not lo <= v <= hi:
            p.error("--%s must be in [%d, %d]" % (name.replace("_", "-"), lo, hi))
    if not 0 < args.timeout <= 600 or not 0 < args.softfab_timeout <= 7200:
        p.error("timeouts must be positive (and --timeout <= 600)")
    for port in (args.ucx_port, args.fi_port):
        if port and not 1024 <= port <= 65535:
            p.error("ports must be in [1024, 65535]")
    if args.softfab_json and (args.softfab_binary or args.no_softfab):
        p.error("--softfab-json excludes --softfab-binary and --no-softfab")
    return args


def _which(name):
    return shutil.which(name) or (name if os.path.isfile(name) and os.access(name, os.X_OK)
                                  else None)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    atexit.register(_cleanup_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if args.save_raw:
        os.makedirs(args.save_raw, exist_ok=True)

    ucx_path = _which(args.ucx_perftest)
    fi_path = _which(args.fi_pingpong)
    meta = {
        "time_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(), "cpus": os.cpu_count(),
        "loadavg_start": _loadavg(), "repeat": args.repeat, "iters": args.iters,
        "bw_iters": args.bw_iters, "msg_size": MSG_SIZE, "ucx_tls": args.ucx_tls,
        "fi_provider": args.fi_provider, "fi_mode": args.fi_mode,
        "ucx_version": _version(["ucx_info", "-v"], r"Version\s+(\S+)", "UCX"),
        "fi_version": _version(["fi_info", "--version"], r"libfabric:\s+(\S+)", "libfabric"),
    }

    # softfab first: a bazel build, if any, is over before the timing-sensitive tools run.
    if args.no_softfab:
        softfab, by_file = {"msg_rate": None, "half_rtt_us": None,
                            "errors": {"run": "not measured (--no-softfab)"},
                            "source": None, "not_measured": True}, False
    else:
        softfab, by_file = measure_softfab(args, args.repo_root)
        if args.save_raw and softfab.get("stdout") is not None:
            with open(os.path.join(args.save_raw, "softfab.stdout.txt"), "w") as f:
                f.write(softfab["stdout"])
            with open(os.path.join(args.save_raw, "softfab.stderr.txt"), "w") as f:
                f.write(softfab.get("stderr", ""))

    def missing(path, name, skip):
        if skip:
            return "skipped (command line)"
        if not path:
            return "%s not installed (apt-get install %s)" % (
                name, "ucx-utils" if name == "ucx_perftest" else "libfabric-bin")
        return None

    ucx_bw = ToolSeries("ucx_tag_bw", ucx_path, missing(ucx_path, "ucx_perftest", args.skip_ucx))
    ucx_lat = ToolSeries("ucx_tag_lat", ucx_path, ucx_bw.disabled)
    fi = ToolSeries("fi_pingpong", fi_path, missing(fi_path, "fi_pingpong", args.skip_fi))

    ucx_env = dict(os.environ, UCX_TLS=args.ucx_tls)
    fi_env = dict(os.environ)
    # Interleave the tools so slow phases of a busy machine hit all of them alike.
    for rep in range(args.repeat):
        for series, label in ((ucx_bw, "ucx_perftest -t tag_bw"),
                              (ucx_lat, "ucx_perftest -t tag_lat"),
                              (fi, "fi_pingpong")):
            if series.disabled:
                continue
            print("run %d/%d: %s ..." % (rep + 1, args.repeat, label), file=sys.stderr,
                  flush=True)
            if series is fi:
                parsed, raw = run_fi(series, args.iters, args, fi_env)
            else:
                test = "tag_bw" if series is ucx_bw else "tag_lat"
                iters = args.bw_iters if series is ucx_bw else args.iters
                parsed, raw = run_ucx(series, test, iters, args, ucx_env)
            series.record(parsed, raw, args.save_raw, rep)

    meta["loadavg_end"] = _loadavg()
    report = build_report(softfab, ucx_bw.summary(), ucx_lat.summary(), fi.summary(), meta)
    la = meta["loadavg_start"]
    ran_external = any(s.runs for s in (ucx_bw, ucx_lat, fi))
    if ran_external and la and meta["cpus"] and la[0] > max(0.5, meta["cpus"] - 2):
        report["notes"].append(
            "the machine was busy (1-minute load %.2f on %d CPUs): ucx_perftest and "
            "fi_pingpong run two busy-polling processes and need two idle cores, so their "
            "numbers are noisy (preempted phases show up as multi-millisecond stalls)"
            % (la[0], meta["cpus"]))
    print(format_table(report))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "softfab-compare-perf/1", "meta": meta,
                       "numbers": report["numbers"], "ratios": report["ratios"],
                       "table": [list(r) for r in report["rows"]], "notes": report["notes"]},
                      f, indent=2, sort_keys=True, default=str)
            f.write("\n")

    softfab_missing = softfab.get("msg_rate") is None or softfab.get("half_rtt_us") is None
    if softfab_missing and not by_file and not args.no_softfab:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
