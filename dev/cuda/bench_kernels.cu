/*
 * dev/cuda/bench_kernels.cu — time of each kernel of the GPU trainer at GPT-2 d12 training shapes
 * (B=8, T=1024, C=768, 12 heads, Vp=50304; bf16), with achieved GB/s (memory-bound kernels: bytes read
 * + written once) or TFLOP/s (matmuls, attention), against the baseline of the same run: a plain
 * device-to-device cudaMemcpy of the same byte count (GB/s), and the device's bf16 peak (TFLOP/s).
 * GPU only (make bench-kernels); correctness is dev/cuda/test_kernels.cu's job. Values are random.
 * Usage: bench_kernels [B T REPEATS]   (default 8 1024 10; the simulator's smoke run, make sim-test-benchmarks, takes
 *                                        1 64 1 to check that every call stays inside its buffers)
 */
#include "llmc/cuda_utils.cuh"
#include "llmc/fileio.h"
#include "llmc/encoder.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/matmul.cuh"
#include "llmc/flash_attention.cuh"
#include "llmc/gelu.cuh"
#include "llmc/classifier.cuh"
#include "llmc/global_norm.cuh"
#include "llmc/adamw.cuh"
#include "dev/cuda/lab.cuh"

/* n random values in [-scale, scale) */
static floatX* device_random(size_t n, float scale) { return device_uniform<floatX>(n, 7, scale); }

/* the baseline's two buffers of `cap` bytes each (a copy of more is made in pieces of at most cap), and the
 * repeats of every timing */
struct CopyBuffers {
    void *dst, *src;
    size_t cap;
    int reps;
};

static void report_bytes(const char* name, float ms, double bytes, CopyBuffers copy) {
    float copy_ms = time_ms(copy.reps, [&] {
        for (size_t done = 0, n = (size_t)(bytes / 2); done < n; done += copy.cap)
            cudaCheck(cudaMemcpy(copy.dst, copy.src, n - done < copy.cap ? n - done : copy.cap, cudaMemcpyDeviceToDevice));
    });
    printf("%-34s %8.3f ms  %7.1f GB/s   (cudaMemcpy of the same bytes: %7.1f GB/s)\n", name, ms, bytes / ms * 1e-6,
           bytes / copy_ms * 1e-6);
}

static void report_flops(const char* name, float ms, double flops, double peak) {
    printf("%-34s %8.3f ms  %7.1f TFLOP/s (%.0f%% of the bf16 peak %.0f)\n", name, ms, flops / ms * 1e-9, 100.0 * flops / ms * 1e-9 / peak,
           peak);
}

int main(int argc, char** argv) {
    if (argc != 1 && argc != 4) {
        fprintf(stderr, "usage: %s [B T REPEATS]\n", argv[0]);
        return 2;
    }
    const int B = argc == 4 ? atoi(argv[1]) : 8, T = argc == 4 ? atoi(argv[2]) : 1024, reps = argc == 4 ? atoi(argv[3]) : 10;
    const int C = 768, NH = 12, V = 50257, Vp = 50304, BT = B * T;
    if (B <= 0 || T <= 0 || reps <= 0 || T > 4 * C) {
        fprintf(stderr, "error: B, T and REPEATS must be positive, T at most %d (wpe is a slice of a (4C, C) weight)\n", 4 * C);
        return 2;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    double peak = strstr(prop.name, "H100 PCIe") ? 756.0 : strstr(prop.name, "H1") || strstr(prop.name, "H2") ? 989.0 : 312.0;
    printf("bench_kernels: %s, B=%d T=%d C=%d NH=%d Vp=%d, %s\n", prop.name, B, T, C, NH, Vp, FLOATX_NAME);
    cudaStream_t s = 0;
    BlasContext blas;
    blas_create(&blas, s);
    /* x, y, z, pre: activations of up to BT x 4C; wte: the (Vp, C) token embedding, also the classifier's weight; w: a
     * layer's largest weight (4C, C), also wpe (T x C) */
    floatX *x = device_random((size_t)BT * 4 * C, 1.0f), *y = device_random((size_t)BT * 4 * C, 1.0f), *z = device_random((size_t)BT * 4 * C, 1.0f);
    floatX* pre = device_random((size_t)BT * 4 * C, 1.0f);
    floatX *wte = device_random((size_t)Vp * C, 0.02f), *w = device_random((size_t)4 * C * C, 0.02f), *bias = device_random(4 * C, 0.1f);
    floatX* dw = device_random((size_t)4 * C * C, 0.0f);
    floatX* logits = device_random((size_t)BT * Vp, 2.0f);
    float *stats, *scratch, *losses;
    cudaCheck(cudaMalloc(&stats, (size_t)BT * NH * 2 * sizeof(float)));
    cudaCheck(cudaMalloc(&scratch, (colsum_scratch_floats(BT, 4 * C) + layernorm_scratch_floats(BT, C)) * sizeof(float) +
                                        flash_attention_scratch_bytes(B, T, C, NH)));
    cudaCheck(cudaMalloc(&losses, BT * sizeof(float)));
    int *tokens, *host_tokens = (int*)malloc_check(BT * sizeof(int));
    for (int i = 0; i < BT; i++) host_tokens[i] = (int)(hash_u32(i, 3) % V);
    cudaCheck(cudaMalloc(&tokens, BT * sizeof(int)));
    cudaCheck(cudaMemcpy(tokens, host_tokens, BT * sizeof(int), cudaMemcpyHostToDevice));
    double act = (double)BT * C * sizeof(floatX);
    CopyBuffers copy = {z, x, (size_t)BT * 4 * C * sizeof(floatX), reps};

    report_bytes("encoder_forward", time_ms(reps, [&] { encoder_forward(y, tokens, wte, w, B, T, C, s); }), 3 * act, copy);
    { /* the encoder backward's kernels (the host's plan made before), on uniform tokens and on real text's skew:
       * one token at 8% of the positions (a newline), a few at 1-3% */
        floatX* dwte = device_random((size_t)V * C, 0.0f);
        float* partials;
        int *plan = (int*)malloc_check(encoder_plan_max_ints(BT) * sizeof(int)), *skewed = (int*)malloc_check(BT * sizeof(int)), *plan_d;
        int* counts = (int*)malloc_check((V + 1) * sizeof(int));
        cudaCheck(cudaMalloc(&plan_d, encoder_plan_max_ints(BT) * sizeof(int)));
        cudaCheck(cudaMalloc(&partials, encoder_partial_floats(BT, C) * sizeof(float)));
        for (int i = 0; i < BT; i++) {
            uint32_t h = hash_u32(i, 5) % 100;
            skewed[i] = h < 8 ? 198 : h < 11 ? 13 : h < 13 ? 11 : h < 14 ? 262 : host_tokens[i];
        }
        const int* batches[2] = {host_tokens, skewed};
        const char* names[2] = {"encoder_backward (uniform tokens)", "encoder_backward (one token 8%)"};
        for (int k = 0; k < 2; k++) {
            EncoderPlan p = encoder_plan(plan, counts, batches[k], BT, V);
            cudaCheck(cudaMemcpy(plan_d, plan, p.ints * sizeof(int), cudaMemcpyHostToDevice));
            report_bytes(names[k], time_ms(reps, [&] { encoder_backward(dwte, y, partials, x, plan_d, p, B, T, C, s); }), 3 * act, copy);
        }
        free(plan);
        free(skewed);
        free(counts);
        cudaCheck(cudaFree(plan_d));
        cudaCheck(cudaFree(partials));
        cudaCheck(cudaFree(dwte));
    }
    report_bytes("residual_layernorm_forward", time_ms(reps, [&] { residual_layernorm_forward(z, y, stats, stats + BT, x, x + (size_t)BT * C, bias, bias, BT, C, s); }),
                 4 * act, copy);
    /* the trainer's case (with Σ dinp for the bias below): the column sums kept by the kernel, and apart */
    for (int fused = 1; fused >= 0; fused--)
        report_bytes(fused ? "layernorm_backward (sums fused)" : "layernorm_backward (sums apart)", time_ms(reps, [&] {
                         layernorm_backward_fused(z, dw, dw + C, dw + 2 * C, scratch, x, y, bias, stats, stats + BT, BT, C, fused, s);
                     }),
                     4 * act, copy);
    report_bytes("gelu_forward (4C)", time_ms(reps, [&] { gelu_forward(y, x, (size_t)BT * 4 * C, s); }), 8 * act, copy);
    report_bytes("gelu_backward (4C)", time_ms(reps, [&] { gelu_backward(z, x, y, (size_t)BT * 4 * C, s); }), 12 * act, copy);
    /* the bytes it must move (read the row once, write its gradient): the row kept in shared memory, and the row read
     * twice beside it (no columns cached) */
    report_bytes("fused_classifier (training)", time_ms(reps, [&] { fused_classifier(logits, losses, tokens, 1.0f / BT, BT, V, Vp, s); }),
                 2.0 * BT * Vp * sizeof(floatX), copy);
    report_bytes("fused_classifier (training, re-read)",
                 time_ms(reps, [&] { fused_classifier_cached(logits, losses, tokens, 1.0f / BT, BT, V, Vp, 0, s); }),
                 2.0 * BT * Vp * sizeof(floatX), copy);
    float* master;
    size_t n = (size_t)4 * C * C;
    cudaCheck(cudaMalloc(&master, 3 * n * sizeof(float)));
    cudaCheck(cudaMemset(master, 0, 3 * n * sizeof(float)));
    report_bytes("adamw (fp32 m, v, master; 2.4M)", time_ms(reps, [&] {
                     adamw_update(w, master, dw, master + n, master + 2 * n, n, 0, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1, 1, s);
                 }),
                 (double)n * (2 * sizeof(floatX) + 6 * sizeof(float) + sizeof(floatX)), copy);
    report_bytes("global_norm_squared (BT x 4C)", time_ms(reps, [&] { global_norm_squared(x, (size_t)BT * 4 * C, scratch, s); }), 4 * act, copy);
    report_flops("matmul_forward fc + GELU", time_ms(reps, [&] { matmul_forward(&blas, y, z, x, w, bias, BT, C, 4 * C); }), 2.0 * BT * C * 4 * C,
                 peak);
    report_flops("matmul_backward fcproj + DGELU", time_ms(reps, [&] { matmul_backward(&blas, y, dw, bias, scratch, x, z, w, pre, BT, 4 * C, C); }),
                 4.0 * BT * C * 4 * C, peak);
    /* the same two with gelu_fusion 0 (--gelu-fusion 0: the separate kernels of llmc/gelu.cuh, as the fp32 build runs
     * both pairs): if these are faster, cuBLASLt's GELU epilogues are not worth it on this GPU and CUDA version */
    blas.gelu_fusion = 0;
    report_flops("matmul_forward fc, GELU apart", time_ms(reps, [&] { matmul_forward(&blas, y, z, x, w, bias, BT, C, 4 * C); }),
                 2.0 * BT * C * 4 * C, peak);
    report_flops("matmul_backward fcproj, DGELU apart",
                 time_ms(reps, [&] { matmul_backward(&blas, y, dw, bias, scratch, x, z, w, pre, BT, 4 * C, C); }), 4.0 * BT * C * 4 * C, peak);
    report_flops("matmul_forward classifier", time_ms(reps, [&] { matmul_forward(&blas, logits, NULL, x, wte, NULL, BT, C, Vp); }),
                 2.0 * BT * C * Vp, peak);
    /* causal FLOPs: forward 2·T²·hs·NH·B (half of QKᵀ and PV), backward 2.5x that */
    double attention_flops = 2.0 * B * NH * (double)T * T * (C / NH);
    report_flops("flash_attention_forward", time_ms(reps, [&] { flash_attention_forward(y, stats, x, B, T, C, NH, s); }), attention_flops, peak);
    report_flops("flash_attention_backward (atomic dQ)",
                 time_ms(reps, [&] { flash_attention_backward(z, scratch, y, y, x, stats, B, T, C, NH, 0, s); }), 2.5 * attention_flops, peak);
    report_flops("flash_attention_backward (deterministic)",
                 time_ms(reps, [&] { flash_attention_backward(z, scratch, y, y, x, stats, B, T, C, NH, 1, s); }), 2.5 * attention_flops, peak);
    printf("benchmark done\n");
    return 0;
}
