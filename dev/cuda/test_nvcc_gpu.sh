#!/usr/bin/env bash
# nvcc compiles the GPU trainer, its test and the kernel benchmark for sm_80 and sm_90, in bf16 and fp32,
# with warnings as errors, side by side (dev/testlib.sh's jobs); one check per (file, precision, arch). (The Makefile's
# own rule builds the fat binary in test-nvcc-dist.) The trainer is compiled to SASS; the test and the benchmark,
# whose kernels are the trainer's (test_gpt.cu includes train_gpt.cu), through the front ends only (nvcc_target
# front: PTX, no ptxas).
# The compiles print ptxas's resource report (-Xptxas -v); every kernel of the trainer must be free of
# register spills (local-memory traffic in the hot loops) on both architectures, except the head-dim-256
# flash-attention instantiations and those for head dims that are not multiples of 8 (ALIGNED false: element-by-element
# copies; correct, not tuned) and the head-dim-64 K/V backward with 32 keys a warp,
# whose 255 registers leave a few loop-invariant values in local memory (a dozen reloads a 64-query tile of
# 320 mma): allowed up to SMALL_SPILL_BYTES of spill stores + loads, so growth still fails.
# Usage: test_nvcc_gpu.sh NVCC "FLAGS"
set -u
nvcc=$1; flags=$2
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1; then
    bad "$nvcc not found: cannot check that the GPU trainer compiles"
    test_end; exit 1
fi
# check_spills LOG ARCH PRECISION: the kernels whose ptxas report shows spill stores or loads, less the allowed ones
SMALL_SPILL_BYTES=128
check_spills() {
    local spills allowed='flash_attention_[a-z_]*kernel<(256, [0-9]+, (true|false)|[0-9]+, [0-9]+, false)>' small='flash_attention_backward_kv_kernel<64, 2, true>'
    spills=$(echo "$1" | c++filt | awk -v small="$small" -v cap=$SMALL_SPILL_BYTES '
        /Function properties for/ { name = $0; sub(/.*Function properties for (void )?/, "", name); sub(/\(.*/, "", name) }
        /bytes spill stores/ && ($5 > 0 || $9 > 0) { print name (name == small && $5 + $9 <= cap ? " [small]" : "") " (" $5 "/" $9 " bytes)" }')
    local bad_ones kernels
    bad_ones=$(echo "$spills" | grep -v -E "^($allowed) " | grep -v -F ' [small] (' | grep -v '^$')
    kernels=$(echo "$1" | grep -c 'Function properties for')
    if [ -n "$bad_ones" ]; then
        bad "$2 $3 train_gpt.cu: register spills in $(echo "$bad_ones" | tr '\n' ';')"
    elif [ "$kernels" -gt 0 ]; then
        ok "$2 $3 train_gpt.cu: $kernels functions, no register spills outside the allowed list ($(echo "$spills" | grep -c .) on it spill)"
    else
        bad "$2 $3 train_gpt.cu: no ptxas resource report to check"
    fi
}
builds=()
for src in train_gpt.cu test_gpt.cu dev/cuda/bench_kernels.cu; do
    for precision in bf16 fp32; do
        [ "$src" = dev/cuda/bench_kernels.cu ] && [ $precision = fp32 ] && continue
        define=""; [ $precision = fp32 ] && define=-DPRECISION_FP32
        mode=front; [ "$src" = train_gpt.cu ] && mode=full
        for arch in 80 90; do
            builds+=("$src $precision $arch $mode")
            # shellcheck disable=SC2086
            job_start "$src.$precision.$arch" "$nvcc" $flags -Xptxas -v $define $(nvcc_target $mode $arch) -c "$src" -o "$tmp/$(basename "$src").$precision.$arch.o"
        done
    done
done
for build in "${builds[@]}"; do
    read -r src precision arch mode <<<"$build"
    what=$(nvcc_target_name $mode "$arch")
    if job_wait "$src.$precision.$arch"; then
        ok "nvcc $what $precision $src (no warnings)"
        [ $mode = full ] && check_spills "$job_out" "sm_$arch" "$precision"
    else
        echo "$job_out" | head -20; bad "nvcc $what $precision $src"
    fi
done
test_end
