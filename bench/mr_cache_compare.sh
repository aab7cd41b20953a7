#!/usr/bin/env bash
# The registration cache, measured: streams of large rendezvous messages whose buffers
# softfab must register itself (softfab_pingpong --no-desc), with SOFTFAB_MR_CACHE=0 and
# =1, and with descriptors given (no registration by softfab at all) as the reference.
# Two processes on one device; run where a device exists, e.g. in the Soft-RoCE VM:
#   bazel build -c opt //examples:softfab_pingpong
#   bash tools/rxe-vm/run.sh -- bash bench/mr_cache_compare.sh bazel-bin/examples/softfab_pingpong
# Prints MB/s per size for each setting, the median of REPS (3) runs.
set -uo pipefail
bin=${1:?usage: mr_cache_compare.sh PATH/TO/softfab_pingpong}
reps=${REPS:-3}
sizes=${SIZES:-262144,1048576,4194304}
run() {  # run CACHE FLAG -> lines "size MB/s"
  local port=$((49000 + RANDOM % 1000))
  SOFTFAB_MR_CACHE=$1 "$bin" --backend verbs --busy $2 --oob-port "$port" --sizes "$sizes" \
    --stream 100 --window 8 >/dev/null 2>&1 &
  local server=$!
  SOFTFAB_MR_CACHE=$1 timeout 300 "$bin" --backend verbs --busy $2 --oob-port "$port" \
    --sizes "$sizes" --stream 100 --window 8 127.0.0.1 | awk '/stream/ {print $1, $4}'
  wait "$server"
}
printf '%-34s' setting
for s in ${sizes//,/ }; do printf '%14s' "$s B"; done
echo
for setting in "0 --no-desc" "1 --no-desc" "0 --desc"; do
  set -- $setting
  flag=$2
  [ "$flag" = --desc ] && flag=""
  all=$(for r in $(seq "$reps"); do run "$1" "$flag"; done)
  label="cache $([ "$1" = 1 ] && echo on || echo off), ${2#--}"
  printf '%-34s' "$label (MB/s)"
  for s in ${sizes//,/ }; do
    med=$(echo "$all" | awk -v s="$s" '$1 == s {print $2}' | sort -n |
      awk '{v[NR] = $1} END {print (NR ? v[int((NR + 1) / 2)] : "n/a")}')
    printf '%14s' "$med"
  done
  echo
done
