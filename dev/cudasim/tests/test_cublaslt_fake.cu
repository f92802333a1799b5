/*
 * dev/cudasim/tests/test_cublaslt_fake.cu — the fake cuBLAS/cuBLASLt against a naive matmul.
 *
 * Built with `g++ -DCUDASIM -x c++` (mk/cudasim_libs.mk); nvcc also compiles it against the real
 * headers (same API). The reference is written here, apart from the fake: a triple loop in double precision that indexes the column-major matrices directly, GELU
 * in double and its derivative by central differences, TF32 rounding by frexp/round/ldexp.
 * Every transpose pair x every epilogue x fp32/bf16 x batched or not x two alpha/beta pairs, on odd
 * shapes with leading dimensions above the row counts (padding must stay untouched), some in place
 * (C == D); the cuBLAS entry points; error cases and their status codes. Each check prints what it
 * compared and the worst error relative to its tolerance (passes when <= 1); then a benchmark.
 */
#ifdef CUDASIM
#include "dev/cudasim/fake_cublaslt.h"
#else /* the same source against the real library (compile check: make test-nvcc-libs) */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int passed = 0, failed = 0;

static void check(int ok, const char* what, double worst) {
    if (ok) passed++;
    else failed++;
    printf("%s %s (worst error / tolerance %.3g)\n", ok ? "PASS" : "FAIL", what, worst);
}
static void check_status(cublasStatus_t got, cublasStatus_t want, const char* what) {
    int ok = got == want;
    if (ok) passed++;
    else failed++;
    printf("%s %s: status %d, expected %d\n", ok ? "PASS" : "FAIL", what, (int)got, (int)want);
}

/* deterministic uniform values in [-1, 1) */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rand_unit(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / 8388608.0 - 1.0);
}

/* a CUDA runtime call of the test's own (not one under test): its failure ends the test, naming the call and file:line */
#define CUDA_CHECK(call)                                                                                       \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "error: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

/* a device buffer of n elements of fp32 or bf16 (cudaMalloc: the fake checks that matrices are device memory;
 * in simulation the host reads and writes it directly) */
typedef struct {
    int bf16;
    size_t n;
    void* p;
} buffer;
static void* device_like_alloc(size_t n, int bf16) {
    void* p = NULL;
    if (cudaMalloc(&p, (n ? n : 1) * (bf16 ? 2 : 4)) != cudaSuccess) {
        fprintf(stderr, "error: out of memory (%s:%d)\n", __FILE__, __LINE__);
        exit(1);
    }
    return p;
}
static buffer buffer_random(int bf16, size_t n) {
    buffer b = {bf16, n, device_like_alloc(n, bf16)};
    for (size_t i = 0; i < n; i++) {
        float v = rand_unit();
        if (bf16) ((__nv_bfloat16*)b.p)[i] = __float2bfloat16(v);
        else ((float*)b.p)[i] = v;
    }
    return b;
}
static double buffer_get(const buffer* b, size_t i) {
    return b->bf16 ? (double)__bfloat162float(((const __nv_bfloat16*)b->p)[i]) : (double)((const float*)b->p)[i];
}
static buffer buffer_copy(const buffer* b) {
    buffer c = *b;
    c.p = device_like_alloc(b->n, b->bf16);
    memcpy(c.p, b->p, b->n * (b->bf16 ? 2 : 4));
    return c;
}

static double ref_gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double ref_gelu_grad(double x) { return (ref_gelu(x + 1e-4) - ref_gelu(x - 1e-4)) / 2e-4; }
/* x rounded to 11 significant bits, halfway cases away from zero (TF32, as cvt.rna) */
static double ref_tf32(double x) {
    int e;
    double f = frexp(x, &e);
    return ldexp(round(ldexp(f, 11)), e - 11);
}

/* one cuBLASLt test case */
typedef struct {
    cublasOperation_t ta, tb;
    cublasLtEpilogue_t epi;
    int bf16;          /* A/B/C/D (and bias, aux) bf16, else fp32 */
    int batch;
    float alpha, beta;
    int in_place;      /* C == D */
    cublasComputeType_t compute;
} lt_case;

static const char* epi_name(cublasLtEpilogue_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "?";
    }
}

#define LT_CHECK(call)                                                                                       \
    do {                                                                                                     \
        cublasStatus_t s_ = (call);                                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                   \
            printf("%s:%d: %s returned %s\n", __FILE__, __LINE__, #call, cublasGetStatusName(s_));            \
            return 1e30;                                                                                     \
        }                                                                                                    \
    } while (0)

/* v rounded up to a multiple of q */
static int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }

/* Runs one case through cuBLASLt and returns the worst |error| / tolerance over D, aux, bias and
 * the padding (which must be unchanged). m, n, k odd; every leading dimension exceeds its rows. bf16 leading
 * dimensions and batch strides are multiples of 8 elements (16 bytes: the fake, as cuBLASLt, has no algorithm
 * otherwise; test_lt_errors checks that refusal), fp32 ones any. */
static double run_lt_case(cublasLtHandle_t lt, const lt_case* tc, int m, int n, int k, int corrupt) {
    int bf16 = tc->bf16, batch = tc->batch;
    int64_t q = bf16 ? 8 : 1;
    int a_rows = tc->ta == CUBLAS_OP_N ? m : k, a_cols = tc->ta == CUBLAS_OP_N ? k : m;
    int b_rows = tc->tb == CUBLAS_OP_N ? k : n, b_cols = tc->tb == CUBLAS_OP_N ? n : k;
    int64_t lda = round_up(a_rows + 3, q), ldb = round_up(b_rows + 5, q), ldc = round_up(m + 2, q);
    int64_t ldd = tc->in_place ? ldc : round_up(m + 7, q);
    int64_t aux_ld = (m + 7) / 8 * 8 + 8;
    /* batch strides leave a gap between entries */
    int64_t sA = round_up(lda * a_cols + 11, q), sB = round_up(ldb * b_cols + 9, q), sC = round_up(ldc * n + 3, q);
    int64_t sD = tc->in_place ? sC : round_up(ldd * n + 5, q);
    int64_t sAux = aux_ld * n + 16, sBias = m + 1;
    buffer A = buffer_random(bf16, sA * batch), B = buffer_random(bf16, sB * batch);
    buffer C = buffer_random(bf16, sC * batch);
    buffer D = tc->in_place ? C : buffer_random(bf16, sD * batch);
    buffer D0 = buffer_copy(&D);
    int bias_len = tc->epi == CUBLASLT_EPILOGUE_BGRADB ? n : m;
    buffer bias = buffer_random(bf16, sBias * batch + n);
    buffer bias0 = buffer_copy(&bias);
    buffer aux = buffer_random(bf16, sAux * batch);
    for (size_t i = 0; i < aux.n; i++) { /* keep pre-activations in a range where gelu' varies */
        double v = 3.0 * buffer_get(&aux, i);
        if (bf16) ((__nv_bfloat16*)aux.p)[i] = __float2bfloat16((float)v);
        else ((float*)aux.p)[i] = (float)v;
    }
    buffer aux0 = buffer_copy(&aux);

    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    LT_CHECK(cublasLtMatmulDescCreate(&desc, tc->compute, CUDA_R_32F));
    int32_t ta = tc->ta, tb = tc->tb;
    uint32_t epi = tc->epi;
    int32_t bias_type = t;
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.p, sizeof(bias.p)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.p, sizeof(aux.p)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    if (batch > 1) {
        LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &sAux, sizeof(sAux)));
        LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sBias, sizeof(sBias)));
    }
    LT_CHECK(cublasLtMatrixLayoutCreate(&la, t, a_rows, a_cols, lda));
    LT_CHECK(cublasLtMatrixLayoutCreate(&lb, t, b_rows, b_cols, ldb));
    LT_CHECK(cublasLtMatrixLayoutCreate(&lc, t, m, n, ldc));
    LT_CHECK(cublasLtMatrixLayoutCreate(&ld, t, m, n, ldd));
    int32_t bc = batch;
    int64_t strides[4] = {sA, sB, sC, sD};
    cublasLtMatrixLayout_t layouts[4] = {la, lb, lc, ld};
    for (int i = 0; i < 4 && batch > 1; i++) {
        LT_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        LT_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof(int64_t)));
    }
    cublasLtMatmulPreference_t pref;
    uint64_t ws = 1 << 20;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t heur;
    int count = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &heur, &count));
    if (count != 1) return 1e30;
    void* workspace = NULL; /* the heuristic's workspaceSize (the fake's: the preference's whole 1 MiB) */
    if (cudaMalloc(&workspace, heur.workspaceSize) != cudaSuccess) return 1e30;
    LT_CHECK(cublasLtMatmul(lt, desc, &tc->alpha, A.p, la, B.p, lb, &tc->beta, C.p, lc, tc->in_place ? C.p : D.p, ld,
                            &heur.algo, workspace, heur.workspaceSize, (cudaStream_t)0));
    CUDA_CHECK(cudaFree(workspace));
    if (tc->in_place) D = C; /* same storage */
    if (corrupt) { /* self-test of the checker: one wrong output element must be caught */
        size_t idx = 1 + 2 * ldd;
        if (bf16) ((__nv_bfloat16*)D.p)[idx] = __float2bfloat16(__bfloat162float(((__nv_bfloat16*)D.p)[idx]) + 0.05f);
        else ((float*)D.p)[idx] += 0.05f;
    }

    /* reference */
    double in_tol = 1e-5;                       /* fp32 accumulation, relative to sum |a b| */
    double out_rel = bf16 ? 1.0 / 256 : 1e-6;   /* output rounding */
    const buffer* Cin = tc->in_place ? &D0 : &C; /* C's values before the call */
    int has_bias = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int has_gelu = epi == CUBLASLT_EPILOGUE_GELU || epi == CUBLASLT_EPILOGUE_GELU_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX ||
                   epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int has_aux_out = epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int has_dgelu = epi == CUBLASLT_EPILOGUE_DGELU || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    double worst = 0.0;
    for (int b = 0; b < batch; b++) {
        for (int i = 0; i < m; i++) {
            double row_sum = 0.0, row_tol = 0.0;
            for (int j = 0; j < n; j++) {
                double acc = 0.0, mag = 0.0;
                for (int l = 0; l < k; l++) {
                    size_t ai = b * sA + (tc->ta == CUBLAS_OP_N ? i + l * lda : l + i * lda);
                    size_t bi = b * sB + (tc->tb == CUBLAS_OP_N ? l + j * ldb : j + l * ldb);
                    double av = buffer_get(&A, ai), bv = buffer_get(&B, bi);
                    if (tc->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && !bf16) {
                        av = ref_tf32(av);
                        bv = ref_tf32(bv);
                    }
                    acc += av * bv;
                    mag += fabs(av * bv);
                }
                double cv = tc->beta != 0.0f ? buffer_get(Cin, b * sC + i + j * ldc) : 0.0;
                double v = tc->alpha * acc + tc->beta * cv;
                double tol = in_tol * (fabs(tc->alpha) * mag + fabs(tc->beta * cv)) + 1e-30;
                if (has_bias) {
                    double bv = buffer_get(&bias0, b * sBias + i);
                    v += bv;
                    tol += 1e-6 * fabs(bv);
                }
                if (has_aux_out) {
                    double got = buffer_get(&aux, b * sAux + i + j * aux_ld);
                    double e = fabs(got - v) / (tol + out_rel * fabs(v));
                    if (e > worst) worst = e;
                }
                if (has_gelu) {
                    v = ref_gelu(v);
                    tol *= 1.2;
                }
                if (has_dgelu) {
                    /* gelu' evaluated in fp32 has an absolute error of ~1e-7 (its terms are O(1) and cancel near
                     * x = -0.75), hence the term in |v| before the product */
                    double g = ref_gelu_grad(buffer_get(&aux0, b * sAux + i + j * aux_ld));
                    tol = tol * fabs(g) + 1e-6 * fabs(v);
                    v *= g;
                }
                row_sum += v;
                row_tol += tol + 1e-6 * fabs(v);
                double got = buffer_get(&D, b * sD + i + j * ldd);
                double e = fabs(got - v) / (tol + out_rel * fabs(v) + 1e-12);
                if (e > worst) worst = e;
            }
            if (epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
                double e = fabs(buffer_get(&bias, i) - row_sum) / (row_tol + out_rel * fabs(row_sum) + 1e-12);
                if (e > worst) worst = e;
            }
        }
        /* padding rows of D (and aux) keep their old values */
        for (int j = 0; j < n; j++) {
            for (int64_t i = m; i < ldd; i++)
                if (buffer_get(&D, b * sD + i + j * ldd) != buffer_get(&D0, b * sD + i + j * ldd)) worst = 1e30;
            for (int64_t i = m; i < aux_ld; i++)
                if (buffer_get(&aux, b * sAux + i + j * aux_ld) != buffer_get(&aux0, b * sAux + i + j * aux_ld)) worst = 1e30;
        }
    }
    if (epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB) {
        for (int r = 0; r < bias_len; r++) {
            double sum = 0.0, mag = 0.0;
            for (int l = 0; l < k; l++) {
                double x = epi == CUBLASLT_EPILOGUE_BGRADA ? buffer_get(&A, tc->ta == CUBLAS_OP_N ? r + l * lda : l + r * lda)
                                                           : buffer_get(&B, tc->tb == CUBLAS_OP_N ? l + r * ldb : r + l * ldb);
                sum += x;
                mag += fabs(x);
            }
            double e = fabs(buffer_get(&bias, r) - sum) / (1e-5 * mag + out_rel * fabs(sum) + 1e-12);
            if (e > worst) worst = e;
        }
    }
    if (epi == CUBLASLT_EPILOGUE_DEFAULT || has_bias || has_gelu || epi == CUBLASLT_EPILOGUE_DGELU) /* bias untouched */
        for (size_t i = 0; i < bias.n; i++)
            if (buffer_get(&bias, i) != buffer_get(&bias0, i)) worst = 1e30;
    if (!has_aux_out)
        for (size_t i = 0; i < aux.n; i++)
            if (buffer_get(&aux, i) != buffer_get(&aux0, i)) worst = 1e30;

    cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; i < 4; i++) cublasLtMatrixLayoutDestroy(layouts[i]);
    cublasLtMatmulDescDestroy(desc);
    CUDA_CHECK(cudaFree(A.p)); CUDA_CHECK(cudaFree(B.p)); CUDA_CHECK(cudaFree(C.p));
    CUDA_CHECK(cudaFree(D0.p)); CUDA_CHECK(cudaFree(bias.p)); CUDA_CHECK(cudaFree(bias0.p));
    CUDA_CHECK(cudaFree(aux.p)); CUDA_CHECK(cudaFree(aux0.p));
    if (!tc->in_place) CUDA_CHECK(cudaFree(D.p));
    return worst;
}

static void test_lt_combinations(cublasLtHandle_t lt) {
    const cublasLtEpilogue_t epis[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU,
                                       CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                                       CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUBLASLT_EPILOGUE_BGRADA,
                                       CUBLASLT_EPILOGUE_BGRADB};
    const float scalars[2][2] = {{1.0f, 0.0f}, {0.75f, -1.25f}};
    const int m = 37, n = 29, k = 45;
    for (size_t e = 0; e < sizeof(epis) / sizeof(epis[0]); e++) {
        int bgrad = epis[e] == CUBLASLT_EPILOGUE_DGELU_BGRAD || epis[e] == CUBLASLT_EPILOGUE_BGRADA || epis[e] == CUBLASLT_EPILOGUE_BGRADB;
        for (int bf16 = 0; bf16 < 2; bf16++) {
            for (int batch = 1; batch <= (bgrad ? 1 : 3); batch += 2) {
                for (int s = 0; s < 2; s++) {
                    double worst = 0.0;
                    for (int ta = 0; ta < 2; ta++) {
                        for (int tb = 0; tb < 2; tb++) {
                            lt_case tc = {ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, epis[e], bf16, batch,
                                          scalars[s][0], scalars[s][1], (ta + tb) % 2 == 1, CUBLAS_COMPUTE_32F};
                            double w = run_lt_case(lt, &tc, m, n, k, 0);
                            if (w > worst) worst = w;
                        }
                    }
                    char what[200];
                    snprintf(what, sizeof(what), "cublasLtMatmul %-13s %s batch=%d alpha=%.2f beta=%.2f, NN/NT/TN/TT (TN, NT in place) %dx%dx%d",
                             epi_name(epis[e]), bf16 ? "bf16" : "fp32", batch, scalars[s][0], scalars[s][1], m, n, k);
                    check(worst <= 1.0, what, worst);
                }
            }
        }
    }
    /* TF32 emulation: reference rounds inputs the same way, so the match is to fp32 rounding */
    double worst = 0.0;
    for (int ta = 0; ta < 2; ta++) {
        lt_case tc = {ta ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_BIAS, 0, 1, 1.0f, 0.5f, 0, CUBLAS_COMPUTE_32F_FAST_TF32};
        double w = run_lt_case(lt, &tc, 41, 23, 67, 0);
        if (w > worst) worst = w;
    }
    check(worst <= 1.0, "cublasLtMatmul CUBLAS_COMPUTE_32F_FAST_TF32 vs reference with TF32-rounded inputs 41x23x67", worst);
    /* the checker itself catches a wrong element (guards against a vacuous comparison) */
    lt_case tc = {CUBLAS_OP_T, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, 0, 1, 1.0f, 0.0f, 0, CUBLAS_COMPUTE_32F};
    double w = run_lt_case(lt, &tc, 37, 29, 45, 1);
    check(w > 1.0, "checker self-test: one corrupted output element is detected (error/tol must be > 1)", 1.0 / w);
}

/* naive column-major C = alpha op(A) op(B) + beta C in double, for the cuBLAS entry points */
static double cublas_ref_worst(const buffer* A, int64_t lda, int64_t sA, const buffer* B, int64_t ldb, int64_t sB,
                               const buffer* C0, const buffer* C, int64_t ldc, int64_t sC, int ta, int tb, int m, int n,
                               int k, int batch, float alpha, float beta, int tf32, double out_rel) {
    double worst = 0.0;
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0.0, mag = 0.0;
                for (int l = 0; l < k; l++) {
                    double av = buffer_get(A, b * sA + (ta ? l + i * lda : i + l * lda));
                    double bv = buffer_get(B, b * sB + (tb ? j + l * ldb : l + j * ldb));
                    if (tf32) {
                        av = ref_tf32(av);
                        bv = ref_tf32(bv);
                    }
                    acc += av * bv;
                    mag += fabs(av * bv);
                }
                double c0 = buffer_get(C0, b * sC + i + j * ldc);
                double v = alpha * acc + beta * c0;
                double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta * c0)) + out_rel * fabs(v) + 1e-12;
                double e = fabs(buffer_get(C, b * sC + i + j * ldc) - v) / tol;
                if (e > worst) worst = e;
            }
    return worst;
}

static void test_cublas(void) {
    cublasHandle_t h;
    check_status(cublasCreate(&h), CUBLAS_STATUS_SUCCESS, "cublasCreate");
    check_status(cublasSetStream(h, (cudaStream_t)0), CUBLAS_STATUS_SUCCESS, "cublasSetStream");
    const int m = 33, n = 19, k = 27;
    for (int tf32 = 0; tf32 < 2; tf32++) {
        check_status(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS, "cublasSetMathMode");
        double worst = 0.0;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m + 3;
                buffer A = buffer_random(0, lda * (ta ? m : k)), B = buffer_random(0, ldb * (tb ? k : n));
                buffer C = buffer_random(0, ldc * n), C0 = buffer_copy(&C);
                float alpha = 1.5f, beta = -0.5f;
                cublasStatus_t s = cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                                               (const float*)A.p, (int)lda, (const float*)B.p, (int)ldb, &beta, (float*)C.p, (int)ldc);
                double w = s == CUBLAS_STATUS_SUCCESS ? cublas_ref_worst(&A, lda, 0, &B, ldb, 0, &C0, &C, ldc, 0, ta, tb, m, n, k, 1,
                                                                         alpha, beta, tf32, 1e-6)
                                                      : 1e30;
                if (w > worst) worst = w;
                CUDA_CHECK(cudaFree(A.p)); CUDA_CHECK(cudaFree(B.p)); CUDA_CHECK(cudaFree(C.p));
                CUDA_CHECK(cudaFree(C0.p));
            }
        check(worst <= 1.0, tf32 ? "cublasSgemm NN/NT/TN/TT with CUBLAS_TF32_TENSOR_OP_MATH (TF32-rounded reference)"
                                 : "cublasSgemm NN/NT/TN/TT, default math", worst);
    }
    check_status(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS, "cublasSetMathMode default");
    /* GemmEx: bf16 inputs, fp32 output */
    {
        int64_t lda = k + 1, ldb = k + 3, ldc = m + 1;
        buffer A = buffer_random(1, lda * m), B = buffer_random(1, ldb * n), C = buffer_random(0, ldc * n), C0 = buffer_copy(&C);
        float alpha = 1.0f, beta = 1.0f;
        cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, A.p, CUDA_R_16BF, (int)lda, B.p, CUDA_R_16BF,
                                        (int)ldb, &beta, C.p, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        double w = s == CUBLAS_STATUS_SUCCESS ? cublas_ref_worst(&A, lda, 0, &B, ldb, 0, &C0, &C, ldc, 0, 1, 0, m, n, k, 1, alpha, beta, 0, 1e-6) : 1e30;
        check(w <= 1.0, "cublasGemmEx TN bf16 x bf16 -> fp32, beta=1", w);
        CUDA_CHECK(cudaFree(A.p)); CUDA_CHECK(cudaFree(B.p)); CUDA_CHECK(cudaFree(C.p));
        CUDA_CHECK(cudaFree(C0.p));
    }
    /* GemmStridedBatchedEx: bf16 everywhere, attention-like (T x T scores from T x hs blocks) */
    {
        int T = 21, hs = 13, batch = 5;
        int64_t ld = hs + 3, sA = ld * T + 7, ldc = T + 1, sC = ldc * T + 2;
        buffer K = buffer_random(1, sA * batch), Q = buffer_random(1, sA * batch), S = buffer_random(1, sC * batch), S0 = buffer_copy(&S);
        float alpha = 0.25f, beta = 0.0f;
        cublasStatus_t s = cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &alpha, K.p, CUDA_R_16BF, (int)ld, sA,
                                                      Q.p, CUDA_R_16BF, (int)ld, sA, &beta, S.p, CUDA_R_16BF, (int)ldc, sC, batch,
                                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        double w = s == CUBLAS_STATUS_SUCCESS ? cublas_ref_worst(&K, ld, sA, &Q, ld, sA, &S0, &S, ldc, sC, 1, 0, T, T, hs, batch, alpha, beta, 0, 1.0 / 256) : 1e30;
        check(w <= 1.0, "cublasGemmStridedBatchedEx TN bf16, 5 batches with gapped strides, beta=0", w);
        CUDA_CHECK(cudaFree(K.p)); CUDA_CHECK(cudaFree(Q.p)); CUDA_CHECK(cudaFree(S.p));
        CUDA_CHECK(cudaFree(S0.p));
    }
    /* cuBLAS argument errors */
    float one = 1.0f, zero = 0.0f, buf[64] = {0};
    check_status(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 2, 2, &one, buf, 7, buf, 2, &zero, buf, 8), CUBLAS_STATUS_INVALID_VALUE,
                 "cublasSgemm lda=7 < m=8");
    check_status(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 8, &one, buf, 7, buf, 8, &zero, buf, 2), CUBLAS_STATUS_INVALID_VALUE,
                 "cublasSgemm transposed lda=7 < k=8");
    check_status(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, 2, buf, 2, &zero, buf, 1), CUBLAS_STATUS_INVALID_VALUE,
                 "cublasSgemm ldc=1 < m=2");
    check_status(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, &one, buf, 2, buf, 2, &zero, buf, 2), CUBLAS_STATUS_INVALID_VALUE,
                 "cublasSgemm m=-1");
    check_status(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, CUDA_R_32F, 2, buf, CUDA_R_32F, 2, &zero, buf,
                              CUDA_R_16BF, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx fp32 inputs with bf16 output");
    check_status(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, CUDA_R_32F, 2, buf, CUDA_R_32F, 2, &zero, buf,
                              CUDA_R_32F, 2, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx CUBLAS_COMPUTE_64F");
    check_status(cublasSgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, buf, 2, buf, 2, &zero, buf, 2), CUBLAS_STATUS_NOT_INITIALIZED,
                 "cublasSgemm with a NULL handle");
    check_status(cublasDestroy(h), CUBLAS_STATUS_SUCCESS, "cublasDestroy");
}

/* cuBLASLt argument errors: each returns the real library's status */
static void test_lt_errors(cublasLtHandle_t lt) {
    float one = 1.0f, zero = 0.0f;
    float* buf = NULL; /* device memory: the cases below fail for their own reasons, not the memory checks */
    CUDA_CHECK(cudaMalloc((void**)&buf, 256 * sizeof(float)));
    CUDA_CHECK(cudaMemset(buf, 0, 256 * sizeof(float)));
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, lbad;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 4, 3, 4); /* A 4x3, op N: m=4, k=3 */
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 5, 3);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 4, 5, 4);
#define MATMUL(L_A, L_B, L_C, L_D, Dptr) \
    cublasLtMatmul(lt, desc, &one, buf, L_A, buf, L_B, &zero, buf, L_C, Dptr, L_D, NULL, NULL, 0, (cudaStream_t)0)
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_SUCCESS, "cublasLtMatmul valid 4x5x3 baseline");
    cublasLtMatrixLayoutCreate(&lbad, CUDA_R_32F, 4, 3, 3);
    check_status(MATMUL(lbad, lb, lc, lc, buf + 64), CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul A ld=3 < rows=4");
    cublasLtMatrixLayoutDestroy(lbad);
    cublasLtMatrixLayoutCreate(&lbad, CUDA_R_32F, 4, 6, 4);
    check_status(MATMUL(la, lb, lc, lbad, buf + 64), CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul D 4x6 does not match op(A)op(B) 4x5");
    cublasLtMatrixLayoutDestroy(lbad);
    cublasLtMatrixLayoutCreate(&lbad, CUDA_R_16BF, 4, 5, 4);
    check_status(MATMUL(la, lb, lbad, lbad, buf + 64), CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul fp32 A/B with bf16 C/D");
    { /* bf16 matrices must be 16-byte aligned, pointers and leading dimensions (ld x 2 bytes) */
        cublasLtMatrixLayout_t ha, hb, hc, hodd;
        cublasLtMatrixLayoutCreate(&ha, CUDA_R_16BF, 8, 3, 8);
        cublasLtMatrixLayoutCreate(&hb, CUDA_R_16BF, 3, 5, 8);
        cublasLtMatrixLayoutCreate(&hc, CUDA_R_16BF, 8, 5, 8);
        cublasLtMatrixLayoutCreate(&hodd, CUDA_R_16BF, 8, 3, 9);
        __nv_bfloat16* h = (__nv_bfloat16*)buf;
        cublasLtMatmulHeuristicResult_t hh;
        cublasLtMatmulPreference_t hp;
        cublasLtMatmulPreferenceCreate(&hp);
        int hcount = -1;
        check_status(cublasLtMatmulAlgoGetHeuristic(lt, desc, hodd, hb, hc, hc, hp, 1, &hh, &hcount), CUBLAS_STATUS_NOT_SUPPORTED,
                     "cublasLtMatmulAlgoGetHeuristic bf16 A with ld 9 (18 bytes)");
        check(hcount == 0, "cublasLtMatmulAlgoGetHeuristic returns 0 algorithms for a bf16 ld of 18 bytes", hcount);
        uint32_t two = 2;
        cublasLtMatmulPreferenceSetAttribute(hp, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &two, sizeof(two));
        hcount = -1;
        check_status(cublasLtMatmulAlgoGetHeuristic(lt, desc, ha, hb, hc, hc, hp, 1, &hh, &hcount), CUBLAS_STATUS_NOT_SUPPORTED,
                     "cublasLtMatmulAlgoGetHeuristic bf16 B with a preference of 2-byte alignment");
        check(hcount == 0, "cublasLtMatmulAlgoGetHeuristic returns 0 algorithms for a 2-byte aligned bf16 B", hcount);
        check_status(cublasLtMatmul(lt, desc, &one, h, ha, h + 64, hb, &zero, h + 128, hc, h + 128, hc, NULL, NULL, 0, (cudaStream_t)0),
                     CUBLAS_STATUS_SUCCESS, "cublasLtMatmul bf16, 16-byte aligned (baseline)");
        check_status(cublasLtMatmul(lt, desc, &one, h + 1, ha, h + 64, hb, &zero, h + 128, hc, h + 128, hc, NULL, NULL, 0, (cudaStream_t)0),
                     CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul bf16 A at 2 bytes past a 16-byte boundary");
        cublasLtMatmulPreferenceDestroy(hp);
        cublasLtMatrixLayoutDestroy(ha);
        cublasLtMatrixLayoutDestroy(hb);
        cublasLtMatrixLayoutDestroy(hc);
        cublasLtMatrixLayoutDestroy(hodd);
    }
    int32_t order = CUBLASLT_ORDER_ROW;
    cublasLtMatrixLayoutSetAttribute(lbad, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order));
    check_status(MATMUL(la, lb, lc, lbad, buf + 64), CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul D in CUBLASLT_ORDER_ROW");
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t heur;
    int count = -1;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lbad, pref, 1, &heur, &count);
    check_status(s, CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic with a row-major D");
    check(count == 0, "cublasLtMatmulAlgoGetHeuristic returns 0 algorithms for an unsupported problem", count);
    cublasLtMatrixLayoutDestroy(lbad);
    check_status(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 0, &heur, &count), CUBLAS_STATUS_INVALID_VALUE,
                 "cublasLtMatmulAlgoGetHeuristic requestedAlgoCount=0");
    /* the heuristic's algorithm assumes the preference's alignments: 256 bytes unless set */
    float* aligned;
    CUDA_CHECK(cudaMalloc((void**)&aligned, 1024 * sizeof(float)));
#define MATMUL_ALGO(A_ptr)                                                                                                          \
    cublasLtMatmul(lt, desc, &one, A_ptr, la, aligned + 64, lb, &zero, aligned + 128, lc, aligned + 128, lc, &heur.algo, NULL, 0, \
                   (cudaStream_t)0)
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &count);
    check_status(MATMUL_ALGO(aligned), CUBLAS_STATUS_SUCCESS, "cublasLtMatmul, the heuristic's algorithm, 256-byte aligned matrices");
    check_status(MATMUL_ALGO(aligned + 4), CUBLAS_STATUS_NOT_SUPPORTED, "  A 16 bytes past, the preference's default alignment");
    uint32_t sixteen = 16;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &sixteen, sizeof(sixteen));
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &count);
    check_status(MATMUL_ALGO(aligned + 4), CUBLAS_STATUS_SUCCESS, "  A 16 bytes past, MIN_ALIGNMENT_A_BYTES = 16");
    check_status(MATMUL_ALGO(aligned + 2), CUBLAS_STATUS_NOT_SUPPORTED, "  A 8 bytes past, MIN_ALIGNMENT_A_BYTES = 16");
#undef MATMUL_ALGO
    CUDA_CHECK(cudaFree(aligned));
    int32_t batch = 2;
    cublasLtMatrixLayoutCreate(&lbad, CUDA_R_32F, 4, 5, 4);
    cublasLtMatrixLayoutSetAttribute(lbad, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
    check_status(MATMUL(la, lb, lc, lbad, buf + 64), CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul batch count of D differs from A/B/C");
    cublasLtMatrixLayoutDestroy(lbad);
    cublasLtMatrixLayoutCreate(&lbad, CUDA_R_32F, 4, 5, 6);
    check_status(cublasLtMatmul(lt, desc, &one, buf, la, buf, lb, &zero, buf + 64, lc, buf + 64, lbad, NULL, NULL, 0, (cudaStream_t)0),
                 CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul C aliases D with ldc=4 != ldd=6");
    cublasLtMatrixLayoutDestroy(lbad);
    int32_t trans = CUBLAS_OP_T;
    check_status(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, 8), CUBLAS_STATUS_INVALID_VALUE,
                 "cublasLtMatmulDescSetAttribute TRANSA with sizeInBytes=8");
    uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul BIAS epilogue without a bias pointer");
    void* bias = buf + 130; /* 8 bytes past a 16-byte boundary */
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul BIAS epilogue, bias 8 bytes past 16-byte alignment");
    bias = buf + 132;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_SUCCESS, "cublasLtMatmul BIAS epilogue, bias 16-byte aligned");
    epi = CUBLASLT_EPILOGUE_GELU_AUX;
    void* aux = buf + 128;
    int64_t aux_ld = 6;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul GELU_AUX with aux ld=6 (not a multiple of 8)");
    aux = buf + 130;
    aux_ld = 8;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul GELU_AUX, aux 8 bytes past 16-byte alignment");
    epi = CUBLASLT_EPILOGUE_RELU;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul RELU epilogue (not implemented)");
    epi = CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    int32_t scale = CUDA_R_16BF;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale, sizeof(scale));
    check_status(MATMUL(la, lb, lc, lc, buf + 64), CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul scale type CUDA_R_16BF");
    check_status(cublasLtMatmul(NULL, desc, &one, buf, la, buf, lb, &zero, buf, lc, buf, lc, NULL, NULL, 0, (cudaStream_t)0),
                 CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul with a NULL handle");
#undef MATMUL
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    CUDA_CHECK(cudaFree(buf));
}

/* The host/device memory checks: every matrix, epilogue vector, workspace and device-mode scalar the call's
 * kernels touch must be device memory (cudaMalloc) over its whole extent; a host pointer is INVALID_VALUE in
 * the fake (a fault on a GPU). A 4x5x3 fp32 problem; dev is device memory, host/pinned are not. */
static void test_lt_memory(cublasLtHandle_t lt) {
    float one = 1.0f, zero = 0.0f;
    float *dev = NULL, *pinned = NULL, *dev_small = NULL, *dev_scalars = NULL;
    CUDA_CHECK(cudaMalloc((void**)&dev, 512 * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void**)&dev_small, 8 * sizeof(float))); /* less than A's 12 elements */
    CUDA_CHECK(cudaMalloc((void**)&dev_scalars, 2 * sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void**)&pinned, 512 * sizeof(float)));
    alignas(256) static float host[512];
    CUDA_CHECK(cudaMemset(dev, 0, 512 * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dev_scalars, &one, sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dev_scalars + 1, &zero, sizeof(float), cudaMemcpyHostToDevice));
    float *A = dev, *B = dev + 64, *D = dev + 128, *bias = dev + 192, *aux = dev + 256, *ws = dev + 384;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 4, 3, 4);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 5, 3);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 4, 5, 4);
#define MM(a, b, beta, c, d) cublasLtMatmul(lt, desc, &one, a, la, b, lb, beta, c, lc, d, lc, NULL, NULL, 0, (cudaStream_t)0)
    check_status(MM(A, B, &zero, D, D), CUBLAS_STATUS_SUCCESS, "memory: A, B, C=D in cudaMalloc memory accepted");
    check_status(MM(host, B, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: A in pageable host memory");
    check_status(MM(A, pinned, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: B in pinned host memory (cudaMallocHost)");
    check_status(MM(A, B, &zero, D, host + 128), CUBLAS_STATUS_INVALID_VALUE, "memory: D in pageable host memory");
    check_status(MM(dev_small, B, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: A's 12 elements past the end of an 8-float allocation");
    check_status(MM(dev + 500, B, &zero, D, D), CUBLAS_STATUS_SUCCESS, "memory: A's 12 elements ending at its allocation's end accepted");
    check_status(MM(dev + 501, B, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: A's 12 elements one past its allocation's end");
    check_status(MM(A, B, &one, host + 128, D), CUBLAS_STATUS_INVALID_VALUE, "memory: C in host memory with beta=1 (read)");
    check_status(MM(A, B, &zero, host + 128, D), CUBLAS_STATUS_SUCCESS, "memory: C in host memory with beta=0 (not read) accepted");
    check_status(MM(A, B, dev_scalars + 1, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: beta in device memory with POINTER_MODE_HOST");
    int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode));
    check_status(cublasLtMatmul(lt, desc, dev_scalars, A, la, B, lb, dev_scalars + 1, D, lc, D, lc, NULL, NULL, 0, (cudaStream_t)0),
                 CUBLAS_STATUS_SUCCESS, "memory: alpha/beta in device memory with POINTER_MODE_DEVICE accepted");
    check_status(MM(A, B, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: alpha/beta in host memory with POINTER_MODE_DEVICE");
    mode = CUBLASLT_POINTER_MODE_HOST;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode));
    /* epilogue pointers */
    uint32_t epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int64_t aux_ld = 8;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
    const void* ptrs[2][2] = {{bias, aux}, {host + 192, aux}};
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptrs[0][0], sizeof(void*));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ptrs[0][1], sizeof(void*));
    check_status(MM(A, B, &zero, D, D), CUBLAS_STATUS_SUCCESS, "memory: GELU_AUX_BIAS with bias and aux in device memory accepted");
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptrs[1][0], sizeof(void*));
    check_status(MM(A, B, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: the epilogue's bias in host memory");
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptrs[0][0], sizeof(void*));
    const void* host_aux = pinned + 256;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &host_aux, sizeof(void*));
    check_status(MM(A, B, &zero, D, D), CUBLAS_STATUS_INVALID_VALUE, "memory: the epilogue's aux in pinned host memory");
    epi = CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
#undef MM
    /* the workspace: the heuristic's algorithm asks for the preference's MAX_WORKSPACE_BYTES (here 512 bytes) */
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t max_ws = 512;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws));
    cublasLtMatmulHeuristicResult_t heur;
    int count = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &count);
    check(count == 1 && heur.workspaceSize <= max_ws, "memory: the heuristic's workspaceSize is at most MAX_WORKSPACE_BYTES", 0.0);
#define MMW(w, bytes) cublasLtMatmul(lt, desc, &one, A, la, B, lb, &zero, D, lc, D, lc, &heur.algo, w, bytes, (cudaStream_t)0)
    check_status(MMW(ws, heur.workspaceSize), CUBLAS_STATUS_SUCCESS, "memory: workspace of the heuristic's size in device memory accepted");
    check_status(MMW(host, heur.workspaceSize), CUBLAS_STATUS_INVALID_VALUE, "memory: workspace in pageable host memory");
    check_status(MMW(dev + 448, 512), CUBLAS_STATUS_INVALID_VALUE, "memory: 512-byte workspace 256 bytes before its allocation's end");
    check_status(MMW((void*)NULL, 0), CUBLAS_STATUS_INVALID_VALUE, "memory: workspaceSizeInBytes 0 < the algorithm's 512 bytes");
#undef MMW
    /* cuBLAS */
    cublasHandle_t h;
    cublasCreate(&h);
    check_status(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 5, 3, &one, A, 4, B, 3, &zero, D, 4), CUBLAS_STATUS_SUCCESS,
                 "memory: cublasSgemm with device matrices accepted");
    check_status(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 5, 3, &one, host, 4, B, 3, &zero, D, 4), CUBLAS_STATUS_INVALID_VALUE,
                 "memory: cublasSgemm with A in host memory");
    check_status(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 5, 3, &one, A, 4, B, 3, &zero, pinned, 4), CUBLAS_STATUS_INVALID_VALUE,
                 "memory: cublasSgemm with C in pinned host memory");
    cublasDestroy(h);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    CUDA_CHECK(cudaFree(dev)); CUDA_CHECK(cudaFree(dev_small)); CUDA_CHECK(cudaFree(dev_scalars));
    CUDA_CHECK(cudaFreeHost(pinned));
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* GFLOP/s of the fake on a GPT-2-like shape, next to a naive triple loop measured in the same run */
static void benchmark(cublasLtHandle_t lt) {
    const int m = 768, n = 256, k = 768;
    buffer A = buffer_random(0, (size_t)m * k), B = buffer_random(0, (size_t)k * n), D = buffer_random(0, (size_t)m * n);
    float* naive = (float*)malloc((size_t)m * n * sizeof(float));
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t ta = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    float one = 1.0f, zero = 0.0f;
    double t0 = seconds();
    int reps = 3;
    for (int r = 0; r < reps; r++)
        cublasLtMatmul(lt, desc, &one, A.p, la, B.p, lb, &zero, D.p, ld, D.p, ld, NULL, NULL, 0, (cudaStream_t)0);
    double t_fake = (seconds() - t0) / reps;
    const float* a = (const float*)A.p;
    const float* b = (const float*)B.p;
    t0 = seconds();
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int l = 0; l < k; l++) acc += a[l + (size_t)i * k] * b[l + (size_t)j * k];
            naive[i + (size_t)j * m] = acc;
        }
    double t_naive = seconds() - t0;
    double maxdiff = 0.0;
    for (size_t i = 0; i < (size_t)m * n; i++) maxdiff = fmax(maxdiff, fabs(naive[i] - ((float*)D.p)[i]));
    double gflop = 2.0 * m * n * k * 1e-9;
#if defined(__SANITIZE_ADDRESS__)
    const char* build = " (sanitizer build: not representative, see make bench-cublaslt-fake)";
#else
    const char* build = "";
#endif
    printf("benchmark %dx%dx%d fp32 TN: fake cublasLtMatmul %.1f GFLOP/s (%.2f ms), naive triple loop %.1f GFLOP/s (%.2f ms), "
           "speedup %.1fx, max |diff| %.2g%s\n",
           m, n, k, gflop / t_fake, t_fake * 1e3, gflop / t_naive, t_naive * 1e3, t_naive / t_fake, maxdiff, build);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    CUDA_CHECK(cudaFree(A.p)); CUDA_CHECK(cudaFree(B.p)); CUDA_CHECK(cudaFree(D.p)); free(naive);
}

int main(void) {
    cublasLtHandle_t lt;
    check_status(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
    test_lt_combinations(lt);
    test_cublas();
    printf("(the error cases below print the fake's one-line reasons on stderr)\n");
    fflush(stdout);
    test_lt_errors(lt);
    test_lt_memory(lt);
    benchmark(lt);
    check_status(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS, "cublasLtDestroy");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
