#!/usr/bin/env bash
# softfab's test command (the README's second command, and what CI runs):
#   1. installs the Debian packages the build needs (tools/install-deps.sh),
#   2. runs every test: `bazel test //...` plain, then the verbs suites on Soft-RoCE in a
#      qemu VM (tools/rxe-vm/run.sh, tools/verbs-tests.sh), then `bazel test //...` under
#      AddressSanitizer and under UndefinedBehaviorSanitizer,
#   3. checks that the simulator's digest of a fixed faulty scenario is the same in
#      optimised and debug builds (once //backends/sim:sim_digest exists),
#   4. ends with one line "N passed, N failed" counted from the test.xml files.
# Exit status is non-zero when anything failed. SOFTFAB_SKIP_INSTALL=1 skips step 1,
# SOFTFAB_QUICK=1 skips the sanitizer runs, SOFTFAB_SKIP_VM=1 the VM, SOFTFAB_TARGETS (default //...) narrows the run.
# SOFTFAB_SKIP_FUZZ=1 skips the fuzz targets' timed runs (SOFTFAB_FUZZ_SECONDS each, default 60),
# SOFTFAB_SKIP_SOAK=1 the soak (bounded by SOFTFAB_SOAK_SECONDS, default 900).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${SOFTFAB_SKIP_INSTALL:-0}" != 1 ]; then
  bash tools/install-deps.sh --rxe-vm || { echo "0 passed, 1 failed"; exit 1; }
fi

targets=${SOFTFAB_TARGETS:-//...}
results=$(mktemp -d)
# Why each failed bazel target failed (its failed checks and the end of its test.log),
# printed again just above the summary: a CI log is often read from its end only.
failure_notes=$(mktemp)

# Runs `bazel test` with the given flags and files its test.xml results under $results/<name>.
bazel_tests() {
  local name=$1
  shift
  echo "== bazel test $* $targets"
  local log
  log=$(mktemp)
  # Everything is built first, then tested: compilers running beside the tests
  # take the cores that the multi-process tests hand between their processes
  # and the fabric daemon (fi_pingpong -e rdm -m tagged -S all on the shared
  # fabric: 5 s alone, 17 to 27 s beside two busy loops, and 53 to 72 s before
  # backends/simd/spin_governor.h).
  bazel build --keep_going "$@" -- $targets >"$log" 2>&1
  bazel test --keep_going "$@" -- $targets >>"$log" 2>&1
  local rc=$?
  tail -n 60 "$log"
  # Targets bazel itself reported as failed, timed out or not built: they count
  # as failures whatever their test.xml says (count_tests.py).
  local failed
  failed=$(grep -oE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log" | awk '{print "!" $1}' | sort -u)
  rm -f "$log"
  # A failed build or test shows up in the counts (a target without a test.xml is a
  # failure), so the exit code is only reported here.
  [ "$rc" -eq 0 ] || echo "== bazel test $* exited with $rc"
  local testlogs target test_log
  testlogs=$(bazel info "$@" bazel-testlogs 2>/dev/null)
  for target in $failed; do
    target=${target#!}
    test_log="$testlogs/$(echo "${target#//}" | tr : /)/test.log"
    {
      echo "-- [$name] $target"
      if [ -f "$test_log" ]; then
        grep -E '^FAIL|^\[  FAILED  \]|Failure$|runtime error|Sanitizer' "$test_log" | head -n 12
        tail -n 6 "$test_log"
      else
        echo "(no test.log)"
      fi
    } >>"$failure_notes"
  done

  python3 tools/count_tests.py collect "$testlogs" \
    "$results/$name" $(bazel query "tests(${targets// / + }) except attr(tags, manual, //...)" \
      2>/dev/null) $failed
}

bazel_tests plain

# The verbs backend on a real device: Soft-RoCE (rxe) in a throw-away qemu VM, running the
# binaries the plain pass just built (tools/verbs-tests.sh). A suite that wrote no XML, or a
# VM that did not boot, counts as a failure. SOFTFAB_SKIP_VM=1 leaves it out (then the verbs
# cases only show as skipped on the host).
if [ "${SOFTFAB_SKIP_VM:-0}" != 1 ] && [ "$targets" = "//..." ]; then
  echo "== verbs suites on rxe in a qemu VM (tools/rxe-vm/run.sh)"
  bazel build //examples:softfab_pingpong //api/libfabric:libsoftfab-fi.so 2>&1 | tail -n 1
  vm_out=$(mktemp -d)
  vm_start=$(date +%s)
  # The plain build's outputs by their real path (the bazel-bin link follows the last
  # configuration built).
  bin_dir=$(bazel info bazel-bin 2>/dev/null)
  bash tools/rxe-vm/run.sh --timeout 1500 --out "$vm_out" --env "SOFTFAB_BIN=$bin_dir" -- \
    bash tools/verbs-tests.sh "$vm_out" 2>&1 | tail -n 80
  vm_rc=${PIPESTATUS[0]}
  echo "== VM exited with $vm_rc after $(( $(date +%s) - vm_start )) s"
  xmls=()
  for x in $(bash tools/verbs-tests.sh --list); do xmls+=("rxe:${x%.xml}=$vm_out/$x"); done
  python3 tools/count_tests.py collect-xml "$results/vm" "${xmls[@]}"
  if [ -f "$vm_out/checks.txt" ]; then
    sed 's/\t/\trxe:/' "$vm_out/checks.txt" >>"$results/vm"
  else
    python3 tools/count_tests.py record "$results/vm" "rxe:two-process checks (none ran)" fail
  fi
  [ "$vm_rc" -eq 0 ] || [ "$vm_rc" -eq 1 ] ||
    python3 tools/count_tests.py record "$results/vm" "rxe:VM run (exit $vm_rc)" fail
fi

if [ "${SOFTFAB_QUICK:-0}" != 1 ]; then
  bazel_tests asan --config=asan
  bazel_tests ubsan --config=ubsan
fi

# The fuzz targets (fuzz/, issue 13): each built with clang under ASan + UBSan and run for
# SOFTFAB_FUZZ_SECONDS (default 60) from its seed corpus; one pass/fail per target.
# SOFTFAB_SKIP_FUZZ=1 leaves them out. (Their corpora also replay in the passes above, as
# the //fuzz:*_corpus_test targets.)
if [ "${SOFTFAB_SKIP_FUZZ:-0}" != 1 ] && [ "$targets" = "//..." ]; then
  for fuzz_target in decoders api_calls hostile_peer daemon_requests; do
    echo "== fuzz $fuzz_target for ${SOFTFAB_FUZZ_SECONDS:-60} s"
    if nice -n 10 bash fuzz/run.sh "$fuzz_target" "${SOFTFAB_FUZZ_SECONDS:-60}" 2>&1 | tail -n 1; then
      python3 tools/count_tests.py record "$results/fuzz" "fuzz:$fuzz_target" pass
    else
      python3 tools/count_tests.py record "$results/fuzz" "fuzz:$fuzz_target" fail
    fi
  done
fi

# Soak (tagged manual): 1,000 seeds of harsh faults, bounded by SOFTFAB_SOAK_SECONDS
# (default 900). SOFTFAB_SKIP_SOAK=1 leaves it out.
if [ "${SOFTFAB_SKIP_SOAK:-0}" != 1 ] && [ "$targets" = "//..." ]; then
  echo "== soak: bazel test //tests:soak_test (at most ${SOFTFAB_SOAK_SECONDS:-900} s)"
  bazel test --test_timeout="${SOFTFAB_SOAK_SECONDS:-900}" //tests:soak_test 2>&1 | tail -n 5
  python3 tools/count_tests.py collect "$(bazel info bazel-testlogs 2>/dev/null)" \
    "$results/soak" //tests:soak_test
fi

# The same scenario must give the same digest in -c opt, --config=release (-O3 and
# link-time optimization) and -c dbg builds.
if [ "$targets" = "//..." ] && bazel query //backends/sim:sim_digest >/dev/null 2>&1; then
  echo "== simulator digest, -c opt and --config=release against -c dbg"
  dbg=$(bazel run -c dbg //backends/sim:sim_digest 2>/dev/null | grep '^digest ')
  echo "dbg: ${dbg:-<none>}"
  for build in opt release; do
    if [ "$build" = opt ]; then flags=(-c opt); else flags=(--config=release); fi
    got=$(bazel run "${flags[@]}" //backends/sim:sim_digest 2>/dev/null | grep '^digest ')
    echo "$build: ${got:-<none>}"
    if [ -n "$got" ] && [ "$got" = "$dbg" ]; then
      python3 tools/count_tests.py record "$results/digest" "sim_digest_${build}_equals_dbg" pass
    else
      python3 tools/count_tests.py record "$results/digest" "sim_digest_${build}_equals_dbg" fail
    fi
  done
fi

# The main job's determinism: 1,000 seeds of the shipped lossy-link study, each run twice in
# different worker processes, must give identical results (softfab study --check-determinism).
if [ "$targets" = "//..." ]; then
  echo "== softfab study --check-determinism over 1,000 seeds"
  det_out=$(mktemp -d)
  bazel build -c opt //tools:softfab 2>&1 | tail -n 1
  if "$(bazel info -c opt bazel-bin 2>/dev/null)/tools/softfab" study \
    examples/scenarios/lossy_link_rc.yaml --seeds 1-1000 --jobs 2 --check-determinism \
    --quiet --out "$det_out/report" 2>&1 | tail -n 4; then
    python3 tools/count_tests.py record "$results/determinism" "study_check_determinism_1000_seeds" pass
  else
    python3 tools/count_tests.py record "$results/determinism" "study_check_determinism_1000_seeds" fail
  fi
fi

# Installing for programs built outside Bazel: tools/install.sh into a scratch prefix, then a
# C program built with `cc prog.c $(pkg-config --cflags --libs softfab)` runs on the
# simulator and fi_info lists the installed provider (tools/install.sh --check).
if [ "$targets" = "//..." ]; then
  echo "== tools/install.sh --check into a scratch prefix"
  install_prefix=$(mktemp -d)
  if bash tools/install.sh --prefix "$install_prefix" --check 2>&1 | tail -n 3; then
    python3 tools/count_tests.py record "$results/install" "install_pkg_config_c_program" pass
  else
    python3 tools/count_tests.py record "$results/install" "install_pkg_config_c_program" fail
  fi
  rm -rf "$install_prefix"
fi

# A study sharded as a Slurm array job on a one-node cluster on this machine must equal
# the same study run here (tools/slurm/test.sh). SOFTFAB_SKIP_SLURM=1 leaves it out.
if [ "$targets" = "//..." ] && [ "${SOFTFAB_SKIP_SLURM:-0}" != 1 ]; then
  echo "== Slurm: sharded study against a single run (tools/slurm/test.sh)"
  bash tools/slurm/test.sh "$results/slurm" 2>&1 | tail -n 40
  [ -s "$results/slurm" ] ||
    python3 tools/count_tests.py record "$results/slurm" "slurm test (recorded nothing)" fail
fi

if [ -s "$failure_notes" ]; then
  echo "== why the failed targets failed"
  cat "$failure_notes"
fi
rm -f "$failure_notes"
python3 tools/count_tests.py summarize "$results"
