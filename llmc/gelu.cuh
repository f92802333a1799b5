/*
 * llmc/gelu.cuh — GELU, tanh approximation, elementwise; forward and backward.
 *   gelu(x) = x/2·(1 + tanh u),  u = sqrt(2/π)·(x + 0.044715·x³)
 * Written with E = exp(2u) as x·(E/(E+1)) (σ(2u) = E/(E+1) first: x·E overflows for x >= 10) and
 * gelu'(x) = σ(2u) + 2x·σ(2u)/(E+1)·du/dx, the same cancellation-free form as llmc/cpu_ops.h. The
 * matmuls fuse GELU into cuBLASLt epilogues where they can (llmc/matmul.cuh); these kernels serve the
 * other cases and recomputation (-r 1).
 * One thread per work item of a VectorSplit (llmc/cuda_utils.cuh): a 16-byte pack of PACKX elements of
 * every array (one vector load per input, one store), or, at an unaligned head or the tail, one element;
 * n and the arrays' alignment may be anything.
 */
#ifndef LLMC_GELU_CUH
#define LLMC_GELU_CUH

#include "llmc/cuda_utils.cuh"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_BLOCK 256

__device__ inline float gelu_value(float x) {
    float e = expf(fminf(2.0f * GELU_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x), 88.0f));
    return x * (e / (e + 1.0f)); /* σ first: x·E overflows from x ≈ 10 */
}

__device__ inline float gelu_derivative(float x) {
    float e = expf(fminf(2.0f * GELU_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x), 88.0f));
    float inv = 1.0f / (e + 1.0f), sigma = e * inv;
    return sigma + 2.0f * x * sigma * inv * GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
}

/* out = gelu(inp) */
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, VectorSplit split) {
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, i;
    if (t >= split.items) return;
    if (split_item(split, t, &i)) {
        float x[PACKX], y[PACKX];
        load_floats(PACKX, x, inp + i);
        for (int k = 0; k < PACKX; k++) y[k] = gelu_value(x[k]);
        store_floats(PACKX, out + i, y);
    } else {
        out[i] = (floatX)gelu_value((float)inp[i]);
    }
}

/* dinp = dout·gelu'(inp), OVERWRITTEN (dinp may alias dout) */
__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, VectorSplit split) {
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, i;
    if (t >= split.items) return;
    if (split_item(split, t, &i)) {
        float x[PACKX], d[PACKX];
        load_floats(PACKX, x, inp + i);
        load_floats(PACKX, d, dout + i);
        for (int k = 0; k < PACKX; k++) d[k] *= gelu_derivative(x[k]);
        store_floats(PACKX, dinp + i, d);
    } else {
        dinp[i] = (floatX)((float)dout[i] * gelu_derivative((float)inp[i]));
    }
}

static inline void gelu_forward(floatX* out, const floatX* inp, size_t n, cudaStream_t stream) {
    const void* arrays[] = {out, inp};
    const int sizes[] = {sizeof(floatX), sizeof(floatX)};
    VectorSplit split = vector_split(n, PACKX, 2, arrays, sizes);
    launch_kernel(gelu_forward_kernel, dim3(ceil_div((long)split.items, GELU_BLOCK)), dim3(GELU_BLOCK), 0, stream, out, inp, split);
}

static inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n, cudaStream_t stream) {
    const void* arrays[] = {dinp, inp, dout};
    const int sizes[] = {sizeof(floatX), sizeof(floatX), sizeof(floatX)};
    VectorSplit split = vector_split(n, PACKX, 3, arrays, sizes);
    launch_kernel(gelu_backward_kernel, dim3(ceil_div((long)split.items, GELU_BLOCK)), dim3(GELU_BLOCK), 0, stream, dinp, inp, dout,
                  split);
}

#endif /* LLMC_GELU_CUH */
