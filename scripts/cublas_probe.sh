#!/usr/bin/env bash
# Where the nvcc builds of the GPU programs find cuBLAS and cuBLASLt, found by compiling and linking a test
# program (no package-manager queries, no GPU needed). Usage: [PYTHON=python3] [CUBLAS_HOME=DIR] cublas_probe.sh NVCC flags|libs
#   flags: -I<dir> of cublasLt.h and cublas_v2.h when they are not the toolkit's (else empty)
#   libs:  the matching link options (as nvcc options)
# cuBLAS is looked for as scripts/probe_lib.sh says: $CUBLAS_HOME, the CUDA toolkit and system paths, then a pip
# wheel (nvidia/*/include/cublasLt.h under $PYTHON's sys.path, whose lib holds only libcublasLt.so.N and
# libcublas.so.N), with a run path outside the default paths.
# Stderr says which cublasLt.h and libcublasLt it found (flags only: the Makefile runs the probe for flags and
# again for libs), or, in both modes, why none in one line; then the exit status is 1 (no GPU program builds
# without cuBLAS).
set -u
if [ $# -ne 2 ] || { [ "$2" != flags ] && [ "$2" != libs ]; }; then
    echo "usage: scripts/cublas_probe.sh NVCC flags|libs" >&2; exit 2
fi
nvcc=$1; mode=$2
python=${PYTHON:-python3}
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "error: $nvcc not found: install the CUDA toolkit (12.x or 13) or set NVCC=/path/to/nvcc" >&2; exit 1
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
src=$probe/b.cu
cat >"$src" <<'EOF'
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdio.h>
int main(void) {
    int major = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) return 1;
    printf("%zu %d\n", cublasLtGetVersion(), major);
    return 0;
}
EOF
# shellcheck source=scripts/probe_lib.sh
. "$(dirname "$0")/probe_lib.sh"
found=0
probe_search cublasLt.h "cublasLt cublas" CUBLAS_HOME && found=1
if [ $found = 0 ]; then
    echo "error: cuBLAS not found for $nvcc (${tried#; }): install the toolkit's cuBLAS, pip install nvidia-cublas-cu13 (or -cu12) or set CUBLAS_HOME" >&2
    exit 1
fi
if [ "$mode" = flags ]; then
    echo "note: cuBLAS: $found_where" >&2
    echo "$found_flags"
else
    echo "$found_libs"
fi
