#!/usr/bin/env bash
# Which multi-GPU libraries the nvcc build of train_gpt can use, found by compiling and linking a test
# program (no package-manager queries). Usage: [PYTHON=python3] [NCCL_HOME=DIR] dist_probe.sh NVCC MPICXX flags|libs
#   flags: -DUSE_NCCL (and -I<dir>) if <nccl.h> compiles and NCCL links; -DUSE_MPI and MPI's include flags if
#          <mpi.h> (from `MPICXX --showme:compile`) compiles and links too
#   libs:  the matching NCCL and MPI link flags (as nvcc options)
# NCCL is looked for as scripts/probe_lib.sh says: $NCCL_HOME, the CUDA toolkit and system paths, then a pip wheel
# (nvidia/*/include/nccl.h under $PYTHON's sys.path, whose lib holds only libnccl.so.2), with a run path outside
# the default paths.
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
src=$probe/n.cu
printf '#include <nccl.h>\n#include <stdio.h>\nint main(void) { int v; if (ncclGetVersion(&v) != ncclSuccess) return 1; printf("%%d\\n", v); return 0; }\n' >"$src"
# shellcheck source=scripts/probe_lib.sh
. "$(dirname "$0")/probe_lib.sh"
found=0
probe_search nccl.h nccl NCCL_HOME && found=1
if [ $found = 0 ]; then
    note "NCCL not found (${tried#; }): train_gpt is built for one GPU"
    exit 0
fi
note "NCCL: $found_where"
flags="-DUSE_NCCL${found_flags:+ $found_flags}"
libs=$found_libs
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
