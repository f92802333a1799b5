/*
 * llmc/cuda_utils.cuh — what every kernel header of the GPU trainer shares: the activation type
 * floatX, conversions, warp and block sums, and bf16 stochastic rounding.
 *
 * Precision (chosen at build time):
 *   default            floatX = __nv_bfloat16: parameters, gradients and activations in bf16; AdamW keeps
 *                      fp32 moments and (with --master-weights 1) fp32 master weights
 *   -DPRECISION_FP32   floatX = float everywhere (PRECISION=FP32 in the Makefile), for exact comparison
 * Every kernel reads floatX, computes in fp32 and rounds once when it stores.
 * No global state.
 */
#ifndef LLMC_CUDA_UTILS_CUH
#define LLMC_CUDA_UTILS_CUH

#include "llmc/cuda_common.cuh"

#if defined(PRECISION_FP32)
typedef float floatX;
#define FLOATX_NAME "fp32"
#else
typedef __nv_bfloat16 floatX;
#define FLOATX_NAME "bf16"
#endif

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

/* the full-warp mask: every warp op of the project's kernels runs on whole warps */
#define FULL_MASK 0xffffffffu

/* Σ of x over the 32 lanes, the same sum (bits) in every lane: butterfly order, fixed */
__device__ inline float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(FULL_MASK, x, offset);
    return x;
}

__device__ inline float warp_max(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, offset));
    return x;
}

/* Σ of x over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread: warp sums,
 * then warp 0 sums the per-warp values in order. Deterministic. Contains __syncthreads: every thread of
 * the block must call it. */
__device__ inline float block_sum(float x) {
    __shared__ float warp_sums[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    x = warp_sum(x);
    if (lane == 0) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        float s = lane < num_warps ? warp_sums[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    float result = total;
    __syncthreads(); /* the shared slots may be reused by the next call */
    return result;
}

/* a 32-bit hash of (index, seed): murmur3's finaliser over the mixed pair. Stochastic rounding draws its
 * random bits from it, so the rounding of element i at step t is a pure function of (i, t, seed). */
__host__ __device__ inline uint32_t hash_u32(uint32_t index, uint32_t seed) {
    uint32_t h = index * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

/* stores x as floatX. bf16: stochastic rounding — adds 16 random bits below the kept mantissa and
 * truncates, so E[result] = x; infinities and NaN keep round-to-nearest. fp32: exact store. */
__device__ inline void store_stochastic(float* out, float x, uint32_t random) { *out = x; }
#if !defined(PRECISION_FP32)
__device__ inline void store_stochastic(__nv_bfloat16* out, float x, uint32_t random) {
    uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7f800000u) == 0x7f800000u) {
        *out = __float2bfloat16(x);
        return;
    }
    bits = (bits + (random & 0xffffu)) & 0xffff0000u;
    *out = __float2bfloat16_rz(__uint_as_float(bits));
}
#endif

/* host-side conversions for copies between fp32 host arrays and floatX device arrays */
static inline void floats_to_floatX(floatX* out, const float* in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (floatX)in[i];
}
static inline void floatX_to_floats(float* out, const floatX* in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (float)in[i];
}

#endif /* LLMC_CUDA_UTILS_CUH */
