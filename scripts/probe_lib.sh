# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034 # the sourcing probe sets nvcc, python, probe and src, and reads found_*
# The search scripts/dist_probe.sh (NCCL) and scripts/cublas_probe.sh (cuBLAS) share, sourced by both: a
# library is found by compiling and linking a test program, first found wins, in
#   1. $HOME_DIR/include and $HOME_DIR/lib (or lib64), when the caller's HOME variable is set
#   2. the CUDA toolkit and the system's default paths (plain -l options)
#   3. each directory of $python's sys.path and site directories: nvidia/*/include/HEADER with ../lib, where
#      NVIDIA's pip wheels put it (lib holding only versioned names libX.so.N: linked as -l:libX.so.N)
# A directory outside the default paths goes into the binary's run path (-Xlinker -rpath,DIR/lib).
# Before sourcing, set nvcc, python, probe (a scratch directory) and src (the test program there).
#   probe_search HEADER "LIBS" HOME_NAME: LIBS the plain library names ("nccl", "cublasLt cublas"), HOME_NAME the
#       environment variable of step 1; on success returns 0 with found_flags (the -I options), found_libs (the
#       link options) and found_where ("HEADER PATH, LIBRARY PATH (where)"), else 1 with tried (why, per place)

tried=""
# probe_try WHERE HEADER FIRSTLIB [NVCC OPTIONS...]: compiles and links $src with the options
probe_try() {
    local where=$1 header_name=$2 first_lib=$3
    shift 3
    local cflags=() link_opts=() opt why header library
    for opt in "$@"; do case $opt in -I*) cflags+=("$opt") ;; *) link_opts+=("$opt") ;; esac; done
    if ! "$nvcc" "${cflags[@]}" "$src" -o "$probe/t" "${link_opts[@]}" >"$probe/log" 2>&1; then
        why=$(grep -m 1 -iE 'error|cannot|undefined' "$probe/log" || head -n 1 "$probe/log")
        tried="$tried; $where: $(echo "${why:-$nvcc failed with no output}" | head -c 120)"
        return 1
    fi
    header=$("$nvcc" "${cflags[@]}" -M "$src" 2>/dev/null | tr -s ' \\' '\n' | grep -m 1 "/${header_name//./\\.}\$")
    library=$(ldd "$probe/t" 2>/dev/null | awk -v lib="lib$first_lib." 'index($1, lib) == 1 { print $3 }')
    found_flags="${cflags[*]}"
    found_libs="${link_opts[*]}"
    found_where="$header, ${library:-lib$first_lib (not resolved by ldd)} ($where)"
}

# probe_dir_options DIR "LIBS": the options for the libraries installed under DIR (include/, lib/ or lib64/):
# -lX when every libX.so is there, else -l:libX.so.N for the first N every library has
probe_dir_options() {
    local dir=$1 lib name n major all opts
    # shellcheck disable=SC2206 # the library names are words
    local names=($2)
    for lib in "$dir/lib" "$dir/lib64"; do
        all=1 opts=""
        for n in "${names[@]}"; do [ -e "$lib/lib$n.so" ] || all=0; opts="$opts -l$n"; done
        if [ $all = 1 ]; then echo "-I$dir/include -L$lib$opts -Xlinker -rpath,$lib"; return; fi
        for name in "$lib/lib${names[0]}.so."*; do
            major=${name##*.so.}
            [[ $major =~ ^[0-9]+$ ]] || continue
            all=1 opts=""
            for n in "${names[@]}"; do [ -e "$lib/lib$n.so.$major" ] || all=0; opts="$opts -l:lib$n.so.$major"; done
            if [ $all = 1 ]; then echo "-I$dir/include -L$lib$opts -Xlinker -rpath,$lib"; return; fi
        done
    done
    opts=""
    for n in "${names[@]}"; do opts="$opts -l$n"; done
    echo "-I$dir/include -L$dir/lib$opts"
}

probe_python_dirs() {
    "$python" -c 'import site, sys
dirs = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages()]
print("\n".join(dict.fromkeys(dirs)))' 2>/dev/null
}

probe_search() {
    local header_name=$1 libs=$2 home_name=$3 dir header plain="" n
    local first=${libs%% *} home=${!home_name:-}
    for n in $libs; do plain="$plain -l$n"; done
    # shellcheck disable=SC2046,SC2086 # the options are words
    if [ -n "$home" ] && probe_try "$home_name=$home" "$header_name" "$first" $(probe_dir_options "$home" "$libs"); then return 0; fi
    # shellcheck disable=SC2086
    if probe_try "the CUDA toolkit and system paths" "$header_name" "$first" $plain; then return 0; fi
    if ! command -v "$python" >/dev/null 2>&1; then tried="$tried; no $python to list site-packages"; fi
    while read -r dir; do
        for header in "$dir"/nvidia/*/include/"$header_name"; do
            [ -f "$header" ] || continue
            # shellcheck disable=SC2046
            if probe_try "$python's $dir" "$header_name" "$first" $(probe_dir_options "${header%/include/"$header_name"}" "$libs"); then return 0; fi
        done
    done < <(probe_python_dirs)
    tried="$tried; no nvidia/*/include/$header_name under $python's sys.path"
    return 1
}
