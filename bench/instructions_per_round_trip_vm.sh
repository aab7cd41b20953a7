#!/usr/bin/env bash
# Instructions per 8-byte round trip on a device (issue 19): the client of a
# busy ping-pong on Soft-RoCE in the rxe VM, counted by callgrind, for softfab
# and the anchors the latency targets name, in one VM run:
#   softfab_pingpong --busy --inject     softfab's sf_* API on its verbs backend
#   fi_pingpong -p softfab -e rdm        the same through the libfabric provider
#   fi_pingpong -p verbs -e msg          libfabric's thinnest verbs path
#   ib_send_lat                          perftest
# Each is the difference between runs of 1,000 and 200 round trips, over 800
# (set-up cancels out); it counts everything the client process executes in
# user space (its program, libraries and the rxe provider's user part), not the
# kernel. softfab's rows are also split by source file as
# bench/callgrind_by_file.py does (api, core, verbs backend, harness, the
# rest). The VM emulates its CPUs, so these counts weigh in its round trips'
# times (README "The data path").
#   bash bench/instructions_per_round_trip_vm.sh [KEEP_DIR]
# Builds --config=release (or SOFTFAB_BENCH_BUILD, say "-c opt") with -g, also
# at link (for the split; GCC's -g changes no code), and boots the VM; needs
# valgrind on the host (the VM runs the host's binaries). KEEP_DIR:
# where the callgrind profiles and the programs' output are kept (else they
# go). A count needs both runs to succeed (softfab_pingpong: every byte
# arrived); the anchors' counts include the polls they make while waiting.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SOFTFAB_IN_VM:-0}" != 1 ]; then
  command -v valgrind >/dev/null || {
    echo "instructions_per_round_trip_vm: needs valgrind" >&2
    exit 1
  }
  read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
  bazel build "${build[@]}" --copt=-g --linkopt=-g //examples:softfab_pingpong \
    //api/libfabric:libsoftfab-fi.so >&2
  bin=$(bazel info "${build[@]}" --copt=-g --linkopt=-g bazel-bin 2>/dev/null)
  if [ -n "${1:-}" ]; then
    out=$1
    mkdir -p "$out"
  else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
  fi
  bash tools/rxe-vm/run.sh --timeout 1500 --out "$out" \
    --env "SOFTFAB_BIN=$bin" -- bash bench/instructions_per_round_trip_vm.sh
  exit 0
fi
dev=${SOFTFAB_RXE_DEVICE:-rxe0}
export FI_PROVIDER_PATH=$SOFTFAB_BIN/api/libfabric
out=$SOFTFAB_VM_OUT
port=48900
# count NAME split|total OK SERVER... -- CLIENT...: a run of 200 and one of
# 1,000 round trips (% in the words), each on a port of its own (@), both
# sides exiting 0 and the client's output matching the regex OK; prints the
# per round trip figure, and softfab's split when asked.
count() {
  local name=$1 split=$2 ok=$3
  shift 3
  local server=() client=()
  while [ "$1" != -- ]; do server+=("$1"); shift; done
  shift
  client=("$@")
  local totals=() file=${name// /_}
  for k in 200 1000; do
    port=$((port + 1))
    local s=("${server[@]//%/$k}") c=("${client[@]//%/$k}") rc=0
    timeout 300 "${s[@]//@/$port}" >"$out/$file.$k.server" 2>&1 &
    local pid=$!
    sleep 2
    timeout 600 valgrind --tool=callgrind --callgrind-out-file="$out/$file.$k" \
      "${c[@]//@/$port}" >"$out/$file.$k.client" 2>&1 || rc=$?
    if ! wait "$pid" && [ "$rc" -eq 0 ]; then rc=1; fi
    if [ "$rc" -ne 0 ] || ! grep -Eq "$ok" "$out/$file.$k.client"; then
      echo "$name: the run of $k failed (exit $rc)" >&2
      tail -n 5 "$out/$file.$k.client" "$out/$file.$k.server" >&2
      return
    fi
    totals+=("$(awk '/^(summary|totals):/ {print $2; exit}' "$out/$file.$k")")
  done
  printf '%-34s %6d\n' "$name" $(((totals[1] - totals[0]) / 800))
  if [ "$split" = split ]; then
    python3 bench/callgrind_by_file.py "$out/$file.200" | sort >"$out/a"
    python3 bench/callgrind_by_file.py "$out/$file.1000" | sort >"$out/b"
    join "$out/a" "$out/b" | awk '$3 != $2 {printf "    %-10s %6d\n", $1, ($3 - $2) / 800}'
  fi
}
sf="$SOFTFAB_BIN/examples/softfab_pingpong --backend verbs --device $dev --oob-port @ --busy --inject --sizes 8 --iters %"
echo "client instructions per 8-byte round trip (busy polling)"
# shellcheck disable=SC2086  # word lists on purpose
count "softfab_pingpong --inject" split 'all messages arrived with their bytes' \
  $sf -- $sf 127.0.0.1
count "fi_pingpong -p softfab -e rdm" split '^8 ' \
  fi_pingpong -B @ -p softfab -e rdm -S 8 -I % -- \
  fi_pingpong -P @ -p softfab -e rdm -S 8 -I % 127.0.0.1
count "fi_pingpong -p verbs -e msg" total '^8 ' \
  fi_pingpong -B @ -p verbs -e msg -S 8 -I % -- \
  fi_pingpong -P @ -p verbs -e msg -S 8 -I % 127.0.0.1
count "ib_send_lat" total '^ *8 ' ib_send_lat -d "$dev" -x 1 -s 8 -n % -p @ -- \
  ib_send_lat -d "$dev" -x 1 -s 8 -n % -p @ 127.0.0.1
