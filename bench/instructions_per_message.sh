#!/usr/bin/env bash
# Instructions per 8-byte message through the whole stack (sf_* API, core and
# simulated HCA), counted by callgrind: the difference between runs of 40,000
# and 20,000 messages, divided by 20,000 (set-up cancels out).
#   bash bench/instructions_per_message.sh            # pingpong and stream
#   bash bench/instructions_per_message.sh --wide     # and 64 B, 4 KiB (eager)
#        and 64 KiB (rendezvous), tagged and untagged, RDM and MSG endpoints
#        (1,000 and 2,000 messages each: the large sizes run slowly under
#        callgrind)
# Needs valgrind (apt-get install valgrind).
#
# It measures the production build, --config=release (-O3 and link-time
# optimization, .bazelrc); SOFTFAB_BENCH_BUILD="-c opt" measures the plain
# optimized build instead.
#
# Besides the whole path it prints where the instructions are, by source file
# (callgrind's self cost per file; bench/callgrind_by_file.py states the rule):
# softfab's own (api/ + core/, both sides of the exchange), the simulated HCA
# (backends/sim/), the libraries (libc, libstdc++) and the driving program. The
# binary is built with -g for the attribution (also at link, where link-time
# optimization generates the code); GCC's -g changes no code.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
bazel build "${build[@]}" --copt=-g --linkopt=-g //bench:fixed_count >&2
bin=$(bazel info "${build[@]}" --copt=-g --linkopt=-g bazel-bin 2>/dev/null)/bench/fixed_count
profile() {  # profile N MODE [SIZE KIND EP] -> "part count" lines
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$@" \
    >/dev/null 2>&1
  python3 bench/callgrind_by_file.py "$out"
  rm -f "$out"
}
# per A B ARGS...: per-part instructions per message, (run of B - run of A) /
# (B - A), in the order callgrind_by_file.py prints.
per() {
  local a=$1 b=$2
  shift 2
  local pa pb
  pa=$(profile "$a" "$@")
  pb=$(profile "$b" "$@")
  join <(echo "$pa" | sort) <(echo "$pb" | sort) |
    awk -v d=$((b - a)) '{printf "%s %d\n", $1, ($3 - $2) / d}'
}
get() { echo "$1" | awk -v k="$2" '$1 == k {print $2}'; }
for mode in pingpong stream; do
  p=$(per 20000 40000 "$mode")
  echo "$mode: $(get "$p" total) instructions per message"
  echo "  softfab's own (api + core): $(( $(get "$p" api) + $(get "$p" core) ))" \
    "(api $(get "$p" api), core $(get "$p" core)); simulated HCA (backends/sim): $(get "$p" sim);" \
    "libraries: $(get "$p" libraries); driver (bench): $(get "$p" harness)"
done
[ "${1:-}" = --wide ] || exit 0
echo
printf '%-8s %-9s %-4s %-9s %8s %8s %8s\n' size kind ep mode whole own sim
for size in 64 4096 65536; do
  for kind in tagged untagged; do
    for ep in rdm msg; do
      for mode in pingpong stream; do
        p=$(per 1000 2000 "$mode" "$size" "$kind" "$ep")
        printf '%-8s %-9s %-4s %-9s %8d %8d %8d\n' "$size" "$kind" "$ep" "$mode" \
          "$(get "$p" total)" $(( $(get "$p" api) + $(get "$p" core) )) "$(get "$p" sim)"
      done
    done
  done
done
