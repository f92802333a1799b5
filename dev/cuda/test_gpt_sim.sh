#!/usr/bin/env bash
# Runs a simulated test_gpt build (BIN) on every reference state under DIR (recompute 0), then the extra
# runs named NAME:LEVEL (config directory name, recompute level); prints the summed "N passed, M failed".
# Usage: test_gpt_sim.sh BIN DIR [NAME:LEVEL...]
set -u
bin=${1:?usage: test_gpt_sim.sh BIN DIR}
dir=${2:?usage: test_gpt_sim.sh BIN DIR}
. "$(dirname "$0")/../testlib.sh"
test_begin
run() { # run DIR LEVEL: BIN on one reference state, its counts added to ours
    "$bin" "$@" >"$tmp/out" 2>&1
    local rc=$?
    grep -v '^         step' "$tmp/out" | grep -vE ' ok$'
    tally "$bin $*" $rc "$tmp/out"
}
for d in "$dir"/*/; do
    [ -f "$d/reference.bin" ] || continue
    run "$d" 0
done
shift 2
for extra in "$@"; do
    if [ -d "$dir/${extra%%:*}" ]; then run "$dir/${extra%%:*}" "${extra##*:}"
    else bad "no reference state $dir/${extra%%:*}"; fi
done
if [ $((pass + fail)) -eq 0 ]; then bad "no reference states under $dir"; fi
test_end
