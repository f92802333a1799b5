/*
 * llmc/gelu.cuh — GELU, tanh approximation, elementwise; forward and backward.
 *   gelu(x) = x/2·(1 + tanh u),  u = sqrt(2/π)·(x + 0.044715·x³)
 * Written with E = exp(2u) as x·E/(E+1) and gelu'(x) = σ(2u) + 2x·σ(2u)/(E+1)·du/dx, the same
 * cancellation-free form as llmc/cpu_ops.h. The matmuls fuse GELU into cuBLASLt epilogues where they
 * can (llmc/matmul.cuh); these kernels serve the other cases and recomputation (-r 1).
 * One thread per element; n may be anything (the last block is partial).
 */
#ifndef LLMC_GELU_CUH
#define LLMC_GELU_CUH

#include "llmc/cuda_utils.cuh"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_BLOCK 256

__device__ inline float gelu_value(float x) {
    float e = expf(fminf(2.0f * GELU_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x), 88.0f));
    return x * e / (e + 1.0f);
}

__device__ inline float gelu_derivative(float x) {
    float e = expf(fminf(2.0f * GELU_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x), 88.0f));
    float inv = 1.0f / (e + 1.0f), sigma = e * inv;
    return sigma + 2.0f * x * sigma * inv * GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (floatX)gelu_value((float)inp[i]);
}

/* dinp = dout·gelu'(inp), OVERWRITTEN (dinp may alias dout) */
__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dinp[i] = (floatX)((float)dout[i] * gelu_derivative((float)inp[i]));
}

static inline void gelu_forward(floatX* out, const floatX* inp, size_t n, cudaStream_t stream) {
    launch_kernel(gelu_forward_kernel, dim3(ceil_div((long)n, GELU_BLOCK)), dim3(GELU_BLOCK), 0, stream, out, inp, n);
}

static inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n, cudaStream_t stream) {
    launch_kernel(gelu_backward_kernel, dim3(ceil_div((long)n, GELU_BLOCK)), dim3(GELU_BLOCK), 0, stream, dinp, inp, dout, n);
}

#endif /* LLMC_GELU_CUH */
