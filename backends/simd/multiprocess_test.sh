#!/usr/bin/env bash
# Several processes on one simulated fabric, as a user runs them: softfab run
# with the two sides of softfab_pingpong as nodes 0 and 1 (every size, every
# byte checked by the program), the same seed twice giving the same fabric
# digest and virtual time, FI_EP_MSG connections, small messages injected
# (--inject, ping-pong and streamed), a process killed mid-run
# (the other gets errors and exits; nothing hangs), the daemon killed mid-run
# (both processes fail and exit within a second), and a process asking for
# a node the fabric does not have (refused with the reason).
# Then unmodified Debian fi_pingpong through softfab's libfabric provider, as
# two processes on the shared fabric: -e rdm, rdm tagged, msg and dgram, all
# sizes, data checked (-v); under a lossy scenario (1% drop, 1% duplicate,
# 1% reordered) twice with one seed (the same digest and completion traces)
# and once with another (other retransmissions); a capture (--pcap). Then
# unmodified Open MPI: mpirun -n 4 of tests/libfabric/mpi_ring.c (built with
# mpicc) on `softfab fabricd`, clean and lossy, each twice with the same
# digest and completion trace, and lossy with another seed; and
# NPopenmpi (NetPIPE) to completion.
# And node / service addressing through the daemon's address book
# (tests/libfabric/fi_node_service_test, each case a process of its own).
#   multiprocess_test.sh SOFTFAB PINGPONG PROVIDER_SO MPI_RING_C LOSSY_YAML NODE_SERVICE_TEST
set -uo pipefail
softfab=$1 pingpong=$2 provider=${3:-} mpi_ring_c=${4:-} lossy=${5:-} node_service=${6:-}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
# The gtest binaries run below (fi_node_service_test) would write their XML
# to this test's own result file, which bazel takes as this test's outcome:
# a failed check here then read as one passed case.
unset XML_OUTPUT_FILE GTEST_OUTPUT
check() {  # check NAME CONDITION...: one line per check, counted.
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
# Each run takes the next TCP port that no socket here uses, in any state: a
# run just before this one (or beside it) leaves its ports in TIME_WAIT, and a
# program that binds one without SO_REUSEADDR then fails (this test once did,
# run back to back with itself).
port=$((47800 + RANDOM % 500))
next_port() {
  local hex
  while true; do
    port=$((port + 1))
    hex=$(printf '%04X' "$port")
    grep -qE "^ *[0-9]+: [0-9A-F]+:$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null || return 0
  done
}
# softfab_pingpong leaves its objects to process exit, as benchmark programs
# do; under the ASan pass its leak report would fail every run. Leaks are the
# business of the suites that close what they open.
export ASAN_OPTIONS=detect_leaks=0
both() {  # both OUT ARGS...: the two sides under softfab run, output in OUT.
  local out=$1; shift
  next_port
  timeout 120 "$softfab" run -- "$pingpong" --backend sim --oob-port "$port" "$@" : \
    "$pingpong" --backend sim --oob-port "$port" "$@" 127.0.0.1 >"$out" 2>&1
}
digest() { grep -o 'digest [0-9a-f]*, virtual time [0-9.]* ms' "$1"; }
# await_headers FILE N: waits (up to 60 s) until FILE holds N softfab_pingpong
# headers, each printed once its side is connected. A fixed pause before a
# kill is too short under a loaded sanitizer pass: a side not yet connected
# fails otherwise than the check expects (or waits for a peer that is gone).
await_headers() {
  local n=0
  until [ "$(grep -c '^bytes  *iters' "$1" 2>/dev/null)" -ge "$2" ] || [ $n -ge 600 ]; do
    sleep 0.1; n=$((n + 1))
  done
  [ $n -lt 600 ] || echo "await_headers: $1 holds fewer than $2 headers after 60 s" >&2
}
# await_fabric ENV_FILE: waits (up to 60 s) until `softfab fabricd` has written
# its SOFTFAB_FABRIC line, then prints the fabric's path.
await_fabric() {
  local n=0
  until grep -q '^SOFTFAB_FABRIC=' "$1" || [ $n -ge 600 ]; do sleep 0.1; n=$((n + 1)); done
  sed -n 's/^SOFTFAB_FABRIC=//p' "$1"
}
retransmissions() { grep -o 'retransmissions [0-9]*' "$1"; }

sizes=8,1024,65536,1048576
check "rdm, every size, two processes" both "$tmp/a" --busy --sizes $sizes --iters 20
check "  ...every byte arrived (both sides)" \
  test "$(grep -c 'all messages arrived with their bytes' "$tmp/a")" = 2
check "the same seed again" both "$tmp/b" --busy --sizes $sizes --iters 20
check "  ...the same digest and virtual time" test -n "$(digest "$tmp/a")" -a \
  "$(digest "$tmp/a")" = "$(digest "$tmp/b")"
check "tagged FI_EP_MSG, two processes" both "$tmp/c" --busy --ep msg --tagged \
  --sizes 8,65536 --iters 10
check "  ...every byte arrived" test "$(grep -c 'all messages arrived' "$tmp/c")" = 2
check "sleeping in sf_cq_sread" both "$tmp/d" --sizes 8,65536 --iters 10
check "  ...every byte arrived" test "$(grep -c 'all messages arrived' "$tmp/d")" = 2
check "small messages injected (--inject), larger ones sent" both "$tmp/inj" \
  --busy --tagged --inject --sizes 1,8,64,65536 --iters 10
check "  ...every byte arrived" test "$(grep -c 'all messages arrived' "$tmp/inj")" = 2
check "  ...injected below the endpoint's inject size (1 to 64 B at least)" \
  test "$(grep -o 'messages below [0-9]* bytes by sf_inject' "$tmp/inj" |
    awk '$3 > 64' | wc -l)" = 2
# 1, 8 and 64 B, 10 round trips each: 30 messages injected by each side.
check "  ...and they went by sf_inject (30 per side)" \
  test "$(grep -c 'pingpong: 30 messages went by sf_inject' "$tmp/inj")" = 2
check "streamed, small messages injected" both "$tmp/injs" --busy --inject \
  --stream 2000 --sizes 8,65536
check "  ...every byte arrived" test "$(grep -c 'all messages arrived' "$tmp/injs")" = 2
# The client streams 2,000 of 8 B (the 64 KiB ones are sent), the server
# injects its 1-byte answer to each size.
check "  ...streamed ones too (2,000 by the client, 2 answers)" \
  test "$(grep -oE 'pingpong: [0-9]+ messages went by sf_inject' "$tmp/injs" |
    awk '{print $2}' | sort -n | tr '\n' ' ')" = "2 2000 "

# Node 1 is killed in the middle (once both sides are connected and running):
# node 0, waiting for a message that will not come (as on hardware, no
# completion tells it), gives up by its own timeout, reports it and exits; the
# run ends.
next_port
start=$(date +%s)
: >"$tmp/e"
timeout 120 "$softfab" run -- "$pingpong" --backend sim --busy --oob-port "$port" \
  --sizes 8 --iters 1000000 : sh -c "\"$pingpong\" --backend sim --busy --oob-port $port \
  --sizes 8 --iters 1000000 127.0.0.1 & p=\$!; $(declare -f await_headers); \
  await_headers \"$tmp/e\" 2; sleep 0.5; kill -9 \$p; wait \$p" \
  >>"$tmp/e" 2>&1
rc=$?
check "a killed process ends the run, nothing hangs" test "$rc" -ne 0 -a "$rc" -ne 124
check "  ...within a minute" test $(( $(date +%s) - start )) -lt 60
check "  ...the survivor reports the failure" grep -qE 'server: (no completion|.*error)' "$tmp/e"

# The daemon dies mid-run: both processes' next calls fail ("the fabric daemon
# is gone") and they exit within a second; nothing hangs.
"$softfab" fabricd --nodes 2 >"$tmp/g.env" 2>"$tmp/g.fabricd" &
fd=$!
fabric=$(await_fabric "$tmp/g.env")
next_port
SOFTFAB_FABRIC=$fabric SOFTFAB_NODE=0 timeout 60 "$pingpong" --backend sim --busy \
  --oob-port "$port" --sizes 8 --iters 100000000 >"$tmp/g0" 2>&1 &
p0=$!
sleep 0.5
SOFTFAB_FABRIC=$fabric SOFTFAB_NODE=1 timeout 60 "$pingpong" --backend sim --busy \
  --oob-port "$port" --sizes 8 --iters 100000000 127.0.0.1 >"$tmp/g1" 2>&1 &
p1=$!
await_headers "$tmp/g0" 1
await_headers "$tmp/g1" 1
sleep 0.5
kill -9 "$fd"
killed=$(date +%s%N)
wait "$p0"; rc0=$?
wait "$p1"; rc1=$?
took_ms=$(( ($(date +%s%N) - killed) / 1000000 ))
check "the daemon killed: both processes fail and exit" test "$rc0" -ne 0 -a "$rc0" -ne 124 \
  -a "$rc1" -ne 0 -a "$rc1" -ne 124
check "  ...within a second ($took_ms ms)" test "$took_ms" -lt 1000
check "  ...node 0 says the fabric daemon is gone" grep -q 'fabric daemon is gone' "$tmp/g0"
check "  ...node 1 says so too" grep -q 'fabric daemon is gone' "$tmp/g1"
rm -rf "$(dirname "$fabric")"

# A node the fabric does not have.
SOFTFAB_NODE=9 timeout 60 "$softfab" run -n 1 -- sh -c "SOFTFAB_NODE=9 \"$pingpong\" --backend sim" \
  >"$tmp/f" 2>&1
check "a node out of range is refused" grep -q 'asked for node 9 of a fabric of 1' "$tmp/f"

# Unmodified fi_pingpong (libfabric-bin). The server binds its port (-B) and
# the client connects a second later (-P), as fi_pingpong expects.
preload=""
if [ -n "$provider" ]; then
  export FI_PROVIDER_PATH
  FI_PROVIDER_PATH=$(cd "$(dirname "$provider")" && pwd)
  # Built under a sanitizer (the asan/ubsan passes), the provider needs the
  # sanitizer's runtime in fi_pingpong, which Debian built without it.
  for rt in asan ubsan; do
    if readelf -d "$provider" | grep -q "NEEDED.*lib$rt"; then
      preload=$(gcc -print-file-name=lib$rt.so)
    fi
  done
  if [ -n "$preload" ]; then
    export LD_PRELOAD=$preload
  fi
fi
# A shell line that waits (up to 30 s) until something listens on TCP port
# $1: the fi_pingpong client's connect to the server's out-of-band port is
# refused when it comes first, and a fixed pause is too short on a loaded
# machine (the lossy run's client once started before its server listened).
await_listener() {
  printf 'n=0; until grep -qE ":%04X [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null || [ $n -ge 300 ]; do sleep 0.1; n=$((n + 1)); done; [ $n -lt 300 ] || echo "nothing listens on port %d after 30 s" >&2' "$1" "$1"
}
if command -v fi_pingpong >/dev/null && [ -n "$provider" ]; then
  for mode in "rdm" "rdm -m tagged" "msg" "dgram"; do
    next_port
    name="fi_pingpong -e $mode"
    # shellcheck disable=SC2086
    timeout 240 "$softfab" run -- fi_pingpong -p softfab -e $mode -S all -I 10 -v \
      -B "$port" : sh -c "$(await_listener "$port"); exec fi_pingpong -p softfab -e $mode -S all -I 10 \
      -v -P $port 127.0.0.1" >"$tmp/fi" 2>&1
    check "$name, two processes, all sizes, data checked" test $? -eq 0
    tail -n 3 "$tmp/fi"
  done
  # A capture of a short run: a pcap file (magic a1b23c4d: nanoseconds).
  next_port
  timeout 120 "$softfab" run --pcap "$tmp/fi.pcap" -- fi_pingpong -p softfab -e rdm -S 1024 \
    -I 10 -B "$port" : sh -c "$(await_listener "$port"); exec fi_pingpong -p softfab -e rdm -S 1024 -I 10 \
    -P $port 127.0.0.1" >"$tmp/fipcap" 2>&1
  check "fi_pingpong with --pcap" test $? -eq 0
  check "  ...a nanosecond pcap with packets" test "$(head -c 4 "$tmp/fi.pcap" | od -An -tx1 |
    tr -d ' ')" = "4d3cb2a1" -a "$(stat -c %s "$tmp/fi.pcap")" -gt 1000
  if [ -n "$preload" ]; then
    # Under a sanitizer every run is several times slower: the lossy runs
    # and the MPI jobs below are checked by the plain pass.
    echo "(sanitizer build: the lossy fi_pingpong runs and the MPI jobs run in the plain pass)"
  else
    lossy_pingpong() {  # lossy_pingpong OUT SEED: rdm tagged, all sizes, lossy
      next_port
      timeout 240 "$softfab" run --scenario "$lossy" --seed "$2" --trace "$1.trace" -- \
        fi_pingpong -p softfab -e rdm -m tagged -S all -I 10 -v -B "$port" : sh -c \
        "$(await_listener "$port"); exec fi_pingpong -p softfab -e rdm -m tagged -S all -I 10 -v -P $port \
        127.0.0.1" >"$1" 2>&1 || { tail -n 5 "$1"; return 1; }
    }
    check "fi_pingpong under loss (1% drop, duplicate, reorder), data checked" \
      lossy_pingpong "$tmp/l1" 1
    check "  ...packets were dropped and retransmitted" grep -qE 'retransmissions [1-9]' "$tmp/l1"
    check "  ...the same seed again" lossy_pingpong "$tmp/l2" 1
    check "  ...the same digest and virtual time" test -n "$(digest "$tmp/l1")" -a \
      "$(digest "$tmp/l1")" = "$(digest "$tmp/l2")"
    check "  ...the same completion trace, node by node" cmp -s "$tmp/l1.trace" "$tmp/l2.trace"
    check "  ...another seed" lossy_pingpong "$tmp/l3" 2
    check "  ...other retransmissions" test "$(retransmissions "$tmp/l1")" != \
      "$(retransmissions "$tmp/l3")"
    grep -h 'softfab run:' -A1 "$tmp/l1" "$tmp/l2" "$tmp/l3"
  fi
else
  echo "FAIL fi_pingpong (libfabric-bin) or the provider is missing"
  failures=$((failures + 1))
fi

# fi_getinfo(node, service): a listener's address and port bound in the
# daemon's address book, a client's lookup answered with its name.
if [ -n "$node_service" ] && [ -n "$provider" ]; then
  for case in AnAddressWhereNothingListensFindsNothing MsgListenerAtAPortIsConnectedToByAddress \
    RdmEndpointAtAPortIsReachedByAddress; do
    SOFTFAB_VERBS_ADDR=127.0.0.1 timeout 60 "$softfab" run -n 1 -- "$node_service" \
      --gtest_filter="FiNodeService.$case" >"$tmp/ns" 2>&1
    rc=$?
    check "node / service on the shared fabric: $case" test "$rc" -eq 0 -a \
      "$(grep -c '^\[       OK \]' "$tmp/ns")" = 1
  done
else
  echo "FAIL fi_node_service_test or the provider is missing"
  failures=$((failures + 1))
fi

# Unmodified Open MPI (mtl ofi over the provider) on a fabric `softfab fabricd`
# serves: mpirun starts the ranks, each takes its node from its rank.
fabricd_mpirun() {  # fabricd_mpirun OUT N FABRICD_ARGS -- PROGRAM ARGS
  local out=$1 n=$2; shift 2
  local fd_args=()
  while [ "$1" != "--" ]; do fd_args+=("$1"); shift; done
  shift
  "$softfab" fabricd --nodes "$n" "${fd_args[@]}" >"$out.env" 2>"$out.fabricd" &
  local fd=$!
  local fabric
  fabric=$(await_fabric "$out.env")
  SOFTFAB_FABRIC=$fabric timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" \
    -x SOFTFAB_FABRIC -x FI_PROVIDER_PATH --mca pml cm --mca mtl ofi \
    --mca mtl_ofi_provider_include softfab "$@" >"$out" 2>&1
  local rc=$?
  wait "$fd" || rc=1
  cat "$out.fabricd" >>"$out"
  return $rc
}
if [ -n "$preload" ]; then
  echo "(sanitizer build: Open MPI runs in the plain pass)"
elif command -v mpicc >/dev/null && command -v mpirun >/dev/null && [ -n "$mpi_ring_c" ]; then
  mpicc -O2 -o "$tmp/mpi_ring" "$mpi_ring_c"
  check "Open MPI: mpirun -n 4 on softfab fabricd" fabricd_mpirun "$tmp/m1" 4 --trace \
    "$tmp/m1.trace" -- "$tmp/mpi_ring"
  check "  ...ring, all-to-all, any source, 0 B to 4 MiB, every byte" \
    grep -q "^mpi_ring: 4 ranks, 0 errors" "$tmp/m1"
  check "  ...again: the same digest, virtual time and completion trace" \
    fabricd_mpirun "$tmp/m1b" 4 --trace "$tmp/m1b.trace" -- "$tmp/mpi_ring"
  check "  ...(digest)" test -n "$(digest "$tmp/m1")" -a "$(digest "$tmp/m1")" = "$(digest "$tmp/m1b")"
  check "  ...(trace)" cmp -s "$tmp/m1.trace" "$tmp/m1b.trace"
  # The ring needs about a second of virtual time (1,018 ms measured); ranks
  # that park holding unsignaled sends they alone can retire stalled it to
  # 3,030 ms (core/send_queue.cc, Endpoint::BeforeSleep).
  check "  ...in under 2 s of virtual time" awk '/virtual time/ {
      for (i = 1; i < NF; i++) if ($i == "time") t = $(i + 1)
    } END {exit !(t != "" && t + 0 < 2000)}' "$tmp/m1"
  check "Open MPI under loss" fabricd_mpirun "$tmp/m2" 4 --scenario "$lossy" --seed 1 --trace \
    "$tmp/m2.trace" -- "$tmp/mpi_ring"
  check "  ...every byte" grep -q "^mpi_ring: 4 ranks, 0 errors" "$tmp/m2"
  check "  ...packets were dropped and retransmitted" grep -qE 'retransmissions [1-9]' "$tmp/m2"
  check "  ...a completion trace for each rank" test "$(grep -c '^node [0-3]: [1-9]' \
    "$tmp/m2.trace")" = 4
  # The rule that makes this hold: internal/thread_watch.h.
  check "  ...the same seed again" fabricd_mpirun "$tmp/m2b" 4 --scenario "$lossy" --seed 1 \
    --trace "$tmp/m2b.trace" -- "$tmp/mpi_ring"
  check "  ...the same digest and virtual time" test -n "$(digest "$tmp/m2")" -a \
    "$(digest "$tmp/m2")" = "$(digest "$tmp/m2b")"
  check "  ...the same completion trace, rank by rank" cmp -s "$tmp/m2.trace" "$tmp/m2b.trace"
  check "  ...another seed, every byte" fabricd_mpirun "$tmp/m3" 4 --scenario "$lossy" --seed 2 \
    -- "$tmp/mpi_ring"
  check "  ...(every byte)" grep -q "^mpi_ring: 4 ranks, 0 errors" "$tmp/m3"
  check "  ...other retransmissions" test "$(retransmissions "$tmp/m2")" != \
    "$(retransmissions "$tmp/m3")"
  grep -h 'softfab fabricd:' -A2 "$tmp/m1" "$tmp/m1b" "$tmp/m2" "$tmp/m2b" "$tmp/m3"
  if command -v NPopenmpi >/dev/null; then
    # NetPIPE sizes its repetitions from the wall clock: no determinism check.
    check "NPopenmpi -u 65536 to completion" fabricd_mpirun "$tmp/np" 2 -- NPopenmpi -u 65536 \
      -o "$tmp/np.out"
    tail -n 3 "$tmp/np"
  else
    echo "FAIL NPopenmpi (netpipe-openmpi) is missing"
    failures=$((failures + 1))
  fi
else
  echo "FAIL mpicc / mpirun (openmpi-bin, libopenmpi-dev) or mpi_ring.c is missing"
  failures=$((failures + 1))
fi

for f in a b c d e f g0 g1; do echo "--- $f"; tail -n 4 "$tmp/$f"; done
if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "all checks passed"
