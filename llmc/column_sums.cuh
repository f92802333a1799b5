/*
 * llmc/column_sums.cuh — deterministic sums over the rows of a (rows, C) matrix, for the bias and
 * layernorm-parameter gradients (no atomics: the same bits on every run and every GPU).
 *
 *   plain:      out0[c] += Σ_r dout[r,c]
 *   layernorm:  out0[c] += Σ_r dout[r,c]·(x[r,c] - mean[r])·rstd[r],  out1[c] += Σ_r dout[r,c]
 * Two stages. Stage 1: the rows are cut into chunks of COLSUM_CHUNK; block (j, i) has one thread per
 * pack of W columns of columns [128·W·i, 128·W·(i+1)) and sums chunk j's rows in order
 * (a warp reads 32 consecutive packs of a row: 512 contiguous bytes) into scratch[j, c] (and
 * scratch[j, C + c]). Stage 2: one block of COLSUM_FINISH threads per pack of columns adds the chunks'
 * partial sums (each thread a strided share of the chunks, then a fixed tree), so that a large batch's
 * thousand chunks are summed by many threads, not one per pack. Every order is fixed. The chunks are the grid's
 * x dimension (up to 2^31 - 1 blocks; y stops at 65535, which 4.2M rows would pass).
 * W, a template argument, is PACKX (16-byte packs) when C % PACKX == 0 and the arrays are 16-byte aligned, else 1
 * (any C; column_sums chooses with pack_width).
 * scratch needs colsum_scratch_floats(rows, C) floats.
 */
#ifndef LLMC_COLUMN_SUMS_CUH
#define LLMC_COLUMN_SUMS_CUH

#include "llmc/cuda_utils.cuh"

#define COLSUM_CHUNK 64
#define COLSUM_BLOCK 128
#define COLSUM_FINISH 128 /* threads of a stage-2 block (a power of 2) */

static inline size_t colsum_scratch_floats(long rows, long C) { return (size_t)ceil_div(rows, COLSUM_CHUNK) * 2 * C; }

/* x, mean, rstd are NULL for the plain sum */
template <int W>
__global__ void column_sums_partial_kernel(float* scratch, const floatX* dout, const floatX* x, const float* mean,
                                           const float* rstd, int rows, int C) {
    int c = (blockIdx.y * blockDim.x + threadIdx.x) * W;
    if (c >= C) return;
    int r0 = blockIdx.x * COLSUM_CHUNK, r1 = min(r0 + COLSUM_CHUNK, rows);
    float s0[W] = {}, s1[W] = {}, d[W], xr[W];
    for (int r = r0; r < r1; r++) {
        load_floats(W, d, dout + (size_t)r * C + c);
        if (x) {
            load_floats(W, xr, x + (size_t)r * C + c);
            float m = mean[r], s = rstd[r];
            for (int k = 0; k < W; k++) {
                s0[k] += d[k] * (xr[k] - m) * s;
                s1[k] += d[k];
            }
        } else {
            for (int k = 0; k < W; k++) s0[k] += d[k];
        }
    }
    store_floats(W, scratch + (size_t)blockIdx.x * 2 * C + c, s0);
    store_floats(W, scratch + (size_t)blockIdx.x * 2 * C + C + c, s1);
}

/* Stage 2: block b adds up pack b (W columns) over the chunks: thread t takes chunks t, t + COLSUM_FINISH,
 * ... in order, then the threads' sums meet in a fixed tree in shared memory (stride COLSUM_FINISH / 2, / 4, ...),
 * and thread 0 adds the result to the outputs. A fixed order: the same bits on every run. */
template <int W>
__global__ void column_sums_finish_kernel(floatX* out0, floatX* out1, const float* scratch, int chunks, int C) {
    __shared__ float sums[2][W][COLSUM_FINISH]; /* thread t's sums in column t: consecutive threads, consecutive banks */
    int c = blockIdx.x * W, t = threadIdx.x;
    float s0[W] = {}, s1[W] = {}, part[W];
    for (int j = t; j < chunks; j += COLSUM_FINISH) {
        load_floats(W, part, scratch + (size_t)j * 2 * C + c);
        for (int k = 0; k < W; k++) s0[k] += part[k];
        if (out1) {
            load_floats(W, part, scratch + (size_t)j * 2 * C + C + c);
            for (int k = 0; k < W; k++) s1[k] += part[k];
        }
    }
    int arrays = out1 ? 2 : 1;
    for (int k = 0; k < W; k++) {
        sums[0][k][t] = s0[k];
        sums[1][k][t] = s1[k];
    }
    __syncthreads();
    for (int stride = COLSUM_FINISH / 2; stride > 0; stride /= 2) {
        if (t < stride)
            for (int a = 0; a < arrays; a++)
                for (int k = 0; k < W; k++) sums[a][k][t] += sums[a][k][t + stride];
        __syncthreads();
    }
    if (t > 0) return;
    load_floats(W, part, out0 + c);
    for (int k = 0; k < W; k++) part[k] += sums[0][k][0];
    store_floats(W, out0 + c, part);
    if (out1) {
        load_floats(W, part, out1 + c);
        for (int k = 0; k < W; k++) part[k] += sums[1][k][0];
        store_floats(W, out1 + c, part);
    }
}

/* the plain sum (x == NULL; out1 unused) or the layernorm pair; see the top comment */
static inline void column_sums(floatX* out0, floatX* out1, float* scratch, const floatX* dout, const floatX* x, const float* mean,
                               const float* rstd, int rows, int C, cudaStream_t stream) {
    int w = pack_width(C, out0, out1, scratch, dout, x), wide = w == PACKX;
    int chunks = ceil_div(rows, COLSUM_CHUNK), blocks = ceil_div(C / w, COLSUM_BLOCK);
    launch_kernel(wide ? column_sums_partial_kernel<PACKX> : column_sums_partial_kernel<1>, dim3(chunks, blocks), dim3(COLSUM_BLOCK), 0,
                  stream, scratch, dout, x, mean, rstd, rows, C);
    launch_kernel(wide ? column_sums_finish_kernel<PACKX> : column_sums_finish_kernel<1>, dim3(C / w), dim3(COLSUM_FINISH), 0, stream,
                  out0, x ? out1 : (floatX*)NULL, (const float*)scratch, chunks, C);
}

#endif /* LLMC_COLUMN_SUMS_CUH */
