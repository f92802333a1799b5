/*
 * sample_gpt.c — generate text from a model file on the CPU, with a KV cache.
 *
 *   ./sample_gpt_cpu -e MODEL [--prompt TEXT] [--temperature 1.0] [--top-k 0] [--seed 1337]
 *                    [-g 64] [--tokenizer data/gpt2_tokenizer.bin] [--ids] [--threads N]
 *
 * The model (parameters, config, the full forward pass) is train_gpt.c's, included with TESTING
 * defined; the ops are llmc/cpu_ops.h's. What this file adds is the incremental forward: one new
 * position attends to the keys and values of all earlier positions, kept in a cache, so a token
 * costs O(T) attention work instead of re-running the whole O(T²) context.
 *
 * Sampling procedure (the same as the trainer's samples, so a GPU tool can reproduce the tokens):
 *   1. rng = rng_seed(seed XOR 0x5A4D504C45) (llmc/rng.h, xoshiro256**), as train_gpt_cpu seeds
 *      its sampling stream.
 *   2. The context is <|endoftext|> (the tokenizer's eot; token 0 without a tokenizer), then the
 *      prompt's tokens; each is fed through the incremental forward.
 *   3. For each of the -g tokens: sample_token(logits of the last position, V, temperature, top_k,
 *      &rng) (llmc/sampler.h) — exactly one rng_uniform draw (one rng_u64) per token when
 *      temperature > 0, none at temperature 0 — then the token is fed through the forward.
 *   When the context fills the model's max_seq_len positions, the cache is emptied and refilled
 *   with the newest max_seq_len/2 tokens (their positions restart at 0), and generation goes on.
 *   Up to that point the tokens equal the trainer's sample (whose window is its --seq-len).
 *
 * Output: the prompt's text followed by the generated text; with --ids, the generated token ids
 * on one line. Diagnostics go to stderr. test_sample_gpt.c includes this file with
 * SAMPLE_GPT_TESTING defined, to reuse the cache without main().
 */
#define TESTING
#include "train_gpt.c"
#include "llmc/sampler.h"
#include "llmc/tokenizer.h"

/* ----------------------------------------------------------------------------
 * The KV cache: each layer's keys and values of every position fed so far, and one position's
 * worth of every activation of the forward pass. */

typedef struct {
    int capacity; /* positions the cache holds: the model's max_seq_len */
    int length;   /* positions filled; the next token goes to position `length` */
    float* keys;   /* (L, capacity, C) */
    float* values; /* (L, capacity, C) */
    float* x;      /* (C)   the residual stream of the new position */
    float* ln;     /* (C)   a layernorm's output */
    float* qkv;    /* (3C) */
    float* atty;   /* (C)   attention output, before its projection */
    float* proj;   /* (C)   a projection's output, added to x */
    float* fch;    /* (4C) */
    float* fch_gelu; /* (4C) */
    float* scores; /* (NH, capacity) attention probabilities of the new position */
    float* logits; /* (Vp) */
    float mean, rstd; /* layernorm statistics (written by layernorm_forward, unused) */
} KVCache;

static void kv_cache_init(KVCache* kv, const GPTConfig* c) {
    size_t L = c->num_layers, C = c->channels, T = c->max_seq_len;
    memset(kv, 0, sizeof(*kv));
    kv->capacity = c->max_seq_len;
    kv->keys = (float*)malloc_check(L * T * C * sizeof(float));
    kv->values = (float*)malloc_check(L * T * C * sizeof(float));
    kv->x = (float*)malloc_check(C * sizeof(float));
    kv->ln = (float*)malloc_check(C * sizeof(float));
    kv->qkv = (float*)malloc_check(3 * C * sizeof(float));
    kv->atty = (float*)malloc_check(C * sizeof(float));
    kv->proj = (float*)malloc_check(C * sizeof(float));
    kv->fch = (float*)malloc_check(4 * C * sizeof(float));
    kv->fch_gelu = (float*)malloc_check(4 * C * sizeof(float));
    kv->scores = (float*)malloc_check((size_t)c->num_heads * T * sizeof(float));
    kv->logits = (float*)malloc_check((size_t)c->padded_vocab_size * sizeof(float));
}

static void kv_cache_free(KVCache* kv) {
    float* buffers[] = {kv->keys, kv->values, kv->x,        kv->ln,     kv->qkv,   kv->atty,
                        kv->proj, kv->fch,    kv->fch_gelu, kv->scores, kv->logits};
    for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); i++) free(buffers[i]);
}

/* out[o] = bias[o] + Σ_c weight[o·C + c]·x[c] for o < OC (bias may be NULL): matmul_forward for a
 * single row. One token's forward reads every weight once, so this is bound by memory bandwidth;
 * the blocked SGEMM would pack each weight matrix first, costing more than the product. Threads
 * split the output rows (only for products of 2^18 or more multiply-adds: a smaller one takes less
 * time than waking the threads); each dot product is a SIMD reduction. */
static void matvec_forward(float* out, const float* x, const float* weight, const float* bias, int C, int OC) {
#pragma omp parallel for schedule(static) if ((size_t)OC * C >= ((size_t)1 << 18))
    for (int o = 0; o < OC; o++) {
        const float* w = weight + (size_t)o * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < C; c++) sum += w[c] * x[c];
        out[o] = bias ? bias[o] + sum : sum;
    }
}

/* Attention of the new position t = kv->length over the cached positions 0..t of one layer
 * (whose keys/values already hold position t):
 *   p[h,s] = softmax_{s<=t}(q_h·k_{s,h} / sqrt(hs)),  atty[h·hs + i] = Σ_{s<=t} p[h,s]·v_{s,h}[i]
 * with the operation order of attention_forward (max, cpu_expf, sum, scale by 1/sum). Threads
 * split the heads, once the context holds 2^16 or more key channels (t·C). */
static void kv_attention(float* atty, float* scores, const float* q, const float* keys, const float* values, int t, int C,
                         int NH, int capacity) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) if ((size_t)(t + 1) * C >= ((size_t)1 << 16))
    for (int h = 0; h < NH; h++) {
        const float* qh = q + h * hs;
        float* p = scores + (size_t)h * capacity;
        float maxv = -INFINITY;
        for (int s = 0; s <= t; s++) {
            const float* k = keys + (size_t)s * C + h * hs;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int i = 0; i < hs; i++) dot += qh[i] * k[i];
            p[s] = dot * scale;
            maxv = p[s] > maxv ? p[s] : maxv;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int s = 0; s <= t; s++) {
            p[s] = cpu_expf(p[s] - maxv);
            sum += p[s];
        }
        float inv = 1.0f / sum;
        for (int s = 0; s <= t; s++) p[s] *= inv;
        float* o = atty + h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int s = 0; s <= t; s++) {
            const float* v = values + (size_t)s * C + h * hs;
#pragma omp simd
            for (int i = 0; i < hs; i++) o[i] += p[s] * v[i];
        }
    }
}

/* Feeds `token` at position kv->length: the forward pass of train_gpt.c for one position, its
 * keys and values appended to the cache, attention over the cached positions. Returns the
 * next-token logits (Vp; the first V are real). The cache must not be full. */
static const float* gpt_forward_next(const GPT* m, KVCache* kv, int token) {
    const GPTConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, t = kv->length;
    if (t >= kv->capacity) fatalf("KV cache full: %d positions", kv->capacity);
    if (token < 0 || token >= c->vocab_size) fatalf("token %d is outside the vocabulary [0, %d)", token, c->vocab_size);
    const ParameterTensors* w = &m->w;
    encoder_forward(kv->x, &token, w->wte, w->wpe + (size_t)t * C, 1, 1, C);
    for (int l = 0; l < L; l++) {
        float* keys = kv->keys + (size_t)l * kv->capacity * C;
        float* values = kv->values + (size_t)l * kv->capacity * C;
        layernorm_forward(kv->ln, &kv->mean, &kv->rstd, kv->x, w->ln1w + l * C, w->ln1b + l * C, 1, C);
        matvec_forward(kv->qkv, kv->ln, w->qkvw + (size_t)l * 3 * C * C, w->qkvb + l * 3 * C, C, 3 * C);
        memcpy(keys + (size_t)t * C, kv->qkv + C, C * sizeof(float));
        memcpy(values + (size_t)t * C, kv->qkv + 2 * C, C * sizeof(float));
        kv_attention(kv->atty, kv->scores, kv->qkv, keys, values, t, C, NH, kv->capacity);
        matvec_forward(kv->proj, kv->atty, w->attprojw + (size_t)l * C * C, w->attprojb + l * C, C, C);
        residual_forward(kv->x, kv->x, kv->proj, C);
        layernorm_forward(kv->ln, &kv->mean, &kv->rstd, kv->x, w->ln2w + l * C, w->ln2b + l * C, 1, C);
        matvec_forward(kv->fch, kv->ln, w->fcw + (size_t)l * 4 * C * C, w->fcb + l * 4 * C, C, 4 * C);
        gelu_forward(kv->fch_gelu, kv->fch, 4 * (size_t)C);
        matvec_forward(kv->proj, kv->fch_gelu, w->fcprojw + (size_t)l * 4 * C * C, w->fcprojb + l * C, 4 * C, C);
        residual_forward(kv->x, kv->x, kv->proj, C);
    }
    layernorm_forward(kv->ln, &kv->mean, &kv->rstd, kv->x, w->lnfw, w->lnfb, 1, C);
    matvec_forward(kv->logits, kv->ln, w->wte, NULL, C, c->padded_vocab_size);
    kv->length = t + 1;
    return kv->logits;
}

/* Empties the cache and feeds tokens[0..n): their positions become 0..n-1. Returns the logits
 * after the last one. n ≥ 1 and n ≤ capacity. */
static const float* kv_cache_refill(const GPT* m, KVCache* kv, const int* tokens, int n) {
    if (n < 1 || n > kv->capacity) fatalf("KV cache refill with %d tokens, capacity %d", n, kv->capacity);
    kv->length = 0;
    const float* logits = NULL;
    for (int i = 0; i < n; i++) logits = gpt_forward_next(m, kv, tokens[i]);
    return logits;
}

/* Generates `count` tokens after context[0..n_context) into out[0..count), by the procedure in
 * this file's header comment. on_token (may be NULL) is called with each new token as it comes. */
static void generate(const GPT* m, KVCache* kv, const int* context, int n_context, int* out, int count, float temperature,
                     int top_k, Rng* rng, void (*on_token)(int token, void* arg), void* arg) {
    int total = n_context + count;
    int* all = (int*)malloc_check((size_t)total * sizeof(int));
    memcpy(all, context, (size_t)n_context * sizeof(int));
    int n = n_context, keep = kv->capacity / 2 > 0 ? kv->capacity / 2 : 1;
    int start = n > kv->capacity ? n - keep : 0;
    const float* logits = kv_cache_refill(m, kv, all + start, n - start);
    for (int i = 0; i < count; i++) {
        int next = sample_token(logits, m->config.vocab_size, temperature, top_k, rng);
        out[i] = next;
        all[n++] = next;
        if (on_token) on_token(next, arg);
        if (i + 1 == count) break;
        if (kv->length == kv->capacity) logits = kv_cache_refill(m, kv, all + n - keep, keep);
        else logits = gpt_forward_next(m, kv, next);
    }
    free(all);
}

#ifndef SAMPLE_GPT_TESTING

/* ----------------------------------------------------------------------------
 * command line: one table gives the parser and --help */

typedef struct {
    const char* model;
    const char* prompt;
    const char* tokenizer;
    float temperature;
    int top_k, seed, tokens, ids, threads;
} SampleArgs;

typedef enum { ARG_STR, ARG_INT, ARG_FLOAT, ARG_SWITCH } ArgType;
typedef struct {
    const char* short_name;
    const char* long_name;
    ArgType type;
    size_t offset;
    double min, max;
    const char* help;
} SampleFlag;

#define SAMPLE_FLAG(s, l, type, field, lo, hi, help) {s, l, type, offsetof(SampleArgs, field), lo, hi, help}
static const SampleFlag SAMPLE_FLAGS[] = {
    SAMPLE_FLAG("-e", "--model", ARG_STR, model, 0, 0, "model file (GPTM), e.g. a checkpoint's model_NNNNNNNN.bin (required)"),
    SAMPLE_FLAG(NULL, "--prompt", ARG_STR, prompt, 0, 0, "text to continue, after <|endoftext|> (default: none)"),
    SAMPLE_FLAG(NULL, "--temperature", ARG_FLOAT, temperature, 0, 1e6, "sampling temperature; 0: argmax (default 1.0)"),
    SAMPLE_FLAG(NULL, "--top-k", ARG_INT, top_k, 0, 1 << 24, "sample among the k most likely tokens; 0: all (default 0)"),
    SAMPLE_FLAG(NULL, "--seed", ARG_INT, seed, 0, 2147483647, "random seed, as the trainer's --seed (default 1337)"),
    SAMPLE_FLAG("-g", "--tokens", ARG_INT, tokens, 0, 1 << 24, "tokens to generate (default 64)"),
    SAMPLE_FLAG(NULL, "--tokenizer", ARG_STR, tokenizer, 0, 0, "tokenizer file (GBPE) (default data/gpt2_tokenizer.bin)"),
    SAMPLE_FLAG(NULL, "--ids", ARG_SWITCH, ids, 0, 1, "print the generated token ids instead of text"),
    SAMPLE_FLAG(NULL, "--threads", ARG_INT, threads, 0, 4096, "CPU threads; 0: the OpenMP default (default 0)"),
};
#define SAMPLE_FLAG_COUNT ((int)(sizeof(SAMPLE_FLAGS) / sizeof(SAMPLE_FLAGS[0])))

static void print_help(void) {
    printf("usage: sample_gpt_cpu -e MODEL [flags]: generate text with a KV cache\n");
    for (int i = 0; i < SAMPLE_FLAG_COUNT; i++)
        printf("  %-3s %-14s %s\n", SAMPLE_FLAGS[i].short_name ? SAMPLE_FLAGS[i].short_name : "", SAMPLE_FLAGS[i].long_name,
               SAMPLE_FLAGS[i].help);
}

static void parse_args(SampleArgs* a, int argc, char** argv) {
    *a = (SampleArgs){NULL, "", "data/gpt2_tokenizer.bin", 1.0f, 0, 1337, 64, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            print_help();
            exit(0);
        }
        const SampleFlag* f = NULL;
        for (int j = 0; j < SAMPLE_FLAG_COUNT && !f; j++)
            if ((SAMPLE_FLAGS[j].short_name && !strcmp(argv[i], SAMPLE_FLAGS[j].short_name)) ||
                !strcmp(argv[i], SAMPLE_FLAGS[j].long_name))
                f = &SAMPLE_FLAGS[j];
        if (!f) fatalf("unknown flag '%s' (see --help)", argv[i]);
        char* field = (char*)a + f->offset;
        if (f->type == ARG_SWITCH) {
            *(int*)field = 1;
            continue;
        }
        if (i + 1 >= argc) fatalf("%s: missing value (see --help)", f->long_name);
        const char* text = argv[++i];
        char* end;
        errno = 0;
        if (f->type == ARG_STR) {
            *(const char**)field = text;
        } else if (f->type == ARG_INT) {
            long long v = strtoll(text, &end, 10);
            if (end == text || *end || errno || v < f->min || v > f->max)
                fatalf("%s: bad value '%s': expected an integer in [%.0f, %.0f]", f->long_name, text, f->min, f->max);
            *(int*)field = (int)v;
        } else {
            double v = strtod(text, &end);
            if (end == text || *end || errno || !isfinite(v) || v < f->min || v > f->max)
                fatalf("%s: bad value '%s': expected a number in [%g, %g]", f->long_name, text, f->min, f->max);
            *(float*)field = (float)v;
        }
    }
    if (!a->model) fatalf("no model: give -e MODEL (see --help)");
}

typedef struct {
    const Tokenizer* tokenizer; /* NULL: print ids */
} Printer;

static void print_token(int token, void* arg) {
    const Printer* p = (const Printer*)arg;
    if (p->tokenizer) {
        size_t len;
        const unsigned char* bytes = tokenizer_token_bytes(p->tokenizer, token, &len);
        fwrite(bytes, 1, len, stdout);
    } else {
        printf("%d ", token);
    }
    fflush(stdout);
}

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    SampleArgs args;
    parse_args(&args, argc, argv);
    if (args.threads > 0) omp_set_num_threads(args.threads);
    GPT model;
    gpt_load(&model, args.model);
    const GPTConfig* c = &model.config;

    /* the tokenizer is needed to encode a prompt or print text; it must match the model's vocabulary */
    Tokenizer tokenizer;
    int need_tokenizer = args.prompt[0] || !args.ids;
    if (need_tokenizer) {
        tokenizer_load(&tokenizer, args.tokenizer);
        if (tokenizer.vocab_size != c->vocab_size)
            fatalf("%s: the tokenizer has %d tokens but the model %s has %d (use --ids without --prompt to print ids)",
                   args.tokenizer, tokenizer.vocab_size, args.model, c->vocab_size);
    }
    int n_context = 1;
    int* context = (int*)malloc_check(sizeof(int));
    context[0] = need_tokenizer ? tokenizer.eot_token : 0;
    if (args.prompt[0]) {
        int* ids;
        size_t n = tokenizer_encode(&tokenizer, (const unsigned char*)args.prompt, strlen(args.prompt), &ids);
        context = (int*)realloc(context, (n + 1) * sizeof(int));
        if (!context) fatalf("out of memory");
        memcpy(context + 1, ids, n * sizeof(int));
        free(ids);
        n_context = (int)n + 1;
    }
    fprintf(stderr, "sample_gpt_cpu: %s: %d layers, %d heads, %d channels, vocab %d, max seq len %d | prompt %d tokens\n",
            args.model, c->num_layers, c->num_heads, c->channels, c->vocab_size, c->max_seq_len, n_context - 1);

    Printer printer = {args.ids ? NULL : &tokenizer};
    if (!args.ids)
        for (int i = 1; i < n_context; i++) print_token(context[i], &printer);
    KVCache kv;
    kv_cache_init(&kv, c);
    Rng rng;
    rng_seed(&rng, (uint64_t)args.seed ^ 0x5A4D504C45ULL);
    int* generated = (int*)malloc_check(((size_t)args.tokens + 1) * sizeof(int));
    double t0 = wall_seconds();
    generate(&model, &kv, context, n_context, generated, args.tokens, args.temperature, args.top_k, &rng, print_token, &printer);
    double seconds = wall_seconds() - t0;
    printf("\n");
    fprintf(stderr, "sample_gpt_cpu: %d tokens in %.3f s (%.1f tok/s, prompt included)\n", args.tokens, seconds,
            seconds > 0 ? (args.tokens + n_context) / seconds : 0.0);

    free(generated);
    free(context);
    kv_cache_free(&kv);
    if (need_tokenizer) tokenizer_free(&tokenizer);
    gpt_free(&model);
    return 0;
}
#endif
