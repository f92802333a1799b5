#!/usr/bin/env bash
# bench-tokenizer: single-core encoding MB/s of llmc/tokenizer.h against tiktoken (same text, same
# run), and ./prepare_data MB/s with 1 and 2 threads on the fortunes corpus repeated 8 times.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
GPT2_DIR=${GPT2_DIR:-../shared/data/gpt2}
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
for threads in 1 2; do
    echo "prepare_data --threads $threads on $(du -m "$tmp/fortunes8.txt" | cut -f1) MB:"
    ./prepare_data --input "$tmp/fortunes8.txt" --output-dir "$tmp/out$threads" --doc-separator % \
        --threads "$threads" 2>&1 | grep documents
done
cmp "$tmp/out1/train_000000.bin" "$tmp/out2/train_000000.bin" && echo "1- and 2-thread shards identical"
