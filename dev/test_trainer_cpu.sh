#!/usr/bin/env bash
# End-to-end tests of ./train_gpt_cpu:
#   - bad input (truncated or foreign model file, wrong shard magic, bad flag values,
#     config/flag mismatches): a one-line "error: ..." naming the problem, non-zero exit;
#   - exact resume: a run resumed from its step-4 checkpoint ends bit-identical to the
#     uninterrupted run (model file bytes and every step line); resuming on other shards with the
#     same counts warns (the data fingerprint), with another --seed stops;
#   - learning: the loss on a periodic token stream falls well below ln(V);
#   - side by side with PyTorch (train_gpt.py training mode): the same initial model and
#     shards give the same loss at every step (relative 1e-4); with a 4.2M-element embedding, clipped,
#     the same gradient norms too (relative 2e-5).
# Token shards are written by dev/fuzz/write_shard.py, which follows doc/formats.md,
# not by the code under test. Ends with "N passed, M failed".
set -u
set -f # the shard globs below are for the trainer to expand, not the shell
. "$(dirname "$0")/testlib.sh"
test_begin 2

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
expect_error "validation shard vocabulary larger than the model's (named)" "big_vocab.bin: token shard has vocab size 50257 .*above the model's vocabulary of 256" \
    ./train_gpt_cpu $small -i "$tmp/data/train_*.bin" -j "$tmp/badshard/big_vocab.bin" -s 0 -v 1 -x 1
if ./train_gpt_cpu $small -i "$tmp/data/train_*.bin" -j "$tmp/badshard/big_vocab.bin" $quiet -x 1 >/dev/null 2>&1; then
    ok "-v 0: the validation data is not read (its bad shard does not stop the run)"
else bad "-v 0 with a bad validation shard: the run failed"; fi
# stdout (the log) on a full device: training goes on, said once on stderr (metrics.jsonl and checkpoints are its record)
./train_gpt_cpu $small $data $quiet -x 3 >/dev/full 2>"$tmp/full_stdout.err"
rc=$?
warned=$(grep -c '^warning: stdout: write failed: No space left on device' "$tmp/full_stdout.err")
if [ $rc -eq 0 ] && [ "$warned" -eq 1 ]; then ok "stdout on /dev/full: exit 0, one warning on stderr"
else bad "stdout on /dev/full: exit $rc, $warned warnings: $(head -c 300 "$tmp/full_stdout.err")"; fi
# --val-batches beyond the validation data (3000 tokens: 23 batches of 4 x 32): capped, not wrapped around
./train_gpt_cpu $small $data -s 0 -v 1 -x 1 -m 50 >"$tmp/val50.log" 2>&1
./train_gpt_cpu $small $data -s 0 -v 1 -x 1 -m 23 >"$tmp/val23.log" 2>&1
v50=$(grep -m1 -oE 'val loss [0-9.]+' "$tmp/val50.log"); v23=$(grep -m1 -oE 'val loss [0-9.]+' "$tmp/val23.log")
if grep -q '^validation: --val-batches 50, but the validation data holds 23 batches of 4 x 32 tokens: using 23' "$tmp/val50.log" &&
    [ -n "$v50" ] && [ "$v50" = "$v23" ]; then
    ok "--val-batches 50 on 23 batches of data: capped at 23 ($v50, as -m 23)"
else
    bad "--val-batches 50 on 23 batches: '$v50' vs -m 23 '$v23': $(grep -m1 '^validation' "$tmp/val50.log")"
fi
expect_error "bad integer flag" "batch-size.*abc" ./train_gpt_cpu $small $data -b abc
expect_error "bad float flag" "lr.*nan" ./train_gpt_cpu $small $data -l nan
expect_error "unknown flag with a suggestion" "did you mean --max-steps" ./train_gpt_cpu $small $data --max-step 3
expect_error "unknown schedule" "lr-schedule.*zigzag" ./train_gpt_cpu $small $data -k zigzag
expect_error "sequence longer than the model's" "seq-len 64.*32" ./train_gpt_cpu -e "$model" $data $quiet -t 64
"$PYTHON" -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<256i', 20240326, 3, *[0] * 254) + bytes(64))" "$tmp/llmc.bin"
expect_error "an llm.c model file as --init: what it is, and the command that converts it" \
    "llmc.bin: not a model file: magic 0x0134d7c6, expected 0x4d545047: it is an llm.c model file: convert it with python3 scripts/llmc.py import" \
    ./train_gpt_cpu -e "$tmp/llmc.bin" $data $quiet -x 1
expect_error "a state file as --init: the model file beside it named" "it is a training state file .*model_NNNNNNNN.bin beside it" \
    ./train_gpt_cpu -e "$tmp/m0/state_00000001_00000.bin" $data $quiet -x 1
expect_error "a checkpoint directory as --init" "m0: a directory, where a file is expected \(a model: DIR/model_NNNNNNNN.bin" \
    ./train_gpt_cpu -e "$tmp/m0" $data $quiet -x 1
expect_error "a data directory as -i: a glob suggested" "data: a directory, where a file is expected .*a glob such as -i 'DIR/train_\*.bin'" \
    ./train_gpt_cpu $small -i "$tmp/data" $quiet -x 1
mkfifo "$tmp/fifo.bin"
expect_error "a FIFO as -i: an error at once, not a wait for a writer" "fifo.bin: not a regular file \(a FIFO\)" \
    timeout 20 ./train_gpt_cpu $small $quiet -x 1 -i "$tmp/fifo.bin"
expect_error "a FIFO as -e" "fifo.bin: not a regular file \(a FIFO\)" timeout 20 ./train_gpt_cpu -e "$tmp/fifo.bin" $data $quiet -x 1
expect_error "a device as -i" "/dev/zero: not a regular file \(a device\)" ./train_gpt_cpu $small $quiet -x 1 -i /dev/zero
# launched with stdout (then stderr) closed: the log goes nowhere, never into a file the run opens (its .lock)
for closed in 1 2; do
    rc=0
    if [ $closed = 1 ]; then ./train_gpt_cpu $small $data $quiet -x 2 -n 1 -o "$tmp/closed$closed" >&- 2>"$tmp/closed.err" || rc=$?
    else ./train_gpt_cpu $small $data $quiet -x 2 -n 1 -o "$tmp/closed$closed" >"$tmp/closed.out" 2>&- || rc=$?; fi
    if [ $rc -eq 0 ] && [ -f "$tmp/closed$closed/model_00000002.bin" ] && grep -qE '^[^ ]+ [0-9]+ [0-9.]+$' "$tmp/closed$closed/.lock" &&
        ! grep -qE 'step|checkpoint|warning' "$tmp/closed$closed/.lock"; then
        ok "file descriptor $closed closed at launch: trains, the lock file holds only its token"
    else bad "file descriptor $closed closed at launch: exit $rc, .lock: $(head -c 200 "$tmp/closed$closed/.lock")"; fi
done
./train_gpt_cpu $small $data $quiet -x 1 -o "$tmp/nockpt" >"$tmp/nockpt.log" 2>&1
if grep -q "^note: --checkpoint-every 0: .*nockpt gets metrics.jsonl but no model" "$tmp/nockpt.log" && ! ls "$tmp/nockpt"/model_* >/dev/null 2>&1; then
    ok "-o without -n: said to save no model"
else bad "-o without -n: $(grep -m1 note "$tmp/nockpt.log")"; fi
expect_error "the default sequence length above the model's (what to give, and the default)" \
    "seq-len 64 is longer than the model's maximum sequence length 16: give -t 16 or less \(-t's default is that long\)" \
    ./train_gpt_cpu --n-layer 1 --n-head 2 --n-embd 16 --vocab-size 256 --max-seq-len 16 $data $quiet -x 1
expect_error "a micro-batch of more than 2^31 - 1 tokens" "-b 2147483647 x -t 1024 = 2199023254528 tokens a micro-batch: at most 2147483647" \
    ./train_gpt_cpu --n-layer 1 --n-head 2 --n-embd 16 --vocab-size 256 --mock-data 1 $quiet -x 1 -b 2147483647 -t 1024
expect_error "vocabulary flag differs from the model file" "vocab" ./train_gpt_cpu -e "$model" $data $quiet --vocab-size 300
expect_error "total batch not a multiple of B*T (the nearest totals)" \
    "total-batch 1000 is not a multiple of .* = 128 tokens: 896 \(7 micro-steps\) or 1024 \(8 micro-steps\) would be" \
    ./train_gpt_cpu $small $data $quiet -d 1000
expect_error "total batch below one micro-batch (only the total above)" "total-batch 64 .*: 128 \(1 micro-step\) would be" \
    ./train_gpt_cpu $small $data $quiet -d 64
expect_error "checkpoints asked for without an output directory" "checkpoint-every.*need --output-dir" \
    ./train_gpt_cpu $small $data $quiet -n 2
expect_error "--on-save-error continue without an output directory" "on-save-error continue: without --output-dir" \
    ./train_gpt_cpu $small $data $quiet --on-save-error continue
expect_error "ZeRO is rejected on the CPU" "zero" ./train_gpt_cpu $small $data $quiet -z 1
expect_error "heads do not divide channels" "(head|divis)" ./train_gpt_cpu --n-layer 1 --n-head 5 --n-embd 32 --vocab-size 256 $data $quiet
expect_error "beta1 of 1 (bias correction 1/0)" "beta1 and --beta2 must be below 1" ./train_gpt_cpu $small $data $quiet --beta1 1
expect_error "beta2 of 1" "beta1 and --beta2 must be below 1" ./train_gpt_cpu $small $data $quiet --beta2 1
expect_error "eps of 0 (0/0 for a zero gradient)" "eps must be above 0" ./train_gpt_cpu $small $data $quiet --eps 0
expect_error "total batch 0" "total-batch 0" ./train_gpt_cpu $small $data $quiet -d 0
expect_error "total batch near 2^31: only the total below suggested (the one above is out of the flag's range)" \
    "total-batch 2147483647 is not a multiple of .* = 128 tokens: 2147483520 \(16777215 micro-steps\) would be \(see --help\)$" \
    ./train_gpt_cpu $small $data $quiet -d 2147483647
expect_error "mock data with shards" "mock-data.*train-data" ./train_gpt_cpu $small $data $quiet --mock-data
expect_error "a prompt with sampling off" "prompt.*sample-every 0" ./train_gpt_cpu $small $data $quiet --prompt hello
# a prompt longer than -t: the sample's window slides over it, as over the generated tokens
prompt="one two three four five six seven eight nine ten"
./train_gpt_cpu --n-layer 1 --n-head 2 --n-embd 16 --vocab-size 50257 -b 1 -t 8 --mock-data -x 1 -s 1 -g 4 -v 0 \
    --prompt "$prompt" >"$tmp/long_prompt.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^prompt: 10 tokens' "$tmp/long_prompt.log" && grep -A1 -- '^---- sample' "$tmp/long_prompt.log" | grep -q "^$prompt ."; then
    ok "a 10-token prompt with -t 8: sampled after it ($(grep -A1 -- '^---- sample' "$tmp/long_prompt.log" | tail -1))"
else
    bad "a 10-token prompt with -t 8: exit $rc: $(grep -m2 -E 'error|prompt' "$tmp/long_prompt.log")"
fi
expect_error "a tokenizer file that is missing" "tokenizer .*nope.bin" ./train_gpt_cpu $small $data -v 0 -s 5 --tokenizer "$tmp/nope.bin"
# flags that contradict or miss one another are a bad command line: exit 2, as the flag parser's errors
rcs=""
for args in "$small $data --init d6" "--n-layer 2 --n-head 2 $data" "$small" "$small $data -y 1" "$small $data -d 1000" \
    "$small $data -b 2147483647 -t 2"; do
    # shellcheck disable=SC2086
    ./train_gpt_cpu $args $quiet -x 1 >/dev/null 2>&1
    rcs+="$? "
done
if [ "$rcs" = "2 2 2 2 2 2 " ]; then ok "contradicting or missing flags exit 2 (--init with --n-layer, a partial model, no data, -y 1 without -o, --total-batch, -b x -t)"
else bad "contradicting or missing flags: exit statuses $rcs, not 2 each"; fi

# a training pattern that also matches the validation shard: a warning names it; a pattern starting with ~ (quoted,
# so the shell leaves it) is expanded as the shell would
./train_gpt_cpu $small -i "$tmp/data/*.bin" -j "$tmp/data/val_*.bin" -v 1 -s 0 -x 1 >"$tmp/overlap.log" 2>&1
if grep -q "^warning: 1 of the 1 validation shards are training shards too (first: .*val_000.bin)" "$tmp/overlap.log"; then
    ok "validation shards matched by --train-data: $(grep -m1 '^warning: 1 of the 1' "$tmp/overlap.log" | cut -c1-110)"
else bad "validation shards matched by --train-data: no warning: $(grep -m2 -E 'warning|error' "$tmp/overlap.log")"; fi
HOME="$tmp" ./train_gpt_cpu $small -i "~/data/train_*.bin" $quiet -x 1 >"$tmp/tilde.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -qE '^step +1/1 ' "$tmp/tilde.log"; then ok "--train-data '~/data/train_*.bin': ~ expanded, trained"
else bad "--train-data with ~: exit $rc: $(grep -m1 error "$tmp/tilde.log")"; fi

# ---------------------------------------------------------------- exact resume
check_resume ./train_gpt_cpu $small $data -v 4 -m 2 -s 4 -g 8 -x 8 -l 3e-3 -u 2 -d 256
# -y 1 without the model flags: the config is the newest checkpoint's, and the run ends as the uninterrupted one
mkdir -p "$tmp/noflags"
cp "$tmp/full/model_00000004.bin" "$tmp/full/state_00000004_00000.bin" "$tmp/full/done_00000004.txt" "$tmp/noflags/"
./train_gpt_cpu -b 4 -t 32 --seed 7 $data -v 4 -m 2 -s 4 -g 8 -x 8 -l 3e-3 -u 2 -d 256 -o "$tmp/noflags" -n 2 -y 1 >"$tmp/noflags.log" 2>&1
# shellcheck disable=SC2046
if grep -q "^resume: no model flags: the model's config is that of the newest valid checkpoint, .*model_00000004.bin$" "$tmp/noflags.log" &&
    same_files "$tmp/full" "$tmp/noflags" $(checkpoint_files 8); then
    ok "-y 1 without model flags: the checkpoint's config, step-8 checkpoint bit-identical"
else bad "-y 1 without model flags: $(grep -E '^(resume|error)' "$tmp/noflags.log" | head -3)"; fi
# the same with a newer checkpoint whose model file is missing (a copy of the directory cut short): its config is
# not read, it is skipped, and step 4 resumed
mkdir -p "$tmp/noflags_cut"
cp "$tmp/full/model_00000004.bin" "$tmp/full/state_00000004_00000.bin" "$tmp/full/done_00000004.txt" "$tmp/noflags_cut/"
cp "$tmp/full/state_00000008_00000.bin" "$tmp/full/done_00000008.txt" "$tmp/noflags_cut/"
./train_gpt_cpu -b 4 -t 32 --seed 7 $data -v 4 -m 2 -s 4 -g 8 -x 8 -l 3e-3 -u 2 -d 256 -o "$tmp/noflags_cut" -n 2 -y 1 >"$tmp/noflags_cut.log" 2>&1
mkdir "$tmp/fifo_marker"
cp "$tmp/full/model_00000004.bin" "$tmp/full/state_00000004_00000.bin" "$tmp/fifo_marker/"
mkfifo "$tmp/fifo_marker/done_00000004.txt"
expect_error "a FIFO as a checkpoint's done marker: an error at once, not a wait for a writer" \
    "fifo_marker: none of its 1 checkpoints is valid" \
    timeout 20 ./train_gpt_cpu $small $data -x 8 -o "$tmp/fifo_marker" -y 1
rc=$?
# shellcheck disable=SC2046
if [ $rc -eq 0 ] && grep -q "^resume: skipping checkpoint of step 8: .*model_00000008.bin" "$tmp/noflags_cut.log" &&
    grep -q "^resume: no model flags: the model's config is that of the newest valid checkpoint, .*model_00000004.bin$" "$tmp/noflags_cut.log" &&
    same_files "$tmp/full" "$tmp/noflags_cut" $(checkpoint_files 8); then
    ok "-y 1 without model flags, the newest checkpoint's model file missing: skipped, step 4 resumed, step 8 bit-identical"
else bad "-y 1 without model flags, newest model file missing: exit $rc: $(grep -E '^(resume|error)' "$tmp/noflags_cut.log" | head -3)"; fi
expect_error "-y 1 with --vocab-size only, not the checkpoint's: names that flag alone" \
    "model_[0-9]+\.bin: the checkpoint.s model has vocabulary 256, but --vocab-size 300 was given$" \
    ./train_gpt_cpu -b 4 -t 32 --seed 7 $data -v 4 -x 8 -o "$tmp/noflags" -y 1 --vocab-size 300
expect_error "-y 1 without model flags and no checkpoint" "no model: .*with -y 1 they come from the newest valid checkpoint of --output-dir: it has none" \
    ./train_gpt_cpu $data $quiet -x 1 -o "$tmp/empty_dir" -y 1

# other data behind the same glob, with the same shard and token counts (the two shards' names swapped): the
# resumed run warns that the checkpoint's data position refers to other data (the state's data fingerprint)
mkdir -p "$tmp/swapped"
cp "$tmp/data/train_000.bin" "$tmp/swapped/train_001.bin"
cp "$tmp/data/train_001.bin" "$tmp/swapped/train_000.bin"
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" $quiet -x 6 -n 2 -o "$tmp/fp" >/dev/null 2>&1
rm -f "$tmp/fp/done_00000006.txt"
./train_gpt_cpu $small -i "$tmp/swapped/train_*.bin" $quiet -x 6 -n 2 -o "$tmp/fp" -y 1 >"$tmp/fp.log" 2>&1
if grep -q '^resume: step 4 from' "$tmp/fp.log" && grep -q 'state_00000004_00000.bin: training data fingerprint (the shards. contents and order) was 0x[0-9a-f]*, now 0x[0-9a-f]*$' "$tmp/fp.log" &&
    grep -q '^resume: warning: the settings above differ' "$tmp/fp.log" && [ "$(grep -c ' was .*, now ' "$tmp/fp.log")" -eq 1 ]; then
    ok "resume on other shards with the same counts: warned ($(grep -m1 'fingerprint (the shards. contents and order) was' "$tmp/fp.log" | sed 's/.*) //'))"
else bad "resume on swapped shards: $(grep -E 'resume|was' "$tmp/fp.log" | head -4)"; fi
rm -f "$tmp/fp/done_00000006.txt"
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" -j "$tmp/data/val_*.bin" -s 0 -v 3 -x 6 -n 2 -o "$tmp/fp" -y 1 >"$tmp/fp_v.log" 2>&1
if grep -q 'state_00000004_00000.bin: --val-every was 0, now 3$' "$tmp/fp_v.log" && [ "$(grep -c ' was .*, now ' "$tmp/fp_v.log")" -eq 1 ]; then
    ok "resume with another --val-every (what --early-stop counts): warned"
else bad "resume with another --val-every: $(grep -E 'resume|was' "$tmp/fp_v.log" | head -4)"; fi
rm -f "$tmp/fp/done_00000006.txt"
# a checkpoint of --max-seq-len 64 resumed with another: the hint about --max-seq-len's default only where it was not given
./train_gpt_cpu $small --max-seq-len 64 -i "$tmp/data/train_*.bin" $quiet -x 2 -n 2 -o "$tmp/msl" >/dev/null 2>&1
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" $quiet -x 4 -n 2 -o "$tmp/msl" -y 1 >/dev/null 2>"$tmp/msl_d.err"
./train_gpt_cpu $small --max-seq-len 48 -i "$tmp/data/train_*.bin" $quiet -x 4 -n 2 -o "$tmp/msl" -y 1 >/dev/null 2>"$tmp/msl_g.err"
if grep -q "differs from this run's: max_seq_len 64, this run's 32 (from scratch, --max-seq-len defaults to --seq-len" "$tmp/msl_d.err" &&
    grep -q "differs from this run's: max_seq_len 64, this run's 48$" "$tmp/msl_g.err"; then
    ok "resume with another max_seq_len: the hint about --max-seq-len's default only where it was not given"
else bad "resume with another max_seq_len: $(head -c 300 "$tmp/msl_d.err") / $(head -c 300 "$tmp/msl_g.err")"; fi
expect_error "resume with another --seed (it seeds mock data and the GPU's bf16 rounding too)" \
    "state_00000004_00000.bin: the checkpoint's run has --seed 7, this one 8: a resumed run keeps its seed" \
    ./train_gpt_cpu ${small/--seed 7/--seed 8} -i "$tmp/data/train_*.bin" $quiet -x 6 -n 2 -o "$tmp/fp" -y 1

# resumed with other tokens per step: the data position is converted (unshuffled: the next window after the tokens
# read; shuffled: the epoch's next shard) and said; another --shuffle inside an epoch has no equivalent: refused;
# a model file given with -y 1 is said to give only the config; a changed schedule says the learning rate it gives
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" $quiet --shuffle 0 -b 3 -q 0.1 -x 6 -n 3 -o "$tmp/rw" >/dev/null 2>&1
rm -f "$tmp/rw/done_00000006.txt"
cp -r "$tmp/rw" "$tmp/rw_b"
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" $quiet --shuffle 0 -q 0.1 -x 6 -n 3 -o "$tmp/rw_b" -y 1 >"$tmp/rw_b.log" 2>&1
if grep -q '^resume: tokens per step were 96, now 128: the checkpoint.s run had read 3 windows of .*train_000.bin; reading goes on at its token 384, the next window of the new size; 96 of its tokens skipped$' "$tmp/rw_b.log" &&
    grep -q '^step *6/6 ' "$tmp/rw_b.log"; then
    ok "resume with -b 3 -> 4 (96 -> 128 tokens a step), unshuffled: goes on at the first 128-token window after the 288 tokens read"
else bad "resume with other tokens per step: $(grep -E 'resume|error' "$tmp/rw_b.log" | head -4)"; fi
expect_error "resume with another --shuffle inside an epoch" \
    "state_00000003_00000.bin: the checkpoint's run read its data with --shuffle 0, this one with 1: its position \(epoch 0, shard 0 of the epoch's order, batch 3\) has no equivalent in this order: resume with --shuffle 0" \
    ./train_gpt_cpu $small -i "$tmp/data/train_*.bin" $quiet --shuffle 1 -b 3 -q 0.1 -x 6 -n 3 -o "$tmp/rw" -y 1
./train_gpt_cpu -e "$tmp/rw/model_00000003.bin" -b 3 -t 32 --seed 7 -i "$tmp/data/train_*.bin" $quiet --shuffle 0 -q 0.1 -x 8 -n 3 \
    -o "$tmp/rw" -y 1 >"$tmp/rw_e.log" 2>&1
if grep -q "^resume: the weights are the checkpoint's: --init $tmp/rw/model_00000003.bin gave only the model's config$" "$tmp/rw_e.log" &&
    grep -q '^resume: the learning rate of step 4 is [0-9.e-]* on this run.s schedule, [0-9.e-]* on the checkpoint.s$' "$tmp/rw_e.log" &&
    grep -q "^state_00000003_00000.bin: the schedule's steps (--max-steps) was 6, now 8$" <(sed 's|.*/||' "$tmp/rw_e.log"); then
    ok "resume with --init and -x 8: $(grep -m1 'learning rate of step' "$tmp/rw_e.log")"
else bad "resume with --init and -x 8: $(grep -E 'resume|error|was' "$tmp/rw_e.log" | head -5)"; fi
# resumed with other validation data: said, and early stopping starts afresh (the losses are not comparable with the
# saved best's): the first evaluation of the resumed run is the new best
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" -j "$tmp/data/val_*.bin" -s 0 -v 2 -m 1 -x 4 -n 2 --early-stop 3 -o "$tmp/es" >/dev/null 2>&1
./train_gpt_cpu $small -i "$tmp/data/train_*.bin" -j "$tmp/data/train_000.bin" -s 0 -v 2 -m 1 -x 6 -n 2 --early-stop 3 -o "$tmp/es" -y 1 \
    >"$tmp/es.log" 2>&1
if grep -q 'state_00000004_00000.bin: validation data fingerprint (--val-data) was 0x[0-9a-f]*, now 0x[0-9a-f]*$' "$tmp/es.log" &&
    grep -q "^resume: early stop: the best so far (val loss [0-9.]* at step [0-9]) was measured otherwise (validation data, tokens, sequence length or precision): this run's first evaluation replaces it$" "$tmp/es.log" &&
    grep -q '^step 6$' "$tmp/es/best/best.txt"; then
    ok "resume with other validation data: said; the best restarts (best.txt: $(head -1 "$tmp/es/best/best.txt"))"
else bad "resume with other validation data: $(grep -E 'resume|was' "$tmp/es.log" | head -4); best.txt $(head -1 "$tmp/es/best/best.txt")"; fi

# ---------------------------------------------------------------- learning
./train_gpt_cpu $small $data $quiet -x 60 -l 3e-3 -u 5 >"$tmp/learn.log" 2>&1
first=$(grep -E '^step +1/60 ' "$tmp/learn.log" | sed -E 's/.*loss ([0-9.]+).*/\1/')
last=$(grep -E '^step +60/60 ' "$tmp/learn.log" | sed -E 's/.*loss ([0-9.]+).*/\1/')
if [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < 1.5) }'; then
    ok "learning: loss $first -> $last on a periodic stream (ln 256 = 5.55)"
else
    bad "learning: loss ${first:-?} -> ${last:-?}"
fi

# --lr-scale: 2 micro-steps of 4 x 32 (-d 256) against --lr-ref-batch 128 doubles -l (linear), exactly as
# -l given doubled; the header says so
./train_gpt_cpu $small $data $quiet -x 3 -d 256 -l 1.5e-3 --lr-scale linear --lr-ref-batch 128 >"$tmp/scaled.log" 2>&1
./train_gpt_cpu $small $data $quiet -x 3 -d 256 -l 3e-3 >"$tmp/doubled.log" 2>&1
losses "$tmp/scaled.log" >"$tmp/scaled_losses"
losses "$tmp/doubled.log" >"$tmp/doubled_losses"
if grep -q '^learning rate: 0.0015 x linear(256 / 128 tokens) = 0.003$' "$tmp/scaled.log" && [ -s "$tmp/scaled_losses" ] &&
    cmp -s "$tmp/scaled_losses" "$tmp/doubled_losses"; then
    ok "--lr-scale linear, 256 / 128 tokens: -l 1.5e-3 trains as -l 3e-3 ($(tr '\n' ' ' <"$tmp/scaled_losses"))"
else
    bad "--lr-scale linear: $(grep -E '^learning rate|error' "$tmp/scaled.log" | head -2) losses $(tr '\n' ' ' <"$tmp/scaled_losses") vs $(tr '\n' ' ' <"$tmp/doubled_losses")"
fi

# ---------------------------------------------------------------- side by side with PyTorch
"$PYTHON" train_gpt.py --train-data "$tmp/data/train_*.bin" --n-layer 2 --n-head 2 --n-embd 32 --vocab-size 256 \
    -t 32 -b 4 --steps 6 --lr 3e-3 --warmup 2 --final-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0 --seed 11 \
    --write-model "$tmp/py_init.bin" --threads 2 >"$tmp/py.log" 2>&1
./train_gpt_cpu -e "$tmp/py_init.bin" -i "$tmp/data/train_*.bin" --shuffle 0 -b 4 -t 32 -x 6 -l 3e-3 -u 2 -q 0.1 -c 0.1 \
    --grad-clip 1.0 $quiet \
    >"$tmp/c.log" 2>&1
losses "$tmp/py.log" >"$tmp/py_losses"
losses "$tmp/c.log" >"$tmp/c_losses"
if [ "$(wc -l <"$tmp/py_losses")" -eq 6 ] && [ "$(wc -l <"$tmp/c_losses")" -eq 6 ] &&
    paste "$tmp/py_losses" "$tmp/c_losses" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) bad = 1 } END { exit bad }'; then
    ok "PyTorch and C losses agree over 6 steps: $(paste -d/ "$tmp/py_losses" "$tmp/c_losses" | tr '\n' ' ')"
else
    bad "PyTorch vs C losses: $(paste -d/ "$tmp/py_losses" "$tmp/c_losses" | tr '\n' ' ') $(tail -2 "$tmp/py.log")"
fi
# a 4.2M-element embedding (V = 32768), clipped every step: the gradient norms agree within 2e-5 relative (torch's fp32
# norm of a CPU tensor that size is 1e-4 off, so train_gpt.py sums the norm in float64) and so do the clipped updates
write_shard "$tmp/data/wide_000.bin" 32768 2000 random
"$PYTHON" train_gpt.py --train-data "$tmp/data/wide_*.bin" --n-layer 1 --n-head 2 --n-embd 128 --vocab-size 32768 \
    -t 16 -b 2 --steps 3 --lr 1e-3 --warmup 0 --final-lr-frac 1.0 --weight-decay 0 --grad-clip 0.5 --seed 11 \
    --write-model "$tmp/py_wide.bin" --threads 2 >"$tmp/py_wide.log" 2>&1
./train_gpt_cpu -e "$tmp/py_wide.bin" -i "$tmp/data/wide_*.bin" --shuffle 0 -b 2 -t 16 -x 3 -l 1e-3 -u 0 -q 1.0 -c 0 \
    --grad-clip 0.5 $quiet >"$tmp/c_wide.log" 2>&1
norms() { grep -E '^step +[0-9]+/[0-9]+ \| loss' "$1" | sed -E 's/.*\| norm ([0-9.]+).*/\1/'; }
paste <(losses "$tmp/py_wide.log") <(losses "$tmp/c_wide.log") <(norms "$tmp/py_wide.log") <(norms "$tmp/c_wide.log") >"$tmp/wide"
if [ "$(wc -l <"$tmp/wide")" -eq 3 ] && awk 'NF != 4 { bad = 1 } { d = $1 - $2; n = $3 - $4; if (d < 0) d = -d; if (n < 0) n = -n;
        if (d > 1e-4 * $1 || n > 2e-5 * $3) bad = 1 } END { exit bad }' "$tmp/wide"; then
    ok "V=32768, clipped: PyTorch and C losses and norms agree over 3 steps: $(awk '{ printf "%s/%s ", $3, $4 }' "$tmp/wide")"
else
    bad "V=32768 PyTorch vs C (loss py, C, norm py, C): $(tr '\n' ' ' <"$tmp/wide") $(tail -2 "$tmp/py_wide.log")"
fi

test_end
