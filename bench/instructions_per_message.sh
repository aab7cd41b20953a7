#!/usr/bin/env bash
# Instructions per 8-byte message through the whole stack (sf_* API, core and
# simulated HCA), counted by callgrind: the difference between runs of 40,000
# and 20,000 messages, divided by 20,000 (set-up cancels out).
#   bash bench/instructions_per_message.sh            # pingpong and stream
# Needs valgrind (apt-get install valgrind).
#
# Besides the whole path it prints where the instructions are, by source file
# (callgrind's self cost per file; bench/callgrind_by_file.py states the rule):
# softfab's own (api/ + core/, both sides of the exchange), the simulated HCA
# (backends/sim/), the libraries (libc, libstdc++) and the driving program. The
# binary is built with -g for the attribution; GCC's -g changes no code.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt --copt=-g //bench:fixed_count >&2
bin=$(bazel info -c opt --copt=-g bazel-bin 2>/dev/null)/bench/fixed_count
profile() {  # profile N MODE -> "part count" lines
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" \
    >/dev/null 2>&1
  python3 bench/callgrind_by_file.py "$out"
  rm -f "$out"
}
for mode in pingpong stream; do
  a=$(profile 20000 "$mode")
  b=$(profile 40000 "$mode")
  # Per part: (b - a) / 20000, in the order callgrind_by_file.py prints.
  per=$(join <(echo "$a" | sort) <(echo "$b" | sort) |
    awk '{printf "%s %d\n", $1, ($3 - $2) / 20000}')
  get() { echo "$per" | awk -v k="$1" '$1 == k {print $2}'; }
  echo "$mode: $(get total) instructions per message"
  echo "  softfab's own (api + core): $(( $(get api) + $(get core) ))" \
    "(api $(get api), core $(get core)); simulated HCA (backends/sim): $(get sim);" \
    "libraries: $(get libraries); driver (bench): $(get harness)"
done
