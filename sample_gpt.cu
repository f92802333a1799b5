/*
 * sample_gpt.cu — generate text from a model file on the GPU, with a KV cache: the GPU twin of sample_gpt.c.
 *
 *   ./sample_gpt -e MODEL [--prompt TEXT] [--temperature 1.0] [--top-k 0] [--seed 1337] [-g 64]
 *                [--tokenizer data/gpt2_tokenizer.bin] [--ids]
 *
 * Same flags (but sample_gpt_cpu's --threads), sampling procedure (seed, context, one draw per token, cache refill past
 * max_seq_len) and output as sample_gpt_cpu: llmc/sample_cli.h's, whose top comment specifies them. The model's parameters and kernels are train_gpt.cu's (included with
 * TESTING); what this file adds is the forward pass of one new position: its key and value appended to the
 * device cache (llmc/kv_cache.cuh), its attention over the cached positions (O(T) per token), and the matmuls
 * of one row through cuBLASLt (llmc/matmul.cuh). Builds: nvcc (make sample_gpt), the simulator
 * (sample_gpt_sim: bf16, sample_gpt_sim_fp32).
 */
#define TESTING
#include "train_gpt.cu"
#include "llmc/kv_cache.cuh"
#include "llmc/sample_cli.h"

/* the weights on the device and one position's worth of every activation */
typedef struct {
    GPTConfig config;
    size_t param_sizes[NUM_PARAM_TENSORS];
    floatX* params;
    ParameterTensors w;
    KVCache kv;
    floatX *x, *x2; /* (C) the residual stream, before and after a sublayer's residual add */
    floatX* ln;     /* (C) a layernorm's output */
    floatX* qkv;    /* (3C) */
    floatX* atty;   /* (C) */
    floatX* proj;   /* (C) a projection's output */
    floatX* fch;    /* (4C) before GELU */
    floatX* fch_gelu; /* (4C) */
    floatX* logits; /* (Vp) */
    float* stats;   /* (2) layernorm mean and rstd (written, unused) */
    int* token;     /* (1) */
    float* logits_host; /* (Vp) */
    cudaStream_t stream;
    BlasContext blas;
} Decoder;

static void decoder_create(Decoder* d, const char* path) {
    memset(d, 0, sizeof(*d));
    size_t n;
    float* host = model_file_read(path, &d->config, &n);
    const GPTConfig* c = &d->config;
    gpt_param_sizes(c, d->param_sizes);
    cudaCheck(cudaStreamCreate(&d->stream));
    blas_create(&d->blas, d->stream);
    floatX* staged = (floatX*)malloc_check(n * sizeof(floatX));
    floats_to_floatX(staged, host, n);
    cudaCheck(cudaMalloc(&d->params, n * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d->params, staged, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(staged);
    free(host);
    point_parameters(&d->w, d->params, d->param_sizes);
    kv_cache_create(&d->kv, c->num_layers, c->max_seq_len, c->channels, c->num_heads);
    size_t C = c->channels;
    floatX** bufs[] = {&d->x, &d->x2, &d->ln, &d->qkv, &d->atty, &d->proj, &d->fch, &d->fch_gelu, &d->logits};
    size_t widths[] = {C, C, C, 3 * C, C, C, 4 * C, 4 * C, (size_t)c->padded_vocab_size};
    for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) cudaCheck(cudaMalloc(bufs[i], widths[i] * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d->stats, 2 * sizeof(float)));
    cudaCheck(cudaMalloc(&d->token, sizeof(int)));
    d->logits_host = (float*)malloc_check((size_t)c->padded_vocab_size * sizeof(float));
}

static void decoder_free(Decoder* d) {
    void* device[] = {d->params, d->x, d->x2, d->ln, d->qkv, d->atty, d->proj, d->fch, d->fch_gelu, d->logits, d->stats, d->token};
    for (size_t i = 0; i < sizeof(device) / sizeof(device[0]); i++) cudaCheck(cudaFree(device[i]));
    kv_cache_free(&d->kv);
    blas_destroy(&d->blas);
    cudaCheck(cudaStreamDestroy(d->stream));
    free(d->logits_host);
}

/* Feeds `token` at position t = kv.length: train_gpt.cu's forward for one row, with attention over the cache.
 * Returns the next-token logits (Vp floats on the host; the first V are real). */
static const float* decoder_feed(void* model, int token) {
    Decoder* d = (Decoder*)model;
    const GPTConfig* c = &d->config;
    const ParameterTensors* w = &d->w;
    int L = c->num_layers, C = c->channels, t = d->kv.length;
    cudaStream_t s = d->stream;
    if (t >= d->kv.capacity) fatalf("KV cache full: %d positions", d->kv.capacity);
    if (token < 0 || token >= c->vocab_size) fatalf("token %d is outside the vocabulary [0, %d)", token, c->vocab_size);
    cudaCheck(cudaMemcpyAsync(d->token, &token, sizeof(int), cudaMemcpyHostToDevice, s));
    cudaCheck(cudaStreamSynchronize(s)); /* `token` lives on this call's stack */
    encoder_forward(d->x, d->token, w->wte, w->wpe + (size_t)t * C, 1, 1, C, s);
    residual_layernorm_forward(NULL, d->ln, d->stats, d->stats + 1, d->x, NULL, w->ln1w, w->ln1b, 1, C, s);
    for (int l = 0; l < L; l++) {
        matmul_forward(&d->blas, d->qkv, NULL, d->ln, w->qkvw + (size_t)l * 3 * C * C, w->qkvb + l * 3 * C, 1, C, 3 * C);
        kv_cache_append(&d->kv, l, d->qkv, s);
        kv_attention_forward(d->atty, &d->kv, l, d->qkv, s);
        matmul_forward(&d->blas, d->proj, NULL, d->atty, w->attprojw + (size_t)l * C * C, w->attprojb + l * C, 1, C, C);
        residual_layernorm_forward(d->x2, d->ln, d->stats, d->stats + 1, d->x, d->proj, w->ln2w + l * C, w->ln2b + l * C, 1, C, s);
        matmul_forward(&d->blas, d->fch_gelu, d->fch, d->ln, w->fcw + (size_t)l * 4 * C * C, w->fcb + l * 4 * C, 1, C, 4 * C);
        matmul_forward(&d->blas, d->proj, NULL, d->fch_gelu, w->fcprojw + (size_t)l * 4 * C * C, w->fcprojb + l * C, 1, 4 * C, C);
        /* x = x2 + fcproj, fused with the next layernorm: the next layer's ln1, or lnf */
        const floatX* lnw = l + 1 < L ? w->ln1w + (l + 1) * C : w->lnfw;
        const floatX* lnb = l + 1 < L ? w->ln1b + (l + 1) * C : w->lnfb;
        residual_layernorm_forward(d->x, d->ln, d->stats, d->stats + 1, d->x2, d->proj, lnw, lnb, 1, C, s);
    }
    matmul_forward(&d->blas, d->logits, NULL, d->ln, w->wte, NULL, 1, C, c->padded_vocab_size);
    copy_to_host(d->logits_host, d->logits, (size_t)c->padded_vocab_size);
    d->kv.length = t + 1;
    return d->logits_host;
}

static void decoder_reset(void* model) { ((Decoder*)model)->kv.length = 0; }

int main(int argc, char** argv) {
    SampleArgs args;
    sample_cli_parse(&args, argc, argv, "sample_gpt", SAMPLE_TOOL_GPU);
    cuda_device_count("sample_gpt_cpu");
    Decoder decoder;
    decoder_create(&decoder, args.model);
    const GPTConfig* c = &decoder.config;
    KvModel m = {&decoder, c->vocab_size, c->max_seq_len, decoder_feed, decoder_reset, c->num_layers, c->num_heads, c->channels};
    sample_cli_run(&args, &m, "sample_gpt");
    decoder_free(&decoder);
    return 0;
}
