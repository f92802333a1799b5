#!/usr/bin/env bash
# Tests of the GPU sampling tool sample_gpt.cu in the CUDA simulator:
#   - sample_gpt_sim_fp32 generates exactly sample_gpt_cpu's token ids for the same model, seed, temperature and
#     top-k (3 settings, 120 tokens from a model with max_seq_len 48, so the cache refill is taken twice; and a model
#     of head size 7, one of 45 channels, one of head size 264: decoding takes any, the trainer at most 256), and the same text after a --prompt with a GPT-2-vocabulary model and data/gpt2_tokenizer.bin;
#   - the bf16 build (sample_gpt_sim): greedy (temperature 0) ids equal sample_gpt_cpu's for the first 10 tokens
#     (bf16 logits differ from fp32 by ~1e-2 relative; these random models' top-2 gaps are far larger), 120
#     sampled ids all inside the vocabulary, and text after a prompt that starts with the prompt;
#   - bad input: one "error:" line, non-zero exit.
# Models are written with train_gpt.py's writer, weights N(0, 0.15) (as dev/test_sample.sh). Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/../testlib.sh"
test_begin 1

make_model "$tmp/small.bin" 2 3 96 300 48
make_model "$tmp/hs7.bin" 2 8 56 300 48 # head size 7: not a multiple of 8
make_model "$tmp/c45.bin" 2 3 45 300 48 # channels 45: the layernorm, encoder and flash attention element by element
make_model "$tmp/hs264.bin" 1 1 264 100 48 # head size 264: above flash attention's 256, which decoding does not use
for setting in "small 0.9 40 7" "small 1.0 0 1337" "small 0 0 3" "hs7 1.0 0 9" "c45 0.8 20 21" "hs264 1.0 0 4"; do
    read -r model temp topk seed <<<"$setting"
    flags="--ids -g 120 --seed $seed --temperature $temp --top-k $topk"
    ./sample_gpt_cpu -e "$tmp/$model.bin" $flags >"$tmp/cpu.txt" 2>"$tmp/err.txt"
    ./sample_gpt_sim_fp32 -e "$tmp/$model.bin" $flags >"$tmp/gpu.txt" 2>>"$tmp/err.txt"
    rc=$?
    want=$(xargs <"$tmp/cpu.txt")
    got=$(xargs <"$tmp/gpu.txt")
    if [ $rc -eq 0 ] && [ "$(wc -w <<<"$got")" -eq 120 ] && [ "$want" = "$got" ]; then
        ok "fp32 ids = sample_gpt_cpu's, $model.bin, temperature $temp, top-k $topk, seed $seed, 120 tokens past max_seq_len 48 ($(cut -d' ' -f1-6 <<<"$got") ...)"
    else
        bad "fp32 ids, $model.bin, temperature $temp, top-k $topk, seed $seed: exit $rc, cpu '$want' vs gpu '$got' $(cat "$tmp/err.txt")"
    fi
done

make_model "$tmp/gpt2vocab.bin" 1 2 32 50257 64
prompt="The quick brown fox"
./sample_gpt_cpu -e "$tmp/gpt2vocab.bin" -g 30 --seed 11 --top-k 50 --prompt "$prompt" >"$tmp/cpu.txt" 2>"$tmp/err.txt"
./sample_gpt_sim_fp32 -e "$tmp/gpt2vocab.bin" -g 30 --seed 11 --top-k 50 --prompt "$prompt" >"$tmp/gpu.txt" 2>>"$tmp/err.txt"
if [ -s "$tmp/gpu.txt" ] && cmp -s "$tmp/cpu.txt" "$tmp/gpu.txt"; then
    ok "fp32 text after --prompt '$prompt' = sample_gpt_cpu's, byte for byte ($(wc -c <"$tmp/gpu.txt") bytes)"
else
    bad "fp32 text after --prompt: cpu '$(head -c 200 "$tmp/cpu.txt")' vs gpu '$(head -c 200 "$tmp/gpu.txt")' $(cat "$tmp/err.txt")"
fi

# ---------------------------------------------------------------- bf16
./sample_gpt_cpu -e "$tmp/small.bin" --ids -g 10 --temperature 0 >"$tmp/cpu.txt" 2>"$tmp/err.txt"
./sample_gpt_sim -e "$tmp/small.bin" --ids -g 10 --temperature 0 >"$tmp/gpu.txt" 2>>"$tmp/err.txt"
want=$(xargs <"$tmp/cpu.txt")
got=$(xargs <"$tmp/gpu.txt")
if [ -n "$got" ] && [ "$want" = "$got" ]; then ok "bf16 greedy ids = sample_gpt_cpu's for 10 tokens ($got)"
else bad "bf16 greedy ids: cpu '$want' vs gpu '$got' $(cat "$tmp/err.txt")"; fi
./sample_gpt_sim -e "$tmp/small.bin" --ids -g 120 --seed 5 --top-k 40 >"$tmp/gpu.txt" 2>"$tmp/err.txt"
rc=$?
n=$(wc -w <"$tmp/gpu.txt")
outside=$(tr ' ' '\n' <"$tmp/gpu.txt" | awk 'NF && ($1 < 0 || $1 >= 300)' | wc -l)
if [ $rc -eq 0 ] && [ "$n" -eq 120 ] && [ "$outside" -eq 0 ]; then ok "bf16: 120 sampled ids in [0, 300) past max_seq_len 48: $(tail -n 1 "$tmp/err.txt")"
else bad "bf16 120 tokens: exit $rc, $n tokens, $outside outside the vocabulary, $(cat "$tmp/err.txt")"; fi
./sample_gpt_sim -e "$tmp/gpt2vocab.bin" -g 30 --seed 11 --top-k 50 --prompt "$prompt" >"$tmp/gpu.txt" 2>"$tmp/err.txt"
rc=$?
if [ $rc -eq 0 ] && [[ "$(head -c ${#prompt} "$tmp/gpu.txt")" == "$prompt" ]] && [ "$(wc -c <"$tmp/gpu.txt")" -gt $((${#prompt} + 30)) ]; then
    ok "bf16 text after --prompt: '$(head -c 80 "$tmp/gpu.txt" | tr '\n' ' ')...'"
else
    bad "bf16 text after --prompt: exit $rc, '$(head -c 200 "$tmp/gpu.txt")' $(cat "$tmp/err.txt")"
fi

# ---------------------------------------------------------------- bad input
head -c 3000 "$tmp/small.bin" >"$tmp/trunc.bin"
expect_error --alone "no model" "give -e MODEL" ./sample_gpt_sim --ids
expect_error --alone "missing model file" "nowhere.bin: cannot open" ./sample_gpt_sim -e "$tmp/nowhere.bin" --ids
expect_error --alone "truncated model file" "trunc.bin.*(truncated|shorter)" ./sample_gpt_sim -e "$tmp/trunc.bin" --ids
expect_error --alone "negative temperature" "--temperature: bad value '-1'" ./sample_gpt_sim -e "$tmp/small.bin" --temperature -1
expect_error --alone "unknown flag" "unknown flag '--topk'" ./sample_gpt_sim -e "$tmp/small.bin" --topk 5
expect_error --alone "missing value" "--seed: missing value" ./sample_gpt_sim -e "$tmp/small.bin" --seed
expect_error --alone "prompt, tokenizer does not match the model" "tokenizer has 50257 tokens but the model .* has 300" \
    ./sample_gpt_sim -e "$tmp/small.bin" --prompt "hello"

test_end
