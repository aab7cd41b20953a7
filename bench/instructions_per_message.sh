#!/usr/bin/env bash
# Instructions per 8-byte message through the whole stack (sf_* API, core and
# simulated HCA), counted by callgrind: the difference between runs of 40,000
# and 20,000 messages, divided by 20,000 (set-up cancels out).
#   bash bench/instructions_per_message.sh            # pingpong and stream
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //bench:fixed_count >&2
bin=bazel-bin/bench/fixed_count
count() {  # count N MODE -> total instructions
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" \
    >/dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
  rm -f "$out"
}
for mode in pingpong stream; do
  a=$(count 20000 "$mode")
  b=$(count 40000 "$mode")
  echo "$mode: $(( (b - a) / 20000 )) instructions per message"
done
