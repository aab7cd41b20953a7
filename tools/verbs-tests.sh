#!/usr/bin/env bash
# The suites that exercise the verbs backend, run on a real device: inside the rxe VM
# (tools/test.sh starts it with tools/rxe-vm/run.sh) or on a host with an RDMA device.
#   bash tools/verbs-tests.sh OUT_DIR
# Each gtest binary writes OUT_DIR/<name>.xml (with its log beside it); the two-process
# checks append "pass|fail<TAB>name" lines to OUT_DIR/checks.txt, the format
# tools/count_tests.py reads. The binaries must have been built (plain config) first.
# The device comes from SOFTFAB_VERBS_DEVICE, else SOFTFAB_RXE_DEVICE (set by the VM).
#   bash tools/verbs-tests.sh --list   prints the XML files a full run writes, one per line
set -uo pipefail
cd "$(dirname "$0")/.."
export SOFTFAB_VERBS_DEVICE=${SOFTFAB_VERBS_DEVICE:-${SOFTFAB_RXE_DEVICE:-}}
bin=${SOFTFAB_BIN:-bazel-bin}
# softfab's libfabric suites (tests/libfabric) name the device as their fabric and load the
# provider from the build.
export SOFTFAB_FI_FABRIC=${SOFTFAB_FI_FABRIC:-$SOFTFAB_VERBS_DEVICE}
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$bin/api/libfabric}
# An IP address of the device, for addressing by node and service (the VM puts 192.0.2.1 on
# rxe0's netdev).
if [[ -z "${SOFTFAB_VERBS_ADDR:-}" && -n "${SOFTFAB_IN_VM:-}" ]]; then
  export SOFTFAB_VERBS_ADDR=192.0.2.1
fi

# name:binary:gtest filter (the per-backend suites run only their verbs instances here; the
# simulator instances ran on the host).
suites=(
  "verbs_device_test:backends/verbs/verbs_device_test:*"
  "transport_conformance_test:tests/transport/transport_conformance_test:*/verbs"
  "conformance_recv_test:tests/conformance_recv_test:*/verbs"
  "conformance_send_test:tests/conformance_send_test:*/verbs"
  "conformance_errors_test:tests/conformance_errors_test:*/verbs"
  "conformance_more_test:tests/conformance_more_test:*/verbs"
  "regression_test:tests/regression_test:*/verbs"
  "wait_fd_test:tests/wait_fd_test:*/verbs"
  "peer_death_test:tests/peer_death_test:PeerDeathTest.*:*/verbs"
  "defects_test:tests/defects_test:*/verbs"
  "class_of_service_test:tests/class_of_service_test:*/verbs"
  "incast_test:tests/incast_test:*/verbs"
  "send_cq_budget_test:tests/send_cq_budget_test:*/verbs"
  "selective_signaling_test:tests/selective_signaling_test:*/verbs"
  "fork_test:tests/fork_test:*/verbs"
  "registration_cache_test:tests/registration_cache_test:*/verbs"
  # The cache's unmap watching on the VM's kernel (6.1), not only the host's.
  "mr_cache_test:core/mr_cache_test:WatchedMrCacheTest.*"
  "fabtests_unit_test:tests/fabtests/unit/fabtests_unit_test:*/verbs"
  "verbs_test:api/verbs_test:*/Device:*RunsOnADevice*:SfvDeviceListTest.*"
  "fabtests_functional_test:tests/fabtests/functional/functional_test:*/verbs"
  "cq_strerror_test:tests/cq_strerror_test:*/verbs"
  "buffer_shape_test:tests/buffer_shape_test:*/verbs"
  "fi_rdm_test:tests/libfabric/fi_rdm_test:*"
  "fi_msg_dgram_test:tests/libfabric/fi_msg_dgram_test:*"
  "fi_node_service_test:tests/libfabric/fi_node_service_test:*"
  # The sf_* suites once more through libfabric (tests/libfabric/sf_over_fi), less the
  # cases that cannot be phrased through it (listed in its BUILD and the README).
  "conformance_recv_test_over_fi:tests/libfabric/sf_over_fi/conformance_recv_test_over_fi:*/verbs"
  "conformance_send_test_over_fi:tests/libfabric/sf_over_fi/conformance_send_test_over_fi:*/verbs"
  "conformance_more_test_over_fi:tests/libfabric/sf_over_fi/conformance_more_test_over_fi:*/verbs-*SharedReceiveContextServesHundredEndpoints*"
  "buffer_shape_test_over_fi:tests/libfabric/sf_over_fi/buffer_shape_test_over_fi:*/verbs"
  "fabtests_unit_test_over_fi:tests/libfabric/sf_over_fi/fabtests_unit_test_over_fi:*/verbs-*SharedCtx.RdmSharedRx/*:*SharedCtx.MsgSharedRx/*:*SreadTimeoutAndPending*:*FabtestsAvTest.InsertGoodBadVector*"
  "fabtests_functional_test_over_fi:tests/libfabric/sf_over_fi/fabtests_functional_test_over_fi:*/verbs-*SigintStillKillsAfterSetup*"
  # Last of the suites: takes the device's network interface down and up again (it waits
  # for the port to be ACTIVE before it ends, so what follows finds the device as it was).
  "async_events_device_test:tests/async_events_device_test:*"
)
if [ "${1:-}" = --list ]; then
  for entry in "${suites[@]}"; do echo "${entry%%:*}.xml"; done
  exit 0
fi
out=${1:?usage: verbs-tests.sh OUT_DIR | --list}
mkdir -p "$out"

for entry in "${suites[@]}"; do
  IFS=: read -r name path filter <<<"$entry"
  echo "== $name ($filter)"
  start=$(date +%s)
  timeout 900 "$bin/$path" --gtest_filter="$filter" --gtest_output="xml:$out/$name.xml" \
    >"$out/$name.log" 2>&1
  rc=$?
  tail -n 3 "$out/$name.log"
  echo "   exit $rc, $(( $(date +%s) - start )) s"
done

# Two processes: softfab_pingpong server and client over the device, names exchanged on
# 127.0.0.1, every byte of 8 B to 16 MiB checked; RDM and MSG, tagged and untagged.
pingpong() {
  local name=$1; shift
  local port=$((47600 + RANDOM % 1000))
  "$bin/examples/softfab_pingpong" --backend verbs --oob-port "$port" "$@" \
    >"$out/$name.server.log" 2>&1 &
  local server=$!
  timeout 600 "$bin/examples/softfab_pingpong" --backend verbs --oob-port "$port" "$@" \
    127.0.0.1 >"$out/$name.client.log" 2>&1
  local client_rc=$?
  timeout 60 tail --pid="$server" -f /dev/null
  wait "$server"
  local server_rc=$?
  cat "$out/$name.client.log"
  if [ "$client_rc" -eq 0 ] && [ "$server_rc" -eq 0 ]; then
    printf 'pass\t%s\n' "$name" >>"$out/checks.txt"
  else
    echo "   $name: client exit $client_rc, server exit $server_rc"
    tail -n 5 "$out/$name.server.log"
    printf 'fail\t%s\n' "$name" >>"$out/checks.txt"
  fi
}
pingpong pingpong_rdm_untagged --ep rdm
pingpong pingpong_rdm_tagged --ep rdm --tagged
pingpong pingpong_msg_untagged --ep msg
pingpong pingpong_msg_tagged --ep msg --tagged
pingpong pingpong_rdm_inject --ep rdm --tagged --inject --sizes 1,8,64,1024,65536
pingpong pingpong_rdm_stream_inject --ep rdm --inject --stream 5000 --sizes 8,4096,65536

# The provider as libfabric loads it on the device: fi_info lists RDM, MSG and DGRAM on
# the device's fabric (and the simulator's), ldd -r is clean, the parameters are listed.
if bash tests/libfabric/provider_load_test.sh "$bin/api/libfabric/libsoftfab-fi.so" \
  "$SOFTFAB_VERBS_DEVICE" >"$out/fi_info_provider.log" 2>&1; then
  printf 'pass\t%s\n' fi_info_provider >>"$out/checks.txt"
else
  grep FAIL "$out/fi_info_provider.log"
  printf 'fail\t%s\n' fi_info_provider >>"$out/checks.txt"
fi

# Unmodified Debian fi_pingpong (libfabric-bin), two processes, on softfab's libfabric
# provider (libsoftfab-fi.so, found through FI_PROVIDER_PATH) on the device: every size
# (-S all), every byte checked (-c), names and sizes exchanged over TCP on 127.0.0.1.
fi_pingpong_check() {
  local name=$1; shift
  local port=$((47700 + RANDOM % 1000))
  local args=(-p softfab -d "$SOFTFAB_VERBS_DEVICE" -I 10 -S all -c "$@")
  if ! command -v fi_pingpong >/dev/null; then
    echo "   $name: fi_pingpong is not installed (libfabric-bin)"
    printf 'fail\t%s\n' "$name" >>"$out/checks.txt"
    return
  fi
  FI_PROVIDER_PATH="$bin/api/libfabric" timeout 300 fi_pingpong "${args[@]}" -B "$port" \
    >"$out/$name.server.log" 2>&1 &
  local server=$!
  sleep 1
  FI_PROVIDER_PATH="$bin/api/libfabric" timeout 300 fi_pingpong "${args[@]}" -P "$port" \
    127.0.0.1 >"$out/$name.client.log" 2>&1
  local client_rc=$?
  wait "$server"
  local server_rc=$?
  tail -n 2 "$out/$name.client.log"
  # A run that ended early prints fewer size lines: both must reach the largest size.
  if [ "$client_rc" -eq 0 ] && [ "$server_rc" -eq 0 ] &&
    [ "$(grep -c '=10 ' "$out/$name.client.log")" -ge 10 ]; then
    printf 'pass\t%s\n' "$name" >>"$out/checks.txt"
  else
    echo "   $name: client exit $client_rc, server exit $server_rc"
    tail -n 5 "$out/$name.server.log"
    printf 'fail\t%s\n' "$name" >>"$out/checks.txt"
  fi
}
fi_pingpong_check fi_pingpong_rdm -e rdm
fi_pingpong_check fi_pingpong_rdm_tagged -e rdm -m tagged
fi_pingpong_check fi_pingpong_msg -e msg
fi_pingpong_check fi_pingpong_dgram -e dgram

# Unmodified Open MPI (openmpi-bin, libopenmpi-dev) over its mtl ofi on softfab's provider:
# tests/libfabric/mpi_ring.c built with mpicc, two ranks, messages of 0 B to 4 MiB around a
# ring received from MPI_ANY_SOURCE after MPI_Iprobe, every byte checked.
mpi_ring_check() {
  local name=mpi_ring_ofi_softfab
  if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "   $name: Open MPI is not installed (openmpi-bin, libopenmpi-dev)"
    printf 'fail\t%s\n' "$name" >>"$out/checks.txt"
    return
  fi
  # Open MPI's launcher refuses a host without a name (the VM's is "(none)").
  [ "$(hostname)" != "(none)" ] || hostname softfab-vm
  if mpicc -O2 -o "$out/mpi_ring" tests/libfabric/mpi_ring.c >"$out/$name.log" 2>&1 &&
    FI_PROVIDER_PATH="$bin/api/libfabric" timeout 300 mpirun --allow-run-as-root -n 2 \
      --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include softfab \
      -x FI_PROVIDER_PATH "$out/mpi_ring" >>"$out/$name.log" 2>&1 &&
    grep -q "^mpi_ring: 2 ranks, 0 errors" "$out/$name.log"; then
    tail -n 2 "$out/$name.log"
    printf 'pass\t%s\n' "$name" >>"$out/checks.txt"
  else
    tail -n 15 "$out/$name.log"
    printf 'fail\t%s\n' "$name" >>"$out/checks.txt"
  fi
}
mpi_ring_check

# `softfab info` (tools/softfab) lists the device the suites above ran on, its port ACTIVE.
if "$bin/tools/softfab" info >"$out/softfab_info.log" 2>&1 &&
  grep -q "^  ${SOFTFAB_VERBS_DEVICE:-[a-z]}[a-z0-9_]* *guid .*port ACTIVE" "$out/softfab_info.log"; then
  printf 'pass\t%s\n' softfab_info >>"$out/checks.txt"
else
  echo "   softfab_info: the device is not listed"; cat "$out/softfab_info.log"
  printf 'fail\t%s\n' softfab_info >>"$out/checks.txt"
fi
