#!/usr/bin/env bash
# Which multi-GPU libraries the nvcc build of train_gpt can use, found by compiling and linking a test
# program (no package-manager queries). Usage: dist_probe.sh NVCC MPICXX flags|libs
#   flags: -DUSE_NCCL if <nccl.h> compiles and -lnccl links; -DUSE_MPI and MPI's include flags if <mpi.h>
#          (from `MPICXX --showme:compile`) compiles and links too
#   libs:  the matching -lnccl and MPI link flags (as nvcc options)
# What is missing is said on stderr: without NCCL the trainer runs on one GPU only; without MPI the NCCL
# id is shared by --dist-init file or tcp.
set -u
nvcc=$1; mpicxx=$2; mode=$3
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
command -v "$nvcc" >/dev/null 2>&1 || exit 0
printf '#include <nccl.h>\nint main(void) { int v; return ncclGetVersion(&v) != ncclSuccess; }\n' >"$probe/n.cu"
if ! "$nvcc" "$probe/n.cu" -o "$probe/n" -lnccl >"$probe/log" 2>&1; then
    echo "note: NCCL not found (nccl.h / -lnccl: $(head -c 160 "$probe/log" | tr '\n' ' ')): train_gpt is built for one GPU" >&2
    exit 0
fi
flags="-DUSE_NCCL"
libs="-lnccl"
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
        libs="$libs $mpi_libs"
    else
        echo "note: MPI does not build with $nvcc ($(head -c 160 "$probe/log" | tr '\n' ' ')): share the NCCL id with --dist-init file or tcp" >&2
    fi
else
    echo "note: $mpicxx not found: train_gpt is built without MPI (use --dist-init file or tcp)" >&2
fi
if [ "$mode" = flags ]; then echo "$flags"; else echo "$libs"; fi
