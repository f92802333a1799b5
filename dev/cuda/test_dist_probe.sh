#!/usr/bin/env bash
# scripts/dist_probe.sh finds NCCL where the GPU machine may have it, and says where or why not:
#   - a CUDA toolkit without NCCL (played by this machine's nvcc behind a wrapper whose linker finds NCCL
#     only in the -L directories it is given: plain -lnccl with none of them holding libnccl.so fails, as
#     it does where no NCCL is installed, wherever this machine keeps its own) and NCCL only in a pip
#     wheel's layout, <site>/nvidia/nccl/{include/nccl.h, lib/libnccl.so.2} (no libnccl.so), reached
#     through PYTHONPATH: the probe names that header, links -l:libnccl.so.2 with a run path, and a program
#     built with its flags links, ldd resolves libnccl.so.2 in that directory, and it runs (ncclGetVersion
#     needs no GPU)
#   - NCCL_HOME with include/ and lib/libnccl.so: taken first
#   - no NCCL anywhere: the probe says so, exits 0, and gives no NCCL flags (a one-GPU build compiles)
#   - this machine's toolkit: plain -lnccl, the toolkit's nccl.h named
# Usage: test_dist_probe.sh NVCC MPICXX
set -u
nvcc=$1; mpicxx=$2
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! real_nvcc=$(command -v "$nvcc"); then bad "$nvcc not found: cannot check the NCCL probe"; test_end; exit 1; fi
top=$(cd "$(dirname "$real_nvcc")/.." && pwd -P)
printf '#include <nccl.h>\n' >"$tmp/header.cu"
real_header=$("$nvcc" -M "$tmp/header.cu" 2>/dev/null | tr ' \\' '\n\n' | grep -m 1 '/nccl\.h$')
real_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }')
[ -n "$real_lib" ] || real_lib=$(ls "$top"/lib*/libnccl.so.2 "$top"/targets/*/lib/libnccl.so.2 2>/dev/null | head -n 1)
if [ -z "$real_header" ] || [ -z "$real_lib" ]; then
    bad "this machine's toolkit has no NCCL to build the fake layouts from (nccl.h: '$real_header', libnccl.so.2: '$real_lib')"
    test_end; exit 1
fi

# the wrapper: nvcc whose linker searches no system directory for plain -lnccl
fake_nvcc=$tmp/nvcc
cat >"$fake_nvcc" <<EOF
#!/bin/sh
wants=0; given=0
for arg; do
    case \$arg in
    -lnccl) wants=1 ;;
    -L*) if [ -e "\${arg#-L}/libnccl.so" ]; then given=1; fi ;;
    esac
done
if [ \$wants = 1 ] && [ \$given = 0 ]; then
    echo "ld: cannot find -lnccl: No such file or directory (a toolkit without NCCL)" >&2; exit 1
fi
exec "$real_nvcc" "\$@"
EOF
chmod +x "$fake_nvcc"
# nothing but the given paths: no LIBRARY_PATH/CPATH, no NCCL_HOME
clean_env=(env -u LIBRARY_PATH -u CPATH -u C_INCLUDE_PATH -u CPLUS_INCLUDE_PATH -u NCCL_HOME -u PYTHONPATH -u LD_LIBRARY_PATH)
printf 'int main(void) { return 0; }\n' >"$tmp/plain.cu"
if "${clean_env[@]}" "$fake_nvcc" "$tmp/plain.cu" -o "$tmp/plain" -lcublas >"$tmp/log" 2>&1 &&
    ! "${clean_env[@]}" "$fake_nvcc" "$tmp/plain.cu" -o "$tmp/plain" -lnccl >>"$tmp/log" 2>&1; then
    ok "the wrapped nvcc builds and links cuBLAS, and plain -lnccl is not found"
else
    bad "the wrapped nvcc (cuBLAS links, plain -lnccl does not): $(head -c 300 "$tmp/log")"; test_end; exit 1
fi

# probe ENV...: runs the probe for flags and libs with the wrapped nvcc; sets flags, libs, note
probe() {
    "${clean_env[@]}" "$@" bash scripts/dist_probe.sh "$fake_nvcc" "$mpicxx" flags >"$tmp/flags" 2>"$tmp/note"
    local rc=$?
    "${clean_env[@]}" "$@" bash scripts/dist_probe.sh "$fake_nvcc" "$mpicxx" libs >"$tmp/libs" 2>/dev/null
    flags=$(cat "$tmp/flags"); libs=$(cat "$tmp/libs"); note=$(tr '\n' ' ' <"$tmp/note")
    return $rc
}
cat >"$tmp/version.cu" <<'EOF'
#include <nccl.h>
#include <stdio.h>
int main(void) { int v; if (ncclGetVersion(&v) != ncclSuccess) return 1; printf("%d %d\n", v, NCCL_VERSION_CODE); return 0; }
EOF
# check_build NAME DIR: a program built with the probe's flags links, resolves libnccl.so.2 in DIR/lib and runs
check_build() {
    local name=$1 dir=$2 resolved
    # shellcheck disable=SC2086
    if ! "${clean_env[@]}" "$fake_nvcc" $flags "$tmp/version.cu" -o "$tmp/version" $libs >"$tmp/log" 2>&1; then
        bad "$name: building with '$flags' '$libs': $(head -c 300 "$tmp/log")"; return
    fi
    resolved=$(env -u LD_LIBRARY_PATH ldd "$tmp/version" | awk '/libnccl\.so\.2/ { print $3 }')
    if [ "$resolved" = "$dir/lib/libnccl.so.2" ]; then ok "$name: ldd resolves libnccl.so.2 by the run path: $resolved"
    else bad "$name: ldd resolves libnccl.so.2 to '$resolved', expected $dir/lib/libnccl.so.2"; fi
    if env -u LD_LIBRARY_PATH "$tmp/version" >"$tmp/out" 2>&1 && awk '{ exit !($1 == $2 && $1 > 0) }' "$tmp/out"; then
        ok "$name: the program runs; ncclGetVersion = NCCL_VERSION_CODE = $(cut -d' ' -f1 "$tmp/out")"
    else bad "$name: running it: $(head -c 200 "$tmp/out")"; fi
}

# 1. NCCL only in a pip wheel's layout, found through $PYTHON's sys.path
site=$tmp/site-packages
mkdir -p "$site/nvidia/nccl/include" "$site/nvidia/nccl/lib"
cp "$real_header" "$site/nvidia/nccl/include/nccl.h"
ln -s "$(readlink -f "$real_lib")" "$site/nvidia/nccl/lib/libnccl.so.2"
wheel=$site/nvidia/nccl
probe PYTHON="$PYTHON" PYTHONPATH="$site"
if [[ " $flags " == *" -DUSE_NCCL -I$wheel/include "* ]] &&
    [[ " $libs " == *" -L$wheel/lib -l:libnccl.so.2 -Xlinker -rpath,$wheel/lib "* ]] &&
    [[ "$note" == *"NCCL: $wheel/include/nccl.h, $wheel/lib/libnccl.so.2"* ]]; then
    ok "pip layout: flags '$flags', libs '$libs'; stderr: $note"
else bad "pip layout: flags '$flags', libs '$libs', stderr '$note'"; fi
check_build "pip layout" "$wheel"

# 2. NCCL_HOME (libnccl.so present) wins over the pip layout
home=$tmp/nccl_home
mkdir -p "$home/include" "$home/lib"
cp "$real_header" "$home/include/nccl.h"
ln -s "$(readlink -f "$real_lib")" "$home/lib/libnccl.so.2"
ln -s libnccl.so.2 "$home/lib/libnccl.so"
probe PYTHON="$PYTHON" PYTHONPATH="$site" NCCL_HOME="$home"
if [[ " $libs " == *" -L$home/lib -lnccl -Xlinker -rpath,$home/lib "* ]] && [[ "$note" == *"NCCL: $home/include/nccl.h"*"NCCL_HOME"* ]]; then
    ok "NCCL_HOME first: libs '$libs'; stderr: $note"
else bad "NCCL_HOME: flags '$flags', libs '$libs', stderr '$note'"; fi
check_build "NCCL_HOME" "$home"

# 3. no NCCL anywhere
if probe PYTHON="$PYTHON" && [ -z "$flags" ] && [ -z "$libs" ] &&
    [[ "$note" == *"NCCL not found"*"toolkit"*"sys.path"*"built for one GPU"* ]]; then
    ok "no NCCL: exit 0, no flags, and it says why: $note"
else bad "no NCCL: flags '$flags', libs '$libs', stderr '$note'"; fi
# shellcheck disable=SC2086
if "${clean_env[@]}" "$fake_nvcc" $flags "$tmp/plain.cu" -o "$tmp/one_gpu" -lcublas $libs >"$tmp/log" 2>&1; then
    ok "no NCCL: a one-GPU program builds with the probe's (empty) flags"
else bad "no NCCL: one-GPU build: $(head -c 300 "$tmp/log")"; fi

# 4. this machine's toolkit as it is: plain -lnccl
bash scripts/dist_probe.sh "$nvcc" "$mpicxx" flags >"$tmp/flags" 2>"$tmp/note"
bash scripts/dist_probe.sh "$nvcc" "$mpicxx" libs >"$tmp/libs" 2>/dev/null
if grep -q -- '-DUSE_NCCL' "$tmp/flags" && grep -qE -- '(^| )-lnccl( |$)' "$tmp/libs" &&
    grep -qF "NCCL: $real_header" "$tmp/note"; then
    ok "the toolkit's NCCL: libs '$(cat "$tmp/libs")'; stderr: $(tr '\n' ' ' <"$tmp/note")"
else bad "the toolkit's NCCL: flags '$(cat "$tmp/flags")', libs '$(cat "$tmp/libs")', stderr '$(cat "$tmp/note")'"; fi
test_end
