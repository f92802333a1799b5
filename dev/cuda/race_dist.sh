#!/usr/bin/env bash
# dev/cuda/race_dist.sh BIN: the data-parallel trainer BIN (the race-check build of train_gpt_sim_dist) on 2 ranks
# with ZeRO-1, 2 steps: gradient buckets reduced on the communication stream while the backward pass goes on,
# parameters gathered back before the forward reads them. ThreadSanitizer (TSAN_OPTIONS from the caller, make
# sim-test-races) reports any access of one stream that no event wait or synchronisation orders after another's
# write (dev/cudasim/cudasim_race.h); one report fails the check. Prints "N passed, M failed".
set -u
. "$(dirname "$0")/../testlib.sh"
test_begin
mpi_begin
export CUDASIM_THREADS=2 CUDASIM_CP_ASYNC=deferred
bin=$1
model="--n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -t 32 --mock-data -s 0 -v 0 -l 3e-3 -u 2 -d 384"
mpi 2 "$tmp/z1.log" "$bin" $model -b 6 -x 2 -z 1 --dist-init mpi
rc=$?
if [ $rc -eq 0 ] && grep -qE '^step +2/2' "$tmp/z1.log" && ! grep -q ThreadSanitizer "$tmp/z1.log"; then
    ok "2 ranks, ZeRO-1, 2 steps: no race reported"
else
    bad "2 ranks, ZeRO-1: exit $rc"
    grep -E '^(SUMMARY|error)|ThreadSanitizer' "$tmp/z1.log" | head -5
    tail -n 5 "$tmp/z1.log"
fi
test_end
