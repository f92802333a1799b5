/*
 * llmc/column_sums.cuh — deterministic sums over the rows of a (rows, C) matrix, for the bias and
 * layernorm-parameter gradients (no atomics: the same bits on every run and every GPU).
 *
 *   plain:      out0[c] += Σ_r dout[r,c]
 *   layernorm:  out0[c] += Σ_r dout[r,c]·(x[r,c] - mean[r])·rstd[r],  out1[c] += Σ_r dout[r,c]
 * Two stages. Stage 1: the rows are cut into chunks of COLSUM_CHUNK; block (i, j) has one thread per
 * column of columns [128i, 128i+128) and sums chunk j's rows in order (a warp reads 32 consecutive
 * columns of a row: coalesced) into scratch[j, c] (and scratch[j, C + c]). Stage 2: one thread per
 * column adds the chunks' partial sums in chunk order to the outputs.
 * scratch needs colsum_scratch_floats(rows, C) floats.
 */
#ifndef LLMC_COLUMN_SUMS_CUH
#define LLMC_COLUMN_SUMS_CUH

#include "llmc/cuda_utils.cuh"

#define COLSUM_CHUNK 64
#define COLSUM_BLOCK 128

static inline size_t colsum_scratch_floats(long rows, long C) { return (size_t)ceil_div(rows, COLSUM_CHUNK) * 2 * C; }

/* x, mean, rstd are NULL for the plain sum */
__global__ void column_sums_partial_kernel(float* scratch, const floatX* dout, const floatX* x, const float* mean,
                                           const float* rstd, int rows, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int r0 = blockIdx.y * COLSUM_CHUNK, r1 = min(r0 + COLSUM_CHUNK, rows);
    float s0 = 0.0f, s1 = 0.0f;
    for (int r = r0; r < r1; r++) {
        float d = (float)dout[(size_t)r * C + c];
        if (x) {
            s0 += d * ((float)x[(size_t)r * C + c] - mean[r]) * rstd[r];
            s1 += d;
        } else {
            s0 += d;
        }
    }
    scratch[(size_t)blockIdx.y * 2 * C + c] = s0;
    scratch[(size_t)blockIdx.y * 2 * C + C + c] = s1;
}

__global__ void column_sums_finish_kernel(floatX* out0, floatX* out1, const float* scratch, int chunks, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < chunks; j++) {
        s0 += scratch[(size_t)j * 2 * C + c];
        s1 += scratch[(size_t)j * 2 * C + C + c];
    }
    out0[c] = (floatX)((float)out0[c] + s0);
    if (out1) out1[c] = (floatX)((float)out1[c] + s1);
}

/* the plain sum (x == NULL; out1 unused) or the layernorm pair; see the top comment */
static inline void column_sums(floatX* out0, floatX* out1, float* scratch, const floatX* dout, const floatX* x, const float* mean,
                               const float* rstd, int rows, int C, cudaStream_t stream) {
    int chunks = ceil_div(rows, COLSUM_CHUNK);
    launch_kernel(column_sums_partial_kernel, dim3(ceil_div(C, COLSUM_BLOCK), chunks), dim3(COLSUM_BLOCK), 0, stream, scratch,
                  dout, x, mean, rstd, rows, C);
    launch_kernel(column_sums_finish_kernel, dim3(ceil_div(C, COLSUM_BLOCK)), dim3(COLSUM_BLOCK), 0, stream, out0,
                  x ? out1 : (floatX*)NULL, (const float*)scratch, chunks, C);
}

#endif /* LLMC_COLUMN_SUMS_CUH */
