#!/usr/bin/env python3
"""Self-test of bench/compare_perf.py: parsers fed with captured real tool output.

bench/testdata/ holds
  ucx_perftest_*.txt         real ucx_perftest 1.13.1 client output (UCX_TLS=posix,self;
                             cma,self for the failure case) from this project's machine
  fi_pingpong_*.txt          real fi_pingpong 1.17.0 output (-p shm -e rdm -m tagged -S 8)
  bazel_run_*.stderr.txt     real 'bazel run -c opt //bench:fabric_benchmark' stderr from
                             before the target existed
  softfab_fake_*.json        Google Benchmark 1.7.1 JSON written by a dummy binary with the
                             contract's benchmark names; the numbers are FAKE round values

Run: python3 bench/compare_perf_test.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from compare_perf_lib import measure, parsers, report  # noqa: E402


def data(name):
    with open(os.path.join(HERE, "testdata", name)) as f:
        return f.read()


class UcxParserTest(unittest.TestCase):
    def test_tag_bw_uses_final_row_overall(self):
        r = parsers.parse_ucx_perftest(data("ucx_perftest_tag_bw_8B.txt"))
        self.assertEqual(r["usec_kind"], "overhead")
        self.assertEqual(r["iterations"], 1000000)
        # Final row: 0.125 0.507 3.465 | 15.05 2.20 | 1973236 288571
        self.assertEqual(r["msg_rate_overall"], 288571)
        self.assertEqual(r["msg_rate_average_last_interval"], 1973236)
        self.assertAlmostEqual(r["usec_overall"], 3.465)
        self.assertAlmostEqual(r["mb_per_s_overall"], 2.20)

    def test_tag_lat_half_round_trip(self):
        r = parsers.parse_ucx_perftest(data("ucx_perftest_tag_lat_8B.txt"))
        self.assertEqual(r["usec_kind"], "latency")
        self.assertEqual(r["iterations"], 100000)
        self.assertAlmostEqual(r["usec_median"], 0.083)
        self.assertAlmostEqual(r["usec_overall"], 0.168)
        self.assertEqual(r["msg_rate_overall"], 5968203)
        # In a ping-pong test UCX reports msg rate = 1 / half round trip: consistent.
        self.assertAlmostEqual(1e6 / r["usec_overall"] / r["msg_rate_overall"], 1.0, delta=0.01)

    def test_failure_has_no_numbers(self):
        with self.assertRaises(parsers.ParseError) as ctx:
            parsers.parse_ucx_perftest(data("ucx_perftest_cma_unreachable.txt"))
        self.assertIn("Destination is unreachable", str(ctx.exception))

    def test_thousands_separators(self):
        r = parsers.parse_ucx_perftest("Final:   1,000,000  0.1 0.2 0.3  1.5 1.6  1,234,567 7,654,321\n")
        self.assertEqual(r["iterations"], 1000000)
        self.assertEqual(r["msg_rate_overall"], 7654321)


class FiPingpongParserTest(unittest.TestCase):
    def test_client_row(self):
        r = parsers.parse_fi_pingpong(data("fi_pingpong_shm_tagged_8B_client.txt"))
        self.assertEqual(r["bytes"], 8)
        self.assertEqual(r["sent"], 100000)
        self.assertTrue(r["all_acked"])
        self.assertAlmostEqual(r["usec_per_xfer"], 1.21)
        self.assertAlmostEqual(r["time_s"], 0.24)
        self.assertAlmostEqual(r["mxfers_per_s_printed"], 0.82)
        self.assertAlmostEqual(r["pingpong_msg_rate"], 1e6 / 1.21)
        # usec/xfer is HALF a round trip: time / (2 * iterations), up to print rounding.
        self.assertAlmostEqual(r["time_s"] * 1e6 / (2 * r["sent"]), r["usec_per_xfer"],
                               delta=0.03)

    def test_server_and_busy_outputs(self):
        self.assertAlmostEqual(
            parsers.parse_fi_pingpong(data("fi_pingpong_shm_tagged_8B_server.txt"))["usec_per_xfer"],
            1.26)
        busy = parsers.parse_fi_pingpong(data("fi_pingpong_shm_tagged_8B_busy_client.txt"))
        self.assertAlmostEqual(busy["usec_per_xfer"], 13.34)
        self.assertAlmostEqual(busy["time_s"] * 1e6 / (2 * busy["sent"]),
                               busy["usec_per_xfer"], delta=0.05)

    def test_other_sizes_and_garbage(self):
        text = ("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
                "64      10      =10      1.2k        0.00s     21.69       2.95       0.34\n"
                "1k      10      +2       20k         0.00s    379.26       2.70       0.37\n")
        self.assertAlmostEqual(parsers.parse_fi_pingpong(text, size=64)["usec_per_xfer"], 2.95)
        r = parsers.parse_fi_pingpong(text, size=1024)
        self.assertFalse(r["all_acked"])
        with self.assertRaises(parsers.ParseError):
            parsers.parse_fi_pingpong(text, size=8)
        with self.assertRaises(parsers.ParseError):
            parsers.parse_fi_pingpong("fi_getinfo(): util/pingpong.c:1053, ret=-61 (No data available)")


class SoftfabJsonTest(unittest.TestCase):
    def test_single_run(self):
        r = parsers.parse_softfab_json(data("softfab_fake_benchmark.json"))
        self.assertEqual(r["errors"], {})
        self.assertEqual(r["msg_rate"], 12000000.0)  # not the /80 instance
        self.assertAlmostEqual(r["half_rtt_us"], 0.25)  # 250 ns, name has /real_time

    def test_repetitions_use_median_and_time_unit(self):
        r = parsers.parse_softfab_json(data("softfab_fake_repetitions.json"))
        self.assertEqual(r["errors"], {})
        self.assertEqual(r["msg_rate"], 10000000.0)
        self.assertAlmostEqual(r["half_rtt_us"], 0.3)  # time_unit us
        self.assertIn("median", r["msg_rate_aggregates"])

    def test_noise_around_json_and_missing_benchmark(self):
        doc = json.loads(data("softfab_fake_benchmark.json"))
        doc["benchmarks"] = [b for b in doc["benchmarks"]
                             if not b["name"].startswith("BM_TaggedPingPong")]
        r = parsers.parse_softfab_json("INFO: noise\n" + json.dumps(doc) + "\ntrailing\n")
        self.assertEqual(r["msg_rate"], 12000000.0)
        self.assertIsNone(r["half_rtt_us"])
        self.assertIn("BM_TaggedPingPong/8 not found", r["errors"]["half_rtt_us"])

    def test_ms_unit_and_error_entry(self):
        doc = {"benchmarks": [
            {"name": "BM_TaggedPingPong/8", "run_type": "iteration", "real_time": 0.002,
             "time_unit": "ms"},
            {"name": "BM_TaggedMessageRate/8", "run_type": "iteration", "real_time": 1,
             "time_unit": "ns", "error_occurred": True, "error_message": "boom"}]}
        r = parsers.parse_softfab_json(json.dumps(doc))
        self.assertAlmostEqual(r["half_rtt_us"], 2.0)
        self.assertIsNone(r["msg_rate"])
        self.assertIn("boom", r["errors"]["msg_rate"])

    def test_not_json(self):
        with self.assertRaises(parsers.ParseError):
            parsers.parse_softfab_json("ERROR: no such package 'bench'")

    def test_bazel_missing_target_is_recognised(self):
        msg, missing = measure.classify_softfab_failure(1, data("bazel_run_no_such_package.stderr.txt"))
        self.assertTrue(missing)
        self.assertIn("does not exist yet", msg)
        self.assertIn("no such package 'bench'", msg)
        msg, missing = measure.classify_softfab_failure(1, "ERROR: compile failed\n")
        self.assertFalse(missing)


class RatioAndReportTest(unittest.TestCase):
    def test_ratio_verdicts(self):
        r = report.ratio_verdict(12e6, 6e6, 1.0, True)
        self.assertAlmostEqual(r["value"], 2.0)
        self.assertEqual(r["verdict"], "meets target")
        self.assertEqual(report.ratio_verdict(5e6, 6e6, 1.0, True)["verdict"], "misses target")
        self.assertEqual(report.ratio_verdict(6e6, 6e6, 1.0, True)["verdict"], "meets target")
        self.assertEqual(report.ratio_verdict(0.25, 1.21, 1.0, False)["verdict"], "meets target")
        self.assertEqual(report.ratio_verdict(2.0, 1.21, 1.0, False)["verdict"], "misses target")
        r = report.ratio_verdict(None, 1.0, 1.0, False, "softfab", "fi_pingpong")
        self.assertIsNone(r["value"])
        self.assertIn("no softfab number", r["verdict"])
        self.assertIn("not positive", report.ratio_verdict(1.0, 0.0, 1.0, True)["verdict"])

    def _series(self, runs, status="ok"):
        return {"runs": runs, "failures": [], "status": status}

    def test_report_from_captured_outputs(self):
        softfab = parsers.parse_softfab_json(data("softfab_fake_benchmark.json"))
        bw = parsers.parse_ucx_perftest(data("ucx_perftest_tag_bw_8B.txt"))
        lat = parsers.parse_ucx_perftest(data("ucx_perftest_tag_lat_8B.txt"))
        fi1 = parsers.parse_fi_pingpong(data("fi_pingpong_shm_tagged_8B_client.txt"))
        fi2 = parsers.parse_fi_pingpong(data("fi_pingpong_shm_tagged_8B_busy_client.txt"))
        fi3 = parsers.parse_fi_pingpong(data("fi_pingpong_shm_tagged_8B_server.txt"))
        rep = report.build_report(softfab, self._series([bw]), self._series([lat]),
                              self._series([fi1, fi2, fi3]), {"cpus": 2})
        rate = rep["ratios"]["softfab_rate_over_ucx_tag_bw_rate"]
        self.assertAlmostEqual(rate["value"], 12e6 / 288571)
        self.assertEqual(rate["verdict"], "meets target")
        lat_r = rep["ratios"]["softfab_half_rtt_over_fi_pingpong_half_rtt"]
        self.assertAlmostEqual(lat_r["value"], 0.25 / 1.26)  # median of 1.21, 13.34, 1.26
        self.assertEqual(lat_r["verdict"], "meets target")
        self.assertEqual(rep["numbers"]["fi_pingpong"]["half_rtt_us"], 1.26)
        self.assertEqual(rep["rows"][0][1], "12,000,000")
        self.assertEqual(rep["rows"][0][2], "288,571 (tag_bw)")
        text = report.format_table(rep)
        self.assertIn("meets target", text)
        self.assertNotIn("misses target", text)

    def test_missing_everything_never_invents_numbers(self):
        softfab = {"msg_rate": None, "half_rtt_us": None, "target_missing": True,
                   "errors": {"run": "//bench:fabric_benchmark does not exist yet"}}
        rep = report.build_report(softfab, self._series([], "skipped (command line)"),
                              self._series([], "ucx_perftest not installed (apt-get ...)"),
                              self._series([], "failed: client timed out"), {"cpus": 2})
        self.assertEqual(rep["rows"][0][1], "pending")
        self.assertEqual(rep["rows"][0][2], "skipped")
        self.assertEqual(rep["rows"][1][2], "not installed")
        self.assertEqual(rep["rows"][1][3], "FAILED")
        for r in rep["ratios"].values():
            self.assertIsNone(r["value"])
            self.assertTrue(r["verdict"].startswith("not computed"))
        text = report.format_table(rep)
        self.assertIn("does not exist yet", text)
        self.assertIn("client timed out", text)


class CommandLineTest(unittest.TestCase):
    """End to end without the external tools (skipped): exit status and --json."""

    def _run(self, *extra):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            p = subprocess.run([sys.executable, os.path.join(HERE, "compare_perf.py"),
                                "--skip-ucx", "--skip-fi", "--json", out] + list(extra),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            doc = None
            if os.path.exists(out):
                with open(out) as f:
                    doc = json.load(f)
            return p, doc

    def test_softfab_json_file(self):
        p, doc = self._run("--softfab-json",
                           os.path.join(HERE, "testdata", "softfab_fake_benchmark.json"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["numbers"]["softfab"]["msg_rate"], 12000000.0)
        self.assertIsNone(doc["numbers"]["ucx"]["tag_bw_msg_rate_overall"])
        self.assertIn(b"12,000,000", p.stdout)

    def test_bad_softfab_json_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write("not json")
            f.flush()
            p, _ = self._run("--softfab-json", f.name)
        self.assertEqual(p.returncode, 2)

    def test_softfab_missing_without_file_fails(self):
        p, doc = self._run("--bazel", "/nonexistent/bazel")
        self.assertEqual(p.returncode, 1)
        self.assertIn("bazel not found", doc["numbers"]["softfab"]["errors"]["run"])

    def test_no_softfab(self):
        p, _ = self._run("--no-softfab")
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main()
