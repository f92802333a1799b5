#!/usr/bin/env bash
# Shows that test_gpt_cpu can fail: each mutation below breaks the CPU trainer slightly
# (a copy of the sources in a temporary directory), and test_gpt_cpu must then fail on a
# reference state. A mutation whose text is no longer in the sources counts as a failure,
# so this list follows the code. Ends with "N passed, M failed".
set -u
ref=${1:?usage: test_mutations.sh REFERENCE_DIR}
ref=$(cd "$ref" && pwd) || exit 1
. "$(dirname "$0")/testlib.sh"
test_begin
# file | text | replacement | what it breaks
mutations=(
    "llmc/cpu_ops.h|(1.0f + 3.0f * 0.044715f * x * x)|(1.0f + 3.0f * 0.045715f * x * x)|GELU derivative: 0.044715 -> 0.045715"
    "train_gpt.c|float wd = gpt_param_decays(i) ? oc->weight_decay : 0.0f;|float wd = oc->weight_decay;|weight decay on every tensor"
    "llmc/cpu_ops.h|float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, t));|float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, t + 1));|AdamW second-moment bias correction one step late"
    "llmc/cpu_ops.h|float s = 1.0f / sqrtf(sq / C + 1e-5f);|float s = 1.0f / sqrtf(sq / C + 1e-4f);|layernorm epsilon 1e-5 -> 1e-4"
)
for m in "${mutations[@]}"; do
    IFS='|' read -r file text replacement what <<<"$m"
    rm -rf "$tmp/src"
    mkdir -p "$tmp/src"
    cp -r "$here/train_gpt.c" "$here/test_gpt.c" "$here/llmc" "$tmp/src/"
    if ! grep -qF "$text" "$tmp/src/$file"; then
        bad "$what: text not found in $file (update this mutation)"
        continue
    fi
    TEXT="$text" REPL="$replacement" perl -0pi -e 's/\Q$ENV{TEXT}\E/$ENV{REPL}/' "$tmp/src/$file"
    if ! gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I"$tmp/src" -o "$tmp/t" "$tmp/src/test_gpt.c" -lm -lpthread; then
        bad "$what: mutant does not compile"
        continue
    fi
    out=$(OMP_NUM_THREADS=2 "$tmp/t" "$ref" 2>&1)
    if [ $? -ne 0 ]; then
        ok "$what: test_gpt fails ($(echo "$out" | grep -E '^worst'))"
    else
        bad "$what: test_gpt still passes"
    fi
done
test_end
