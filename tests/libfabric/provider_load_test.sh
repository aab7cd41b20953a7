#!/usr/bin/env bash
# libsoftfab-fi.so as libfabric loads it: `ldd -r` finds every symbol (a
# missing one makes libfabric drop the provider without a word), the library
# exports fi_prov_ini and nothing else of softfab's, `fi_info -p softfab`
# lists RDM, MSG and DGRAM endpoints for every fabric (here the simulator,
# and each verbs device when there is one), and `fi_info -e` lists the
# provider's parameters. Fails (never skips) when fi_info is missing.
set -uo pipefail
so=${1:?usage: $0 <path of libsoftfab-fi.so> [verbs device that must be listed]}
device=${2:-}
failures=0
check() {  # check <description> <command...>
  local what=$1
  shift
  if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

command -v fi_info >/dev/null || { echo "FAIL: fi_info not installed (libfabric-bin)"; exit 1; }
dir=$(cd "$(dirname "$so")" && pwd)
export FI_PROVIDER_PATH=$dir
# Built under AddressSanitizer (--config=asan) the provider needs the ASan runtime loaded
# first, which an uninstrumented fi_info does not do: preload it (leaks of fi_info itself
# are not this test's business).
if readelf -d "$so" | grep -q 'NEEDED.*libasan'; then
  export LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0
fi

undefined=$(ldd -r "$so" 2>&1 | grep -i "undefined symbol")
check "ldd -r: no undefined symbol ${undefined:+($undefined)}" test -z "$undefined"

# Nothing of softfab's but fi_prov_ini. In C++20 every object file carries weak copies of
# std::string's members (libstdc++ declares them extern only up to C++17), and the linker
# exports the copies a shared library in the link (libyaml-cpp) refers to, version script
# or not: those are the C++ library's (_ZNSt / _ZNKSt), identical to libstdc++'s, which
# every lookup reaches first; they are listed apart, and anything else fails the check.
exported=$(readelf --dyn-syms -W "$so" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK" || $5 == "UNIQUE") {print $8}' | sort -u)
ours=$(echo "$exported" | grep -v -E '^_ZN?K?St' || true)
check "exports only fi_prov_ini (got: $(echo $ours); C++ library copies: $(echo "$exported" | grep -c -E '^_ZN?K?St'))" test "$ours" = "fi_prov_ini"

listing=$(FI_SOFTFAB_BACKEND=sim fi_info -p softfab 2>&1)
for type in FI_EP_RDM FI_EP_MSG FI_EP_DGRAM; do
  n=$(printf '%s\n' "$listing" | awk -v t="$type" '
    /provider:/ {prov = $2} /fabric:/ {fab = $2}
    /type:/ && prov == "softfab" && fab == "sim" && $2 == t {n++} END {print n + 0}')
  check "fi_info -p softfab lists $type on fabric sim" test "$n" -eq 1
done

# Each verbs device (ibv_devices) is a fabric of its own with the three types.
all=$(fi_info -p softfab 2>&1)
if [ -n "$device" ]; then
  check "fi_info -p softfab lists fabric $device" grep -q "fabric: $device$" <<<"$all"
fi
for dev in $(printf '%s\n' "$all" | awk '/provider: softfab$/ {p = 1; next} /provider:/ {p = 0} p && /fabric:/ {print $2}' | sort -u); do
  for type in FI_EP_RDM FI_EP_MSG FI_EP_DGRAM; do
    n=$(printf '%s\n' "$all" | awk -v t="$type" -v d="$dev" '
      /provider:/ {prov = $2} /fabric:/ {fab = $2}
      /type:/ && prov == "softfab" && fab == d && $2 == t {n++} END {print n + 0}')
    check "fi_info -p softfab lists $type on fabric $dev" test "$n" -eq 1
  done
done

params=$(fi_info -e 2>&1 | tr -d '\000')
for p in FI_SOFTFAB_BACKEND FI_SOFTFAB_SIM_NODES FI_SOFTFAB_SIM_SEED FI_SOFTFAB_SIM_DROP \
  FI_SOFTFAB_SIM_DUPLICATE FI_SOFTFAB_SIM_REORDER FI_SOFTFAB_SIM_LATENCY_NS \
  FI_SOFTFAB_SIM_SCENARIO FI_SOFTFAB_LOOKUP_TIMEOUT_MS; do
  check "fi_info -e lists $p" grep -aq "^# $p:" <<<"$params"
done

# A hint it cannot meet gives no entry (fi_info says -FI_ENODATA: "No data").
check "fi_info -p softfab -c FI_RMA finds nothing" \
  bash -c '! FI_SOFTFAB_BACKEND=sim fi_info -p softfab -c FI_RMA 2>&1 | grep -q "provider: softfab$"'

echo "$failures failed"
[ "$failures" -eq 0 ]
