/*
 * llmc/column_sums.cuh — deterministic sums over the rows of a (rows, C) matrix, for the bias and
 * layernorm-parameter gradients (no atomics: the same bits on every run and every GPU).
 *
 *   plain:      out0[c] += Σ_r dout[r,c]
 *   layernorm:  out0[c] += Σ_r dout[r,c]·(x[r,c] - mean[r])·rstd[r],  out1[c] += Σ_r dout[r,c]
 * Two stages. Stage 1: the rows are cut into chunks of COLSUM_CHUNK; block (j, i) has one thread per
 * pack of W columns of columns [128·W·i, 128·W·(i+1)) and sums chunk j's rows in order
 * (a warp reads 32 consecutive packs of a row: 512 contiguous bytes) into the partial sums
 * scratch[j, a, c] of each array a (out0, out1). Stage 2 (column_sums_finish, also the end of llmc/layernorm.cuh's
 * backward, whose stage 1 is fused into it): one block of COLSUM_FINISH threads per pack of columns adds the
 * chunks' partial sums (each thread a strided share of the chunks, then a fixed tree), so that a large batch's
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
#define COLSUM_FINISH 128  /* threads of a stage-2 block (a power of 2) */
#define COLSUM_MAX_ARRAYS 3 /* sums a stage 2 finishes at once */

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
    float* out = scratch + (size_t)blockIdx.x * (x ? 2 : 1) * C + c;
    store_floats(W, out, s0);
    if (x) store_floats(W, out + C, s1);
}

/* the outputs of a stage 2: out[a] += Σ_chunks scratch[chunk, a, :] for a < arrays */
typedef struct {
    floatX* out[COLSUM_MAX_ARRAYS];
    int arrays;
} ColumnSumOutputs;

/* Stage 2: block b adds up pack b (W columns) over the chunks: thread t takes chunks t, t + COLSUM_FINISH,
 * ... in order, then the threads' sums meet in a fixed tree in shared memory (stride COLSUM_FINISH / 2, / 4, ...),
 * and thread 0 adds the result to the outputs. A fixed order: the same bits on every run. */
template <int W>
__global__ void column_sums_finish_kernel(ColumnSumOutputs outs, const float* scratch, int chunks, int C) {
    __shared__ float sums[COLSUM_MAX_ARRAYS][W][COLSUM_FINISH]; /* thread t's sums in column t: consecutive banks */
    int c = blockIdx.x * W, t = threadIdx.x, arrays = outs.arrays;
    float s[COLSUM_MAX_ARRAYS][W] = {}, part[W];
    for (int j = t; j < chunks; j += COLSUM_FINISH) {
        UNROLL /* s stays in registers: its indices known at compile time */
        for (int a = 0; a < COLSUM_MAX_ARRAYS; a++) {
            if (a >= arrays) break;
            load_floats(W, part, scratch + ((size_t)j * arrays + a) * C + c);
            for (int k = 0; k < W; k++) s[a][k] += part[k];
        }
    }
    UNROLL
    for (int a = 0; a < COLSUM_MAX_ARRAYS; a++)
        for (int k = 0; k < W; k++) sums[a][k][t] = s[a][k];
    __syncthreads();
    for (int stride = COLSUM_FINISH / 2; stride > 0; stride /= 2) {
        if (t < stride)
            for (int a = 0; a < arrays; a++)
                for (int k = 0; k < W; k++) sums[a][k][t] += sums[a][k][t + stride];
        __syncthreads();
    }
    if (t > 0) return;
    UNROLL
    for (int a = 0; a < COLSUM_MAX_ARRAYS; a++) {
        if (a >= arrays) break;
        load_floats(W, part, outs.out[a] + c);
        for (int k = 0; k < W; k++) part[k] += sums[a][k][0];
        store_floats(W, outs.out[a] + c, part);
    }
}

/* stage 2 over scratch[chunks, outs.arrays, C] */
static inline void column_sums_finish(ColumnSumOutputs outs, const float* scratch, int chunks, int C, cudaStream_t stream) {
    int w = pack_width(C, scratch, outs.out[0], outs.arrays > 1 ? outs.out[1] : NULL, outs.arrays > 2 ? outs.out[2] : NULL);
    launch_kernel(w == PACKX ? column_sums_finish_kernel<PACKX> : column_sums_finish_kernel<1>, dim3(C / w), dim3(COLSUM_FINISH), 0,
                  stream, outs, scratch, chunks, C);
}

/* the plain sum (x == NULL; out1 unused) or the layernorm pair; see the top comment */
static inline void column_sums(floatX* out0, floatX* out1, float* scratch, const floatX* dout, const floatX* x, const float* mean,
                               const float* rstd, int rows, int C, cudaStream_t stream) {
    int w = pack_width(C, out0, out1, scratch, dout, x), wide = w == PACKX;
    int chunks = ceil_div(rows, COLSUM_CHUNK), blocks = ceil_div(C / w, COLSUM_BLOCK);
    launch_kernel(wide ? column_sums_partial_kernel<PACKX> : column_sums_partial_kernel<1>, dim3(chunks, blocks), dim3(COLSUM_BLOCK), 0,
                  stream, scratch, dout, x, mean, rstd, rows, C);
    ColumnSumOutputs outs = {{out0, x ? out1 : NULL, NULL}, x ? 2 : 1};
    column_sums_finish(outs, scratch, chunks, C, stream);
}

#endif /* LLMC_COLUMN_SUMS_CUH */
