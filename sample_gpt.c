/*
 * sample_gpt.c — generate text from a model file on the CPU, with a KV cache.
 *
 *   ./sample_gpt_cpu -e MODEL [--prompt TEXT] [--temperature 1.0] [--top-k 0] [--seed 1337]
 *                    [-g 64] [--tokenizer data/gpt2_tokenizer.bin] [--ids] [--threads N]
 *
 * The flags, the sampling procedure (seed, context, one draw per token, cache refill past
 * max_seq_len) and the output are llmc/sample_cli.h's, shared with the GPU tool sample_gpt.cu;
 * its top comment specifies them. --threads is this tool's only own flag.
 *
 * The model (parameters, config, the full forward pass) is train_gpt.c's, included with TESTING
 * defined; the ops are llmc/cpu_ops.h's. What this file adds is the incremental forward: one new
 * position attends to the keys and values of all earlier positions, kept in a cache, so a token
 * costs O(T) attention work instead of re-running the whole O(T²) context; CpuDecoder hands it to
 * sample_cli.h as a KvModel. test_sample_gpt.c includes this file with SAMPLE_GPT_TESTING defined,
 * to reuse the cache without main().
 */
#define TESTING
#include "train_gpt.c"
#include "llmc/sample_cli.h"

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
 * each head one attention_row (llmc/cpu_ops.h), as in attention_forward. Threads split the heads,
 * once the context holds 2^16 or more key channels (t·C). */
static void kv_attention(float* atty, float* scores, const float* q, const float* keys, const float* values, int t, int C,
                         int NH, int capacity) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) if ((size_t)(t + 1) * C >= ((size_t)1 << 16))
    for (int h = 0; h < NH; h++)
        attention_row(atty + h * hs, scores + (size_t)h * capacity, q + h * hs, keys + h * hs, values + h * hs, (size_t)C, t, hs, scale);
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

/* The model and its cache as sample_cli.h's KvModel */
typedef struct {
    const GPT* gpt;
    KVCache* kv;
} CpuDecoder;

static const float* cpu_decoder_feed(void* model, int token) {
    CpuDecoder* d = (CpuDecoder*)model;
    return gpt_forward_next(d->gpt, d->kv, token);
}

static void cpu_decoder_reset(void* model) { ((CpuDecoder*)model)->kv->length = 0; }

static KvModel cpu_decoder_kv_model(CpuDecoder* d) {
    const GPTConfig* c = &d->gpt->config;
    return (KvModel){d, c->vocab_size, d->kv->capacity, cpu_decoder_feed, cpu_decoder_reset, c->num_layers, c->num_heads, c->channels};
}

#ifndef SAMPLE_GPT_TESTING
int main(int argc, char** argv) {
    SampleArgs args;
    sample_cli_parse(&args, argc, argv, "sample_gpt_cpu", SAMPLE_TOOL_CPU);
    if (args.threads > 0) omp_set_num_threads(args.threads);
    GPT model;
    gpt_load(&model, args.model);
    KVCache kv;
    kv_cache_init(&kv, &model.config);
    CpuDecoder decoder = {&model, &kv};
    KvModel m = cpu_decoder_kv_model(&decoder);
    sample_cli_run(&args, &m, "sample_gpt_cpu");
    kv_cache_free(&kv);
    gpt_free(&model);
    return 0;
}
#endif
