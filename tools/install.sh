#!/usr/bin/env bash
# Installs softfab for programs built outside Bazel, in one command:
#   tools/install.sh [--prefix DIR] [--provider-dir DIR] [--check]
# puts into the prefix (default /usr/local):
#   lib/libsoftfab.so            the sf_* and sfv_* C API (simulator and verbs), one library
#   include/softfab/fabric.h     sf_*  (fi_msg / fi_tagged shapes)
#   include/softfab/verbs.h      sfv_* (ibverbs shapes)
#   lib/pkgconfig/softfab.pc     cc prog.c $(pkg-config --cflags --libs softfab)
#   lib/libfabric/libsoftfab-fi.so   the libfabric provider (or --provider-dir; libfabric
#                                finds it through FI_PROVIDER_PATH=<that dir>, or without
#                                it when installed in /usr/lib/x86_64-linux-gnu/libfabric)
# C++ programs use the same C headers (they are extern "C"); the simulator's C++
# extension (api/sim/sim_api.h) names backend types and is for in-tree code only.
# --check then builds tests/install/sim_message.c against the installed files with
# pkg-config and runs it on the simulator, and lists the provider with fi_info.
# SOFTFAB_INSTALL_BAZEL_FLAGS (default "--config=release": -O3 and link-time
# optimization, .bazelrc) are passed to bazel build.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
provider_dir=""
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --provider-dir) provider_dir=$2; shift 2 ;;
    --provider-dir=*) provider_dir=${1#--provider-dir=}; shift ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [--prefix DIR] [--provider-dir DIR] [--check]" >&2; exit 2 ;;
  esac
done
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
libdir=$prefix/lib
provider_dir=${provider_dir:-$libdir/libfabric}

read -r -a flags <<<"${SOFTFAB_INSTALL_BAZEL_FLAGS:---config=release}"
bazel build "${flags[@]}" //api/shared:libsoftfab.so //api/libfabric:libsoftfab-fi.so
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)

# The library must export exactly the functions the headers declare.
declared=$(for h in fabric verbs; do
  gcc -E -P -x c "api/softfab/$h.h" | tr '\n' ' ' | grep -oE '\bsfv?_[a-z0-9_]+\s*\(' | sed 's/\s*($//'
done | sort -u)
exported=$(readelf --dyn-syms -W "$bin/api/shared/libsoftfab.so" |
  awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK" || $5 == "UNIQUE") {print $8}' | sort -u)
if [ "$declared" != "$exported" ]; then
  echo "install: libsoftfab.so's exports differ from the headers' declarations:" >&2
  diff <(echo "$declared") <(echo "$exported") >&2 || true
  exit 1
fi

install -d "$libdir/pkgconfig" "$prefix/include/softfab" "$provider_dir"
install -m 755 "$bin/api/shared/libsoftfab.so" "$libdir/libsoftfab.so"
install -m 644 api/softfab/fabric.h api/softfab/verbs.h "$prefix/include/softfab/"
install -m 755 "$bin/api/libfabric/libsoftfab-fi.so" "$provider_dir/libsoftfab-fi.so"
cat >"$libdir/pkgconfig/softfab.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include
providerdir=$provider_dir

Name: softfab
Description: RDMA messaging on a deterministic simulator or verbs devices (sf_* and sfv_* C API)
Version: 0.1
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lsoftfab
Cflags: -I\${includedir}
EOF
echo "installed into $prefix (provider: $provider_dir/libsoftfab-fi.so)"

if [ "$check" = 1 ]; then
  work=$(mktemp -d)
  export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror -o "$work/sim_message" tests/install/sim_message.c \
    $(pkg-config --cflags --libs softfab)
  "$work/sim_message"
  FI_PROVIDER_PATH=$provider_dir FI_SOFTFAB_BACKEND=sim fi_info -p softfab -t FI_EP_RDM |
    grep -q "provider: softfab$"
  echo "install check: sim_message ran, fi_info lists the installed provider"
  rm -rf "$work"
fi
