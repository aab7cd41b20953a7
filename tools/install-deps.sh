#!/usr/bin/env bash
# Installs what softfab builds and tests with, from Debian 12's archive. Idempotent.
# Needs root (or sudo). Nothing else is downloaded: Bazel runs offline (see WORKSPACE).
#   --rxe-vm       also what the Soft-RoCE VM harness (tools/rxe-vm/run.sh) needs
#   --rxe-vm-only  only that
set -euo pipefail

build_packages=(
  bazel-bootstrap bazel-platforms    # Bazel 4.2.3 and the platforms repository
  g++ python3 clang-format           # compiler, test-count script, formatting
  libgtest-dev libgmock-dev libbenchmark-dev
  libuv1-dev libibverbs-dev librdmacm-dev
  libyaml-cpp-dev                    # scenario files and results (tools/study)
  libcli11-dev                       # the softfab command line (tools/softfab)
  python3-matplotlib                 # the study report's plots (tools/report)
  tshark                             # decodes the simulator's captures (tests/pcap)
  slurm-wlm munge                    # the one-node cluster of the Slurm test (tools/slurm)
  clang-14 libclang-rt-14-dev        # the fuzz targets (libFuzzer, ASan, UBSan)
  libfabric-dev libfabric-bin pkg-config  # the libfabric provider, fi_info, tools/install.sh
  openmpi-bin libopenmpi-dev netpipe-openmpi  # Open MPI and NetPIPE over the provider
)
# Optional: qemu and the guest's busybox and module tools, plus the reference RDMA tools,
# which the guest runs from the host's root.
rxe_vm_packages=(
  qemu-system-x86 busybox-static cpio kmod xz-utils iproute2
  ibverbs-utils ibverbs-providers perftest rdmacm-utils
)
case "${1:-}" in
  "") packages=("${build_packages[@]}") ;;
  --rxe-vm) packages=("${build_packages[@]}" "${rxe_vm_packages[@]}") ;;
  --rxe-vm-only) packages=("${rxe_vm_packages[@]}") ;;
  *) echo "usage: $0 [--rxe-vm | --rxe-vm-only]" >&2; exit 2 ;;
esac

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
