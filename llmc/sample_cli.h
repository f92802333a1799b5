/*
 * llmc/sample_cli.h — the sampling tools' command line, generation loop and output, for any model with a KV
 * cache: sample_gpt.c (./sample_gpt_cpu) and sample_gpt.cu (./sample_gpt) hold only their model's forward pass.
 *
 *   PROGRAM -e MODEL [--prompt TEXT] [--temperature 1.0] [--top-k 0] [--seed 1337] [-g 64]
 *           [--tokenizer data/gpt2_tokenizer.bin] [--ids] [--threads N (CPU tool only)]
 *
 * A model is a KvModel: `feed` runs the forward pass for one token at the next position of its cache and
 * returns the next-token logits (host, at least vocab_size floats); `reset` empties the cache.
 *
 * Sampling procedure (the same as a training run's first sample; its later samples draw on from the same
 * stream):
 *   1. rng = rng_seed(seed XOR RNG_RUN_SALT) (llmc/rng.h, xoshiro256**), as train_gpt_cpu seeds
 *      its sampling stream.
 *   2. The context is <|endoftext|> (the eot of the tokenizer, as in the trainers, --ids or not), then
 *      the prompt's tokens; each is fed through the model. The tokenizer must be readable and of the
 *      model's vocabulary, except with --ids, no --prompt and no --tokenizer: then, when the default one is
 *      not (a model of another vocabulary, another working directory), the context starts with token 0,
 *      and a note on stderr says so.
 *   3. For each of the -g tokens: sample_token(logits of the last position, V, temperature, top_k,
 *      &rng) (llmc/sampler.h) — exactly one rng_uniform draw (one rng_u64) per token when
 *      temperature > 0, none at temperature 0 — then the token is fed through the model.
 *   When the context fills the model's max_seq_len positions, the cache is emptied and refilled
 *   with the newest max_seq_len/2 tokens (their positions restart at 0), and generation goes on.
 *   The tokens equal the trainer's sample while the context fits both the model's max_seq_len and the
 *   trainer's --seq-len (the trainer slides a window of --seq-len tokens, recomputed at every token).
 *
 * Output: the prompt's text followed by the generated text; with --ids, the generated token ids
 * on one line. Diagnostics (a banner, the timing, one "error:" line) go to stderr. No global state.
 */
#ifndef LLMC_SAMPLE_CLI_H
#define LLMC_SAMPLE_CLI_H

#include <errno.h>
#include <stddef.h>
#include <time.h>
#include "llmc/cli.h"
#include "llmc/rng.h"
#include "llmc/sampler.h"
#include "llmc/tokenizer.h"

typedef struct {
    const char* model;
    const char* prompt;
    const char* tokenizer; /* NULL: not given (SAMPLE_DEFAULT_TOKENIZER, if readable) */
    float temperature;
    int top_k, seed, tokens, ids;
    int threads; /* CPU threads, 0: the OpenMP default; only the CPU tool takes --threads */
} SampleArgs;

#define SAMPLE_DEFAULT_TOKENIZER "data/gpt2_tokenizer.bin"

/* which tool parses: the CPU tool also takes --threads */
typedef enum { SAMPLE_TOOL_CPU, SAMPLE_TOOL_GPU } SampleTool;

#define SAMPLE_FLAG(s, l, type, field, def, lo, hi, help) {s, l, type, offsetof(SampleArgs, field), def, lo, hi, NULL, help}
static const CliFlag SAMPLE_FLAGS[] = {
    SAMPLE_FLAG("-e", "--model", CLI_STR, model, NULL, 0, 0, "model file (GPTM), e.g. a checkpoint's model_NNNNNNNN.bin (required)"),
    SAMPLE_FLAG(NULL, "--prompt", CLI_STR, prompt, "", 0, 0, "text to continue, after <|endoftext|>"),
    SAMPLE_FLAG(NULL, "--temperature", CLI_FLOAT, temperature, "1.0", 0, 1e6, "sampling temperature; 0: argmax"),
    SAMPLE_FLAG(NULL, "--top-k", CLI_INT, top_k, "0", 0, 1 << 24, "sample among the k most likely tokens; 0: all"),
    SAMPLE_FLAG(NULL, "--seed", CLI_INT, seed, "1337", 0, 2147483647, "random seed, as the trainer's --seed"),
    SAMPLE_FLAG("-g", "--tokens", CLI_INT, tokens, "64", 0, 1 << 24, "tokens to generate"),
    SAMPLE_FLAG(NULL, "--tokenizer", CLI_STR, tokenizer, NULL, 0, 0,
                "tokenizer file (GBPE); not given: " SAMPLE_DEFAULT_TOKENIZER " (with --ids alone, only if readable)"),
    SAMPLE_FLAG(NULL, "--ids", CLI_BOOL, ids, "0", 0, 1, "print the generated token ids instead of text"),
    SAMPLE_FLAG(NULL, "--threads", CLI_INT, threads, "0", 0, 4096, "CPU threads; 0: the OpenMP default"), /* last: the CPU tool's */
};
#define SAMPLE_FLAG_COUNT ((int)(sizeof(SAMPLE_FLAGS) / sizeof(SAMPLE_FLAGS[0])))

/* Parses argv into a with the flags `tool` takes (llmc/cli.h: --help, exit status 2 for a bad command line). */
static inline void sample_cli_parse(SampleArgs* a, int argc, char** argv, const char* program, SampleTool tool) {
    char usage[512];
    snprintf(usage, sizeof(usage), "%s -e MODEL [flags]: generate text with a KV cache", program);
    CliSpec spec = {SAMPLE_FLAGS, tool == SAMPLE_TOOL_CPU ? SAMPLE_FLAG_COUNT : SAMPLE_FLAG_COUNT - 1, usage,
                    "quote a value with spaces", "the model is given with -e"};
    memset(a, 0, sizeof(*a));
    cli_parse(&spec, a, argc, argv);
    if (!a->model) usagef("no model: give -e MODEL");
}

typedef struct {
    void* model;
    int vocab_size, capacity; /* capacity: positions the cache holds (the model's max_seq_len) */
    const float* (*feed)(void* model, int token);
    void (*reset)(void* model);
    int num_layers, num_heads, channels; /* for the banner on stderr only */
} KvModel;

/* empties the cache and feeds tokens[0..n), 1 <= n <= capacity; the logits after the last one */
static inline const float* kv_model_refill(const KvModel* m, const int* tokens, int n) {
    if (n < 1 || n > m->capacity) fatalf("KV cache refill with %d tokens, capacity %d", n, m->capacity);
    m->reset(m->model);
    const float* logits = NULL;
    for (int i = 0; i < n; i++) logits = m->feed(m->model, tokens[i]);
    return logits;
}

/* Generates `count` tokens after context[0..n_context) into out: one sample_token per token (one rng draw when
 * temperature > 0), the cache refilled with the newest capacity/2 tokens when full. on_token (may be NULL) sees
 * each new token as it comes. */
static inline void kv_generate(const KvModel* m, const int* context, int n_context, int* out, int count, float temperature, int top_k,
                               Rng* rng, void (*on_token)(int token, void* arg), void* arg) {
    int* all = (int*)malloc_check((size_t)(n_context + count) * sizeof(int));
    memcpy(all, context, (size_t)n_context * sizeof(int));
    int n = n_context, keep = m->capacity / 2 > 0 ? m->capacity / 2 : 1, length;
    int start = n > m->capacity ? n - keep : 0;
    const float* logits = kv_model_refill(m, all + start, n - start);
    length = n - start;
    for (int i = 0; i < count; i++) {
        int next = sample_token(logits, m->vocab_size, temperature, top_k, rng);
        out[i] = next;
        all[n++] = next;
        if (on_token) on_token(next, arg);
        if (i + 1 == count) break;
        if (length == m->capacity) {
            logits = kv_model_refill(m, all + n - keep, keep);
            length = keep;
        } else {
            logits = m->feed(m->model, next);
            length++;
        }
    }
    free(all);
}

static inline void sample_cli_print_token(int token, void* tokenizer) {
    if (tokenizer) {
        size_t len;
        const unsigned char* bytes = tokenizer_token_bytes((const Tokenizer*)tokenizer, token, &len);
        (void)fwrite(bytes, 1, len, stdout); /* a failed write: ferror(stdout), checked in sample_cli_run */
    } else {
        printf("%d ", token);
    }
    (void)fflush(stdout); /* the same */
}

/* The tool's run after the model is loaded: context, generation and output by the procedure of the top comment;
 * the banner and the timing on stderr. */
static inline void sample_cli_run(const SampleArgs* args, const KvModel* m, const char* program) {
    Tokenizer tokenizer;
    const char* tokenizer_path = args->tokenizer ? args->tokenizer : SAMPLE_DEFAULT_TOKENIZER;
    /* text in or out, or a tokenizer named: it must serve; with --ids alone the default gives the start token only */
    int need_tokenizer = args->prompt[0] || !args->ids || args->tokenizer;
    int have_tokenizer = need_tokenizer || access(tokenizer_path, R_OK) == 0;
    const char* why_not = have_tokenizer ? NULL : strerror(errno);
    if (have_tokenizer) {
        tokenizer_load(&tokenizer, tokenizer_path);
        if (tokenizer.vocab_size != m->vocab_size && !need_tokenizer) {
            tokenizer_free(&tokenizer);
            have_tokenizer = 0;
            why_not = "its vocabulary is not the model's";
        } else if (tokenizer.vocab_size != m->vocab_size)
            fatalf("%s: the tokenizer has %d tokens but the model %s has %d (use --ids without --prompt or --tokenizer to print ids)",
                   tokenizer_path, tokenizer.vocab_size, args->model, m->vocab_size);
    }
    if (!have_tokenizer)
        fprintf(stderr, "%s: note: no tokenizer from %s (%s): the context starts with token 0, not <|endoftext|>\n", program,
                tokenizer_path, why_not);
    int* ids = NULL;
    size_t n = args->prompt[0] ? tokenizer_encode(&tokenizer, (const unsigned char*)args->prompt, strlen(args->prompt), &ids) : 0;
    int n_context = (int)n + 1;
    int* context = (int*)malloc_check((size_t)n_context * sizeof(int));
    context[0] = have_tokenizer ? tokenizer.eot_token : 0;
    if (n) memcpy(context + 1, ids, n * sizeof(int));
    free(ids);
    fprintf(stderr, "%s: %s: %d layers, %d heads, %d channels, vocab %d, max seq len %d | start token %d, prompt %d tokens\n", program,
            args->model, m->num_layers, m->num_heads, m->channels, m->vocab_size, m->capacity, context[0], n_context - 1);
    void* printer = args->ids ? NULL : &tokenizer;
    if (printer)
        for (int i = 1; i < n_context; i++) sample_cli_print_token(context[i], printer);
    Rng rng;
    rng_seed(&rng, (uint64_t)args->seed ^ RNG_RUN_SALT);
    int* generated = (int*)malloc_check(((size_t)args->tokens + 1) * sizeof(int));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kv_generate(m, context, n_context, generated, args->tokens, args->temperature, args->top_k, &rng, sample_cli_print_token, printer);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("\n");
    if (fflush(stdout) != 0 || ferror(stdout)) sys_fatalf("%s: writing the sample to stdout failed: %s", program, strerror(errno));
    fprintf(stderr, "%s: %d tokens in %.3f s (%.1f tok/s, prompt included)\n", program, args->tokens, seconds,
            seconds > 0 ? (args->tokens + n_context) / seconds : 0.0);
    free(generated);
    free(context);
    if (have_tokenizer) tokenizer_free(&tokenizer);
}

#endif /* LLMC_SAMPLE_CLI_H */
