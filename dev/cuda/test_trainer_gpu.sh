#!/usr/bin/env bash
# End-to-end tests of the simulated GPU trainer (./train_gpt_sim bf16, ./train_gpt_sim_fp32):
#   - side by side with the CPU trainer: the same initial model (written by train_gpt.py) and shards give
#     the same loss at each of 20 steps: bf16 within 2e-2 absolute, fp32 within 1e-4 relative;
#   - determinism: two identical runs print identical step lines (loss, lr, norm);
#   - exact resume: a run resumed from its step-4 checkpoint writes a step-8 checkpoint bit-identical to
#     the uninterrupted run's, and prints the same step lines;
#   - recompute (-r 2): the same losses within 2e-2, and the memory report says what it saved;
#   - bad input, before any kernel runs: model file vs flags, sequence too long, batch too big for memory.
# Token shards are written by a small Python writer that follows doc/formats.md. Ends with "N passed, M failed".
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
PYTHON=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { echo "ok    $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  $1"; fail=$((fail + 1)); }

"$PYTHON" - "$tmp" <<'PY'
import struct, sys, zlib
def shard(path, vocab, n):
    toks = [((i * 7) % 61 + (i // 997) % 3) % vocab for i in range(n)]
    payload = struct.pack("<%dH" % n, *toks)
    h = [0] * 256
    h[0], h[1], h[2] = 0x4B4F5447, 1, zlib.crc32(payload)
    h[3], h[4], h[5], h[6], h[7], h[8] = len(payload) & 0xFFFFFFFF, len(payload) >> 32, n & 0xFFFFFFFF, n >> 32, vocab, 2
    open(path, "wb").write(struct.pack("<256I", *h) + payload)
shard(sys.argv[1] + "/train_000.bin", 256, 12000)
shard(sys.argv[1] + "/val_000.bin", 256, 3000)
PY
"$PYTHON" train_gpt.py --train-data "$tmp/train_*.bin" --n-layer 2 --n-head 2 --n-embd 32 --vocab-size 256 -t 32 -b 4 \
    --steps 1 --seed 11 --write-model "$tmp/init.bin" --threads 2 >"$tmp/py.log" 2>&1 || { cat "$tmp/py.log"; }
common="-e $tmp/init.bin -i $tmp/train_*.bin --shuffle 0 -b 4 -t 32 -l 3e-3 -u 2 -s 0 -v 0"

# expect_error NAME PATTERN CMD...: non-zero exit, first stderr line "error: ..." matching PATTERN, no crash
expect_error() {
    local name=$1 pattern=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? first
    first=$(head -n 1 "$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$first" == error:* ]] && grep -qE "$pattern" <<<"$first"; then
        ok "$name: exit $rc: $first"
    else
        bad "$name: exit $rc, stderr: $(head -c 300 "$tmp/err")"
    fi
}
losses() { grep -E '^step +[0-9]+/[0-9]+ \| loss' "$1" | sed -E 's/.*loss ([0-9.]+).*/\1/'; }
steplines() { grep -E '^step +[0-9]+/[0-9]+ \| loss' "$1" | sed 's/| [0-9.]* ms.*//'; }

# ---------------------------------------------------------------- vs the CPU trainer
./train_gpt_cpu $common -x 20 >"$tmp/cpu.log" 2>&1
./train_gpt_sim $common -x 20 >"$tmp/bf16.log" 2>&1
./train_gpt_sim_fp32 $common -x 20 >"$tmp/fp32.log" 2>&1
losses "$tmp/cpu.log" >"$tmp/cpu_l"
losses "$tmp/bf16.log" >"$tmp/bf16_l"
losses "$tmp/fp32.log" >"$tmp/fp32_l"
compare() { # compare NAME FILE AWK-CONDITION-ON-d-AND-c
    local worst
    if [ "$(wc -l <"$2")" -eq 20 ] && [ "$(wc -l <"$tmp/cpu_l")" -eq 20 ] &&
        worst=$(paste "$2" "$tmp/cpu_l" | awk "{ d = \$1 - \$2; if (d < 0) d = -d; c = \$2; e = $3; if (e > w) w = e } END { print w }") &&
        awk -v w="$worst" -v b="$4" 'BEGIN { exit !(w <= b) }'; then
        ok "$1: 20 step losses vs train_gpt_cpu, worst $worst (bound $4); last $(tail -1 "$2") vs $(tail -1 "$tmp/cpu_l")"
    else
        bad "$1 vs train_gpt_cpu: $(paste -d/ "$2" "$tmp/cpu_l" | tr '\n' ' ') $(tail -2 "$tmp/bf16.log")"
    fi
}
compare "bf16 sim trainer" "$tmp/bf16_l" "d" 2e-2
compare "fp32 sim trainer" "$tmp/fp32_l" "d / c" 1e-4

# ---------------------------------------------------------------- determinism and recompute
./train_gpt_sim $common -x 20 >"$tmp/bf16_again.log" 2>&1
steplines "$tmp/bf16.log" >"$tmp/a"
steplines "$tmp/bf16_again.log" >"$tmp/b"
if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"; then ok "determinism: a second bf16 run prints identical step lines"
else bad "determinism: $(diff "$tmp/a" "$tmp/b" | head -4)"; fi
./train_gpt_sim $common -x 20 -r 2 >"$tmp/r2.log" 2>&1
losses "$tmp/r2.log" >"$tmp/r2_l"
worst=$(paste "$tmp/r2_l" "$tmp/bf16_l" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d } END { print w + 0 }')
if [ "$(wc -l <"$tmp/r2_l")" -eq 20 ] && awk -v w="$worst" 'BEGIN { exit !(w <= 2e-2) }' && grep -q 'recompute 2: .*saves' "$tmp/r2.log"; then
    ok "recompute 2: losses within $worst of recompute 0; $(grep 'recompute 2:' "$tmp/r2.log")"
else
    bad "recompute 2: worst $worst; $(grep -E 'recompute|error' "$tmp/r2.log" | head -3)"
fi

# ---------------------------------------------------------------- exact resume
run="./train_gpt_sim $common -x 8 -d 256"
$run -o "$tmp/full" -n 2 >"$tmp/full.log" 2>&1
mkdir -p "$tmp/resumed"
cp "$tmp/full/model_00000004.bin" "$tmp/full/state_00000004_00000.bin" "$tmp/full/done_00000004.txt" "$tmp/resumed/" 2>/dev/null
$run -o "$tmp/resumed" -n 2 -y 1 >"$tmp/resumed.log" 2>&1
if cmp -s "$tmp/full/model_00000008.bin" "$tmp/resumed/model_00000008.bin" &&
    cmp -s "$tmp/full/state_00000008_00000.bin" "$tmp/resumed/state_00000008_00000.bin"; then
    ok "resume from step 4: step-8 model and optimizer state bit-identical"
else
    bad "resume from step 4: step-8 checkpoint differs (or missing): $(tail -3 "$tmp/resumed.log")"
fi
grep -E '^step +[5-8]/8 \| loss' "$tmp/full.log" | sed 's/| [0-9.]* ms.*//' >"$tmp/a"
grep -E '^step +[5-8]/8 \| loss' "$tmp/resumed.log" | sed 's/| [0-9.]* ms.*//' >"$tmp/b"
if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" && [ "$(wc -l <"$tmp/a")" -eq 4 ]; then
    ok "resume: steps 5-8 print identical loss, lr and norm"
else
    bad "resume: step lines differ: $(diff "$tmp/a" "$tmp/b" | head -5)"
fi

# ---------------------------------------------------------------- bad input
expect_error "vocabulary flag differs from the model file" "init.bin.*vocab" ./train_gpt_sim $common -x 1 --vocab-size 300
expect_error "max-seq-len flag differs from the model file" "init.bin.*maximum sequence length" ./train_gpt_sim $common -x 1 --max-seq-len 64
expect_error "sequence longer than the model's" "seq-len 64.*32" ./train_gpt_sim $common -x 1 -t 64
expect_error "batch too big for device memory (says how much)" "does not fit in device memory: needs [0-9.]+ GiB" \
    ./train_gpt_sim -e d12 --mock-data -b 512 -t 1024 -x 1 -s 0 -v 0
expect_error "ZeRO stage 2 is rejected" "zero 2" ./train_gpt_sim $common -x 1 -z 2

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
