/*
 * llmc/matmul.cuh — the model's matmuls through cuBLASLt, with bias and (bf16) GELU fused into its epilogues.
 *
 * Row-major shapes as in llmc/cpu_ops.h: out[BT,OC] = inp[BT,C]·weight[OC,C]ᵀ + bias. cuBLASLt is
 * column-major, so a row-major (R, K) matrix is a column-major K x R one with leading dimension K; the
 * three products below are therefore written on the transposes:
 *   forward   outᵀ (OC x BT)     = weight(C x OC)ᵀ · inpᵀ (C x BT)        + bias per row of outᵀ
 *   dinp      dinpᵀ (C x BT)     = weight(C x OC)  · doutᵀ (OC x BT)
 *   dweight   dweightᵀ (C x OC) += inpᵀ (C x BT)   · (doutᵀ (OC x BT))ᵀ   (beta = 1: accumulates)
 * The bias gradient is a deterministic column sum (llmc/column_sums.cuh), which accumulates across
 * micro-steps (cuBLASLt's BGRAD epilogues overwrite).
 * Algorithms: cuBLASLt's heuristic is asked once per problem (BlasProblem: shape, transposes, epilogue and
 * the pointers' alignments) and its answer kept in the context. It is told each matrix's real alignment
 * (16 to 256 bytes): by default it assumes 256, and may pick a kernel that refuses a layer's slice
 * aligned to less (CUBLAS_STATUS_NOT_SUPPORTED).
 * Alignment under 16 bytes: cuBLASLt may have no algorithm at all for a matrix (A, B or D) whose pointer or
 * leading dimension in bytes is no multiple of 16 (bf16 at channels that are no multiple of 8; fp32 at
 * no multiple of 4). Such a product never reaches cuBLASLt, on any GPU: it runs through the legacy cuBLAS
 * API (cublasGemmEx, CUBLAS_COMPUTE_32F, ctx->gemm_handle; counted in ctx->gemm_fallbacks), which has no
 * epilogue, so its bias and GELU are the separate kernels' below (the bias added to the product rounded to
 * floatX, as for an unaligned bias).
 * GELU (bf16 build): the forward fuses gelu into the epilogue (GELU_AUX_BIAS: out = gelu(v), pre = v), the
 * backward fuses the GELU derivative (DGELU: dinp = (dout·weight)·gelu'(pre)). cuBLASLt needs the aux leading
 * dimension to be a multiple of 8; when it is not, when ctx->gelu_fusion is 0 (--gelu-fusion 0), or when its
 * heuristic has no algorithm for the fused epilogue (some type, shape or alignment), or when the product runs
 * through cublasGemmEx, the separate kernels of llmc/gelu.cuh run instead. The fp32 build always runs them:
 * cuBLASLt does not specify its GELU's arithmetic.
 * Bias: the epilogues need a 16-byte aligned bias; a layer's slice of a stacked bias at channels that are no
 * multiple of 8 is not, and then (as under cublasGemmEx) the matmul runs without it and add_bias_kernel adds it
 * (one thread per element).
 */
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include "llmc/cublas_common.cuh"
#include "llmc/column_sums.cuh"
#include "llmc/gelu.cuh"

/* the largest power of two, up to 256, that divides the address */
static inline uint32_t blas_alignment(const void* p) {
    uint32_t align = 256;
    while (align > 1 && (uintptr_t)p % align != 0) align /= 2;
    return align;
}

/* The algorithm for problem p: the context's, or the heuristic's (then remembered); NULL when cuBLASLt has
 * none for it and may_fail (a fused GELU epilogue, which the caller then runs unfused), else exit 1. */
static inline const cublasLtMatmulAlgo_t* blas_algorithm(BlasContext* ctx, const BlasProblem* p, cublasLtMatmulDesc_t desc,
                                                         cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                                         cublasLtMatrixLayout_t ld, int may_fail) {
    for (int i = 0; i < ctx->num_plans; i++)
        if (memcmp(&ctx->plans[i].problem, p, sizeof(*p)) == 0) return ctx->plans[i].supported ? &ctx->plans[i].algo : NULL;
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = BLAS_WORKSPACE_BYTES;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &p->align_a, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &p->align_b, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &p->align_d, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &p->align_d, sizeof(uint32_t)));
    cublasLtMatmulHeuristicResult_t heuristic;
    memset(&heuristic, 0, sizeof(heuristic));
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx->handle, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    int supported = status == CUBLAS_STATUS_SUCCESS && found > 0 && heuristic.state == CUBLAS_STATUS_SUCCESS;
    if (!supported && !(may_fail && (status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED))) {
        fprintf(stderr, "error: cuBLASLt has no algorithm for m=%d n=%d k=%d transa=%d transb=%d epilogue=%d: %s (%s:%d)\n", p->m, p->n,
                p->k, p->transa, p->transb, p->epilogue,
                status != CUBLAS_STATUS_SUCCESS ? cublasGetStatusName(status) : found ? cublasGetStatusName(heuristic.state) : "none returned",
                __FILE__, __LINE__);
        exit(1);
    }
    int slot = ctx->num_plans < BLAS_PLANS ? ctx->num_plans++ : ctx->next_plan;
    if (ctx->num_plans == BLAS_PLANS) ctx->next_plan = (slot + 1) % BLAS_PLANS;
    ctx->plans[slot].problem = *p;
    ctx->plans[slot].algo = heuristic.algo;
    ctx->plans[slot].supported = supported;
    return supported ? &ctx->plans[slot].algo : NULL;
}

/* D (m x n, col-major, ld m) = epilogue(op(A)·op(B) + beta·D): A is m x k (transa: stored k x m), B is
 * k x n (transb: stored n x k), both with the leading dimensions of their stored shapes. bias (m) and
 * aux (m x n, ld m) as the epilogue needs them, else NULL. Returns 0; −1 (nothing done) when cuBLASLt has
 * no algorithm for a GELU or DGELU epilogue here, or when A, B or D is under 16-byte alignment and the
 * epilogue is not DEFAULT (cublasGemmEx, which then runs the product, has none). */
static inline int matmul_cublaslt(BlasContext* ctx, floatX* d, const floatX* a, const floatX* b, const floatX* bias, floatX* aux,
                                  int m, int n, int k, int transa, int transb, float beta, cublasLtEpilogue_t epilogue) {
    cublasOperation_t opa = transa ? CUBLAS_OP_T : CUBLAS_OP_N, opb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = transa ? k : m, ldb = transb ? n : k;
    if (blas_alignment(a) < 16 || blas_alignment(b) < 16 || blas_alignment(d) < 16 || lda * sizeof(floatX) % 16 != 0 ||
        ldb * sizeof(floatX) % 16 != 0 || m * sizeof(floatX) % 16 != 0) {
        if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) return -1;
        float alpha = 1.0f;
        cublasCheck(cublasGemmEx(ctx->gemm_handle, opa, opb, m, n, k, &alpha, a, CUBLAS_FLOATX, lda, b, CUBLAS_FLOATX, ldb, &beta, d,
                                 CUBLAS_FLOATX, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        ctx->gemm_fallbacks++;
        return 0;
    }
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias) cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (aux) {
        int64_t ld = m;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, CUBLAS_FLOATX, lda, transa ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUBLAS_FLOATX, ldb, transb ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, CUBLAS_FLOATX, m, n, m));
    BlasProblem problem = {m, n, k, transa, transb, (int)epilogue, blas_alignment(a), blas_alignment(b), blas_alignment(d),
                           blas_alignment(bias), blas_alignment(aux)};
    int fused_gelu = epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_DGELU;
    const cublasLtMatmulAlgo_t* algo = blas_algorithm(ctx, &problem, desc, la, lb, ld, fused_gelu);
    if (algo) {
        float alpha = 1.0f;
        cublasCheck(cublasLtMatmul(ctx->handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, algo, ctx->workspace,
                                   BLAS_WORKSPACE_BYTES, ctx->stream));
    }
    cublasCheck(cublasLtMatrixLayoutDestroy(la));
    cublasCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(ld));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
    return algo ? 0 : -1;
}

/* whether GELU fuses into the epilogue of a matmul whose output is width wide: in bf16 when ctx allows it and
 * the aux leading dimension (the width) is a multiple of 8, as the GELU epilogues need; never in fp32, whose
 * 1e-5 bounds an unspecified GELU (its tanh) in cuBLASLt could break */
static inline int matmul_gelu_fusable(const BlasContext* ctx, int width) {
    return sizeof(floatX) == 2 && ctx->gelu_fusion && width % 8 == 0;
}

#define ADD_BIAS_BLOCK 256
/* out[r, c] += bias[c] over n = rows x OC elements, one thread per element */
__global__ void add_bias_kernel(floatX* out, const floatX* bias, long n, int OC) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (floatX)((float)out[i] + (float)bias[i % OC]);
}

/* out[BT,OC] = inp·weightᵀ + bias (bias may be NULL). With pre != NULL: pre = inp·weightᵀ + bias and
 * out = gelu(pre) (pre must not alias out). */
static inline void matmul_forward(BlasContext* ctx, floatX* out, floatX* pre, const floatX* inp, const floatX* weight,
                                  const floatX* bias, int BT, int C, int OC) {
    int fusable_bias = blas_alignment(bias) >= 16; /* NULL counts as aligned */
    if (pre && fusable_bias && matmul_gelu_fusable(ctx, OC) &&
        matmul_cublaslt(ctx, out, weight, inp, bias, pre, OC, BT, C, 1, 0, 0.0f,
                        bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX) == 0)
        return;
    floatX* d = pre ? pre : out;
    long n = (long)BT * OC;
    if (!(bias && fusable_bias && matmul_cublaslt(ctx, d, weight, inp, bias, NULL, OC, BT, C, 1, 0, 0.0f, CUBLASLT_EPILOGUE_BIAS) == 0)) {
        matmul_cublaslt(ctx, d, weight, inp, NULL, NULL, OC, BT, C, 1, 0, 0.0f, CUBLASLT_EPILOGUE_DEFAULT);
        if (bias)
            launch_kernel(add_bias_kernel, dim3(ceil_div(n, ADD_BIAS_BLOCK)), dim3(ADD_BIAS_BLOCK), 0, ctx->stream, d, bias, n, OC);
    }
    if (pre) gelu_forward(out, pre, (size_t)n, ctx->stream);
}

/* dinp[BT,C] = dout·weight (OVERWRITTEN; skipped when NULL), times gelu'(pre) when pre != NULL (pre is the
 * forward input of the gelu whose output was inp); dweight[OC,C] += doutᵀ·inp; dbias[OC] += Σ_rows dout
 * (skipped when NULL; scratch: colsum_scratch_floats(BT, OC) floats). */
static inline void matmul_backward(BlasContext* ctx, floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                                   const floatX* dout, const floatX* inp, const floatX* weight, const floatX* pre, int BT, int C,
                                   int OC) {
    if (dbias) column_sums(dbias, NULL, scratch, dout, NULL, NULL, NULL, BT, OC, ctx->stream);
    matmul_cublaslt(ctx, dweight, inp, dout, NULL, NULL, C, OC, BT, 0, 1, 1.0f, CUBLASLT_EPILOGUE_DEFAULT);
    if (!dinp) return;
    if (pre && matmul_gelu_fusable(ctx, C) &&
        matmul_cublaslt(ctx, dinp, weight, dout, NULL, (floatX*)pre, C, BT, OC, 0, 0, 0.0f, CUBLASLT_EPILOGUE_DGELU) == 0)
        return;
    matmul_cublaslt(ctx, dinp, weight, dout, NULL, NULL, C, BT, OC, 0, 0, 0.0f, CUBLASLT_EPILOGUE_DEFAULT);
    if (pre) gelu_backward(dinp, pre, dinp, (size_t)BT * C, ctx->stream);
}

#endif /* LLMC_MATMUL_CUH */
