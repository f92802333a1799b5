#!/usr/bin/env bash
# End-to-end tests of ./train_gpt_cpu:
#   - bad input (truncated or foreign model file, wrong shard magic, bad flag values,
#     config/flag mismatches): a one-line "error: ..." naming the problem, non-zero exit;
#   - exact resume: a run resumed from its step-4 checkpoint ends bit-identical to the
#     uninterrupted run (model file bytes and every step line);
#   - learning: the loss on a periodic token stream falls well below ln(V);
#   - side by side with PyTorch (train_gpt.py training mode): the same initial model and
#     shards give the same loss at every step (relative 1e-4).
# Token shards are written here by a small Python writer that follows doc/formats.md,
# not by the code under test. Ends with "N passed, M failed".
set -u
set -f # the shard globs below are for the trainer to expand, not the shell
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
PYTHON=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { echo "ok    $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  $1"; fail=$((fail + 1)); }

# write_shard PATH VOCAB N KIND: KIND periodic (token i = (i*7) % 61 + i/997 % 3) or random
write_shard() {
    "$PYTHON" - "$@" <<'EOF'
import struct, sys, zlib, random
path, vocab, n, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if kind == "periodic":
    toks = [((i * 7) % 61 + (i // 997) % 3) % vocab for i in range(n)]
else:
    rnd = random.Random(n)
    toks = [rnd.randrange(vocab) for _ in range(n)]
payload = struct.pack("<%dH" % n, *toks)
h = [0] * 256
h[0], h[1] = 0x4B4F5447, 1
h[2] = zlib.crc32(payload)
h[3], h[4] = len(payload) & 0xFFFFFFFF, len(payload) >> 32
h[5], h[6], h[7], h[8] = n & 0xFFFFFFFF, n >> 32, vocab, 2
with open(path, "wb") as f:
    f.write(struct.pack("<256I", *h))
    f.write(payload)
EOF
}

# expect_error NAME PATTERN CMD...: non-zero exit, stderr's first line starts with "error:"
# and matches PATTERN, and nothing crashed (no signal exit)
expect_error() {
    local name=$1 pattern=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local first
    first=$(head -n 1 "$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$first" == error:* ]] && grep -qE "$pattern" <<<"$first"; then
        ok "$name: exit $rc: $first"
    else
        bad "$name: exit $rc, stderr: $(head -c 300 "$tmp/err")"
    fi
}

mkdir -p "$tmp/data"
write_shard "$tmp/data/train_000.bin" 256 12000 periodic
write_shard "$tmp/data/train_001.bin" 256 9000 periodic
write_shard "$tmp/data/val_000.bin" 256 3000 periodic
small="--n-layer 2 --n-head 2 --n-embd 32 --vocab-size 256 -b 4 -t 32 --seed 7"
data="-i $tmp/data/train_*.bin -j $tmp/data/val_*.bin"
quiet="-s 0 -v 0"

# ---------------------------------------------------------------- bad input
./train_gpt_cpu $small $data $quiet -x 1 -o "$tmp/m0" -n 1 >/dev/null 2>&1
model="$tmp/m0/model_00000001.bin"
if [ -f "$model" ]; then ok "a checkpoint was written"; else bad "no checkpoint written at $model"; fi
head -c 3000 "$model" >"$tmp/trunc.bin"
expect_error "truncated model file" "trunc.bin.*(truncated|shorter)" ./train_gpt_cpu -e "$tmp/trunc.bin" $data $quiet -x 1
printf 'this is not a model file, just text that is long enough to hold a header..........' >"$tmp/foreign.bin"
head -c 2000 /dev/urandom >>"$tmp/foreign.bin"
expect_error "foreign model file" "foreign.bin.*magic" ./train_gpt_cpu -e "$tmp/foreign.bin" $data $quiet -x 1
cp "$model" "$tmp/flipped.bin"
printf '\x55' | dd of="$tmp/flipped.bin" bs=1 seek=5000 conv=notrunc status=none
expect_error "corrupted model payload" "flipped.bin.*(CRC|corrupt)" ./train_gpt_cpu -e "$tmp/flipped.bin" $data $quiet -x 1
mkdir -p "$tmp/badshard"
cp "$tmp/data/train_000.bin" "$tmp/badshard/train_000.bin"
printf 'XXXX' | dd of="$tmp/badshard/train_000.bin" bs=1 seek=0 conv=notrunc status=none
expect_error "shard with a wrong magic" "train_000.bin.*magic" ./train_gpt_cpu $small -i "$tmp/badshard/*.bin" $quiet -x 1
expect_error "no shard matches" "nothing_here" ./train_gpt_cpu $small -i "$tmp/nothing_here_*.bin" $quiet -x 1
write_shard "$tmp/badshard/big_vocab.bin" 50257 5000 random
expect_error "shard vocabulary larger than the model's" "vocab" ./train_gpt_cpu $small -i "$tmp/badshard/big_vocab.bin" $quiet -x 1
expect_error "bad integer flag" "batch-size.*abc" ./train_gpt_cpu $small $data -b abc
expect_error "bad float flag" "lr.*nan" ./train_gpt_cpu $small $data -l nan
expect_error "unknown flag with a suggestion" "did you mean --max-steps" ./train_gpt_cpu $small $data --max-step 3
expect_error "unknown schedule" "lr-schedule.*zigzag" ./train_gpt_cpu $small $data -k zigzag
expect_error "sequence longer than the model's" "seq-len 64.*32" ./train_gpt_cpu -e "$model" $data $quiet -t 64
expect_error "vocabulary flag differs from the model file" "vocab" ./train_gpt_cpu -e "$model" $data $quiet --vocab-size 300
expect_error "total batch not a multiple of B*T" "total-batch 1000" ./train_gpt_cpu $small $data $quiet -d 1000
expect_error "ZeRO is rejected on the CPU" "zero" ./train_gpt_cpu $small $data $quiet -z 1
expect_error "heads do not divide channels" "(head|divis)" ./train_gpt_cpu --n-layer 1 --n-head 5 --n-embd 32 --vocab-size 256 $data $quiet

# ---------------------------------------------------------------- exact resume
run="./train_gpt_cpu $small $data -v 4 -m 2 -s 4 -g 8 -x 8 -l 3e-3 -u 2 -d 256"
$run -o "$tmp/full" -n 2 >"$tmp/full.log" 2>&1
mkdir -p "$tmp/resumed"
cp "$tmp/full/model_00000004.bin" "$tmp/full/state_00000004_00000.bin" "$tmp/full/done_00000004.txt" "$tmp/resumed/"
$run -o "$tmp/resumed" -n 2 -y 1 >"$tmp/resumed.log" 2>&1
if cmp -s "$tmp/full/model_00000008.bin" "$tmp/resumed/model_00000008.bin" &&
    cmp -s "$tmp/full/state_00000008_00000.bin" "$tmp/resumed/state_00000008_00000.bin"; then
    ok "resume from step 4: step-8 model and optimizer state bit-identical"
else
    bad "resume from step 4: step-8 checkpoint differs (or missing)"
fi
grep -E '^step +[5-8]/8 \| loss' "$tmp/full.log" | sed 's/| [0-9.]* ms.*//' >"$tmp/a"
grep -E '^step +[5-8]/8 \| loss' "$tmp/resumed.log" | sed 's/| [0-9.]* ms.*//' >"$tmp/b"
if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" && [ "$(wc -l <"$tmp/a")" -eq 4 ]; then
    ok "resume: steps 5-8 print identical loss, lr and norm"
else
    bad "resume: step lines differ: $(diff "$tmp/a" "$tmp/b" | head -5)"
fi

# ---------------------------------------------------------------- learning
./train_gpt_cpu $small $data $quiet -x 60 -l 3e-3 -u 5 >"$tmp/learn.log" 2>&1
first=$(grep -E '^step +1/60 ' "$tmp/learn.log" | sed -E 's/.*loss ([0-9.]+).*/\1/')
last=$(grep -E '^step +60/60 ' "$tmp/learn.log" | sed -E 's/.*loss ([0-9.]+).*/\1/')
if [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < 1.5) }'; then
    ok "learning: loss $first -> $last on a periodic stream (ln 256 = 5.55)"
else
    bad "learning: loss ${first:-?} -> ${last:-?}"
fi

# ---------------------------------------------------------------- side by side with PyTorch
"$PYTHON" train_gpt.py --train-data "$tmp/data/train_*.bin" --n-layer 2 --n-head 2 --n-embd 32 --vocab-size 256 \
    -t 32 -b 4 --steps 6 --lr 3e-3 --warmup 2 --final-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0 --seed 11 \
    --write-model "$tmp/py_init.bin" --threads 2 >"$tmp/py.log" 2>&1
./train_gpt_cpu -e "$tmp/py_init.bin" -i "$tmp/data/train_*.bin" --shuffle 0 -b 4 -t 32 -x 6 -l 3e-3 -u 2 -q 0.1 -c 0.1 \
    --grad-clip 1.0 $quiet \
    >"$tmp/c.log" 2>&1
grep -E '^step +[0-9]+/6 \| loss' "$tmp/py.log" | sed -E 's/.*loss ([0-9.]+).*/\1/' >"$tmp/py_losses"
grep -E '^step +[0-9]+/6 \| loss' "$tmp/c.log" | sed -E 's/.*loss ([0-9.]+).*/\1/' >"$tmp/c_losses"
if [ "$(wc -l <"$tmp/py_losses")" -eq 6 ] && [ "$(wc -l <"$tmp/c_losses")" -eq 6 ] &&
    paste "$tmp/py_losses" "$tmp/c_losses" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) bad = 1 } END { exit bad }'; then
    ok "PyTorch and C losses agree over 6 steps: $(paste -d/ "$tmp/py_losses" "$tmp/c_losses" | tr '\n' ' ')"
else
    bad "PyTorch vs C losses: $(paste -d/ "$tmp/py_losses" "$tmp/c_losses" | tr '\n' ' ') $(tail -2 "$tmp/py.log")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
