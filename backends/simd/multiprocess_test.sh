#!/usr/bin/env bash
# Several processes on one simulated fabric, as a user runs them: softfab run
# with the two sides of softfab_pingpong as nodes 0 and 1 (every size, every
# byte checked by the program), the same seed twice giving the same fabric
# digest and virtual time, FI_EP_MSG connections, a process killed mid-run
# (the other gets errors and exits; nothing hangs), and a process asking for
# a node the fabric does not have (refused with the reason).
# Then unmodified Debian fi_pingpong through softfab's libfabric provider, as
# two processes on the shared fabric: -e rdm, rdm tagged, msg and dgram, all
# sizes, data checked (-v).
#   multiprocess_test.sh SOFTFAB PINGPONG PROVIDER_SO
set -uo pipefail
softfab=$1 pingpong=$2 provider=${3:-}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
check() {  # check NAME CONDITION...: one line per check, counted.
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
port=$((47800 + RANDOM % 500))
# softfab_pingpong leaves its objects to process exit, as benchmark programs
# do; under the ASan pass its leak report would fail every run. Leaks are the
# business of the suites that close what they open.
export ASAN_OPTIONS=detect_leaks=0
both() {  # both OUT ARGS...: the two sides under softfab run, output in OUT.
  local out=$1; shift
  port=$((port + 1))
  timeout 120 "$softfab" run -- "$pingpong" --backend sim --oob-port "$port" "$@" : \
    "$pingpong" --backend sim --oob-port "$port" "$@" 127.0.0.1 >"$out" 2>&1
}
digest() { grep -o 'digest [0-9a-f]*, virtual time [0-9.]* ms' "$1"; }

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

# Node 1 is killed in the middle: node 0, waiting for a message that will not
# come (as on hardware, no completion tells it), gives up by its own timeout,
# reports it and exits; the run ends.
port=$((port + 1))
start=$(date +%s)
timeout 120 "$softfab" run -- "$pingpong" --backend sim --busy --oob-port "$port" \
  --sizes 8 --iters 1000000 : sh -c "\"$pingpong\" --backend sim --busy --oob-port $port \
  --sizes 8 --iters 1000000 127.0.0.1 & p=\$!; sleep 1; kill -9 \$p; wait \$p" \
  >"$tmp/e" 2>&1
rc=$?
check "a killed process ends the run, nothing hangs" test "$rc" -ne 0 -a "$rc" -ne 124
check "  ...within a minute" test $(( $(date +%s) - start )) -lt 60
check "  ...the survivor reports the failure" grep -qE 'server: (no completion|.*error)' "$tmp/e"

# A node the fabric does not have.
SOFTFAB_NODE=9 timeout 60 "$softfab" run -n 1 -- sh -c "SOFTFAB_NODE=9 \"$pingpong\" --backend sim" \
  >"$tmp/f" 2>&1
check "a node out of range is refused" grep -q 'asked for node 9 of a fabric of 1' "$tmp/f"

# Unmodified fi_pingpong (libfabric-bin). The server binds its port (-B) and
# the client connects a second later (-P), as fi_pingpong expects.
if command -v fi_pingpong >/dev/null && [ -n "$provider" ]; then
  export FI_PROVIDER_PATH
  FI_PROVIDER_PATH=$(cd "$(dirname "$provider")" && pwd)
  # Built under a sanitizer (the asan/ubsan passes), the provider needs the
  # sanitizer's runtime in fi_pingpong, which Debian built without it.
  preload=""
  for rt in asan ubsan; do
    if readelf -d "$provider" | grep -q "NEEDED.*lib$rt"; then
      preload=$(gcc -print-file-name=lib$rt.so)
    fi
  done
  if [ -n "$preload" ]; then
    export LD_PRELOAD=$preload
  fi
  for mode in "rdm" "rdm -m tagged" "msg" "dgram"; do
    port=$((port + 1))
    name="fi_pingpong -e $mode"
    # shellcheck disable=SC2086
    timeout 240 "$softfab" run -- fi_pingpong -p softfab -e $mode -S all -I 10 -v \
      -B "$port" : sh -c "sleep 1; exec fi_pingpong -p softfab -e $mode -S all -I 10 \
      -v -P $port 127.0.0.1" >"$tmp/fi" 2>&1
    check "$name, two processes, all sizes, data checked" test $? -eq 0
    tail -n 3 "$tmp/fi"
  done
else
  echo "FAIL fi_pingpong (libfabric-bin) or the provider is missing"
  failures=$((failures + 1))
fi

for f in a b c d e f; do echo "--- $f"; tail -n 4 "$tmp/$f"; done
if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "all checks passed"
