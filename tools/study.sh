#!/usr/bin/env bash
# softfab's main job (the README's first command): a fault-injection study on the
# simulated fabric. Installs what the build needs (tools/install-deps.sh), builds the
# study optimised and runs it; extra arguments go to the study, e.g.
#   bash tools/study.sh --seeds 1000 --drop 0.02 --ack-timeout 8
#   bash tools/study.sh --seed 17            # replay one seed
# SOFTFAB_SKIP_INSTALL=1 skips the install step.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SOFTFAB_SKIP_INSTALL:-0}" != 1 ]; then bash tools/install-deps.sh >&2; fi
bazel build -c opt //examples:fault_study >&2
exec bazel-bin/examples/fault_study "$@"
