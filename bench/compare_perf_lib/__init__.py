"""Helpers of bench/compare_perf.py, one concern per module:

  constants    what is measured: benchmark names, message size, loopback, the targets
  parsers      the tools' outputs -> numbers (pure; tested by bench/compare_perf_test.py)
  processes    children in their own process groups, with timeouts and no leftovers
  measure      the three measurements (softfab, ucx_perftest, fi_pingpong) and tool versions
  report       numbers -> ratios, verdicts and the printed table (pure)"""
