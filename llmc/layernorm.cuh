/*
 * llmc/layernorm.cuh — layernorm over the last dimension (eps 1e-5), fused with the residual add before it.
 *
 * forward:  x = a + b (b may be NULL: x = a), residual = x (stored unless NULL),
 *           mean = Σx/C, rstd = 1/sqrt(Σ(x-mean)²/C + eps), out = (x - mean)·rstd·weight + bias.
 *           The statistics are taken of x as stored (rounded to floatX), so the backward, which reads
 *           the stored residual, differentiates exactly the function that ran.
 * backward: with n = (x - mean)·rstd and g = dout·weight:
 *           dinp += (g - mean_c(g) - n·mean_c(g·n))·rstd, dweight += Σ_rows dout·n, dbias += Σ_rows dout
 *           (the parameter sums are the deterministic column sums of llmc/column_sums.cuh).
 * Both kernels: one warp per row, lanes striding over the C channels (any C); a block holds
 * LN_WARPS warps; warps past the last row exit whole.
 */
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "llmc/cuda_utils.cuh"
#include "llmc/column_sums.cuh"

#define LN_WARPS 4

/* x of the top comment at index i, rounded to floatX as it is stored */
__device__ inline float residual_value(const floatX* a, const floatX* b, size_t i) {
    return b ? (float)(floatX)((float)a[i] + (float)b[i]) : (float)a[i];
}

__global__ void residual_layernorm_forward_kernel(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* a,
                                                  const floatX* b, const floatX* weight, const floatX* bias, int rows, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t base = (size_t)row * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float x = residual_value(a, b, base + c);
        if (residual) residual[base + c] = (floatX)x;
        sum += x;
    }
    float m = warp_sum(sum) / C;
    float sq = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = residual_value(a, b, base + c) - m;
        sq += d * d;
    }
    float s = 1.0f / sqrtf(warp_sum(sq) / C + 1e-5f);
    for (int c = lane; c < C; c += 32)
        out[base + c] = (floatX)((residual_value(a, b, base + c) - m) * s * (float)weight[c] + (float)bias[c]);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

__global__ void layernorm_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                          const float* mean, const float* rstd, int rows, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const floatX* x = inp + (size_t)row * C;
    const floatX* d = dout + (size_t)row * C;
    floatX* dx = dinp + (size_t)row * C;
    float m = mean[row], s = rstd[row], g_sum = 0.0f, gn_sum = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = (float)d[c] * (float)weight[c];
        g_sum += g;
        gn_sum += g * ((float)x[c] - m) * s;
    }
    float g_mean = warp_sum(g_sum) / C, gn_mean = warp_sum(gn_sum) / C;
    for (int c = lane; c < C; c += 32) {
        float g = (float)d[c] * (float)weight[c];
        dx[c] = (floatX)((float)dx[c] + (g - g_mean - ((float)x[c] - m) * s * gn_mean) * s);
    }
}

/* see the top comment; residual and b may be NULL (then the input is a and nothing is stored but out, mean, rstd) */
static inline void residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* a,
                                              const floatX* b, const floatX* weight, const floatX* bias, int rows, int C,
                                              cudaStream_t stream) {
    launch_kernel(residual_layernorm_forward_kernel, dim3(ceil_div(rows, LN_WARPS)), dim3(32 * LN_WARPS), 0, stream, residual, out,
                  mean, rstd, a, b, weight, bias, rows, C);
}

/* dinp += ..., dweight += ..., dbias += ... (see the top comment); scratch: colsum_scratch_floats(rows, C) floats */
static inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                                      const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int rows, int C,
                                      cudaStream_t stream) {
    launch_kernel(layernorm_backward_kernel, dim3(ceil_div(rows, LN_WARPS)), dim3(32 * LN_WARPS), 0, stream, dinp, dout, inp,
                  weight, mean, rstd, rows, C);
    column_sums(dweight, dbias, scratch, dout, inp, mean, rstd, rows, C, stream);
}

#endif /* LLMC_LAYERNORM_CUH */
