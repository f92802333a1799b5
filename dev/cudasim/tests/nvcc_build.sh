#!/usr/bin/env bash
# Compiles each given .cu with nvcc for sm_80 and sm_90, warnings as errors; one check per (file, arch).
# Usage: nvcc_build.sh NVCC "FLAGS" file.cu...
set -u
nvcc=$1; flags=$2; shift 2
passed=0; failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "error: $nvcc not found: cannot check that the kernels compile for the GPU"
    echo "0 passed, 1 failed"; exit 1
fi
for f in "$@"; do
    for arch in sm_80 sm_90; do
        # shellcheck disable=SC2086
        if log=$("$nvcc" $flags -arch=$arch -c "$f" -o "$out/$(basename "$f").$arch.o" 2>&1); then
            echo "ok    nvcc -arch=$arch $f (no warnings)"; passed=$((passed + 1))
        else
            echo "$log"; echo "FAIL  nvcc -arch=$arch $f"; failed=$((failed + 1))
        fi
    done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
