#!/usr/bin/env bash
# Behaviour fingerprint of the simulator and the messaging stack, for refactors
# that must not change behaviour: the simulator digest of the fixed faulty
# scenario, every fault_test replay digest (RDM and MSG seeds), and the output of
# the 100-seed study. Run before and after a change; the lines must be identical.
#   bash tools/fingerprint.sh > before.txt   # ... change ...
#   bash tools/fingerprint.sh | diff before.txt -
# SOFTFAB_BENCH_BUILD: the build's flags (default "-c opt"; say
# "--config=release" for the production build: the lines must not change).
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a build <<<"${SOFTFAB_BENCH_BUILD:--c opt}"
bazel build "${build[@]}" //backends/sim:sim_digest //tests:fault_test \
  //examples:fault_study >&2
bin=$(bazel info "${build[@]}" bazel-bin 2>/dev/null)
"$bin/backends/sim/sim_digest"
xml=$(mktemp)
"$bin/tests/fault_test" --gtest_output="xml:$xml" >/dev/null
# One line per seed, sorted by name so gtest's order does not matter.
grep -o 'name="digest_[a-z]*_seed_[0-9]*" value="[0-9]*"' "$xml" |
  sed -E 's/name="([^"]*)" value="([^"]*)"/fault_test \1 \2/' | sort -V
rm -f "$xml"
study=$("$bin/examples/fault_study" --seeds 100)
echo "study sha256 $(printf '%s\n' "$study" | sha256sum | cut -d' ' -f1)"
printf '%s\n' "$study" | tail -n 1
