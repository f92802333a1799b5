/*
 * llmc/cublas_common.cuh — the cuBLASLt context of the GPU trainer and its error check.
 *
 * nvcc: the real <cublasLt.h> and <cublas_v2.h> (link -lcublasLt -lcublas); with -DCUDASIM:
 * dev/cudasim/fake_cublaslt.h, which has the same API and honours every descriptor attribute we set.
 *   cublasCheck(call)   on error prints "error: cuBLAS: <call> failed: <status name> (file:line)", exit 1
 *   BlasContext         the cuBLASLt handle, its workspace, the stream, the algorithms chosen so far (BlasPlan),
 *                       whether GELU may fuse into an epilogue (gelu_fusion), and a cuBLAS handle on the same
 *                       stream for the matrices cuBLASLt is not given (under 16-byte alignment, llmc/matmul.cuh)
 *                       with a count of the products it ran; created once, passed to every matmul
 * Compute type: fp32 accumulation (CUBLAS_COMPUTE_32F) in both builds, so TF32 is never used: the fp32
 * build is exact fp32 (the 1e-5 bounds of test_gpt apply), the bf16 build has bf16 inputs.
 * No global state.
 */
#ifndef LLMC_CUBLAS_COMMON_CUH
#define LLMC_CUBLAS_COMMON_CUH

#include "llmc/cuda_utils.cuh"
#if defined(CUDASIM)
#include "dev/cudasim/fake_cublaslt.h"
#else
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

static inline void cublas_check_(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "error: cuBLAS: %s failed: %s (%s:%d)\n", call, cublasGetStatusName(status), file, line);
    exit(1);
}
#define cublasCheck(call) cublas_check_((call), #call, __FILE__, __LINE__)

#if defined(PRECISION_FP32)
#define CUBLAS_FLOATX CUDA_R_32F
#else
#define CUBLAS_FLOATX CUDA_R_16BF
#endif

#define BLAS_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt's workspace: 32 MiB, as Hopper kernels want */

/* A matmul problem as cuBLASLt's heuristic sees it (llmc/matmul.cuh): shape, transposes, epilogue and the
 * alignment in bytes (a power of two, at most 256; A, B and D at least 16) of A, B, D (= C) and the epilogue's bias and aux
 * pointers (the heuristic reads their values for the alignment it may assume); and the algorithm it
 * chose, or that it had none (supported 0: a fused epilogue then runs unfused). */
typedef struct {
    int m, n, k, transa, transb, epilogue;
    uint32_t align_a, align_b, align_d, align_bias, align_aux;
} BlasProblem;
typedef struct {
    BlasProblem problem;
    cublasLtMatmulAlgo_t algo;
    int supported;
} BlasPlan;
#define BLAS_PLANS 64 /* problems remembered; a full table replaces its oldest entry */

typedef struct {
    cublasLtHandle_t handle;
    void* workspace;
    cudaStream_t stream;
    BlasPlan plans[BLAS_PLANS];
    int num_plans, next_plan; /* plans in use; the one the next new problem replaces when full */
    int gelu_fusion;          /* 1 (blas_create's): GELU in cuBLASLt's epilogues where llmc/matmul.cuh can; 0: never */
    cublasHandle_t gemm_handle; /* cuBLAS (cublasGemmEx) on stream, for matrices under 16-byte alignment */
    long gemm_fallbacks;        /* products run through gemm_handle since blas_create */
} BlasContext;

static inline void blas_create(BlasContext* ctx, cudaStream_t stream) {
    cublasCheck(cublasLtCreate(&ctx->handle));
    cudaCheck(cudaMalloc(&ctx->workspace, BLAS_WORKSPACE_BYTES));
    ctx->stream = stream;
    ctx->num_plans = ctx->next_plan = 0;
    ctx->gelu_fusion = 1;
    cublasCheck(cublasCreate(&ctx->gemm_handle));
    cublasCheck(cublasSetStream(ctx->gemm_handle, stream));
    ctx->gemm_fallbacks = 0;
}

static inline void blas_destroy(BlasContext* ctx) {
    cublasCheck(cublasLtDestroy(ctx->handle));
    cublasCheck(cublasDestroy(ctx->gemm_handle));
    cudaCheck(cudaFree(ctx->workspace));
}

#endif /* LLMC_CUBLAS_COMMON_CUH */
