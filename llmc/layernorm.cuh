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
 * Both kernels: one warp per row; lane l owns the packs l, l + 32, l + 64, ... of the row (W channels each,
 * one vector load). W, a template argument, is PACKX (16 bytes: a warp reads 512 contiguous bytes) when
 * C % PACKX == 0 and the arrays are 16-byte aligned (the trainer's C % 8 == 0), else 1 (any C); the host
 * functions choose (pack_width). The first CACHED of a lane's packs are read once and kept in registers for
 * the later passes; CACHED (a template argument, 1, 2, 4 or LN_MAX_CACHED_PACKS = 8) is the smallest that
 * holds the row, so rows up to 32·8·W channels (2048 in bf16, 1024 in fp32, 256 at W = 1) are read once;
 * packs beyond are re-read from memory in each pass (any larger C). Each lane sums its channels in channel
 * order, then warp_sum. A block holds LN_WARPS warps; warps past the last row exit whole.
 */
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "llmc/cuda_utils.cuh"
#include "llmc/column_sums.cuh"

#define LN_WARPS 4
#define LN_MAX_CACHED_PACKS 8

/* calls f(cache[k] or load(c), c) for each pack of the row the lane owns, c its first channel: the first
 * CACHED from the registers of cache (indices known at compile time after unrolling), the rest from
 * load(c) */
template <int W, int CACHED, typename P, typename Load, typename F>
__device__ inline void ln_for_each_pack(const P* cache, int lane, int C, Load load, F f) {
    UNROLL
    for (int k = 0; k < CACHED; k++) {
        int c = (lane + 32 * k) * W;
        if (c < C) f(cache[k], c);
    }
    for (int c = (lane + 32 * CACHED) * W; c < C; c += 32 * W) f(load(c), c);
}

/* fills cache with load(c) for the lane's first CACHED packs */
template <int W, int CACHED, typename P, typename Load>
__device__ inline void ln_fill_cache(P* cache, int lane, int C, Load load) {
    UNROLL
    for (int k = 0; k < CACHED; k++) {
        int c = (lane + 32 * k) * W;
        if (c < C) cache[k] = load(c);
    }
}

template <int W, int CACHED>
__global__ void residual_layernorm_forward_kernel(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* a,
                                                  const floatX* b, const floatX* weight, const floatX* bias, int rows, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t base = (size_t)row * C;
    /* the pack of x at channel c, rounded to floatX as it is stored */
    auto load_x = [&](int c) {
        Pack<floatX, W> x = load_pack(W, a + base + c);
        if (b) {
            Pack<floatX, W> y = load_pack(W, b + base + c);
            for (int k = 0; k < W; k++) x.v[k] = (floatX)((float)x.v[k] + (float)y.v[k]);
        }
        return x;
    };
    Pack<floatX, W> cache[CACHED] = {}; /* zeroed for g++'s uninitialised-use analysis: every entry read was filled */
    ln_fill_cache<W, CACHED>(cache, lane, C, load_x);
    float sum = 0.0f;
    ln_for_each_pack<W, CACHED>(cache, lane, C, load_x, [&](const Pack<floatX, W>& x, int c) {
        if (residual) store_pack(residual + base + c, x);
        for (int k = 0; k < W; k++) sum += (float)x.v[k];
    });
    float m = warp_sum(sum) / C;
    float sq = 0.0f;
    ln_for_each_pack<W, CACHED>(cache, lane, C, load_x, [&](const Pack<floatX, W>& x, int c) {
        for (int k = 0; k < W; k++) {
            float d = (float)x.v[k] - m;
            sq += d * d;
        }
    });
    float s = 1.0f / sqrtf(warp_sum(sq) / C + 1e-5f);
    ln_for_each_pack<W, CACHED>(cache, lane, C, load_x, [&](const Pack<floatX, W>& x, int c) {
        float w[W], bi[W], y[W];
        load_floats(W, w, weight + c);
        load_floats(W, bi, bias + c);
        for (int k = 0; k < W; k++) y[k] = ((float)x.v[k] - m) * s * w[k] + bi[k];
        store_floats(W, out + base + c, y);
    });
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

/* one pack of the backward's two inputs */
template <int W>
struct LnGradPack {
    Pack<floatX, W> dout, x;
};

template <int W, int CACHED>
__global__ void layernorm_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                          const float* mean, const float* rstd, int rows, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t base = (size_t)row * C;
    auto load_pair = [&](int c) {
        LnGradPack<W> p;
        p.dout = load_pack(W, dout + base + c);
        p.x = load_pack(W, inp + base + c);
        return p;
    };
    LnGradPack<W> cache[CACHED] = {};
    ln_fill_cache<W, CACHED>(cache, lane, C, load_pair);
    float m = mean[row], s = rstd[row], g_sum = 0.0f, gn_sum = 0.0f;
    ln_for_each_pack<W, CACHED>(cache, lane, C, load_pair, [&](const LnGradPack<W>& p, int c) {
        float w[W];
        load_floats(W, w, weight + c);
        for (int k = 0; k < W; k++) {
            float g = (float)p.dout.v[k] * w[k];
            g_sum += g;
            gn_sum += g * ((float)p.x.v[k] - m) * s;
        }
    });
    float g_mean = warp_sum(g_sum) / C, gn_mean = warp_sum(gn_sum) / C;
    ln_for_each_pack<W, CACHED>(cache, lane, C, load_pair, [&](const LnGradPack<W>& p, int c) {
        float w[W], dx[W];
        load_floats(W, w, weight + c);
        load_floats(W, dx, dinp + base + c);
        for (int k = 0; k < W; k++) {
            float g = (float)p.dout.v[k] * w[k];
            dx[k] += (g - g_mean - ((float)p.x.v[k] - m) * s * gn_mean) * s;
        }
        store_floats(W, dinp + base + c, dx);
    });
}

/* the register cache a lane needs for a row of C channels in packs of W: its pack count rounded up to a power of
 * two (fewer registers for narrow rows), at most LN_MAX_CACHED_PACKS */
static inline int ln_cached_packs(int C, int W) {
    int per_lane = ceil_div(C / W, 32), cached = 1;
    while (cached < per_lane && cached < LN_MAX_CACHED_PACKS) cached *= 2;
    return cached;
}

typedef void (*LnForwardKernel)(floatX*, floatX*, float*, float*, const floatX*, const floatX*, const floatX*, const floatX*, int, int);
typedef void (*LnBackwardKernel)(floatX*, const floatX*, const floatX*, const floatX*, const float*, const float*, int, int);
typedef struct {
    LnForwardKernel forward;
    LnBackwardKernel backward;
} LnKernels;

/* the forward and backward instances for packs of W and a cache of `cached` packs */
template <int W>
static inline LnKernels ln_kernels(int cached) {
    switch (cached) {
    case 1: return {residual_layernorm_forward_kernel<W, 1>, layernorm_backward_kernel<W, 1>};
    case 2: return {residual_layernorm_forward_kernel<W, 2>, layernorm_backward_kernel<W, 2>};
    case 4: return {residual_layernorm_forward_kernel<W, 4>, layernorm_backward_kernel<W, 4>};
    default: return {residual_layernorm_forward_kernel<W, LN_MAX_CACHED_PACKS>, layernorm_backward_kernel<W, LN_MAX_CACHED_PACKS>};
    }
}
/* the instances for rows of C channels in packs of w (pack_width) */
static inline LnKernels ln_kernels_for(int C, int w) {
    return w == PACKX ? ln_kernels<PACKX>(ln_cached_packs(C, w)) : ln_kernels<1>(ln_cached_packs(C, w));
}

/* see the top comment; residual and b may be NULL (then the input is a and nothing is stored but out, mean, rstd) */
static inline void residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* a,
                                              const floatX* b, const floatX* weight, const floatX* bias, int rows, int C,
                                              cudaStream_t stream) {
    LnForwardKernel kernel = ln_kernels_for(C, pack_width(C, residual, out, a, b, weight, bias)).forward;
    launch_kernel(kernel, dim3(ceil_div(rows, LN_WARPS)), dim3(32 * LN_WARPS), 0, stream, residual, out, mean, rstd, a, b, weight, bias,
                  rows, C);
}

/* dinp += ..., dweight += ..., dbias += ... (see the top comment); scratch: colsum_scratch_floats(rows, C) floats */
static inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                                      const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int rows, int C,
                                      cudaStream_t stream) {
    LnBackwardKernel kernel = ln_kernels_for(C, pack_width(C, dinp, dout, inp, weight)).backward;
    launch_kernel(kernel, dim3(ceil_div(rows, LN_WARPS)), dim3(32 * LN_WARPS), 0, stream, dinp, dout, inp, weight, mean, rstd, rows, C);
    column_sums(dweight, dbias, scratch, dout, inp, mean, rstd, rows, C, stream);
}

#endif /* LLMC_LAYERNORM_CUH */
