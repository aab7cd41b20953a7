#!/usr/bin/env bash
# Self-test of the Soft-RoCE VM harness (tools/rxe-vm/run.sh): boots the guest once per check
# and looks at what comes back: rxe0 listed, its port active, an ib_send_lat pair printing a
# latency line, and the exit-status contract (the command's status, 124 on timeout).
# Exits 0 when every check passes, 1 otherwise. Takes about a minute (each boot ~10 s).
set -uo pipefail

run="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run.sh"
passed=0
failed=0
out=""
status=0
err="$(mktemp)"
trap 'rm -f "$err"' EXIT

# check NAME WANT_STATUS REGEX RUN_ARGS...: runs run.sh RUN_ARGS and wants its exit status
# and a stdout line matching the extended REGEX (empty: no output check).
check() {
  local name="$1" want_status="$2" regex="$3"
  shift 3
  out="$("$run" "$@" 2>"$err")"
  status=$?
  if [ "$status" = "$want_status" ] && { [ -z "$regex" ] || grep -Eq "$regex" <<<"$out"; }; then
    echo "PASS $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name (status $status, wanted $want_status; output and stderr follow)"
    echo "$out" | tail -n 20
    tail -n 20 "$err"
    failed=$((failed + 1))
  fi
}

check "ibv_devices lists rxe0" 0 '^[[:space:]]+rxe0[[:space:]]' -- ibv_devices
check "rxe0 port 1 is active" 0 'state:[[:space:]]+PORT_ACTIVE' -- ibv_devinfo -d rxe0
# GID index 1 is rxe0's RoCEv2 IPv4 address (192.0.2.1) on veth0.
check "ib_send_lat pair prints a latency line" 0 '^ *8 +1000 +[0-9]+\.[0-9]+ ' -- \
  sh -c 'ib_send_lat -d rxe0 -x 1 -n 1000 -s 8 & sleep 1;
         ib_send_lat -d rxe0 -x 1 -n 1000 -s 8 127.0.0.1'
check "the command's exit status comes back" 7 '^in-vm rxe0$' -- \
  sh -c 'echo "in-vm $SOFTFAB_RXE_DEVICE"; exit 7'
check "the timeout gives 124" 124 '' --timeout 3 -- sleep 60

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
