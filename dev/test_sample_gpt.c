/*
 * dev/test_sample_gpt.c — checks sample_gpt.c's KV-cache forward against train_gpt.c's full forward.
 *
 *   ./build/test_sample_gpt MODEL
 *
 * 1. Logits: random tokens fill every position 0..max_seq_len-1 of the cache; after each one, the
 *    next-token logits of gpt_forward_next are compared with gpt_forward_last over the whole prefix
 *    (relative L2 over the V real logits; bound 1e-5, both fp32).
 * 2. Tokens: kv_generate (llmc/sample_cli.h) with sample_gpt.c's KvModel (CpuDecoder) is run past
 *    the cache's capacity (so the refill path is taken) at temperature 0 and at temperature 0.8 with
 *    top-k 20; the tokens must equal those of a plain generator written here from gpt_forward_last
 *    and sample_token, following the window rule of sample_cli.h's top comment (when the context
 *    outgrows max_seq_len, it restarts from the newest max_seq_len/2 tokens).
 *    The same seed must give the same tokens twice.
 * 3. Cost: milliseconds per token with the cache and with the full forward at the longest context
 *    (printed, not asserted: the machine is shared).
 * Ends with "N passed, M failed"; exits non-zero on any failure.
 */
#define SAMPLE_GPT_TESTING
#include "sample_gpt.c"

static int passed = 0, failed = 0;

static void expect(int ok, const char* what) {
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
    if (ok) passed++;
    else failed++;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ||a - b|| / ||b|| over n values, in double */
static double rel_l2(const float* a, const float* b, int n) {
    double diff = 0.0, ref = 0.0;
    for (int i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        diff += d * d;
        ref += (double)b[i] * b[i];
    }
    return diff == diff && ref > 0.0 ? sqrt(diff / ref) : INFINITY;
}

/* The documented sampling procedure without a cache: the visible context is all[start..n); after
 * a token is appended, if more than max_seq_len tokens are visible, start moves to n - max_seq_len/2. */
static void generate_plain(GPT* m, const int* context, int n_context, int* out, int count, float temperature, int top_k,
                           Rng* rng) {
    int cap = m->config.max_seq_len, keep = cap / 2 > 0 ? cap / 2 : 1;
    int* all = (int*)malloc_check((size_t)(n_context + count) * sizeof(int));
    memcpy(all, context, (size_t)n_context * sizeof(int));
    int n = n_context, start = n > cap ? n - keep : 0;
    for (int i = 0; i < count; i++) {
        const float* logits = gpt_forward_last(m, all + start, n - start);
        out[i] = sample_token(logits, m->config.vocab_size, temperature, top_k, rng);
        all[n++] = out[i];
        if (n - start > cap) start = n - keep;
    }
    free(all);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 2;
    }
    GPT model;
    gpt_load(&model, argv[1]);
    const GPTConfig* c = &model.config;
    int T = c->max_seq_len, V = c->vocab_size;
    gpt_alloc_activations(&model, 1, T);
    printf("model %s: L=%d NH=%d C=%d V=%d maxT=%d\n", argv[1], c->num_layers, c->num_heads, c->channels, V, T);

    /* 1. logits at every position */
    Rng rng;
    rng_seed(&rng, 42);
    int* tokens = (int*)malloc_check((size_t)T * sizeof(int));
    for (int t = 0; t < T; t++) tokens[t] = (int)rng_below(&rng, (uint64_t)V);
    KVCache kv;
    kv_cache_init(&kv, c);
    CpuDecoder decoder = {&model, &kv};
    KvModel kv_model = cpu_decoder_kv_model(&decoder);
    double worst = 0.0;
    int worst_t = -1;
    for (int t = 0; t < T; t++) {
        const float* cached = gpt_forward_next(&model, &kv, tokens[t]);
        const float* full = gpt_forward_last(&model, tokens, t + 1);
        double err = rel_l2(cached, full, V);
        if (t == 0 || err > worst) {
            worst = err;
            worst_t = t;
        }
    }
    char line[256];
    snprintf(line, sizeof(line), "KV-cache logits vs full forward at all %d positions: worst rel L2 %.3e (position %d), bound 1e-5",
             T, worst, worst_t);
    expect(worst <= 1e-5, line);

    /* 2. tokens, past the capacity */
    int count = T + T / 2 + 3, n_context = 3;
    int context[3] = {0, tokens[1], tokens[2]};
    int* ours = (int*)malloc_check((size_t)count * sizeof(int));
    int* plain = (int*)malloc_check((size_t)count * sizeof(int));
    struct { float temperature; int top_k; uint64_t seed; } runs[2] = {{0.0f, 0, 1}, {0.8f, 20, 1337}};
    for (int r = 0; r < 2; r++) {
        Rng a, b;
        rng_seed(&a, runs[r].seed);
        rng_seed(&b, runs[r].seed);
        kv_generate(&kv_model, context, n_context, ours, count, runs[r].temperature, runs[r].top_k, &a, NULL, NULL);
        generate_plain(&model, context, n_context, plain, count, runs[r].temperature, runs[r].top_k, &b);
        int first_diff = -1;
        for (int i = 0; i < count && first_diff < 0; i++)
            if (ours[i] != plain[i]) first_diff = i;
        snprintf(line, sizeof(line), "%d tokens (temperature %.1f, top-k %d) equal the cache-free generator's%s", count,
                 runs[r].temperature, runs[r].top_k, first_diff < 0 ? "" : " -- they differ");
        expect(first_diff < 0 && memcmp(&a, &b, sizeof(a)) == 0, line);
        if (first_diff >= 0) printf("     first difference at token %d: %d vs %d\n", first_diff, ours[first_diff], plain[first_diff]);
        Rng again;
        rng_seed(&again, runs[r].seed);
        kv_generate(&kv_model, context, n_context, plain, count, runs[r].temperature, runs[r].top_k, &again, NULL, NULL);
        expect(memcmp(ours, plain, (size_t)count * sizeof(int)) == 0, "the same seed gives the same tokens again");
    }

    /* 3. cost per token at the longest context */
    int reps = 5;
    double t0 = seconds_now();
    for (int i = 0; i < reps; i++) {
        kv_model_refill(&kv_model, tokens, T - 1);
        gpt_forward_next(&model, &kv, tokens[T - 1]);
    }
    double kv_ms = (seconds_now() - t0) * 1000.0 / (reps * T);
    t0 = seconds_now();
    for (int i = 0; i < reps; i++) gpt_forward_last(&model, tokens, T);
    double full_ms = (seconds_now() - t0) * 1000.0 / reps;
    printf("cost of one token at context %d: %.3f ms with the KV cache (mean over all positions), %.3f ms re-running the "
           "full forward (measured now)\n", T, kv_ms, full_ms);

    free(ours);
    free(plain);
    free(tokens);
    kv_cache_free(&kv);
    gpt_free(&model);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
