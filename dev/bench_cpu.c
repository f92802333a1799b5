/*
 * dev/bench_cpu.c — CPU FP32 peak and the matmul speed on GPT-2 124M (d12) shapes.
 *
 * 1. Peak: every OpenMP thread runs a register-resident FMA loop (12 independent accumulator
 *    chains, enough to cover FMA latency x throughput) with the widest ISA sgemm would use;
 *    peak = threads x FMAs x 2 x width / time.
 * 2. For each linear layer of d12 at B=4, T=64 (BT=256): matmul_forward (out = inp·Wᵀ),
 *    matmul_backward (dinp += dout·W and dW += doutᵀ·inp) and matmul_backward with dinp NULL
 *    (dW only); prints GFLOP/s and % of the peak measured in this run, and the total over a step.
 * 3. The other ops of cpu_ops.h at the same shapes, and their time per training step.
 * Usage: bench_cpu [isa: auto|avx512|avx2|scalar] [repeats]   (threads: OMP_NUM_THREADS)
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "llmc/cpu_ops.h"
#include "llmc/cpu_peak.h"

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fill(float* x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
    }
}

/* best time over `repeats` runs (after one warm-up) of the statement `call` */
#define TIME_BEST(best, repeats, call)                                        \
    do {                                                                      \
        best = 1e30;                                                          \
        for (int r_ = 0; r_ <= (repeats); r_++) {                             \
            double t0_ = now_seconds();                                       \
            call;                                                             \
            double dt_ = now_seconds() - t0_;                                 \
            if (r_ > 0 && dt_ < best) best = dt_;                             \
        }                                                                     \
    } while (0)

int main(int argc, char** argv) {
    int isa = CPU_ISA_AUTO, repeats = 5;
    if (argc > 1 && strcmp(argv[1], "auto")) {
        isa = !strcmp(argv[1], "avx512") ? CPU_ISA_AVX512 : !strcmp(argv[1], "avx2") ? CPU_ISA_AVX2
              : !strcmp(argv[1], "scalar") ? CPU_ISA_SCALAR : -2;
        if (isa == -2) fatalf("bench_cpu: unknown isa '%s' (auto, avx512, avx2 or scalar)", argv[1]);
    }
    if (argc > 2 && (repeats = atoi(argv[2])) < 1) fatalf("bench_cpu: repeats must be >= 1, got '%s'", argv[2]);
    cpu_matmul_force_isa(isa);
    isa = cpu_matmul_isa();
    double peak = 0.0; /* the best of 3: other processes on the machine only ever lower it */
    for (int r = 0; r < 3; r++) {
        double p = cpu_fma_peak_gflops(isa, 50L * 1000 * 1000);
        if (p > peak) peak = p;
    }
    printf("isa %s, %d threads, measured FP32 FMA peak %.1f GFLOP/s\n", cpu_isa_name(isa), omp_get_max_threads(), peak);

    const int B = 4, T = 64, BT = B * T, C = 768, NH = 12, V = 50257, Vp = 50304, L = 12;
    const struct { const char* name; int in, out; } layers[] = {
        {"qkv      768->2304", C, 3 * C}, {"attproj  768->768", C, C}, {"fc       768->3072", C, 4 * C},
        {"fcproj  3072->768", 4 * C, C}, {"lm_head  768->50304", C, Vp},
    };
    size_t max_w = (size_t)Vp * C, max_act = (size_t)BT * Vp;
    float* W = (float*)malloc_check(max_w * sizeof(float));
    float* dW = (float*)calloc_check(max_w, sizeof(float));
    float* inp = (float*)malloc_check((size_t)BT * 4 * C * sizeof(float));
    float* dinp = (float*)calloc_check((size_t)BT * 4 * C, sizeof(float));
    float* out = (float*)malloc_check(max_act * sizeof(float));
    fill(W, max_w, 1);
    fill(inp, (size_t)BT * 4 * C, 2);
    fill(out, max_act, 3);
    printf("\nmatmuls, B=%d T=%d (best of %d)\n%-20s %-26s %9s %8s %8s\n", B, T, repeats, "layer", "op", "ms",
           "GFLOP/s", "% peak");
    double total_flops = 0.0, total_time = 0.0;
    for (size_t l = 0; l < sizeof(layers) / sizeof(layers[0]); l++) {
        int in = layers[l].in, oc = layers[l].out;
        double flops = 2.0 * BT * in * oc, t_fwd, t_bwd, t_dw;
        TIME_BEST(t_fwd, repeats, matmul_forward(out, inp, W, NULL, BT, in, oc));
        TIME_BEST(t_bwd, repeats, matmul_backward(dinp, dW, NULL, out, inp, W, BT, in, oc));
        TIME_BEST(t_dw, repeats, matmul_backward(NULL, dW, NULL, out, inp, W, BT, in, oc));
        const char* names[] = {"forward inp.W^T", "backward dinp and dW", "backward dW only"};
        double times[] = {t_fwd, t_bwd, t_dw}, op_flops[] = {flops, 2 * flops, flops};
        for (int k = 0; k < 3; k++)
            printf("%-20s %-26s %9.3f %8.1f %7.1f%%\n", layers[l].name, names[k], times[k] * 1e3,
                   op_flops[k] / times[k] / 1e9, 100.0 * op_flops[k] / times[k] / 1e9 / peak);
        total_flops += 3 * flops * (l == 4 ? 1 : L);
        total_time += (t_fwd + t_bwd) * (l == 4 ? 1 : L);
    }
    printf("all matmuls of one d12 step (fwd + bwd): %.1f GFLOP in %.1f ms = %.1f GFLOP/s = %.1f%% of peak\n",
           total_flops / 1e9, total_time * 1e3, total_flops / total_time / 1e9,
           100.0 * total_flops / total_time / 1e9 / peak);

    /* the other ops at the same shapes; per step = per call x calls per step */
    float *mean = (float*)malloc_check(BT * sizeof(float)), *rstd = (float*)malloc_check(BT * sizeof(float));
    float* att = (float*)malloc_check((size_t)B * NH * T * T * sizeof(float));
    int* tokens = (int*)malloc_check(BT * sizeof(int));
    float* losses = (float*)malloc_check(BT * sizeof(float));
    float* dlosses = (float*)malloc_check(BT * sizeof(float));
    for (int i = 0; i < BT; i++) tokens[i] = (i * 7919) % V, dlosses[i] = 1.0f / BT;
    size_t nparams = 124475904;
    float* big = (float*)calloc_check(4 * nparams, sizeof(float));
    double t;
    double other = 0.0;
    printf("\nother ops, B=%d T=%d%28s %9s %9s\n", B, T, "", "ms/call", "ms/step");
#define OP_ROW(name, calls, stmt)                                                          \
    TIME_BEST(t, repeats, stmt);                                                           \
    other += t * (calls);                                                                  \
    printf("%-48s %9.3f %9.2f\n", name, t * 1e3, t * 1e3 * (calls))
    OP_ROW("encoder_forward", 1, encoder_forward(out, tokens, W, W, B, T, C));
    OP_ROW("encoder_backward", 1, encoder_backward(dW, dinp, inp, tokens, B, T, C));
    OP_ROW("layernorm_forward BTxC", 2 * L + 1, layernorm_forward(out, mean, rstd, inp, W, W, BT, C));
    OP_ROW("layernorm_backward BTxC", 2 * L + 1, layernorm_backward(dinp, dW, dW + C, out, inp, W, mean, rstd, BT, C));
    OP_ROW("attention_forward NH=12 hs=64", L, attention_forward(out, att, inp, B, T, C, NH));
    OP_ROW("attention_backward", L, attention_backward(dinp, out, inp, att, B, T, C, NH));
    OP_ROW("gelu_forward BTx4C", L, gelu_forward(out, inp, (size_t)BT * 4 * C));
    OP_ROW("gelu_backward BTx4C", L, gelu_backward(dinp, inp, out, (size_t)BT * 4 * C));
    OP_ROW("residual_forward BTxC", 2 * L, residual_forward(out, inp, inp, (size_t)BT * C));
    OP_ROW("crossentropy_forward BTxVp", 1, crossentropy_forward(losses, out, tokens, BT, V, Vp));
    OP_ROW("crossentropy_backward BTxVp (in place)", 1, crossentropy_backward(out, out, tokens, dlosses, BT, V, Vp));
    OP_ROW("global_norm_squared 124M", 1, global_norm_squared(big, nparams));
    OP_ROW("adamw_update 124M", 1,
           adamw_update(big, big + nparams, big + 2 * nparams, big + 3 * nparams, nparams, 1e-4f, 0.9f, 0.95f, 1e-8f,
                        0.1f, 1.0f, 1));
    printf("other ops per step: %.1f ms; with the matmuls %.1f ms per step = %.1f%% of peak (matmul flops only)\n",
           other * 1e3, (other + total_time) * 1e3, 100.0 * total_flops / (other + total_time) / 1e9 / peak);
    free(W), free(dW), free(inp), free(dinp), free(out), free(mean), free(rstd), free(att), free(tokens);
    free(losses), free(dlosses), free(big);
    return 0;
}
