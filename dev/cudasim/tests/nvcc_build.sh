#!/usr/bin/env bash
# Compiles each given .cu with nvcc for sm_80 and sm_90, warnings as errors; one check per (file, arch).
# The compiles run side by side (dev/testlib.sh's jobs). Usage: nvcc_build.sh NVCC "FLAGS" [MODE:]file.cu...
# MODE (dev/testlib.sh's nvcc_target) full, the default: to SASS; front: the front ends only (PTX, no ptxas), for
# a file whose kernels another full build compiles.
set -u
nvcc=$1; flags=$2; shift 2
. "$(dirname "$0")/../../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1; then
    bad "$nvcc not found: cannot check that the kernels compile for the GPU"
    test_end; exit 1
fi
builds=()
for entry in "$@"; do
    mode=full; f=$entry
    case $entry in full:* | front:*) mode=${entry%%:*}; f=${entry#*:} ;; esac
    for arch in 80 90; do
        builds+=("$mode $arch $f")
        # shellcheck disable=SC2086
        job_start "$f.$arch" "$nvcc" $flags $(nvcc_target $mode $arch) -c "$f" -o "$tmp/$(basename "$f").$arch.o"
    done
done
for build in "${builds[@]}"; do
    read -r mode arch f <<<"$build"
    what=$(nvcc_target_name $mode "$arch")
    if job_wait "$f.$arch"; then ok "nvcc $what $f (no warnings)"
    else echo "$job_out"; bad "nvcc $what $f"; fi
done
test_end
