#!/usr/bin/env python3
"""Side-by-side speed comparison: softfab vs UCX vs libfabric, 8-byte tagged messages.

One invocation measures, on the same machine and one after the other:

  softfab    `bazel run --config=release //bench:fabric_benchmark -- --benchmark_format=json
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

Python 3 standard library only. The helpers are in bench/compare_perf_lib/ (parsers,
processes, measure, report).
"""

import argparse
import atexit
import datetime
import json
import os
import shutil
import signal
import socket
import sys

from compare_perf_lib.constants import MSG_SIZE
from compare_perf_lib.measure import (ToolSeries, loadavg, measure_softfab, run_fi, run_ucx,
                                      tool_version)
from compare_perf_lib.processes import cleanup_all, on_signal
from compare_perf_lib.report import build_report, format_table


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
    atexit.register(cleanup_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if args.save_raw:
        os.makedirs(args.save_raw, exist_ok=True)

    ucx_path = _which(args.ucx_perftest)
    fi_path = _which(args.fi_pingpong)
    meta = {
        "time_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(), "cpus": os.cpu_count(),
        "loadavg_start": loadavg(), "repeat": args.repeat, "iters": args.iters,
        "bw_iters": args.bw_iters, "msg_size": MSG_SIZE, "ucx_tls": args.ucx_tls,
        "fi_provider": args.fi_provider, "fi_mode": args.fi_mode,
        "ucx_version": tool_version(["ucx_info", "-v"], r"Version\s+(\S+)", "UCX"),
        "fi_version": tool_version(["fi_info", "--version"], r"libfabric:\s+(\S+)", "libfabric"),
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

    meta["loadavg_end"] = loadavg()
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
