#!/usr/bin/env bash
# Runs one fuzz target with libFuzzer for a bounded time (what CI calls, and how to fuzz
# locally):  bash fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
# Builds //fuzz:TARGET with clang-14 under ASan + UBSan (--config=fuzz) in an output base
# of its own (so the gcc build's cache stays valid), then fuzzes starting from the seed
# corpus fuzz/corpus/TARGET. New inputs go to a scratch corpus (SOFTFAB_FUZZ_WORK, default
# a directory under ${TMPDIR:-/tmp}), not into the repository; a crash is written there as
# crash-* and the exit status is non-zero. Ends with one line:
#   fuzz TARGET: S s, N execs, pass|fail       (S: the seconds it really ran)
# Environment: CC (default clang-14), SOFTFAB_FUZZ_OUTPUT_BASE, SOFTFAB_FUZZ_WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
export CC=${CC:-clang-14}
output_base=${SOFTFAB_FUZZ_OUTPUT_BASE:-$HOME/.cache/softfab-fuzz/output_base}
work=${SOFTFAB_FUZZ_WORK:-${TMPDIR:-/tmp}/softfab-fuzz/$target}
mkdir -p "$work/corpus" "$work/artifacts"

bazel --output_base="$output_base" build --config=fuzz "//fuzz:$target" 2>&1 | tail -n 3
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  echo "fuzz $target: build failed, fail"
  exit 1
fi
bin="$(bazel --output_base="$output_base" info --config=fuzz bazel-bin 2>/dev/null)/fuzz/$target"

log="$work/fuzz.log"
start=$(date +%s)
# -rss_limit_mb: a run that grows past 2 GB is a finding (memory must stay bounded).
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "fuzz/corpus/$target" \
  >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
tail -n 25 "$log"
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [ "$rc" -eq 0 ]; then
  echo "fuzz $target: $elapsed s, ${execs:-0} execs, pass"
else
  echo "fuzz $target: $elapsed s, ${execs:-0} execs, fail (exit $rc; inputs in $work/artifacts)"
fi
exit "$rc"
