#!/usr/bin/env bash
# Preemption of a multi-rank run (usage: dev/cuda/test_reliability_dist.sh [TRAINER], default ./train_gpt_sim_dist):
# 2 ranks under mpirun, ZeRO-1, 4 micro-steps per step; SIGTERM reaches ONE rank (rank 1) in the middle of
# the run. The ranks must agree (train_gpt.cu all-reduces the flag before each step and micro-step): both
# drop the unfinished step, write their optimizer shards of the completed steps, rank 0 the model file and
# the done marker "world 2", and both exit 75. Resuming with -y 1 must end bit-identical (model file and
# both shards) to an uninterrupted 2-rank run. Ends with "N passed, M failed".
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
test_end
