#!/usr/bin/env bash
# Runs a simulated test_gpt build (BIN) on every reference state under DIR (recompute 0), then the extra
# runs named NAME:LEVEL (config directory name, recompute level); prints the summed "N passed, M failed".
# Usage: test_gpt_sim.sh BIN DIR [NAME:LEVEL...]
set -u
bin=${1:?usage: test_gpt_sim.sh BIN DIR}
dir=${2:?usage: test_gpt_sim.sh BIN DIR}
pass=0
fail=0
run() {
    local out rc line
    out=$("$bin" "$@" 2>&1)
    rc=$?
    echo "$out" | grep -v '^         step' | grep -vE ' ok$'
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -n "$line" ]; then
        pass=$((pass + $(echo "$line" | cut -d' ' -f1)))
        fail=$((fail + $(echo "$line" | cut -d' ' -f3)))
    fi
    if [ $rc -ne 0 ] && { [ -z "$line" ] || [ "$(echo "$line" | cut -d' ' -f3)" = 0 ]; }; then fail=$((fail + 1)); fi
}
for d in "$dir"/*/; do
    [ -f "$d/reference.bin" ] || continue
    run "$d" 0
done
shift 2
for extra in "$@"; do
    if [ -d "$dir/${extra%%:*}" ]; then run "$dir/${extra%%:*}" "${extra##*:}"
    else echo "FAIL  no reference state $dir/${extra%%:*}"; fail=$((fail + 1)); fi
done
if [ $((pass + fail)) -eq 0 ]; then echo "no reference states under $dir"; fail=1; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
