/*
 * dev/cudasim/fake_cublaslt.h — a fake of the cuBLAS and cuBLASLt libraries for the CUDA simulator.
 *
 * The project's .cu files compile either with nvcc against <cublas_v2.h>/<cublasLt.h>, or with
 * `g++ -DCUDASIM -x c++` against dev/cudasim/cudasim.h plus this header. It is a fake of the
 * library, not of our wrapper: same function names, types, enum names and enum values as CUDA 13's
 * cublas_api.h / cublasLt.h / library_types.h, and it honours every descriptor attribute our code
 * sets, so that the transposes, leading dimensions and epilogues our code passes are what is tested.
 * In simulation "device memory" is host memory, so the fake computes directly on the pointers, at
 * the call, or when the stream's queued work runs under CUDASIM_STREAMS=deferred (cudasim_runtime.h).
 *
 * What is computed (column-major throughout, as in cuBLAS; batch entry b offsets every matrix by
 * b * its batch stride):
 *   acc[i,j] = sum_l op(A)[i,l] * op(B)[l,j]                  fp32 accumulation, l in 0..k-1
 *   v[i,j]   = alpha * acc[i,j] + beta * C[i,j]               C is not read when beta == 0
 *   epilogue (cublasLtEpilogue_t):
 *     DEFAULT        D = v
 *     BIAS           D = v + bias[i]                            (bias: length m, per row of D)
 *     GELU           D = gelu(v)
 *     GELU_BIAS      D = gelu(v + bias[i])
 *     GELU_AUX       aux[i,j] = v;            D = gelu(v)       (aux: m x n, leading dim aux_ld)
 *     GELU_AUX_BIAS  aux[i,j] = v + bias[i];  D = gelu(v + bias[i])
 *     DGELU          D = v * gelu'(aux[i,j])
 *     DGELU_BGRAD    D = v * gelu'(aux[i,j]);  bias[i] = sum_j D[i,j]   (fp32 sum before rounding D)
 *     BGRADA         D = v;  bias[i] = sum_l op(A)[i,l]         (length m: reduction over k)
 *     BGRADB         D = v;  bias[j] = sum_l op(B)[l,j]         (length n: reduction over k)
 *   gelu is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as cuBLASLt's.
 *   The bias gradients are not scaled by alpha. RELU epilogues are not implemented (NOT_SUPPORTED).
 *
 * Types: A/B are CUDA_R_32F or CUDA_R_16BF (same type); C/D are CUDA_R_32F or CUDA_R_16BF (same
 * type; fp32 A/B need fp32 C/D, as in cuBLAS). Bias is D's type or fp32 (BIAS_DATA_TYPE), aux is
 * D's type. Every output is rounded once from fp32 (bf16: round to nearest even). Compute types
 * CUBLAS_COMPUTE_32F, _32F_PEDANTIC, _32F_FAST_TF32 and _32F_FAST_16BF, scale type CUDA_R_32F.
 * TF32 is emulated: with CUBLAS_COMPUTE_32F_FAST_TF32 (cuBLASLt, cublasGemmEx), or with
 * CUBLAS_COMPUTE_32F under cublasSetMathMode(CUBLAS_TF32_TENSOR_OP_MATH) (cuBLAS), fp32 inputs are
 * rounded to 10 mantissa bits, to nearest with ties away from zero (as PTX cvt.rna.tf32.f32); real
 * kernels may round differently. _32F_FAST_16BF rounds fp32 inputs to bf16 (nearest even).
 * The summation order over k differs from the GPU's, so results agree to fp32 rounding, not bits.
 *
 * Alignment: cublasLtMatmulAlgoGetHeuristic picks algorithms for matrices aligned as the preference's
 * CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES say (256 unless set, cuBLASLt's default), and
 * cublasLtMatmul with such an algorithm refuses (NOT_SUPPORTED) a matrix pointer less aligned than that:
 * the real library may pick a kernel that needs the alignment it was told to assume. The epilogue's bias
 * and aux pointers must be 16-byte aligned, else NOT_SUPPORTED (the strictest requirement reported of the
 * real library's vectorised epilogues; its documentation gives none).
 * A bf16 (CUDA_R_16BF) matrix A, B, C or D whose pointer or leading dimension in bytes (ld x 2) is no
 * multiple of 16 has no algorithm, as a library whose kernels all load 16-byte vectors would have none:
 * the heuristic answers NOT_SUPPORTED with zero results when such a layout's leading dimension or the
 * preference's MIN_ALIGNMENT for it says so, and cublasLtMatmul refuses (NOT_SUPPORTED) such a pointer or
 * layout whatever its algorithm; each prints its one line. Callers must run such products otherwise (e.g.
 * cublasGemmEx, which the fake, like the real cuBLAS, takes at any alignment).
 *
 * Memory (the host/device checks): what the call's kernels would read or write must lie inside one
 * cudaMalloc allocation: A and B (k > 0), C (beta != 0) and D over the extent their layouts span, the
 * epilogue's bias and aux, the workspace's workspaceSizeInBytes; alpha/beta must be device memory in
 * device pointer mode and must not be in host mode. Otherwise INVALID_VALUE (the real library does not
 * check: its kernel faults). The heuristic's algorithm asks for the preference's whole MAX_WORKSPACE_BYTES
 * as its workspaceSize (0 without a preference), and cublasLtMatmul refuses a smaller workspaceSizeInBytes
 * (INVALID_VALUE, as the real library's documentation says).
 * Argument errors return CUBLAS_STATUS_INVALID_VALUE, unsupported combinations
 * CUBLAS_STATUS_NOT_SUPPORTED, each after printing one line "<function>: <why>" to stderr.
 * CUDASIM_CUBLASLT_NO_GELU=1 makes the heuristic answer NOT_SUPPORTED (with a note on stderr) for every GELU and DGELU
 * epilogue, as the real library does where it has no kernel for one: callers must then run unfused.
 * Matrix layouts must be column-major (CUBLASLT_ORDER_COL); other orders are NOT_SUPPORTED.
 *
 * Speed: op(A) and op(B) are packed to fp32 once, then 64x4 output tiles are accumulated by a
 * kernel compiled for AVX-512, AVX2 and baseline x86-64 (chosen at run time, target_clones); tiles
 * are spread over OpenMP threads when the includer compiles with -fopenmp.
 *
 * Header-only; no global mutable state (handles and descriptors carry all state).
 */
#ifndef CUDASIM_FAKE_CUBLASLT_H
#define CUDASIM_FAKE_CUBLASLT_H

#include "cudasim.h"
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#define FAKEBLAS_OMP(directive) _Pragma(#directive)
#else
#define FAKEBLAS_OMP(directive)
#endif

/* ----------------------------------------------------------------------------
 * library_types.h (same guard as CUDA's, so whichever header defines it first wins) */
#ifndef __LIBRARY_TYPES_H__
#define __LIBRARY_TYPES_H__
typedef enum cudaDataType_t {
    CUDA_R_16F = 2, CUDA_C_16F = 6, CUDA_R_16BF = 14, CUDA_C_16BF = 15,
    CUDA_R_32F = 0, CUDA_C_32F = 4, CUDA_R_64F = 1, CUDA_C_64F = 5,
    CUDA_R_4I = 16, CUDA_C_4I = 17, CUDA_R_4U = 18, CUDA_C_4U = 19,
    CUDA_R_8I = 3, CUDA_C_8I = 7, CUDA_R_8U = 8, CUDA_C_8U = 9,
    CUDA_R_16I = 20, CUDA_C_16I = 21, CUDA_R_16U = 22, CUDA_C_16U = 23,
    CUDA_R_32I = 10, CUDA_C_32I = 11, CUDA_R_32U = 12, CUDA_C_32U = 13,
    CUDA_R_64I = 24, CUDA_C_64I = 25, CUDA_R_64U = 26, CUDA_C_64U = 27,
    CUDA_R_8F_E4M3 = 28, CUDA_R_8F_UE4M3 = CUDA_R_8F_E4M3, CUDA_R_8F_E5M2 = 29,
    CUDA_R_8F_UE8M0 = 30, CUDA_R_6F_E2M3 = 31, CUDA_R_6F_E3M2 = 32, CUDA_R_4F_E2M1 = 33,
} cudaDataType;
#endif

/* ----------------------------------------------------------------------------
 * cublas_api.h: the types and calls we use */
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2, CUBLAS_OP_HERMITAN = 2, CUBLAS_OP_CONJG = 3 } cublasOperation_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
typedef enum {
    CUBLAS_GEMM_DFALT = -1, CUBLAS_GEMM_DEFAULT = -1,
    CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99, CUBLAS_GEMM_DFALT_TENSOR_OP = 99,
} cublasGemmAlgo_t;
typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
    CUBLAS_FP32_EMULATED_BF16X9_MATH = 4,
    CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH = 8,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
} cublasMath_t;
typedef cudaDataType cublasDataType_t;
typedef enum {
    CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16F = 74, CUBLAS_COMPUTE_32F_FAST_16BF = 75, CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    CUBLAS_COMPUTE_32F_EMULATED_16BFX9 = 78,
    CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_64F_PEDANTIC = 71, CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT = 79,
    CUBLAS_COMPUTE_32I = 72, CUBLAS_COMPUTE_32I_PEDANTIC = 73,
} cublasComputeType_t;

struct cublasContext {
    cudaStream_t stream;
    cublasMath_t math_mode;
    cublasPointerMode_t pointer_mode;
};
typedef struct cublasContext* cublasHandle_t;

/* cublas_v2.h maps the plain names onto the _v2 entry points */
#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasSetPointerMode cublasSetPointerMode_v2
#define cublasGetPointerMode cublasGetPointerMode_v2
#define cublasSgemm cublasSgemm_v2

/* ----------------------------------------------------------------------------
 * cublasLt.h: the types and calls we use */
struct cublasLtContext {
    int created;
};
typedef struct cublasLtContext* cublasLtHandle_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1, CUBLASLT_ORDER_COL32 = 2,
               CUBLASLT_ORDER_COL4_4R2_8C = 3, CUBLASLT_ORDER_COL32_2R_4R4 = 4 } cublasLtOrder_t;

typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                 /* uint32_t */
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                /* int32_t */
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                 /* uint64_t */
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,                 /* uint64_t */
    CUBLASLT_MATRIX_LAYOUT_LD = 4,                   /* int64_t */
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,          /* int32_t */
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6, /* int64_t */
    CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET = 7,         /* int64_t */
    CUBLASLT_MATRIX_LAYOUT_BATCH_MODE = 8,           /* uint32_t */
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,               /* int32_t */
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,                 /* int32_t */
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,               /* int32_t */
    CUBLASLT_MATMUL_DESC_TRANSA = 3,                     /* int32_t */
    CUBLASLT_MATMUL_DESC_TRANSB = 4,                     /* int32_t */
    CUBLASLT_MATMUL_DESC_TRANSC = 5,                     /* int32_t */
    CUBLASLT_MATMUL_DESC_FILL_MODE = 6,                  /* int32_t */
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,                   /* uint32_t */
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,               /* void* */
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,         /* int64_t */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,      /* void* */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,           /* int64_t */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13, /* int64_t */
    CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE = 14,
    CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = 15,
    CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
    CUBLASLT_MATMUL_DESC_C_SCALE_POINTER = 19,
    CUBLASLT_MATMUL_DESC_D_SCALE_POINTER = 20,
    CUBLASLT_MATMUL_DESC_AMAX_D_POINTER = 21,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,    /* int32_t */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER = 23,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER = 24,
    CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,            /* int32_t */
    CUBLASLT_MATMUL_DESC_A_SCALE_MODE = 31,
    CUBLASLT_MATMUL_DESC_B_SCALE_MODE = 32,
    CUBLASLT_MATMUL_DESC_C_SCALE_MODE = 33,
    CUBLASLT_MATMUL_DESC_D_SCALE_MODE = 34,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE = 35,
    CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER = 36,
    CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE = 37,
    CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR = 38,
} cublasLtMatmulDescAttributes_t;

typedef enum {
    CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST,
    CUBLASLT_POINTER_MODE_DEVICE = CUBLAS_POINTER_MODE_DEVICE,
    CUBLASLT_POINTER_MODE_DEVICE_VECTOR = 2,
    CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 3,
    CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST = 4,
} cublasLtPointerMode_t;

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = (CUBLASLT_EPILOGUE_RELU | 128),
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = (CUBLASLT_EPILOGUE_GELU | 128),
    CUBLASLT_EPILOGUE_GELU_BIAS = (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = (CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;

typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,           /* uint32_t */
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,   /* uint64_t */
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3, /* uint32_t */
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* uint32_t */
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
    CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT = 9,       /* float */
    CUBLASLT_MATMUL_PREF_IMPL_MASK = 12,            /* uint64_t */
} cublasLtMatmulPreferenceAttributes_t;

/* The real descriptors are semi-opaque blocks of words; ours hold named fields. */
typedef struct cublasLtMatrixLayoutOpaque_t {
    cudaDataType type;
    int32_t order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch_count;
    int64_t batch_stride;
} cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

typedef struct cublasLtMatmulDescOpaque_t {
    cublasComputeType_t compute_type;
    int32_t scale_type;
    int32_t pointer_mode;
    int32_t transa, transb, transc;
    uint32_t epilogue;
    const void* bias;
    int64_t bias_batch_stride;
    int32_t bias_type; /* -1: D's type */
    void* aux;
    int64_t aux_ld, aux_batch_stride;
    int32_t aux_type;  /* -1: D's type */
} cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

typedef struct cublasLtMatmulPreferenceOpaque_t {
    uint64_t max_workspace_bytes;
    uint32_t min_alignment[4]; /* A, B, C, D in bytes */
} cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

typedef struct {
    uint64_t data[8]; /* the fake's: [0, 4) the alignments of A, B, C, D it assumes, [4] FAKEBLAS_ALGO_TAG,
                       * [5] the workspace bytes it needs */
} cublasLtMatmulAlgo_t;
#define FAKEBLAS_ALGO_TAG 0x66616b65616c676full

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

/* ----------------------------------------------------------------------------
 * internals: error reporting, element access, the gemm core */

/* prints "<function>: <why>" to stderr and returns status */
static inline cublasStatus_t fakeblas_fail(cublasStatus_t status, const char* function, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline cublasStatus_t fakeblas_fail(cublasStatus_t status, const char* function, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", function);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

static inline const char* fakeblas_type_name(int type) {
    switch (type) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    default: return "an unsupported cudaDataType";
    }
}

/* element idx of an fp32 or bf16 array, as float */
static inline float fakeblas_load(const void* p, cudaDataType type, int64_t idx) {
    if (type == CUDA_R_32F) return ((const float*)p)[idx];
    return __bfloat162float(((const __nv_bfloat16*)p)[idx]);
}
/* stores v into element idx of an fp32 or bf16 array (bf16: rounded to nearest even) */
static inline void fakeblas_store(void* p, cudaDataType type, int64_t idx, float v) {
    if (type == CUDA_R_32F) ((float*)p)[idx] = v;
    else ((__nv_bfloat16*)p)[idx] = __float2bfloat16(v);
}

enum { FAKEBLAS_ROUND_NONE = 0, FAKEBLAS_ROUND_TF32 = 1, FAKEBLAS_ROUND_BF16 = 2 };
/* the input rounding a reduced-precision compute type applies to fp32 inputs (see top comment) */
static inline float fakeblas_round_input(float x, int rounding) {
    if (rounding == FAKEBLAS_ROUND_BF16) return __bfloat162float(__float2bfloat16(x));
    if (rounding == FAKEBLAS_ROUND_TF32 && isfinite(x)) {
        uint32_t u;
        memcpy(&u, &x, 4);
        u = (u + 0x1000u) & ~0x1fffu; /* add half an ulp of the 10-bit mantissa, truncate: ties away */
        memcpy(&x, &u, 4);
    }
    return x;
}

static inline float fakeblas_gelu(float x) {
    const float s = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}
/* d/dx of fakeblas_gelu */
static inline float fakeblas_gelu_grad(float x) {
    const float s = 0.7978845608028654f;
    float t = tanhf(s * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * 0.044715f * x * x);
}

/* One validated gemm problem (see the top comment for the math). Strides, leading dimensions and
 * offsets are in elements. */
typedef struct {
    cublasOperation_t transa, transb;
    int m, n, k, batch;
    float alpha, beta;
    const void* A; cudaDataType Atype; int64_t lda, strideA;
    const void* B; cudaDataType Btype; int64_t ldb, strideB;
    const void* C; cudaDataType Ctype; int64_t ldc, strideC;
    void* D; cudaDataType Dtype; int64_t ldd, strideD;
    int rounding; /* FAKEBLAS_ROUND_* applied to fp32 A/B */
    uint32_t epilogue;
    void* bias; cudaDataType bias_type; int64_t bias_stride;
    void* aux; cudaDataType aux_type; int64_t aux_ld, aux_stride;
} fakeblas_gemm;

enum { FAKEBLAS_IB = 64, FAKEBLAS_JB = 4 }; /* output tile: IB rows x JB columns */

/* acc[c*IB + ii] = sum_l Ap[l*mp + i0 + ii] * Bp[(j0 + c)*k + l] for ii < IB, c < JB.
 * Ap is op(A) packed column-major with mp (a multiple of IB) rows, Bp is op(B) packed with each
 * column contiguous and at least j0 + JB columns; the ii loop has a fixed trip count so it
 * vectorises. One call owns one tile; the caller parallelises over tiles. */
/* (not cloned under ThreadSanitizer, which instruments the load-time resolver that then runs before it starts) */
#if !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
inline void fakeblas_tile(float* __restrict__ acc, const float* __restrict__ Ap, int64_t mp, int i0,
                          const float* __restrict__ Bp, int k, int j0) {
    float* __restrict__ acc0 = acc;
    float* __restrict__ acc1 = acc + FAKEBLAS_IB;
    float* __restrict__ acc2 = acc + 2 * FAKEBLAS_IB;
    float* __restrict__ acc3 = acc + 3 * FAKEBLAS_IB;
    const float* b = Bp + (int64_t)j0 * k;
    for (int ii = 0; ii < FAKEBLAS_JB * FAKEBLAS_IB; ii++) acc[ii] = 0.0f;
    for (int l = 0; l < k; l++) {
        const float* __restrict__ a = Ap + (int64_t)l * mp + i0;
        float b0 = b[l], b1 = b[k + l], b2 = b[2 * (int64_t)k + l], b3 = b[3 * (int64_t)k + l];
        for (int ii = 0; ii < FAKEBLAS_IB; ii++) {
            acc0[ii] += a[ii] * b0;
            acc1[ii] += a[ii] * b1;
            acc2[ii] += a[ii] * b2;
            acc3[ii] += a[ii] * b3;
        }
    }
}

/* Applies alpha, beta*C and the epilogue to tile rows i0..i0+ib-1, columns j0..j0+jb-1 of batch
 * entry b, writes D (and aux for GELU_AUX*), and adds each row's final fp32 values into rowsum[ii]
 * (used by DGELU_BGRAD). */
static inline void fakeblas_finish_tile(const fakeblas_gemm* g, int b, const float* acc, int i0, int ib,
                                        int j0, int jb, float* rowsum) {
    const uint32_t epi = g->epilogue;
    const int add_bias = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_BIAS ||
                         epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const int apply_gelu = epi == CUBLASLT_EPILOGUE_GELU || epi == CUBLASLT_EPILOGUE_GELU_BIAS ||
                           epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const int store_aux = epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const int apply_dgelu = epi == CUBLASLT_EPILOGUE_DGELU || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    const void* C = g->beta != 0.0f ? (const char*)g->C : NULL;
    int64_t c_off = (int64_t)b * g->strideC, d_off = (int64_t)b * g->strideD;
    int64_t aux_off = (int64_t)b * g->aux_stride, bias_off = (int64_t)b * g->bias_stride;
    for (int c = 0; c < jb; c++) {
        int j = j0 + c;
        for (int ii = 0; ii < ib; ii++) {
            int i = i0 + ii;
            float v = g->alpha * acc[c * FAKEBLAS_IB + ii];
            if (C) v += g->beta * fakeblas_load(C, g->Ctype, c_off + i + j * g->ldc);
            if (add_bias) v += fakeblas_load(g->bias, g->bias_type, bias_off + i);
            if (store_aux) fakeblas_store(g->aux, g->aux_type, aux_off + i + j * g->aux_ld, v);
            if (apply_gelu) v = fakeblas_gelu(v);
            if (apply_dgelu) v *= fakeblas_gelu_grad(fakeblas_load(g->aux, g->aux_type, aux_off + i + j * g->aux_ld));
            rowsum[ii] += v;
            fakeblas_store(g->D, g->Dtype, d_off + i + j * g->ldd, v);
        }
    }
}

/* Packs op(X) (rows x cols of the operation, read from X with leading dim ld, transposed when
 * trans != N) for every batch entry into fp32: out[b*batch_elems + r*row_step + c*col_step],
 * applying the input rounding. Zero-fills the padding the caller allocated (calloc). */
static inline void fakeblas_pack(float* out, int64_t batch_elems, int64_t row_step, int64_t col_step,
                                 const void* X, cudaDataType type, int64_t ld, int64_t stride,
                                 cublasOperation_t trans, int rows, int cols, int batch, int rounding) {
    int64_t rs = trans == CUBLAS_OP_N ? 1 : ld, cs = trans == CUBLAS_OP_N ? ld : 1;
    int r_round = type == CUDA_R_32F ? rounding : FAKEBLAS_ROUND_NONE; /* bf16 is exact in tf32 */
    FAKEBLAS_OMP(omp parallel for collapse(2) schedule(static))
    for (int b = 0; b < batch; b++) {
        for (int c = 0; c < cols; c++) {
            for (int r = 0; r < rows; r++) {
                float x = fakeblas_load(X, type, (int64_t)b * stride + r * rs + c * cs);
                out[b * batch_elems + r * row_step + c * col_step] = fakeblas_round_input(x, r_round);
            }
        }
    }
}

/* bias[r] = sum over the k dimension of op(X)[r, :] (BGRADA: X = A, rows = m) or of op(X)[:, r]
 * (BGRADB: X = B, rows = n); sequential fp32 sum of the unrounded inputs, one thread per r. */
static inline void fakeblas_bias_grad(const fakeblas_gemm* g, int from_b) {
    const void* X = from_b ? g->B : g->A;
    cudaDataType type = from_b ? g->Btype : g->Atype;
    int64_t ld = from_b ? g->ldb : g->lda;
    /* element (r, l) of the reduced operand: op(A)[r,l] or op(B)[l,r] */
    int trans = (from_b ? g->transb : g->transa) != CUBLAS_OP_N;
    int64_t rs = (trans != from_b) ? ld : 1, ls = (trans != from_b) ? 1 : ld;
    int rows = from_b ? g->n : g->m;
    FAKEBLAS_OMP(omp parallel for schedule(static))
    for (int r = 0; r < rows; r++) {
        float sum = 0.0f;
        for (int l = 0; l < g->k; l++) sum += fakeblas_load(X, type, r * rs + l * ls);
        fakeblas_store(g->bias, g->bias_type, r, sum);
    }
}

/* Runs a validated problem. Returns CUBLAS_STATUS_ALLOC_FAILED if the packing buffers can't be had. */
static inline cublasStatus_t fakeblas_run(const fakeblas_gemm* g, const char* function) {
    if (g->m == 0 || g->n == 0 || g->batch == 0) return CUBLAS_STATUS_SUCCESS;
    int64_t mp = ((int64_t)g->m + FAKEBLAS_IB - 1) / FAKEBLAS_IB * FAKEBLAS_IB;
    int64_t np = ((int64_t)g->n + FAKEBLAS_JB - 1) / FAKEBLAS_JB * FAKEBLAS_JB;
    int64_t a_elems = mp * g->k, b_elems = np * g->k;
    float* Ap = (float*)calloc((size_t)(a_elems * g->batch) + 1, sizeof(float));
    float* Bp = (float*)calloc((size_t)(b_elems * g->batch) + 1, sizeof(float));
    if (!Ap || !Bp) {
        free(Ap);
        free(Bp);
        return fakeblas_fail(CUBLAS_STATUS_ALLOC_FAILED, function, "cannot allocate %lld bytes of packing buffers",
                             (long long)((a_elems + b_elems) * g->batch * 4));
    }
    /* Ap[b][l*mp + i] = op(A)[i,l];  Bp[b][j*k + l] = op(B)[l,j] */
    fakeblas_pack(Ap, a_elems, 1, mp, g->A, g->Atype, g->lda, g->strideA, g->transa, g->m, g->k, g->batch, g->rounding);
    fakeblas_pack(Bp, b_elems, 1, g->k, g->B, g->Btype, g->ldb, g->strideB, g->transb, g->k, g->n, g->batch, g->rounding);
    int row_blocks = (int)(mp / FAKEBLAS_IB);
    int bgrad_rows = g->epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    FAKEBLAS_OMP(omp parallel for collapse(2) schedule(dynamic))
    for (int b = 0; b < g->batch; b++) {
        for (int rb = 0; rb < row_blocks; rb++) {
            float acc[FAKEBLAS_JB * FAKEBLAS_IB];
            float rowsum[FAKEBLAS_IB] = {0};
            int i0 = rb * FAKEBLAS_IB;
            int ib = g->m - i0 < FAKEBLAS_IB ? g->m - i0 : FAKEBLAS_IB;
            for (int j0 = 0; j0 < g->n; j0 += FAKEBLAS_JB) {
                int jb = g->n - j0 < FAKEBLAS_JB ? g->n - j0 : FAKEBLAS_JB;
                fakeblas_tile(acc, Ap + b * a_elems, mp, i0, Bp + b * b_elems, g->k, j0);
                fakeblas_finish_tile(g, b, acc, i0, ib, j0, jb, rowsum);
            }
            if (bgrad_rows)
                for (int ii = 0; ii < ib; ii++) fakeblas_store(g->bias, g->bias_type, i0 + ii, rowsum[ii]);
        }
    }
    free(Ap);
    free(Bp);
    if (g->epilogue == CUBLASLT_EPILOGUE_BGRADA) fakeblas_bias_grad(g, 0);
    if (g->epilogue == CUBLASLT_EPILOGUE_BGRADB) fakeblas_bias_grad(g, 1);
    return CUBLAS_STATUS_SUCCESS;
}

/* Runs a validated problem on `stream`: now, returning its status, or queued (CUDASIM_STREAMS=deferred,
 * cudasim_runtime.h), where a failure (its line already printed) exits with status 1. The work holds its own
 * copy of the problem (the race check: the stream reads nothing on the caller's stack), and a status comes
 * back untracked (a return value, not memory the stream shares with the host). */
static inline cublasStatus_t fakeblas_submit(const fakeblas_gemm* g, const char* function, cudaStream_t stream) {
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    cublasStatus_t* result = cudasim::deferred_streams() ? NULL : &status;
    fakeblas_gemm copy = *g;
    cudasim::enqueue(stream, [copy, function, result] {
        cublasStatus_t s = fakeblas_run(&copy, function);
        if (!result && s != CUBLAS_STATUS_SUCCESS) exit(1);
        cudasim::Untracked untracked;
        if (result) *result = s;
    });
    return status;
}

/* Checks the parts every entry point shares: types, compute type, dimensions against leading
 * dimensions, batch strides, and C aliasing D. Reports under `function`. */
static inline cublasStatus_t fakeblas_check(const fakeblas_gemm* g, cublasComputeType_t compute, const char* function) {
    if (g->transa != CUBLAS_OP_N && g->transa != CUBLAS_OP_T)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "transa %d is not CUBLAS_OP_N or CUBLAS_OP_T", g->transa);
    if (g->transb != CUBLAS_OP_N && g->transb != CUBLAS_OP_T)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "transb %d is not CUBLAS_OP_N or CUBLAS_OP_T", g->transb);
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "negative size m=%d n=%d k=%d batch=%d", g->m, g->n, g->k, g->batch);
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
        compute != CUBLAS_COMPUTE_32F_FAST_TF32 && compute != CUBLAS_COMPUTE_32F_FAST_16BF)
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, function, "compute type %d is not supported (fp32 compute types only)", compute);
    if (g->Atype != g->Btype || (g->Atype != CUDA_R_32F && g->Atype != CUDA_R_16BF))
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, function, "A is %s and B is %s: both must be CUDA_R_32F or both CUDA_R_16BF",
                             fakeblas_type_name(g->Atype), fakeblas_type_name(g->Btype));
    if (g->Ctype != g->Dtype || (g->Dtype != CUDA_R_32F && g->Dtype != CUDA_R_16BF))
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, function, "C is %s and D is %s: both must be CUDA_R_32F or both CUDA_R_16BF",
                             fakeblas_type_name(g->Ctype), fakeblas_type_name(g->Dtype));
    if (g->Atype == CUDA_R_32F && g->Dtype != CUDA_R_32F)
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, function, "fp32 A/B with a %s output is not supported", fakeblas_type_name(g->Dtype));
    int64_t a_rows = g->transa == CUBLAS_OP_N ? g->m : g->k;
    int64_t b_rows = g->transb == CUBLAS_OP_N ? g->k : g->n;
    if (g->lda < (a_rows > 1 ? a_rows : 1))
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "lda=%lld is less than the %lld rows of A", (long long)g->lda, (long long)a_rows);
    if (g->ldb < (b_rows > 1 ? b_rows : 1))
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "ldb=%lld is less than the %lld rows of B", (long long)g->ldb, (long long)b_rows);
    if (g->ldc < (g->m > 1 ? g->m : 1) || g->ldd < (g->m > 1 ? g->m : 1))
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "ldc=%lld / ldd=%lld is less than the %d rows of C/D",
                             (long long)g->ldc, (long long)g->ldd, g->m);
    if (g->strideA < 0 || g->strideB < 0 || g->strideC < 0 || g->strideD < 0)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "negative batch stride");
    if (g->C == g->D && g->C != NULL && (g->ldc != g->ldd || g->strideC != g->strideD))
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "C aliases D (in place) but ldc=%lld ldd=%lld strideC=%lld strideD=%lld differ",
                             (long long)g->ldc, (long long)g->ldd, (long long)g->strideC, (long long)g->strideD);
    return CUBLAS_STATUS_SUCCESS;
}


/* ---- the host/device memory checks: what a GPU kernel of the library would read or write must be device
 * memory (cudaMalloc), a host-mode scalar host memory; else INVALID_VALUE (the real library does not check:
 * its kernel faults, and the stream reports cudaErrorIllegalAddress later) ---- */

/* [p, p + bytes) inside one cudaMalloc allocation */
static inline cublasStatus_t fakeblas_device(const char* fn, const char* what, const void* p, size_t bytes) {
    if (bytes == 0 || cudasim::device_range(p, bytes)) return CUBLAS_STATUS_SUCCESS;
    char why[200];
    return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s %p (%zu bytes) %s", what, p, bytes,
                         cudasim::device_range_problem(p, bytes, why, sizeof why));
}
/* the bytes a column-major rows x cols matrix (leading dimension ld) spans, over batch entries stride apart */
static inline size_t fakeblas_extent(int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride, cudaDataType type) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
    size_t es = type == CUDA_R_32F ? 4 : 2;
    return ((size_t)(batch - 1) * (size_t)stride + (size_t)(cols - 1) * (size_t)ld + (size_t)rows) * es;
}
/* alpha and beta: device memory in device pointer mode, host memory (not cudaMalloc) in host mode */
static inline cublasStatus_t fakeblas_scalars(const char* fn, int device_mode, const void* alpha, const void* beta) {
    const void* scalars[2] = {alpha, beta};
    for (int i = 0; i < 2; i++) {
        const char* what = i ? "beta" : "alpha";
        if (device_mode) {
            cublasStatus_t s = fakeblas_device(fn, what, scalars[i], sizeof(float));
            if (s != CUBLAS_STATUS_SUCCESS) return s;
        } else if (cudasim::find_alloc(scalars[i], false)) {
            char desc[160];
            return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s %p is %s, but the pointer mode is HOST", what, scalars[i],
                                 cudasim::describe_memory(scalars[i], desc, sizeof desc));
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}
/* the matrices and epilogue vectors a problem reads or writes: A and B (k > 0), C (beta != 0), D, bias and aux */
static inline cublasStatus_t fakeblas_check_memory(const fakeblas_gemm* g, const char* fn) {
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) return CUBLAS_STATUS_SUCCESS;
    int64_t a_rows = g->transa == CUBLAS_OP_N ? g->m : g->k, a_cols = g->transa == CUBLAS_OP_N ? g->k : g->m;
    int64_t b_rows = g->transb == CUBLAS_OP_N ? g->k : g->n, b_cols = g->transb == CUBLAS_OP_N ? g->n : g->k;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (g->k > 0) {
        s = fakeblas_device(fn, "A", g->A, fakeblas_extent(a_rows, a_cols, g->lda, g->batch, g->strideA, g->Atype));
        if (s == CUBLAS_STATUS_SUCCESS) s = fakeblas_device(fn, "B", g->B, fakeblas_extent(b_rows, b_cols, g->ldb, g->batch, g->strideB, g->Btype));
    }
    if (s == CUBLAS_STATUS_SUCCESS && g->beta != 0.0f)
        s = fakeblas_device(fn, "C", g->C, fakeblas_extent(g->m, g->n, g->ldc, g->batch, g->strideC, g->Ctype));
    const char* d_name = strncmp(fn, "cublasLt", 8) == 0 ? "D" : "C"; /* cuBLAS writes C */
    if (s == CUBLAS_STATUS_SUCCESS) s = fakeblas_device(fn, d_name, g->D, fakeblas_extent(g->m, g->n, g->ldd, g->batch, g->strideD, g->Dtype));
    if (s == CUBLAS_STATUS_SUCCESS && g->bias) {
        int64_t len = g->epilogue == CUBLASLT_EPILOGUE_BGRADB ? g->n : g->m;
        s = fakeblas_device(fn, "the epilogue's bias (CUBLASLT_MATMUL_DESC_BIAS_POINTER)", g->bias,
                            fakeblas_extent(len, 1, len, g->batch, g->bias_stride, g->bias_type));
    }
    if (s == CUBLAS_STATUS_SUCCESS && g->aux)
        s = fakeblas_device(fn, "the epilogue's aux (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER)", g->aux,
                            fakeblas_extent(g->m, g->n, g->aux_ld, g->batch, g->aux_stride, g->aux_type));
    return s;
}

/* the input rounding of a compute type (cuBLAS: TF32 also when the math mode asks for it with CUBLAS_COMPUTE_32F) */
static inline int fakeblas_rounding(cublasComputeType_t compute, int tf32_math_mode) {
    if (compute == CUBLAS_COMPUTE_32F_FAST_TF32 || (compute == CUBLAS_COMPUTE_32F && tf32_math_mode)) return FAKEBLAS_ROUND_TF32;
    if (compute == CUBLAS_COMPUTE_32F_FAST_16BF) return FAKEBLAS_ROUND_BF16;
    return FAKEBLAS_ROUND_NONE;
}

/* ----------------------------------------------------------------------------
 * cuBLAS */
inline cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate", "handle pointer is NULL");
    *handle = (cublasHandle_t)calloc(1, sizeof(struct cublasContext));
    if (!*handle) return fakeblas_fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasCreate", "out of memory");
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy", "handle is NULL");
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream", "handle is NULL");
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream", "handle is NULL");
    if (!stream) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream", "stream pointer is NULL");
    *stream = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode", "handle is NULL");
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode", "handle is NULL");
    if (!mode) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode", "mode pointer is NULL");
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}
/* alpha and beta are read directly in either mode: simulated device memory is host memory */
inline cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetPointerMode", "handle is NULL");
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode", "mode %d is not HOST or DEVICE", mode);
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetPointerMode", "handle is NULL");
    if (!mode) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetPointerMode", "mode pointer is NULL");
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

inline const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}
inline const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "an error was detected when checking the current licensing";
    }
    return "unknown error";
}

/* C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for b < batchCount: the one cuBLAS gemm all three
 * cuBLAS entry points call */
static inline cublasStatus_t fakeblas_cublas_gemm(cublasHandle_t handle, const char* function, cublasOperation_t transa,
                                                  cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                  const void* A, cudaDataType Atype, int lda, long long strideA,
                                                  const void* B, cudaDataType Btype, int ldb, long long strideB,
                                                  const void* beta, void* C, cudaDataType Ctype, int ldc, long long strideC,
                                                  int batchCount, cublasComputeType_t compute) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, function, "handle is NULL");
    if (!alpha || !beta) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "alpha or beta is NULL");
    fakeblas_gemm g;
    memset(&g, 0, sizeof(g));
    g.transa = transa; g.transb = transb; g.m = m; g.n = n; g.k = k; g.batch = batchCount;
    g.alpha = *(const float*)alpha; g.beta = *(const float*)beta;
    g.A = A; g.Atype = Atype; g.lda = lda; g.strideA = strideA;
    g.B = B; g.Btype = Btype; g.ldb = ldb; g.strideB = strideB;
    g.C = C; g.Ctype = Ctype; g.ldc = ldc; g.strideC = strideC;
    g.D = C; g.Dtype = Ctype; g.ldd = ldc; g.strideD = strideC;
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    g.rounding = fakeblas_rounding(compute, (handle->math_mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH);
    cublasStatus_t status = fakeblas_check(&g, compute, function);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    if (m > 0 && n > 0 && batchCount > 0 && (!C || (k > 0 && (!A || !B))))
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "a matrix pointer is NULL");
    status = fakeblas_scalars(function, handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE, alpha, beta);
    if (status == CUBLAS_STATUS_SUCCESS) status = fakeblas_check_memory(&g, function);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    return fakeblas_submit(&g, function, handle->stream);
}

inline cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                     int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                     const float* beta, float* C, int ldc) {
    return fakeblas_cublas_gemm(handle, "cublasSgemm", transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B,
                                CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                   const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                   cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    return fakeblas_cublas_gemm(handle, "cublasGemmEx", transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype,
                                ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType);
}

inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                 cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                 const void* A, cudaDataType Atype, int lda, long long int strideA,
                                                 const void* B, cudaDataType Btype, int ldb, long long int strideB,
                                                 const void* beta, void* C, cudaDataType Ctype, int ldc,
                                                 long long int strideC, int batchCount,
                                                 cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    return fakeblas_cublas_gemm(handle, "cublasGemmStridedBatchedEx", transa, transb, m, n, k, alpha, A, Atype, lda,
                                strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType);
}

/* ----------------------------------------------------------------------------
 * cuBLASLt */
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "handle pointer is NULL");
    *handle = (cublasLtHandle_t)calloc(1, sizeof(struct cublasLtContext));
    if (!*handle) return fakeblas_fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtCreate", "out of memory");
    (*handle)->created = 1;
    return CUBLAS_STATUS_SUCCESS;
}
/* the version CUDA 13.0's cuBLASLt reports (10000 x major + 100 x minor + patch) */
inline size_t cublasLtGetVersion(void) { return 130000; }
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", "handle is NULL");
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

/* copies an attribute value of exactly `size` bytes; INVALID_VALUE if buf is NULL or the size is wrong */
static inline cublasStatus_t fakeblas_set(void* field, size_t size, const void* buf, size_t sizeInBytes,
                                          const char* function, int attr) {
    if (!buf) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "attribute %d: buf is NULL", attr);
    if (sizeInBytes != size)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, function, "attribute %d: sizeInBytes is %zu, expected %zu", attr, sizeInBytes, size);
    memcpy(field, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
    if (!layout) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "layout pointer is NULL");
    *layout = (cublasLtMatrixLayout_t)calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    if (!*layout) return fakeblas_fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatrixLayoutCreate", "out of memory");
    (*layout)->type = type;
    (*layout)->order = CUBLASLT_ORDER_COL;
    (*layout)->rows = rows;
    (*layout)->cols = cols;
    (*layout)->ld = ld;
    (*layout)->batch_count = 1;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    free(layout);
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                       const void* buf, size_t sizeInBytes) {
    const char* fn = "cublasLtMatrixLayoutSetAttribute";
    if (!layout) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "layout is NULL");
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
        uint32_t type = 0;
        cublasStatus_t s = fakeblas_set(&type, sizeof(type), buf, sizeInBytes, fn, attr);
        if (s == CUBLAS_STATUS_SUCCESS) layout->type = (cudaDataType)type;
        return s;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return fakeblas_set(&layout->order, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return fakeblas_set(&layout->rows, sizeof(uint64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return fakeblas_set(&layout->cols, sizeof(uint64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATRIX_LAYOUT_LD: return fakeblas_set(&layout->ld, sizeof(int64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return fakeblas_set(&layout->batch_count, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        return fakeblas_set(&layout->batch_stride, sizeof(int64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE:
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "attribute %d (planar complex / pointer-array batches) is not supported by the fake", attr);
    }
    return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown attribute %d", attr);
}

inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                               cudaDataType_t scaleType) {
    if (!desc) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "descriptor pointer is NULL");
    *desc = (cublasLtMatmulDesc_t)calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    if (!*desc) return fakeblas_fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatmulDescCreate", "out of memory");
    (*desc)->compute_type = computeType;
    (*desc)->scale_type = scaleType;
    (*desc)->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    (*desc)->transa = (*desc)->transb = (*desc)->transc = CUBLAS_OP_N;
    (*desc)->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    (*desc)->bias_type = -1;
    (*desc)->aux_type = -1;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    free(desc);
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                                     const void* buf, size_t sizeInBytes) {
    const char* fn = "cublasLtMatmulDescSetAttribute";
    if (!desc) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "descriptor is NULL");
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return fakeblas_set(&desc->compute_type, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return fakeblas_set(&desc->scale_type, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return fakeblas_set(&desc->pointer_mode, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_TRANSA: return fakeblas_set(&desc->transa, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_TRANSB: return fakeblas_set(&desc->transb, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_TRANSC: return fakeblas_set(&desc->transc, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return fakeblas_set(&desc->epilogue, sizeof(uint32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return fakeblas_set(&desc->bias, sizeof(void*), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return fakeblas_set(&desc->bias_batch_stride, sizeof(int64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return fakeblas_set(&desc->bias_type, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return fakeblas_set(&desc->aux, sizeof(void*), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return fakeblas_set(&desc->aux_ld, sizeof(int64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
        return fakeblas_set(&desc->aux_batch_stride, sizeof(int64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return fakeblas_set(&desc->aux_type, sizeof(int32_t), buf, sizeInBytes, fn, attr);
    default:
        if ((int)attr >= 0 && (int)attr <= CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "attribute %d (fill mode, scaling, amax, fp8) is not supported by the fake", attr);
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown attribute %d", attr);
    }
}

inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    if (!pref) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "preference pointer is NULL");
    *pref = (cublasLtMatmulPreference_t)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    if (!*pref) return fakeblas_fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatmulPreferenceCreate", "out of memory");
    for (int i = 0; i < 4; i++) (*pref)->min_alignment[i] = 256;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}
/* MAX_WORKSPACE_BYTES is recorded (the heuristic's algorithm asks for all of it); the other preferences only steer
 * the real library's algorithm choice and are accepted with a size check and ignored */
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                           size_t sizeInBytes) {
    const char* fn = "cublasLtMatmulPreferenceSetAttribute";
    if (!pref) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "preference is NULL");
    uint64_t ignored = 0;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        return fakeblas_set(&pref->max_workspace_bytes, sizeof(uint64_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        return fakeblas_set(&pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], sizeof(uint32_t), buf,
                            sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
        return fakeblas_set(&ignored, sizeof(uint32_t), buf, sizeInBytes, fn, attr);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK:
        return fakeblas_set(&ignored, sizeof(uint64_t), buf, sizeInBytes, fn, attr);
    }
    return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown attribute %d", attr);
}

/* Turns a descriptor and four layouts into a checked problem. Pointers and alpha/beta are filled
 * in by cublasLtMatmul; cublasLtMatmulAlgoGetHeuristic checks the shapes alone. */
static inline cublasStatus_t fakeblas_lt_setup(fakeblas_gemm* g, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                               cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                                               cublasLtMatrixLayout_t Ddesc, const char* fn) {
    if (!desc || !Adesc || !Bdesc || !Cdesc || !Ddesc)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "a descriptor or layout is NULL");
    cublasLtMatrixLayout_t layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
    const char* names = "ABCD";
    for (int i = 0; i < 4; i++) {
        if (layouts[i]->order != CUBLASLT_ORDER_COL)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "layout of %c has order %d: only CUBLASLT_ORDER_COL is supported",
                                 names[i], layouts[i]->order);
        if (layouts[i]->rows > 0x7fffffff || layouts[i]->cols > 0x7fffffff)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "layout of %c is %llu x %llu: dimensions must fit in int32", names[i],
                                 (unsigned long long)layouts[i]->rows, (unsigned long long)layouts[i]->cols);
        if (layouts[i]->batch_count != Ddesc->batch_count)
            return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "batch count of %c (%d) differs from D's (%d)", names[i],
                                 layouts[i]->batch_count, Ddesc->batch_count);
    }
    if (desc->scale_type != CUDA_R_32F)
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "scale type %s: only CUDA_R_32F is supported", fakeblas_type_name(desc->scale_type));
    if (desc->pointer_mode != CUBLASLT_POINTER_MODE_HOST && desc->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "pointer mode %d: only HOST and DEVICE scalars are supported", desc->pointer_mode);
    if (desc->transc != CUBLAS_OP_N)
        return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "TRANSC must be CUBLAS_OP_N");
    for (int i = 0; i < 4; i++)
        if (layouts[i]->type == CUDA_R_16BF && layouts[i]->ld * 2 % 16 != 0)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bf16 %c has leading dimension %lld (%lld bytes, no multiple of 16): no algorithm",
                                 names[i], (long long)layouts[i]->ld, (long long)layouts[i]->ld * 2);
    memset(g, 0, sizeof(*g));
    g->transa = (cublasOperation_t)desc->transa;
    g->transb = (cublasOperation_t)desc->transb;
    g->m = (int)Ddesc->rows;
    g->n = (int)Ddesc->cols;
    g->k = (int)(desc->transa == CUBLAS_OP_N ? Adesc->cols : Adesc->rows);
    g->batch = Ddesc->batch_count;
    g->Atype = Adesc->type; g->lda = Adesc->ld; g->strideA = Adesc->batch_stride;
    g->Btype = Bdesc->type; g->ldb = Bdesc->ld; g->strideB = Bdesc->batch_stride;
    g->Ctype = Cdesc->type; g->ldc = Cdesc->ld; g->strideC = Cdesc->batch_stride;
    g->Dtype = Ddesc->type; g->ldd = Ddesc->ld; g->strideD = Ddesc->batch_stride;
    g->rounding = fakeblas_rounding(desc->compute_type, 0);
    g->epilogue = desc->epilogue;
    cublasStatus_t status = fakeblas_check(g, desc->compute_type, fn);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    /* op(A) is m x k, op(B) is k x n, C is m x n */
    uint64_t a_rows = g->transa == CUBLAS_OP_N ? (uint64_t)g->m : (uint64_t)g->k;
    uint64_t b_rows = g->transb == CUBLAS_OP_N ? (uint64_t)g->k : (uint64_t)g->n;
    uint64_t b_cols = g->transb == CUBLAS_OP_N ? (uint64_t)g->n : (uint64_t)g->k;
    if (Adesc->rows != a_rows || Bdesc->rows != b_rows || Bdesc->cols != b_cols || Cdesc->rows != Ddesc->rows ||
        Cdesc->cols != Ddesc->cols)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                             "shapes do not match: op%s(A) from %llux%llu, op%s(B) from %llux%llu, C %llux%llu, D %llux%llu",
                             g->transa == CUBLAS_OP_N ? "N" : "T", (unsigned long long)Adesc->rows, (unsigned long long)Adesc->cols,
                             g->transb == CUBLAS_OP_N ? "N" : "T", (unsigned long long)Bdesc->rows, (unsigned long long)Bdesc->cols,
                             (unsigned long long)Cdesc->rows, (unsigned long long)Cdesc->cols,
                             (unsigned long long)Ddesc->rows, (unsigned long long)Ddesc->cols);
    /* epilogue inputs and outputs */
    const uint32_t epi = desc->epilogue;
    int uses_bias = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
                    epi == CUBLASLT_EPILOGUE_DGELU_BGRAD || epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB;
    int bias_grad = epi == CUBLASLT_EPILOGUE_DGELU_BGRAD || epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB;
    int uses_aux = epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DGELU ||
                   epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    if (!uses_bias && !uses_aux && epi != CUBLASLT_EPILOGUE_DEFAULT && epi != CUBLASLT_EPILOGUE_GELU) {
        if (epi & (CUBLASLT_EPILOGUE_RELU | 8))
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "RELU epilogue %u is not implemented by the fake", epi);
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown epilogue %u", epi);
    }
    if (uses_bias) {
        if (!desc->bias) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "epilogue %u needs CUBLASLT_MATMUL_DESC_BIAS_POINTER", epi);
        g->bias = (void*)desc->bias;
        if ((uintptr_t)g->bias % 16 != 0)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bias pointer %p is not 16-byte aligned", g->bias);
        g->bias_type = desc->bias_type == -1 ? g->Dtype : (cudaDataType)desc->bias_type;
        g->bias_stride = desc->bias_batch_stride;
        if (g->bias_type != g->Dtype && g->bias_type != CUDA_R_32F)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bias type %s with a %s output: bias must be the output's type or CUDA_R_32F",
                                 fakeblas_type_name(g->bias_type), fakeblas_type_name(g->Dtype));
        if (bias_grad && g->batch > 1)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bias-gradient epilogue %u with batch count %d: batched bias gradients are not supported",
                                 epi, g->batch);
    }
    if (uses_aux) {
        if (!desc->aux) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "epilogue %u needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", epi);
        g->aux = desc->aux;
        if ((uintptr_t)g->aux % 16 != 0)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "aux pointer %p is not 16-byte aligned", g->aux);
        g->aux_type = desc->aux_type == -1 ? g->Dtype : (cudaDataType)desc->aux_type;
        g->aux_ld = desc->aux_ld;
        g->aux_stride = desc->aux_batch_stride;
        if (g->aux_type != g->Dtype)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "aux type %s differs from the output type %s",
                                 fakeblas_type_name(g->aux_type), fakeblas_type_name(g->Dtype));
        if (g->aux_ld < g->m || g->aux_ld % 8 != 0)
            return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "EPILOGUE_AUX_LD=%lld must be a multiple of 8 and at least m=%d",
                                 (long long)g->aux_ld, g->m);
        if (g->aux_stride < 0 || g->aux_stride % 8 != 0)
            return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "EPILOGUE_AUX_BATCH_STRIDE=%lld must be a non-negative multiple of 8",
                                 (long long)g->aux_stride);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* Returns one algorithm (the fake has one) if the problem is valid and supported; it assumes the
 * preference's alignments (cuBLASLt's default of 256 bytes without a preference). */
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                     cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                     cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                     cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                                     cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                     int* returnAlgoCount) {
    const char* fn = "cublasLtMatmulAlgoGetHeuristic";
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle is NULL");
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount)
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "requestedAlgoCount=%d, results or count pointer NULL", requestedAlgoCount);
    *returnAlgoCount = 0;
    fakeblas_gemm g;
    cublasStatus_t status = fakeblas_lt_setup(&g, desc, Adesc, Bdesc, Cdesc, Ddesc, fn);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    const char* no_gelu = getenv("CUDASIM_CUBLASLT_NO_GELU");
    int gelu = g.epilogue == CUBLASLT_EPILOGUE_GELU || g.epilogue == CUBLASLT_EPILOGUE_GELU_AUX || g.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS ||
               g.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || g.epilogue == CUBLASLT_EPILOGUE_DGELU ||
               g.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    if (gelu && no_gelu && strcmp(no_gelu, "1") == 0) { /* as a library with no such kernel; the note lets a test see it */
        fprintf(stderr, "cudasim: cuBLASLt heuristic: no algorithm for GELU epilogue %u (CUDASIM_CUBLASLT_NO_GELU)\n", (unsigned)g.epilogue);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const cudaDataType types[4] = {g.Atype, g.Btype, g.Ctype, g.Dtype};
    for (int i = 0; i < 4; i++) {
        uint32_t align = preference ? preference->min_alignment[i] : 256;
        if (types[i] == CUDA_R_16BF && align % 16 != 0)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                                 "bf16 %c only %u-byte aligned (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES): no algorithm", "ABCD"[i],
                                 align, "ABCD"[i]);
    }
    memset(&heuristicResultsArray[0], 0, sizeof(heuristicResultsArray[0]));
    for (int i = 0; i < 4; i++) heuristicResultsArray[0].algo.data[i] = preference ? preference->min_alignment[i] : 256;
    heuristicResultsArray[0].algo.data[4] = FAKEBLAS_ALGO_TAG;
    /* the workspace the algorithm needs: the preference's whole MAX_WORKSPACE_BYTES (0 without one), the most
     * a real heuristic may ask for; cublasLtMatmul refuses a smaller workspaceSizeInBytes */
    heuristicResultsArray[0].algo.data[5] = preference ? preference->max_workspace_bytes : 0;
    heuristicResultsArray[0].workspaceSize = (size_t)heuristicResultsArray[0].algo.data[5];
    heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
    heuristicResultsArray[0].wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* D = epilogue(alpha op(A) op(B) + beta C) per the descriptor; see the top comment. algo may be NULL. */
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                                     const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                                     cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                     cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                     const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                                     cudaStream_t stream) {
    const char* fn = "cublasLtMatmul";
    if (!handle) return fakeblas_fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle is NULL");
    fakeblas_gemm g;
    cublasStatus_t status = fakeblas_lt_setup(&g, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, fn);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    if (!alpha || !beta) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "alpha or beta is NULL");
    status = fakeblas_scalars(fn, computeDesc->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE, alpha, beta);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    g.alpha = *(const float*)alpha;
    g.beta = *(const float*)beta;
    g.A = A; g.B = B; g.C = C; g.D = D;
    if (C == D && C != NULL && (Cdesc->ld != Ddesc->ld || Cdesc->type != Ddesc->type || Cdesc->batch_stride != Ddesc->batch_stride))
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "C aliases D (in place) but their layouts differ");
    const void* matrices[4] = {A, B, C, D};
    const cudaDataType types[4] = {g.Atype, g.Btype, g.Ctype, g.Dtype};
    for (int i = 0; i < 4; i++)
        if (matrices[i] && types[i] == CUDA_R_16BF && (uintptr_t)matrices[i] % 16 != 0)
            return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "bf16 %c at %p is not 16-byte aligned: no algorithm", "ABCD"[i],
                                 matrices[i]);
    if (algo && algo->data[4] == FAKEBLAS_ALGO_TAG) {
        for (int i = 0; i < 4; i++)
            if (matrices[i] && algo->data[i] > 1 && (uintptr_t)matrices[i] % algo->data[i] != 0)
                return fakeblas_fail(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                                     "%c at %p is not %llu-byte aligned, as its algorithm assumes (the heuristic's "
                                     "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES, 256 unless set)",
                                     "ABCD"[i], matrices[i], (unsigned long long)algo->data[i], "ABCD"[i]);
    }
    if (g.m > 0 && g.n > 0 && g.batch > 0) {
        if (!D) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "D is NULL");
        if (g.k > 0 && (!A || !B)) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "A or B is NULL");
        if (g.beta != 0.0f && !C) return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn, "C is NULL with beta != 0");
    }
    /* the workspace: at least what the heuristic's algorithm asked for (data[5]), and device memory */
    if (algo && algo->data[4] == FAKEBLAS_ALGO_TAG && workspaceSizeInBytes < algo->data[5])
        return fakeblas_fail(CUBLAS_STATUS_INVALID_VALUE, fn,
                             "workspaceSizeInBytes=%zu is less than the %llu bytes its algorithm needs (the heuristic's "
                             "workspaceSize)", workspaceSizeInBytes, (unsigned long long)algo->data[5]);
    if (workspaceSizeInBytes > 0) {
        status = fakeblas_device(fn, "workspace", workspace, workspaceSizeInBytes);
        if (status != CUBLAS_STATUS_SUCCESS) return status;
    }
    status = fakeblas_check_memory(&g, fn);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    return fakeblas_submit(&g, fn, stream);
}

#endif /* CUDASIM_FAKE_CUBLASLT_H */
