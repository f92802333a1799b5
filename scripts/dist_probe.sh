#!/usr/bin/env bash
# Which multi-GPU libraries the nvcc build of train_gpt can use, found by compiling and linking a test
# program (no package-manager queries). Usage: [PYTHON=python3] [NCCL_HOME=DIR] dist_probe.sh NVCC MPICXX flags|libs
#   flags: -DUSE_NCCL (and -I<dir>) if <nccl.h> compiles and NCCL links; -DUSE_MPI and MPI's include flags if
#          <mpi.h> (from `MPICXX --showme:compile`) compiles and links too
#   libs:  the matching NCCL and MPI link flags (as nvcc options)
# NCCL is looked for, first found wins, in
#   1. $NCCL_HOME/include and $NCCL_HOME/lib (or lib64)
#   2. the CUDA toolkit and the system's default paths (plain -lnccl)
#   3. each directory of $PYTHON's sys.path and site directories: nvidia/*/include/nccl.h with ../lib, where
#      pip's nvidia-nccl-cu12/13 wheels put it (lib holds only libnccl.so.2: linked as -l:libnccl.so.2)
# A directory outside the default paths goes into the binary's run path (-Xlinker -rpath,DIR/lib).
# Stderr says which nccl.h and libnccl it found, or why none (then train_gpt is built for one GPU: both
# outputs are empty of NCCL); without MPI the NCCL id is shared by --dist-init file or tcp.
set -u
if [ $# -ne 3 ] || { [ "$3" != flags ] && [ "$3" != libs ]; }; then
    echo "usage: scripts/dist_probe.sh NVCC MPICXX flags|libs" >&2; exit 2
fi
nvcc=$1; mpicxx=$2; mode=$3
python=${PYTHON:-python3}
# notes once per build: the Makefile runs the probe for flags and again for libs
note() { if [ "$mode" = flags ]; then echo "note: $*" >&2; fi; }
if ! command -v "$nvcc" >/dev/null 2>&1; then note "$nvcc not found: no NCCL or MPI probe"; exit 0; fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <nccl.h>\n#include <stdio.h>\nint main(void) { int v; if (ncclGetVersion(&v) != ncclSuccess) return 1; printf("%%d\\n", v); return 0; }\n' >"$probe/n.cu"

# try_nccl WHERE [NVCC OPTIONS...]: compiles and links the test program; on success sets nccl_flags,
# nccl_libs and nccl_found (the header and library paths), else appends why to tried
tried=""
try_nccl() {
    local where=$1; shift
    local cflags=() link_opts=() opt
    for opt in "$@"; do case $opt in -I*) cflags+=("$opt") ;; *) link_opts+=("$opt") ;; esac; done
    if ! "$nvcc" "${cflags[@]}" "$probe/n.cu" -o "$probe/n" "${link_opts[@]}" >"$probe/log" 2>&1; then
        tried="$tried; $where: $(grep -m 1 -iE 'error|cannot|undefined' "$probe/log" | head -c 120)"
        return 1
    fi
    local header library
    header=$("$nvcc" "${cflags[@]}" -M "$probe/n.cu" 2>/dev/null | tr -s ' \\' '\n' | grep -m 1 '/nccl\.h$')
    library=$(ldd "$probe/n" 2>/dev/null | awk '/libnccl/ { print $3 }')
    nccl_flags="-DUSE_NCCL${cflags[*]:+ ${cflags[*]}}"
    nccl_libs="${link_opts[*]}"
    nccl_found="$header, ${library:-libnccl (not resolved by ldd)} ($where)"
}
# nccl_dir_options DIR: the options for an NCCL installed under DIR (include/, lib/ or lib64/)
nccl_dir_options() {
    local lib
    for lib in "$1/lib" "$1/lib64"; do
        if [ -e "$lib/libnccl.so" ]; then echo "-I$1/include -L$lib -lnccl -Xlinker -rpath,$lib"; return; fi
        if [ -e "$lib/libnccl.so.2" ]; then echo "-I$1/include -L$lib -l:libnccl.so.2 -Xlinker -rpath,$lib"; return; fi
    done
    echo "-I$1/include -L$1/lib -lnccl"
}
python_dirs() {
    "$python" -c 'import site, sys
dirs = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages()]
print("\n".join(dict.fromkeys(dirs)))' 2>/dev/null
}

found=0
# shellcheck disable=SC2046
if [ -n "${NCCL_HOME:-}" ] && try_nccl "NCCL_HOME=$NCCL_HOME" $(nccl_dir_options "$NCCL_HOME"); then found=1
elif try_nccl "the CUDA toolkit and system paths" -lnccl; then found=1
else
    if ! command -v "$python" >/dev/null 2>&1; then tried="$tried; no $python to list site-packages"; fi
    while read -r dir; do
        for header in "$dir"/nvidia/*/include/nccl.h; do
            [ -f "$header" ] || continue
            # shellcheck disable=SC2046
            if try_nccl "$python's $dir" $(nccl_dir_options "${header%/include/nccl.h}"); then found=1; break 2; fi
        done
    done < <(python_dirs)
    [ $found = 1 ] || tried="$tried; no nvidia/*/include/nccl.h under $python's sys.path"
fi
if [ $found = 0 ]; then
    note "NCCL not found (${tried#; }): train_gpt is built for one GPU"
    exit 0
fi
note "NCCL: $nccl_found"
flags=$nccl_flags
libs=$nccl_libs
if command -v "$mpicxx" >/dev/null 2>&1; then
    mpi_cflags=$("$mpicxx" --showme:compile 2>/dev/null)
    mpi_libs=""
    for t in $("$mpicxx" --showme:link 2>/dev/null); do
        case $t in
        -L* | -l*) mpi_libs="$mpi_libs $t" ;;
        -Wl,*) mpi_libs="$mpi_libs -Xlinker ${t#-Wl,}" ;;
        -pthread) mpi_libs="$mpi_libs -Xcompiler -pthread" ;;
        esac
    done
    printf '#include <mpi.h>\nint main(int c, char** v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n' >"$probe/m.cu"
    # shellcheck disable=SC2086
    if "$nvcc" $mpi_cflags "$probe/m.cu" -o "$probe/m" $mpi_libs >"$probe/log" 2>&1; then
        flags="$flags -DUSE_MPI $mpi_cflags"
        libs="$libs$mpi_libs"
    else
        note "MPI does not build with $nvcc ($(head -c 160 "$probe/log" | tr '\n' ' ')): share the NCCL id with --dist-init file or tcp"
    fi
else
    note "$mpicxx not found: train_gpt is built without MPI (use --dist-init file or tcp)"
fi
if [ "$mode" = flags ]; then echo "$flags"; else echo "$libs"; fi
