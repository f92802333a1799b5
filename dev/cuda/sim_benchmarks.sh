#!/usr/bin/env bash
# The GPU benchmarks' smoke run in the simulator (make sim-test-benchmarks): dev/cuda/bench_kernels.cu and
# dev/cuda/bench_flash_attention.cu, built with AddressSanitizer, run at a small shape and one repeat, so that a call
# outside its buffers (an illegal address on a GPU, which would end the device check's benchmark step) or a failed
# launch shows here instead of in a GPU session. Passes when each exits 0 having printed all its lines, and the flash
# output agrees with the materialised attention to within bf16 (max |difference| < 0.05 at each head dim).
# Usage: sim_benchmarks.sh BENCH_KERNELS BENCH_FLASH_ATTENTION   (simulated builds). Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/../testlib.sh"
kernels=${1:?usage: sim_benchmarks.sh BENCH_KERNELS BENCH_FLASH_ATTENTION}
flash=${2:?usage: sim_benchmarks.sh BENCH_KERNELS BENCH_FLASH_ATTENTION}
test_begin
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

"$kernels" 1 64 1 >"$tmp/kernels.txt" 2>&1
rc=$?
lines=$(grep -cE ' ms  ' "$tmp/kernels.txt")
if [ $rc -eq 0 ] && grep -q '^benchmark done$' "$tmp/kernels.txt" && [ "$lines" -ge 15 ]; then
    ok "bench_kernels 1 64 1: $lines timings, every call inside its buffers"
else
    bad "bench_kernels 1 64 1: exit $rc, $lines timings: $(grep -m 3 -iE 'error|overflow|runs past' "$tmp/kernels.txt")"
fi

"$flash" 1 70 1 >"$tmp/flash.txt" 2>&1
rc=$?
diffs=$(sed -n 's/.*max |flash out - materialised out| = //p' "$tmp/flash.txt" | xargs)
close=$(awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i < 0.05) n++; print n }' <<<"$diffs")
if [ $rc -eq 0 ] && [ "$close" = 2 ]; then
    ok "bench_flash_attention 1 70 1: d = 64 and 128 ran, max |flash - materialised| $diffs"
else
    bad "bench_flash_attention 1 70 1: exit $rc, differences '$diffs': $(grep -m 3 -iE 'error|overflow|runs past' "$tmp/flash.txt")"
fi
test_end
