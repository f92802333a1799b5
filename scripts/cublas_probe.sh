#!/usr/bin/env bash
# Where the nvcc builds of the GPU programs find cuBLAS and cuBLASLt, found by compiling and linking a test
# program (no package-manager queries, no GPU needed). Usage: [PYTHON=python3] [CUBLAS_HOME=DIR] cublas_probe.sh NVCC flags|libs
#   flags: -I<dir> of cublasLt.h and cublas_v2.h when they are not the toolkit's (else empty)
#   libs:  the matching link options (as nvcc options)
# cuBLAS is looked for, first found wins, in
#   1. $CUBLAS_HOME/include and $CUBLAS_HOME/lib (or lib64)
#   2. the CUDA toolkit and the system's default paths (plain -lcublasLt -lcublas)
#   3. each directory of $PYTHON's sys.path and site directories: nvidia/*/include/cublasLt.h with ../lib, where
#      pip's nvidia-cublas-cu12/13 wheels put it (lib holds only libcublasLt.so.N and libcublas.so.N: linked as
#      -l:libcublasLt.so.N -l:libcublas.so.N)
# A directory outside the default paths goes into the binary's run path (-Xlinker -rpath,DIR/lib).
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
cat >"$probe/b.cu" <<'EOF'
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

# try_cublas WHERE [NVCC OPTIONS...]: compiles and links the test program; on success sets cublas_flags,
# cublas_libs and cublas_found (the header and library paths), else appends why to tried
tried=""
try_cublas() {
    local where=$1; shift
    local cflags=() link_opts=() opt
    for opt in "$@"; do case $opt in -I*) cflags+=("$opt") ;; *) link_opts+=("$opt") ;; esac; done
    if ! "$nvcc" "${cflags[@]}" "$probe/b.cu" -o "$probe/b" "${link_opts[@]}" >"$probe/log" 2>&1; then
        local why
        why=$(grep -m 1 -iE 'error|cannot|undefined' "$probe/log" || head -n 1 "$probe/log")
        tried="$tried; $where: $(echo "${why:-$nvcc failed with no output}" | head -c 120)"
        return 1
    fi
    local header library
    header=$("$nvcc" "${cflags[@]}" -M "$probe/b.cu" 2>/dev/null | tr -s ' \\' '\n' | grep -m 1 '/cublasLt\.h$')
    library=$(ldd "$probe/b" 2>/dev/null | awk '/libcublasLt/ { print $3 }')
    cublas_flags="${cflags[*]}"
    cublas_libs="${link_opts[*]}"
    cublas_found="$header, ${library:-libcublasLt (not resolved by ldd)} ($where)"
}
# cublas_dir_options DIR: the options for a cuBLAS installed under DIR (include/, lib/ or lib64/)
cublas_dir_options() {
    local lib name major
    for lib in "$1/lib" "$1/lib64"; do
        if [ -e "$lib/libcublasLt.so" ] && [ -e "$lib/libcublas.so" ]; then
            echo "-I$1/include -L$lib -lcublasLt -lcublas -Xlinker -rpath,$lib"; return
        fi
        for name in "$lib"/libcublasLt.so.*; do
            major=${name##*/libcublasLt.so.}
            if [[ $major =~ ^[0-9]+$ ]] && [ -e "$lib/libcublas.so.$major" ]; then
                echo "-I$1/include -L$lib -l:libcublasLt.so.$major -l:libcublas.so.$major -Xlinker -rpath,$lib"; return
            fi
        done
    done
    echo "-I$1/include -L$1/lib -lcublasLt -lcublas"
}
python_dirs() {
    "$python" -c 'import site, sys
dirs = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages()]
print("\n".join(dict.fromkeys(dirs)))' 2>/dev/null
}

found=0
# shellcheck disable=SC2046
if [ -n "${CUBLAS_HOME:-}" ] && try_cublas "CUBLAS_HOME=$CUBLAS_HOME" $(cublas_dir_options "$CUBLAS_HOME"); then found=1
elif try_cublas "the CUDA toolkit and system paths" -lcublasLt -lcublas; then found=1
else
    if ! command -v "$python" >/dev/null 2>&1; then tried="$tried; no $python to list site-packages"; fi
    while read -r dir; do
        for header in "$dir"/nvidia/*/include/cublasLt.h; do
            [ -f "$header" ] || continue
            # shellcheck disable=SC2046
            if try_cublas "$python's $dir" $(cublas_dir_options "${header%/include/cublasLt.h}"); then found=1; break 2; fi
        done
    done < <(python_dirs)
    [ $found = 1 ] || tried="$tried; no nvidia/*/include/cublasLt.h under $python's sys.path"
fi
if [ $found = 0 ]; then
    echo "error: cuBLAS not found for $nvcc (${tried#; }): install the toolkit's cuBLAS, pip install nvidia-cublas-cu13 (or -cu12) or set CUBLAS_HOME" >&2
    exit 1
fi
if [ "$mode" = flags ]; then
    echo "note: cuBLAS: $cublas_found" >&2
    echo "$cublas_flags"
else
    echo "$cublas_libs"
fi
