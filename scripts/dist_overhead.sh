#!/usr/bin/env bash
# On a machine with at least one NVIDIA GPU: the cost of the distributed code path on one GPU. Runs the
# d12 trainer (B=16, T=1024, mock data, 30 steps) plainly and as a 1-rank NCCL job (--dist-init tcp on
# this host: communicator, communication stream, bucketed all-reduces, scalar reductions), alternating
# A B A B, and compares the median tokens/s of steps 11..30. Passes if the NCCL path keeps >= 98%.
# Needs ./train_gpt built with NCCL (make train_gpt). Ends with "N passed, M failed".
set -u
cd "$(dirname "$0")/.."
TRAINER=${TRAINER:-./train_gpt}
args="-e d12 --mock-data -b 16 -t 1024 -x 30 -v 0 -s 0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median_tok_s() { grep -E '^step +([0-9]+)/30' "$1" | awk -F'|' '{ split($1, a, /[ \/]+/); if (a[2] > 10) print $6 }' |
    sed 's/[^0-9.]//g' | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for round in 1 2; do
    $TRAINER $args >"$tmp/plain$round.log" 2>&1 || { cat "$tmp/plain$round.log"; echo "0 passed, 1 failed"; exit 1; }
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) $TRAINER $args --dist-init tcp >"$tmp/dist$round.log" 2>&1 ||
        { cat "$tmp/dist$round.log"; echo "0 passed, 1 failed"; exit 1; }
done
cat "$tmp/plain1.log" "$tmp/plain2.log" >"$tmp/plain.log"
cat "$tmp/dist1.log" "$tmp/dist2.log" >"$tmp/dist.log"
plain=$(median_tok_s "$tmp/plain.log")
dist=$(median_tok_s "$tmp/dist.log")
grep -q 'NCCL id by tcp' "$tmp/dist1.log" || { echo "FAIL  the NCCL run did not start a communicator"; echo "0 passed, 1 failed"; exit 1; }
if awk -v p="$plain" -v d="$dist" 'BEGIN { printf "plain %.0f tok/s, 1-rank NCCL path %.0f tok/s: %.2f%%\n", p, d, 100 * d / p; exit !(d >= 0.98 * p) }'; then
    echo "ok    1-rank distributed path within 2% of the plain path"; echo "1 passed, 0 failed"
else
    echo "FAIL  1-rank distributed path loses more than 2%"; echo "0 passed, 1 failed"; exit 1
fi
