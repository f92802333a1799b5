#!/usr/bin/env bash
# usage: dev/fuzz/run_fuzz.sh LIMIT HARNESS...
# Runs each build/fuzz/fuzz_<HARNESS> from its seed corpus (dev/fuzz/corpus/<HARNESS>/), side by side
# (dev/testlib.sh's jobs: a libFuzzer run is one process). LIMIT:
#   runs:N      N inputs with a fixed seed (-seed=1), on a scratch copy of the seeds: the same inputs every run,
#               so a test run fails only on a bug that is there every time (make test-fuzz)
#   seconds:S   S seconds, random seed, on build/fuzz/corpus_<HARNESS>/, which keeps what it finds (make fuzz)
# A crash, hang (10 s per input), out-of-memory (2 GiB) or sanitizer report fails the harness; its reproducer is
# left in build/fuzz/. Prints executions and executions per second of each, then "N passed, M failed".
set -u
limit=$1
shift
. "$(dirname "$0")/../testlib.sh"
test_begin
case $limit in
runs:[0-9]*) limit_args=(-runs="${limit#runs:}" -seed=1); what="${limit#runs:} inputs from seed 1" ;;
seconds:[0-9]*) limit_args=(-max_total_time="${limit#seconds:}"); what="${limit#seconds:} s" ;;
*) echo "usage: run_fuzz.sh runs:N|seconds:S HARNESS..." >&2; exit 2 ;;
esac
for h in "$@"; do
    corpus=build/fuzz/corpus_$h
    [ "${limit%%:*}" = runs ] && corpus=$tmp/corpus_$h
    mkdir -p "$corpus"
    cp -n dev/fuzz/corpus/"$h"/* "$corpus"/ 2>/dev/null
    job_start "$h" env ASAN_OPTIONS=detect_leaks=0 OMP_NUM_THREADS=1 ./build/fuzz/fuzz_"$h" "${limit_args[@]}" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix=build/fuzz/"$h"- "$corpus"
done
for h in "$@"; do
    job_wait "$h"
    rc=$?
    log=build/fuzz/fuzz_$h.log
    echo "$job_out" >"$log"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -E 's/.*(cov: [0-9]+ ft: [0-9]+ corp: [0-9]+).*/\1/')
    if [ $rc -eq 0 ] && [ -n "$execs" ]; then
        ok "fuzz_$h: $what, ${execs} executions, ${rate} exec/s, $cov, no crash, hang or sanitizer report"
    else
        bad "fuzz_$h: exit $rc after ${execs:-?} executions; see $log:"
        grep -E 'ERROR|SUMMARY|runtime error|deadly|Test unit written' "$log" | head -5
    fi
done
test_end
