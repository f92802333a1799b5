#!/usr/bin/env bash
# The multi-GPU trainer against the real libraries (this machine has nvcc, nccl.h and Open MPI, no GPU):
# nvcc compiles train_gpt.cu with -DUSE_NCCL -DUSE_MPI against the real nccl.h and mpi.h, bf16 and fp32,
# for sm_90 with warnings as errors; and links the bf16 build with the flags scripts/dist_probe.sh finds
# (-lnccl, MPI), and the NCCL-only build (no MPI: file/tcp rendezvous). Usage: test_nvcc_dist.sh NVCC MPICXX "FLAGS"
set -u
nvcc=$1; mpicxx=$2; flags=$3
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1 || ! command -v "$mpicxx" >/dev/null 2>&1; then
    bad "$nvcc or $mpicxx not found: cannot check the multi-GPU build"; test_end; exit 1
fi
mpi_flags=$("$mpicxx" --showme:compile)
for precision in bf16 fp32; do
    define=""; [ $precision = fp32 ] && define=-DPRECISION_FP32
    # shellcheck disable=SC2086
    if log=$("$nvcc" $flags $define -DUSE_NCCL -DUSE_MPI $mpi_flags -arch=sm_90 -c train_gpt.cu -o "$tmp/o.o" 2>&1); then
        ok "nvcc -arch=sm_90 $precision -DUSE_NCCL -DUSE_MPI train_gpt.cu against the real nccl.h and mpi.h (no warnings)"
    else echo "$log" | head -20; bad "nvcc $precision -DUSE_NCCL -DUSE_MPI train_gpt.cu"; fi
done
dflags=$(bash scripts/dist_probe.sh "$nvcc" "$mpicxx" flags)
dlibs=$(bash scripts/dist_probe.sh "$nvcc" "$mpicxx" libs)
# shellcheck disable=SC2086
if [[ "$dflags" == *-DUSE_NCCL*-DUSE_MPI* ]] &&
    log=$("$nvcc" $flags -arch=sm_90 $dflags train_gpt.cu -o "$tmp/train_gpt" -lcublasLt -lcublas $dlibs 2>&1); then
    ok "train_gpt links with NCCL and MPI as the Makefile finds them: $dlibs"
else echo "$log" | head -20; bad "train_gpt with '$dflags' '$dlibs'"; fi
# shellcheck disable=SC2086
if log=$("$nvcc" $flags -arch=sm_90 -DUSE_NCCL train_gpt.cu -o "$tmp/train_gpt_nompi" -lcublasLt -lcublas -lnccl 2>&1); then
    ok "train_gpt links with NCCL and without MPI (file and tcp rendezvous only)"
else echo "$log" | head -20; bad "train_gpt without MPI"; fi
test_end
