"""What compare_perf measures: softfab's benchmark target and names, the message size, the
loopback address the external tools use, and the issue-4 targets of the two ratios."""

SOFTFAB_TARGET = "//bench:fabric_benchmark"
RATE_BENCH = "BM_TaggedMessageRate/8"
PINGPONG_BENCH = "BM_TaggedPingPong/8"
# Matches exactly the two /8 instances (also with suffixes such as /real_time), not /80.
BENCH_FILTER = "^BM_Tagged(MessageRate|PingPong)/8(/|$)"
MSG_SIZE = 8
LOOPBACK = "127.0.0.1"

RATE_TARGET = 1.0  # softfab rate / UCX rate >= 1
LATENCY_TARGET = 1.0  # softfab half RTT / fi_pingpong half RTT <= 1
