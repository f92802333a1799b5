#!/usr/bin/env bash
# Preemption of a multi-rank run (usage: dev/cuda/test_reliability_dist.sh [TRAINER], default ./train_gpt_sim_dist):
# 2 ranks under mpirun, ZeRO-1, 4 micro-steps per step; SIGTERM reaches ONE rank (rank 1) in the middle of
# the run. The ranks must agree (train_gpt.cu all-reduces the flag before each step and micro-step): both
# drop the unfinished step, write their optimizer shards of the completed steps, rank 0 the model file and
# the done marker "world 2", and both exit 75. Resuming with -y 1 must end bit-identical (model file and
# both shards) to an uninterrupted 2-rank run. Ends with "N passed, M failed".
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
trainer=${1:-./train_gpt_sim_dist}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_FLAGS=${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}
export CUDASIM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { echo "ok    $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  $1"; fail=$((fail + 1)); }
steps=6
run=("$trainer" --n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -b 2 -t 32 -d 512 --mock-data -s 0 -v 0 -l 3e-3 -u 2 -z 1 -x $steps)
final="$(printf 'model_%08d.bin state_%08d_00000.bin state_%08d_00001.bin' $steps $steps $steps)"

$MPIRUN $MPIRUN_FLAGS -np 2 "${run[@]}" -o "$tmp/ref" -n $steps >"$tmp/ref.log" 2>&1 || bad "uninterrupted 2-rank run failed: $(tail -2 "$tmp/ref.log")"

$MPIRUN $MPIRUN_FLAGS -np 2 "${run[@]}" -o "$tmp/run" >"$tmp/run.log" 2>&1 &
mpirun_pid=$!
for _ in $(seq 1 600); do grep -qE "^step +2/$steps \| loss" "$tmp/run.log" && break; sleep 0.05; done
victim=$(pgrep -P $mpirun_pid -f "$(basename "$trainer")" | sed -n 2p)
[ -n "$victim" ] && kill -TERM "$victim"
wait $mpirun_pid
rc=$?
printed=$(grep -E "^step +[0-9]+/$steps \| loss" "$tmp/run.log" | tail -1 | sed -E 's/^step +([0-9]+)\/.*/\1/')
saved=$(ls "$tmp/run" 2>/dev/null | sed -n 's/^done_\([0-9]*\)\.txt$/\1/p' | tail -1)
if [ -n "$victim" ] && [ $rc -eq 75 ] && [ -n "$saved" ] && [ "$((10#$saved))" -eq "${printed:-0}" ] &&
    [ "$(cat "$tmp/run/done_$saved.txt")" = "$(printf 'step %d\nworld 2' $((10#$saved)))" ] &&
    [ -s "$tmp/run/state_${saved}_00000.bin" ] && [ -s "$tmp/run/state_${saved}_00001.bin" ] && grep -q 'received: stopping' "$tmp/run.log"; then
    ok "SIGTERM to rank 1 only: mpirun exit 75, both ranks' shards and the 'world 2' marker of step $((10#$saved)) (the completed steps): \"$(grep 'received: stopping' "$tmp/run.log")\""
else
    bad "SIGTERM to rank 1 (pid ${victim:-none}): exit $rc, printed step ${printed:-?}, saved ${saved:-none}: $(grep -E 'error|received' "$tmp/run.log" | head -3)"
fi
$MPIRUN $MPIRUN_FLAGS -np 2 "${run[@]}" -o "$tmp/run" -y 1 -n $steps >"$tmp/resume.log" 2>&1
same=1
for f in $final; do cmp -s "$tmp/ref/$f" "$tmp/run/$f" || same=0; done
if [ $same -eq 1 ] && grep -q "^resume: step $((10#${saved:-0})) from" "$tmp/resume.log"; then
    ok "resumed 2-rank run ends bit-identical to the uninterrupted one ($final)"
else
    bad "resumed run differs or did not resume: $(grep -E '^resume|error' "$tmp/resume.log" | head -3)"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
