#!/usr/bin/env bash
# The shared simulated fabric on a busy machine: unmodified
#   fi_pingpong -p softfab -e rdm -m tagged -S all -I 10 -v
# as two processes under `softfab run` (every size from 0 bytes to 8 MiB, ten
# round trips each, data checked), alone and beside 1 and 2 busy loops
# (`sh -c 'while :; do :; done'`, each as busy as a compiler or another test
# binary). Prints each run's wall time, then per load the median and the
# spread (lowest to highest) of the rounds, which interleave the loads.
#   bash bench/simd/loaded_fi_pingpong.sh [ROUNDS]     (default 3)
# Needs fi_pingpong (apt-get install libfabric-bin). Builds --config=release
# (or SOFTFAB_BENCH_BUILD, say "-c opt"). Every figure is wall time: the
# machine should run nothing else.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
command -v fi_pingpong >/dev/null || {
  echo "needs fi_pingpong (apt-get install libfabric-bin)" >&2
  exit 2
}
read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
bazel build "${build[@]}" //tools:softfab //api/libfabric:libsoftfab-fi.so >&2
bin=$(bazel info "${build[@]}" bazel-bin 2>/dev/null)
export FI_PROVIDER_PATH=$bin/api/libfabric
args=(-p softfab -e rdm -m tagged -S all -I 10 -v)
port=$((49000 + RANDOM % 500))
results=$(mktemp)
out=$(mktemp)
loops=()
stop_loops() {
  if [ ${#loops[@]} -gt 0 ]; then kill "${loops[@]}" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  loops=()
}
trap 'stop_loops; rm -f "$results" "$out"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for busy in 0 1 2; do
    for ((i = 0; i < busy; ++i)); do
      sh -c 'while :; do :; done' &
      loops+=($!)
    done
    port=$((port + 1))
    start=$(date +%s%N)
    # The client starts once the server listens (fi_pingpong's own TCP).
    if timeout 600 "$bin/tools/softfab" run -- fi_pingpong "${args[@]}" -B "$port" : \
      sh -c "until grep -qE ':$(printf %04X "$port") [0-9A-F]+:0000 0A' /proc/net/tcp; do
             sleep 0.05; done; exec fi_pingpong ${args[*]} -P $port 127.0.0.1" \
      >"$out" 2>&1; then
      rc=ok
    else
      rc=failed
    fi
    end=$(date +%s%N)
    stop_loops
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", (b - a) / 1e9}')
    printf 'round %d, %d busy loops: %6.1f s (%s)\n' "$round" "$busy" "$secs" "$rc"
    [ "$rc" = ok ] || tail -n 5 "$out"
    echo "$busy $secs" >>"$results"
  done
done
echo
echo "busy loops   median s   spread s"
for busy in 0 1 2; do
  awk -v b="$busy" '$1 == b {print $2}' "$results" | sort -n |
    awk -v b="$busy" '{v[NR] = $1} END {
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%10d %10.1f   %.1f to %.1f\n", b, m, v[1], v[NR]}'
done
