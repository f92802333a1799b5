#!/usr/bin/env bash
# End-to-end tests of the simulated GPU trainer (./train_gpt_sim bf16, ./train_gpt_sim_fp32):
#   - side by side with the CPU trainer: the same initial model (written by train_gpt.py) and shards give
#     the same loss at each of 20 steps: bf16 within 2e-2 absolute, fp32 within 1e-4 relative;
#   - GELU apart from the matmuls in bf16: --gelu-fusion 0, and the fallback when cuBLASLt has no GELU epilogue kernels
#     (CUDASIM_CUBLASLT_NO_GELU: the fake's heuristic refuses them with a note), give the same step lines, within
#     2e-2 of the fused run; --gelu-fusion 0 and the fp32 build never ask cuBLASLt for a GELU epilogue (no note);
#   - determinism: two identical runs print identical step lines (loss, lr, norm);
#   - exact resume: a run resumed from its step-4 checkpoint writes a step-8 checkpoint bit-identical to
#     the uninterrupted run's, and prints the same step lines; so does one resumed from a checkpoint
#     whose update the health guard skipped;
#   - recompute (-r 2): the same losses within 2e-2, and the memory report says what it saved;
#   - bad input, before any kernel runs: model file vs flags, sequence too long, batch too big for memory, a head
#     size whose flash attention needs more shared memory than the GPU has (CUDASIM_SMEM_OPTIN), B > 65535.
# Token shards are written by dev/fuzz/write_shard.py, which follows doc/formats.md. Ends with "N passed, M failed".
set -u
set -f # the shard glob below is for the trainers to expand, not the shell
. "$(dirname "$0")/../testlib.sh"
test_begin 2

write_shard "$tmp/train_000.bin" 256 12000 periodic
write_shard "$tmp/val_000.bin" 256 3000 periodic
"$PYTHON" train_gpt.py --train-data "$tmp/train_*.bin" --n-layer 2 --n-head 2 --n-embd 32 --vocab-size 256 -t 32 -b 4 \
    --steps 1 --seed 11 --write-model "$tmp/init.bin" --threads 2 >"$tmp/py.log" 2>&1 || { cat "$tmp/py.log"; }
common="-e $tmp/init.bin -i $tmp/train_*.bin --shuffle 0 -b 4 -t 32 -l 3e-3 -u 2 -s 0 -v 0"

# ---------------------------------------------------------------- vs the CPU trainer
./train_gpt_cpu $common -x 20 >"$tmp/cpu.log" 2>&1
./train_gpt_sim $common -x 20 >"$tmp/bf16.log" 2>&1
CUDASIM_CUBLASLT_NO_GELU=1 ./train_gpt_sim_fp32 $common -x 20 >"$tmp/fp32.log" 2>&1
compare_losses "bf16 sim trainer vs train_gpt_cpu" "$tmp/bf16.log" "$tmp/cpu.log" 2e-2 abs
compare_losses "fp32 sim trainer vs train_gpt_cpu" "$tmp/fp32.log" "$tmp/cpu.log" 1e-4 rel

# ---------------------------------------------------------------- GELU apart from the matmuls
# the fake cuBLASLt notes each GELU epilogue its heuristic refuses under CUDASIM_CUBLASLT_NO_GELU=1
note='no algorithm for GELU epilogue'
CUDASIM_CUBLASLT_NO_GELU=1 ./train_gpt_sim $common -x 20 >"$tmp/nogelu.log" 2>&1
CUDASIM_CUBLASLT_NO_GELU=1 ./train_gpt_sim $common -x 20 --gelu-fusion 0 >"$tmp/gelu0.log" 2>&1
if grep -q "$note" "$tmp/nogelu.log"; then
    compare_losses "bf16, no GELU epilogue in cuBLASLt (unfused fallback) vs the fused run" "$tmp/nogelu.log" "$tmp/bf16.log" 2e-2 abs
else bad "CUDASIM_CUBLASLT_NO_GELU: the fake's heuristic never refused a GELU epilogue: $(tail -2 "$tmp/nogelu.log")"; fi
if grep -q "$note" "$tmp/gelu0.log"; then
    bad "--gelu-fusion 0 asked cuBLASLt for a GELU epilogue: $(grep -m1 "$note" "$tmp/gelu0.log")"
else
    compare_losses "bf16 --gelu-fusion 0 (no GELU epilogue asked) vs the fused run" "$tmp/gelu0.log" "$tmp/bf16.log" 2e-2 abs
    same_steplines "bf16 --gelu-fusion 0 vs the unfused fallback" "$tmp/gelu0.log" "$tmp/nogelu.log"
fi
if grep -q "$note" "$tmp/fp32.log"; then bad "the fp32 build asked cuBLASLt for a GELU epilogue: $(grep -m1 "$note" "$tmp/fp32.log")"
else ok "the fp32 build asked cuBLASLt for no GELU epilogue (CUDASIM_CUBLASLT_NO_GELU noted none)"; fi

# ---------------------------------------------------------------- determinism and recompute
./train_gpt_sim $common -x 20 >"$tmp/bf16_again.log" 2>&1
same_steplines "determinism: a second bf16 run" "$tmp/bf16.log" "$tmp/bf16_again.log"
./train_gpt_sim $common -x 20 -r 2 >"$tmp/r2.log" 2>&1
if grep -q 'recompute 2: .*saves' "$tmp/r2.log"; then
    compare_losses "recompute 2 vs recompute 0 ($(grep 'recompute 2:' "$tmp/r2.log"))" "$tmp/r2.log" "$tmp/bf16.log" 2e-2 abs
else
    bad "recompute 2: no memory report: $(grep -E 'recompute|error' "$tmp/r2.log" | head -3)"
fi

# ---------------------------------------------------------------- exact resume
check_resume ./train_gpt_sim $common -x 8 -d 256

# exact resume from a checkpoint whose own update the health guard skipped: bf16 parameters carry the rounding of the
# last update applied, and a skipped update is no AdamW step
skip="--mock-data 1 --n-layer 2 --n-head 2 --n-embd 32 --vocab-size 200 -b 4 -t 16 -x 12 -l 3e-3 -u 2 -v 0 -s 0"
skip="$skip --spike-zscore 0.3 --spike-window 2 --max-bad-steps 0 -n 1"
./train_gpt_sim $skip -o "$tmp/skip_full" >"$tmp/skip_full.log" 2>&1
k=$(grep -m1 'update skipped' "$tmp/skip_full.log" | awk '{print $2}' | cut -d/ -f1)
if [ -n "$k" ] && [ "$k" -lt 12 ]; then
    mkdir -p "$tmp/skip_res"
    k8=$(printf %08d "$k")
    cp "$tmp/skip_full/model_$k8.bin" "$tmp/skip_full/state_${k8}_00000.bin" "$tmp/skip_full/done_$k8.txt" "$tmp/skip_res/"
    ./train_gpt_sim $skip -o "$tmp/skip_res" -y 1 >"$tmp/skip_res.log" 2>&1
    if cmp -s "$tmp/skip_full/model_00000012.bin" "$tmp/skip_res/model_00000012.bin"; then
        ok "resume from step $k, whose update was skipped (spike): the step-12 model is bit-identical"
    else bad "resume from step $k, whose update was skipped: the step-12 model differs: $(tail -2 "$tmp/skip_res.log")"; fi
else
    bad "no update was skipped in the spike run (the test needs one): $(grep -m2 -E 'skipped|error' "$tmp/skip_full.log")"
fi

# a checkpoint of the CPU trainer (fp32) resumed by the bf16 one: the precision change is said, and the run goes on
./train_gpt_cpu $common -x 4 -n 4 -o "$tmp/prec" >/dev/null 2>&1
./train_gpt_sim $common -x 6 -n 3 -o "$tmp/prec" -y 1 >"$tmp/prec.log" 2>&1
if grep -q 'state_00000004_00000.bin: precision was fp32, now bf16$' "$tmp/prec.log" && grep -qE '^step +6/6 ' "$tmp/prec.log"; then
    ok "a CPU trainer's checkpoint resumed in bf16: $(grep -m1 'precision was' "$tmp/prec.log" | sed 's|.*/||')"
else bad "a CPU trainer's checkpoint resumed in bf16: $(grep -E 'resume|was|error' "$tmp/prec.log" | head -4)"; fi

# ---------------------------------------------------------------- bad input
expect_error "vocabulary flag differs from the model file" "init.bin.*vocab" ./train_gpt_sim $common -x 1 --vocab-size 300
expect_error "max-seq-len flag differs from the model file" "init.bin.*maximum sequence length" ./train_gpt_sim $common -x 1 --max-seq-len 64
expect_error "sequence longer than the model's" "seq-len 64.*32" ./train_gpt_sim $common -x 1 -t 64
expect_error "batch too big for device memory (says how much)" "does not fit in device memory: needs [0-9.]+ GiB.*try a smaller -b" \
    ./train_gpt_sim -e d12 --mock-data -b 512 -t 1024 -x 1 -s 0 -v 0
# the memory check counts every allocation: a device of exactly the bytes it asks for trains (it missed the
# communication scalar: 4 bytes short, a raw cudaMalloc failure instead of its message)
fit=(--mock-data 1 --n-layer 1 --n-head 2 --n-embd 32 --vocab-size 64 -b 2 -t 16 -x 1 -s 0 -v 0)
short=$(CUDASIM_MEM_BYTES=33500000 ./train_gpt_sim "${fit[@]}" 2>&1 | sed -nE 's/.*\), ([0-9]+) bytes more than .*/\1/p')
if [ -n "$short" ] && CUDASIM_MEM_BYTES=$((33500000 + short)) ./train_gpt_sim "${fit[@]}" >"$tmp/exact.log" 2>&1 &&
    grep -qE '^step +1/1 ' "$tmp/exact.log"; then
    ok "a device of exactly the bytes the memory check asks for (33500000 + $short) trains"
else
    bad "a device of the bytes the memory check asks for (33500000 + ${short:-?}): $(grep -m1 '^error' "$tmp/exact.log")"
fi
expect_error "-r 2 already given: not advised again" "does not fit in device memory: needs [0-9.]+ GiB.*\(try a smaller -b\)$" \
    ./train_gpt_sim -e d12 --mock-data -b 512 -t 1024 -x 1 -s 0 -v 0 -r 2
expect_error "a model whose own state does not fit (a 1e9-byte device): says so, and what helps" \
    "the weights, gradients and optimizer state alone need 1.85 GiB: shard the optimizer state over more GPUs with -z 1, or drop the fp32 master copy with -w 0" \
    env CUDASIM_MEM_BYTES=1000000000 ./train_gpt_sim -e d12 --mock-data -b 1 -t 8 -x 1 -s 0 -v 0
expect_error "a small model one step short of memory: its figures in MiB and bytes, the shortfall named" \
    "needs 34.8 MiB \(parameters 238080 bytes, .*\), [0-9]+ bytes more than the 34.3 MiB free" \
    env CUDASIM_MEM_BYTES=36000000 ./train_gpt_sim --mock-data 1 --n-layer 2 --n-head 2 --n-embd 64 --vocab-size 129 -b 4 -t 40 -x 1 -s 0 -v 0
expect_error "head size above the GPU's shared memory (an A100's 166912 bytes, head size 256)" \
    "head size 256 needs [0-9]+ bytes of shared memory a block in flash attention, more than this GPU's 166912" \
    env CUDASIM_SMEM_OPTIN=166912 ./train_gpt_sim --mock-data 1 --vocab-size 64 --n-layer 1 --n-head 1 --n-embd 256 -b 2 -t 8 -x 1 -s 0 -v 0
if env CUDASIM_SMEM_OPTIN=166912 ./train_gpt_sim --mock-data 1 --vocab-size 64 --n-layer 1 --n-head 2 --n-embd 256 -b 2 -t 8 -x 1 -s 0 -v 0 \
    >"$tmp/a100.log" 2>&1 && grep -q '^step  *1/1 | loss' "$tmp/a100.log"; then
    ok "head size 128 trains within an A100's shared memory"
else
    bad "head size 128 with an A100's shared memory: $(grep -m 2 error "$tmp/a100.log")"
fi
expect_error "a micro-batch above flash attention's grid (B > 65535)" "batch size 65536: flash attention takes at most 65535" \
    ./train_gpt_sim --mock-data 1 --vocab-size 16 --n-layer 1 --n-head 1 --n-embd 8 -b 65536 -t 1 -x 1 -s 0 -v 0
expect_error "ZeRO stage 2 is rejected (exit 2)" "zero: bad value '2'" ./train_gpt_sim $common -x 1 -z 2
expect_error "no master weights in the fp32 build (its weights are fp32)" "master-weights 0 is not supported: the fp32 build" \
    ./train_gpt_sim_fp32 $common -x 1 -w 0
for flag in --grad-comm --lr-scale --dist-init; do
    expect_error "$flag with an unknown word" "$flag: bad value 'bogus': expected [a-z0-9|]+ \\(see --help\\)" ./train_gpt_sim $common -x 1 $flag bogus
done

test_end
