"""The three measurements: softfab's benchmark (bazel run, a binary or a saved JSON),
ucx_perftest and fi_pingpong (repeated server/client runs), and the tool versions and
load average recorded beside them."""

import os
import re
import shutil
import subprocess
import sys

from .constants import BENCH_FILTER, LOOPBACK, MSG_SIZE, SOFTFAB_TARGET
from .parsers import ParseError, parse_fi_pingpong, parse_softfab_json, parse_ucx_perftest
from .processes import Spawned, free_loopback_port, run_server_client, tail


_MISSING_TARGET_PATTERNS = ("no such package", "no such target", "BUILD file not found",
                            "not declared in package", "couldn't find target")


def classify_softfab_failure(rc, stderr):
    """(message, target_missing) for a failed 'bazel run' of the benchmark."""
    hits = [l.strip() for l in stderr.splitlines()
            if any(p in l for p in _MISSING_TARGET_PATTERNS)]
    if hits:
        return ("%s does not exist yet; softfab's column is pending (bazel: %s)"
                % (SOFTFAB_TARGET, hits[-1]), True)
    return "exited with status %s: %s" % (rc, tail(stderr)), False


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
        # The production build (.bazelrc: -O3, link-time optimization).
        cmd = [bazel, "run", "--config=release", SOFTFAB_TARGET, "--"] + flags
        res["source"] = "bazel run --config=release %s" % SOFTFAB_TARGET
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


def _client_failed(series, raw, error):
    """A client run without a result row: the series fails with the run's error (or the
    parse error) and the last lines the client printed."""
    why = raw["error"] or str(error)
    series.fail("%s (%s)" % (why, tail(raw.get("client_stdout", "") + "\n"
                                       + raw.get("client_stderr", ""), 2)))


def _unless_run_failed(series, parsed, raw):
    """`parsed`, or None (the series fails) when the run itself reported an error."""
    if parsed is not None and raw["error"]:
        series.fail(raw["error"])
        return None
    return parsed


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
        _client_failed(series, raw, e)
    return _unless_run_failed(series, parsed, raw), raw


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
        _client_failed(series, raw, e)
    return _unless_run_failed(series, parsed, raw), raw


def _tool_version(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=10, stdin=subprocess.DEVNULL)
        return p.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError) as e:
        return "unknown (%s)" % e


def tool_version(cmd, pattern, name):
    if not shutil.which(cmd[0]):
        return "%s (version unknown: %s not found)" % (name, cmd[0])
    m = re.search(pattern, _tool_version(cmd))
    return "%s %s" % (name, m.group(1)) if m else "%s (version unknown)" % name


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None
