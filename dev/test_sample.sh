#!/usr/bin/env bash
# Tests of the sampling tool ./sample_gpt_cpu (sample_gpt.c):
#   - build/ux/test_sample_gpt: the KV-cache forward against train_gpt.c's full forward at every
#     position, and generated tokens against a cache-free generator (dev/test_sample_gpt.c);
#   - the same tokens as the CPU trainer's sample for the same model, seed, temperature and top-k
#     (train_gpt_cpu -x 0 samples once): token ids with a V=256 model, text after a prompt with a
#     GPT-2-vocabulary model and data/gpt2_tokenizer.bin; and the same text as the simulated GPU
#     trainer's (train_gpt_sim_fp32) sample;
#   - --ids with a GPT-2-vocabulary model: the ids of the text run's tokens (the same start token); --ids
#     where the default tokenizer cannot serve: start token 0 and a note; a named --tokenizer must be readable;
#   - generation past the model's max_seq_len (the cache refill) gives the requested token count;
#   - stdout on a full device: exit 1;
#   - bad input: no model, a missing or truncated model file, bad flag values, an unknown flag, a
#     prompt with a tokenizer that does not match the model: one "error:" line, non-zero exit.
# Models are written with train_gpt.py's writer, weights N(0, 0.15) so that attention is far from
# uniform. Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/testlib.sh"
test_begin 1

# between_markers FILE: the trainer's sample, the lines between "---- sample" and "----"
between_markers() { sed -n '/^---- sample$/,/^----$/p' "$1" | sed '1d;$d'; }

# ---------------------------------------------------------------- KV cache vs full forward
make_model "$tmp/small.bin" 2 3 96 300 48
./build/ux/test_sample_gpt "$tmp/small.bin" | tee "$tmp/unit.txt"
tally test_sample_gpt "${PIPESTATUS[0]}" "$tmp/unit.txt"

# ---------------------------------------------------------------- same tokens as the trainer
for setting in "0.9 40 7" "1.0 0 1337" "0 0 3"; do
    read -r temp topk seed <<<"$setting"
    flags="--seed $seed --temperature $temp --top-k $topk"
    ./train_gpt_cpu -e "$tmp/small.bin" --mock-data 1 -x 0 -v 0 -s 1 -g 40 -t 48 $flags >"$tmp/trainer.txt" 2>&1
    ./sample_gpt_cpu -e "$tmp/small.bin" --ids -g 40 $flags >"$tmp/ours.txt" 2>"$tmp/err.txt"
    want=$(between_markers "$tmp/trainer.txt" | xargs)
    got=$(xargs <"$tmp/ours.txt")
    n=$(wc -w <<<"$got")
    if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$n" -eq 40 ]; then
        ok "ids, temperature $temp, top-k $topk, seed $seed: the trainer's 40 sampled tokens ($(cut -d' ' -f1-6 <<<"$got") ...)"
    else
        bad "ids, temperature $temp, top-k $topk, seed $seed: trainer '$want' vs sample_gpt_cpu '$got' $(cat "$tmp/err.txt")"
    fi
done

make_model "$tmp/gpt2vocab.bin" 1 2 32 50257 64
prompt="The quick brown fox"
./train_gpt_cpu -e "$tmp/gpt2vocab.bin" --mock-data 1 -x 0 -v 0 -s 1 -g 30 -t 64 --seed 11 --top-k 50 --prompt "$prompt" \
    >"$tmp/trainer.txt" 2>&1
./sample_gpt_cpu -e "$tmp/gpt2vocab.bin" -g 30 --seed 11 --top-k 50 --prompt "$prompt" >"$tmp/ours.txt" 2>"$tmp/err.txt"
if between_markers "$tmp/trainer.txt" >"$tmp/want.txt" && [ -s "$tmp/want.txt" ] && cmp -s "$tmp/want.txt" "$tmp/ours.txt" &&
    [[ "$(head -c ${#prompt} "$tmp/ours.txt")" == "$prompt" ]]; then
    ok "text after --prompt '$prompt', GPT-2 vocabulary: the trainer's sample, byte for byte ($(wc -c <"$tmp/ours.txt") bytes)"
else
    bad "text after --prompt: trainer '$(head -c 200 "$tmp/want.txt")' vs sample_gpt_cpu '$(head -c 200 "$tmp/ours.txt")' $(cat "$tmp/err.txt")"
fi

# the simulated GPU trainer (train_gpt.cu in the CUDA simulator, fp32): its sample, no prompt
for setting in "1.0 50 11" "0.7 0 5"; do
    read -r temp topk seed <<<"$setting"
    flags="--seed $seed --temperature $temp --top-k $topk"
    ./train_gpt_sim_fp32 -e "$tmp/gpt2vocab.bin" --mock-data 1 -x 0 -v 0 -s 1 -g 30 -t 64 $flags >"$tmp/trainer.txt" 2>&1
    ./sample_gpt_cpu -e "$tmp/gpt2vocab.bin" -g 30 $flags >"$tmp/ours.txt" 2>"$tmp/err.txt"
    if between_markers "$tmp/trainer.txt" >"$tmp/want.txt" && [ -s "$tmp/want.txt" ] && cmp -s "$tmp/want.txt" "$tmp/ours.txt"; then
        ok "text, temperature $temp, top-k $topk, seed $seed: the simulated GPU trainer's (fp32) sample, byte for byte ($(wc -c <"$tmp/ours.txt") bytes)"
    else
        bad "text vs train_gpt_sim_fp32: '$(head -c 200 "$tmp/want.txt")' vs '$(head -c 200 "$tmp/ours.txt")' $(tail -n 2 "$tmp/trainer.txt") $(cat "$tmp/err.txt")"
    fi
done

# --ids prints the ids of the same tokens (the context starts from the tokenizer's <|endoftext|> either way)
./sample_gpt_cpu -e "$tmp/gpt2vocab.bin" -g 30 --seed 11 --ids >"$tmp/ids.txt" 2>"$tmp/ids_err.txt"
./sample_gpt_cpu -e "$tmp/gpt2vocab.bin" -g 30 --seed 11 >"$tmp/text.txt" 2>"$tmp/err.txt"
if ./tokenize --text <"$tmp/ids.txt" >"$tmp/decoded.txt" && [ -s "$tmp/text.txt" ] && [ "$(cat "$tmp/decoded.txt")" = "$(cat "$tmp/text.txt")" ]; then
    ok "--ids, GPT-2 vocabulary: the ids decode to the text run's output (but its final newline)"
else
    bad "--ids vs text: '$(head -c 100 "$tmp/ids.txt")' decodes to '$(head -c 100 "$tmp/decoded.txt")', text '$(head -c 100 "$tmp/text.txt")'"
fi

# --ids alone where the default tokenizer cannot serve (another working directory, another vocabulary): the context
# starts with token 0, and stderr says so; a --tokenizer that was named must be readable
(cd "$tmp" && "$here/sample_gpt_cpu" -e "$tmp/gpt2vocab.bin" -g 5 --ids >"$tmp/ids0.txt" 2>"$tmp/err0.txt")
rc=$?
if [ $rc -eq 0 ] && grep -q 'note: no tokenizer from data/gpt2_tokenizer.bin (No such file or directory): the context starts with token 0' "$tmp/err0.txt" &&
    grep -q 'start token 0, prompt 0 tokens' "$tmp/err0.txt" && [ "$(wc -w <"$tmp/ids0.txt")" -eq 5 ]; then
    ok "--ids in a directory without data/gpt2_tokenizer.bin: start token 0, and a note on stderr"
else bad "--ids without the default tokenizer: exit $rc, $(cat "$tmp/err0.txt")"; fi
./sample_gpt_cpu -e "$tmp/small.bin" -g 5 --ids >/dev/null 2>"$tmp/err0.txt"
if grep -q "note: no tokenizer from data/gpt2_tokenizer.bin (its vocabulary is not the model's)" "$tmp/err0.txt" &&
    grep -q 'start token 0,' "$tmp/err0.txt"; then ok "--ids with a model of another vocabulary than the default tokenizer's: start token 0, a note"
else bad "--ids, vocabulary 300: $(cat "$tmp/err0.txt")"; fi
grep -q "start token 50256," "$tmp/ids_err.txt" && ok "--ids with the default tokenizer readable: start token 50256 (<|endoftext|>) in the banner" ||
    bad "--ids with the default tokenizer: no 'start token 50256' in $(cat "$tmp/ids_err.txt")"
expect_error --alone "a named --tokenizer that does not exist, with --ids" "gpt2_tokenizr.bin.*(cannot open|No such file)" \
    ./sample_gpt_cpu -e "$tmp/gpt2vocab.bin" --ids --tokenizer "$tmp/gpt2_tokenizr.bin"

# ---------------------------------------------------------------- past max_seq_len
./sample_gpt_cpu -e "$tmp/small.bin" --ids -g 150 --seed 5 >"$tmp/ours.txt" 2>"$tmp/err.txt"
rc=$?
n=$(wc -w <"$tmp/ours.txt")
if [ $rc -eq 0 ] && [ "$n" -eq 150 ]; then
    ok "150 tokens from a model with max_seq_len 48 (the cache refills): $(tail -n 1 "$tmp/err.txt")"
else
    bad "150 tokens past max_seq_len 48: exit $rc, $n tokens, $(cat "$tmp/err.txt")"
fi

# ---------------------------------------------------------------- bad input
head -c 3000 "$tmp/small.bin" >"$tmp/trunc.bin"
expect_error --alone "no model" "give -e MODEL" ./sample_gpt_cpu --ids
expect_error --alone "missing model file" "nowhere.bin: cannot open" ./sample_gpt_cpu -e "$tmp/nowhere.bin" --ids
expect_error --alone "truncated model file" "trunc.bin.*(truncated|shorter)" ./sample_gpt_cpu -e "$tmp/trunc.bin" --ids
expect_error --alone "negative temperature" "--temperature: bad value '-1'" ./sample_gpt_cpu -e "$tmp/small.bin" --temperature -1
expect_error --alone "token count not a number" "--tokens: bad value 'ten'" ./sample_gpt_cpu -e "$tmp/small.bin" -g ten
expect_error --alone "unknown flag (a suggestion)" "unknown flag '--topk', did you mean --top-k\?" ./sample_gpt_cpu -e "$tmp/small.bin" --topk 5
expect_error --alone "the model file without -e" "unexpected argument '.*small.bin' \\(flags start with -; the model is given with -e\\)" ./sample_gpt_cpu "$tmp/small.bin"
expect_error --alone "missing value" "--seed: missing value" ./sample_gpt_cpu -e "$tmp/small.bin" --seed
rcs=$(for bad in "--topk 5" "--seed" "-g ten" "--temperature -1"; do ./sample_gpt_cpu -e "$tmp/small.bin" $bad >/dev/null 2>&1; printf '%s ' $?; done)
if [ "$rcs" = "2 2 2 2 " ]; then ok "a bad command line exits 2, as the trainers' (unknown flag, missing value, bad values)"
else bad "bad command lines exit $rcs, not 2 2 2 2"; fi
spaced=$(./sample_gpt_cpu -e "$tmp/small.bin" --ids --seed 7 -g 5 2>/dev/null)
joined=$(./sample_gpt_cpu -e="$tmp/small.bin" --ids=1 --seed=7 -g=5 2>/dev/null)
if [ -n "$spaced" ] && [ "$spaced" = "$joined" ]; then ok "the trainers' flag forms: -e=FILE --ids=1 --seed=7 -g=5 as -e FILE --ids --seed 7 -g 5"
else bad "-e=FILE --ids=1 --seed=7 -g=5 gave '$joined', the spaced form '$spaced'"; fi
expect_error --alone "prompt, tokenizer does not match the model" "tokenizer has 50257 tokens but the model .* has 300" \
    ./sample_gpt_cpu -e "$tmp/small.bin" --prompt "hello"
./sample_gpt_cpu -e "$tmp/small.bin" --ids -g 8 >/dev/full 2>"$tmp/full.err"
rc=$?
if [ $rc -eq 1 ] && grep -q '^error: sample_gpt_cpu: writing the sample to stdout failed: No space left on device' "$tmp/full.err"; then
    ok "stdout on a full device (/dev/full): exit 1, the sample is not lost silently"
else bad "stdout on /dev/full: exit $rc: $(head -c 200 "$tmp/full.err")"; fi

test_end
