#!/usr/bin/env bash
# Half round trips (8 B, busy polling) and 1 MiB bandwidth of softfab's
# libfabric provider against softfab's own pingpong and libfabric's verbs
# providers, two processes on Soft-RoCE in the rxe VM, three interleaved runs:
#   bash bench/libfabric/vm_speed.sh      (builds --config=release, or
#                                          SOFTFAB_BENCH_BUILD; boots the VM)
# Prints one line per measurement; take the median of the three runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${SOFTFAB_IN_VM:-0}" != 1 ]; then
  read -r -a build <<<"${SOFTFAB_BENCH_BUILD:---config=release}"
  bazel build "${build[@]}" //examples:softfab_pingpong \
    //api/libfabric:libsoftfab-fi.so >&2
  bin=$(bazel info "${build[@]}" bazel-bin 2>/dev/null)
  exec bash tools/rxe-vm/run.sh --timeout 900 --env "SOFTFAB_BIN=$bin" \
    --env "VM_SPEED_RUNS=${VM_SPEED_RUNS:-3}" --env "VM_SPEED_ONLY=${VM_SPEED_ONLY:-}" -- \
    bash bench/libfabric/vm_speed.sh
fi
bin=$SOFTFAB_BIN
export FI_PROVIDER_PATH=$bin/api/libfabric
port=47700
sp() {  # softfab_pingpong server and client
  port=$((port + 1))
  "$bin/examples/softfab_pingpong" --backend verbs --busy --oob-port "$port" "$@" >/dev/null 2>&1 &
  sleep 1
  "$bin/examples/softfab_pingpong" --backend verbs --busy --oob-port "$port" "$@" 127.0.0.1 |
    grep "bytes ok"
  wait
}
fp() {  # fi_pingpong server and client
  port=$((port + 1))
  fi_pingpong -B "$port" "$@" >/dev/null 2>&1 &
  sleep 1
  fi_pingpong -P "$port" "$@" 127.0.0.1 | tail -n 1
  wait
}
# VM_SPEED_RUNS=N repeats N times; VM_SPEED_ONLY=msg runs only the MSG pair.
for ((run = 1; run <= ${VM_SPEED_RUNS:-3}; ++run)); do
  echo "run $run"
  if [ "${VM_SPEED_ONLY:-}" = msg ]; then
    echo -n "softfab_pingpong msg 8: "; sp --ep msg --sizes 8 --iters 2000
    echo -n "fi_pingpong -p softfab msg 8: "; fp -p softfab -e msg -S 8 -I 2000
    continue
  fi
  echo -n "softfab_pingpong rdm 8: "; sp --sizes 8 --iters 2000
  echo -n "fi_pingpong -p softfab rdm 8: "; fp -p softfab -e rdm -S 8 -I 2000
  echo -n "softfab_pingpong msg 8: "; sp --ep msg --sizes 8 --iters 2000
  echo -n "fi_pingpong -p softfab msg 8: "; fp -p softfab -e msg -S 8 -I 2000
  echo -n "fi_pingpong -p verbs;ofi_rxm rdm 8: "
  FI_UNIVERSE_SIZE=4 fp -p "verbs;ofi_rxm" -e rdm -S 8 -I 2000
  echo -n "fi_pingpong -p verbs msg 8: "; fp -p verbs -e msg -S 8 -I 2000
  echo -n "fi_pingpong -p softfab rdm 1 MiB: "; fp -p softfab -e rdm -S 1048576 -I 20
  echo -n "fi_pingpong -p verbs;ofi_rxm rdm 1 MiB: "
  FI_UNIVERSE_SIZE=4 fp -p "verbs;ofi_rxm" -e rdm -S 1048576 -I 20
done
