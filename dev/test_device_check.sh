#!/usr/bin/env bash
# scripts/device_check.sh without a GPU: the simulator's builds (GPUCHECK_SIM=1), a fake nvidia-smi (an H100)
# and a fake compute-sanitizer (runs the program, prints its summary line; FAKE_SANITIZER_ERRORS=1: one error).
# Checks, on three runs:
#   1. a run to its budget: the steps come in the documented order, the budget's cuts are SKIP (exit 0, the
#      tally counts them apart), $OUT holds the summary with its tables and every step's log; the training
#      figures and the perf model's floors reach the tables when the training ran;
#   2. a run killed (SIGKILL, the whole process group) during the step after memcheck: $OUT still holds the
#      summary of the steps before and their logs;
#   3. a sanitizer error is a FAIL, and the exit status says so;
#   4. gpucheck.sh's rules for one step: SKIP for a tool that cannot run on the device, for a step the budget cut
#      or left out and for a check whose prerequisite was skipped; FAIL for a hang within the step's own budget,
#      a wrong log, a missing prerequisite.
# Needs the simulator builds and the reference states (make test-device-check makes them).
. "$(dirname "$0")/testlib.sh"
test_begin
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
*compute_cap*) echo "9.0" ;;
*name*) echo "NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB" ;;
*) echo "fake nvidia-smi" ;;
esac
EOF
cat >"$tmp/bin/compute-sanitizer" <<'EOF'
#!/bin/sh
tool=memcheck
while [ $# -gt 0 ]; do
    case $1 in
    --tool) tool=$2; shift 2 ;;
    --*) shift 2 ;; # the other options the device check gives take a value
    *) break ;;
    esac
done
"$@"
rc=$?
if [ "${FAKE_SANITIZER_ERRORS:-0}" = 1 ]; then echo "========= ERROR SUMMARY: 1 error"; exit 9; fi
if [ "$tool" = racecheck ]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else echo "========= ERROR SUMMARY: 0 errors"; fi
exit $rc
EOF
chmod +x "$tmp/bin/nvidia-smi" "$tmp/bin/compute-sanitizer"

# device_check OUT BUDGET [VAR=VALUE...]: the script in the simulator with the fakes first on PATH
device_check() {
    local out=$1 budget=$2
    shift 2
    env PATH="$tmp/bin:$PATH" GPUCHECK_SIM=1 OUT="$out" DEVICE_CHECK_BUDGET="$budget" PYTHON="$PYTHON" \
        GPUCHECK_REFERENCES=c_L1_H1_C32_T16_V129 GPUCHECK_TRAIN_MODEL="--n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -b 2 -t 32" \
        "$@" bash scripts/device_check.sh
}
# step_rank NAME: the step's place in the documented order (0: a build or reference step, run beside the others)
step_rank() {
    case $1 in
    "preflight: nvidia-smi") echo 1 ;;
    "preflight: cuBLASLt"*) echo 2 ;;
    "compute-sanitizer memcheck"*) echo 3 ;;
    "test_gpt "* | "sample_gpt"*) echo 4 ;;
    *"(default, --deterministic 1)"*) echo 5 ;;
    *"(atomic dQ, --deterministic 0)"*) echo 6 ;;
    "PyTorch baselines"*) echo 7 ;;
    "flash-attention benchmark") echo 8 ;;
    "kernel benchmark") echo 9 ;;
    "distributed overhead"*) echo 10 ;;
    "compute-sanitizer initcheck"*) echo 11 ;;
    "compute-sanitizer racecheck"*) echo 12 ;;
    *) echo 0 ;;
    esac
}

# 1. a run to its budget
device_check "$tmp/a" 100 >"$tmp/a.log" 2>&1
rc=$?
results=$tmp/a/steps/results.tsv
if [ $rc -eq 0 ] && ! grep -q '^FAIL' "$results" 2>/dev/null; then ok "a run without failures exits 0 ($(grep -c '^SKIP' "$results") steps skipped)"
else bad "run 1 exited $rc: $(grep '^FAIL' "$results" 2>/dev/null | head -3 | tr '\n' ' ')"; tail -20 "$tmp/a.log"; fi
order=$(cut -f 2 "$results" 2>/dev/null | while read -r name; do r=$(step_rank "$name"); [ "$r" -gt 0 ] && echo "$r"; done | tr '\n' ' ')
if [ "$(echo "$order" | tr ' ' '\n' | grep -v '^$' | sort -n -s | tr '\n' ' ')" = "$order" ] &&
    [ "$(echo "$order" | tr ' ' '\n' | grep -v '^$' | sort -un | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 11 12 " ]; then
    ok "every step recorded, in the documented order (ranks: $order)"
else bad "steps out of order or missing: ranks $order"; fi
if grep -qE $'^SKIP\t.*\t(cut by the time budget|not run: the time budget is spent)' "$results"; then ok "the budget's cuts are SKIP, with the reason"
else bad "no step was cut by the 100 s budget: the check of SKIP did not happen"; fi
tally=$(tail -n 1 "$tmp/a/summary.txt" 2>/dev/null)
if [[ "$tally" =~ ^[0-9]+\ passed,\ 0\ failed,\ [1-9][0-9]*\ skipped$ ]]; then ok "summary.txt ends with the tally: $tally"
else bad "summary.txt's last line: '$tally'"; fi
missing=""
while IFS=$'\t' read -r status name _ note; do
    slug=$(echo "$name" | tr -c 'A-Za-z0-9._-' '_' | cut -c 1-60)
    if [ "$name" != "preflight: nvidia-smi" ] && { [ "$status" != SKIP ] || [[ "$note" == "cut by"* ]]; }; then
        [ -s "$tmp/a/steps/$slug.log" ] || missing="$missing $slug"
    fi
done <"$results"
if [ -z "$missing" ]; then ok "every step that ran left its log in \$OUT/steps"; else bad "logs missing in \$OUT/steps:$missing"; fi
if grep -q '^| attention, causal, TFLOP/s' "$tmp/a/summary.txt" && grep -q '^| op (--profile' "$tmp/a/summary.txt"; then
    ok "the summary holds the tables for doc/gpu_notes.md"
else bad "no tables in summary.txt"; fi
if grep -qE $'^ok\t[^\t]*\\(default, --deterministic 1\\)' "$results"; then
    row=$(grep '^| default (--deterministic 1) |' "$tmp/a/summary.txt")
    if [[ "$row" =~ ^\|\ default\ \(--deterministic\ 1\)\ \|\ [0-9]+\ \|\ [0-9.]+%\ \|\ [0-9.]+\ \|$ ]]; then ok "the training figures reach the table: $row"
    else bad "the default run passed but its table row is '$row'"; fi
    row=$(grep '^| matmul fc forward |' "$tmp/a/summary.txt")
    if [[ "$row" =~ ^\|\ matmul\ fc\ forward\ \|\ [0-9.]+\ \|\ [0-9.-]+\ \|\ [0-9.]+\ \|\ [0-9.]+x\ \|$ ]]; then ok "profile against the perf model's floor: $row"
    else bad "matmul fc forward's row: '$row'"; fi
else bad "the default training run did not pass within the budget: its table row was not checked"; fi

# 2. killed during the step after memcheck: the summary so far and the logs stay
setsid bash -c "$(declare -f device_check); tmp='$tmp'; PYTHON='$PYTHON'; device_check '$tmp/b' 300" >"$tmp/b.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    grep -q 'compute-sanitizer memcheck' "$tmp/b/steps/results.tsv" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.2
done
sleep 1
kill -KILL -- -$pid 2>/dev/null
wait $pid 2>/dev/null
if grep -q 'compute-sanitizer memcheck' "$tmp/b/summary.txt" 2>/dev/null && grep -q 'preflight: cuBLASLt' "$tmp/b/summary.txt"; then
    ok "killed after memcheck: summary.txt lists the steps done ($(grep -cE '^(ok|SKIP|FAIL) ' "$tmp/b/summary.txt") of them)"
else bad "killed after memcheck: summary.txt is $(head -c 300 "$tmp/b/summary.txt" 2>/dev/null || echo missing)"; fi
memlog=("$tmp"/b/steps/compute-sanitizer_memcheck*.log)
if [ -f "${memlog[0]}" ] && grep -q 'ERROR SUMMARY: 0 errors' "${memlog[0]}"; then ok "killed after memcheck: its log is in \$OUT/steps"
else bad "killed after memcheck: no memcheck log in $tmp/b/steps"; fi

# 3. a sanitizer error is a failure
device_check "$tmp/c" 60 FAKE_SANITIZER_ERRORS=1 >"$tmp/c.log" 2>&1
rc=$?
fails=$(grep -c '^FAIL' "$tmp/c/steps/results.tsv" 2>/dev/null)
if [ $rc -eq 1 ] && [ "$fails" -ge 1 ] && grep -qE $'^FAIL\tcompute-sanitizer memcheck[^\t]*\t[0-9]+\texit 9: .*ERROR SUMMARY: 1 error' "$tmp/c/steps/results.tsv" &&
    [[ "$(tail -n 1 "$tmp/c/summary.txt")" =~ ^[0-9]+\ passed,\ $fails\ failed, ]]; then
    ok "memcheck reporting an error: FAIL, exit 1, counted in the tally"
else bad "memcheck reporting an error: exit $rc, $fails FAIL, tally '$(tail -n 1 "$tmp/c/summary.txt" 2>/dev/null)'"; fi
# 4. gpucheck.sh's step rules, one by one (sourced; a scratch results file)
rules() {
    # shellcheck source=scripts/gpucheck.sh
    . scripts/gpucheck.sh
    gc_dir=$tmp/rules
    mkdir -p "$gc_dir"
    : >"$gc_dir/results.tsv"
    gc_deadline=$((SECONDS + 300))
    printf '#!/bin/sh\necho "========= Error: Device not supported"\nexit 1\n' >"$tmp/unsupported"
    chmod +x "$tmp/unsupported"
    gc_step "sanitizer on an unsupported device" 30 gc_check_sanitizer "$tmp/unsupported"
    gc_step "a hang within its own budget" 1 - sleep 5
    gc_step "a wrong log" 30 gc_check_tally echo "3 passed, 1 failed"
    gc_record SKIP "prerequisite" 0 "cut"
    gc_missing "needs the skipped step" "missing" "prerequisite"
    gc_missing "needs nothing skipped" "missing" "other"
    gc_deadline=$((SECONDS + 11))
    gc_step "cut by the budget" 60 - sleep 30
    gc_step "after the budget" 60 - true
    cut -f 1,2,4 "$gc_dir/results.tsv"
}
rules >"$tmp/rules.log" 2>&1
expect_rule() { # STATUS NAME NOTE-PREFIX: the line of step NAME in the rules' results
    if awk -F'\t' -v s="$1" -v n="$2" -v p="$3" '$1 == s && $2 == n && index($4, p) == 1 { f = 1 } END { exit !f }' "$tmp/rules/results.tsv"
    then ok "$2: $1 ($3...)"
    else bad "$2: expected $1 '$3...', got: $(grep -F $'\t'"$2"$'\t' "$tmp/rules/results.tsv" | cut -f 1,4)"; fi
}
expect_rule SKIP "sanitizer on an unsupported device" "compute-sanitizer: 'Device not supported'"
expect_rule FAIL "a hang within its own budget" "timed out after 1 s"
expect_rule FAIL "a wrong log" "3 passed, 1 failed"
expect_rule SKIP "needs the skipped step" "not run: prerequisite was skipped"
expect_rule FAIL "needs nothing skipped" "missing"
expect_rule SKIP "cut by the budget" "cut by the time budget after 11 s"
expect_rule SKIP "after the budget" "not run: the time budget is spent"
test_end
