#!/usr/bin/env bash
# gpucheck: on a machine with an NVIDIA GPU, in under 5 minutes:
#   1. builds train_gpt, test_gpt (bf16 and fp32), sample_gpt and the kernel benchmark for the GPU present (GPU_ARCH from nvidia-smi);
#   2. writes a d12 reference state with train_gpt.py on CUDA (B=4, T=64; needs PyTorch with CUDA) and runs
#      test_gpt (bf16 bounds) on it, and test_gpt on the small reference states in build/references (both precisions);
#      sample_gpt (KV cache) generates from a reference state's model;
#   3. the kernel benchmark and the flash-attention benchmark (make bench-flash-attention, vs a materialised baseline);
#   4. a 30-step d12 training benchmark at B=64, T=1024 on mock data, printing tokens/s and MFU. It runs with
#      --deterministic 0 (the flash-attention backward's faster atomic dQ mode): throughput, not bit-reproducibility.
# Ends with "N passed, M failed".
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
NVCC=${NVCC:-nvcc}
pass=0; fail=0
ok() { echo "ok    $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  $1"; fail=$((fail + 1)); }
step() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
if [ -z "$arch" ]; then echo "error: nvidia-smi found no GPU: gpucheck needs one"; echo "0 passed, 1 failed"; exit 1; fi
echo "gpucheck: GPU compute capability $arch"
step "build train_gpt, test_gpt (bf16), bench_kernels for sm_$arch" make -s NVCC="$NVCC" GPU_ARCH="$arch" train_gpt test_gpt sample_gpt build/gpu/bench_kernels
mkdir -p build/gpu
step "build test_gpt (fp32)" bash scripts/gpu_build.sh "$NVCC" "-O3 -std=c++17 -I. -DPRECISION_FP32 -gencode arch=compute_$arch,code=sm_$arch" \
    test_gpt.cu build/gpu/test_gpt_fp32 "-lcublasLt -lcublas"
make -s build/references/.stamp >/dev/null 2>&1 || true
for d in build/references/*/; do
    step "test_gpt bf16 $(basename "$d")" sh -c "./test_gpt $d | tail -n 3"
    step "test_gpt fp32 $(basename "$d")" sh -c "./build/gpu/test_gpt_fp32 $d | tail -n 3"
done
if "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    step "d12 reference state (train_gpt.py on CUDA)" "$PYTHON" train_gpt.py --reference-out build/gpu/ref_d12 --steps 3 --n-layer 12 \
        --n-head 12 --n-embd 768 --vocab-size 50257 --seq-len 64 --batch-size 4 --seed 12 --device cuda
    step "test_gpt bf16 on d12" sh -c "./test_gpt build/gpu/ref_d12 | tail -n 3"
else
    bad "d12 reference state: PyTorch with CUDA is not installed for $PYTHON"
fi
ref_model=$(ls build/references/*/model.bin | head -n 1)
step "sample_gpt: 200 tokens from $ref_model (past its max_seq_len)" sh -c "./sample_gpt -e $ref_model --ids -g 200 | wc -w | grep -qx 200"
step "kernel benchmark" ./build/gpu/bench_kernels
step "flash-attention benchmark" make -s NVCC="$NVCC" bench-flash-attention
step "d12 training benchmark, 30 steps at B=64 T=1024" sh -c \
    "./train_gpt -e d12 --mock-data -b 64 -t 1024 -x 30 -v 0 -s 0 -r 1 --deterministic 0 | grep -E '^(device|attention|parameters|recompute|step +(1|10|20|30)/)'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
