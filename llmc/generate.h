/*
 * llmc/generate.h — the trainers' periodic text samples, shared by train_gpt.c and train_gpt.cu.
 *
 * A sample continues a context: <|endoftext|> followed by the --prompt's tokens. The tokenizer
 * (GBPE file) is used only when its vocabulary is the model's; otherwise samples are printed as
 * token ids and start from token 0 (a prompt then is an error). Each new token is drawn with
 * sample_token (llmc/sampler.h) from the logits of the last position, which the trainer computes
 * through its `next_logits` callback over at most `window` trailing tokens (a prompt longer than the
 * window too, as sample_gpt does). A diverged model's logits that are not all finite end the
 * sample with a note (the trainer's health guard judges the run; sample_gpt stops instead). A stop signal
 * (llmc/signals.h) cuts a sample short, so that a preempted run checkpoints in time whatever -g is
 * (the trainer then drops the unfinished step, Rng included, and a resumed run samples again).
 */
#ifndef LLMC_GENERATE_H
#define LLMC_GENERATE_H

#include <unistd.h>
#include "llmc/fileio.h"
#include "llmc/rng.h"
#include "llmc/sampler.h"
#include "llmc/signals.h"
#include "llmc/tokenizer.h"

typedef struct {
    Tokenizer tokenizer;
    int have_tokenizer;
    int* context; /* <|endoftext|> (or 0), then the prompt */
    int n_context;
    int vocab_size;
} SampleSetup;

/* logits (at least vocab_size floats, host memory) of the position after tokens[0..n) */
typedef const float* (*NextLogitsFn)(void* model, const int* tokens, int n);

static inline void sample_setup(SampleSetup* s, int enabled, const char* tokenizer_path, const char* prompt, int vocab_size) {
    memset(s, 0, sizeof(*s));
    s->vocab_size = vocab_size;
    if (enabled && access(tokenizer_path, R_OK) != 0) {
        if (prompt[0])
            sys_fatalf("--prompt needs the tokenizer, but %s cannot be read: %s (a relative path counts from the current directory: "
                       "run from the repository root, or give --tokenizer PATH)", tokenizer_path, strerror(errno));
        printf("samples: cannot read the tokenizer %s (%s; a relative path counts from the current directory): printing "
               "token ids\n", tokenizer_path, strerror(errno));
    } else if (enabled) {
        tokenizer_load(&s->tokenizer, tokenizer_path);
        s->have_tokenizer = 1;
        if (s->tokenizer.vocab_size != vocab_size) {
            printf("samples: %s has %d tokens, the model %d: printing token ids\n", tokenizer_path, s->tokenizer.vocab_size,
                   vocab_size);
            tokenizer_free(&s->tokenizer);
            s->have_tokenizer = 0;
        }
    }
    int* ids = NULL;
    size_t n = 0;
    if (prompt[0]) {
        if (!s->have_tokenizer) fatalf("--prompt needs a tokenizer whose vocabulary is the model's (--tokenizer %s)", tokenizer_path);
        n = tokenizer_encode(&s->tokenizer, (const unsigned char*)prompt, strlen(prompt), &ids);
        printf("prompt: %zu tokens\n", n);
    }
    s->context = (int*)malloc_check((n + 1) * sizeof(int));
    s->context[0] = s->have_tokenizer ? s->tokenizer.eot_token : 0;
    if (n) memcpy(s->context + 1, ids, n * sizeof(int));
    free(ids);
    s->n_context = (int)n + 1;
}

static inline void sample_print_token(const SampleSetup* s, int id) {
    if (s->have_tokenizer) {
        size_t len;
        const unsigned char* bytes = tokenizer_token_bytes(&s->tokenizer, id, &len);
        (void)fwrite(bytes, 1, len, stdout); /* stdout, the trainer's log, is checked once a step (train_flush_stdout) */
    } else {
        printf("%d ", id);
    }
}

/* Prints the prompt, then `count` generated tokens as they come. */
static inline void sample_generate(const SampleSetup* s, NextLogitsFn next_logits, void* model, int count, int window,
                                   float temperature, int top_k, Rng* rng) {
    int* ctx = (int*)malloc_check(((size_t)count + (size_t)s->n_context) * sizeof(int));
    memcpy(ctx, s->context, (size_t)s->n_context * sizeof(int));
    int n = s->n_context;
    printf("---- sample\n");
    for (int i = 1; i < s->n_context && s->have_tokenizer; i++) sample_print_token(s, ctx[i]);
    for (int i = 0; i < count; i++) {
        if (preempt_requested()) {
            printf(" [cut short by a stop signal]");
            break;
        }
        int start = n > window ? n - window : 0;
        const float* logits = next_logits(model, ctx + start, n - start);
        int finite = 1;
        for (int v = 0; v < s->vocab_size; v++) finite &= isfinite(logits[v]) != 0;
        if (!finite) {
            printf(" [stopped: the model's logits are not finite]");
            break;
        }
        int next = sample_token(logits, s->vocab_size, temperature, top_k, rng);
        ctx[n++] = next;
        sample_print_token(s, next);
        (void)fflush(stdout); /* the same */
    }
    printf("\n----\n");
    free(ctx);
}

static inline void sample_setup_free(SampleSetup* s) {
    if (s->have_tokenizer) tokenizer_free(&s->tokenizer);
    free(s->context);
}

#endif
