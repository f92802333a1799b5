#!/usr/bin/env bash
# Preemption of a multi-rank run (usage: dev/cuda/test_reliability_dist.sh [TRAINER], default ./train_gpt_sim_dist):
# 2 ranks under mpirun, ZeRO-1, 4 micro-steps per step; SIGTERM reaches ONE rank (rank 1) in the middle of
# the run. The ranks must agree (train_gpt.cu all-reduces the flag before each step and micro-step): both
# drop the unfinished step, write their optimizer shards of the completed steps, rank 0 the model file and
# the done marker "world 2", and both exit 75. Resuming with -y 1 must end bit-identical (model file and
# both shards) to an uninterrupted 2-rank run. A resume over a corrupt shard stops both ranks together;
# one over a shard of another run skips that checkpoint; long evaluations and steps are progress for the
# watchdog. Ends with "N passed, M failed".
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
test_end
