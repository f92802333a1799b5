#!/usr/bin/env bash
# Runs each make target named on the command line, reads the last "N passed, M failed"
# line of its output, and prints the total in the same form. A target that exits
# non-zero without such a line, or whose line says 0 failed while it exited non-zero,
# counts one more failure. Each target's wall time is printed after it, and the slowest
# targets at the end, so the suite's time (CI has 60 minutes) can be kept in view.
set -u
total_pass=0
total_fail=0
failed_targets=()
timings=()
suite_start=$SECONDS
for t in "$@"; do
    echo "=== $t"
    start=$SECONDS
    log=$(mktemp)
    make --no-print-directory "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^([A-Za-z_-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    rm -f "$log"
    echo "--- $t: $((SECONDS - start)) s"
    timings+=("$((SECONDS - start)) $t")
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/')
        f=$(echo "$line" | sed -E 's/^([A-Za-z_-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/')
    else
        p=0
        f=0
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    if [ "$f" -ne 0 ]; then failed_targets+=("$t"); fi
done
echo
echo "slowest targets (of $((SECONDS - suite_start)) s):"
printf '%s\n' "${timings[@]}" | sort -rn | head -n 10 | awk '{printf "  %5d s  %s\n", $1, $2}'
if [ ${#failed_targets[@]} -ne 0 ]; then echo "failing targets: ${failed_targets[*]}"; fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
