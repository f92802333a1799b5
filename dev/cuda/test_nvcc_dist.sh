#!/usr/bin/env bash
# The multi-GPU trainer against the real libraries (this machine has nvcc, nccl.h and Open MPI, no GPU), side by
# side (dev/testlib.sh's jobs): the Makefile's own rule (the one gpucheck uses: quoted defines, the NCCL/MPI probe
# scripts/dist_probe.sh, the run path) builds and links the default fat binary, bf16 for sm_80 + sm_90 with
# -DUSE_NCCL -DUSE_MPI, warnings as errors (CUDA 12.x and 13 both: nothing version-specific is used); nvcc compiles
# the fp32 build with them for sm_90; and the NCCL-only build (no MPI: file/tcp rendezvous) links. The last two
# differ from the fat build in host code and precision only: front ends only (testlib.sh's nvcc_target front; the
# fp32 kernels' SASS is test-nvcc-gpu's).
# Usage: test_nvcc_dist.sh NVCC MPICXX "FLAGS"
set -u
nvcc=$1; mpicxx=$2; flags=$3
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1 || ! command -v "$mpicxx" >/dev/null 2>&1; then
    bad "$nvcc or $mpicxx not found: cannot check the multi-GPU build"; test_end; exit 1
fi
job_start make make -s -W train_gpt.cu train_gpt NVCC="$nvcc" MPICXX="$mpicxx"
# shellcheck disable=SC2086
job_start fp32 "$nvcc" $flags -DPRECISION_FP32 -DUSE_NCCL -DUSE_MPI $("$mpicxx" --showme:compile) $(nvcc_target front 90) -c train_gpt.cu -o "$tmp/fp32.o"
# shellcheck disable=SC2086
job_start nompi "$nvcc" $flags $(nvcc_target front 90) -DUSE_NCCL train_gpt.cu -o "$tmp/train_gpt_nompi" -lcublasLt -lcublas -lnccl
dlibs=$(bash scripts/dist_probe.sh "$nvcc" "$mpicxx" libs)
if job_wait make && [ -x train_gpt ] && [[ "$job_out" == *-DUSE_NCCL*-DUSE_MPI* ]]; then
    ok "make train_gpt: the fat binary for sm_80 + sm_90 with -DUSE_NCCL -DUSE_MPI builds and links with $dlibs (no warnings)"
else
    echo "$job_out" | tail -20; bad "make train_gpt (the Makefile's nvcc rule) with NCCL and MPI"
fi
if job_wait fp32; then
    ok "nvcc compute_90 PTX fp32 -DUSE_NCCL -DUSE_MPI train_gpt.cu against the real nccl.h and mpi.h (no warnings)"
else echo "$job_out" | head -20; bad "nvcc fp32 -DUSE_NCCL -DUSE_MPI train_gpt.cu"; fi
if job_wait nompi; then
    ok "train_gpt links with NCCL and without MPI (file and tcp rendezvous only)"
else echo "$job_out" | head -20; bad "train_gpt without MPI"; fi
test_end
