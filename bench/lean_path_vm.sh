#!/usr/bin/env bash
# The data path's speed on a device (issue 19), two processes on Soft-RoCE in
# the rxe VM, beside the anchors in the same rounds: perftest (ib_send_lat,
# ib_send_lat -e, ib_send_bw) and libfabric's thinnest verbs path
# (fi_pingpong -p verbs -e msg). softfab_pingpong is measured sending with
# sf_send and its completion, and (--inject) sending small messages as
# fi_pingpong does. RUNS rounds (3), each measurement once per
# round, interleaved; prints every figure, then per measurement the median
# and the spread, and the ratios of medians the issue's targets name.
#   bash bench/lean_path_vm.sh [OTHER_BAZEL_BIN]
# Builds --config=release (or SOFTFAB_BENCH_BUILD, say "-c opt") and boots
# the VM. OTHER_BAZEL_BIN: another build's bazel-bin
# (an older commit's, say), whose softfab_pingpong is measured in the same
# rounds ("base" rows).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SOFTFAB_IN_VM:-0}" != 1 ]; then
  read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
  bazel build "${build[@]}" //examples:softfab_pingpong \
    //api/libfabric:libsoftfab-fi.so >&2
  bin=$(bazel info "${build[@]}" bazel-bin 2>/dev/null)
  exec bash tools/rxe-vm/run.sh --timeout 1700 --env "SOFTFAB_BIN=$bin" \
    --env "OTHER_BIN=${1:-}" --env "RUNS=${RUNS:-3}" -- bash bench/lean_path_vm.sh
fi
dev=${SOFTFAB_RXE_DEVICE:-rxe0}
gid=1  # rxe0's IPv4 RoCEv2 entry
n=2000
rate_n=20000
export FI_PROVIDER_PATH=$SOFTFAB_BIN/api/libfabric
log=$(mktemp -d)
port=47900

# pair NAME PARSER SERVER CLIENT: runs the SERVER command line, then the
# CLIENT one (both split into words); the client's output goes through the
# awk PARSER; prints "NAME VALUE".
pair() {
  local name=$1 parser=$2 server_cmd=$3 client_cmd=$4
  # shellcheck disable=SC2086  # word lists on purpose
  $server_cmd >"$log/server" 2>&1 &
  local server=$!
  sleep 1
  # shellcheck disable=SC2086
  timeout 300 $client_cmd >"$log/client" 2>&1 || true
  wait "$server" || true
  local v
  v=$(awk "$parser" "$log/client")
  if [ -z "$v" ]; then
    echo "lean_path_vm: no figure for $name:" >&2
    tail -n 5 "$log/client" "$log/server" >&2
    v=nan
  fi
  echo "$name $v"
}
# Same-program pairs: the client adds the server's address.
same() { pair "$1" "$2" "$3" "$3 127.0.0.1"; }
# softfab_pingpong from bazel-bin $1, on a port of its own.
sf() {
  local b=$1
  shift
  port=$((port + 1))
  echo "$b/examples/softfab_pingpong --backend verbs --device $dev --oob-port $port $*"
}
# fi_pingpong NAME ARGS...: the server binds the port, the client dials it.
fp() {
  local name=$1
  shift
  port=$((port + 1))
  pair "$name" "$fp_lat" "fi_pingpong -B $port $*" "fi_pingpong -P $port $* 127.0.0.1"
}

lat='$1 == 8 && NF >= 6 {print $6; exit}'         # perftest t_avg
rate='$1 == 8 && NF >= 5 {print $5 * 1e6; exit}'  # perftest MsgRate
bw='$1 == 65536 && NF >= 5 {print $4; exit}'      # perftest BW average
sf_lat='$1 == 8 && $NF == "ok" {print $3; exit}'
sf_rate='$1 == 8 && /stream/ {print $3; exit}'
sf_bw='$1 == 65536 && /stream/ {print $4; exit}'
fp_lat='$1 == 8 {v = $7} END {if (v != "") print v}'  # usec/xfer

for ((run = 1; run <= ${RUNS:-3}; ++run)); do
  echo "round $run"
  for b in "$SOFTFAB_BIN" ${OTHER_BIN:+"$OTHER_BIN"}; do
    tag=sf
    [ "$b" = "$SOFTFAB_BIN" ] || tag=base
    same "${tag}_busy_lat_us" "$sf_lat" "$(sf "$b" --busy --sizes 8 --iters $n)"
    same "${tag}_sread_lat_us" "$sf_lat" "$(sf "$b" --sizes 8 --iters $n)"
    if [ "$tag" = sf ]; then  # rows older builds cannot make
      # As fi_pingpong sends below its inject size: sf_inject, no send
      # completion awaited (softfab_pingpong --inject); streamed, softfab
      # bounds what is in flight.
      same sf_busy_inject_lat_us "$sf_lat" \
        "$(sf "$b" --busy --inject --sizes 8 --iters $n)"
      same sf_rate_inject_msg_s "$sf_rate" \
        "$(sf "$b" --busy --inject --sizes 8 --stream $rate_n)"
      # A spin longer than rxe's round trip here.
      SOFTFAB_SREAD_SPIN_US=200 same sf_sread_spin200_lat_us "$sf_lat" \
        "$(sf "$b" --sizes 8 --iters $n)"
    fi
    same "${tag}_rate_msg_s" "$sf_rate" \
      "$(sf "$b" --busy --sizes 8 --stream $rate_n)"
    same "${tag}_64k_mb_s" "$sf_bw" "$(sf "$b" --busy --sizes 65536 --stream $n)"
  done
  fp fi_softfab_rdm_lat_us -p softfab -e rdm -S 8 -I $n
  fp fi_verbs_msg_lat_us -p verbs -e msg -S 8 -I $n
  perftest="-d $dev -x $gid"
  same ib_send_lat_us "$lat" "ib_send_lat $perftest -n $n -s 8"
  same ib_send_lat_e_us "$lat" "ib_send_lat $perftest -n $n -s 8 -e"
  same ib_send_bw_8_msg_s "$rate" "ib_send_bw $perftest -n $rate_n -s 8"
  same ib_send_bw_64k_mb_s "$bw" "ib_send_bw $perftest -n $n -s 65536"
done | tee "$log/figures"

# System calls per round trip of the sleeping client (strace -c; the
# difference between runs of 1,000 and 200 round trips over 800, so set-up
# cancels out): softfab_pingpong in sf_cq_sread, with the default spin and
# with none, against ib_send_lat -e.
syscalls() {  # NAME SERVER CLIENT-ARGS: in SERVER, % is the round trips, @ a port
  local name=$1 server=$2 client=$3 counts=() cmd
  for k in 200 1000; do
    port=$((port + 1))
    cmd=${server//%/$k}
    cmd=${cmd//@/$port}
    # shellcheck disable=SC2086
    $cmd >"$log/server" 2>&1 &
    sleep 1
    # shellcheck disable=SC2086
    strace -f -c -o "$log/strace" $cmd $client >/dev/null 2>&1 || true
    wait || true
    counts+=("$(awk '/ total$/ {print $4}' "$log/strace")")  # calls
  done
  echo "$name $(awk -v a="${counts[0]}" -v b="${counts[1]}" 'BEGIN {if (a == "" || b == "") print "nan"; else printf "%.2f", (b - a) / 800}')"
}
if command -v strace >/dev/null; then
  sleeper="$SOFTFAB_BIN/examples/softfab_pingpong --backend verbs --device $dev --oob-port @ --sizes 8 --iters %"
  syscalls sf_sread_syscalls_per_rt "$sleeper" 127.0.0.1
  SOFTFAB_SREAD_SPIN_US=0 syscalls sf_sread_nospin_syscalls_per_rt "$sleeper" 127.0.0.1
  syscalls ib_send_lat_e_syscalls_per_rt "ib_send_lat -d $dev -x $gid -s 8 -e -n %" 127.0.0.1
fi | tee -a "$log/figures"

python3 - "$log/figures" <<'EOF'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 2 and parts[0] != "round" and parts[1] != "nan":
        vals.setdefault(parts[0], []).append(float(parts[1]))
med = {k: statistics.median(v) for k, v in vals.items()}
print("\nmeasurement                  median        spread (%d rounds)" %
      max(len(v) for v in vals.values()))
for k, v in vals.items():
    print(f"{k:26s} {med[k]:12.2f}   {min(v):.2f} to {max(v):.2f}")
def ratio(what, a, b, target):
    if a in med and b in med:
        print(f"{what:58s} {med[a] / med[b]:6.2f}x  target {target}")
print("\nratios of medians")
for tag in ("sf", "base"):
    if f"{tag}_busy_lat_us" not in med:
        continue
    ratio(f"{tag}: busy half round trip / ib_send_lat", f"{tag}_busy_lat_us",
          "ib_send_lat_us", "<= 1.5")
    ratio(f"{tag}: busy half round trip / fi_pingpong -p verbs -e msg",
          f"{tag}_busy_lat_us", "fi_verbs_msg_lat_us", "<= 1.0")
    ratio(f"{tag}: sread half round trip / ib_send_lat -e",
          f"{tag}_sread_lat_us", "ib_send_lat_e_us", "<= 1.0")
    ratio(f"{tag}: 8 B message rate / ib_send_bw -s 8", f"{tag}_rate_msg_s",
          "ib_send_bw_8_msg_s", ">= 0.9")
    ratio(f"{tag}: 64 KiB streaming / ib_send_bw -s 65536", f"{tag}_64k_mb_s",
          "ib_send_bw_64k_mb_s", ">= 0.95")
ratio("sf --inject: busy half round trip / ib_send_lat",
      "sf_busy_inject_lat_us", "ib_send_lat_us", "<= 1.5")
ratio("sf --inject: busy half round trip / fi_pingpong -p verbs -e msg",
      "sf_busy_inject_lat_us", "fi_verbs_msg_lat_us", "<= 1.0")
ratio("sf --inject: 8 B message rate / ib_send_bw -s 8",
      "sf_rate_inject_msg_s", "ib_send_bw_8_msg_s", ">= 0.9")
ratio("system calls per round trip, sf_cq_sread / ib_send_lat -e",
      "sf_sread_syscalls_per_rt", "ib_send_lat_e_syscalls_per_rt", "<= 1.0")
ratio("fi_pingpong -p softfab -e rdm / fi_pingpong -p verbs -e msg",
      "fi_softfab_rdm_lat_us", "fi_verbs_msg_lat_us", "reported")
EOF
rm -rf "$log"
