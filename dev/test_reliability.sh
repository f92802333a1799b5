#!/usr/bin/env bash
# Reliability tests of a trainer (usage: dev/test_reliability.sh [TRAINER [MICRO_STEPS [VAL_BATCHES]]],
# default ./train_gpt_cpu, 20 micro-steps per step in the signal runs and 3000 batches (a few seconds) in
# the validation that a signal interrupts; the simulated GPU trainer takes 4 and 30):
#   - SIGTERM, SIGUSR1, SIGINT, SIGHUP: the run stops at the next micro-step, writes a checkpoint of the
#     completed steps and exits 75; resuming it ends bit-identical to an uninterrupted run;
#   - SIGTERM during a long validation: left unfinished (recorded nowhere), exit 75; the resumed run
#     computes it (the same loss as the uninterrupted run's) and ends bit-identical; under nohup SIGHUP
#     stops nothing; stdout a pipe whose reader is gone (SIGPIPE): checkpoint, exit 75;
#   - corrupted checkpoints (flipped byte, truncated state, malformed marker; model files swapped
#     between steps, a changed model header word) are skipped, named,
#     and the newest valid one is resumed; the result is still bit-identical; a changed byte in a
#     state file's header (the data position) is caught by its header CRC; when no checkpoint is
#     valid, -y 1 stops (exit 1) instead of starting from scratch over them; resuming a checkpoint
#     at or past --max-steps says there is nothing left to train; a partial last line of metrics.jsonl
#     (a killed write) is cut when a resumed run appends;
#   - a second trainer started on a directory a running one writes stops at once (exit 1);
#   - out of space (a file-size limit, ulimit -f): the write fails with a clear error, exit 74,
#     the previous checkpoint stays valid and no .tmp is left; --on-save-error continue trains on, but
#     a failed final checkpoint still exits 74, and the failed saves leave no files (a model file written
#     before its state file failed is deleted); a metrics.jsonl write failure follows --on-save-error;
#   - -y 1 marks done a checkpoint whose files are complete and verify but that has no marker (a run stopped
#     just before writing it, a copy without the markers) and resumes it;
#   - -y 1 deletes the debris of interrupted writes (.tmp files, files of a step without a marker), and applies the
#     retention (--keep-last, --keep-every) that a run killed after its last checkpoint's marker did not;
#   - a new run (no -y) in a directory holding checkpoints stops (exit 1) and writes nothing;
#   - --early-stop: a best checkpoint newer than the last regular one (a failed save in between) resumes,
#     and the run stops early where the uninterrupted one does; a best that could not be saved is named as
#     such in the early stop's line; a resumed run whose first evaluation is the best again (at the step best/
#     holds) keeps best/'s checkpoint instead of rewriting it; -y 1 keeps only best.txt's checkpoint in best/, and
#     skips a corrupt one (verified in full), writing it again from the weights in memory;
#   - a stop signal during a long in-run sample (-g 16M) cuts it short: checkpoint, exit 75 at once;
#   - divergence (a huge learning rate): the run stops with exit 65 and a message, also when it samples every
#     step (the samples stop at the non-finite logits); a gradient norm past sqrt(FLT_MAX) (a weight of 1e30) is inf
#     and skips the update;
#   - a training shard rewritten, truncated or deleted during the run: the step that reaches it is dropped,
#     the error named, the completed steps checkpointed, exit 66; with the shard restored, -y 1 ends
#     bit-identical to an uninterrupted run (the same step lines too); if that checkpoint cannot be written,
#     exit 74 saying so and naming the last checkpoint; a validation shard rewritten: that
#     validation left unfinished, checkpoint, exit 66, and the resumed run computes it.
# Ends with "N passed, M failed".
set -u
trainer=${1:-./train_gpt_cpu}
micro_steps=${2:-20}
val_batches=${3:-3000}
if ! [[ $micro_steps =~ ^[0-9]+$ ]] || [ "$micro_steps" -lt 2 ]; then
    echo "error: dev/test_reliability.sh: MICRO_STEPS must be an integer of at least 2, not '$micro_steps'" >&2
    exit 2
fi
if ! [[ $val_batches =~ ^[0-9]+$ ]] || [ "$val_batches" -lt 1 ]; then
    echo "error: dev/test_reliability.sh: VAL_BATCHES must be a positive integer, not '$val_batches'" >&2
    exit 2
fi
. "$(dirname "$0")/testlib.sh"
test_begin 2
# same_final DIR_A DIR_B STEP: model and state files of STEP identical
# shellcheck disable=SC2046
same_final() { same_files "$1" "$2" $(checkpoint_files "$3"); }

write_shard "$tmp/train_000.bin" 256 20000 || bad "writing shards"
write_shard "$tmp/train_001.bin" 256 15000 || bad "writing shards"
B=4
T=32
base=("$trainer" --n-layer 2 --n-head 4 --n-embd 64 --vocab-size 256 -b "$B" -t "$T" -i "$tmp/train_*.bin" -s 0 -v 0 -l 1e-3 -u 2 --seed 3)

# "${default_signals[@]}" CMD...: CMD (the same process: $! is its pid) with SIGHUP and SIGPIPE at their default
# disposition (a shell cannot reset a signal ignored when it started, as under nohup or a CI runner that ignores
# them, and the trainer leaves an ignored one so)
default_signals=("$PYTHON" -c 'import os, signal, sys
for s in (signal.SIGHUP, signal.SIGPIPE): signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')

# ---------------------------------------------------------------- stop signals
# MICRO_STEPS micro-steps per step (at least 2), so a signal can land inside a step. The run's output
# reaches this script through a FIFO, read line by line: the signal goes out the moment the line of
# step 3 arrives (no polling, no fixed delay), so it lands early in step 4, and steps 4-8 are the
# margin before the run would end, on a loaded machine too (a step's line and the next step's first
# micro-step are microseconds apart, so the signal practically always lands inside step 4)
long=("${base[@]}" -d $((micro_steps * B * T)) -x 8)
"${long[@]}" -o "$tmp/sig_ref" -n 8 >"$tmp/sig_ref.log" 2>&1 || bad "uninterrupted signal-test run failed"
mkfifo "$tmp/sig.fifo" || bad "mkfifo $tmp/sig.fifo failed"
for sig in TERM USR1 INT HUP; do
    dir="$tmp/sig_$sig"
    log="$tmp/sig_$sig.log"
    "${default_signals[@]}" "${long[@]}" -o "$dir" >"$tmp/sig.fifo" 2>&1 &
    pid=$!
    exec 3<"$tmp/sig.fifo"
    while IFS= read -r line <&3 && printf '%s\n' "$line" >>"$log" && ! [[ $line =~ ^step\ +3/8\ \|\ loss ]]; do :; done
    start=$EPOCHREALTIME
    kill -$sig $pid
    cat <&3 >>"$log" # the rest of the output, until the run exits
    exec 3<&-
    wait $pid
    rc=$?
    took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    printed=$(last_step "$log")
    saved=$(checkpoint_steps "$dir" | tail -n 1)
    if [ $rc -eq 75 ] && [ -n "$saved" ] && [ $((10#$saved)) -eq "$printed" ] && grep -q "SIG$sig received" "$log"; then
        ok "SIG$sig after step $printed: exit 75 in ${took}s, checkpoint of step $((10#$saved)) (the completed steps), \"$(grep received "$log")\""
    else
        bad "SIG$sig: exit $rc, printed step ${printed:-?}, saved ${saved:-none}: $(tail -2 "$log")"
    fi
    "${long[@]}" -o "$dir" -y 1 -n 8 >"$tmp/sig_resume.log" 2>&1
    if same_final "$tmp/sig_ref" "$dir" 8; then
        ok "SIG$sig: resumed run ends bit-identical to the uninterrupted one (step 8 model and state)"
    else
        bad "SIG$sig: resumed run differs: $(tail -2 "$tmp/sig_resume.log")"
    fi
done

# a long validation (VAL_BATCHES batches, ~2 s) after step 3, checkpoints every 3 steps: SIGTERM a moment after step
# 3's checkpoint is marked complete lands in that validation (it starts once the marker's directory is synced and the
# retention done). A signal that came before it (a slow directory sync) stops the run after step 3 without one: that
# attempt is made again, the signal later.
write_shard "$tmp/val.bin" 256 $((val_batches * B * T + 1)) || bad "writing the validation shard"
evals=("${base[@]}" -j "$tmp/val.bin" -v 3 -m "$val_batches" -x 6 -n 3)
"${evals[@]}" -o "$tmp/eval_ref" >"$tmp/eval_ref.log" 2>&1 || bad "uninterrupted validation-test run failed"
for delay in 0.05 0.2 0.5; do
    rm -rf "$tmp/eval_sig"
    : >"$tmp/eval_sig.log"
    "${evals[@]}" -o "$tmp/eval_sig" >"$tmp/sig.fifo" 2>&1 &
    pid=$!
    exec 3<"$tmp/sig.fifo"
    while IFS= read -r line <&3 && printf '%s\n' "$line" >>"$tmp/eval_sig.log" && ! [[ $line =~ ^step\ +3/6\ \|\ loss ]]; do :; done
    for _ in $(seq 1 1000); do [ -e "$tmp/eval_sig/done_00000003.txt" ] && break; sleep 0.01; done
    sleep $delay
    start=$EPOCHREALTIME
    kill -TERM $pid
    cat <&3 >>"$tmp/eval_sig.log"
    exec 3<&-
    wait $pid
    rc=$?
    took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    grep -q 'received: stopping after 3 completed steps' "$tmp/eval_sig.log" && ! grep -q '^stop signal during the validation' "$tmp/eval_sig.log" || break
done
if [ $rc -eq 75 ] && grep -q '^stop signal during the validation after step 3: left unfinished' "$tmp/eval_sig.log" &&
    ! grep -q 'val loss' <(grep -E '^step +3/6' "$tmp/eval_sig.log") && ! grep -q '"step":3,"val_loss"' "$tmp/eval_sig/metrics.jsonl" &&
    [ -e "$tmp/eval_sig/done_00000003.txt" ]; then
    ok "SIGTERM during a $val_batches-batch validation after step 3: left unfinished, recorded nowhere, exit 75 in ${took}s"
else
    bad "SIGTERM during a validation: exit $rc after ${took}s: $(grep -E 'validation|received|error' "$tmp/eval_sig.log" | head -3)"
fi
"${evals[@]}" -o "$tmp/eval_sig" -y 1 >"$tmp/eval_resume.log" 2>&1
val_ref=$(grep -E '^step +3/6 .*val loss' "$tmp/eval_ref.log" | sed 's/.*val loss //')
val_resumed=$(grep -E '^step +3/6 .*val loss' "$tmp/eval_resume.log" | sed 's/.*val loss //')
if [ -n "$val_ref" ] && [ "$val_resumed" = "$val_ref" ] && same_final "$tmp/eval_ref" "$tmp/eval_sig" 6; then
    ok "the resumed run computes step 3's validation (val loss $val_resumed, as uninterrupted) and ends bit-identical"
else
    bad "resumed after a stopped validation: val loss ${val_resumed:-none} against ${val_ref:-none}: $(tail -2 "$tmp/eval_resume.log")"
fi

# started with nohup (SIGHUP ignored): a SIGHUP does not stop the run
nohup "${long[@]}" -o "$tmp/sig_nohup" >"$tmp/sig_nohup.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do grep -qE '^step +3/8 ' "$tmp/sig_nohup.log" && break; sleep 0.01; done
kill -HUP $pid
wait $pid
rc=$?
if [ $rc -eq 0 ] && grep -qE '^step +8/8 ' "$tmp/sig_nohup.log" && ! grep -q 'received' "$tmp/sig_nohup.log"; then
    ok "under nohup, SIGHUP after step 3 stops nothing: all 8 steps, exit 0"
else
    bad "under nohup, SIGHUP: exit $rc: $(grep -E 'received|error' "$tmp/sig_nohup.log" | head -2)"
fi

# stdout a pipe whose reader exits after the first line: the next write raises SIGPIPE, a stop signal
"${default_signals[@]}" "${long[@]}" -o "$tmp/sig_PIPE" 2>"$tmp/sig_PIPE.err" | head -n 1 >/dev/null
rc=${PIPESTATUS[0]}
saved=$(checkpoint_steps "$tmp/sig_PIPE" | tail -n 1)
if [ "$rc" -eq 75 ] && [ -n "$saved" ]; then
    ok "stdout's reader gone (SIGPIPE): exit 75, checkpoint of step $((10#$saved))"
else
    bad "stdout's reader gone (SIGPIPE): exit $rc, checkpoint ${saved:-none}: $(head -c 300 "$tmp/sig_PIPE.err")"
fi

# ---------------------------------------------------------------- a training shard breaks during the run
# Two shards read in order (--shuffle 0), FIRST steps' windows in the first, 2 in the second: the second is
# first read in step FIRST+1. Once step 1's line is out, the trainer is paused (SIGSTOP: steps 2-FIRST are the
# margin, the swap lands before step FIRST+1 on a fast or a loaded machine too), the second shard rewritten (the
# same length, other tokens), truncated or deleted, and the trainer resumed: it stops in step FIRST+1, naming
# the shard, with a checkpoint of the FIRST completed steps and exit 66. With the shard restored, -y 1 ends
# bit-identical.
window=$((micro_steps * B * T))
first=40
total=$((first + 2))
first8=$(printf %08d $first)
mkdir -p "$tmp/data_err"
write_shard "$tmp/data_err/train_000.bin" 256 $((first * window + 1)) || bad "writing shards"
write_shard "$tmp/data_err/train_001.bin" 256 $((2 * window + 1)) || bad "writing shards"
write_shard "$tmp/data_err.other" 256 $((2 * window + 1)) random || bad "writing shards"
cp "$tmp/data_err/train_001.bin" "$tmp/data_err.orig"
data_run=("$trainer" --n-layer 2 --n-head 4 --n-embd 64 --vocab-size 256 -b "$B" -t "$T" -i "$tmp/data_err/train_*.bin" --shuffle 0
    -s 0 -v 0 -l 1e-3 -u 2 --seed 3 -d "$window" -x $total -n $total)
"${data_run[@]}" -o "$tmp/data_ref" >"$tmp/data_ref.log" 2>&1 || bad "uninterrupted data-error-test run failed"
shard1="$tmp/data_err/train_001.bin"
for how in rewritten truncated deleted; do
    dir="$tmp/data_$how"
    log="$tmp/data_$how.log"
    "${data_run[@]}" -o "$dir" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 6000); do grep -qE "^step +1/$total " "$log" && break; sleep 0.01; done
    kill -STOP $pid
    case $how in
    rewritten) cp "$tmp/data_err.other" "$shard1"; want="$shard1: token shard changed since it was opened" ;;
    truncated) truncate -s -2 "$shard1"; want="$shard1: token shard is truncated" ;;
    deleted) rm "$shard1"; want="$shard1: cannot open for reading" ;;
    esac
    kill -CONT $pid
    wait $pid
    rc=$?
    if [ $rc -eq 66 ] && [ "$(checkpoint_steps "$dir")" = "$first8" ] && [ "$(last_step "$log")" = $first ] && grep -qF "error: $want" "$log" &&
        grep -q "^data error: stopping after $first completed steps$" "$log"; then
        ok "shard $how during the run: exit 66, checkpoint of the $first completed steps, \"$(grep -m1 '^error' "$log" | cut -c1-140)\""
    else
        bad "shard $how during the run: exit $rc, checkpoints $(checkpoint_steps "$dir" | tr '\n' ' '): $(grep -E '^error|stopping' "$log" | head -3)"
    fi
    cp "$tmp/data_err.orig" "$shard1"
    "${data_run[@]}" -o "$dir" -y 1 >"$tmp/data_resume.log" 2>&1
    steplines "$tmp/data_ref.log" >"$tmp/a"
    cat "$log" "$tmp/data_resume.log" >"$tmp/data_both.log"
    steplines "$tmp/data_both.log" >"$tmp/b"
    if same_final "$tmp/data_ref" "$dir" $total && grep -q "^resume: step $first from" "$tmp/data_resume.log" && [ -s "$tmp/a" ] &&
        cmp -s "$tmp/a" "$tmp/b"; then
        ok "shard $how: restored, -y 1 resumes from step $first and ends bit-identical (step $total model and state, the $total step lines)"
    else
        bad "shard $how: resumed run differs: $(diff "$tmp/a" "$tmp/b" | head -3) $(grep -E '^resume|^error' "$tmp/data_resume.log" | head -2)"
    fi
done
# the same deletion, and the checkpoint of the completed steps cannot be written either (a directory in the way of its
# model file's .tmp): exit 74, saying that the completed steps are not saved and which checkpoint is the last
"${data_run[@]}" -o "$tmp/data_nosave" >"$tmp/data_nosave.log" 2>&1 &
pid=$!
for _ in $(seq 1 6000); do grep -qE "^step +1/$total " "$tmp/data_nosave.log" && break; sleep 0.01; done
kill -STOP $pid
rm "$shard1"
mkdir -p "$tmp/data_nosave/model_$first8.bin.tmp"
kill -CONT $pid
wait $pid
rc=$?
if [ $rc -eq 74 ] && grep -q '^error: the completed steps are not saved; no checkpoint has been written$' "$tmp/data_nosave.log"; then
    ok "shard deleted and the checkpoint at the exit fails: exit 74, \"$(grep -m1 'not saved' "$tmp/data_nosave.log")\""
else
    bad "shard deleted, checkpoint fails: exit $rc: $(grep -E '^error' "$tmp/data_nosave.log" | head -3)"
fi
cp "$tmp/data_err.orig" "$shard1"

# a validation shard: two of one batch each, both read in every validation (-m 2, after steps 0, FIRST and FIRST+2),
# the second rewritten after step 1: the validation after step FIRST is left unfinished, the FIRST completed steps
# checkpointed, exit 66; restored, -y 1 computes that validation (the uninterrupted run's loss) and ends bit-identical
write_shard "$tmp/data_err/val_000.bin" 256 $((B * T + 1)) && write_shard "$tmp/data_err/val_001.bin" 256 $((B * T + 1)) &&
    write_shard "$tmp/data_err/val.other" 256 $((B * T + 1)) random || bad "writing validation shards"
cp "$tmp/data_err/val_001.bin" "$tmp/data_err/val.orig"
val_run=("${data_run[@]}" -j "$tmp/data_err/val_*.bin" -v $first -m 2)
"${val_run[@]}" -o "$tmp/val_ref" >"$tmp/val_ref.log" 2>&1 || bad "uninterrupted validation data-error-test run failed"
"${val_run[@]}" -o "$tmp/val_err" >"$tmp/val_err.log" 2>&1 &
pid=$!
for _ in $(seq 1 6000); do grep -qE "^step +1/$total " "$tmp/val_err.log" && break; sleep 0.01; done
kill -STOP $pid
cp "$tmp/data_err/val.other" "$tmp/data_err/val_001.bin"
kill -CONT $pid
wait $pid
rc=$?
if [ $rc -eq 66 ] && [ "$(checkpoint_steps "$tmp/val_err")" = "$first8" ] && [ "$(last_step "$tmp/val_err.log")" = $first ] &&
    grep -qF "error: $tmp/data_err/val_001.bin: token shard changed since it was opened" "$tmp/val_err.log" &&
    ! grep -qE "^step +$first/$total \| val loss" "$tmp/val_err.log" && grep -q "^data error: stopping after $first completed steps$" "$tmp/val_err.log"; then
    ok "validation shard rewritten during the run: the validation after step $first unfinished, exit 66, checkpoint of step $first"
else
    bad "validation shard rewritten during the run: exit $rc, checkpoints $(checkpoint_steps "$tmp/val_err" | tr '\n' ' '): $(grep -E '^error|stopping' "$tmp/val_err.log" | head -3)"
fi
cp "$tmp/data_err/val.orig" "$tmp/data_err/val_001.bin"
"${val_run[@]}" -o "$tmp/val_err" -y 1 >"$tmp/val_resume.log" 2>&1
val_ref=$(grep -E "^step +$first/$total \| val loss" "$tmp/val_ref.log")
if [ -n "$val_ref" ] && [ "$(grep -E "^step +$first/$total \| val loss" "$tmp/val_resume.log")" = "$val_ref" ] && same_final "$tmp/val_ref" "$tmp/val_err" $total; then
    ok "validation shard restored: -y 1 computes the validation after step $first (\"$val_ref\", as uninterrupted) and ends bit-identical"
else
    bad "validation shard restored: resumed run differs: $(grep -E '^resume|^error|val loss' "$tmp/val_resume.log" | head -3)"
fi

# ---------------------------------------------------------------- corrupted checkpoints are skipped
short=("${base[@]}" -x 10)
"${short[@]}" -o "$tmp/ref" -n 2 >/dev/null 2>&1
mkdir -p "$tmp/corrupt"
cp "$tmp/ref"/*_0000000[2468]*.* "$tmp/corrupt/"
printf '\x55' | dd of="$tmp/corrupt/model_00000008.bin" bs=1 seek=5000 conv=notrunc status=none
head -c 20000 "$tmp/ref/state_00000006_00000.bin" >"$tmp/corrupt/state_00000006_00000.bin"
printf 'step 4\nworld x\n' >"$tmp/corrupt/done_00000004.txt"
"${short[@]}" -o "$tmp/corrupt" -n 2 -y 1 >"$tmp/corrupt.log" 2>&1
rc=$?
skips=$(grep -c '^resume: skipping' "$tmp/corrupt.log")
if [ $rc -eq 0 ] && [ "$skips" -eq 3 ] && grep -q '^resume: step 2 from' "$tmp/corrupt.log" &&
    grep -q 'step 8: .*model_00000008.bin: model file is corrupt' "$tmp/corrupt.log" &&
    grep -q 'step 6: .*state_00000006_00000.bin: training state file is truncated' "$tmp/corrupt.log" &&
    grep -q 'step 4: .*done_00000004.txt: done marker is malformed' "$tmp/corrupt.log"; then
    ok "resume skips 3 bad checkpoints, naming each, and resumes from step 2: $(grep '^resume: skipping' "$tmp/corrupt.log" | sed 's/.*: //' | tr '\n' ';')"
else
    bad "corrupted checkpoints: exit $rc, $skips skipped: $(grep '^resume' "$tmp/corrupt.log" | head -5)"
fi
if same_final "$tmp/ref" "$tmp/corrupt" 10; then ok "after skipping them the run ends bit-identical (step 10)"; else bad "after skipping: step 10 differs"; fi
mkdir -p "$tmp/foreign" # files that each verify, but are not their checkpoint's: caught by checkpoint_verify, skipped
cp "$tmp/ref"/*_0000000[2468]*.* "$tmp/foreign/"
cp "$tmp/ref/model_00000006.bin" "$tmp/foreign/model_00000008.bin"
cp "$tmp/ref/model_00000008.bin" "$tmp/foreign/model_00000006.bin"
printf '\x07' | dd of="$tmp/foreign/model_00000004.bin" bs=1 seek=36 conv=notrunc status=none # word 9: n_layer 7
"${short[@]}" -o "$tmp/foreign" -n 2 -y 1 >"$tmp/foreign.log" 2>&1
rc=$?
skips=$(grep -c '^resume: skipping' "$tmp/foreign.log")
if [ $rc -eq 0 ] && [ "$skips" -eq 3 ] && grep -q '^resume: step 2 from' "$tmp/foreign.log" &&
    grep -q 'step 8: .*model_00000008.bin and .*state_00000008_00000.bin are not of one checkpoint' "$tmp/foreign.log" &&
    grep -q 'step 6: .*model_00000006.bin and .*state_00000006_00000.bin are not of one checkpoint' "$tmp/foreign.log" &&
    grep -q 'step 4: .*model_00000004.bin and .*state_00000004_00000.bin are not of one checkpoint' "$tmp/foreign.log" &&
    same_final "$tmp/ref" "$tmp/foreign" 10; then
    ok "model files of steps 6 and 8 swapped, a changed header word in step 4's: all 3 skipped, resumed from step 2, bit-identical at step 10"
else
    bad "foreign model files: exit $rc, $skips skipped: $(grep -E '^(resume|error)' "$tmp/foreign.log" | head -5)"
fi
mkdir -p "$tmp/allbad"
cp "$tmp/ref"/*_0000000[24]*.* "$tmp/allbad/"
printf '\x7f' | dd of="$tmp/allbad/state_00000004_00000.bin" bs=1 seek=104 conv=notrunc status=none # word 26: the loader's batch
head -c 3000 "$tmp/ref/model_00000002.bin" >"$tmp/allbad/model_00000002.bin"
cp "$tmp/ref/model_00000006.bin" "$tmp/allbad/" # no marker: what a sweep deletes, kept while no checkpoint is valid
before=$(ls "$tmp/allbad"; cat "$tmp/allbad"/* | md5sum)
"${short[@]}" -o "$tmp/allbad" -n 2 -y 1 >"$tmp/allbad.log" 2>"$tmp/allbad.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "^error: .*allbad: none of its 2 checkpoints is valid" "$tmp/allbad.err" &&
    grep -q 'step 4: .*state_00000004_00000.bin: training state file header is corrupt' "$tmp/allbad.log" &&
    [ "$(ls "$tmp/allbad"; cat "$tmp/allbad"/* | md5sum)" = "$before" ]; then
    ok "no valid checkpoint (a changed state header byte, a truncated model): -y 1 exits 1, writes and deletes nothing (an unmarked model file stays): $(head -1 "$tmp/allbad.err")"
else
    bad "no valid checkpoint: exit $rc: $(head -c 300 "$tmp/allbad.err") $(grep '^resume' "$tmp/allbad.log")"
fi
mkdir -p "$tmp/past"
cp "$tmp/ref"/*_00000010*.* "$tmp/past/"
"${base[@]}" -x 6 -o "$tmp/past" -y 1 >"$tmp/past.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^resume: the checkpoint is at step 10 and the run ends at step 6 (--max-steps): nothing left to train' "$tmp/past.log"; then
    ok "resuming step 10 with -x 6: exit 0, says there is nothing left to train"
else
    bad "resuming past --max-steps: exit $rc: $(grep -m2 -E '^(resume|error)' "$tmp/past.log")"
fi

# a run killed between its last checkpoint's marker and that save's retention (--keep-last 2 --keep-every 4: step 6
# still there after 10 was written): -y 1, with nothing left to train, applies the retention the save did not
"${short[@]}" -o "$tmp/keep_ref" -n 2 --keep-last 2 --keep-every 4 >/dev/null 2>&1 || bad "uninterrupted retention-test run failed"
cp -r "$tmp/keep_ref" "$tmp/keep_kill"
cp "$tmp/ref"/*_00000006*.* "$tmp/keep_kill/"
"${short[@]}" -o "$tmp/keep_kill" -n 2 --keep-last 2 --keep-every 4 -y 1 >"$tmp/keep_kill.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(ls "$tmp/keep_kill")" = "$(ls "$tmp/keep_ref")" ] && grep -q '^checkpoint: deleted step 6 ' "$tmp/keep_kill.log"; then
    ok "killed before its last save's retention: -y 1 (nothing left to train) deletes step 6, leaves the uninterrupted run's checkpoints ($(checkpoint_steps "$tmp/keep_kill" | tr '\n' ' '))"
else
    bad "retention on resume: exit $rc, checkpoints $(checkpoint_steps "$tmp/keep_kill" | tr '\n' ' '), the uninterrupted run's $(checkpoint_steps "$tmp/keep_ref" | tr '\n' ' ')"
fi

mkdir -p "$tmp/torn"
cp "$tmp/ref"/*_00000008*.* "$tmp/ref/metrics.jsonl" "$tmp/torn/"
printf '{"step":9,"loss":3.1' >>"$tmp/torn/metrics.jsonl" # a record cut short by a kill or a full disk
"${short[@]}" -o "$tmp/torn" -y 1 >"$tmp/torn.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^metrics: .*cut a partial last line (20 bytes)' "$tmp/torn.log" &&
    "$PYTHON" -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/torn/metrics.jsonl" 2>/dev/null &&
    grep -q '"step":10,' "$tmp/torn/metrics.jsonl"; then
    ok "a partial last line of metrics.jsonl is cut when a resumed run appends: every line parses as JSON"
else
    bad "partial metrics.jsonl line: exit $rc: $(grep -m1 '^metrics' "$tmp/torn.log"); $(tail -c 200 "$tmp/torn/metrics.jsonl")"
fi

# ---------------------------------------------------------------- one trainer per output directory
"${base[@]}" -x 100000 -o "$tmp/locked" >"$tmp/locked.log" 2>&1 &
holder=$!
for _ in $(seq 1 600); do grep -qE '^step +1/' "$tmp/locked.log" && break; sleep 0.1; done
"${short[@]}" -o "$tmp/locked" >"$tmp/second.log" 2>"$tmp/second.err"
rc=$?
kill $holder 2>/dev/null
wait $holder 2>/dev/null
if [ $rc -eq 1 ] && grep -q "^error: .*locked: another trainer is writing to this output directory" "$tmp/second.err" &&
    ! grep -qE '^step ' "$tmp/second.log"; then
    ok "a second trainer on a directory in use: exit 1 before any step: $(head -1 "$tmp/second.err")"
else
    bad "a second trainer on a directory in use: exit $rc: $(head -c 300 "$tmp/second.err")"
fi

# ---------------------------------------------------------------- out of space: a file-size limit
mkdir -p "$tmp/full"
cp "$tmp/ref"/*_00000004*.* "$tmp/full/"
before=$(md5sum "$tmp/full"/*00000004* | md5sum)
(ulimit -f 100 && exec "${short[@]}" -o "$tmp/full" -n 2 -y 1) >"$tmp/full.log" 2>"$tmp/full.err"
rc=$?
after=$(md5sum "$tmp/full"/*00000004* | md5sum)
msg=$(grep -m1 'checkpoint of step 6 not written' "$tmp/full.err")
if [ $rc -eq 74 ] && [ "$before" = "$after" ] && ! ls "$tmp/full"/*.tmp >/dev/null 2>&1 && ! [ -e "$tmp/full/done_00000006.txt" ] &&
    grep -q 'File too large' <<<"$msg" && grep -q 'last checkpoint is step 4' "$tmp/full.err"; then
    ok "file-size limit 100 KiB: exit 74, step-4 checkpoint untouched, no .tmp left: \"$msg\""
else
    bad "file-size limit: exit $rc, stderr: $(head -c 400 "$tmp/full.err")"
fi
"${short[@]}" -o "$tmp/full" -n 2 -y 1 >"$tmp/full2.log" 2>&1
if grep -q '^resume: step 4 from' "$tmp/full2.log" && same_final "$tmp/ref" "$tmp/full" 10; then
    ok "after the failed write, -y 1 resumes from step 4 and ends bit-identical"
else
    bad "after the failed write: $(grep '^resume' "$tmp/full2.log")"
fi
rm -rf "$tmp/full" && mkdir -p "$tmp/full"
cp "$tmp/ref"/*_00000004*.* "$tmp/full/"
(ulimit -f 100 && exec "${short[@]}" -o "$tmp/full" -n 2 -y 1 --on-save-error continue) >"$tmp/full.log" 2>"$tmp/full.err"
rc=$?
fails=$(grep -c 'not written' "$tmp/full.err")
if [ $rc -eq 74 ] && [ "$fails" -eq 3 ] && grep -q '^step  *10/10 | loss' "$tmp/full.log" && grep -q 'continuing without it' "$tmp/full.log" &&
    grep -q "^error: stopping (it was the run's last step); the last checkpoint is step 4" "$tmp/full.err"; then
    ok "--on-save-error continue: all 10 steps trained past 2 failed writes; the final one failing too exits 74 (the model is nowhere)"
else
    bad "--on-save-error continue: exit $rc, $fails failures reported: $(tail -2 "$tmp/full.err")"
fi
# a limit the model file fits in and its state file does not (3 times its size): each failed save deletes the model file it
# wrote, but the last one's (the final weights, said)
rm -rf "$tmp/full" && mkdir -p "$tmp/full"
cp "$tmp/ref"/*_00000004*.* "$tmp/full/"
model_kib=$(($(stat -c %s "$tmp/ref/model_00000004.bin") / 1024 + 8))
(ulimit -f $model_kib && exec "${short[@]}" -o "$tmp/full" -n 2 -y 1 --on-save-error continue) >"$tmp/full.log" 2>"$tmp/full.err"
rc=$?
fails=$(grep -c 'not written.*state_.*File too large' "$tmp/full.err")
left=$(cd "$tmp/full" && for f in *; do [[ $f == *_00000004* || $f == metrics.jsonl ]] || printf '%s ' "$f"; done)
if [ $rc -eq 74 ] && [ "$fails" -eq 3 ] && [ "$left" = "model_00000010.bin " ] && cmp -s "$tmp/ref/model_00000010.bin" "$tmp/full/model_00000010.bin" &&
    grep -q '^note: .*model_00000010.bin is kept: the final weights' "$tmp/full.err"; then
    ok "file-size limit of ${model_kib} KiB (model file fits, state file not): 3 failed saves leave no file but the final weights, said"
else
    bad "failed saves leave files: exit $rc, $fails state-file failures, left: ${left:-nothing}: $(head -c 300 "$tmp/full.err")"
fi

# ---------------------------------------------------------------- -y 1 deletes the debris of interrupted writes
mkdir -p "$tmp/debris"
cp "$tmp/ref"/*_00000004*.* "$tmp/debris/"
cp "$tmp/ref/model_00000006.bin" "$tmp/debris/"                                  # a model file whose state file never came
cp "$tmp/ref/state_00000008_00000.bin" "$tmp/debris/state_00000008_00000.bin.tmp" # a write killed before its rename
cp "$tmp/ref/model_00000006.bin" "$tmp/debris/model_00000006.bin.bak"             # the user's: not a checkpoint's name
"${base[@]}" -x 4 -o "$tmp/debris" -y 1 >"$tmp/debris.log" 2>&1
rc=$?
left=$(cd "$tmp/debris" && for f in *; do [ "$f" = metrics.jsonl ] || printf '%s ' "$f"; done)
if [ $rc -eq 0 ] && grep -q '^resume: deleted 2 file(s) of unfinished checkpoint writes' "$tmp/debris.log" &&
    [ "$left" = "done_00000004.txt model_00000004.bin model_00000006.bin.bak state_00000004_00000.bin " ]; then
    ok "-y 1 (nothing left to train) deletes an unmarked model file and a .tmp, keeps checkpoint 4 and a .bak: $(grep -m1 'deleted' "$tmp/debris.log")"
else
    bad "debris on resume: exit $rc, left: $left: $(grep -m2 '^resume' "$tmp/debris.log")"
fi
# ---------------------------------------------------------------- -y 1 marks done a complete checkpoint without its marker
mkdir -p "$tmp/unmarked"
cp "$tmp/ref/model_00000004.bin" "$tmp/ref/state_00000004_00000.bin" "$tmp/ref/model_00000006.bin" "$tmp/unmarked/"
cp "$tmp/ref/state_00000002_00000.bin" "$tmp/unmarked/state_00000006_00000.bin" # another step's state file: step 6 does not verify
"${short[@]}" -o "$tmp/unmarked" -n 2 -y 1 >"$tmp/unmarked.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^resume: step 4 of .*unmarked: its files are complete and verify but had no done marker' "$tmp/unmarked.log" &&
    grep -q '^resume: step 6 of .*unmarked has no done marker and is not a complete checkpoint: .* are not of one checkpoint' "$tmp/unmarked.log" &&
    grep -q '^resume: step 4 from' "$tmp/unmarked.log" &&
    grep -q '^resume: deleted 2 file(s)' "$tmp/unmarked.log" && same_final "$tmp/ref" "$tmp/unmarked" 10; then
    ok "-y 1 on a copy without markers: step 4 (complete, verified) marked done and resumed, bit-identical at step 10; step 6 (another step's state file) deleted"
else
    bad "unmarked checkpoints: exit $rc: $(grep -E '^resume|^error' "$tmp/unmarked.log" | head -4)"
fi
# the same copy resumed without model flags (the config from the unmarked model file); and a retention's leftover (a
# step older than the newest marker, whose marker went first) is debris, not marked done
mkdir -p "$tmp/unmarked_noflags" "$tmp/leftover"
cp "$tmp/ref/model_00000004.bin" "$tmp/ref/state_00000004_00000.bin" "$tmp/unmarked_noflags/"
noflags=("$trainer" -b "$B" -t "$T" -i "$tmp/train_*.bin" -s 0 -v 0 -l 1e-3 -u 2 --seed 3 -x 10)
"${noflags[@]}" -o "$tmp/unmarked_noflags" -n 2 -y 1 >"$tmp/unmarked_noflags.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^resume: step 4 from' "$tmp/unmarked_noflags.log" && same_final "$tmp/ref" "$tmp/unmarked_noflags" 10; then
    ok "-y 1 without model flags on a copy without markers: the config from its model file, step 4 resumed, bit-identical at step 10"
else
    bad "unmarked, no model flags: exit $rc: $(grep -E '^resume|^error' "$tmp/unmarked_noflags.log" | head -3)"
fi
cp "$tmp/ref/model_00000004.bin" "$tmp/ref/state_00000004_00000.bin" "$tmp/ref"/*_00000006*.* "$tmp/leftover/"
"${short[@]}" -o "$tmp/leftover" -n 2 -y 1 >"$tmp/leftover.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -q 'marked done' "$tmp/leftover.log" && grep -q '^resume: step 6 from' "$tmp/leftover.log" &&
    grep -q '^resume: deleted 2 file(s)' "$tmp/leftover.log" && ! [ -e "$tmp/leftover/model_00000004.bin" ]; then
    ok "an unmarked step older than the newest marker (a retention's leftover) is deleted, not marked done"
else
    bad "retention leftover: exit $rc: $(grep -E '^resume|^error' "$tmp/leftover.log" | head -3)"
fi
# no markers, and files of two steps of which neither is complete (a copy missing the state files): no interrupted
# first save leaves that, so the run stops and deletes nothing (it is not debris to delete and train over from scratch)
mkdir -p "$tmp/unmarked_partial"
cp "$tmp/ref/model_00000004.bin" "$tmp/ref/model_00000006.bin" "$tmp/unmarked_partial/"
"${short[@]}" -o "$tmp/unmarked_partial" -n 2 -y 1 >"$tmp/unmarked_partial.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "^error: .*unmarked_partial: files of 2 steps without done markers, none a complete checkpoint" "$tmp/unmarked_partial.log" &&
    [ "$(grep -c '^resume: step [46] of .* is not a complete checkpoint: .*state_0000000[46]_00000.bin: cannot open' "$tmp/unmarked_partial.log")" = 2 ] &&
    [ "$(ls "$tmp/unmarked_partial" | grep -c '^model_')" = 2 ] && ! grep -q '^step ' "$tmp/unmarked_partial.log"; then
    ok "no markers, files of 2 incomplete steps: exit 1, both model files kept, no step trained: $(grep -m1 '^error' "$tmp/unmarked_partial.log" | cut -c1-120)"
else
    bad "no markers, 2 incomplete steps: exit $rc: $(grep -E '^resume|^error' "$tmp/unmarked_partial.log" | head -3)"
fi
# an adoption stopped after its first marker (CHECKPOINT_ADOPTING left): the resumed run adopts the other steps instead
# of deleting them as debris
mkdir -p "$tmp/adopt_cut"
cp "$tmp/ref"/model_0000000[246].bin "$tmp/ref"/state_0000000[246]_00000.bin "$tmp/ref/done_00000006.txt" "$tmp/adopt_cut/"
: >"$tmp/adopt_cut/.adopting"
"${short[@]}" -o "$tmp/adopt_cut" -n 2 -y 1 >"$tmp/adopt_cut.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^resume: step [24] of .*: its files are complete and verify but had no done marker' "$tmp/adopt_cut.log")" = 2 ] &&
    grep -q '^resume: step 6 from' "$tmp/adopt_cut.log" && ! [ -e "$tmp/adopt_cut/.adopting" ] && [ -e "$tmp/adopt_cut/done_00000002.txt" ] &&
    [ -e "$tmp/adopt_cut/model_00000002.bin" ] && same_final "$tmp/ref" "$tmp/adopt_cut" 10; then
    ok "an adoption cut short after its first marker: steps 2 and 4 adopted on resume, not deleted; bit-identical at step 10"
else
    bad "adoption cut short: exit $rc: $(grep -E '^resume|^error' "$tmp/adopt_cut.log" | head -4)"
fi
# no markers and no model flags: a lone model file of another config (no state file) beside a complete step gives no
# config; the newest step whose model and state files go together does
mkdir -p "$tmp/lone_model"
cp "$tmp/ref/model_00000004.bin" "$tmp/ref/state_00000004_00000.bin" "$tmp/lone_model/"
"$trainer" --n-layer 1 --n-head 4 --n-embd 32 --vocab-size 256 -b "$B" -t "$T" -i "$tmp/train_*.bin" -s 0 -v 0 -x 1 -n 1 -o "$tmp/other_config" >/dev/null 2>&1
cp "$tmp/other_config/model_00000001.bin" "$tmp/lone_model/model_00000008.bin"
"${noflags[@]}" -o "$tmp/lone_model" -n 2 -y 1 >"$tmp/lone_model.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^resume: no model flags: the model's config is that of the newest valid checkpoint, .*model_00000004.bin" "$tmp/lone_model.log" &&
    grep -q '^resume: step 4 from' "$tmp/lone_model.log" && same_final "$tmp/ref" "$tmp/lone_model" 10; then
    ok "no markers, no model flags: the config from step 4 (model and state files together), not from a newer lone model file of another config"
else
    bad "lone model file: exit $rc: $(grep -E '^resume|^error' "$tmp/lone_model.log" | head -4)"
fi
# metrics.jsonl on a full disk (a 2 KiB file-size limit: the header record and a few steps; no checkpoints): as a failed save, by --on-save-error
for policy in stop continue; do
    (ulimit -f 2 && trap '' XFSZ && exec "${short[@]}" -o "$tmp/metrics_$policy" -n 0 --on-save-error $policy 2>&1) | cat >"$tmp/metrics_$policy.log"
    rc=${PIPESTATUS[0]}
    if [ $policy = stop ] && [ $rc -eq 74 ] && grep -q "^error: .*metrics.jsonl: write failed: File too large" "$tmp/metrics_$policy.log" &&
        grep -q "^error: stopping (--on-save-error stop); no checkpoint has been written" "$tmp/metrics_$policy.log"; then
        ok "metrics.jsonl write fails, --on-save-error stop: exit 74: $(grep -m1 'write failed' "$tmp/metrics_$policy.log")"
    elif [ $policy = continue ] && [ $rc -eq 0 ] && grep -q '^step  *10/10 | loss' "$tmp/metrics_$policy.log" &&
        grep -q "^warning: continuing without .*metrics.jsonl (--on-save-error continue)" "$tmp/metrics_$policy.log"; then
        ok "metrics.jsonl write fails, --on-save-error continue: all 10 steps trained without it, exit 0"
    else
        bad "metrics.jsonl write fails, --on-save-error $policy: exit $rc: $(grep -E '^(error|warning)' "$tmp/metrics_$policy.log" | head -3)"
    fi
done

# ---------------------------------------------------------------- a new run in an earlier run's directory
before=$(cat "$tmp/ref"/* | md5sum)
"${short[@]}" -o "$tmp/ref" -n 2 >"$tmp/again.log" 2>"$tmp/again.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "^error: .*ref holds the checkpoints of an earlier run (newest: step 10): resume that run with -y 1" "$tmp/again.err" &&
    ! grep -qE '^step ' "$tmp/again.log" && [ "$(cat "$tmp/ref"/* | md5sum)" = "$before" ]; then
    ok "a new run (no -y) in a directory with checkpoints: exit 1 before any step, nothing written: $(head -1 "$tmp/again.err")"
else
    bad "a new run over checkpoints: exit $rc: $(head -c 300 "$tmp/again.err")"
fi

# ---------------------------------------------------------------- early stopping: the best is newer than the last checkpoint
# (mock data, evaluations every 2 steps, checkpoints every 3): step 6's checkpoint cannot be written (a directory
# stands at its .tmp path), so the run stops at 74 with checkpoint 3 while best/ holds step 4; -y 1 resumes from 3
# and must stop early where the uninterrupted run does
early=("$trainer" --mock-data 1 --vocab-size 128 --n-layer 1 --n-head 2 --n-embd 32 -t 16 -b 2 -v 2 -m 2 -s 0 -l 1e-3 -x 30 --early-stop 3 -n 3)
"${early[@]}" -o "$tmp/early_ref" >"$tmp/early_ref.log" 2>&1
mkdir -p "$tmp/early/model_00000006.bin.tmp"
"${early[@]}" -o "$tmp/early" >"$tmp/early1.log" 2>&1
rc1=$?
rmdir "$tmp/early/model_00000006.bin.tmp"
"${early[@]}" -o "$tmp/early" -y 1 >"$tmp/early2.log" 2>&1
rc2=$?
stop_ref=$(grep '^early stop:' "$tmp/early_ref.log" | sed 's/checkpoint in .*//')
if [ $rc1 -eq 74 ] && [ $rc2 -eq 0 ] && grep -q '^resume: step 3 from' "$tmp/early2.log" &&
    grep -q '^resume: early stop: best val loss .* at step 4, not before this checkpoint' "$tmp/early2.log" && [ -n "$stop_ref" ] &&
    [ "$(grep '^early stop:' "$tmp/early2.log" | sed 's/checkpoint in .*//')" = "$stop_ref" ]; then
    ok "best (step 4) newer than the last checkpoint (3): -y 1 resumes and stops early as the uninterrupted run: $stop_ref"
else
    bad "best newer than the last checkpoint: exits $rc1, $rc2: $(grep -hE '^(resume|early stop|error)' "$tmp/early2.log" | head -4) / ref: $stop_ref"
fi

# a run killed before its first regular checkpoint left only best/: -y 1 starts the run (it does not refuse)
mkdir -p "$tmp/best_only/best"
cp "$tmp/early_ref/best"/* "$tmp/best_only/best/"
"${early[@]}" -o "$tmp/best_only" -y 1 >"$tmp/best_only.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^resume: no complete checkpoint in .*best_only, starting from scratch' "$tmp/best_only.log" &&
    [ "$(ls "$tmp/best_only/best"/done_*.txt | wc -l)" -eq 1 ]; then
    ok "-y 1 with only best/ (no regular checkpoint yet): the run starts, best/ keeps one checkpoint"
else
    bad "-y 1 with only best/: exit $rc: $(grep -m2 -E '^(resume|error)' "$tmp/best_only.log")"
fi
# the same with only best/'s step 0 left by a run of another seed: this run's step 0 is written over it (its
# evaluation is of other weights), not only best.txt (learning rate 0: step 0 stays the best). The bf16 GPU trainer
# keeps its weights at lr 0 only without fp32 master weights: with them it re-rounds its bf16 parameters from the
# masters at every step (stochastic rounding), and the validation loss moves by a rounding's worth either way.
lr0=(-l 0)
case $(basename "$trainer") in train_gpt_sim | train_gpt) lr0+=(--master-weights 0) ;; esac
mkdir -p "$tmp/best_other/best"
"${early[@]}" -o "$tmp/best_seed" -x 1 "${lr0[@]}" --seed 5 >/dev/null 2>&1
cp "$tmp/best_seed/best"/*_00000000* "$tmp/best_other/best/"
printf 'step 0\nval_loss 9\n' >"$tmp/best_other/best/best.txt"
"${early[@]}" -o "$tmp/best_other" -x 1 "${lr0[@]}" -y 1 >"$tmp/best_other.log" 2>&1
rc=$?
"${early[@]}" -o "$tmp/best_fresh" -x 1 "${lr0[@]}" >/dev/null 2>&1
if [ $rc -eq 0 ] && cmp -s "$tmp/best_fresh/best/model_00000000.bin" "$tmp/best_other/best/model_00000000.bin" &&
    ! cmp -s "$tmp/best_seed/best/model_00000000.bin" "$tmp/best_other/best/model_00000000.bin"; then
    ok "-y 1 with only another seed's best/ step 0: this run's step-0 model replaces it"
else
    bad "-y 1 with another seed's best/ step 0: exit $rc, best/'s model is $(cmp -s "$tmp/best_seed/best/model_00000000.bin" "$tmp/best_other/best/model_00000000.bin" && echo "still the other seed's" || echo "neither run's")"
fi
# --on-save-error continue and a best checkpoint that cannot be written (a directory in its .tmp's way): the early
# stop's line names the best step and says which one best/ holds instead
mkdir -p "$tmp/best_failed/best/model_00000004.bin.tmp"
"${early[@]}" -o "$tmp/best_failed" --on-save-error continue >"$tmp/best_failed.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^early stop: .*best [0-9.]* at step 4 (its checkpoint could not be saved; .*best holds step 2's" "$tmp/best_failed.log" &&
    grep -q '^step 2$' "$tmp/best_failed/best/best.txt"; then
    ok "the best's save failed (--on-save-error continue): $(grep '^early stop' "$tmp/best_failed.log")"
else
    bad "the best's save failed: exit $rc: $(grep -E '^(early stop|error)' "$tmp/best_failed.log" | head -3)"
fi
# resumed at the step of its best with evaluations that are not comparable (-m 3): that step's evaluation becomes the
# best again, over the same weights; best/'s checkpoint of it stays (it is not written again: a failed rewrite,
# here made to fail by a directory in its .tmp's way, would have deleted it), best.txt gets the new loss
"${early[@]}" -o "$tmp/best_again" -x 4 >"$tmp/best_again1.log" 2>&1
mkdir -p "$tmp/best_again/best/model_00000004.bin.tmp"
"${early[@]}" -o "$tmp/best_again" -x 8 -m 3 -y 1 >"$tmp/best_again2.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^resume: step 4 from' "$tmp/best_again2.log" && grep -q '^step 4$' "$tmp/best_again/best/best.txt" &&
    [ -e "$tmp/best_again/best/done_00000004.txt" ] && cmp -s "$tmp/best_again/model_00000004.bin" "$tmp/best_again/best/model_00000004.bin"; then
    ok "resumed at its best's step with other evaluations: best/ keeps step 4's checkpoint, best.txt $(tr '\n' ' ' <"$tmp/best_again/best/best.txt")"
else
    bad "resumed at its best's step: exit $rc: $(grep -E '^(resume|error)' "$tmp/best_again2.log" | head -3); best/: $(ls "$tmp/best_again/best" | tr '\n' ' ')"
fi

# a run killed after best.txt named its new best but before the previous best was deleted: best/ holds two
# checkpoints (here step 3's beside the best); -y 1 keeps only the one best.txt names
cp -r "$tmp/early_ref" "$tmp/best_two"
cp "$tmp/early_ref"/*_00000003*.* "$tmp/best_two/best/"
"${early[@]}" -o "$tmp/best_two" -y 1 >"$tmp/best_two.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(ls "$tmp/best_two/best")" = "$(ls "$tmp/early_ref/best")" ] && grep -q '^checkpoint: deleted step 3 of .*best' "$tmp/best_two.log"; then
    ok "two checkpoints in best/ (a kill before the previous best was deleted): -y 1 keeps only best.txt's ($(ls "$tmp/best_two/best" | tr '\n' ' '))"
else
    bad "two checkpoints in best/: exit $rc, best/ holds $(ls "$tmp/best_two/best" | tr '\n' ' '), the uninterrupted run's $(ls "$tmp/early_ref/best" | tr '\n' ' ')"
fi
# a flipped byte in best/'s model file: -y 1 verifies best/'s checkpoint in full, skips it (naming why), and the
# resumed run's first evaluation, of the same step, writes it again from the weights in memory
"${early[@]}" -o "$tmp/best_bad" -x 4 >/dev/null 2>&1
printf '\xff' | dd of="$tmp/best_bad/best/model_00000004.bin" bs=1 seek=2000 conv=notrunc status=none
"${early[@]}" -o "$tmp/best_bad" -x 8 -y 1 >"$tmp/best_bad.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^resume: skipping best checkpoint of step 4: .*model_00000004.bin: model file is corrupt' "$tmp/best_bad.log" &&
    grep -q '^step 4$' "$tmp/best_bad/best/best.txt" && cmp -s "$tmp/best_bad/model_00000004.bin" "$tmp/best_bad/best/model_00000004.bin"; then
    ok "a flipped byte in best/'s model file: skipped on resume, rewritten from the weights in memory: $(grep -m1 '^resume: skipping best' "$tmp/best_bad.log" | cut -c1-60)..."
else
    bad "a corrupt best/ model file: exit $rc: $(grep -E '^(resume|error|early)' "$tmp/best_bad.log" | head -3); best/ model $(cmp -s "$tmp/best_bad/model_00000004.bin" "$tmp/best_bad/best/model_00000004.bin" && echo rewritten || echo 'still corrupt')"
fi

# ---------------------------------------------------------------- a stop signal during a long in-run sample
"${base[@]}" -x 5 -s 1 -g 16000000 -o "$tmp/sampling" -n 1 >"$tmp/sampling.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '^---- sample' "$tmp/sampling.log" && break; sleep 0.1; done
sleep 0.5
kill -TERM $pid
start=$SECONDS
for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then kill -KILL $pid; fi
wait $pid
rc=$?
if [ $rc -eq 75 ] && grep -q 'cut short by a stop signal' "$tmp/sampling.log" && [ -e "$tmp/sampling/done_00000001.txt" ] &&
    grep -q 'received: stopping after 1 completed steps' "$tmp/sampling.log"; then
    ok "SIGTERM during a 16M-token sample (before step 2): cut short, step 2 dropped, checkpoint of step 1, exit 75 after $((SECONDS - start)) s"
else
    bad "SIGTERM during a long sample: exit $rc after $((SECONDS - start)) s: $(grep -E 'SIGTERM|cut short|error' "$tmp/sampling.log" | head -3)"
fi

# ---------------------------------------------------------------- divergence
"${base[@]}" -x 20 -l 1e30 -u 0 --grad-clip 0 --max-bad-steps 3 -o "$tmp/diverge" -n 1 >"$tmp/div.log" 2>"$tmp/div.err"
rc=$?
if [ $rc -eq 65 ] && grep -qE '^error: step [0-9]+: (3 updates skipped in a row|the update made parameter .* non-finite)' "$tmp/div.err"; then
    ok "learning rate 1e30: exit 65: $(head -1 "$tmp/div.err")"
else
    bad "learning rate 1e30: exit $rc: $(head -c 300 "$tmp/div.err")"
fi
# a weight of 1e30 (CRC valid), no clipping: the gradient's norm is past sqrt(FLT_MAX) (a double sum of its squares is
# finite, but AdamW squares each gradient in float): inf, as the GPU trainer's float sum gives it, so the update is
# skipped, instead of a second moment of inf that failed the next save (exit 74)
"${base[@]}" -x 1 -o "$tmp/huge_src" -n 1 >/dev/null 2>&1
"$PYTHON" - "$tmp/huge_src/model_00000001.bin" "$tmp/huge.bin" <<'PYEOF' || bad "writing a model file with a weight of 1e30"
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
b[1024:1028] = struct.pack("<f", 1e30)  # parameter 0: wte[0]
b[8:12] = struct.pack("<I", zlib.crc32(bytes(b[1024:])))  # header word 2: the payload CRC-32
open(sys.argv[2], "wb").write(b)
PYEOF
"$trainer" -b "$B" -t "$T" -i "$tmp/train_*.bin" -s 0 -v 0 -l 1e-3 -u 2 --seed 3 -x 3 -e "$tmp/huge.bin" --grad-clip 0 -o "$tmp/huge" -n 1 \
    >"$tmp/huge.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c 'update skipped: non-finite loss or gradient norm' "$tmp/huge.log")" -eq 3 ] &&
    grep -qE '^step +[0-9]+/3 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm inf \|' "$tmp/huge.log" && [ -e "$tmp/huge/done_00000003.txt" ]; then
    ok "a weight of 1e30, --grad-clip 0: norm inf (or nan), the 3 updates skipped, every checkpoint written, exit 0"
else
    bad "a weight of 1e30: exit $rc: $(grep -E '^step +[0-9]+/3 \| loss|^error' "$tmp/huge.log" | sed 's/ | [0-9.]* ms .*//' | head -4)"
fi
# sampling every step: the diverged model's samples stop at its non-finite logits, the health guard still ends the run
"${base[@]}" -x 20 -l 1e30 -u 0 --grad-clip 0 --max-bad-steps 3 -s 1 -g 5 >"$tmp/div_sample.log" 2>"$tmp/div_sample.err"
rc=$?
if [ $rc -eq 65 ] && grep -q "stopped: the model's logits are not finite" "$tmp/div_sample.log" && grep -q 'updates skipped in a row' "$tmp/div_sample.err"; then
    ok "learning rate 1e30, a sample every step: samples stopped at non-finite logits, exit 65: $(head -1 "$tmp/div_sample.err")"
else
    bad "learning rate 1e30 with samples: exit $rc: $(head -c 300 "$tmp/div_sample.err")"
fi

test_end
