#!/usr/bin/env bash
# Instructions per 8-byte message through libfabric (fi_* calls, Debian's
# libfabric.so.1, softfab's provider, the sf_* API, core and simulated HCA)
# against the same messages through sf_* directly (bench/fixed_count), counted
# by callgrind as bench/instructions_per_message.sh does: runs of 40,000 and
# 20,000 messages, difference / 20,000. Prints both and the overhead.
#   bash bench/libfabric/instructions_per_message.sh
# Needs valgrind. Builds --config=release (or SOFTFAB_BENCH_BUILD, say
# "-c opt").
set -euo pipefail
cd "$(dirname "$0")/../.."
read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
bazel build "${build[@]}" //bench:fixed_count //bench/libfabric:fi_fixed_count \
  //api/libfabric:libsoftfab-fi.so >&2
bin=$(bazel info "${build[@]}" bazel-bin 2>/dev/null)
export FI_PROVIDER_PATH=$bin/api/libfabric
count() {  # count BINARY N MODE -> total instructions
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1" "$2" "$3" \
    >/dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
  rm -f "$out"
}
for mode in pingpong stream; do
  sf=$(( ($(count "$bin/bench/fixed_count" 40000 "$mode") -
          $(count "$bin/bench/fixed_count" 20000 "$mode")) / 20000 ))
  fi=$(( ($(count "$bin/bench/libfabric/fi_fixed_count" 40000 "$mode") -
          $(count "$bin/bench/libfabric/fi_fixed_count" 20000 "$mode")) / 20000 ))
  echo "$mode: sf_* $sf, through libfabric $fi instructions per message" \
    "($(awk -v a="$sf" -v b="$fi" 'BEGIN {printf "%+.1f%%", (b - a) * 100 / a}'))"
done
