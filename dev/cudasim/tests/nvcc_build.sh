#!/usr/bin/env bash
# Compiles each given .cu with nvcc for sm_80 and sm_90, warnings as errors; one check per (file, arch).
# The compiles run side by side (dev/testlib.sh's jobs). Usage: nvcc_build.sh NVCC "FLAGS" file.cu...
set -u
nvcc=$1; flags=$2; shift 2
. "$(dirname "$0")/../../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1; then
    bad "$nvcc not found: cannot check that the kernels compile for the GPU"
    test_end; exit 1
fi
files=("$@")
for f in "${files[@]}"; do
    for arch in sm_80 sm_90; do
        # shellcheck disable=SC2086
        job_start "$f.$arch" "$nvcc" $flags -arch=$arch -c "$f" -o "$tmp/$(basename "$f").$arch.o"
    done
done
for f in "${files[@]}"; do
    for arch in sm_80 sm_90; do
        if job_wait "$f.$arch"; then ok "nvcc -arch=$arch $f (no warnings)"
        else echo "$job_out"; bad "nvcc -arch=$arch $f"; fi
    done
done
test_end
