#!/usr/bin/env bash
# The registration cache, measured: streams of large rendezvous messages whose buffers
# softfab must register itself (softfab_pingpong --no-desc), with the cache off
# (SOFTFAB_MR_CACHE=0) and as it is by default (on, watching unmaps), and with descriptors
# given (no registration by softfab at all) as the reference.
# Two processes on one device; run where a device exists, e.g. in the Soft-RoCE VM:
#   bazel build --config=release //examples:softfab_pingpong
#   bash tools/rxe-vm/run.sh -- bash bench/mr_cache_compare.sh bazel-bin/examples/softfab_pingpong
# Prints MB/s per size for each setting, the median of REPS (3) runs.
set -uo pipefail
bin=${1:?usage: mr_cache_compare.sh PATH/TO/softfab_pingpong}
reps=${REPS:-3}
sizes=${SIZES:-262144,1048576,4194304}
run() {  # run CACHE FLAG -> lines "size MB/s" (CACHE "default": the variable unset)
  local port=$((49000 + RANDOM % 1000))
  local env=(env)
  [ "$1" = default ] && env+=(-u SOFTFAB_MR_CACHE) || env+=("SOFTFAB_MR_CACHE=$1")
  "${env[@]}" "$bin" --backend verbs --busy $2 --oob-port "$port" --sizes "$sizes" \
    --stream 100 --window 8 >/dev/null 2>&1 &
  local server=$!
  "${env[@]}" timeout 300 "$bin" --backend verbs --busy $2 --oob-port "$port" \
    --sizes "$sizes" --stream 100 --window 8 127.0.0.1 | awk '/stream/ {print $1, $4}'
  wait "$server"
}
printf '%-34s' setting
for s in ${sizes//,/ }; do printf '%14s' "$s B"; done
echo
for setting in "0 --no-desc" "default --no-desc" "0 --desc"; do
  set -- $setting
  flag=$2
  [ "$flag" = --desc ] && flag=""
  all=$(for r in $(seq "$reps"); do run "$1" "$flag"; done)
  label="cache $([ "$1" = default ] && echo "on (default)" || echo off), ${2#--}"
  printf '%-34s' "$label (MB/s)"
  for s in ${sizes//,/ }; do
    med=$(echo "$all" | awk -v s="$s" '$1 == s {print $2}' | sort -n |
      awk '{v[NR] = $1} END {print (NR ? v[int((NR + 1) / 2)] : "n/a")}')
    printf '%14s' "$med"
  done
  echo
done
