#!/usr/bin/env bash
# device_check: every GPU check of the project in one command, for a short session on a GPU machine
# (make device-check, or bash scripts/device_check.sh; about 4-6 minutes on an H200 with 16 cores). It runs
# scripts/gpucheck.sh's steps (sourced: one list of commands): the NCCL/MPI probe; one parallel build of
# train_gpt, test_gpt bf16 and fp32, sample_gpt and both benchmarks for the GPU present, the reference
# states written meanwhile; test_gpt on each (d12 too) and sample_gpt; the d12 B=64 T=1024 training run
# with its per-op profile; the flash-attention and kernel benchmarks. Then scripts/dist_overhead.sh (the
# 1-rank NCCL path against the plain one), or an explicit failure when the probe found no NCCL; last, with
# what is left of the time, compute-sanitizer (memcheck, initcheck, racecheck) on a small test_gpt. Each step
# runs under `timeout`, capped by what is left of DEVICE_CHECK_BUDGET seconds (default 480), so a hang
# cannot eat the session. The summary comes last: each step's pass/fail and time, tokens/s, MFU, the
# profile's top ops, flash-attention TFLOP/s per shape, the distributed overhead, "N passed, M failed".
# Files: ${OUT:-build/device_check}/device_check.log (every step's output, in order) and summary.txt (the
# summary); the per-step logs stay in build/device_check/steps.
# Environment: as gpucheck.sh (NVCC, PYTHON, MPICXX); DEVICE_CHECK_BUDGET.
set -u
# shellcheck source=scripts/gpucheck.sh
. "$(dirname "$0")/gpucheck.sh"
out=${OUT:-build/device_check}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
export GPUCHECK_DIR=build/device_check/steps GPUCHECK_BUDGET=${DEVICE_CHECK_BUDGET:-480}
rm -rf "$GPUCHECK_DIR"
gc_init
[ -n "$gc_arch" ] || gc_record FAIL "a GPU seen by nvidia-smi" 0 "none: building for sm_90 anyway, every run will fail"

# device_check_logs: every step's log, in the order they were written, into one file (run on exit)
# shellcheck disable=SC2317
device_check_logs() {
    local f
    # shellcheck disable=SC2045 # the step logs' names are gc_step's slugs: no spaces
    for f in $(ls -tr "$gc_dir"/*.log 2>/dev/null); do
        printf '\n==== %s\n' "$(basename "$f" .log)"
        cat "$f"
    done >"$out/device_check.log"
}
trap device_check_logs EXIT

gc_start_references
gc_build
gc_tests
gc_test_d12
gc_benchmarks
if [[ "$gc_dist_flags" == *-DUSE_NCCL* ]]; then
    gc_step "distributed overhead (1-rank NCCL vs plain, d12 B=16)" 240 gc_check_tally env TRAINER=./train_gpt bash scripts/dist_overhead.sh
    gc_overhead_log=$gc_last_log
else
    gc_record FAIL "distributed overhead" 0 "not run: NCCL is missing (${gc_nccl_note:-no probe note}); train_gpt was built for one GPU"
fi
gc_sanitize
gc_summary | tee "$out/summary.txt"
status=${PIPESTATUS[0]}
exit "$status"
