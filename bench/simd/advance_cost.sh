#!/usr/bin/env bash
# The shared simulated fabric's speed (softfab run, backends/simd): N processes
# as N/2 pairs of softfab_pingpong (8-byte messages, busy polling) on one
# fabric, for N = 2, 4 and 16, three runs each. Prints per run the wall time
# of the whole run (start-up included), the advances of virtual time the
# daemon made, the wall time per advance and the simulated round trips per
# wall second (all pairs together) over the whole run and inside the
# programs' timed loops (from the half round trip each pingpong prints), then
# the median and spread of each.
#   bash bench/simd/advance_cost.sh [ITERS]      (default 10000 round trips per pair)
# Builds --config=release (or SOFTFAB_BENCH_BUILD, say "-c opt"). Measure on
# an idle machine: every figure is wall time.
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-10000}
read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
bazel build "${build[@]}" //tools:softfab //examples:softfab_pingpong >&2
bin=$(bazel info "${build[@]}" bazel-bin 2>/dev/null)
port=$((49000 + RANDOM % 500))
results=$(mktemp)
for run in 1 2 3; do
  for n in 2 4 16; do
    programs=()
    for ((pair = 0; pair < n / 2; ++pair)); do
      port=$((port + 1))
      [ ${#programs[@]} -gt 0 ] && programs+=(":")
      programs+=("$bin/examples/softfab_pingpong" --backend sim --busy --sizes 8
        --iters "$iters" --oob-port "$port" ":")
      programs+=("$bin/examples/softfab_pingpong" --backend sim --busy --sizes 8
        --iters "$iters" --oob-port "$port" 127.0.0.1)
    done
    out=$(mktemp)
    start=$(date +%s%N)
    "$bin/tools/softfab" run -- "${programs[@]}" >"$out" 2>&1
    wall_ns=$(($(date +%s%N) - start))
    advances=$(grep -o '[0-9]* advances' "$out" | awk '{print $1}')
    # The mean half round trip (us) the pingpongs measured in their loops.
    half=$(awk '$1 == 8 && NF >= 4 {s += $3; k++} END {print s / k}' "$out")
    rm -f "$out"
    awk -v n="$n" -v run="$run" -v wall="$wall_ns" -v adv="$advances" \
      -v half="$half" -v rts=$(( n / 2 * iters )) 'BEGIN {
        printf "run %d, %2d processes: %6.2f s, %7d advances, %6.1f us per advance, %7.0f round trips/s, %7.0f in the loops\n",
          run, n, wall / 1e9, adv, wall / 1e3 / adv, rts / (wall / 1e9), n / 2 * 1e6 / (2 * half)
      }' | tee -a "$results"
  done
done
echo "median (spread) of three runs:"
for n in 2 4 16; do
  lines=$(grep -E "^run [0-9], +$n processes" "$results")
  us=$(echo "$lines" | awk '{print $9}' | sort -g | tr '\n' ' ')
  rt=$(echo "$lines" | awk '{print $13}' | sort -g | tr '\n' ' ')
  lp=$(echo "$lines" | awk '{print $16}' | sort -g | tr '\n' ' ')
  read -r u1 u2 u3 <<<"$us"
  read -r r1 r2 r3 <<<"$rt"
  read -r l1 l2 l3 <<<"$lp"
  printf "%2d processes: %s us per advance (%s to %s), %s round trips/s (%s to %s), %s in the loops (%s to %s)\n" \
    "$n" "$u2" "$u1" "$u3" "$r2" "$r1" "$r3" "$l2" "$l1" "$l3"
done
rm -f "$results"
