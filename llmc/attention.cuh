/*
 * llmc/attention.cuh — causal self-attention, a simple correct version (the flash-attention issue
 * replaces it). qkv [B,T,3C]: q at columns [0,C), k at [C,2C), v at [2C,3C); head h owns columns
 * h·hs .. h·hs+hs-1 of each (hs = C/NH), as in llmc/cpu_ops.h. With s = 1/sqrt(hs):
 *   p[t,t2] = softmax_{t2<=t}(s·q_t·k_t2),   out_t = Σ_{t2<=t} p[t,t2]·v_t2
 * The probabilities are never stored: the forward keeps each row's logsumexp (lse, [B,NH,T]), and the
 * backward recomputes p[t,t2] = exp(s·q_t·k_t2 - lse_t). With D_t = dout_t·out_t (= Σ_t2 p·(dout_t·v_t2)):
 *   dpre[t,t2] = p[t,t2]·(dout_t·v_t2 - D_t)
 *   dq_t = s·Σ_{t2<=t} dpre[t,t2]·k_t2,  dk_t2 = s·Σ_{t>=t2} dpre[t,t2]·q_t,  dv_t2 = Σ_{t>=t2} p[t,t2]·dout_t
 * Decomposition: one warp per (b, h, t) row; lane l holds dims l, l+32, ... of the head (hs <= 32·ATT_DIMS).
 *   forward:        a row's warp runs an online softmax over t2 = 0..t (one pass, rescaling its partial sums).
 *   backward_rows:  a row's warp computes D_t (kept in scratch) and dq_t, looping t2 = 0..t.
 *   backward_cols:  the warp of column t2 computes dk_t2 and dv_t2, looping t = t2..T-1.
 * Every dqkv element has one owner: no atomics, deterministic. dqkv is OVERWRITTEN.
 */
#ifndef LLMC_ATTENTION_CUH
#define LLMC_ATTENTION_CUH

#include "llmc/cuda_utils.cuh"

#define ATT_DIMS 8  /* head dims per lane: hs <= 256 */
#define ATT_WARPS 4 /* warps per block */

/* the (b, h, t) of this warp's row, and its qkv row base; false for warps past the last row */
__device__ inline bool attention_row(int B, int T, int NH, int* b, int* h, int* t) {
    int row = blockIdx.x * ATT_WARPS + threadIdx.x / 32;
    if (row >= B * NH * T) return false;
    *t = row % T;
    *h = (row / T) % NH;
    *b = row / (T * NH);
    return true;
}

/* loads dims lane, lane+32, ... of a head vector into x (zeros beyond hs) */
__device__ inline void attention_load(float* x, const floatX* src, int hs, int lane) {
    for (int j = 0; j < ATT_DIMS; j++) x[j] = lane + 32 * j < hs ? (float)src[lane + 32 * j] : 0.0f;
}

__device__ inline float attention_dot(const float* x, const floatX* y, int hs, int lane) {
    float s = 0.0f;
    for (int j = 0; j < ATT_DIMS; j++)
        if (lane + 32 * j < hs) s += x[j] * (float)y[lane + 32 * j];
    return warp_sum(s);
}

__global__ void attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH) {
    int b, h, t, lane = threadIdx.x % 32, hs = C / NH;
    if (!attention_row(B, T, NH, &b, &h, &t)) return;
    float scale = 1.0f / sqrtf((float)hs);
    const floatX* base = qkv + (size_t)b * T * 3 * C + h * hs;
    float q[ATT_DIMS], o[ATT_DIMS];
    attention_load(q, base + (size_t)t * 3 * C, hs, lane);
    for (int j = 0; j < ATT_DIMS; j++) o[j] = 0.0f;
    float maxv = -INFINITY, sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        float score = attention_dot(q, base + (size_t)t2 * 3 * C + C, hs, lane) * scale;
        float new_max = fmaxf(maxv, score);
        float correction = expf(maxv - new_max), p = expf(score - new_max);
        sum = sum * correction + p;
        const floatX* v = base + (size_t)t2 * 3 * C + 2 * C;
        for (int j = 0; j < ATT_DIMS; j++)
            if (lane + 32 * j < hs) o[j] = o[j] * correction + p * (float)v[lane + 32 * j];
        maxv = new_max;
    }
    floatX* orow = out + ((size_t)b * T + t) * C + h * hs;
    for (int j = 0; j < ATT_DIMS; j++)
        if (lane + 32 * j < hs) orow[lane + 32 * j] = (floatX)(o[j] / sum);
    if (lane == 0) lse[((size_t)b * NH + h) * T + t] = maxv + logf(sum);
}

/* dq rows; D_t into delta [B,NH,T] */
__global__ void attention_backward_rows_kernel(floatX* dqkv, float* delta, const floatX* dout, const floatX* out, const floatX* qkv,
                                               const float* lse, int B, int T, int C, int NH) {
    int b, h, t, lane = threadIdx.x % 32, hs = C / NH;
    if (!attention_row(B, T, NH, &b, &h, &t)) return;
    float scale = 1.0f / sqrtf((float)hs);
    const floatX* base = qkv + (size_t)b * T * 3 * C + h * hs;
    size_t orow = ((size_t)b * T + t) * C + h * hs, srow = ((size_t)b * NH + h) * T + t;
    float q[ATT_DIMS], d[ATT_DIMS], dq[ATT_DIMS];
    attention_load(q, base + (size_t)t * 3 * C, hs, lane);
    attention_load(d, dout + orow, hs, lane);
    float D = attention_dot(d, out + orow, hs, lane), row_lse = lse[srow];
    for (int j = 0; j < ATT_DIMS; j++) dq[j] = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        const floatX* k = base + (size_t)t2 * 3 * C + C;
        float p = expf(attention_dot(q, k, hs, lane) * scale - row_lse);
        float dpre = p * (attention_dot(d, k + C, hs, lane) - D);
        for (int j = 0; j < ATT_DIMS; j++)
            if (lane + 32 * j < hs) dq[j] += dpre * (float)k[lane + 32 * j];
    }
    floatX* dqrow = dqkv + (size_t)b * T * 3 * C + (size_t)t * 3 * C + h * hs;
    for (int j = 0; j < ATT_DIMS; j++)
        if (lane + 32 * j < hs) dqrow[lane + 32 * j] = (floatX)(dq[j] * scale);
    if (lane == 0) delta[srow] = D;
}

/* dk, dv of column t2 (this warp's "row" index is t2) */
__global__ void attention_backward_cols_kernel(floatX* dqkv, const float* delta, const floatX* dout, const floatX* qkv,
                                               const float* lse, int B, int T, int C, int NH) {
    int b, h, t2, lane = threadIdx.x % 32, hs = C / NH;
    if (!attention_row(B, T, NH, &b, &h, &t2)) return;
    float scale = 1.0f / sqrtf((float)hs);
    const floatX* base = qkv + (size_t)b * T * 3 * C + h * hs;
    float k[ATT_DIMS], v[ATT_DIMS], dk[ATT_DIMS], dv[ATT_DIMS];
    attention_load(k, base + (size_t)t2 * 3 * C + C, hs, lane);
    attention_load(v, base + (size_t)t2 * 3 * C + 2 * C, hs, lane);
    for (int j = 0; j < ATT_DIMS; j++) dk[j] = dv[j] = 0.0f;
    for (int t = t2; t < T; t++) {
        const floatX* q = base + (size_t)t * 3 * C;
        const floatX* d = dout + ((size_t)b * T + t) * C + h * hs;
        size_t srow = ((size_t)b * NH + h) * T + t;
        float p = expf(attention_dot(k, q, hs, lane) * scale - lse[srow]);
        float dpre = p * (attention_dot(v, d, hs, lane) - delta[srow]);
        for (int j = 0; j < ATT_DIMS; j++)
            if (lane + 32 * j < hs) {
                dk[j] += dpre * (float)q[lane + 32 * j];
                dv[j] += p * (float)d[lane + 32 * j];
            }
    }
    floatX* drow = dqkv + (size_t)b * T * 3 * C + (size_t)t2 * 3 * C + h * hs;
    for (int j = 0; j < ATT_DIMS; j++)
        if (lane + 32 * j < hs) {
            drow[C + lane + 32 * j] = (floatX)(dk[j] * scale);
            drow[2 * C + lane + 32 * j] = (floatX)dv[j];
        }
}

static inline int attention_supported(int C, int NH) { return NH > 0 && C % NH == 0 && C / NH <= 32 * ATT_DIMS; }

static inline void attention_forward(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    launch_kernel(attention_forward_kernel, dim3(ceil_div((long)B * NH * T, ATT_WARPS)), dim3(32 * ATT_WARPS), 0, stream, out, lse,
                  qkv, B, T, C, NH);
}

/* delta: B·NH·T floats of scratch */
static inline void attention_backward(floatX* dqkv, float* delta, const floatX* dout, const floatX* out, const floatX* qkv,
                                      const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
    dim3 grid(ceil_div((long)B * NH * T, ATT_WARPS)), block(32 * ATT_WARPS);
    launch_kernel(attention_backward_rows_kernel, grid, block, 0, stream, dqkv, delta, dout, out, qkv, lse, B, T, C, NH);
    launch_kernel(attention_backward_cols_kernel, grid, block, 0, stream, dqkv, (const float*)delta, dout, qkv, lse, B, T, C, NH);
}

#endif /* LLMC_ATTENTION_CUH */
