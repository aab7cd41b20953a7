#!/usr/bin/env bash
# softfab over verbs beside perftest on the same RDMA device, in one run:
#   8-byte half round trip  softfab_pingpong --busy          vs ib_send_lat -s 8
#   64 KiB streaming        softfab_pingpong --stream         vs ib_send_bw -s 65536
#   8-byte message rate     softfab_pingpong --stream -s 8    vs ib_send_bw -s 8
#   1 MiB streaming         softfab_pingpong --stream (rendezvous READs) vs ib_send_bw -s 1048576
# Both sides run as two processes on one device (rxe's loopback path). Run it where a
# device exists, e.g. in the Soft-RoCE VM:
#   bazel build --config=release //examples:softfab_pingpong
#   bash tools/rxe-vm/run.sh -- bash bench/verbs_compare.sh bazel-bin/examples/softfab_pingpong
# Options (environment): DEVICE (rxe0), GID (1: rxe0's IPv4 RoCEv2 entry), LAT_N (2000),
# BW_N (2000), RATE_N (20000), BIG_N (300). Prints each figure and the ratios.
set -uo pipefail
bin=${1:?usage: verbs_compare.sh PATH/TO/softfab_pingpong}
dev=${DEVICE:-${SOFTFAB_RXE_DEVICE:-rxe0}}
gid=${GID:-1}
lat_n=${LAT_N:-2000}
bw_n=${BW_N:-2000}
rate_n=${RATE_N:-20000}
big_n=${BIG_N:-300}
log=$(mktemp -d)

# pair NAME SERVER_CMD... -- runs the command as server, then as client of 127.0.0.1.
perf_pair() {
  local name=$1; shift
  "$@" >"$log/$name.server" 2>&1 &
  local server=$!
  sleep 1
  timeout 300 "$@" 127.0.0.1 >"$log/$name.client" 2>&1
  wait "$server"
}
sf_pair() {
  local name=$1; shift
  local port=$((48000 + RANDOM % 1000))
  "$bin" --backend verbs --device "$dev" --oob-port "$port" "$@" >"$log/$name.server" 2>&1 &
  local server=$!
  timeout 300 "$bin" --backend verbs --device "$dev" --oob-port "$port" "$@" 127.0.0.1 \
    >"$log/$name.client" 2>&1
  wait "$server"
}

perf_pair ib_lat ib_send_lat -d "$dev" -x "$gid" -n "$lat_n" -s 8
perf_pair ib_bw ib_send_bw -d "$dev" -x "$gid" -n "$bw_n" -s 65536
perf_pair ib_rate ib_send_bw -d "$dev" -x "$gid" -n "$rate_n" -s 8
perf_pair ib_big ib_send_bw -d "$dev" -x "$gid" -n "$big_n" -s 1048576
sf_pair sf_lat --busy --sizes 8 --iters "$lat_n"
sf_pair sf_bw --busy --sizes 65536 --stream "$bw_n"
sf_pair sf_rate --busy --sizes 8 --stream "$rate_n"
sf_pair sf_big --busy --sizes 1048576 --stream "$big_n"

# perftest: the data line follows the header; columns as printed by perftest 4.x.
ib_lat_avg=$(awk '$1 == 8 && NF >= 6 {print $6; exit}' "$log/ib_lat.client")
ib_lat_typ=$(awk '$1 == 8 && NF >= 6 {print $5; exit}' "$log/ib_lat.client")
ib_bw=$(awk '$1 == 65536 && NF >= 5 {print $4; exit}' "$log/ib_bw.client")
ib_rate=$(awk '$1 == 8 && NF >= 5 {print $5 * 1e6; exit}' "$log/ib_rate.client")
sf_lat=$(awk '$1 == 8 && $NF == "ok" {print $3; exit}' "$log/sf_lat.client")
sf_bw=$(awk '$1 == 65536 && /stream/ {print $4; exit}' "$log/sf_bw.client")
sf_rate=$(awk '$1 == 8 && /stream/ {print $3; exit}' "$log/sf_rate.client")
ib_big=$(awk '$1 == 1048576 && NF >= 5 {print $4; exit}' "$log/ib_big.client")
sf_big=$(awk '$1 == 1048576 && /stream/ {print $4; exit}' "$log/sf_big.client")

for f in ib_lat_avg ib_bw ib_rate ib_big sf_lat sf_bw sf_rate sf_big; do
  if [ -z "${!f}" ]; then
    echo "verbs_compare: no figure for $f; logs:" >&2
    tail -n 5 "$log"/* >&2
    exit 1
  fi
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
printf '%-40s %14s %14s %8s  %s\n' metric softfab perftest ratio target
printf '%-40s %14.2f %14.2f %8s  %s\n' "8 B half round trip, mean (us)" "$sf_lat" "$ib_lat_avg" \
  "$(ratio "$sf_lat" "$ib_lat_avg")" "<= 1.10 (ib_send_lat t_avg; t_typical $ib_lat_typ)"
printf '%-40s %14.2f %14.2f %8s  %s\n' "64 KiB streaming bandwidth (MB/s)" "$sf_bw" "$ib_bw" \
  "$(ratio "$sf_bw" "$ib_bw")" ">= 0.90 (ib_send_bw BW average)"
printf '%-40s %14.0f %14.0f %8s  %s\n' "8 B message rate (msg/s)" "$sf_rate" "$ib_rate" \
  "$(ratio "$sf_rate" "$ib_rate")" "reported (ib_send_bw -s 8 MsgRate)"
printf '%-40s %14.2f %14.2f %8s  %s\n' "1 MiB streaming bandwidth (MB/s)" "$sf_big" "$ib_big" \
  "$(ratio "$sf_big" "$ib_big")" ">= 0.95 (ib_send_bw BW average; rendezvous READs)"
rm -rf "$log"
