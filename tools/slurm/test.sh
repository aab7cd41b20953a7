#!/usr/bin/env bash
# The Slurm test: a study sharded over a real (one-node) Slurm cluster equals the same
# study run on one machine.
#   1. starts the cluster (tools/slurm/cluster.sh start),
#   2. submits examples/softfab_study.sbatch as an array of 4 with `sbatch --wait`,
#   3. joins the 4 shard directories with `softfab merge`,
#   4. runs the same seeds with `softfab study` on this machine,
#   5. compares the two reports' results.json (and results.csv, seeds.jsonl) byte for
#      byte, and stops the cluster.
# Usage: bash tools/slurm/test.sh [RESULTS]  RESULTS: a file that gets one line per check
# in the format of `tools/count_tests.py record` ("pass|fail<TAB>name"); without it the
# lines go to stdout. Exit status 0 when every check passed.
# Environment: SOFTFAB (the softfab binary; default: built with bazel), SOFTFAB_SLURM_SCENARIO
# (default: examples/scenarios/lossy_link_rc.yaml), SOFTFAB_SLURM_SEEDS (default 1-40),
# SOFTFAB_SLURM_DIR (the cluster's folder, see cluster.sh).
set -uo pipefail
results=${1:+$(realpath -m "$1")}
cd "$(dirname "$0")/../.."

failed=0
record() {  # record NAME pass|fail
  if [ -n "$results" ]; then
    printf '%s\tslurm: %s\n' "$2" "$1" >>"$results"
  fi
  echo "slurm test: $2: $1"
  [ "$2" = pass ] || failed=1
}
finish() {
  bash tools/slurm/cluster.sh stop || record "cluster stops" fail
  [ -n "${work:-}" ] && [ "$failed" -eq 0 ] && rm -rf "$work"
  [ "$failed" -eq 0 ] || echo "slurm test: failed; files kept in ${work:-?}" >&2
  exit "$failed"
}

softfab=${SOFTFAB:-}
if [ -z "$softfab" ]; then
  if ! bazel build //tools:softfab 2>&1 | tail -n 3; then
    record "softfab builds" fail
    exit 1
  fi
  softfab="$(bazel info bazel-bin 2>/dev/null)/tools/softfab"
fi
scenario=${SOFTFAB_SLURM_SCENARIO:-examples/scenarios/lossy_link_rc.yaml}
seeds=${SOFTFAB_SLURM_SEEDS:-1-40}
if [ ! -x "$softfab" ] || [ ! -f "${scenario:-}" ]; then
  echo "slurm test: no softfab binary ($softfab) or no scenario (${scenario:-none})" >&2
  record "softfab and a scenario present" fail
  exit 1
fi
scenario=$(realpath "$scenario")
work=$(mktemp -d /tmp/softfab-slurm-test.XXXXXX)

trap finish EXIT
if ! bash tools/slurm/cluster.sh start; then
  record "cluster starts" fail
  exit 1
fi
eval "$(bash tools/slurm/cluster.sh env)"
record "cluster starts" pass

# The array: 4 tasks, each one shard; `--wait` returns when all have ended, with the
# highest exit code among them.
echo "== sbatch --wait --array=0-3 examples/softfab_study.sbatch $scenario --seeds $seeds"
start=$(date +%s)
SOFTFAB=$softfab timeout 600 sbatch --wait --array=0-3 --output="$work/task-%a.out" \
  examples/softfab_study.sbatch "$scenario" "$work/array" --seeds "$seeds" |
  tee "$work/sbatch.out"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 124 ]; then  # timed out: cancel the tasks before the daemons go
  job=$(awk '/^Submitted batch job/ { print $4 }' "$work/sbatch.out")
  [ -n "$job" ] && scancel "$job"
fi
echo "== array ended after $(($(date +%s) - start)) s with exit $rc"
shards=()
for i in 0 1 2 3; do
  [ -f "$work/array/shard-$i/results.json" ] && shards+=("$work/array/shard-$i")
done
if [ "${#shards[@]}" -eq 4 ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; }; then
  record "array of 4 shards ran (sbatch exit $rc)" pass
else
  record "array of 4 shards ran (sbatch exit $rc, ${#shards[@]} of 4 reports)" fail
  tail -n 20 "$work"/task-*.out >&2
  exit 1
fi

"$softfab" merge "${shards[@]}" --out "$work/merged" >"$work/merge.out" 2>&1
rc=$?
if [ "$rc" -le 1 ] && [ -f "$work/merged/results.json" ]; then
  record "softfab merge of the 4 shards (exit $rc)" pass
else
  record "softfab merge of the 4 shards (exit $rc)" fail
  cat "$work/merge.out" >&2
  exit 1
fi

"$softfab" study "$scenario" --seeds "$seeds" --jobs 2 --out "$work/single" \
  >"$work/single.out" 2>&1
rc=$?
# results.json is what must match; the per-seed files (results.csv, seeds.jsonl) too.
same=1
for f in results.json results.csv seeds.jsonl; do
  cmp "$work/single/$f" "$work/merged/$f" || same=0
done
if [ "$rc" -le 1 ] && [ "$same" -eq 1 ]; then
  record "merged report (results.json, .csv, seeds.jsonl) equals a single-machine run of seeds $seeds" pass
else
  record "merged report equals a single-machine run of seeds $seeds (study exit $rc)" fail
  diff <(head -c 4000 "$work/single/results.json") <(head -c 4000 "$work/merged/results.json") >&2
fi
exit "$failed"
