#!/usr/bin/env bash
# Tests of the softfab command as a user runs it: exit codes (0 passed, 1 a seed
# failed, 2 usage), a bad scenario refused with its location before anything
# runs, the report directory's files, shards merged equal to one run
# (byte-identical results.json, results.csv, seeds.jsonl), --check-determinism,
# and replay printing the digest the study recorded.
#   cli_test.sh SOFTFAB PASSING_SCENARIO FAILING_SCENARIO BAD_SCENARIO
# PASSING_SCENARIO must pass every seed; FAILING_SCENARIO must fail some.
set -uo pipefail
softfab=$1 passing=$2 failing=$3 bad=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
check() {  # check NAME CONDITION...: one line per check, counted.
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
exit_code() {  # exit_code EXPECTED COMMAND...: runs it, output to $tmp/out, $tmp/err.
  local expected=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" != "$expected" ]; then
    echo "  '$*' exited $got, expected $expected; stderr:"; sed 's/^/    /' "$tmp/err" | head -5
    return 1
  fi
}
has() { grep -q -- "$1" "$2" || { echo "  no '$1' in $2:"; sed 's/^/    /' "$2" | head -8; return 1; }; }

# Usage errors: exit 2.
check "no subcommand" exit_code 2 "$softfab"
check "study without a scenario" exit_code 2 "$softfab" study
check "reversed seed range" exit_code 2 "$softfab" study "$passing" --seeds 9-3
check "shard index out of range" exit_code 2 "$softfab" study "$passing" --shard 4/4
check "zero jobs" exit_code 2 "$softfab" study "$passing" --jobs 0
check "missing scenario file" exit_code 2 "$softfab" study "$tmp/none.yaml" --out "$tmp/none"
check "replay without --seed" exit_code 2 "$softfab" replay "$passing"
check "merge without --out" exit_code 2 "$softfab" merge "$tmp"
check "help" exit_code 0 "$softfab" --help

# Input a user can get wrong, refused at once with one line of reason.
check "a device is not a scenario" exit_code 2 timeout 10 "$softfab" study /dev/zero --seeds 1-2
check "  ...and says so" has "not a regular file" "$tmp/err"
printf 'first line of prose\nsecond line\nthird line\n' >"$tmp/prose.txt"
check "prose is not a scenario" exit_code 2 "$softfab" study "$tmp/prose.txt" --seeds 1-2
check "  ...quoting its first line only" has "begins 'first line of prose'" "$tmp/err"
check "  ...and not the rest" sh -c "! grep -q 'second line' '$tmp/err'"
head -c 1100000 /dev/zero | tr '\0' 'a' >"$tmp/huge.yaml"
check "an oversized file is refused" exit_code 2 "$softfab" study "$tmp/huge.yaml"
check "  ...by its size" has "larger than a scenario file may be" "$tmp/err"
check "replay --seed -1 is refused" exit_code 2 "$softfab" replay "$passing" --seed -1
check "  ...not wrapped to 2^64-1" has "expected an unsigned number" "$tmp/err"
check "replay --seed 2^64 is refused" exit_code 2 "$softfab" replay "$passing" --seed 18446744073709551616
check "unwritable --out fails before the study" exit_code 2 "$softfab" study "$passing" --seeds 1-1000 --out /proc/softfab-out
check "  ...naming --out" has "\-\-out: cannot create /proc/softfab-out" "$tmp/err"
check "unwritable --pcap fails before the replay" exit_code 2 "$softfab" replay "$passing" --seed 1 --pcap /proc/x.pcap

# A bad scenario: refused with FILE:LINE:COL, nothing written.
check "bad scenario exits 2" exit_code 2 "$softfab" study "$bad" --seeds 1-3 --out "$tmp/bad"
check "bad scenario located" has "$(basename "$bad"):[0-9]*:[0-9]*: " "$tmp/err"
check "bad scenario runs nothing" test ! -e "$tmp/bad"

# One run over seeds 1-9 in 2 workers: exit 0 and every report file.
check "passing study exits 0" exit_code 0 "$softfab" study "$passing" --seeds 1-9 --jobs 2 --out "$tmp/one"
check "summary says all passed" has "9 runs, 9 passed, 0 failed" "$tmp/out"
for f in results.json results.csv seeds.jsonl index.html latency_cdf.png latency_cdf.svg \
  throughput.png throughput.svg repairs.png repairs.svg; do
  check "report has $f" test -s "$tmp/one/$f"
done
check "seeds.jsonl has 9 lines" test "$(wc -l <"$tmp/one/seeds.jsonl")" = 9
check "results.csv has a header and 9 rows" test "$(wc -l <"$tmp/one/results.csv")" = 10
check "index.html embeds the plots" has 'src="latency_cdf.svg"' "$tmp/one/index.html"
check "index.html lists replay commands" has "softfab replay $passing --seed" "$tmp/one/index.html"

# Three shards (one worker each) merged: the same bytes as the single run.
for i in 0 1 2; do
  check "shard $i/3 exits 0" exit_code 0 "$softfab" study "$passing" --seeds 1-9 --jobs 1 \
    --shard $i/3 --out "$tmp/shard-$i" --quiet
done
check "shard 1/3 ran seeds 2, 5, 8" test "$(grep -o '"seed": \[[0-9, ]*\]' "$tmp/shard-1/results.json")" = '"seed": [2, 5, 8]'
check "merge exits 0" exit_code 0 "$softfab" merge "$tmp/shard-2" "$tmp/shard-0" "$tmp/shard-1" --out "$tmp/merged"
for f in results.json results.csv seeds.jsonl; do
  check "merged $f equals the single run's" cmp "$tmp/one/$f" "$tmp/merged/$f"
done
check "merging a shard twice exits 2" exit_code 2 "$softfab" merge "$tmp/shard-0" "$tmp/shard-0" --out "$tmp/twice"
check "and says which seed" has "appears in more than one shard" "$tmp/err"

# Determinism: every seed twice, in different workers.
check "--check-determinism exits 0" exit_code 0 "$softfab" study "$passing" --seeds 1-6 --jobs 2 --check-determinism
check "--check-determinism compared 6 seeds" has "6 seeds run twice, 0 differed" "$tmp/out"

# A scenario whose seeds fail: exit 1, and the worst seeds name their replay.
check "failing study exits 1" exit_code 1 "$softfab" study "$failing" --seeds 1-3 --jobs 2
check "failing study reports failures" has "3 failed" "$tmp/out"

# Replay: the digest the study recorded for seed 4, and the trace written.
digest=$(grep '"seed": 4,' "$tmp/one/seeds.jsonl" | grep -o '"digest": "*[0-9a-fx]*' | grep -o '[0-9a-fx]*$')
check "the study recorded a digest for seed 4" test -n "$digest"
check "replay exits 0" exit_code 0 "$softfab" replay "$passing" --seed 4 --trace "$tmp/seed-4.trace"
check "replay prints the study's digest ($digest)" has "digest .*${digest#0x}" "$tmp/out"
check "replay wrote the trace" test -s "$tmp/seed-4.trace"
check "replay of a failing seed exits 1" exit_code 1 "$softfab" replay "$failing" --seed 2

echo "cli_test: $failures failed"
[ "$failures" = 0 ]
