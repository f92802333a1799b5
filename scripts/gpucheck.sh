#!/usr/bin/env bash
# gpucheck: on a machine with an NVIDIA GPU, in a few minutes (make gpucheck):
#   1. builds, in one parallel make for the GPU present (GPU_ARCH from nvidia-smi): train_gpt (with NCCL and MPI
#      where scripts/dist_probe.sh finds them), test_gpt bf16 and fp32, sample_gpt, the kernel and the
#      flash-attention benchmarks; meanwhile train_gpt.py writes the small reference states (build/references)
#      and a d12 one (B=4, T=64, 3 steps; float64, on the GPU when PyTorch sees it, else on the CPU);
#   2. test_gpt (both precisions) on every small reference state, bf16 with recompute 2 on one, bf16 on d12
#      (the benchmarks wait for it: no CPU-heavy reference run beside them); a missing reference state is a
#      failure, never a skip;
#   3. d12 training at B=64, T=1024 on mock data, 30 steps, --profile 10 (the per-op table of steps 2..11;
#      tokens/s, MFU and ms a step are the medians of steps 13..30, outside the profiled ones), no recompute
#      (the default: 141 GB hold every activation), once in the trainer's default mode (--deterministic 1)
#      and once with the flash-attention backward's atomic dQ (--deterministic 0);
#   4. the flash-attention benchmark (vs a materialised baseline) and the kernel benchmark;
#   5. sample_gpt (KV cache): 200 token ids from a reference model, past its max_seq_len.
# Each step runs under `timeout` (its own budget, capped by what is left of GPUCHECK_BUDGET seconds), with
# its output in GPUCHECK_DIR/<step>.log; a step the budget cut or left out is SKIP, not a failure. The run
# ends with the steps, markdown tables of the figures and "N passed, M failed, K skipped".
# Usage: gpucheck.sh [--no-build]   (--no-build: use the binaries already built; reference states are
# always brought up to date: make build/references/.stamp, and the d12 one when missing or stale)
# Sourced (scripts/device_check.sh), it only defines the gc_* functions below and runs nothing.
# Environment: NVCC (default nvcc, else $CUDA_HOME/bin/nvcc or /usr/local/cuda/bin/nvcc), PYTHON (the first of
# $PYTHON, python3, /usr/bin/python3 whose torch sees a GPU, else the first that imports torch and numpy), MPICXX
# (default mpicxx), GPUCHECK_DIR (default build/gpucheck), GPUCHECK_BUDGET (default 900), GPUCHECK_SIM=1 (the
# simulator's builds instead of nvcc's, no d12: to test these scripts without a GPU), GPUCHECK_TRAIN_MODEL (the
# training runs' model flags), GPUCHECK_REFERENCES (the small reference states test_gpt runs on; default all).

# gc_init: the tools, the GPU's architecture, the log directory and the deadline
gc_init() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
    gc_dir=${GPUCHECK_DIR:-build/gpucheck}
    mkdir -p "$gc_dir" build/gpu || exit 1
    gc_dir=$(cd "$gc_dir" && pwd)
    : >"$gc_dir/results.tsv"
    gc_deadline=$((SECONDS + ${GPUCHECK_BUDGET:-900}))
    gc_jobs=$(nproc 2>/dev/null || echo 4)
    NVCC=${NVCC:-nvcc}
    local candidate version
    if ! command -v "$NVCC" >/dev/null 2>&1; then
        for candidate in "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
            if [ -x "$candidate" ]; then NVCC=$candidate; break; fi
        done
    fi
    MPICXX=${MPICXX:-mpicxx}
    # the first Python whose torch sees a GPU (the d12 reference state then runs there), else the first
    # with torch at all (a CPU-only torch, say Debian's in /usr/bin/python3, must not win over a CUDA one)
    gc_python_note="no Python with torch and numpy among: ${PYTHON:-} python3 /usr/bin/python3"
    local found="" need
    for need in "torch.cuda.is_available()" "True"; do
        for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
            if version=$("$candidate" -c "import numpy, torch; assert $need; print(torch.__version__)" 2>/dev/null); then
                found=$(command -v "$candidate")
                gc_python_note="$found, torch $version$([ "$need" = True ] && echo ' (no GPU seen by it)')"
                break 2
            fi
        done
    done
    PYTHON=${found:-${PYTHON:-python3}}
    gc_sim=${GPUCHECK_SIM:-0} gc_dist_flags="" gc_dist_libs="" gc_blas_ldlibs=""
    # shellcheck disable=SC2034 # gc_bin_preflight is device_check.sh's
    if [ "$gc_sim" = 1 ]; then
        gc_bin_train=./train_gpt_sim gc_bin_test=./test_gpt_sim gc_bin_test_fp32=./test_gpt_sim_fp32 gc_bin_sample=./sample_gpt_sim
        gc_bin_kernels=./build/cudasim/bench_kernels gc_bin_flash=./build/cudasim/bench_flash_attention gc_bin_preflight=./build/cudasim/preflight
    else
        gc_bin_train=./train_gpt gc_bin_test=./test_gpt gc_bin_test_fp32=./build/gpu/test_gpt_fp32 gc_bin_sample=./sample_gpt
        gc_bin_kernels=./build/gpu/bench_kernels gc_bin_flash=./build/bench_flash_attention gc_bin_preflight=./build/gpu/preflight
    fi

    gc_arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
    gc_gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
    echo "gpucheck: GPU ${gc_gpu:-none seen by nvidia-smi}, compute capability ${gc_arch:-?}; nvcc $NVCC; python $gc_python_note; logs in $gc_dir"
}

# gc_record STATUS NAME SECONDS NOTE: one result line (results.tsv, so that steps run in the background count);
# STATUS is ok, FAIL or SKIP (not run, or cut, because the time budget ran out: not a failure). Then the function
# named by gc_on_record, if any, runs (device_check.sh writes the summary so far there).
gc_record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(echo "$4" | tr '\t\n' '  ' | cut -c 1-150)" >>"$gc_dir/results.tsv"
    printf '%-4s  %s (%s s) %s\n' "$1" "$2" "$3" "$4"
    if [ -n "${gc_on_record:-}" ]; then "$gc_on_record"; fi
}

# gc_missing NAME NOTE [STEP]: a check that cannot run for want of something: SKIP when the time budget is spent
# or the step STEP it needed (a results.tsv name prefix) was SKIP, else FAIL with NOTE
gc_missing() {
    if [ $((gc_deadline - SECONDS)) -lt 10 ]; then gc_record SKIP "$1" 0 "not run: the time budget is spent"
    elif [ -n "${3:-}" ] && grep -q "^SKIP"$'\t'"$3" "$gc_dir/results.tsv"; then gc_record SKIP "$1" 0 "not run: $3 was skipped"
    else gc_record FAIL "$1" 0 "$2"; fi
}

# gc_step NAME BUDGET CHECK CMD...: runs CMD under timeout, stdout and stderr in $gc_dir/<NAME>.log; passes
# when CMD exits 0 and the function CHECK (given the log; "-": none) returns 0. CHECK prints the note.
# CHECK returning 2 makes the step SKIP, whatever CMD's status (CHECK's note says why: a tool that cannot run here).
# On a failure the log's last lines are printed. The log's name is in gc_last_log. With less than 10 s of
# the whole budget left the step is SKIP (not run); a step whose BUDGET was cut to what was left and that
# timed out is SKIP too (cut by the budget); a step that times out within its own BUDGET is a FAIL (a hang).
gc_step() {
    local name=$1 budget=$2 check=$3 allowed=$2
    shift 3
    local slug left start rc note capped=0
    slug=$(echo "$name" | tr -c 'A-Za-z0-9._-' '_' | cut -c 1-60)
    gc_last_log=$gc_dir/$slug.log
    left=$((gc_deadline - SECONDS))
    if [ "$left" -lt 10 ]; then gc_record SKIP "$name" 0 "not run: the time budget is spent"; return 1; fi
    if [ "$budget" -gt "$left" ]; then budget=$left; capped=1; fi
    start=$SECONDS
    { printf '$'; printf ' %q' "$@"; echo; } >"$gc_last_log"
    timeout -k 10 "$budget" "$@" >>"$gc_last_log" 2>&1
    rc=$?
    local check_rc=0
    if [ "$check" != - ]; then note=$("$check" "$gc_last_log"); check_rc=$?; fi
    if [ $rc -eq 0 ] && [ $check_rc -eq 0 ]; then
        gc_record ok "$name" $((SECONDS - start)) "${note:-}"
        return 0
    fi
    if [ $check_rc -eq 2 ]; then
        gc_record SKIP "$name" $((SECONDS - start)) "$note"
        return 1
    fi
    if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ $capped = 1 ]; then
        gc_record SKIP "$name" $((SECONDS - start)) "cut by the time budget after $budget s (the step allows $allowed s)"
        return 1
    fi
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then note="timed out after $budget s"
    elif [ $rc -ne 0 ]; then # CHECK's note on the log, else the log's first error line
        note="exit $rc: ${note:-$(tail -n +2 "$gc_last_log" | grep -m 1 -E 'error|Error|ERROR|FAIL' | cut -c 1-120)}"
    fi
    gc_record FAIL "$name" $((SECONDS - start)) "$note"
    tail -n 15 "$gc_last_log" | cut -c 1-200 | sed 's/^/    | /'
    return 1
}

# checks on a step's log: print a note, return non-zero when the output is wrong
gc_check_tally() { # the last "N passed, M failed" line, with M = 0
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1)
    echo "${line:-no 'N passed, M failed' line}"
    [[ "$line" == *" passed, 0 failed" ]]
}
gc_check_sample() { # 200 token ids on stdout (stderr's lines start with "sample_gpt:", maybe after the ids)
    local n
    n=$(tail -n +2 "$1" | sed 's/sample_gpt:.*//' | tr -s ' \t' '\n\n' | grep -cE '^[0-9]+$')
    echo "$n token ids; $(grep -o 'sample_gpt: [0-9]* tokens in .*' "$1" | sed 's/^sample_gpt: //')"
    [ "$n" -eq 200 ]
}
gc_check_train() { # every step line present, a profile table, finite losses
    local steps
    steps=$(grep -cE "^step +[0-9]+/$GC_TRAIN_STEPS \\| loss [0-9]" "$1")
    echo "$steps of $GC_TRAIN_STEPS step lines; $(gc_train_figures "$1")"
    [ "$steps" -eq "$GC_TRAIN_STEPS" ] && grep -q '^profile of' "$1"
}
gc_check_kernels() { grep -c -E 'GB/s|TFLOP/s' "$1" | sed 's/$/ kernels timed/'; grep -q '^benchmark done' "$1"; }
gc_check_flash() { # every shape timed, and its output's max difference from the materialised one finite
    local shapes
    shapes=$(grep -c '^B=' "$1")
    echo "$shapes shapes; max |flash - materialised| $(grep 'max |flash' "$1" | sed 's/.*= //' | tr '\n' ' ')"
    [ "$shapes" -gt 0 ] && awk '/max \|flash out - materialised out\|/ { n++; if ($NF !~ /^[0-9.e+-]+$/) bad = 1 } END { exit bad || n == 0 }' "$1"
}
gc_check_reference() { grep -m 1 '^wrote' "$1" | cut -c 1-140; test -f "$2/reference.bin"; }

# gc_train_figures LOG [FORMAT]: the median step of those after the profiled ones (13..GC_TRAIN_STEPS), by
# tokens/s: its tokens/s, MFU and ms. FORMAT "row": "| tok/s | MFU% | ms |" cells for a markdown table.
gc_train_figures() {
    grep -E "^step +[0-9]+/$GC_TRAIN_STEPS \\|" "$1" | awk -F'|' '{ split($1, a, /[ \/]+/); if (a[2] > 12) { t = $6; m = $7; ms = $5;
        gsub(/[^0-9.]/, "", t); gsub(/[^0-9.]/, "", ms); sub(/.*\(/, "", m); sub(/%.*/, "", m); print t, m, ms } }' | sort -n |
        awk -v row="${2:-}" '{ t[NR] = $1; m[NR] = $2; ms[NR] = $3 } END { i = int((NR + 1) / 2)
            if (row == "row") { if (NR) printf "| %.0f | %s%% | %s |", t[i], m[i], ms[i]; else printf "| - | - | - |"; exit }
            if (NR) printf "%.0f tok/s, MFU %s%%, %s ms a step (median of %d steps)", t[i], m[i], ms[i], NR; else printf "no step lines" }'
}

# gc_probe: which NCCL and MPI train_gpt links (scripts/dist_probe.sh) and where cuBLAS is (scripts/cublas_probe.sh),
# once; sets gc_dist_flags, gc_dist_libs and gc_blas_ldlibs (empty without cuBLAS: a FAIL, and gc_build builds nothing)
gc_probe() {
    local log=$gc_dir/dist_probe.log blas_log=$gc_dir/cublas_probe.log blas_flags blas_libs=""
    gc_dist_flags=$(PYTHON="$PYTHON" bash scripts/dist_probe.sh "$NVCC" "$MPICXX" flags 2>"$log")
    gc_dist_libs=$(PYTHON="$PYTHON" bash scripts/dist_probe.sh "$NVCC" "$MPICXX" libs 2>/dev/null)
    printf 'flags: %s\nlibs: %s\n' "$gc_dist_flags" "$gc_dist_libs" >>"$log"
    gc_nccl_note=$(grep -m 1 'NCCL' "$log" | sed 's/^note: //')
    gc_record ok "NCCL/MPI probe" 0 "${gc_nccl_note:-no note}; MPI: $([[ "$gc_dist_flags" == *-DUSE_MPI* ]] && echo yes || echo no)"
    blas_flags=$(PYTHON="$PYTHON" bash scripts/cublas_probe.sh "$NVCC" flags 2>"$blas_log") &&
        blas_libs=$(PYTHON="$PYTHON" bash scripts/cublas_probe.sh "$NVCC" libs 2>/dev/null)
    gc_blas_ldlibs=${blas_libs:+$blas_flags $blas_libs}
    if [ -n "$gc_blas_ldlibs" ]; then gc_record ok "cuBLAS probe" 0 "$(sed -n 's/^note: //p' "$blas_log" | head -n 1)"
    else gc_record FAIL "cuBLAS probe" 0 "$(head -n 1 "$blas_log")"; fi
}

# gc_start_references: the reference states that are missing or older than train_gpt.py, written in the
# background (the build runs meanwhile; their records run no gc_on_record: only the main shell writes summaries);
# gc_tests and gc_test_d12 wait for them
gc_start_references() {
    gc_on_record="" gc_step "reference states (train_gpt.py, small)" 180 - make -s PYTHON="$PYTHON" build/references/.stamp &
    gc_ref_small_pid=$!
    gc_ref_d12_pid=""
    [ "$gc_sim" = 1 ] && return
    if [ -f build/gpu/ref_d12/reference.bin ] && [ build/gpu/ref_d12/reference.bin -nt train_gpt.py ]; then return; fi
    rm -rf build/gpu/ref_d12
    local device
    device=$("$PYTHON" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")' 2>/dev/null)
    gc_on_record="" gc_step "d12 reference state (train_gpt.py, float64 on ${device:-cpu})" 240 gc_check_d12_reference \
        "$PYTHON" train_gpt.py --reference-out build/gpu/ref_d12 --steps 3 --n-layer 12 --n-head 12 --n-embd 768 \
        --vocab-size 50257 --seq-len 64 --batch-size 4 --seed 12 --device "${device:-cpu}" --threads $(((gc_jobs + 1) / 2)) &
    gc_ref_d12_pid=$!
}
gc_check_d12_reference() { gc_check_reference "$1" build/gpu/ref_d12; }

# gc_build [BINARY...]: one parallel make of the binaries (default: all of them, after the probes) for sm_<arch>,
# rebuilt whatever is there (warnings are not errors here: another host compiler), with the libraries gc_probe found;
# the simulator builds under GPUCHECK_SIM=1 (made as usual, not rebuilt)
# shellcheck disable=SC2120 # gpucheck_main builds everything: no arguments
gc_build() {
    local what=("$@")
    [ $# -gt 0 ] || { gc_probe; what=("$gc_bin_train" "$gc_bin_test" "$gc_bin_test_fp32" "$gc_bin_sample" "$gc_bin_kernels" "$gc_bin_flash"); }
    gc_binaries=("${what[@]#./}")
    if [ "$gc_sim" = 1 ]; then
        gc_step "build ${gc_binaries[*]} (simulator)" 420 gc_check_binaries make -s -j"$gc_jobs" PYTHON="$PYTHON" "${gc_binaries[@]}"
        return
    fi
    if [ -z "$gc_blas_ldlibs" ]; then
        gc_record FAIL "build ${gc_binaries[*]} for sm_${gc_arch:-90}" 0 "not run: no cuBLAS (see the cuBLAS probe)"
        return 1
    fi
    gc_step "build ${gc_binaries[*]} for sm_${gc_arch:-90}" 420 gc_check_binaries make -k -B -s -j"$gc_jobs" NVCC="$NVCC" PYTHON="$PYTHON" \
        GPU_ARCH="${gc_arch:-90}" BENCH_ARCH="sm_${gc_arch:-90}" NVCC_WERROR= DIST_NVCC_FLAGS="$gc_dist_flags" DIST_LDLIBS="$gc_dist_libs" \
        GPU_LDLIBS="$gc_blas_ldlibs" "${gc_binaries[@]}"
}
gc_check_binaries() {
    local b missing=""
    for b in "${gc_binaries[@]}"; do [ -x "$b" ] || missing="$missing $b"; done
    if [ -n "$missing" ]; then echo "missing:$missing"; return 1; fi
    echo "${#gc_binaries[@]} binaries"
}

# gc_tests: test_gpt on every small reference state (bf16 and fp32), recompute 2 on one; sample_gpt. gc_test_d12: d12
gc_tests() {
    local d found=0 expected
    wait "$gc_ref_small_pid" 2>/dev/null
    for expected in a_L2_H4_C64_T32_V512 b_L2_H3_C96_T37_V300 c_L1_H1_C32_T16_V129 d_L3_H2_C48_T64_V1000 e_L2_H8_C56_T29_V200 f_L2_H3_C45_T19_V97; do
        [ -f "build/references/$expected/reference.bin" ] || gc_missing "reference state $expected" "missing (see the reference step's log)" "reference states"
    done
    for d in build/references/*/; do
        [ -f "$d/reference.bin" ] || continue
        [ -z "${GPUCHECK_REFERENCES:-}" ] || [[ " $GPUCHECK_REFERENCES " == *" $(basename "$d") "* ]] || continue
        found=1
        gc_step "test_gpt bf16 $(basename "$d")" 120 gc_check_tally "$gc_bin_test" "$d"
        gc_step "test_gpt fp32 $(basename "$d")" 120 gc_check_tally "$gc_bin_test_fp32" "$d"
    done
    if [ $found = 1 ]; then
        gc_step "test_gpt bf16 a_L2_H4_C64_T32_V512 recompute 2" 120 gc_check_tally "$gc_bin_test" build/references/a_L2_H4_C64_T32_V512 2
        gc_step "sample_gpt: 200 tokens past max_seq_len 32" 60 gc_check_sample "$gc_bin_sample" -e build/references/a_L2_H4_C64_T32_V512/model.bin --ids -g 200
    fi
}
gc_test_d12() {
    if [ "$gc_sim" = 1 ]; then gc_record SKIP "test_gpt bf16 on d12" 0 "not run in the simulator (hours on a CPU)"; return; fi
    wait "$gc_ref_d12_pid" 2>/dev/null
    if [ -f build/gpu/ref_d12/reference.bin ]; then gc_step "test_gpt bf16 on d12" 180 gc_check_tally "$gc_bin_test" build/gpu/ref_d12
    else gc_missing "test_gpt bf16 on d12" "no d12 reference state (see its step's log)" "d12 reference state"; fi
}

# gc_sanitize [TOOL...]: compute-sanitizer's tools (default memcheck, initcheck, racecheck) on test_gpt bf16
# with a small reference state (T = 37, head size 32): out-of-bounds or misaligned accesses, reads of memory
# never written and shared-memory races, which the simulator cannot show (its fill of unwritten memory, a NaN,
# can vanish in a max or a comparison). The tool comes with CUDA (compute-sanitizer on PATH or in $CUDA_HOME/bin).
gc_sanitize() {
    local cs tool ref=build/references/b_L2_H3_C96_T37_V300 tools=("$@")
    [ $# -gt 0 ] || tools=(memcheck initcheck racecheck)
    local nvcc_bin
    nvcc_bin=$(dirname "$(command -v "$NVCC" 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
    cs=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" "$nvcc_bin/compute-sanitizer" \
        "$nvcc_bin/../compute-sanitizer/compute-sanitizer" 2>/dev/null | head -n 1)
    for tool in "${tools[@]}"; do
        if [ -z "$cs" ]; then
            gc_missing "compute-sanitizer $tool" "compute-sanitizer not found on PATH, in ${CUDA_HOME:-/usr/local/cuda}/bin or beside $NVCC"
            continue
        fi
        gc_step "compute-sanitizer $tool: test_gpt bf16 $(basename "$ref")" 150 gc_check_sanitizer "$cs" --tool "$tool" \
            --print-limit 20 --error-exitcode 9 "$gc_bin_test" "$ref"
    done
}
gc_check_sanitizer() { # a summary of no error (racecheck words its own), and the test itself passed; 2 (SKIP) where
    # the tool cannot instrument the device (a gVisor sandbox answers "Device not supported")
    if grep -q 'Device not supported' "$1"; then echo "compute-sanitizer: 'Device not supported' on this machine"; return 2; fi
    grep -m 1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$1" || echo "no summary line"
    grep -qE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors' "$1" && grep -qE '^[0-9]+ passed, 0 failed$' "$1"
}

# gc_train MODE: d12 training at B=64 T=1024 on mock data, GC_TRAIN_STEPS steps with the per-op profile of
# steps 2..11; MODE 1 is the trainer's default (--deterministic 1: the separate dQ pass), 0 the atomic dQ. The
# log's name goes to gc_train_log_MODE. GPUCHECK_TRAIN_MODEL replaces "-e d12 -b 64 -t 1024" (a small model
# for the simulator).
GC_TRAIN_STEPS=30
gc_train() {
    local mode="default, --deterministic 1"
    [ "$1" = 1 ] || mode="atomic dQ, --deterministic 0"
    # shellcheck disable=SC2086 # the model flags are words
    gc_step "d12 training B=64 T=1024 ($mode), $GC_TRAIN_STEPS steps, --profile 10" 120 gc_check_train "$gc_bin_train" \
        ${GPUCHECK_TRAIN_MODEL:--e d12 -b 64 -t 1024} --mock-data 1 -x $GC_TRAIN_STEPS -v 0 -s 0 -r 0 --deterministic "$1" --profile 10
    printf -v "gc_train_log_$1" '%s' "$gc_last_log"
}

# gc_benchmarks: the flash-attention and the kernel benchmarks
gc_benchmarks() {
    gc_step "flash-attention benchmark" 150 gc_check_flash "$gc_bin_flash"
    gc_flash_log=$gc_last_log
    gc_step "kernel benchmark" 120 gc_check_kernels "$gc_bin_kernels"
}

# gc_summary: the steps, the measured figures, "N passed, M failed"; returns non-zero on a failure
gc_summary() {
    local pass fail skip
    echo
    echo "==== summary ($gc_dir)"
    awk -F'\t' '{ printf "%-4s %4s s  %-52s %s\n", $1, $3, $2, $4 }' "$gc_dir/results.tsv"
    echo "---- table for doc/gpu_notes.md"
    gc_table
    pass=$(grep -c '^ok' "$gc_dir/results.tsv")
    fail=$(grep -c '^FAIL' "$gc_dir/results.tsv")
    skip=$(grep -c '^SKIP' "$gc_dir/results.tsv")
    echo "$pass passed, $fail failed, $skip skipped"
    [ "$fail" -eq 0 ]
}

# gc_table: what the run measured, as markdown tables to paste into doc/gpu_notes.md ("-": not measured)
gc_table() {
    local pre=${gc_preflight_log:-/dev/null} torch=${gc_torch_log:-/dev/null} det=${gc_train_log_1:-} atomic=${gc_train_log_0:-}
    local card=h100
    [[ "${gc_gpu:-}" == *H200* ]] && card=h200
    echo "#### $(date -u +%Y-%m-%d), ${gc_gpu:-no GPU seen}"
    echo
    echo "| nvidia-smi (name, driver, memory) | CUDA driver API / runtime | nvcc | cuBLASLt | NCCL | torch |"
    echo "|---|---|---|---|---|---|"
    printf '| %s | %s | %s | %s | %s | %s |\n' "${gc_gpu:--}" \
        "$(awk -F' [|] ' '/^gpu: / { print $5 " / " $6 }' "$pre" 2>/dev/null | sed 's/driver API //; s/runtime //')" \
        "$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')" \
        "$(awk -F' [|] ' '/^cublaslt: / { sub(/^cublaslt: /, "", $1); print $1 }' "$pre" 2>/dev/null)" \
        "$(sed -n 's/^nccl: //p' "$pre" 2>/dev/null)" "$(sed -n 's/^torch \([^,]*\),.*/\1/p' "$torch" 2>/dev/null)"
    echo
    echo "| d12 B=64 T=1024 (median of steps 13..$GC_TRAIN_STEPS) | tok/s | MFU | ms a step |"
    echo "|---|---|---|---|"
    echo "| default (--deterministic 1) $([ -f "$det" ] && gc_train_figures "$det" row || echo '| - | - | - |')"
    echo "| atomic dQ (--deterministic 0) $([ -f "$atomic" ] && gc_train_figures "$atomic" row || echo '| - | - | - |')"
    echo
    echo "| op (--profile, steps 2..11) | ms a step, default | ms a step, atomic dQ | floor ms ($card, dev/perf_model.py) | default / floor |"
    echo "|---|---|---|---|---|"
    { "$PYTHON" dev/perf_model.py --gpu "$card" --profile-floors 2>/dev/null | sed 's/^/floor\t/'
      [ -f "$det" ] && awk '/^profile of/ { on = 1 } on && /^\| [a-z]/ { split($0, c, /[|]/); gsub(/^ +| +$/, "", c[2]); if (c[2] == "op") next; gsub(/ /, "", c[4]); print "det\t" c[2] "\t" c[4] } /^profile: / { on = 0 }' "$det"
      [ -f "$atomic" ] && awk '/^profile of/ { on = 1 } on && /^\| [a-z]/ { split($0, c, /[|]/); gsub(/^ +| +$/, "", c[2]); if (c[2] == "op") next; gsub(/ /, "", c[4]); print "atomic\t" c[2] "\t" c[4] } /^profile: / { on = 0 }' "$atomic"
    } | awk -F'\t' '$1 == "floor" { floor[$2] = $3 } $1 == "det" { if (!($2 in seen)) { order[++n] = $2; seen[$2] = 1 } det[$2] = $3 }
                    $1 == "atomic" { if (!($2 in seen)) { order[++n] = $2; seen[$2] = 1 } at[$2] = $3 }
        END { for (i = 1; i <= n; i++) { op = order[i]; f = (op in floor) ? floor[op] : "-"
                  r = (op in floor) && floor[op] > 0 && (op in det) ? sprintf("%.2fx", det[op] / floor[op]) : "-"
                  printf "| %s | %s | %s | %s | %s |\n", op, (op in det) ? det[op] : "-", (op in at) ? at[op] : "-", f, r } }'
    echo
    echo "| attention, causal, TFLOP/s | flash fwd | flash fwd MT=1 | flash bwd atomic | flash bwd det. | flash fwd+bwd (atomic) | materialised fwd | torch SDPA fwd+bwd (flash / cuDNN / efficient) |"
    echo "|---|---|---|---|---|---|---|---|"
    if [ -n "${gc_flash_log:-}" ] && [ -f "$gc_flash_log" ]; then
        awk 'function tflops(  i) { for (i = 1; i < NF; i++) if ($(i + 1) == "TFLOP/s") return $i; return "?" }
             FILENAME == tf && /^sdpa / { key = $2 " " $3 " " $4 " " $5; be = $6; sub(/:$/, "", be); v = "-"
                                     for (i = 1; i < NF; i++) if ($i == "backward") v = $(i + 1); sdpa[key, be] = v }
             FILENAME != tf && /^B=/ { shape = $0; f = f1 = b = d = fb = m = "-" } FILENAME != tf && /flash forward  / { f = tflops() }
             FILENAME != tf && /flash forward, MT = 1/ { f1 = tflops() }
             FILENAME != tf && /backward \(atomic dq\)/ { b = tflops() } FILENAME != tf && /backward \(determin/ { d = tflops() }
             FILENAME != tf && /forward \+ backward/ { fb = tflops() }
             FILENAME != tf && /materialised forward/ { m = tflops(); t = ""
                 for (j = 1; j <= 3; j++) { be = j == 1 ? "flash" : j == 2 ? "cudnn" : "efficient"; t = t (j > 1 ? " / " : "") (((shape, be) in sdpa) ? sdpa[shape, be] : "-") }
                 printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", shape, f, f1, b, d, fb, m, t }' tf="$torch" "$torch" "$gc_flash_log"
    fi
    if [ -f "$torch" ]; then
        echo
        echo "torch on this card (the ceilings): $(grep -E '^(matmul|copy)' "$torch" | sed 's/: .*, / /' | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    fi
    echo
    echo "| check | result |"
    echo "|---|---|"
    awk -F'\t' '$2 ~ /^(preflight|compute-sanitizer|distributed overhead)/ { gsub(/[|]/, "/", $4); printf "| %s | %s %s |\n", $2, $1, $4 }' "$gc_dir/results.tsv"
    if [ -n "${gc_overhead_log:-}" ] && [ -f "$gc_overhead_log" ]; then
        echo "| distributed path on 1 GPU | $(grep -m 1 '^plain ' "$gc_overhead_log" || echo 'no figure') |"
    fi
}

gpucheck_main() {
    local build=1
    if [ "${1:-}" = --no-build ]; then build=0
    elif [ $# -gt 0 ]; then echo "usage: gpucheck.sh [--no-build]" >&2; exit 2; fi
    gc_init
    if [ -z "$gc_arch" ]; then echo "error: nvidia-smi found no GPU: gpucheck needs one"; echo "0 passed, 1 failed"; exit 1; fi
    gc_start_references
    if [ $build = 1 ]; then gc_build; fi
    gc_tests
    gc_test_d12
    gc_train 1
    gc_train 0
    gc_benchmarks
    gc_summary
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    gpucheck_main "$@"
fi
