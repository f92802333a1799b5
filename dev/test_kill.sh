#!/usr/bin/env bash
# Kill test: usage dev/test_kill.sh TRAINER [SEED]
#   A small training run of TRAINER (./train_gpt_cpu now; the simulated GPU trainer is one more
#   line in mk/reliability.mk) is killed with SIGKILL again and again, at random times and while a
#   checkpoint is being written (a "<name>.tmp" file exists), and restarted with -y 1 each time
#   until it finishes. Its final model file and optimizer state must be bit-identical to those of
#   an uninterrupted run, and every restart must resume from the newest complete checkpoint.
#   At least 5 kills, at least 2 of them during a checkpoint write. Ends with "N passed, M failed".
set -u
trainer=${1:?usage: dev/test_kill.sh TRAINER [SEED]}
RANDOM=${2:-$$}
. "$(dirname "$0")/testlib.sh"
test_begin 2

write_shard "$tmp/train_000.bin" 256 20000 && write_shard "$tmp/train_001.bin" 256 15000 || { bad "writing shards"; test_end; exit 1; }
steps=40
run=("$trainer" --n-layer 2 --n-head 4 --n-embd 128 --vocab-size 256 -b 4 -t 32 -d 256 -i "$tmp/train_*.bin" -s 0 -v 0
    -x $steps -n 1 --keep-last 2 --keep-every 10 -l 1e-3 -u 3 --seed 5)
final=$(checkpoint_files $steps)

"${run[@]}" -o "$tmp/ref" >"$tmp/ref.log" 2>&1 || bad "uninterrupted run failed: $(tail -2 "$tmp/ref.log")"

kills=0
write_kills=0
resumes_ok=0
# Each attempt resumes, then is killed once its progress reaches a random step `target` just
# ahead of where it resumed: right after that step's line (odd attempts), or while the first
# checkpoint file after step target-1 is being written (even attempts, a tight poll for a .tmp,
# falling back to a plain kill if the process gets two steps past the target). Kills are tied
# to progress, not to wall time, so a fast or a slow machine gives the same number of them.
# step_done N: the attempt has printed the line of step N or of a later one (an attempt in a
# directory without markers may adopt a complete unmarked checkpoint, newer than `from`, and
# never print step N's line).
step_done() { awk -v n="$1" -v s="$steps" '$1 == "step" && $2 ~ "/" s "$" && $3 == "|" && $4 == "loss" && $2 + 0 >= n { f = 1; exit } END { exit !f }' "$tmp/attempt.log"; }
for attempt in $(seq 1 40); do
    [ $kills -ge 6 ] && [ $write_kills -ge 2 ] && break
    expected=$(checkpoint_steps "$tmp/run" | tail -n 1)
    from=$((10#${expected:-0}))
    listing=$(ls "$tmp/run" 2>/dev/null | tr '\n' ' ')
    # an even attempt first waits for the line of step target-1 > from: by then the attempt has
    # written a checkpoint, and its retention has removed the .tmp debris of the attempt before
    if [ $((attempt % 2)) -eq 0 ]; then target=$((from + 2 + RANDOM % 2)); else target=$((from + 1 + RANDOM % 3)); fi
    [ $((target + 2)) -ge $steps ] && break
    : >"$tmp/attempt.log" # emptied here: the child opens it only when it gets to run
    "${run[@]}" -o "$tmp/run" -y 1 >>"$tmp/attempt.log" 2>&1 &
    pid=$!
    if [ $((attempt % 2)) -eq 0 ]; then
        while kill -0 $pid 2>/dev/null && ! step_done $((target - 1)); do sleep 0.005; done
        spins=0
        while kill -0 $pid 2>/dev/null; do
            if compgen -G "$tmp/run/*.tmp" >/dev/null; then kill -9 $pid 2>/dev/null; break; fi
            spins=$((spins + 1))
            if [ $((spins % 512)) -eq 0 ] && step_done $((target + 2)); then kill -9 $pid 2>/dev/null; break; fi
        done
    else
        while kill -0 $pid 2>/dev/null && ! step_done $target; do sleep 0.005; done
        kill -9 $pid 2>/dev/null
    fi
    wait $pid 2>/dev/null
    rc=$?
    if [ -n "$expected" ]; then
        if grep -q "^resume: step $from from" "$tmp/attempt.log"; then
            resumes_ok=$((resumes_ok + 1))
        else
            bad "restart $attempt did not resume from step $from: $(grep -m1 '^resume' "$tmp/attempt.log") [files before it: $listing]"
        fi
    fi
    if [ $rc -eq 137 ]; then
        kills=$((kills + 1))
        if compgen -G "$tmp/run/*.tmp" >/dev/null; then write_kills=$((write_kills + 1)); fi
    else
        bad "attempt $attempt exited with $rc before it was killed: $(tail -2 "$tmp/attempt.log")"
        break
    fi
done
last_ckpt=$(checkpoint_steps "$tmp/run" | tail -n 1)
"${run[@]}" -o "$tmp/run" -y 1 >"$tmp/last.log" 2>&1 || bad "final restart failed: $(tail -2 "$tmp/last.log")"
skipped=$(cat "$tmp"/*.log | grep -c '^resume: skipping' || true)

if [ $kills -ge 5 ] && [ $write_kills -ge 2 ]; then
    ok "$trainer killed with SIGKILL $kills times ($write_kills during a checkpoint write), last complete checkpoint before the final restart: step $((10#${last_ckpt:-0}))"
else
    bad "only $kills kills ($write_kills during a write)"
fi
[ $resumes_ok -gt 0 ] && ok "$resumes_ok restarts each resumed from the newest complete checkpoint ($skipped skipped as invalid)"
# shellcheck disable=SC2086
if same_files "$tmp/ref" "$tmp/run" $final; then
    ok "final model and optimizer state after $steps steps bit-identical to the uninterrupted run ($final)"
else
    bad "final files differ from the uninterrupted run ($final)"
fi
left=$(ls "$tmp/run" | grep -c '\.tmp$' || true)
kept=$(checkpoint_steps "$tmp/run" | tr '\n' ' ')
if [ "$left" -eq 0 ] && [ "$kept" = "00000010 00000020 00000030 00000039 00000040 " ]; then
    ok "retention after the kills: checkpoints $kept(last 2 + every 10th), no .tmp left"
else
    bad "retention after the kills: markers '$kept', $left .tmp files"
fi
test_end
