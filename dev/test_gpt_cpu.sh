#!/usr/bin/env bash
# Runs ./test_gpt_cpu on every reference state under DIR (one per config, written by
# dev/gen_references.sh) and prints the summed "N passed, M failed".
set -u
dir=${1:?usage: test_gpt_cpu.sh DIR}
. "$(dirname "$0")/testlib.sh"
test_begin
for d in "$dir"/*/; do
    [ -f "$d/reference.bin" ] || continue
    OMP_NUM_THREADS=2 ./test_gpt_cpu "$d" >"$tmp/out" 2>&1
    rc=$?
    grep -v '^         step' "$tmp/out"
    tally "test_gpt_cpu $d" $rc "$tmp/out"
done
if [ $((pass + fail)) -eq 0 ]; then bad "no reference states under $dir"; fi
test_end
