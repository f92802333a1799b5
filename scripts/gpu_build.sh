#!/usr/bin/env bash
# Builds one CUDA program with nvcc, or says clearly what is missing.
# Usage: gpu_build.sh NVCC "FLAGS" SOURCE OUTPUT "LIBS"
# The libraries are found by trying to link (no package-manager queries). NVML is not needed (MFU uses a
# table of device peaks), so a machine with the toolkit but no driver library still builds.
set -u
nvcc=$1; flags=$2; src=$3; out=$4; libs=$5
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "error: $nvcc not found: install the CUDA toolkit (12.x or 13) or set NVCC=/path/to/nvcc" >&2
    exit 1
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int main(void) { return 0; }\n' >"$probe/p.cu"
for lib in $libs; do
    if ! "$nvcc" "$probe/p.cu" -o "$probe/p" "$lib" >"$probe/log" 2>&1; then
        echo "error: cannot link $lib with $nvcc: the CUDA toolkit's math libraries are missing ($(head -c 200 "$probe/log"))" >&2
        exit 1
    fi
done
echo "$nvcc $flags $src -o $out $libs"
# shellcheck disable=SC2086
exec "$nvcc" $flags "$src" -o "$out" $libs
