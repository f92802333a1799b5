#!/usr/bin/env bash
# nvcc compiles the GPU trainer, its test and the kernel benchmark for sm_80 and sm_90, in bf16 and fp32,
# with warnings as errors, and links train_gpt against cuBLASLt. One check per (file, precision, arch).
# Usage: test_nvcc_gpu.sh NVCC "FLAGS"
set -u
nvcc=$1; flags=$2
pass=0; fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "error: $nvcc not found: cannot check that the GPU trainer compiles"
    echo "0 passed, 1 failed"; exit 1
fi
for src in train_gpt.cu test_gpt.cu dev/cuda/bench_kernels.cu; do
    for precision in bf16 fp32; do
        [ "$src" = dev/cuda/bench_kernels.cu ] && [ $precision = fp32 ] && continue
        define=""; [ $precision = fp32 ] && define=-DPRECISION_FP32
        for arch in sm_80 sm_90; do
            # shellcheck disable=SC2086
            if log=$("$nvcc" $flags $define -arch=$arch -c "$src" -o "$out/o.o" 2>&1); then
                echo "ok    nvcc -arch=$arch $precision $src (no warnings)"; pass=$((pass + 1))
            else
                echo "$log" | head -20; echo "FAIL  nvcc -arch=$arch $precision $src"; fail=$((fail + 1))
            fi
        done
    done
done
# the fat binary links (CUDA 12.x and 13 both: nothing version-specific is used)
# shellcheck disable=SC2086
if log=$("$nvcc" $flags -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 train_gpt.cu \
    -o "$out/train_gpt" -lcublasLt -lcublas 2>&1); then
    echo "ok    train_gpt links as a fat binary for sm_80 + sm_90 against cuBLASLt"; pass=$((pass + 1))
else
    echo "$log" | head -20; echo "FAIL  train_gpt fat binary link"; fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
