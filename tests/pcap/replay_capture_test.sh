#!/usr/bin/env bash
# `softfab replay --trace --pcap` on a shipped scenario, checked by check_capture.py:
# tshark decodes every frame of the capture and each matches the trace's packet
# arrival of the same index (time, node, opcode, QP, PSN); ICRCs recomputed.
# Args: SOFTFAB SCENARIO CHECKER [SEED...]
set -euo pipefail
softfab=$1 scenario=$2 checker=$3
shift 3
out=${TEST_TMPDIR:-$(mktemp -d)}
for seed in "${@:-1}"; do
  "$softfab" replay "$scenario" --seed "$seed" --trace "$out/$seed.trace" \
    --pcap "$out/$seed.pcap" >"$out/$seed.out" || {
    echo "replay of seed $seed failed:"
    cat "$out/$seed.out"
    exit 1
  }
  [ -s "$out/$seed.pcap" ] || { echo "seed $seed: no capture written"; exit 1; }
  if ! result=$(python3 "$checker" "$out/$seed.trace" "$out/$seed.pcap"); then
    echo "seed $seed: $result"
    exit 1
  fi
  echo "seed $seed: $result"
done
