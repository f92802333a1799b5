#!/usr/bin/env bash
# Builds one CUDA program with nvcc, or says clearly what is missing.
# Usage: gpu_build.sh NVCC SOURCE OUTPUT [NVCC FLAGS...] -- [LIBRARIES...]
# Flags and libraries are separate words (the Makefile's shell has already parsed their quoting, so a
# define like -DGIT_REVISION='"abc"' arrives as one word). The libraries may hold include options too
# (cuBLAS's -I from scripts/cublas_probe.sh): one nvcc command compiles and links, so they reach the
# compile. Before compiling, one trivial program is linked with the libraries (no package-manager
# queries), so a missing library is named in one line instead of after a long compile. The toolkit's
# own library directory (from `nvcc -dryrun`) goes into the binary's run path, so cuBLAS is found at run
# time on machines whose loader does not know the toolkit (pip-installed CUDA); after linking, ldd must
# resolve every library. NVML is not needed (MFU uses a table of device peaks), so a machine with the
# toolkit but no driver library still builds.
set -u
if [ $# -lt 3 ]; then echo "usage: gpu_build.sh NVCC SOURCE OUTPUT [FLAGS...] -- [LIBRARIES...]" >&2; exit 2; fi
nvcc=$1; src=$2; out=$3; shift 3
flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
[ $# -gt 0 ] && shift
libs=("$@")
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "error: $nvcc not found: install the CUDA toolkit (12.x or 13) or set NVCC=/path/to/nvcc" >&2
    exit 1
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int main(void) { return 0; }\n' >"$probe/p.cu"
for dir in $("$nvcc" -dryrun "$probe/p.cu" -o "$probe/p" 2>&1 | sed -n 's/^#\$ LIBRARIES=//p' | tr -d '"'); do
    case $dir in
    -L*/stubs) ;;
    -L*) [ -d "${dir#-L}" ] && libs+=(-Xlinker "-rpath,$(cd "${dir#-L}" && pwd)") ;;
    esac
done
if ! "$nvcc" "$probe/p.cu" -o "$probe/p" "${libs[@]}" >"$probe/log" 2>&1; then
    echo "error: cannot link ${libs[*]} with $nvcc: $(head -c 300 "$probe/log" | tr '\n' ' ')" >&2
    exit 1
fi
echo "$nvcc ${flags[*]} $src -o $out ${libs[*]}"
"$nvcc" "${flags[@]}" "$src" -o "$out" "${libs[@]}" || exit 1
if command -v ldd >/dev/null 2>&1 && missing=$(ldd "$out" 2>&1 | grep 'not found'); then
    echo "error: $out: the loader cannot find: $(echo "$missing" | tr -s ' \t\n' ' ')(set LD_LIBRARY_PATH)" >&2
    rm -f "$out"
    exit 1
fi
