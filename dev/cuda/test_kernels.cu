/*
 * dev/cuda/test_kernels.cu — every kernel of the GPU trainer against its CPU reference in llmc/cpu_ops.h,
 * run in the CUDA simulator (ASan + UBSan build), in either precision: fp32 (-DPRECISION_FP32,
 * build/gpu/test_kernels) or bf16 (the default, build/gpu/test_kernels_bf16: floatX = bf16, PACKX = 8), on shapes
 * that are not multiples of any block size (B=3, T=13, C=40 with 5 heads of 8, V=77 padded to 128, and 36/100-wide
 * matmuls where the GELU epilogues cannot fuse; in bf16 the 40/160-wide ones fuse GELU, and run again with
 * gelu_fusion 0, which must give the separate kernels' rounding; the fp32 build never fuses it; matrices whose rows are
 * no multiple of 16 bytes, 36/45/100/135-wide in bf16 and 45/135-wide in fp32, must go through cublasGemmEx). Each array has its
 * kernel's element type on the device (floatX for activations, parameters and gradients; fp32 for layernorm's
 * mean/rstd, the losses, AdamW's m, v and master weights, the scratch); the host keeps fp32 copies rounded to that type, so the CPU reference computes from exactly
 * the values the GPU reads. Each check prints what it compared and the relative L2 error ||gpu - cpu|| / ||cpu||,
 * where cpu is the reference rounded (to nearest) to the output's type: the host mirrors every rounding the kernels
 * make to a stored value (e.g. the GELU kernel's input, pre, read back in bf16; the fused epilogue's gelu of the
 * unrounded fp32 value), and after a check the host array holds the rounded values the device keeps.
 * Bounds (see BOUND_* below): fp32 against fp32 (different summation orders) 1e-5, in both builds; bf16 outputs
 * 1e-3 (only 1-ulp disagreements where two fp32 values that differ by summation order straddle a rounding
 * boundary; one unmirrored rounding or a wrong rounding mode gives ~2e-3 and more), flash attention's bf16 path
 * 1e-2 (its probabilities are rounded to bf16 inside the kernel: rounding the host cannot mirror).
 * The CPU ops' backward functions accumulate, so they start from the same nonzero gradients as the GPU ones.
 * The vectorised kernels (16-byte packs, llmc/cuda_utils.cuh) are also run on a layernorm row wider than
 * the lanes' register cache, the encoder and layernorm at C = 42 (no multiple of PACKX: packs of 1 element), and
 * AdamW, the global norm and GELU on arrays that start at unaligned offsets (a scalar head) or at offsets that
 * disagree (all scalar), and the column sums over more row chunks than a grid's y dimension takes. AdamW with fp32
 * master weights and params_from_master are checked bit for bit against the stochastic rounding their comment
 * specifies (hash_u32 of the element's index; in fp32 an exact copy), and without master weights each bf16 parameter
 * must be one of the two bf16 neighbours of the reference, rounded up or down without bias. Child processes check
 * that a misaligned pack access stops the simulator the way a GPU faults, and that the host wrappers reject a bad
 * layout (misaligned by one element of floatX).
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

#include "dev/run_child.h"

/* Bounds on the relative L2 error against the reference rounded to the output's type.
 * BOUND_F: fp32 outputs computed in fp32 from the same inputs as the reference (only the summation order differs).
 * BOUND_X: floatX outputs. bf16: the reference mirrors each rounding, so the two differ by one ulp (2^-8..2^-7
 *   relative) only where the GPU's and the CPU's fp32 values (which differ by ~1e-7..1e-6 relative) fall on either
 *   side of a rounding boundary: a fraction ~1e-4 of the elements, rel L2 ~1e-4. A rounding the reference does not
 *   make (a value rounded twice, a wrong rounding mode, an input read at the wrong bf16 index) gives ~2^-9 ≈ 2e-3 or
 *   more: 1e-3 separates them.
 * BOUND_ATT: flash attention. bf16: 1e-2 (the issue's bound for its bf16 path), which rounds P to bf16 for the PV
 *   product and reads out in bf16 for D = rowsum(dout∘out), roundings the CPU reference (fp32 probabilities) has not. */
#define BOUND_F 1e-5
#if defined(PRECISION_FP32)
#define BOUND_X 1e-5
#define BOUND_ATT 1e-5
#else
#define BOUND_X 1e-3
#define BOUND_ATT 1e-2
#endif
static int passed = 0, failed = 0;

static void count(int ok) {
    if (ok) passed++;
    else failed++;
}

/* that n products went through cublasGemmEx (llmc/matmul.cuh's path for matrices under 16-byte alignment) */
static void check_gemm_fallbacks(const char* what, long n, long expected) {
    int ok = n == expected;
    printf("%s  %-62s %ld (expected %ld)\n", ok ? "ok  " : "FAIL", what, n, expected);
    count(ok);
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

/* a GELU launch whose split claims 16-byte packs from an array one element (2 or 4 bytes) past an aligned one */
static void launch_misaligned_gelu(void*) {
    floatX* x;
    cudaCheck(cudaMalloc(&x, 64 * sizeof(floatX)));
    VectorSplit split = {0, 8, PACKX, 8};
    launch_kernel(gelu_forward_kernel, dim3(1), dim3(32), 0, (cudaStream_t)0, x, x + 1, split);
    cudaCheck(cudaDeviceSynchronize());
}

/* a classifier on logits that start one element past an aligned address */
static void classifier_misaligned(void*) {
    floatX* x;
    float* losses;
    int* targets;
    cudaCheck(cudaMalloc(&x, 256 * sizeof(floatX)));
    cudaCheck(cudaMalloc(&losses, sizeof(float)));
    cudaCheck(cudaMalloc(&targets, sizeof(int)));
    fused_classifier(x + 1, losses, targets, 0.0f, 1, 77, 128, (cudaStream_t)0);
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

/* h[i] = h[i] rounded to T (to nearest; nothing for float) */
template <typename T>
static void round_to(float* h, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = (float)(T)h[i];
}

/* n device values of type T, as floats */
template <typename T>
static float* download(const T* dev, size_t n) {
    T* raw = (T*)malloc_check(n * sizeof(T));
    float* host = (float*)malloc_check(n * sizeof(float));
    cudaCheck(cudaMemcpy(raw, dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) host[i] = (float)raw[i];
    free(raw);
    return host;
}

/* compares n device values of type T with the host reference, which is first rounded to T in place (so it then
 * holds what the device stores, for the references computed from it); bound: BOUND_F for fp32 outputs, BOUND_X for
 * floatX ones unless given */
template <typename T>
static void check(const char* what, const T* dev, float* ref, size_t n, double bound = -1.0) {
    if (bound < 0.0) bound = sizeof(T) == sizeof(float) ? BOUND_F : BOUND_X;
    round_to<T>(ref, n);
    float* host = download(dev, n);
    double err = rel_l2(host, ref, n);
    int ok = err <= bound;
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

/* n values on the host (rounded to T) and their device copy of type T */
template <typename T>
struct BufT {
    float* h;
    T* d;
    size_t n;
};
typedef BufT<floatX> Buf; /* activations, parameters, gradients */
typedef BufT<float> BufF; /* the kernels' fp32 arrays */

/* rounds b.h to T and copies it to the device */
template <typename T>
static void upload(BufT<T>& b) {
    round_to<T>(b.h, b.n);
    T* raw = (T*)malloc_check(b.n * sizeof(T));
    for (size_t i = 0; i < b.n; i++) raw[i] = (T)b.h[i];
    cudaCheck(cudaMemcpy(b.d, raw, b.n * sizeof(T), cudaMemcpyHostToDevice));
    free(raw);
}
/* a host array of n random values in [-scale, scale), rounded to T, and its device copy */
template <typename T>
static BufT<T> buf_random_t(size_t n, float scale) {
    BufT<T> b = {(float*)malloc_check(n * sizeof(float)), NULL, n};
    for (size_t i = 0; i < n; i++) b.h[i] = rand_uniform(scale);
    cudaCheck(cudaMalloc(&b.d, n * sizeof(T)));
    upload(b);
    return b;
}
static Buf buf_random(size_t n, float scale) { return buf_random_t<floatX>(n, scale); }
static BufF buf_random_f(size_t n, float scale) { return buf_random_t<float>(n, scale); }
template <typename T>
static void buf_free(BufT<T>& b) {
    free(b.h);
    cudaCheck(cudaFree(b.d));
}
template <typename... B>
static void free_all(B&... b) {
    (buf_free(b), ...);
}
/* a floatX device copy of n host floats, which are first rounded to floatX (as the device holds them) */
static floatX* to_device(float* h, size_t n) {
    BufT<floatX> b = {h, NULL, n};
    cudaCheck(cudaMalloc(&b.d, n * sizeof(floatX)));
    upload(b);
    return b.d;
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
    check(what, out.d, out.h, out.n); /* out.h now as stored: the backward's dout */
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
    free_all(wte, wpe, out);
}

/* residual_layernorm_forward (with and without the residual) and layernorm_backward on rows x C against
 * llmc/cpu_ops.h; scratch: layernorm_scratch_floats(rows, C) floats at least */
static void check_layernorm(int rows, int C, const char* note, float* scratch, cudaStream_t s) {
    size_t n = (size_t)rows * C;
    Buf a = buf_random(n, 1.0f), b = buf_random(n, 1.0f), w = buf_random(C, 1.0f), bias = buf_random(C, 1.0f), res = buf_random(n, 1.0f),
        out = buf_random(n, 1.0f), dout = buf_random(n, 1.0f);
    BufF mean = buf_random_f(rows, 1.0f), rstd = buf_random_f(rows, 1.0f);
    char what[128];
    residual_layernorm_forward(res.d, out.d, mean.d, rstd.d, a.d, b.d, w.d, bias.d, rows, C, s);
    residual_forward(res.h, a.h, b.h, res.n);
    round_to<floatX>(res.h, res.n); /* the statistics are taken of x as stored */
    layernorm_forward(out.h, mean.h, rstd.h, res.h, w.h, bias.h, rows, C);
    snprintf(what, sizeof(what), "residual_layernorm_forward out (%d rows, C=%d%s)", rows, C, note);
    check(what, out.d, out.h, out.n);
    check("  residual", res.d, res.h, res.n);
    check("  mean", mean.d, mean.h, mean.n);
    check("  rstd", rstd.d, rstd.h, rstd.n);
    /* the backward with its column sums kept by the kernel (with and without the sum of dinp, dres: its own column
     * sum on the CPU, of dinp as stored), and by the separate column-sum kernels (the same sums in another order) */
    for (int variant = 0; variant < 3; variant++) {
        Buf dinp = buf_random(n, 1.0f), dw = buf_random(C, 1.0f), db = buf_random(C, 1.0f), dres = buf_random(C, 1.0f);
        int fused = variant < 2, with_dres = variant != 1;
        layernorm_backward_fused(dinp.d, dw.d, db.d, with_dres ? dres.d : NULL, scratch, dout.d, res.d, w.d, mean.d, rstd.d, rows, C,
                                 fused, s);
        layernorm_backward(dinp.h, dw.h, db.h, dout.h, res.h, w.h, mean.h, rstd.h, rows, C);
        snprintf(what, sizeof(what), "  layernorm_backward dinp (accumulating; column sums %s%s)", fused ? "fused" : "apart",
                 with_dres ? ", with Σ dinp" : "");
        check(what, dinp.d, dinp.h, dinp.n); /* dinp.h now rounded as stored */
        check("  layernorm_backward dweight", dw.d, dw.h, dw.n);
        check("  layernorm_backward dbias", db.d, db.h, db.n);
        if (with_dres) {
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < C; c++) dres.h[c] += dinp.h[(size_t)r * C + c];
            check("  layernorm_backward Σ dinp (the bias gradient below)", dres.d, dres.h, dres.n);
        }
        free_all(dinp, dw, db, dres);
    }
    residual_layernorm_forward(NULL, out.d, mean.d, rstd.d, a.d, NULL, w.d, bias.d, rows, C, s);
    layernorm_forward(out.h, mean.h, rstd.h, a.h, w.h, bias.h, rows, C);
    check("  residual_layernorm_forward without residual", out.d, out.h, out.n);
    free_all(a, b, w, bias, res, out, dout, mean, rstd);
}

/* the parameter store_stochastic (llmc/cuda_utils.cuh) makes of x with the random bits r: in bf16, x plus 16 random
 * bits below the kept mantissa, truncated (infinities and NaN to nearest); in fp32, x */
static float stochastic_rounding(float x, uint32_t r) {
#if defined(PRECISION_FP32)
    (void)r;
    return x;
#else
    uint32_t bits;
    memcpy(&bits, &x, 4);
    if ((bits & 0x7f800000u) == 0x7f800000u) return (float)(floatX)x;
    bits = (bits + (r & 0xffffu)) & 0xffff0000u;
    float y;
    memcpy(&y, &bits, 4);
    return y;
#endif
}

/* params (n floatX on the device) against the stochastic rounding of master (n floats on the device) with the bits
 * hash_u32(index_base + i, seed): bit for bit */
static void check_stochastic_rounding(const char* what, const floatX* params_d, const float* master_d, size_t n, size_t index_base,
                                      uint32_t seed) {
    float *params = download(params_d, n), *master = download(master_d, n);
    size_t wrong = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        float expect = stochastic_rounding(master[i], hash_u32((uint32_t)(index_base + i), seed));
        if (memcmp(&expect, &params[i], 4) != 0 && wrong++ == 0) first = i;
    }
    printf("%s  %-62s %zu of %zu differ", wrong ? "FAIL" : "ok  ", what, wrong, n);
    if (wrong) printf(" (first at %zu: %.9g, expected %.9g)", first, params[first],
                      stochastic_rounding(master[first], hash_u32((uint32_t)(index_base + first), seed)));
    printf("\n");
    count(wrong == 0);
    free(params);
    free(master);
}

/* AdamW's parameters without master weights (n floatX on the device) against the CPU's fp32 update ref. fp32: a
 * check at BOUND_X. bf16 (stochastic rounding of a value the host computes in another order): each parameter must be
 * one of the two bf16 values around ref (ref widened by 1e-6 relative for the order), and unbiased: the mean of
 * (|param| - |ref|) / (the bf16 step there) within 4 standard deviations (at most 0.5 / sqrt(n) each) of 0 —
 * truncation gives -0.5, rounding up +0.5, rounding to nearest and stochastic rounding 0 — and the rounding the
 * kernel's bits give: at least 99% of the updated elements [off, off + count) equal the stochastic rounding of ref
 * with bits hash_u32(index_base + i - off, seed) (they differ only where the host's and the GPU's fp32 values
 * straddle a rounding threshold, ~1e-4 of them; rounding to nearest agrees on ~75%) */
static void check_params_rounded(const char* what, const floatX* params_d, float* ref, size_t n, size_t off, size_t count_,
                                 size_t index_base, uint32_t seed) {
#if defined(PRECISION_FP32)
    (void)off, (void)count_, (void)index_base, (void)seed;
    check(what, params_d, ref, n);
#else
    float* params = download(params_d, n);
    size_t outside = 0, same = 0;
    double bias = 0.0;
    for (size_t i = off; i < off + count_; i++) {
        float expect = stochastic_rounding(ref[i], hash_u32((uint32_t)(index_base + i - off), seed));
        same += memcmp(&expect, &params[i], 4) == 0;
    }
    for (size_t i = 0; i < n; i++) {
        float r = fabsf(ref[i]), p = params[i];
        uint32_t pb, t;
        float ap = fabsf(p);
        memcpy(&pb, &ap, 4);
        int same_sign = p == 0.0f || (p > 0.0f) == (ref[i] > 0.0f);
        int near = 0;
        for (float m : {r * (1.0f - 1e-6f), r, r * (1.0f + 1e-6f)}) {
            memcpy(&t, &m, 4);
            t &= 0xffff0000u; /* |ref| truncated to bf16; the next bf16 up is t + 0x10000 */
            near |= pb == t || pb == t + 0x10000u;
        }
        if (!(same_sign && near)) outside++;
        memcpy(&t, &r, 4);
        t &= 0xffff0000u;
        float lo, hi;
        uint32_t t1 = t + 0x10000u;
        memcpy(&lo, &t, 4);
        memcpy(&hi, &t1, 4);
        bias += (ap - r) / (hi - lo);
    }
    bias /= (double)n;
    double limit = 4.0 * 0.5 / sqrt((double)n);
    int ok = outside == 0 && fabs(bias) <= limit && (double)same >= 0.99 * (double)count_;
    printf("%s  %-62s %zu not a neighbour, bias %+.4f ulp (<= %.4f), %zu of %zu as the kernel's bits round\n", ok ? "ok  " : "FAIL", what,
           outside, bias, limit, same, count_);
    count(ok);
    free(params);
#endif
}

/* AdamW on n elements at element offsets off (params, grads, v, master) and off_m (m) of arrays of n + 8, without and
 * with fp32 master weights (index_base: the tensor's place in the parameter vector), then params_from_master */
static void check_adamw(size_t n, size_t off, size_t off_m, size_t index_base, const char* note, cudaStream_t s) {
    char what[160];
    const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, grad_scale = 0.7f;
    const int t = 3;
    const uint64_t seed = 42;
    for (int with_master = 0; with_master <= 1; with_master++) {
        Buf g = buf_random(n + 8, 1.0f), p = buf_random(n + 8, 1.0f);
        BufF m = buf_random_f(n + 8, 0.1f), v = buf_random_f(n + 8, 0.1f), master = buf_random_f(n + 8, 1.0f);
        for (size_t i = 0; i < v.n; i++) v.h[i] = fabsf(v.h[i]);
        upload(v);
        float* ref = with_master ? master.h : p.h; /* the fp32 values the update starts from */
        adamw_update(p.d + off, with_master ? master.d + off : NULL, g.d + off, m.d + off_m, v.d + off, n, index_base, lr, beta1, beta2,
                     eps, wd, grad_scale, t, seed, s);
        adamw_update(ref + off, g.h + off, m.h + off_m, v.h + off, n, lr, beta1, beta2, eps, wd, grad_scale, t);
        if (with_master) {
            snprintf(what, sizeof(what), "adamw master weights (%s)", note);
            check(what, master.d, master.h, master.n);
            check_stochastic_rounding("  adamw params: stochastic rounding of the master weights", p.d + off, master.d + off, n, index_base,
                                      adamw_seed(seed, t));
        } else {
            snprintf(what, sizeof(what), "adamw params (%s)", note);
            check_params_rounded(what, p.d, p.h, p.n, off, n, index_base, adamw_seed(seed, t));
        }
        check("  m", m.d, m.h, m.n);
        check("  v", v.d, v.h, v.n);
        if (with_master) {
            params_from_master(p.d + off, master.d + off, n, index_base, 0, seed, s);
            check_stochastic_rounding("params_from_master (t=0)", p.d + off, master.d + off, n, index_base, adamw_seed(seed, 0));
        }
        free_all(g, p, m, v, master);
    }
}

int main(void) {
    const int B = 3, T = 13, C = 40, NH = 5, V = 77, Vp = 128, BT = B * T;
    cudaStream_t s = 0;
    printf("kernels in %s (PACKX = %d)\n", FLOATX_NAME, (int)PACKX);
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
    { /* more row chunks than a grid's y dimension takes (65535; B·T above 4.2M tokens): ones, so the sums are exact,
       * added to -2^22 so that the result (rows - 2^22 = -63) is exact in bf16 too and one row more or less shows */
        int rows = 65535 * COLSUM_CHUNK + 1;
        size_t n = (size_t)rows * PACKX;
        floatX *ones = (floatX*)malloc_check(n * sizeof(floatX)), sums[PACKX], *ones_d, *sums_d;
        float* big;
        for (size_t i = 0; i < n; i++) ones[i] = (floatX)1.0f;
        for (int c = 0; c < PACKX; c++) sums[c] = (floatX)-0x1p22f;
        cudaCheck(cudaMalloc(&ones_d, n * sizeof(floatX)));
        cudaCheck(cudaMalloc(&sums_d, PACKX * sizeof(floatX)));
        cudaCheck(cudaMalloc(&big, colsum_scratch_floats(rows, PACKX) * sizeof(float)));
        cudaCheck(cudaMemcpy(ones_d, ones, n * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(sums_d, sums, PACKX * sizeof(floatX), cudaMemcpyHostToDevice));
        column_sums(sums_d, NULL, big, ones_d, NULL, NULL, NULL, rows, PACKX, s);
        cudaCheck(cudaMemcpy(sums, sums_d, PACKX * sizeof(floatX), cudaMemcpyDeviceToHost));
        int ok = 1;
        for (int c = 0; c < PACKX; c++) ok &= (float)sums[c] == (float)rows - 0x1p22f;
        printf("%s  column_sums over %d rows (%d chunks, past gridDim.y's 65535): -2^22 + %.0f, expected %d\n", ok ? "ok  " : "FAIL", rows,
               (int)ceil_div(rows, COLSUM_CHUNK), (float)sums[0] + 0x1p22f, rows);
        count(ok);
        free(ones);
        cudaCheck(cudaFree(ones_d));
        cudaCheck(cudaFree(sums_d));
        cudaCheck(cudaFree(big));
    }

    /* matmuls: plain + bias, GELU fused (OC % 8 == 0) and not (OC = 100), and with a bias one element past an aligned
     * address (as a layer's slice of a stacked bias at C = 45: no bias epilogue, add_bias_kernel), and their backwards;
     * variant 4 is variant 1 with gelu_fusion 0 (--gelu-fusion 0: the GELU kernel); variant 5 has a fusable OC but
     * C = 45. Matrices whose rows are no multiple of 16 bytes (bf16: C = 36, 45, OC = 100, 135; fp32: C = 45, OC = 135)
     * must go through cublasGemmEx (counted in blas.gemm_fallbacks), with the bias and GELU kernels.
     * The reference rounds where the GPU stores: pre before the GELU kernel reads it (the epilogue takes the gelu of the
     * unrounded value), the product before add_bias_kernel adds the bias */
    for (int variant = 0; variant < 6; variant++) {
        int Cin = variant == 2 ? 36 : variant == 3 || variant == 5 ? 45 : C,
            OC = variant == 0 ? 3 * C : variant == 2 ? 100 : variant == 3 ? 135 : 4 * C;
        blas.gelu_fusion = variant != 4;
        int lt = Cin * sizeof(floatX) % 16 == 0 && OC * sizeof(floatX) % 16 == 0; /* cudaMalloc'd matrices: 256-byte aligned */
        int gelu = variant > 0, skew = variant == 3, epilogue = gelu && matmul_gelu_fusable(&blas, OC) && !skew && lt;
        int bias_kernel = skew || !lt;
        long fallbacks = blas.gemm_fallbacks;
        char what[128];
        Buf inp = buf_random((size_t)BT * Cin, 1.0f), w = buf_random((size_t)OC * Cin, 0.5f), bias = buf_random(OC + skew, 1.0f),
            out = buf_random((size_t)BT * OC, 1.0f), pre = buf_random((size_t)BT * OC, 1.0f), dout = buf_random((size_t)BT * OC, 1.0f),
            dinp = buf_random((size_t)BT * Cin, 1.0f), dw = buf_random((size_t)OC * Cin, 1.0f), db = buf_random(OC, 1.0f);
        matmul_forward(&blas, out.d, gelu ? pre.d : NULL, inp.d, w.d, bias.d + skew, BT, Cin, OC);
        float* d_ref = gelu ? pre.h : out.h;
        matmul_forward(d_ref, inp.h, w.h, bias_kernel ? NULL : bias.h, BT, Cin, OC);
        if (bias_kernel) {
            round_to<floatX>(d_ref, out.n);
            for (size_t i = 0; i < out.n; i++) d_ref[i] += bias.h[skew + i % OC];
        }
        if (gelu) {
            if (!epilogue) round_to<floatX>(pre.h, pre.n);
            gelu_forward(out.h, pre.h, out.n);
        }
        snprintf(what, sizeof(what), "matmul_forward BT=%d C=%d OC=%d%s%s", BT, Cin, OC,
                 gelu ? (epilogue ? " + GELU epilogue" : blas.gelu_fusion ? " + GELU kernel" : " + GELU kernel (gelu_fusion 0)") : " + bias",
                 skew ? ", unaligned bias: bias kernel" : bias_kernel ? ", bias kernel" : "");
        check(what, out.d, out.h, out.n);
        check_gemm_fallbacks("  its products through cublasGemmEx", blas.gemm_fallbacks - fallbacks, lt ? 0 : 1);
        fallbacks = blas.gemm_fallbacks;
        if (gelu) check("  its pre-GELU output", pre.d, pre.h, pre.n); /* pre.h now as stored */
        /* backward of out = f(inp·wᵀ + b): through the GELU when there is one (the fused DGELU needs C % 8 == 0) */
        float* dpre = (float*)malloc_check(dout.n * sizeof(float));
        memcpy(dpre, dout.h, dout.n * sizeof(float));
        if (gelu) {
            memset(dpre, 0, dout.n * sizeof(float));
            gelu_backward(dpre, pre.h, dout.h, dout.n);
        }
        floatX* dpre_d = to_device(dpre, dout.n); /* dpre rounded as the device holds it */
        /* the GPU's dinp is overwritten: compare against a zero start */
        float* dinp_ref = (float*)calloc_check(dinp.n, sizeof(float));
        matmul_backward(dinp_ref, dw.h, db.h, dpre, inp.h, w.h, BT, Cin, OC);
        matmul_backward(&blas, dinp.d, dw.d, db.d, scratch, dpre_d, inp.d, w.d, NULL, BT, Cin, OC);
        snprintf(what, sizeof(what), "matmul_backward dinp BT=%d C=%d OC=%d", BT, Cin, OC);
        check(what, dinp.d, dinp_ref, dinp.n);
        check("  dweight (accumulating)", dw.d, dw.h, dw.n);
        check("  dbias (accumulating)", db.d, db.h, db.n);
        check_gemm_fallbacks("  its products through cublasGemmEx", blas.gemm_fallbacks - fallbacks, lt ? 0 : 2);
        cudaCheck(cudaFree(dpre_d));
        free(dpre);
        free(dinp_ref);
        free_all(inp, w, bias, out, pre, dout, dinp, dw, db);
    }

    /* the DGELU path: dinp = (dout·w)·gelu'(pre), fused (Cin % 8 == 0) and by the separate kernel (Cin = 36, and
     * Cin = 40 with gelu_fusion 0; it reads dout·w as stored) */
    for (int run = 0; run < 3; run++) {
        int Cin = run == 0 ? 36 : 40, OC = 24;
        blas.gelu_fusion = run != 2;
        Buf inp = buf_random((size_t)BT * Cin, 1.0f), w = buf_random((size_t)OC * Cin, 0.5f), pre = buf_random((size_t)BT * Cin, 2.0f),
            dout = buf_random((size_t)BT * OC, 1.0f), dinp = buf_random((size_t)BT * Cin, 1.0f), dw = buf_random((size_t)OC * Cin, 1.0f);
        matmul_backward(&blas, dinp.d, dw.d, NULL, scratch, dout.d, inp.d, w.d, pre.d, BT, Cin, OC);
        float* dgelu_out = (float*)calloc_check(dinp.n, sizeof(float));
        float* dinp_ref = (float*)calloc_check(dinp.n, sizeof(float));
        matmul_backward(dgelu_out, dw.h, NULL, dout.h, inp.h, w.h, BT, Cin, OC);
        if (!matmul_gelu_fusable(&blas, Cin)) round_to<floatX>(dgelu_out, dinp.n);
        gelu_backward(dinp_ref, pre.h, dgelu_out, dinp.n);
        char what[128];
        snprintf(what, sizeof(what), "matmul_backward with GELU' (C=%d: %s)", Cin,
                 matmul_gelu_fusable(&blas, Cin) ? "DGELU epilogue" : blas.gelu_fusion ? "kernel" : "kernel, gelu_fusion 0");
        check(what, dinp.d, dinp_ref, dinp.n);
        free(dgelu_out);
        free(dinp_ref);
        free_all(inp, w, pre, dout, dinp, dw);
    }

    /* the algorithms kept per problem (llmc/matmul.cuh): one shape on 256-byte aligned matrices, then on slices
     * 16 bytes past them (the heuristic must be asked again: the fake cuBLASLt refuses a 256-byte algorithm on
     * them); then as many other problems as the table holds, which replace every entry, and the second again */
    {
        const int OC = 24, fillers = BLAS_PLANS, shift = 16 / (int)sizeof(floatX);
        Buf inp = buf_random((size_t)fillers * C + shift, 1.0f), w = buf_random((size_t)OC * C + shift, 0.5f),
            out = buf_random((size_t)fillers * OC + shift, 1.0f), ref = buf_random((size_t)fillers * OC + shift, 1.0f);
        const char* names[2] = {"matmul plans: 256-byte aligned matrices", "matmul plans: the same shape 16 bytes past them"};
        for (int k = 0; k <= 1; k++) {
            int sh = k * shift;
            matmul_forward(&blas, out.d + sh, NULL, inp.d + sh, w.d + sh, NULL, BT, C, OC);
            matmul_forward(ref.h + sh, inp.h + sh, w.h + sh, NULL, BT, C, OC);
            check(names[k], out.d + sh, ref.h + sh, (size_t)BT * OC);
        }
        for (int rows = 1; rows <= fillers; rows++) matmul_forward(&blas, out.d, NULL, inp.d, w.d, NULL, rows, C, 8);
        int full = blas.num_plans == BLAS_PLANS;
        printf("%s  matmul plans: %d more problems, the table holds %d of %d\n", full ? "ok  " : "FAIL", fillers, blas.num_plans,
               BLAS_PLANS);
        count(full);
        matmul_forward(&blas, out.d + shift, NULL, inp.d + shift, w.d + shift, NULL, BT, C, OC);
        check("matmul plans: the shifted problem again, after its entry was replaced", out.d + shift, ref.h + shift, (size_t)BT * OC);
        free_all(inp, w, out, ref);
    }

    /* flash attention forward and backward, the build's path (fp32: the fp32 path; bf16: the tensor-core path in
     * both dq modes, fixed order and atomics); the CPU keeps the probabilities, the GPU recomputes them */
    for (int deterministic = 1; deterministic >= 0; deterministic--) {
#if defined(PRECISION_FP32)
        if (!deterministic) break; /* the fp32 path ignores the flag */
#endif
        Buf qkv = buf_random((size_t)BT * 3 * C, 1.5f), out = buf_random((size_t)BT * C, 1.0f), dout = buf_random((size_t)BT * C, 1.0f),
            dqkv = buf_random((size_t)BT * 3 * C, 1.0f);
        BufF lse = buf_random_f((size_t)BT * NH, 1.0f);
        float* att = (float*)malloc_check((size_t)B * NH * T * T * sizeof(float));
        float* dqkv_ref = (float*)calloc_check(dqkv.n, sizeof(float));
        flash_attention_forward(out.d, lse.d, qkv.d, B, T, C, NH, s);
        attention_forward(out.h, att, qkv.h, B, T, C, NH);
        check("flash_attention_forward (B=3 T=13 C=40 NH=5, hs=8)", out.d, out.h, out.n, BOUND_ATT);
        flash_attention_backward(dqkv.d, scratch, dout.d, out.d, qkv.d, lse.d, B, T, C, NH, deterministic, s);
        attention_backward(dqkv_ref, dout.h, qkv.h, att, B, T, C, NH);
        check(deterministic ? "flash_attention_backward dqkv (deterministic)" : "flash_attention_backward dqkv (dq by atomics)", dqkv.d,
              dqkv_ref, dqkv.n, BOUND_ATT);
        free(att);
        free(dqkv_ref);
        free_all(qkv, out, dout, dqkv, lse);
    }

    /* GELU kernels on an odd length */
    {
        size_t n = 1000;
        Buf x = buf_random(n, 4.0f), y = buf_random(n, 1.0f), dy = buf_random(n, 1.0f), dx = buf_random(n, 1.0f);
        const float big[] = {8, 9.95f, 10, 12, 20, 87, 100, 1e3f, 1e4f}; /* exp(2u) saturates; x·exp(2u) overflows */
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) x.h[2 * i] = big[i], x.h[2 * i + 1] = -big[i];
        upload(x);
        gelu_forward(y.d, x.d, n, s);
        gelu_forward(y.h, x.h, n);
        check("gelu_forward n=1000, 18 of them at +-8 .. 1e4", y.d, y.h, n);
        gelu_backward(dx.d, x.d, dy.d, n, s);
        memset(dx.h, 0, n * sizeof(float));
        gelu_backward(dx.h, x.h, dy.h, n);
        check("gelu_backward n=1000 (overwrites)", dx.d, dx.h, n);
        free_all(x, y, dy, dx);
    }

    /* fused classifier: losses, then in-place gradients (padded columns zeroed); at V = 10007 each thread
     * reads up to 3 packs in bf16 (5 in fp32) and the logits rise along the row (+0.002 a column), so the running max
     * moves pack by pack; GPT-2's vocabulary takes 4 batches of loads a thread in bf16 (7 in fp32), the last partial.
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
                Buf logits = buf_random((size_t)rows * vp, 5.0f);
                BufF losses = buf_random_f(rows, 1.0f);
                if (v > 4096) {
                    for (size_t i = 0; i < logits.n; i++) logits.h[i] += 0.002f * (float)(i % vp);
                    upload(logits);
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
                free_all(logits, losses);
            }
            free(targets);
            cudaCheck(cudaFree(targets_d));
        }
    }

    /* a row whose target holds the max by far: its loss is log(1 + ~e^-40), not below 0 (the base-2 sums must scale
     * the target's logit as they scale the max); targets over [-30, 30] in steps that are no powers of two */
    {
        const int rows = 64, v = 13, vp = 16;
        Buf logits = buf_random((size_t)rows * vp, 1.0f);
        int targets[rows], *targets_d, negative = 0;
        for (int i = 0; i < rows; i++) {
            targets[i] = i % v;
            for (int j = 0; j < vp; j++) logits.h[(size_t)i * vp + j] = j == targets[i] ? -30.0f + 0.937f * (float)i : -100.0f;
        }
        upload(logits);
        float *losses_d, losses[rows];
        cudaCheck(cudaMalloc(&losses_d, rows * sizeof(float)));
        cudaCheck(cudaMalloc(&targets_d, rows * sizeof(int)));
        cudaCheck(cudaMemcpy(targets_d, targets, rows * sizeof(int), cudaMemcpyHostToDevice));
        fused_classifier(logits.d, losses_d, targets_d, 0.0f, rows, v, vp, s);
        cudaCheck(cudaMemcpy(losses, losses_d, rows * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < rows; i++) negative += losses[i] < 0.0f;
        printf("%s  fused_classifier: a target far above the rest has loss >= 0 (%d of %d rows below 0)\n", negative ? "FAIL" : "ok  ",
               negative, rows);
        count(negative == 0);
        free_all(logits);
        cudaCheck(cudaFree(losses_d));
        cudaCheck(cudaFree(targets_d));
    }

    /* global norm and AdamW on a length that is no multiple of anything, without and with master weights */
    {
        size_t n = 300007;
        Buf g = buf_random(n, 1.0f);
        float ours = global_norm_squared(g.d, n, scratch, s);
        float ref = (float)global_norm_squared(g.h, n);
        double err = fabs((double)ours - ref) / ref;
        printf("%s  %-62s rel    %.2e\n", err <= BOUND_F ? "ok  " : "FAIL", "global_norm_squared n=300007", err);
        count(err <= BOUND_F);
        free_all(g);
        check_adamw(n, 0, 0, 0, "n=300007, t=3, wd 0.1, grad scale 0.7", s);
    }

    /* the same kernels on ranges at unaligned offsets, as a ZeRO-1 shard: every array 3 elements past
     * alignment (a scalar head, then packs: 5 elements in bf16, where 3 floats and 3 bf16 reach 16 bytes together),
     * and arrays that disagree (everything scalar) */
    for (int agree = 1; agree >= 0; agree--) {
        size_t n = 1003, off = 3, off_m = agree ? 3 : 2;
        char what[128];
        Buf g = buf_random(n + 8, 1.0f), y = buf_random(n + 8, 1.0f);
        float ours = global_norm_squared(g.d + off_m, n, scratch, s);
        float ref = (float)global_norm_squared(g.h + off_m, n);
        double err = fabs((double)ours - ref) / ref;
        snprintf(what, sizeof(what), "global_norm_squared n=%zu at offset %zu", n, off_m);
        printf("%s  %-62s rel    %.2e\n", err <= BOUND_F ? "ok  " : "FAIL", what, err);
        count(err <= BOUND_F);
        snprintf(what, sizeof(what), "n=%zu at offsets %zu/%zu, %s", n, off, off_m, agree ? "scalar head, packs" : "all scalar");
        check_adamw(n, off, off_m, 5, what, s);
        gelu_forward(y.d + off, g.d + off_m, n, s);
        gelu_forward(y.h + off, g.h + off_m, n);
        snprintf(what, sizeof(what), "gelu_forward n=%zu at offsets %zu/%zu", n, off, off_m);
        check(what, y.d, y.h, y.n);
        free_all(g, y);
    }

    cudaCheck(cudaFree(scratch));
    blas_destroy(&blas);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
