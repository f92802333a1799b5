#!/usr/bin/env bash
# Preemption of a multi-rank run (usage: dev/cuda/test_reliability_dist.sh [TRAINER], default ./train_gpt_sim_dist):
# 2 ranks under mpirun, ZeRO-1, 4 micro-steps per step; SIGTERM reaches ONE rank (rank 1) in the middle of
# the run. The ranks must agree (train_gpt.cu all-reduces the flag before each step and micro-step): both
# drop the unfinished step, write their optimizer shards of the completed steps, rank 0 the model file and
# the done marker "world 2", and both exit 75. Resuming with -y 1 must end bit-identical (model file and
# both shards) to an uninterrupted 2-rank run. A resume over a corrupt shard stops both ranks together;
# one over a shard of another run skips that checkpoint; long evaluations and steps are progress for the
# watchdog. A training shard rewritten on rank 1's copy only during the run (4 micro-steps per step, and 1):
# both ranks drop the step (no update anywhere, no rank waiting in a collective), checkpoint the completed
# steps and exit 66; with the shard restored, -y 1 ends bit-identical; a validation shard likewise.
# Ends with "N passed, M failed".
set -u
trainer=${1:-./train_gpt_sim_dist}
. "$(dirname "$0")/../testlib.sh"
test_begin
mpi_begin

steps=6
run=("$trainer" --n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -b 2 -t 32 -d 512 --mock-data -s 0 -v 0 -l 3e-3 -u 2 -z 1 -x $steps)
final=$(checkpoint_files $steps 2)

mpi 2 "$tmp/ref.log" "${run[@]}" -o "$tmp/ref" -n $steps || bad "uninterrupted 2-rank run failed: $(tail -2 "$tmp/ref.log")"

$MPIRUN $MPIRUN_FLAGS -np 2 "${run[@]}" -o "$tmp/run" >"$tmp/run.log" 2>&1 &
mpirun_pid=$!
for _ in $(seq 1 600); do grep -qE "^step +2/$steps \| loss" "$tmp/run.log" && break; sleep 0.05; done
victim=$(pgrep -P $mpirun_pid -f "$(basename "$trainer")" | sed -n 2p)
[ -n "$victim" ] && kill -TERM "$victim"
wait $mpirun_pid
rc=$?
printed=$(last_step "$tmp/run.log")
saved=$(checkpoint_steps "$tmp/run" | tail -n 1)
if [ -n "$victim" ] && [ $rc -eq 75 ] && [ -n "$saved" ] && [ "$((10#$saved))" -eq "${printed:-0}" ] &&
    [ "$(cat "$tmp/run/done_$saved.txt")" = "$(printf 'step %d\nworld 2' $((10#$saved)))" ] &&
    [ -s "$tmp/run/state_${saved}_00000.bin" ] && [ -s "$tmp/run/state_${saved}_00001.bin" ] && grep -q 'received: stopping' "$tmp/run.log"; then
    ok "SIGTERM to rank 1 only: mpirun exit 75, both ranks' shards and the 'world 2' marker of step $((10#$saved)) (the completed steps): \"$(grep 'received: stopping' "$tmp/run.log")\""
else
    bad "SIGTERM to rank 1 (pid ${victim:-none}): exit $rc, printed step ${printed:-?}, saved ${saved:-none}: $(grep -E 'error|received' "$tmp/run.log" | head -3)"
fi
mpi 2 "$tmp/resume.log" "${run[@]}" -o "$tmp/run" -y 1 -n $steps
# shellcheck disable=SC2086
if same_files "$tmp/ref" "$tmp/run" $final && grep -q "^resume: step $((10#${saved:-0})) from" "$tmp/resume.log"; then
    ok "resumed 2-rank run ends bit-identical to the uninterrupted one ($final)"
else
    bad "resumed run differs or did not resume: $(grep -E '^resume|error' "$tmp/resume.log" | head -3)"
fi

# A 2-rank checkpoint copied without its done marker is marked done ("world 2", from its state files) and resumed; with
# rank 1's state file missing it is not a checkpoint: its files are deleted as debris (and the run starts afresh).
for missing in none 00001; do
    mkdir -p "$tmp/nomark_$missing"
    cp "$tmp/ref"/model_*.bin "$tmp/ref"/state_*.bin "$tmp/nomark_$missing/"
    [ $missing = none ] || rm "$tmp/nomark_$missing/state_$(printf %08d $steps)_$missing.bin"
    mpi 2 "$tmp/nomark_$missing.log" "${run[@]}" -o "$tmp/nomark_$missing" -y 1 -n $steps
    marker=$(cat "$tmp/nomark_$missing/done_$(printf %08d $steps).txt" 2>/dev/null)
    if [ $missing = none ] && [ "$marker" = "$(printf 'step %d\nworld 2' $steps)" ] &&
        grep -q "^resume: step $steps of .*: its files are complete and verify but had no done marker" "$tmp/nomark_$missing.log" &&
        grep -q "^resume: step $steps from" "$tmp/nomark_$missing.log"; then
        ok "2-rank checkpoint without its marker: marked done with world 2 and resumed"
    elif [ $missing != none ] && ! grep -q "marked done" "$tmp/nomark_$missing.log" &&
        grep -q "^resume: deleted 2 file(s)" "$tmp/nomark_$missing.log"; then
        ok "2-rank checkpoint without its marker and rank 1's state file: not marked done, its 2 files deleted as debris"
    else
        bad "2-rank checkpoint without its marker (missing state: $missing): marker '$marker': $(grep -E '^resume|error' "$tmp/nomark_$missing.log" | head -3)"
    fi
done

# Rank 0 alone verifies the checkpoints on resume (llmc/train_setup.h): a corrupt rank-1 shard in the only
# checkpoint is found there, and both ranks stop together (no wait in a collective), each saying why.
cp -r "$tmp/ref" "$tmp/bad"
shard1="$tmp/bad/state_$(printf %08d $steps)_00001.bin"
printf '\x5a' | dd of="$shard1" bs=1 seek=2000 conv=notrunc status=none
start=$(date +%s)
mpi 2 "$tmp/bad.log" "${run[@]}" -o "$tmp/bad" -y 1 -n $steps --dist-timeout 30
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $took -lt 30 ] && grep -q "skipping checkpoint of step $steps: $shard1: training state file is corrupt" "$tmp/bad.log" &&
    grep -q "error: rank 0: $tmp/bad: none of its 1 checkpoints is valid" "$tmp/bad.log" &&
    grep -q "error: rank 1: stopping: another rank's check failed" "$tmp/bad.log"; then
    ok "a corrupt rank-1 shard in the only checkpoint: rank 0's verification names it, both ranks stop (exit $rc, $took s)"
else
    bad "a corrupt rank-1 shard in the only checkpoint: exit $rc after $took s: $(grep -E 'skipping|error' "$tmp/bad.log" | head -3)"
fi

# Every rank's state file records the model file's header CRC: a rank-1 shard of another run (another
# --seed) dropped into a checkpoint makes it skipped (it trained on, silently, when only rank 0's file did)
mpi 2 "$tmp/a.log" "${run[@]}" -o "$tmp/a" -n 3 || bad "2-rank run a failed: $(tail -2 "$tmp/a.log")"
mpi 2 "$tmp/b.log" "${run[@]}" -o "$tmp/b" -n 3 --seed 7 || bad "2-rank run b failed: $(tail -2 "$tmp/b.log")"
mkdir -p "$tmp/mix"
cp "$tmp/a/"*_0000000[36]* "$tmp/mix/"
foreign="$tmp/mix/state_$(printf %08d $steps)_00001.bin"
cp "$tmp/b/state_$(printf %08d $steps)_00001.bin" "$foreign"
mpi 2 "$tmp/mix.log" "${run[@]}" -o "$tmp/mix" -y 1 -n 3
if grep -q "skipping checkpoint of step $steps: .*$foreign are not of one checkpoint" "$tmp/mix.log" &&
    grep -q "^resume: step 3 from" "$tmp/mix.log" && same_files "$tmp/a" "$tmp/mix" $final; then
    ok "a rank-1 state file of another run (--seed 7) in step $steps's checkpoint: skipped, resumed from step 3, bit-identical"
else
    bad "a rank-1 state file of another run: $(grep -E '^resume|skipping|error' "$tmp/mix.log" | head -3)"
fi

# The training loop's watchdog counts each validation batch and micro-step as progress: with
# --dist-timeout 1, an evaluation of 80 batches and a step of 40 micro-steps (each well over 1 s) pass
mpi 2 "$tmp/slow.log" "$trainer" --n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -b 2 -t 32 -d 5120 --mock-data -s 0 \
    -v 2 -m 80 -l 3e-3 -u 2 -z 1 -x 2 --dist-timeout 1
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c 'val loss' "$tmp/slow.log")" -ge 3 ]; then
    ok "--dist-timeout 1, evaluations of 80 batches and steps of 40 micro-steps: no false watchdog exit"
else
    bad "--dist-timeout 1 with long evaluations and steps: exit $rc: $(grep -E 'error' "$tmp/slow.log" | head -2)"
fi
# Rank 1 reads its own copy of the shards (the same relative glob from another directory, as a node-local
# copy), whose second shard, first read in step 13, is rewritten (the same length, other tokens) once step 1
# is out, the ranks paused meanwhile (SIGSTOP; steps 2-12 are the margin). Rank 1's loader fails alone: with 4 micro-steps it computes
# the step's other micro-steps on a batch of token 0 and the flag joins the stop flag of the next micro-step;
# with 1, the step's loss all-reduce. Either way no rank updates: both drop step 13, write the checkpoint of
# the 12 completed steps ("world 2") and exit 66, rank 1 naming the shard.
printf '#!/bin/bash\nif [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then cd "%s/rank1"; fi\nexec "%s" "$@"\n' "$tmp" "$(cd "$(dirname "$trainer")" && pwd)/$(basename "$trainer")" \
    >"$tmp/rank1.sh"
chmod +x "$tmp/rank1.sh"
# swap_mid_run LOG OUT FROM TO LATEST CMD...: CMD on 2 ranks from rank 0's directory, -o OUT, in the background; once
# step 1 is logged its ranks are paused and, if the last step logged is at most LATEST (well before the step that reads
# TO), FROM copied over TO, the ranks resumed; sets rc (mpirun's status) and ranks (pids). A run that got further before
# the pause (a loaded machine) is let finish with TO unchanged and run again, three times at most.
swap_mid_run() {
    local log=$1 out=$2 from=$3 to=$4 latest=$5 pid attempt
    shift 5
    for attempt in 1 2 3; do
        rm -rf "$out"
        (cd "$tmp/rank0" && exec $MPIRUN $MPIRUN_FLAGS -np 2 "$@" -o "$out" >"$log" 2>&1) &
        pid=$!
        for _ in $(seq 1 6000); do grep -qE '^step +1/14 ' "$log" && break; sleep 0.01; done
        ranks=$(pgrep -f "$(basename "$trainer") .*-o $out\$")
        # shellcheck disable=SC2086
        kill -STOP $ranks
        if [ "$(last_step "$log")" -le "$latest" ] 2>/dev/null; then
            cp "$from" "$to"
            # shellcheck disable=SC2086
            kill -CONT $ranks
            wait $pid
            rc=$?
            return
        fi
        echo "note: attempt $attempt paused the run after step $(last_step "$log"), past step $latest: again"
        # shellcheck disable=SC2086
        kill -CONT $ranks
        wait $pid
    done
    rc=-1
}
for accum in 4 1; do
    window=$((accum * 2 * 32 * 2))
    rm -rf "$tmp/rank0" "$tmp/rank1"
    mkdir -p "$tmp/rank0/d" "$tmp/rank1/d"
    write_shard "$tmp/rank0/d/train_000.bin" 256 $((12 * window + 1)) && write_shard "$tmp/rank0/d/train_001.bin" 256 $((2 * window + 1)) &&
        write_shard "$tmp/other_001.bin" 256 $((2 * window + 1)) random || bad "writing shards"
    cp "$tmp/rank0/d/"* "$tmp/rank1/d/"
    data_run=("$tmp/rank1.sh" --n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -b 2 -t 32 -d "$window" -i 'd/train_*.bin' --shuffle 0 -s 0
        -v 0 -l 3e-3 -u 2 -z 1 -x 14 -n 14)
    (cd "$tmp/rank0" && mpi 2 "$tmp/data_ref.log" "${data_run[@]}" -o "$tmp/data_ref$accum") || bad "uninterrupted 2-rank run failed: $(tail -2 "$tmp/data_ref.log")"
    log="$tmp/data$accum.log"
    swap_mid_run "$log" "$tmp/data$accum" "$tmp/other_001.bin" "$tmp/rank1/d/train_001.bin" 9 "${data_run[@]}"
    saved=$(checkpoint_steps "$tmp/data$accum")
    if [ $rc -eq 66 ] && [ "$saved" = 00000012 ] && [ "$(cat "$tmp/data$accum/done_$saved.txt")" = "$(printf 'step 12\nworld 2')" ] &&
        [ -s "$tmp/data$accum/state_${saved}_00001.bin" ] && [ "$(last_step "$log")" = 12 ] &&
        grep -q '^error: rank 1: d/train_001.bin: token shard changed since it was opened' "$log" &&
        grep -q '^data error on another rank: stopping after 12 completed steps$' "$log"; then
        ok "$accum micro-step(s): rank 1's shard rewritten during the run: mpirun exit 66, both ranks' shards of step 12, \"$(grep -m1 '^error: rank 1' "$log" | cut -c1-80)\""
    else
        bad "$accum micro-step(s), rank 1's shard rewritten: exit $rc, checkpoints $(tr '\n' ' ' <<<"$saved"), ranks $(tr '\n' ' ' <<<"${ranks:-none}"): $(grep -E '^error|stopping' "$log" | head -3)"
    fi
    cp "$tmp/rank0/d/train_001.bin" "$tmp/rank1/d/train_001.bin"
    (cd "$tmp/rank0" && mpi 2 "$tmp/data_resume.log" "${data_run[@]}" -o "$tmp/data$accum" -y 1)
    # shellcheck disable=SC2046
    if same_files "$tmp/data_ref$accum" "$tmp/data$accum" $(checkpoint_files 14 2) && grep -q '^resume: step 12 from' "$tmp/data_resume.log"; then
        ok "$accum micro-step(s): restored, -y 1 resumes from step 12 and ends bit-identical (model and both shards of step 14)"
    else
        bad "$accum micro-step(s): resumed run differs: $(grep -E '^resume|^error' "$tmp/data_resume.log" | head -3)"
    fi
done
# a validation shard of rank 1's copy (two of one batch each, -m 2: read after steps 0, 10 and 14) rewritten after
# step 1: rank 1 fails on the validation's last batch, the flag joins its loss's all-reduce, both leave it
# unfinished, checkpoint step 10, exit 66; restored, -y 1 computes it (the uninterrupted run's loss)
for r in 0 1; do
    write_shard "$tmp/rank$r/d/val_000.bin" 256 $((2 * 32 * 2 + 1)) && write_shard "$tmp/rank$r/d/val_001.bin" 256 $((2 * 32 * 2 + 1))
done || bad "writing validation shards"
write_shard "$tmp/other_val.bin" 256 $((2 * 32 * 2 + 1)) random || bad "writing validation shards"
val_run=("${data_run[@]}" -j 'd/val_*.bin' -v 10 -m 2)
(cd "$tmp/rank0" && mpi 2 "$tmp/val_ref.log" "${val_run[@]}" -o "$tmp/val_ref") || bad "uninterrupted 2-rank run failed: $(tail -2 "$tmp/val_ref.log")"
log="$tmp/val_err.log"
swap_mid_run "$log" "$tmp/val_err" "$tmp/other_val.bin" "$tmp/rank1/d/val_001.bin" 8 "${val_run[@]}"
if [ $rc -eq 66 ] && [ "$(checkpoint_steps "$tmp/val_err")" = 00000010 ] && [ -s "$tmp/val_err/state_00000010_00001.bin" ] &&
    grep -q '^error: rank 1: d/val_001.bin: token shard changed since it was opened' "$log" && ! grep -qE '^step +10/14 \| val loss' "$log" &&
    grep -q '^data error on another rank: stopping after 10 completed steps$' "$log"; then
    ok "rank 1's validation shard rewritten during the run: the validation after step 10 unfinished, mpirun exit 66, both ranks' shards of step 10"
else
    bad "rank 1's validation shard rewritten: exit $rc, checkpoints $(checkpoint_steps "$tmp/val_err" | tr '\n' ' '): $(grep -E '^error|stopping|val loss' "$log" | head -3)"
fi
cp "$tmp/rank0/d/val_001.bin" "$tmp/rank1/d/val_001.bin"
(cd "$tmp/rank0" && mpi 2 "$tmp/val_resume.log" "${val_run[@]}" -o "$tmp/val_err" -y 1)
val_ref=$(grep -E '^step +10/14 \| val loss' "$tmp/val_ref.log")
# shellcheck disable=SC2046
if [ -n "$val_ref" ] && [ "$(grep -E '^step +10/14 \| val loss' "$tmp/val_resume.log")" = "$val_ref" ] &&
    same_files "$tmp/val_ref" "$tmp/val_err" $(checkpoint_files 14 2); then
    ok "rank 1's validation shard restored: -y 1 computes the validation after step 10 (as uninterrupted) and ends bit-identical"
else
    bad "rank 1's validation shard restored: resumed run differs: $(grep -E '^resume|^error|val loss' "$tmp/val_resume.log" | head -3)"
fi

test_end
