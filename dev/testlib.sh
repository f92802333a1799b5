# shellcheck shell=bash
# Shared helpers of the shell tests in dev/ and dev/cuda/ (sourced, not run):
#     . "$(dirname "$0")/testlib.sh"          (dev/cuda/: "$(dirname "$0")/../testlib.sh")
# Sourcing sets `here` (the repository root), PYTHON (default /usr/bin/python3) and the counters
# `pass` and `fail`; test_begin makes the scratch directory $tmp. Nothing here expands a glob, so
# the helpers work under `set -f`. A script ends with test_end, which prints "N passed, M failed".
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
pass=0
fail=0

# test_begin [THREADS]: cd to the repository root, OMP_NUM_THREADS defaults to THREADS (if given),
# and $tmp is a fresh directory removed when the script exits
test_begin() {
    cd "$here" || exit 1
    if [ $# -ge 1 ]; then export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$1}; fi
    tmp=$(mktemp -d) || exit 1
    trap 'rm -rf "$tmp"' EXIT
}

# ok TEXT / bad TEXT: one passed / failed check, printed as "ok    TEXT" / "FAIL  TEXT"
ok() { echo "ok    $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  $1"; fail=$((fail + 1)); }

# Slow independent commands (nvcc compiles) run side by side, at most JOBS at once (default: the
# cores, at most one per GiB of available memory (an nvcc of train_gpt.cu peaks near 300 MiB);
# nvcc is one process a file, so two compiles take the time of one on two cores):
#   job_start ID CMD...   starts CMD in the background, its stdout and stderr kept for job_wait
#   job_wait ID           waits for it: returns CMD's status and leaves its output in $job_out
if [ -z "${JOBS:-}" ]; then
    JOBS=$(nproc 2>/dev/null || echo 2)
    mem_jobs=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo 2>/dev/null)
    [ -n "$mem_jobs" ] && [ "$mem_jobs" -lt "$JOBS" ] && JOBS=$mem_jobs
fi
[ "$JOBS" -ge 1 ] 2>/dev/null || JOBS=1
declare -A job_files=()
job_count=0
job_start() {
    local id=$1 file
    shift
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    job_count=$((job_count + 1))
    file=$tmp/job.$job_count
    job_files[$id]=$file
    { "$@" >"$file" 2>&1; echo $? >"$file.status" && mv "$file.status" "$file.rc"; } &
}
job_wait() {
    local file=${job_files[$1]}
    while [ ! -f "$file.rc" ]; do
        wait -n 2>/dev/null && continue
        [ -f "$file.rc" ] || [ -n "$(jobs -rp)" ] || { job_out="job $1 ended without a status: $(cat "$file" 2>/dev/null)"; return 255; }
    done
    job_out=$(cat "$file")
    return "$(cat "$file.rc")"
}

# nvcc_target MODE ARCH...: nvcc's code-generation options for compute capabilities ARCH (80, 90; several: a fat binary)
#   full    SASS for sm_ARCH: cicc optimises, ptxas assembles (-Xptxas -v then reports registers and spills)
#   front   PTX for compute_ARCH from an unoptimised cicc (-Xcicc -O0), no ptxas: the host compiler and the
#           device front end still see every line, so every warning and error of the source shows, in about
#           1/8 of the time (7 s, not 59, for train_gpt.cu). For the builds whose kernels a full build compiles
#           elsewhere: other defines, other headers, the programs that include train_gpt.cu.
nvcc_target() {
    local mode=$1 a
    shift
    for a in "$@"; do
        if [ "$mode" = full ]; then echo "-gencode arch=compute_$a,code=sm_$a"; else echo "-gencode arch=compute_$a,code=compute_$a"; fi
    done
    [ "$mode" = full ] || echo "-Xcicc -O0"
}

# nvcc_target_name MODE ARCH: what nvcc_target MODE ARCH builds, for check names ("sm_90", "compute_90 PTX")
nvcc_target_name() {
    if [ "$1" = full ]; then echo "sm_$2"; else echo "compute_$2 PTX"; fi
}

# test_end: prints the totals; its status (the script's, as its last command) is non-zero on a failure
test_end() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}

# tally NAME RC OUTPUT_FILE: adds the counts of the last "N passed, M failed" line of a sub-test's
# output; a sub-test that exited non-zero without reporting a failure, or printed no such line,
# counts one failure more
tally() {
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -n 1)
    if [ -z "$line" ]; then
        bad "$1 did not finish (exit $2): $(tail -n 1 "$3")"
        return
    fi
    pass=$((pass + $(cut -d' ' -f1 <<<"$line")))
    fail=$((fail + $(cut -d' ' -f3 <<<"$line")))
    if [ "$2" -ne 0 ] && [ "$(cut -d' ' -f3 <<<"$line")" = 0 ]; then bad "$1 exited $2 after '$line'"; fi
}

# expect_error [--alone] NAME PATTERN CMD...: CMD exits non-zero without a crash (status < 128), and
# the first line of its stderr starts with "error:" and matches the extended regex PATTERN; with
# --alone that line must be all of stderr
expect_error() {
    local alone=0
    if [ "$1" = --alone ]; then alone=1; shift; fi
    local name=$1 pattern=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? first
    first=$(head -n 1 "$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$first" == error:* ]] && grep -qE -- "$pattern" <<<"$first" &&
        { [ $alone -eq 0 ] || [ "$(wc -l <"$tmp/err")" -eq 1 ]; }; then
        ok "$name: exit $rc: $first"
    else
        bad "$name: exit $rc, stderr: $(head -c 300 "$tmp/err")"
    fi
}

# write_shard PATH VOCAB N [KIND]: a token shard written by dev/fuzz/write_shard.py (doc/formats.md,
# independent of the C code); KIND noisy (default), periodic or random
write_shard() { "$PYTHON" "$here/dev/fuzz/write_shard.py" "$@"; }

# make_model PATH L H C V maxT: a model file written by train_gpt.py's writer, weights N(0, 0.15) and
# LayerNorm weights 1 + N(0, 0.15) (attention far from uniform), seeded by L and V
make_model() {
    "$PYTHON" - "$here" "$@" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import train_gpt as tg
path, (L, H, C, V, T) = sys.argv[2], map(int, sys.argv[3:8])
cfg = tg.GPTConfig(L, H, C, V, T)
rng = np.random.default_rng(L * 7919 + V)
t = {n: rng.normal(0.0, 0.15, s).astype(np.float32) for n, s in cfg.tensor_shapes()}
for n in ("ln1w", "ln2w", "lnfw"):
    t[n] += 1.0
t["wte"][V:] = 0.0
tg.save_model_file(path, cfg, t)
EOF
}

# steplines LOG: a trainer's step lines without their timing (loss, lr, norm: equal across equal runs)
steplines() { grep -E '^step +[0-9]+/[0-9]+ \| loss' "$1" | sed 's/| [0-9.]* ms.*//'; }
# losses LOG: the loss of each step line, one per line
losses() { grep -E '^step +[0-9]+/[0-9]+ \| loss' "$1" | sed -E 's/.*loss ([0-9.]+).*/\1/'; }
# last_step LOG: the number of the last step line
last_step() { grep -E '^step +[0-9]+/[0-9]+ \| loss' "$1" | tail -n 1 | sed -E 's/^step +([0-9]+)\/.*/\1/'; }
# compare_losses NAME OURS REF BOUND KIND [FIRST_STEP]: the step losses of log OURS against those of log REF
# from FIRST_STEP (default 1) on: the same count, at least one, REF ran all its steps (a "step M/M" line),
# and the worst difference (KIND abs, or rel: divided by REF's loss) is within BOUND
compare_losses() {
    local name=$1 ours=$2 ref=$3 bound=$4 kind=$5 first=${6:-1} worst n
    losses "$ours" >"$tmp/a"
    losses "$ref" | tail -n +"$first" >"$tmp/b"
    n=$(wc -l <"$tmp/a")
    if [ "$n" -ge 1 ] && [ "$n" -eq "$(wc -l <"$tmp/b")" ] && grep -qE '^step +([0-9]+)/\1 \| loss' "$ref" &&
        worst=$(paste "$tmp/a" "$tmp/b" | awk -v k="$kind" '{ d = $1 - $2; if (d < 0) d = -d; if (k == "rel") d /= $2; if (d > w) w = d } END { printf "%.3g", w }') &&
        awk -v w="$worst" -v b="$bound" 'BEGIN { exit !(w <= b) }'; then
        ok "$name: $n step losses, worst $kind error $worst (bound $bound); last $(tail -n 1 "$tmp/a") vs $(tail -n 1 "$tmp/b")"
    else
        bad "$name: losses $(paste -d/ "$tmp/a" "$tmp/b" | tr '\n' ' ') $(grep -E 'error' "$ours" | head -2)"
    fi
}
# same_steplines NAME LOG_A LOG_B: identical step lines (loss, lr, norm), at least one
same_steplines() {
    steplines "$2" >"$tmp/a"
    steplines "$3" >"$tmp/b"
    if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"; then ok "$1: $(wc -l <"$tmp/a") identical step lines"
    else bad "$1: $(diff "$tmp/a" "$tmp/b" | head -4 | tr '\n' ' ') $(grep error "$3" | head -2)"; fi
}
# checkpoint_steps DIR: the steps (8 digits) of DIR's done markers, ascending, one per line
checkpoint_steps() { ls "$1" 2>/dev/null | sed -n 's/^done_\([0-9]*\)\.txt$/\1/p' | sort; }
# checkpoint_files STEP [RANKS]: the names of a step's model file and the optimizer state of each rank
checkpoint_files() {
    local r
    printf 'model_%08d.bin' "$1"
    for ((r = 0; r < ${2:-1}; r++)); do printf ' state_%08d_%05d.bin' "$1" "$r"; done
}
# same_files DIR_A DIR_B NAME...: each NAME exists in both and is byte-identical
same_files() {
    local a=$1 b=$2 f
    shift 2
    for f in "$@"; do cmp -s "$a/$f" "$b/$f" || return 1; done
}

# check_resume CMD...: exact resume. CMD (a trainer and its flags, -x 8) runs with 2-step checkpoints into
# $tmp/full; its step-4 checkpoint, copied to $tmp/resumed, is resumed with -y 1. Checks that the step-8
# model and state files are bit-identical and that steps 5-8 print identical step lines
check_resume() {
    "$@" -o "$tmp/full" -n 2 >"$tmp/full.log" 2>&1
    mkdir -p "$tmp/resumed"
    cp "$tmp/full/model_00000004.bin" "$tmp/full/state_00000004_00000.bin" "$tmp/full/done_00000004.txt" "$tmp/resumed/" 2>/dev/null
    "$@" -o "$tmp/resumed" -n 2 -y 1 >"$tmp/resumed.log" 2>&1
    # shellcheck disable=SC2046
    if same_files "$tmp/full" "$tmp/resumed" $(checkpoint_files 8); then
        ok "resume from step 4: step-8 model and optimizer state bit-identical"
    else
        bad "resume from step 4: step-8 checkpoint differs (or missing): $(tail -3 "$tmp/resumed.log")"
    fi
    steplines "$tmp/full.log" | grep -E '^step +[5-8]/8 ' >"$tmp/a"
    steplines "$tmp/resumed.log" | grep -E '^step +[5-8]/8 ' >"$tmp/b"
    if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" && [ "$(wc -l <"$tmp/a")" -eq 4 ]; then
        ok "resume: steps 5-8 print identical loss, lr and norm"
    else
        bad "resume: step lines differ: $(diff "$tmp/a" "$tmp/b" | head -5)"
    fi
}

# mpi_begin: mpirun settings for the simulated multi-rank tests: MPIRUN and MPIRUN_FLAGS from the
# environment (defaults: mpirun, run as root, more ranks than cores), one thread per rank, no spinning
mpi_begin() {
    MPIRUN=${MPIRUN:-mpirun}
    MPIRUN_FLAGS=${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}
    export CUDASIM_THREADS=1 OMP_NUM_THREADS=1
    export OMPI_MCA_mpi_yield_when_idle=1 # more ranks than cores: do not spin while waiting
}
# mpi N LOG ARGS...: mpirun -np N ARGS..., stdout and stderr to LOG; its status is mpirun's
mpi() {
    local n=$1 log=$2
    shift 2
    # shellcheck disable=SC2086
    $MPIRUN $MPIRUN_FLAGS -np "$n" "$@" >"$log" 2>&1
}
