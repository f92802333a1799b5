/*
 * dev/cuda/test_kernels.cu — every kernel of the GPU trainer against its CPU reference in llmc/cpu_ops.h,
 * run in the CUDA simulator (ASan + UBSan build, fp32: -DPRECISION_FP32), on shapes that are not multiples
 * of any block size (B=3, T=13, C=40 with 5 heads of 8, V=77 padded to 128, and 36/100-wide matmuls
 * where the GELU epilogues cannot fuse). Each check prints what it compared and the relative L2 error
 * ||gpu - cpu|| / ||cpu||, bound 1e-5 (fp32 against fp32, different summation orders); the CPU ops'
 * backward functions accumulate, so they start from the same nonzero gradients as the GPU ones.
 * The vectorised kernels (16-byte packs, llmc/cuda_utils.cuh) are also run on a layernorm row wider than
 * the lanes' register cache, the encoder and layernorm at C = 42 (no multiple of PACKX: packs of 1 element), and AdamW, the global norm and GELU on arrays that start at unaligned offsets
 * (a scalar head) or at offsets that disagree (all scalar), and the column sums over more row chunks than a
 * grid's y dimension takes. Child processes check that a misaligned pack
 * access stops the simulator the way a GPU faults, and that the host wrappers reject a bad layout.
 * Ends with "N passed, M failed".
 */
#include "llmc/cuda_utils.cuh"
#include "llmc/encoder.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/matmul.cuh"
#include "llmc/flash_attention.cuh"
#include "llmc/gelu.cuh"
#include "llmc/classifier.cuh"
#include "llmc/global_norm.cuh"
#include "llmc/adamw.cuh"
#include "llmc/cpu_ops.h"

#if !defined(PRECISION_FP32)
#error "dev/cuda/test_kernels.cu compares fp32 kernels: build with -DPRECISION_FP32"
#endif

#include "dev/run_child.h"

#define BOUND 1e-5
static int passed = 0, failed = 0;

static void count(int ok) {
    if (ok) passed++;
    else failed++;
}

/* runs f in a child process (dev/run_child.h) and checks that it exits with status 1 after printing
 * `expect` to stderr. Called before this process runs any kernel, so the child forks no OpenMP threads. */
static void check_fails(const char* what, void (*f)(void*), const char* expect) {
    char text[4096];
    int ok = run_child(f, NULL, text, sizeof(text)) == 1 && strstr(text, expect) != NULL;
    char* newline = strchr(text, '\n');
    if (newline) *newline = 0;
    printf("%s  %s\n      -> %s\n", ok ? "ok  " : "FAIL", what, text);
    count(ok);
}

/* a GELU launch whose split claims 16-byte packs from an array 4 bytes past an aligned one */
static void launch_misaligned_gelu(void*) {
    float* x;
    cudaCheck(cudaMalloc(&x, 64 * sizeof(float)));
    VectorSplit split = {0, 8, PACKX, 8};
    launch_kernel(gelu_forward_kernel, dim3(1), dim3(32), 0, (cudaStream_t)0, x, x + 1, split);
    cudaCheck(cudaDeviceSynchronize());
}

/* a classifier on logits that start 4 bytes past an aligned address */
static void classifier_misaligned(void*) {
    float* x;
    int* targets;
    cudaCheck(cudaMalloc(&x, 256 * sizeof(float)));
    cudaCheck(cudaMalloc(&targets, sizeof(int)));
    fused_classifier(x + 1, x + 200, targets, 0.0f, 1, 77, 128, (cudaStream_t)0);
}

static double rel_l2(const float* a, const float* b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        diff += d * d;
        ref += (double)b[i] * b[i];
    }
    if (!(diff == diff)) return INFINITY;
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

/* compares n device floats with the host reference */
static void check(const char* what, const float* dev, const float* ref, size_t n) {
    float* host = (float*)malloc_check(n * sizeof(float));
    cudaCheck(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    double err = rel_l2(host, ref, n);
    int ok = err <= BOUND;
    printf("%s  %-62s rel L2 %.2e\n", ok ? "ok  " : "FAIL", what, err);
    count(ok);
    free(host);
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float rand_uniform(float scale) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return scale * (float)((rng_state >> 40) / 8388608.0 - 1.0);
}

/* a host array of n random values in [-scale, scale) and its device copy */
typedef struct {
    float* h;
    float* d;
    size_t n;
} Buf;
static Buf buf_random(size_t n, float scale) {
    Buf b = {(float*)malloc_check(n * sizeof(float)), NULL, n};
    for (size_t i = 0; i < n; i++) b.h[i] = rand_uniform(scale);
    cudaCheck(cudaMalloc(&b.d, n * sizeof(float)));
    cudaCheck(cudaMemcpy(b.d, b.h, n * sizeof(float), cudaMemcpyHostToDevice));
    return b;
}
static void buf_free(Buf* b) {
    free(b->h);
    cudaCheck(cudaFree(b->d));
}

/* encoder_forward and encoder_backward (accumulating into random gradients) on B x T inputs against
 * llmc/cpu_ops.h */
static void check_encoder(int B, int T, int C, int V, const int* inputs, const char* note, cudaStream_t s) {
    int BT = B * T;
    int* inp_d;
    cudaCheck(cudaMalloc(&inp_d, BT * sizeof(int)));
    cudaCheck(cudaMemcpy(inp_d, inputs, BT * sizeof(int), cudaMemcpyHostToDevice));
    Buf wte = buf_random((size_t)V * C, 1.0f), wpe = buf_random((size_t)T * C, 1.0f), out = buf_random((size_t)BT * C, 1.0f);
    char what[128];
    encoder_forward(out.d, inp_d, wte.d, wpe.d, B, T, C, s);
    encoder_forward(out.h, inputs, wte.h, wpe.h, B, T, C);
    snprintf(what, sizeof(what), "encoder_forward (B=%d T=%d C=%d)", B, T, C);
    check(what, out.d, out.h, out.n);
    int* plan = (int*)malloc_check(encoder_plan_max_ints(BT) * sizeof(int));
    int* counts = (int*)malloc_check((V + 1) * sizeof(int));
    int* plan_d;
    float* partials;
    cudaCheck(cudaMalloc(&plan_d, encoder_plan_max_ints(BT) * sizeof(int)));
    cudaCheck(cudaMalloc(&partials, encoder_partial_floats(BT, C) * sizeof(float)));
    EncoderPlan p = encoder_plan(plan, counts, inputs, BT, V);
    cudaCheck(cudaMemcpy(plan_d, plan, p.ints * sizeof(int), cudaMemcpyHostToDevice));
    encoder_backward(wte.d, wpe.d, partials, out.d, plan_d, p, B, T, C, s);
    encoder_backward(wte.h, wpe.h, out.h, inputs, B, T, C);
    snprintf(what, sizeof(what), "  encoder_backward dwte (%s, accumulating)", note);
    check(what, wte.d, wte.h, wte.n);
    check("  encoder_backward dwpe", wpe.d, wpe.h, wpe.n);
    free(plan);
    free(counts);
    cudaCheck(cudaFree(plan_d));
    cudaCheck(cudaFree(partials));
    cudaCheck(cudaFree(inp_d));
    buf_free(&wte);
    buf_free(&wpe);
    buf_free(&out);
}

/* residual_layernorm_forward (with and without the residual) and layernorm_backward on rows x C against
 * llmc/cpu_ops.h; scratch: layernorm_scratch_floats(rows, C) floats at least */
static void check_layernorm(int rows, int C, const char* note, float* scratch, cudaStream_t s) {
    size_t n = (size_t)rows * C;
    Buf a = buf_random(n, 1.0f), b = buf_random(n, 1.0f), w = buf_random(C, 1.0f), bias = buf_random(C, 1.0f),
        res = buf_random(n, 1.0f), out = buf_random(n, 1.0f), mean = buf_random(rows, 1.0f), rstd = buf_random(rows, 1.0f),
        dout = buf_random(n, 1.0f);
    char what[128];
    residual_layernorm_forward(res.d, out.d, mean.d, rstd.d, a.d, b.d, w.d, bias.d, rows, C, s);
    residual_forward(res.h, a.h, b.h, res.n);
    layernorm_forward(out.h, mean.h, rstd.h, res.h, w.h, bias.h, rows, C);
    snprintf(what, sizeof(what), "residual_layernorm_forward out (%d rows, C=%d%s)", rows, C, note);
    check(what, out.d, out.h, out.n);
    check("  residual", res.d, res.h, res.n);
    check("  mean", mean.d, mean.h, mean.n);
    check("  rstd", rstd.d, rstd.h, rstd.n);
    /* the backward with its column sums kept by the kernel (with and without the sum of dinp, dres: its own column
     * sum on the CPU), and by the separate column-sum kernels (the same sums in another order) */
    for (int variant = 0; variant < 3; variant++) {
        Buf dinp = buf_random(n, 1.0f), dw = buf_random(C, 1.0f), db = buf_random(C, 1.0f), dres = buf_random(C, 1.0f);
        int fused = variant < 2, with_dres = variant != 1;
        layernorm_backward_fused(dinp.d, dw.d, db.d, with_dres ? dres.d : NULL, scratch, dout.d, res.d, w.d, mean.d, rstd.d, rows, C,
                                 fused, s);
        layernorm_backward(dinp.h, dw.h, db.h, dout.h, res.h, w.h, mean.h, rstd.h, rows, C);
        snprintf(what, sizeof(what), "  layernorm_backward dinp (accumulating; column sums %s%s)", fused ? "fused" : "apart",
                 with_dres ? ", with Σ dinp" : "");
        check(what, dinp.d, dinp.h, dinp.n);
        check("  layernorm_backward dweight", dw.d, dw.h, dw.n);
        check("  layernorm_backward dbias", db.d, db.h, db.n);
        if (with_dres) {
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < C; c++) dres.h[c] += dinp.h[(size_t)r * C + c];
            check("  layernorm_backward Σ dinp (the bias gradient below)", dres.d, dres.h, dres.n);
        }
        Buf* grads[] = {&dinp, &dw, &db, &dres};
        for (Buf* x : grads) buf_free(x);
    }
    residual_layernorm_forward(NULL, out.d, mean.d, rstd.d, a.d, NULL, w.d, bias.d, rows, C, s);
    layernorm_forward(out.h, mean.h, rstd.h, a.h, w.h, bias.h, rows, C);
    check("  residual_layernorm_forward without residual", out.d, out.h, out.n);
    Buf* all[] = {&a, &b, &w, &bias, &res, &out, &mean, &rstd, &dout};
    for (Buf* x : all) buf_free(x);
}

int main(void) {
    const int B = 3, T = 13, C = 40, NH = 5, V = 77, Vp = 128, BT = B * T;
    cudaStream_t s = 0;
    check_fails("a misaligned 16-byte load faults (simulator check)", launch_misaligned_gelu, "misaligned 16-byte load of inp + i");
    check_fails("fused_classifier rejects unaligned logits", classifier_misaligned, "error: logits = ");
    BlasContext blas;
    blas_create(&blas, s);
    float* scratch;
    cudaCheck(cudaMalloc(&scratch, (colsum_scratch_floats(BT, 4 * C) + layernorm_scratch_floats(BT, (32 * LN_MAX_CACHED_PACKS + 17) * PACKX)) * sizeof(float) + flash_attention_scratch_bytes(B, T, C, NH) + 4096));

    int few_tokens[BT], frequent_tokens[305];
    for (int i = 0; i < BT; i++) few_tokens[i] = (i * 7 + i / 5) % 11;
    for (int i = 0; i < 305; i++) /* 153 of token 3 (three runs), 64 of 5 (one full run), 65 of 9 (two runs), 23 others */
        frequent_tokens[(i * 37) % 305] = i < 153 ? 3 : i < 217 ? 5 : i < 282 ? 9 : 10 + i % 23;
    check_encoder(B, T, C, V, few_tokens, "11 distinct tokens, one run each", s);
    check_encoder(5, 61, C, V, frequent_tokens, "tokens of 153, 64 and 65 positions", s);
    check_encoder(5, 61, 42, V, frequent_tokens, "C no multiple of PACKX: packs of 1", s);

    /* residual + layernorm forward, layernorm backward: the model's shape, rows of 3 to 4 packs per lane (a
     * cache of 4, partly used), and rows wider than the largest register cache (32·LN_MAX_CACHED_PACKS
     * packs: the rest re-read) */
    check_layernorm(BT, C, "", scratch, s);
    check_layernorm(5, (32 * 3 + 5) * PACKX, ": cache of 4 packs", scratch, s);
    check_layernorm(5, (32 * LN_MAX_CACHED_PACKS + 17) * PACKX, ": beyond the register cache", scratch, s);
    check_layernorm(BT, 42, ": no multiple of PACKX, packs of 1", scratch, s);
    check_layernorm(5, 32 * LN_MAX_CACHED_PACKS + 17, ": packs of 1 beyond the register cache", scratch, s);
    { /* more row chunks than a column-sum stage-2 block has threads (each thread then sums several) */
        int rows = 2 * COLSUM_FINISH * COLSUM_CHUNK + 37;
        float* big;
        cudaCheck(cudaMalloc(&big, layernorm_scratch_floats(rows, 3 * PACKX) * sizeof(float)));
        check_layernorm(rows, 3 * PACKX, ": 2 x 128 + 1 column-sum chunks", big, s);
        cudaCheck(cudaFree(big));
    }
    { /* more row chunks than a grid's y dimension takes (65535; B·T above 4.2M tokens): ones, so the sums are exact */
        int rows = 65535 * COLSUM_CHUNK + 1;
        size_t n = (size_t)rows * PACKX;
        float *ones = (float*)malloc_check(n * sizeof(float)), sums[PACKX], *ones_d, *sums_d, *big;
        for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
        cudaCheck(cudaMalloc(&ones_d, n * sizeof(float)));
        cudaCheck(cudaMalloc(&sums_d, PACKX * sizeof(float)));
        cudaCheck(cudaMalloc(&big, colsum_scratch_floats(rows, PACKX) * sizeof(float)));
        cudaCheck(cudaMemcpy(ones_d, ones, n * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemset(sums_d, 0, PACKX * sizeof(float)));
        column_sums(sums_d, NULL, big, ones_d, NULL, NULL, NULL, rows, PACKX, s);
        cudaCheck(cudaMemcpy(sums, sums_d, PACKX * sizeof(float), cudaMemcpyDeviceToHost));
        int ok = 1;
        for (int c = 0; c < PACKX; c++) ok &= sums[c] == (float)rows;
        printf("%s  column_sums over %d rows (%d chunks, past gridDim.y's 65535): %.0f, expected %d\n", ok ? "ok  " : "FAIL", rows,
               (int)ceil_div(rows, COLSUM_CHUNK), sums[0], rows);
        count(ok);
        free(ones);
        cudaCheck(cudaFree(ones_d));
        cudaCheck(cudaFree(sums_d));
        cudaCheck(cudaFree(big));
    }

    /* matmuls: plain + bias, GELU fused (OC % 8 == 0) and not (OC = 100), and with a bias 4 bytes past an aligned
     * address (as a layer's slice of a stacked bias at C = 45: no bias epilogue, add_bias_kernel), and their backwards */
    for (int variant = 0; variant < 4; variant++) {
        int Cin = variant == 2 ? 36 : variant == 3 ? 45 : C, OC = variant == 0 ? 3 * C : variant == 1 ? 4 * C : variant == 2 ? 100 : 135;
        int gelu = variant > 0, skew = variant == 3;
        char what[128];
        Buf inp = buf_random((size_t)BT * Cin, 1.0f), w = buf_random((size_t)OC * Cin, 0.5f), bias = buf_random(OC + skew, 1.0f),
            out = buf_random((size_t)BT * OC, 1.0f), pre = buf_random((size_t)BT * OC, 1.0f), dout = buf_random((size_t)BT * OC, 1.0f),
            dinp = buf_random((size_t)BT * Cin, 1.0f), dw = buf_random((size_t)OC * Cin, 1.0f), db = buf_random(OC, 1.0f);
        matmul_forward(&blas, out.d, gelu ? pre.d : NULL, inp.d, w.d, bias.d + skew, BT, Cin, OC);
        matmul_forward(gelu ? pre.h : out.h, inp.h, w.h, bias.h + skew, BT, Cin, OC);
        if (gelu) gelu_forward(out.h, pre.h, out.n);
        snprintf(what, sizeof(what), "matmul_forward BT=%d C=%d OC=%d%s%s", BT, Cin, OC,
                 gelu ? (matmul_gelu_fusable(OC) && !skew ? " + GELU epilogue" : " + GELU kernel") : " + bias",
                 skew ? ", unaligned bias: bias kernel" : "");
        check(what, out.d, out.h, out.n);
        if (gelu) check("  its pre-GELU output", pre.d, pre.h, pre.n);
        /* backward of out = f(inp·wᵀ + b): through the GELU when there is one (the fused DGELU needs C % 8 == 0) */
        float* dpre = (float*)malloc_check(dout.n * sizeof(float));
        memcpy(dpre, dout.h, dout.n * sizeof(float));
        if (gelu) {
            memset(dpre, 0, dout.n * sizeof(float));
            gelu_backward(dpre, pre.h, dout.h, dout.n);
        }
        /* the GPU's dinp is overwritten: compare against a zero start */
        float* dinp_ref = (float*)calloc_check(dinp.n, sizeof(float));
        matmul_backward(dinp_ref, dw.h, db.h, dpre, inp.h, w.h, BT, Cin, OC);
        float* dpre_d;
        cudaCheck(cudaMalloc(&dpre_d, dout.n * sizeof(float)));
        cudaCheck(cudaMemcpy(dpre_d, dpre, dout.n * sizeof(float), cudaMemcpyHostToDevice));
        matmul_backward(&blas, dinp.d, dw.d, db.d, scratch, dpre_d, inp.d, w.d, NULL, BT, Cin, OC);
        snprintf(what, sizeof(what), "matmul_backward dinp BT=%d C=%d OC=%d", BT, Cin, OC);
        check(what, dinp.d, dinp_ref, dinp.n);
        check("  dweight (accumulating)", dw.d, dw.h, dw.n);
        check("  dbias (accumulating)", db.d, db.h, db.n);
        cudaCheck(cudaFree(dpre_d));
        free(dpre);
        free(dinp_ref);
        Buf* all[] = {&inp, &w, &bias, &out, &pre, &dout, &dinp, &dw, &db};
        for (Buf* x : all) buf_free(x);
    }

    /* the DGELU path: dinp = (dout·w)·gelu'(pre), fused (Cin % 8 == 0) and by the separate kernel (Cin = 36) */
    for (int Cin = 36; Cin <= 40; Cin += 4) {
        int OC = 24;
        Buf inp = buf_random((size_t)BT * Cin, 1.0f), w = buf_random((size_t)OC * Cin, 0.5f), pre = buf_random((size_t)BT * Cin, 2.0f),
            dout = buf_random((size_t)BT * OC, 1.0f), dinp = buf_random((size_t)BT * Cin, 1.0f), dw = buf_random((size_t)OC * Cin, 1.0f);
        matmul_backward(&blas, dinp.d, dw.d, NULL, scratch, dout.d, inp.d, w.d, pre.d, BT, Cin, OC);
        float* dgelu_out = (float*)calloc_check(dinp.n, sizeof(float));
        float* dinp_ref = (float*)calloc_check(dinp.n, sizeof(float));
        matmul_backward(dgelu_out, dw.h, NULL, dout.h, inp.h, w.h, BT, Cin, OC);
        gelu_backward(dinp_ref, pre.h, dgelu_out, dinp.n);
        char what[128];
        snprintf(what, sizeof(what), "matmul_backward with GELU' (C=%d: %s)", Cin, matmul_gelu_fusable(Cin) ? "DGELU epilogue" : "kernel");
        check(what, dinp.d, dinp_ref, dinp.n);
        free(dgelu_out);
        free(dinp_ref);
        Buf* all[] = {&inp, &w, &pre, &dout, &dinp, &dw};
        for (Buf* x : all) buf_free(x);
    }

    /* the algorithms kept per problem (llmc/matmul.cuh): one shape on 256-byte aligned matrices, then on slices
     * 16 bytes past them (the heuristic must be asked again: the fake cuBLASLt refuses a 256-byte algorithm on
     * them); then as many other problems as the table holds, which replace every entry, and the second again */
    {
        int OC = 24, fillers = BLAS_PLANS;
        Buf inp = buf_random((size_t)fillers * C + 4, 1.0f), w = buf_random((size_t)OC * C + 4, 0.5f),
            out = buf_random((size_t)fillers * OC + 4, 1.0f), ref = buf_random((size_t)fillers * OC + 4, 1.0f);
        const char* names[2] = {"matmul plans: 256-byte aligned matrices", "matmul plans: the same shape 16 bytes past them"};
        for (int shift = 0; shift <= 4; shift += 4) {
            matmul_forward(&blas, out.d + shift, NULL, inp.d + shift, w.d + shift, NULL, BT, C, OC);
            matmul_forward(ref.h + shift, inp.h + shift, w.h + shift, NULL, BT, C, OC);
            check(names[shift / 4], out.d + shift, ref.h + shift, (size_t)BT * OC);
        }
        for (int rows = 1; rows <= fillers; rows++) matmul_forward(&blas, out.d, NULL, inp.d, w.d, NULL, rows, C, 8);
        int full = blas.num_plans == BLAS_PLANS;
        printf("%s  matmul plans: %d more problems, the table holds %d of %d\n", full ? "ok  " : "FAIL", fillers, blas.num_plans,
               BLAS_PLANS);
        count(full);
        matmul_forward(&blas, out.d + 4, NULL, inp.d + 4, w.d + 4, NULL, BT, C, OC);
        check("matmul plans: the shifted problem again, after its entry was replaced", out.d + 4, ref.h + 4, (size_t)BT * OC);
        Buf* all[] = {&inp, &w, &out, &ref};
        for (Buf* x : all) buf_free(x);
    }

    /* flash attention forward and backward, its fp32 path (the CPU keeps the probabilities; the GPU recomputes them) */
    {
        Buf qkv = buf_random((size_t)BT * 3 * C, 1.5f), out = buf_random((size_t)BT * C, 1.0f), lse = buf_random((size_t)BT * NH, 1.0f),
            dout = buf_random((size_t)BT * C, 1.0f), dqkv = buf_random((size_t)BT * 3 * C, 1.0f);
        float* att = (float*)malloc_check((size_t)B * NH * T * T * sizeof(float));
        float* dqkv_ref = (float*)calloc_check(dqkv.n, sizeof(float));
        flash_attention_forward(out.d, lse.d, qkv.d, B, T, C, NH, s);
        attention_forward(out.h, att, qkv.h, B, T, C, NH);
        check("flash_attention_forward (B=3 T=13 C=40 NH=5, hs=8)", out.d, out.h, out.n);
        flash_attention_backward(dqkv.d, scratch, dout.d, out.d, qkv.d, lse.d, B, T, C, NH, 1, s);
        attention_backward(dqkv_ref, dout.h, qkv.h, att, B, T, C, NH);
        check("flash_attention_backward dqkv", dqkv.d, dqkv_ref, dqkv.n);
        free(att);
        free(dqkv_ref);
        Buf* all[] = {&qkv, &out, &lse, &dout, &dqkv};
        for (Buf* x : all) buf_free(x);
    }

    /* GELU kernels on an odd length */
    {
        size_t n = 1000;
        Buf x = buf_random(n, 4.0f), y = buf_random(n, 1.0f), dy = buf_random(n, 1.0f), dx = buf_random(n, 1.0f);
        const float big[] = {8, 9.95f, 10, 12, 20, 87, 100, 1e3f, 1e4f}; /* exp(2u) saturates; x·exp(2u) overflows */
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) x.h[2 * i] = big[i], x.h[2 * i + 1] = -big[i];
        cudaCheck(cudaMemcpy(x.d, x.h, n * sizeof(float), cudaMemcpyHostToDevice));
        gelu_forward(y.d, x.d, n, s);
        gelu_forward(y.h, x.h, n);
        check("gelu_forward n=1000, 18 of them at +-8 .. 1e4", y.d, y.h, n);
        gelu_backward(dx.d, x.d, dy.d, n, s);
        memset(dx.h, 0, n * sizeof(float));
        gelu_backward(dx.h, x.h, dy.h, n);
        check("gelu_backward n=1000 (overwrites)", dx.d, dx.h, n);
        Buf* all[] = {&x, &y, &dy, &dx};
        for (Buf* b : all) buf_free(b);
    }

    /* fused classifier: losses, then in-place gradients (padded columns zeroed); at V = 10007 each thread
     * reads 3 packs and the logits rise along the row (+0.002 a column), so the running max moves pack by pack;
     * GPT-2's vocabulary takes 4 batches of loads a thread, the last partial.
     * Each shape with the row kept in shared memory as fused_classifier chooses (here all of it), with none of it,
     * and with part of it (the tail read from memory twice). */
    {
        const int shapes[][3] = {{BT, V, Vp}, {3, 10007, 10112}, {4, 50257, 50304}}; /* rows, V, Vp (the last GPT-2's) */
        for (const auto& shape : shapes) {
            int rows = shape[0], v = shape[1], vp = shape[2];
            int* targets = (int*)malloc_check(rows * sizeof(int));
            for (int i = 0; i < rows; i++) targets[i] = (i * 13) % v;
            int* targets_d;
            cudaCheck(cudaMalloc(&targets_d, rows * sizeof(int)));
            cudaCheck(cudaMemcpy(targets_d, targets, rows * sizeof(int), cudaMemcpyHostToDevice));
            const int cached_choices[] = {classifier_cached_columns(vp), 0, (v / 2) / PACKX * PACKX};
            for (int cached : cached_choices) {
                Buf logits = buf_random((size_t)rows * vp, 5.0f), losses = buf_random(rows, 1.0f);
                if (v > 4096) {
                    for (size_t i = 0; i < logits.n; i++) logits.h[i] += 0.002f * (float)(i % vp);
                    cudaCheck(cudaMemcpy(logits.d, logits.h, logits.n * sizeof(float), cudaMemcpyHostToDevice));
                }
                char name[128];
                fused_classifier_cached(logits.d, losses.d, targets_d, 0.0f, rows, v, vp, cached, s);
                crossentropy_forward(losses.h, logits.h, targets, rows, v, vp);
                snprintf(name, sizeof(name), "fused_classifier losses (rows=%d, V=%d, Vp=%d, %d columns cached)", rows, v, vp, cached);
                check(name, losses.d, losses.h, rows);
                check("  logits untouched without a gradient", logits.d, logits.h, logits.n);
                float dloss = 1.0f / rows;
                float* dlosses = (float*)malloc_check(rows * sizeof(float));
                for (int i = 0; i < rows; i++) dlosses[i] = dloss;
                fused_classifier_cached(logits.d, losses.d, targets_d, dloss, rows, v, vp, cached, s);
                crossentropy_backward(logits.h, logits.h, targets, dlosses, rows, v, vp);
                snprintf(name, sizeof(name), "fused_classifier in-place dlogits (V=%d, %d columns cached)", v, cached);
                check(name, logits.d, logits.h, logits.n);
                free(dlosses);
                buf_free(&logits);
                buf_free(&losses);
            }
            free(targets);
            cudaCheck(cudaFree(targets_d));
        }
    }

    /* a row whose target holds the max by far: its loss is log(1 + ~e^-40), not below 0 (the base-2 sums must scale
     * the target's logit as they scale the max); targets over [-30, 30] in steps that are no powers of two */
    {
        const int rows = 64, v = 13, vp = 16;
        float* host = (float*)malloc_check((size_t)rows * vp * sizeof(float));
        int targets[rows], *targets_d, negative = 0;
        for (int i = 0; i < rows; i++) {
            targets[i] = i % v;
            for (int j = 0; j < vp; j++) host[(size_t)i * vp + j] = j == targets[i] ? -30.0f + 0.937f * (float)i : -100.0f;
        }
        float *logits_d, *losses_d, losses[rows];
        cudaCheck(cudaMalloc(&logits_d, (size_t)rows * vp * sizeof(float)));
        cudaCheck(cudaMalloc(&losses_d, rows * sizeof(float)));
        cudaCheck(cudaMalloc(&targets_d, rows * sizeof(int)));
        cudaCheck(cudaMemcpy(logits_d, host, (size_t)rows * vp * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(targets_d, targets, rows * sizeof(int), cudaMemcpyHostToDevice));
        fused_classifier(logits_d, losses_d, targets_d, 0.0f, rows, v, vp, s);
        cudaCheck(cudaMemcpy(losses, losses_d, rows * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < rows; i++) negative += losses[i] < 0.0f;
        printf("%s  fused_classifier: a target far above the rest has loss >= 0 (%d of %d rows below 0)\n", negative ? "FAIL" : "ok  ",
               negative, rows);
        count(negative == 0);
        free(host);
        cudaCheck(cudaFree(logits_d));
        cudaCheck(cudaFree(losses_d));
        cudaCheck(cudaFree(targets_d));
    }

    /* global norm and AdamW on a length that is no multiple of anything */
    {
        size_t n = 300007;
        Buf g = buf_random(n, 1.0f), p = buf_random(n, 1.0f), m = buf_random(n, 0.1f), v = buf_random(n, 0.1f);
        for (size_t i = 0; i < n; i++) v.h[i] = fabsf(v.h[i]);
        cudaCheck(cudaMemcpy(v.d, v.h, n * sizeof(float), cudaMemcpyHostToDevice));
        float ours = global_norm_squared(g.d, n, scratch, s);
        float ref = (float)global_norm_squared(g.h, n);
        double err = fabs((double)ours - ref) / ref;
        printf("%s  %-62s rel    %.2e\n", err <= BOUND ? "ok  " : "FAIL", "global_norm_squared n=300007", err);
        count(err <= BOUND);
        adamw_update(p.d, NULL, g.d, m.d, v.d, n, 0, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3, 42, s);
        adamw_update(p.h, g.h, m.h, v.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3);
        check("adamw params (t=3, wd 0.1, grad scale 0.7)", p.d, p.h, n);
        check("adamw m", m.d, m.h, n);
        check("adamw v", v.d, v.h, n);
        Buf* all[] = {&g, &p, &m, &v};
        for (Buf* b : all) buf_free(b);
    }

    /* the same kernels on ranges at unaligned offsets, as a ZeRO-1 shard: every array 3 elements past
     * alignment (a scalar head, then packs), and arrays that disagree (everything scalar) */
    for (int agree = 1; agree >= 0; agree--) {
        size_t n = 1003, off = 3, off_m = agree ? 3 : 2;
        char what[128];
        Buf g = buf_random(n + 8, 1.0f), p = buf_random(n + 8, 1.0f), m = buf_random(n + 8, 0.1f), v = buf_random(n + 8, 0.1f),
            y = buf_random(n + 8, 1.0f);
        for (size_t i = 0; i < v.n; i++) v.h[i] = fabsf(v.h[i]);
        cudaCheck(cudaMemcpy(v.d, v.h, v.n * sizeof(float), cudaMemcpyHostToDevice));
        float ours = global_norm_squared(g.d + off_m, n, scratch, s);
        float ref = (float)global_norm_squared(g.h + off_m, n);
        double err = fabs((double)ours - ref) / ref;
        snprintf(what, sizeof(what), "global_norm_squared n=%zu at offset %zu", n, off_m);
        printf("%s  %-62s rel    %.2e\n", err <= BOUND ? "ok  " : "FAIL", what, err);
        count(err <= BOUND);
        adamw_update(p.d + off, NULL, g.d + off, m.d + off_m, v.d + off, n, 5, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3, 42, s);
        adamw_update(p.h + off, g.h + off, m.h + off_m, v.h + off, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 3);
        snprintf(what, sizeof(what), "adamw params, m, v at offsets %zu/%zu (%s)", off, off_m, agree ? "scalar head, packs" : "all scalar");
        check(what, p.d, p.h, p.n);
        check("  m", m.d, m.h, m.n);
        check("  v", v.d, v.h, v.n);
        gelu_forward(y.d + off, g.d + off_m, n, s);
        gelu_forward(y.h + off, g.h + off_m, n);
        snprintf(what, sizeof(what), "gelu_forward n=%zu at offsets %zu/%zu", n, off, off_m);
        check(what, y.d, y.h, y.n);
        Buf* all[] = {&g, &p, &m, &v, &y};
        for (Buf* b : all) buf_free(b);
    }

    cudaCheck(cudaFree(scratch));
    blas_destroy(&blas);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
