#!/usr/bin/env bash
# nvcc compiles the GPU trainer, its test and the kernel benchmark for sm_80 and sm_90, in bf16 and fp32,
# with warnings as errors, side by side (dev/testlib.sh's jobs); one check per (file, precision, arch). (The Makefile's
# own rule builds the fat binary in test-nvcc-dist.) The trainer is compiled to SASS; the test and the benchmark,
# whose kernels are the trainer's (test_gpt.cu includes train_gpt.cu), through the front ends only (nvcc_target
# front: PTX, no ptxas).
# The compiles print ptxas's resource report (-Xptxas -v); every kernel of the trainer must be free of
# register spills (local-memory traffic in the hot loops) on both architectures, except the head-dim-256
# flash-attention instantiations and those for head dims that are not multiples of 8 (ALIGNED false: element-by-element
# copies; correct, not tuned) and the head-dim-64 K/V backward with 32 keys a warp,
# whose 255 registers leave a few loop-invariant values in local memory (a dozen reloads a 64-query tile of
# 320 mma): allowed up to SMALL_SPILL_BYTES of spill stores + loads, so growth still fails.
# The trainer's builds keep their PTX (-keep), and dev/cuda/check_occupancy.py checks every kernel against the blocks
# an SM its __launch_bounds__ state (.maxntid, .minnctapersm): registers, threads and shared memory (ptxas's static
# bytes, and for kernels that state their blocks the dynamic bytes the host asks for, from the script's table) within
# an SM of sm_80 and of sm_90; one check per (arch, precision). A planted build (dev/cuda/occupancy_planted.cu, sm_90)
# shows that the check fails on each kind of excess.
# Usage: test_nvcc_gpu.sh NVCC "FLAGS"
set -u
nvcc=$1; flags=$2
. "$(dirname "$0")/../testlib.sh"
test_begin
if ! command -v "$nvcc" >/dev/null 2>&1; then
    bad "$nvcc not found: cannot check that the GPU trainer compiles"
    test_end; exit 1
fi
# check_spills LOG ARCH PRECISION: the kernels whose ptxas report shows spill stores or loads, less the allowed ones
SMALL_SPILL_BYTES=128
check_spills() {
    local spills allowed='flash_attention_[a-z_]*kernel<(256, [0-9]+, (true|false)|[0-9]+, [0-9]+, false)>' small='flash_attention_backward_kv_kernel<64, 2, true>'
    spills=$(echo "$1" | c++filt | awk -v small="$small" -v cap=$SMALL_SPILL_BYTES '
        /Function properties for/ { name = $0; sub(/.*Function properties for (void )?/, "", name); sub(/\(.*/, "", name) }
        /bytes spill stores/ && ($5 > 0 || $9 > 0) { print name (name == small && $5 + $9 <= cap ? " [small]" : "") " (" $5 "/" $9 " bytes)" }')
    local bad_ones kernels
    bad_ones=$(echo "$spills" | grep -v -E "^($allowed) " | grep -v -F ' [small] (' | grep -v '^$')
    kernels=$(echo "$1" | grep -c 'Function properties for')
    if [ -n "$bad_ones" ]; then
        bad "$2 $3 train_gpt.cu: register spills in $(echo "$bad_ones" | tr '\n' ';')"
    elif [ "$kernels" -gt 0 ]; then
        ok "$2 $3 train_gpt.cu: $kernels functions, no register spills outside the allowed list ($(echo "$spills" | grep -c .) on it spill)"
    else
        bad "$2 $3 train_gpt.cu: no ptxas resource report to check"
    fi
}
# check_occupancy LOG ARCH PRECISION: every kernel of the trainer fits the blocks an SM its launch bounds state
# (dev/cuda/check_occupancy.py on the ptxas report and the PTX the build kept)
check_occupancy() {
    local out
    if out=$(echo "$1" | "$PYTHON" dev/cuda/check_occupancy.py "$2" "$tmp/keep.$3.$2/train_gpt.ptx" 2>&1); then
        ok "sm_$2 $3 train_gpt.cu: occupancy: $out"
    else
        bad "sm_$2 $3 train_gpt.cu: occupancy: $(echo "$out" | tr '\n' ';')"
    fi
}
# check_occupancy_fails: the occupancy check names each kernel of dev/cuda/occupancy_planted.cu (sm_90), and its
# table's entries, which name no kernel of that build
check_occupancy_fails() {
    local report out rc pattern missing=""
    mkdir -p "$tmp/keep.planted"
    # shellcheck disable=SC2046
    if ! report=$("$nvcc" -Xptxas -v -keep -keep-dir "$tmp/keep.planted" $(nvcc_target full 90) -c dev/cuda/occupancy_planted.cu -o "$tmp/planted.o" 2>&1); then
        bad "occupancy check: dev/cuda/occupancy_planted.cu does not compile: $(echo "$report" | head -5)"
        return
    fi
    out=$(echo "$report" | "$PYTHON" dev/cuda/check_occupancy.py 90 "$tmp/keep.planted/occupancy_planted.ptx" 2>&1)
    rc=$?
    for pattern in 'planted_smem_kernel: shared memory \(49152 static \+ 0 dynamic \+ 1024 reserved\) x 5 blocks = 250880 > 233472$' \
        'planted_threads_kernel: 1024 threads x 3 blocks = 3072 threads > 2048$' \
        'planted_threads_kernel: registers [0-9]+ \([0-9]+ a warp\) x 1024 threads x 3 blocks = [0-9]+ > 65536$' \
        'planted_dynamic_kernel: 2 blocks an SM and dynamic shared memory, no entry in DYNAMIC_SMEM$' \
        "DYNAMIC_SMEM entry 'fused_classifier_kernel' names no kernel"; do
        echo "$out" | grep -qE "^$pattern" || missing="$missing [$pattern]"
    done
    if [ $rc -eq 1 ] && [ -z "$missing" ]; then
        ok "occupancy check fails dev/cuda/occupancy_planted.cu on sm_90: $(echo "$out" | grep -c .) problems, each planted one named"
    else
        bad "occupancy check on dev/cuda/occupancy_planted.cu: exit $rc, missing$missing: $(echo "$out" | tr '\n' ';')"
    fi
}
check_occupancy_fails
builds=()
for src in train_gpt.cu test_gpt.cu dev/cuda/bench_kernels.cu; do
    for precision in bf16 fp32; do
        [ "$src" = dev/cuda/bench_kernels.cu ] && [ $precision = fp32 ] && continue
        define=""; [ $precision = fp32 ] && define=-DPRECISION_FP32
        mode=front; [ "$src" = train_gpt.cu ] && mode=full
        for arch in 80 90; do
            builds+=("$src $precision $arch $mode")
            keep=() # the full build keeps its PTX (with the rest of nvcc's intermediate files) for check_occupancy
            [ $mode = full ] && keep=(-keep -keep-dir "$tmp/keep.$precision.$arch") && mkdir -p "$tmp/keep.$precision.$arch"
            # shellcheck disable=SC2086,SC2046
            job_start "$src.$precision.$arch" "$nvcc" $flags -Xptxas -v "${keep[@]}" $define $(nvcc_target $mode $arch) -c "$src" -o "$tmp/$(basename "$src").$precision.$arch.o"
        done
    done
done
for build in "${builds[@]}"; do
    read -r src precision arch mode <<<"$build"
    what=$(nvcc_target_name $mode "$arch")
    if job_wait "$src.$precision.$arch"; then
        ok "nvcc $what $precision $src (no warnings)"
        if [ $mode = full ]; then
            check_spills "$job_out" "sm_$arch" "$precision"
            check_occupancy "$job_out" "$arch" "$precision"
        fi
    else
        echo "$job_out" | head -20; bad "nvcc $what $precision $src"
    fi
done
test_end
