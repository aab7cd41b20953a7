#!/usr/bin/env bash
# softfab's main job (the README's first command): a fault-injection study on the
# simulated fabric through the `softfab` command (//tools:softfab). Installs what the
# build needs (tools/install-deps.sh), builds the command optimised and runs it.
#   bash tools/study.sh
#       = softfab study examples/scenarios/lossy_link_rc.yaml --seeds 1-1000 --jobs 2 --out study-report
#   bash tools/study.sh study examples/scenarios/srq_starvation_rnr.yaml --seeds 1-200 --out rnr
#   bash tools/study.sh replay examples/scenarios/lossy_link_rc.yaml --seed 17 --trace t.txt --pcap t.pcap
#   bash tools/study.sh merge shard-0 shard-1 --out merged
#   bash tools/study.sh info
# SOFTFAB_SKIP_INSTALL=1 skips the install step. Exit codes: 0 every seed passed,
# 1 some seed failed, 2 usage (bad arguments or scenario file).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SOFTFAB_SKIP_INSTALL:-0}" != 1 ]; then bash tools/install-deps.sh >&2; fi
bazel build -c opt //tools:softfab >&2
if [ "$#" -eq 0 ]; then
  set -- study examples/scenarios/lossy_link_rc.yaml --seeds 1-1000 --jobs 2 --out study-report
fi
exec bazel-bin/tools/softfab "$@"
