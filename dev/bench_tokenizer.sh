#!/usr/bin/env bash
# bench-tokenizer: single-core encoding MB/s of llmc/tokenizer.h against tiktoken (same text, same
# run), and ./prepare_data MB/s with 1 and 2 threads and their ratio on the fortunes corpus repeated
# 8 times, against two 1-thread processes run at once in the same rounds (what the shared cores give).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
GPT2_DIR=${GPT2_DIR:-../shared/data/gpt2}
for f in vocab.bpe encoder.json; do
    [ -f "$GPT2_DIR/$f" ] || { echo "error: $GPT2_DIR/$f not found: set GPT2_DIR to a directory with OpenAI's GPT-2 vocab.bpe and encoder.json" >&2; exit 1; }
done
src=$(bash data/setup.sh --fetch-only | tail -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the corpus prepare_data reads: every text file of the fortunes directory, concatenated
find "$src" -maxdepth 1 -type f ! -name '*.dat' | LC_ALL=C sort | xargs cat > "$tmp/fortunes.txt"

./build/bench_tokenizer "$tmp/fortunes.txt" 5
"$PYTHON" - "$tmp/fortunes.txt" "$GPT2_DIR" <<'PY'
import sys, time, tiktoken, tiktoken.load
from tiktoken_ext.openai_public import r50k_pat_str
ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(f"{sys.argv[2]}/vocab.bpe", f"{sys.argv[2]}/encoder.json")
enc = tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
data = open(sys.argv[1], "rb").read()
text = data.decode("utf-8")
best = 1e9
for _ in range(5):
    t = time.perf_counter()
    ids = enc.encode_ordinary(text)
    best = min(best, time.perf_counter() - t)
print(f"tiktoken {tiktoken.__version__}: {len(data)} bytes -> {len(ids)} tokens, best of 5: {best:.3f} s, "
      f"{len(data) / best / 1e6:.1f} MB/s (one thread, str already decoded)")
PY
for k in 1 2 3 4 5 6 7 8; do cat "$tmp/fortunes.txt"; echo %; done > "$tmp/fortunes8.txt"

# MB/s that ./prepare_data reports for one run (fails with its output if it fails): prepare_mbs OUT_DIR THREADS
prepare_mbs() {
    local log
    log=$(./prepare_data --input "$tmp/fortunes8.txt" --output-dir "$1" --doc-separator % --threads "$2" 2>&1) ||
        { echo "$log" >&2; return 1; }
    sed -nE 's/.* documents from .* ([0-9.]+) MB\/s, [0-9]+ threads$/\1/p' <<< "$log"
}
# the machine is shared, so each round runs 1 thread, 2 threads, and two 1-thread processes at once
# (what the cores give to two independent encoders right now) back to back; the best round of each counts
rounds=5
pressure_before=$(sed -nE 's/^some .*total=([0-9]+)$/\1/p' /proc/pressure/cpu 2>/dev/null || true)
start_us=$(date +%s%6N)
for round in $(seq "$rounds"); do
    one=$(prepare_mbs "$tmp/out1" 1)
    two=$(prepare_mbs "$tmp/out2" 2)
    prepare_mbs "$tmp/outa" 1 > "$tmp/rate_a" &
    other=$!
    prepare_mbs "$tmp/outb" 1 > "$tmp/rate_b"
    wait "$other"
    echo "1 $one" >> "$tmp/rates"
    echo "2 $two" >> "$tmp/rates"
    echo "p $(cat "$tmp/rate_a") $(cat "$tmp/rate_b")" >> "$tmp/rates"
done
elapsed_us=$(( $(date +%s%6N) - start_us ))
echo "prepare_data on $(du -m "$tmp/fortunes8.txt" | cut -f1) MB, best of $rounds interleaved rounds:"
awk '$1 == "1" && $2 > t1 { t1 = $2 } $1 == "2" && $2 > t2 { t2 = $2 } $1 == "p" && $2 + $3 > p { p = $2 + $3; pa = $2; pb = $3 }
     END { printf "  --threads 1: %.1f MB/s\n  --threads 2: %.1f MB/s\n  speedup 2 vs 1 thread: %.2fx\n", t1, t2, t2 / t1
           printf "  baseline, two 1-thread processes at once: %.1f + %.1f = %.1f MB/s (%.2fx of one)\n", pa, pb, p, p / t1 }' "$tmp/rates"
pressure_after=$(sed -nE 's/^some .*total=([0-9]+)$/\1/p' /proc/pressure/cpu 2>/dev/null || true)
if [ -n "$pressure_before" ] && [ -n "$pressure_after" ]; then
    echo "  CPU pressure during these runs: some task waited for a core $(( 100 * (pressure_after - pressure_before) / elapsed_us ))% of the time"
fi
for f in "$tmp"/out1/*.bin; do
    cmp "$f" "$tmp/out2/$(basename "$f")"
done
echo "1- and 2-thread shards identical ($(ls "$tmp/out1" | wc -l) files)"
