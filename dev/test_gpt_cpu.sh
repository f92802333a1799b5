#!/usr/bin/env bash
# Runs ./test_gpt_cpu on every reference state under DIR (one per config, written by
# dev/gen_references.sh) and prints the summed "N passed, M failed".
set -u
dir=${1:?usage: test_gpt_cpu.sh DIR}
pass=0
fail=0
for d in "$dir"/*/; do
    [ -f "$d/reference.bin" ] || continue
    out=$(OMP_NUM_THREADS=2 ./test_gpt_cpu "$d" 2>&1)
    rc=$?
    echo "$out" | grep -v '^         step' 
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -n "$line" ]; then
        pass=$((pass + $(echo "$line" | cut -d' ' -f1)))
        fail=$((fail + $(echo "$line" | cut -d' ' -f3)))
    fi
    if [ $rc -ne 0 ] && { [ -z "$line" ] || [ "$(echo "$line" | cut -d' ' -f3)" = 0 ]; }; then fail=$((fail + 1)); fi
done
if [ $((pass + fail)) -eq 0 ]; then echo "no reference states under $dir"; fail=1; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
