#!/usr/bin/env bash
# scripts/cublas_probe.sh finds cuBLAS where the GPU machine may have it, and says where or why not:
#   - this machine's toolkit: no -I, plain -lcublasLt -lcublas, the toolkit's cublasLt.h named
#   - CUBLAS_HOME with include/ and lib/libcublasLt.so: taken before the toolkit; a program built with its
#     options resolves the libraries there by the run path
#   - a toolkit without cuBLAS (played by this machine's nvcc behind a wrapper that fails a compile of a source
#     including cublasLt.h unless an -I directory holds cublasLt.h, and a link with -lcublasLt, -lcublas or
#     -l:libcublas*.so.N unless an -L directory holds that library) and cuBLAS only in a pip wheel's layout,
#     <site>/nvidia/cublas/{include/*.h, lib/libcublasLt.so.N, lib/libcublas.so.N}, reached through PYTHONPATH:
#     the probe names that header, links -l:libcublasLt.so.N -l:libcublas.so.N with a run path; a program built
#     with its options (directly, through scripts/gpu_build.sh, and in the Makefile's GPU_LDLIBS) links, ldd
#     resolves both libraries in that directory, and it runs (the version queries need no GPU)
#   - no cuBLAS anywhere: one error line saying where it looked, exit 1; make stops before compiling
# Usage: test_cublas_probe.sh NVCC
set -u
nvcc=$1
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! real_nvcc=$(command -v "$nvcc"); then bad "$nvcc not found: cannot check the cuBLAS probe"; test_end; exit 1; fi
printf '#include <cublasLt.h>\n' >"$tmp/header.cu"
real_header=$("$nvcc" -M "$tmp/header.cu" 2>/dev/null | tr ' \\' '\n\n' | grep -m 1 '/cublasLt\.h$')
top=$(cd "$(dirname "$real_nvcc")/.." && pwd -P)
real_lt=$(ls "$top"/lib*/libcublasLt.so.[0-9]* "$top"/targets/*/lib/libcublasLt.so.[0-9]* 2>/dev/null | head -n 1)
[ -n "$real_lt" ] || real_lt=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.[0-9]+ / { print $NF; exit }')
major=${real_lt##*/libcublasLt.so.}
major=${major%%.*}
real_blas=$(dirname "$real_lt")/libcublas.so.$major
if [ -z "$real_header" ] || [ ! -e "$real_lt" ] || [ ! -e "$real_blas" ]; then
    bad "this machine's toolkit has no cuBLAS to build the fake layouts from (cublasLt.h: '$real_header', libcublasLt: '$real_lt', libcublas: '$real_blas')"
    test_end; exit 1
fi

# 1. this machine's toolkit as it is
env -u CUBLAS_HOME bash scripts/cublas_probe.sh "$nvcc" flags >"$tmp/flags" 2>"$tmp/note"
env -u CUBLAS_HOME bash scripts/cublas_probe.sh "$nvcc" libs >"$tmp/libs" 2>/dev/null
if [ -z "$(cat "$tmp/flags")" ] && [ "$(cat "$tmp/libs")" = "-lcublasLt -lcublas" ] &&
    grep -qF "note: cuBLAS: $real_header" "$tmp/note" && grep -qF "(the CUDA toolkit and system paths)" "$tmp/note"; then
    ok "the toolkit's cuBLAS: libs '$(cat "$tmp/libs")'; stderr: $(tr '\n' ' ' <"$tmp/note")"
else bad "the toolkit's cuBLAS: flags '$(cat "$tmp/flags")', libs '$(cat "$tmp/libs")', stderr '$(cat "$tmp/note")'"; fi

# the wrapper: nvcc that finds cuBLAS's header and libraries only in the -I and -L directories it is given
fake_nvcc=$tmp/nvcc
cat >"$fake_nvcc" <<EOF
#!/bin/bash
includes=0; header=0; lib_dirs=()
for arg; do
    case \$arg in
    *.cu) if grep -q 'cublasLt\.h' "\$arg" 2>/dev/null; then includes=1; fi ;;
    -I*) if [ -e "\${arg#-I}/cublasLt.h" ]; then header=1; fi ;;
    -L*) lib_dirs+=("\${arg#-L}") ;;
    esac
done
if [ \$includes = 1 ] && [ \$header = 0 ]; then
    echo "fatal error: cublasLt.h: No such file or directory (a toolkit without cuBLAS)" >&2; exit 1
fi
for arg; do
    case \$arg in
    -lcublasLt | -lcublas) name=lib\${arg#-l}.so ;;
    -l:libcublas*) name=\${arg#-l:} ;;
    *) continue ;;
    esac
    found=0
    for dir in "\${lib_dirs[@]}"; do if [ -e "\$dir/\$name" ]; then found=1; fi; done
    if [ \$found = 0 ]; then echo "ld: cannot find \$arg: No such file or directory (a toolkit without cuBLAS)" >&2; exit 1; fi
done
exec "$real_nvcc" "\$@"
EOF
chmod +x "$fake_nvcc"
# nothing but the given paths: no LIBRARY_PATH/CPATH, no CUBLAS_HOME
clean_env=(env -u LIBRARY_PATH -u CPATH -u C_INCLUDE_PATH -u CPLUS_INCLUDE_PATH -u CUBLAS_HOME -u PYTHONPATH -u LD_LIBRARY_PATH)
printf 'int main(void) { return 0; }\n' >"$tmp/plain.cu"
if "${clean_env[@]}" "$fake_nvcc" "$tmp/plain.cu" -o "$tmp/plain" >"$tmp/log" 2>&1 &&
    ! "${clean_env[@]}" "$fake_nvcc" "$tmp/plain.cu" -o "$tmp/plain" -lcublasLt >>"$tmp/log" 2>&1 &&
    ! "${clean_env[@]}" "$fake_nvcc" "$tmp/plain.cu" -o "$tmp/plain" "-l:libcublasLt.so.$major" >>"$tmp/log" 2>&1 &&
    ! "${clean_env[@]}" "$fake_nvcc" -c "$tmp/header.cu" -o "$tmp/header.o" >>"$tmp/log" 2>&1; then
    ok "the wrapped nvcc builds a plain program; -lcublasLt, -l:libcublasLt.so.$major and <cublasLt.h> are not found"
else
    bad "the wrapped nvcc (a plain program builds, cuBLAS does not): $(head -c 300 "$tmp/log")"; test_end; exit 1
fi

# probe ENV...: runs the probe for flags and libs with the wrapped nvcc; sets flags, libs, note
probe() {
    "${clean_env[@]}" "$@" bash scripts/cublas_probe.sh "$fake_nvcc" flags >"$tmp/flags" 2>"$tmp/note"
    local rc=$?
    "${clean_env[@]}" "$@" bash scripts/cublas_probe.sh "$fake_nvcc" libs >"$tmp/libs" 2>/dev/null
    flags=$(cat "$tmp/flags"); libs=$(cat "$tmp/libs"); note=$(tr '\n' ' ' <"$tmp/note")
    return $rc
}
cat >"$tmp/version.cu" <<'EOF'
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdio.h>
int main(void) {
    int major = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) return 1;
    printf("%zu %d %d\n", cublasLtGetVersion(), CUBLAS_VERSION, major);
    return 0;
}
EOF
# check_build NAME NVCC DIR: a program built with the probe's flags and libs links, ldd resolves libcublasLt and
# libcublas in DIR/lib, and it runs (cublasLtGetVersion = CUBLAS_VERSION)
check_build() {
    local name=$1 compiler=$2 dir=$3 resolved lib
    # shellcheck disable=SC2086
    if ! "${clean_env[@]}" "$compiler" $flags "$tmp/version.cu" -o "$tmp/version" $libs >"$tmp/log" 2>&1; then
        bad "$name: building with '$flags' '$libs': $(head -c 300 "$tmp/log")"; return
    fi
    for lib in libcublasLt libcublas; do
        resolved=$(env -u LD_LIBRARY_PATH ldd "$tmp/version" | awk -v l="$lib" '$1 ~ "^" l "\\.so\\." { print $3 }')
        if [[ "$resolved" == "$dir/lib/$lib.so."* ]]; then ok "$name: ldd resolves $lib by the run path: $resolved"
        else bad "$name: ldd resolves $lib to '$resolved', expected $dir/lib/$lib.so.*"; fi
    done
    if env -u LD_LIBRARY_PATH "$tmp/version" >"$tmp/out" 2>&1 && awk '{ exit !($1 == $2 && $1 > 0 && $3 > 0) }' "$tmp/out"; then
        ok "$name: the program runs; cublasLtGetVersion = CUBLAS_VERSION = $(cut -d' ' -f1 "$tmp/out"), major $(cut -d' ' -f3 "$tmp/out")"
    else bad "$name: running it: $(head -c 200 "$tmp/out")"; fi
}

# 2. CUBLAS_HOME (libcublasLt.so present) wins over the toolkit
home=$tmp/cublas_home
mkdir -p "$home/include" "$home/lib"
for h in "$(dirname "$real_header")"/cublas*.h; do ln -s "$h" "$home/include/"; done
ln -s "$(readlink -f "$real_lt")" "$home/lib/libcublasLt.so.$major"
ln -s "$(readlink -f "$real_blas")" "$home/lib/libcublas.so.$major"
ln -s "libcublasLt.so.$major" "$home/lib/libcublasLt.so"
ln -s "libcublas.so.$major" "$home/lib/libcublas.so"
CUBLAS_HOME=$home bash scripts/cublas_probe.sh "$nvcc" flags >"$tmp/flags" 2>"$tmp/note"
CUBLAS_HOME=$home bash scripts/cublas_probe.sh "$nvcc" libs >"$tmp/libs" 2>/dev/null
flags=$(cat "$tmp/flags"); libs=$(cat "$tmp/libs"); note=$(tr '\n' ' ' <"$tmp/note")
if [ "$flags" = "-I$home/include" ] && [ "$libs" = "-L$home/lib -lcublasLt -lcublas -Xlinker -rpath,$home/lib" ] &&
    [[ "$note" == *"cuBLAS: $home/include/cublasLt.h, $home/lib/libcublasLt.so.$major (CUBLAS_HOME=$home)"* ]]; then
    ok "CUBLAS_HOME first: flags '$flags', libs '$libs'; stderr: $note"
else bad "CUBLAS_HOME: flags '$flags', libs '$libs', stderr '$note'"; fi
check_build "CUBLAS_HOME" "$nvcc" "$home"

# 3. cuBLAS only in a pip wheel's layout, found through $PYTHON's sys.path
site=$tmp/site-packages
wheel=$site/nvidia/cublas
mkdir -p "$wheel/include" "$wheel/lib"
for h in "$(dirname "$real_header")"/cublas*.h; do ln -s "$h" "$wheel/include/"; done
ln -s "$(readlink -f "$real_lt")" "$wheel/lib/libcublasLt.so.$major"
ln -s "$(readlink -f "$real_blas")" "$wheel/lib/libcublas.so.$major"
probe PYTHON="$PYTHON" PYTHONPATH="$site"
if [ "$flags" = "-I$wheel/include" ] &&
    [ "$libs" = "-L$wheel/lib -l:libcublasLt.so.$major -l:libcublas.so.$major -Xlinker -rpath,$wheel/lib" ] &&
    [[ "$note" == *"cuBLAS: $wheel/include/cublasLt.h, $wheel/lib/libcublasLt.so.$major ($PYTHON's $site)"* ]]; then
    ok "pip layout: flags '$flags', libs '$libs'; stderr: $note"
else bad "pip layout: flags '$flags', libs '$libs', stderr '$note'"; fi
check_build "pip layout" "$fake_nvcc" "$wheel"
# as the Makefile passes them: the probe's flags and libs after gpu_build.sh's --
# shellcheck disable=SC2086
if "${clean_env[@]}" bash scripts/gpu_build.sh "$fake_nvcc" "$tmp/version.cu" "$tmp/version_gb" -O2 -- $flags $libs >"$tmp/log" 2>&1 &&
    env -u LD_LIBRARY_PATH ldd "$tmp/version_gb" | grep -qF "$wheel/lib/libcublasLt.so.$major"; then
    ok "pip layout: scripts/gpu_build.sh builds with the probe's options after --, libcublasLt from the wheel"
else bad "pip layout: scripts/gpu_build.sh: $(tail -c 300 "$tmp/log")"; fi
"${clean_env[@]}" PYTHONPATH="$site" make -n -B build/gpu/preflight NVCC="$fake_nvcc" PYTHON="$PYTHON" \
    DIST_NVCC_FLAGS= DIST_LDLIBS= >"$tmp/make" 2>&1
if grep -q -- "-- -I$wheel/include -L$wheel/lib -l:libcublasLt.so.$major -l:libcublas.so.$major -Xlinker -rpath,$wheel/lib" "$tmp/make" &&
    grep -qF "note: cuBLAS: $wheel/include/cublasLt.h" "$tmp/make"; then
    ok "pip layout: the Makefile's GPU_LDLIBS carries the probe's options to build/gpu/preflight"
else bad "pip layout: make -n build/gpu/preflight: $(tail -c 400 "$tmp/make")"; fi

# 4. no cuBLAS anywhere
probe PYTHON="$PYTHON"
rc=$?
if [ $rc = 1 ] && [ -z "$flags" ] && [ -z "$libs" ] && [ "$(wc -l <"$tmp/note")" = 1 ] &&
    [[ "$note" == "error: cuBLAS not found for $fake_nvcc ("*"toolkit"*"cublasLt.h"*"sys.path"*"CUBLAS_HOME"* ]]; then
    ok "no cuBLAS: exit 1, no options, one line saying why: $note"
else bad "no cuBLAS: exit $rc, flags '$flags', libs '$libs', stderr '$note'"; fi
"${clean_env[@]}" make -n -B build/gpu/preflight NVCC="$fake_nvcc" PYTHON="$PYTHON" DIST_NVCC_FLAGS= DIST_LDLIBS= >"$tmp/make" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q '^error: cuBLAS not found' "$tmp/make" && ! grep -q 'gpu_build.sh' "$tmp/make"; then
    ok "no cuBLAS: make stops before building, after the probe's line: $(grep -m 1 '^error: cuBLAS' "$tmp/make" | head -c 100)..."
else bad "no cuBLAS: make -n build/gpu/preflight (exit $rc): $(tail -c 400 "$tmp/make")"; fi
test_end
