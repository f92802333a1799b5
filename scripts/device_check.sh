#!/usr/bin/env bash
# device_check: every GPU check of the project in one command, for a short session on a GPU machine (make
# device-check, or bash scripts/device_check.sh; about 5-6 minutes on an H100 with 16 cores), in order of value:
#   1. preflight (seconds): nvidia-smi, the NCCL/MPI probe, a small cuBLASLt (+ NCCL) program built and run;
#   2. compute-sanitizer memcheck on a small test_gpt (built first; the other binaries build meanwhile);
#   3. test_gpt bf16 and fp32 on every reference state (d12 too), sample_gpt;
#   4. d12 B=64 T=1024 training in the default mode (--deterministic 1) and the atomic one, each with --profile;
#   5. the baselines of this card (dev/cuda/bench_torch.py: PyTorch's matmul, copy and attention), the
#      flash-attention and kernel benchmarks;
#   6. the 1-rank NCCL overhead (scripts/dist_overhead.sh), compute-sanitizer initcheck and racecheck.
# Each step runs under `timeout`, capped by what is left of DEVICE_CHECK_BUDGET seconds (default 360); a step
# the budget cuts or leaves out is SKIP, not FAIL, and the exit status counts only failures. After every step
# the summary so far is in $OUT/summary.txt and each step's log in $OUT/steps/ (OUT defaults to
# build/device_check), so a kill loses at most the running step. The summary ends with markdown tables for
# doc/gpu_notes.md and "N passed, M failed, K skipped".
# Environment: as gpucheck.sh (NVCC, PYTHON, MPICXX, GPUCHECK_SIM=1: the simulator's builds, for tests); OUT;
# DEVICE_CHECK_BUDGET.
set -u
# shellcheck source=scripts/gpucheck.sh
. "$(dirname "$0")/gpucheck.sh"
out=${OUT:-build/device_check}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
rm -rf "$out/steps" "$out/summary.txt"
export GPUCHECK_DIR=$out/steps GPUCHECK_BUDGET=${DEVICE_CHECK_BUDGET:-360}

# shellcheck disable=SC2317 # the functions below are called through gc_on_record and gc_step
# dc_write_summary: the summary so far into $out/summary.txt (replaced whole: a reader never sees half of one)
dc_write_summary() {
    gc_summary >"$out/summary.txt.$BASHPID" 2>&1
    mv -f "$out/summary.txt.$BASHPID" "$out/summary.txt"
}
# checks of the preflight's and PyTorch's logs (gc_step's CHECK: print a note, fail on a wrong log)
dc_check_preflight() { sed -n 's/^\(gpu\|cublaslt\|nccl\): //p' "$1" | tr '\n' ';' | cut -c 1-140; grep -q '^preflight ok$' "$1"; }
dc_check_torch() { grep -m 1 '^torch ' "$1"; grep -q '^benchmark done$' "$1"; }
gc_on_record=dc_write_summary
gc_init

# 1. preflight; the reference states and the binaries start building meanwhile
if [ -n "$gc_arch" ]; then gc_record ok "preflight: nvidia-smi" 0 "$gc_gpu, sm_$gc_arch"
else gc_record FAIL "preflight: nvidia-smi" 0 "no GPU seen: building for sm_90 anyway, every run will fail"; fi
gc_start_references
[ "$gc_sim" = 1 ] || gc_probe
# background builds write no summary (gc_on_record empty there): the main shell's next record does
gc_on_record="" gc_build "$gc_bin_test" &
build_test_pid=$!
gc_on_record="" gc_build "$gc_bin_train" "$gc_bin_test_fp32" "$gc_bin_sample" "$gc_bin_kernels" "$gc_bin_flash" &
build_rest_pid=$!
gc_build "$gc_bin_preflight"
gc_step "preflight: cuBLASLt$([[ "$gc_dist_flags" == *-DUSE_NCCL* ]] && echo ' + NCCL') on the GPU" 30 dc_check_preflight "$gc_bin_preflight"
gc_preflight_log=$gc_last_log

# 2. memcheck as soon as test_gpt and the small reference states are there; the rest builds meanwhile
wait "$build_test_pid" "$gc_ref_small_pid"
gc_sanitize memcheck

# 3. the tests
wait "$build_rest_pid"
gc_tests
gc_test_d12

# 4. training, both modes of the attention's backward
gc_train 1
gc_train 0

# 5. baselines and benchmarks
if [ "$gc_sim" = 1 ]; then torch_args=(--device cpu --small); else torch_args=(); fi
gc_step "PyTorch baselines (matmul, copy, attention)" 90 dc_check_torch "$PYTHON" dev/cuda/bench_torch.py "${torch_args[@]}"
gc_torch_log=$gc_last_log
gc_benchmarks

# 6. the rest
if [ "$gc_sim" = 1 ]; then
    gc_record SKIP "distributed overhead" 0 "not run in the simulator (its single-GPU trainer has no NCCL)"
elif [[ "$gc_dist_flags" == *-DUSE_NCCL* ]]; then
    gc_step "distributed overhead (1-rank NCCL vs plain, d12 B=16)" 240 gc_check_tally env TRAINER="$gc_bin_train" bash scripts/dist_overhead.sh
    gc_overhead_log=$gc_last_log
else
    gc_missing "distributed overhead" "not run: NCCL is missing (${gc_nccl_note:-no probe note}); train_gpt was built for one GPU"
fi
gc_sanitize initcheck racecheck

gc_on_record=""
gc_summary | tee "$out/summary.txt"
exit "${PIPESTATUS[0]}"
