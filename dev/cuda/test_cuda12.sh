#!/usr/bin/env bash
# The GPU sources against CUDA 12 (the trainer builds for CUDA 12.x and 13). NVIDIA's pip wheels carry
# CUDA 12's headers and libraries but no CUDA 12 nvcc, so this machine's nvcc (13) compiles every GPU
# program against the headers of CUDA 12.1's runtime, cuBLAS 12.1 and NCCL 2.18, with warnings as errors,
# and links the programs against those libraries: any use of an API that CUDA 12 lacks fails here
# (CUDA 12.1 is the oldest runtime whose headers nvcc 13's own device headers accept). Then ldd must
# resolve the CUDA 12 libraries, and the trainer must start with them (--help) and, with no driver on
# this machine, stop with an error naming the driver. Not covered: nvcc 12's own front end and ptxas. The compiles
# go through the front ends only (testlib.sh's nvcc_target front: PTX, no ptxas; the headers are what differs here,
# the kernels' SASS is test-nvcc-gpu's), so the fat train_gpt carries PTX for compute_80 and compute_90.
#   fetch DIR   downloads and unpacks the wheels into DIR (make cuda12-wheels; .ci/run does it first)
#   NVCC "FLAGS" DIR   the checks, FLAGS the other nvcc builds' (NVCC_TEST_FLAGS); without DIR/ready (no
#                      download, e.g. offline) nothing is counted
set -u
. "$(dirname "$0")/../testlib.sh"
wheels="nvidia-cuda-runtime-cu12==12.1.105 nvidia-cublas-cu12==12.1.3.1 nvidia-nccl-cu12==2.18.1"
if [ "${1:-}" = fetch ]; then
    dir=$2
    [ -f "$dir/ready" ] && exit 0
    rm -rf "$dir" && mkdir -p "$dir/wheels" || exit 1
    # shellcheck disable=SC2086
    "$PYTHON" -m pip download --no-deps -q -d "$dir/wheels" $wheels ||
        { echo "error: cannot download the CUDA 12 wheels ($wheels) with $PYTHON -m pip" >&2; exit 1; }
    for w in "$dir"/wheels/*.whl; do
        "$PYTHON" -m zipfile -e "$w" "$dir/root" || { echo "error: cannot unpack $w" >&2; exit 1; }
    done
    rm -rf "$dir/wheels"
    echo "$wheels" >"$dir/ready"
    exit 0
fi
nvcc=$1; read -r -a flags <<<"$2"; dir=$(cd "$3" 2>/dev/null && pwd)
test_begin
if [ -z "$dir" ] || [ ! -f "$dir/ready" ]; then
    echo "note: no CUDA 12 wheels in $3 (make cuda12-wheels downloads them): nothing checked"
    test_end; exit 0
fi
if ! command -v "$nvcc" >/dev/null 2>&1; then bad "$nvcc not found"; test_end; exit 1; fi
root=$dir/root/nvidia
# NCCL and MPI as the Makefile's nvcc rule finds them (scripts/dist_probe.sh), NCCL from the wheel
read -r -a dist_flags <<<"$(NCCL_HOME=$root/nccl bash scripts/dist_probe.sh "$nvcc" mpicxx flags 2>/dev/null)"
read -r -a dist_libs <<<"$(NCCL_HOME=$root/nccl bash scripts/dist_probe.sh "$nvcc" mpicxx libs 2>/dev/null)"
libs=(-cudart none -L"$root/cuda_runtime/lib" -l:libcudart.so.12 -L"$root/cublas/lib" -l:libcublasLt.so.12
      -l:libcublas.so.12 -Xlinker "-rpath,$root/cuda_runtime/lib:$root/cublas/lib")
flags+=(-I"$root/cuda_runtime/include" -I"$root/cublas/include")

# the headers the compiler sees are the wheels'
seen=$("$nvcc" "${flags[@]}" "${dist_flags[@]}" -M train_gpt.cu 2>&1 | tr -s ' \\' '\n')
version=$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' "$root/cuda_runtime/include/cuda_runtime_api.h")
if grep -qx "$root/cuda_runtime/include/cuda_runtime_api.h" <<<"$seen" && grep -qx "$root/cublas/include/cublasLt.h" <<<"$seen" &&
    grep -qx "$root/nccl/include/nccl.h" <<<"$seen" && [ "$version" = 12010 ]; then
    ok "train_gpt.cu includes CUDA 12.1's cuda_runtime_api.h (CUDART_VERSION $version), cuBLAS 12.1's cublasLt.h, NCCL 2.18's nccl.h"
else
    bad "the compile does not see the CUDA 12 headers (CUDART_VERSION '$version'): $(grep -E 'cuda_runtime_api|cublasLt|nccl' <<<"$seen" | tr '\n' ' ')"
fi

# build NAME SOURCE OUTPUT|-c ARCHS [NVCC OPTIONS...]: compiles (and with an OUTPUT, links) SOURCE
build() {
    local name=$1 src=$2 out=$3 archs=$4 gencode what=compiles
    shift 4
    # shellcheck disable=SC2086
    read -r -a gencode <<<"$(nvcc_target front $archs | tr '\n' ' ')"
    local cmd=("$nvcc" "${flags[@]}" "${gencode[@]}" "$@" -c "$src" -o "$tmp/$(basename "$src").o")
    if [ "$out" != -c ]; then cmd=("$nvcc" "${flags[@]}" "${gencode[@]}" "$@" "$src" -o "$out" "${libs[@]}"); what="builds and links"; fi
    names+=("$name|$src|$what for compute_${archs// /, compute_}")
    job_start "$name" "${cmd[@]}"
}
libs+=("${dist_libs[@]}")
names=()
build "train_gpt bf16 ($(grep -oE 'USE_[A-Z]+' <<<"${dist_flags[*]}" | paste -sd ' '))" train_gpt.cu "$tmp/train_gpt" "80 90" "${dist_flags[@]}"
build "train_gpt fp32" train_gpt.cu "$tmp/train_gpt_fp32" 90 -DPRECISION_FP32
build "test_gpt bf16" test_gpt.cu "$tmp/test_gpt" 80
build "sample_gpt bf16" sample_gpt.cu "$tmp/sample_gpt" 90
build "flash-attention test" dev/cuda/test_flash_attention.cu -c 90 -Xcompiler -fopenmp
build "flash-attention benchmark" dev/cuda/bench_flash_attention.cu -c 80
build "kernel benchmark" dev/cuda/bench_kernels.cu -c 90
for entry in "${names[@]}"; do
    IFS='|' read -r name src what <<<"$entry"
    if job_wait "$name"; then ok "$name: $src $what against CUDA 12, no warnings"
    else echo "$job_out" | head -20; bad "$name: $src against CUDA 12"; fi
done

if [ -x "$tmp/train_gpt" ]; then
    deps=$(ldd "$tmp/train_gpt" 2>&1)
    if ! grep -q 'not found' <<<"$deps" && grep -q "libcudart.so.12 => $root/cuda_runtime/lib/" <<<"$deps" &&
        grep -q "libcublasLt.so.12 => $root/cublas/lib/" <<<"$deps" && grep -q "libnccl.so.2 => $root/nccl/lib/" <<<"$deps"; then
        ok "ldd train_gpt: libcudart.so.12, libcublasLt.so.12 and libnccl.so.2 resolve to CUDA 12's, nothing missing"
    else
        bad "ldd train_gpt: $(grep -E 'cuda|cublas|nccl|not found' <<<"$deps" | tr -s ' \t\n' ' ')"
    fi
    if "$tmp/train_gpt" --help >"$tmp/help" 2>&1 && grep -q '^usage: train_gpt' "$tmp/help"; then
        ok "train_gpt --help runs with the CUDA 12 libraries loaded"
    else
        bad "train_gpt --help with the CUDA 12 libraries: $(head -c 300 "$tmp/help")"
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "note: this machine has an NVIDIA driver: the no-driver error is not checked"
    else
        expect_error "train_gpt with CUDA 12's runtime and no driver" 'driver' "$tmp/train_gpt" -e d6 -b 1 -t 64 --mock-data
    fi
fi
test_end
