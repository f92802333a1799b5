#!/usr/bin/env bash
# nvcc compiles the GPU trainer, its test and the kernel benchmark for sm_80 and sm_90, in bf16 and fp32,
# with warnings as errors, and links train_gpt against cuBLASLt. One check per (file, precision, arch).
# Usage: test_nvcc_gpu.sh NVCC "FLAGS"
set -u
nvcc=$1; flags=$2
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1; then
    bad "$nvcc not found: cannot check that the GPU trainer compiles"
    test_end; exit 1
fi
for src in train_gpt.cu test_gpt.cu dev/cuda/bench_kernels.cu; do
    for precision in bf16 fp32; do
        [ "$src" = dev/cuda/bench_kernels.cu ] && [ $precision = fp32 ] && continue
        define=""; [ $precision = fp32 ] && define=-DPRECISION_FP32
        for arch in sm_80 sm_90; do
            # shellcheck disable=SC2086
            if log=$("$nvcc" $flags $define -arch=$arch -c "$src" -o "$tmp/o.o" 2>&1); then
                ok "nvcc -arch=$arch $precision $src (no warnings)"
            else
                echo "$log" | head -20; bad "nvcc -arch=$arch $precision $src"
            fi
        done
    done
done
# the fat binary links (CUDA 12.x and 13 both: nothing version-specific is used)
# shellcheck disable=SC2086
if log=$("$nvcc" $flags -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 train_gpt.cu \
    -o "$tmp/train_gpt" -lcublasLt -lcublas 2>&1); then
    ok "train_gpt links as a fat binary for sm_80 + sm_90 against cuBLASLt"
else
    echo "$log" | head -20; bad "train_gpt fat binary link"
fi
test_end
