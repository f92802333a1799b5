#!/usr/bin/env bash
# On a machine with at least one NVIDIA GPU: the cost of the distributed code path on one GPU. Runs the
# d12 trainer (B=16, T=1024, mock data, 30 steps) plainly and as a 1-rank NCCL job (--dist-init tcp on
# this host: communicator, communication stream, bucketed all-reduces, scalar reductions), alternating
# A B A B, and compares the median tokens/s of the steps after the first third (11..30). Passes if the
# NCCL path keeps >= 98%; prints "plain X tok/s, 1-rank NCCL path Y tok/s: Z%" either way.
# Needs a trainer built with NCCL (make train_gpt). Ends with "N passed, M failed".
# Environment: TRAINER (default ./train_gpt), DIST_OVERHEAD_MODEL (default "-e d12 -b 16 -t 1024"),
# DIST_OVERHEAD_STEPS (default 30): the simulator build at a tiny size exercises the script without a GPU.
set -u
cd "$(dirname "$0")/.." || exit 1
TRAINER=${TRAINER:-./train_gpt}
if [ $# -gt 0 ]; then echo "usage: [TRAINER=...] $0   (no arguments; see its top comment)" >&2; exit 2; fi
if [ ! -x "$TRAINER" ]; then echo "error: $TRAINER: no such program: build it with make train_gpt (or set TRAINER)" >&2; exit 1; fi
steps=${DIST_OVERHEAD_STEPS:-30}
# shellcheck disable=SC2206
args=(${DIST_OVERHEAD_MODEL:--e d12 -b 16 -t 1024} --mock-data 1 -x "$steps" -v 0 -s 0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# median_tok_s LOG: the median tokens/s of the step lines after the first third
median_tok_s() {
    grep -E "^step +[0-9]+/$steps \|" "$1" | awk -F'|' -v skip=$((steps / 3)) '{ split($1, a, /[ \/]+/); if (a[2] > skip) print $6 }' |
        sed 's/[^0-9.]//g' | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
fail_run() { cat "$1"; echo "FAIL  $2"; echo "0 passed, 1 failed"; exit 1; }
for round in 1 2; do
    "$TRAINER" "${args[@]}" >"$tmp/plain$round.log" 2>&1 || fail_run "$tmp/plain$round.log" "the plain run (round $round) exited $?"
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 12000)) "$TRAINER" "${args[@]}" --dist-init tcp >"$tmp/dist$round.log" 2>&1 ||
        fail_run "$tmp/dist$round.log" "the 1-rank NCCL run (round $round) exited $?"
done
grep -q 'NCCL id by tcp' "$tmp/dist1.log" || fail_run "$tmp/dist1.log" "the NCCL run did not start a communicator"
cat "$tmp/plain1.log" "$tmp/plain2.log" >"$tmp/plain.log"
cat "$tmp/dist1.log" "$tmp/dist2.log" >"$tmp/dist.log"
plain=$(median_tok_s "$tmp/plain.log")
dist=$(median_tok_s "$tmp/dist.log")
if [ -z "$plain" ] || [ -z "$dist" ]; then fail_run "$tmp/dist.log" "no step lines to take tokens/s from (plain '$plain', NCCL '$dist')"; fi
if awk -v p="$plain" -v d="$dist" 'BEGIN { printf "plain %.0f tok/s, 1-rank NCCL path %.0f tok/s: %.2f%%\n", p, d, 100 * d / p; exit !(d >= 0.98 * p) }'; then
    echo "ok    1-rank distributed path within 2% of the plain path"; echo "1 passed, 0 failed"
else
    echo "FAIL  1-rank distributed path loses more than 2%"; echo "0 passed, 1 failed"; exit 1
fi
