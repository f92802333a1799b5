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
 * Both kernels: one warp per row; lane l owns the 16-byte packs l, l + 32, l + 64, ... of the row (PACKX
 * channels each, one vector load: a warp reads 512 contiguous bytes). The first CACHED of a lane's packs
 * are read once and kept in registers for the later passes; CACHED (a template argument, 1, 2, 4 or
 * LN_MAX_CACHED_PACKS = 8) is the smallest that holds the row, so rows up to 32·8·PACKX channels (2048 in
 * bf16, 1024 in fp32) are read once; packs beyond are re-read from memory in each pass (any larger C).
 * Each lane sums its channels in channel order, then warp_sum. A block holds LN_WARPS warps; warps past
 * the last row exit whole. Needs C % PACKX == 0 (the trainer's C % 8 == 0) and 16-byte aligned arrays:
 * checked by the host functions.
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
template <int CACHED, typename P, typename Load, typename F>
__device__ inline void ln_for_each_pack(const P* cache, int lane, int C, Load load, F f) {
    UNROLL
    for (int k = 0; k < CACHED; k++) {
        int c = (lane + 32 * k) * PACKX;
        if (c < C) f(cache[k], c);
    }
    for (int c = (lane + 32 * CACHED) * PACKX; c < C; c += 32 * PACKX) f(load(c), c);
}

/* fills cache with load(c) for the lane's first CACHED packs */
template <int CACHED, typename P, typename Load>
__device__ inline void ln_fill_cache(P* cache, int lane, int C, Load load) {
    UNROLL
    for (int k = 0; k < CACHED; k++) {
        int c = (lane + 32 * k) * PACKX;
        if (c < C) cache[k] = load(c);
    }
}

template <int CACHED>
__global__ void residual_layernorm_forward_kernel(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* a,
                                                  const floatX* b, const floatX* weight, const floatX* bias, int rows, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t base = (size_t)row * C;
    /* the pack of x at channel c, rounded to floatX as it is stored */
    auto load_x = [&](int c) {
        PackX x = load_pack(a + base + c);
        if (b) {
            PackX y = load_pack(b + base + c);
            for (int k = 0; k < PACKX; k++) x.v[k] = (floatX)((float)x.v[k] + (float)y.v[k]);
        }
        return x;
    };
    PackX cache[CACHED] = {}; /* zeroed for g++'s uninitialised-use analysis: every entry read was filled */
    ln_fill_cache<CACHED>(cache, lane, C, load_x);
    float sum = 0.0f;
    ln_for_each_pack<CACHED>(cache, lane, C, load_x, [&](const PackX& x, int c) {
        if (residual) store_pack(residual + base + c, x);
        for (int k = 0; k < PACKX; k++) sum += (float)x.v[k];
    });
    float m = warp_sum(sum) / C;
    float sq = 0.0f;
    ln_for_each_pack<CACHED>(cache, lane, C, load_x, [&](const PackX& x, int c) {
        for (int k = 0; k < PACKX; k++) {
            float d = (float)x.v[k] - m;
            sq += d * d;
        }
    });
    float s = 1.0f / sqrtf(warp_sum(sq) / C + 1e-5f);
    ln_for_each_pack<CACHED>(cache, lane, C, load_x, [&](const PackX& x, int c) {
        float w[PACKX], bi[PACKX], y[PACKX];
        load_floats(PACKX, w, weight + c);
        load_floats(PACKX, bi, bias + c);
        for (int k = 0; k < PACKX; k++) y[k] = ((float)x.v[k] - m) * s * w[k] + bi[k];
        store_floats(PACKX, out + base + c, y);
    });
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

/* one pack of the backward's two inputs */
typedef struct {
    PackX dout, x;
} LnGradPack;

template <int CACHED>
__global__ void layernorm_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                          const float* mean, const float* rstd, int rows, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    size_t base = (size_t)row * C;
    auto load_pair = [&](int c) {
        LnGradPack p;
        p.dout = load_pack(dout + base + c);
        p.x = load_pack(inp + base + c);
        return p;
    };
    LnGradPack cache[CACHED] = {};
    ln_fill_cache<CACHED>(cache, lane, C, load_pair);
    float m = mean[row], s = rstd[row], g_sum = 0.0f, gn_sum = 0.0f;
    ln_for_each_pack<CACHED>(cache, lane, C, load_pair, [&](const LnGradPack& p, int c) {
        float w[PACKX];
        load_floats(PACKX, w, weight + c);
        for (int k = 0; k < PACKX; k++) {
            float g = (float)p.dout.v[k] * w[k];
            g_sum += g;
            gn_sum += g * ((float)p.x.v[k] - m) * s;
        }
    });
    float g_mean = warp_sum(g_sum) / C, gn_mean = warp_sum(gn_sum) / C;
    ln_for_each_pack<CACHED>(cache, lane, C, load_pair, [&](const LnGradPack& p, int c) {
        float w[PACKX], dx[PACKX];
        load_floats(PACKX, w, weight + c);
        load_floats(PACKX, dx, dinp + base + c);
        for (int k = 0; k < PACKX; k++) {
            float g = (float)p.dout.v[k] * w[k];
            dx[k] += (g - g_mean - ((float)p.x.v[k] - m) * s * gn_mean) * s;
        }
        store_floats(PACKX, dinp + base + c, dx);
    });
}

/* the register cache a lane needs for a row of C channels: its pack count rounded up to a power of two
 * (fewer registers for narrow rows), at most LN_MAX_CACHED_PACKS */
static inline int ln_cached_packs(int C) {
    int per_lane = ceil_div(C / PACKX, 32), cached = 1;
    while (cached < per_lane && cached < LN_MAX_CACHED_PACKS) cached *= 2;
    return cached;
}

/* see the top comment; residual and b may be NULL (then the input is a and nothing is stored but out, mean, rstd) */
static inline void residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* a,
                                              const floatX* b, const floatX* weight, const floatX* bias, int rows, int C,
                                              cudaStream_t stream) {
    require_multiple(C, PACKX);
    require_pack_aligned(residual);
    require_pack_aligned(out);
    require_pack_aligned(a);
    require_pack_aligned(b);
    require_pack_aligned(weight);
    require_pack_aligned(bias);
    void (*kernel)(floatX*, floatX*, float*, float*, const floatX*, const floatX*, const floatX*, const floatX*, int, int);
    switch (ln_cached_packs(C)) {
    case 1: kernel = residual_layernorm_forward_kernel<1>; break;
    case 2: kernel = residual_layernorm_forward_kernel<2>; break;
    case 4: kernel = residual_layernorm_forward_kernel<4>; break;
    default: kernel = residual_layernorm_forward_kernel<LN_MAX_CACHED_PACKS>; break;
    }
    launch_kernel(kernel, dim3(ceil_div(rows, LN_WARPS)), dim3(32 * LN_WARPS), 0, stream, residual, out, mean, rstd, a, b, weight, bias,
                  rows, C);
}

/* dinp += ..., dweight += ..., dbias += ... (see the top comment); scratch: colsum_scratch_floats(rows, C) floats */
static inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                                      const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int rows, int C,
                                      cudaStream_t stream) {
    require_multiple(C, PACKX);
    require_pack_aligned(dinp);
    require_pack_aligned(dout);
    require_pack_aligned(inp);
    require_pack_aligned(weight);
    void (*kernel)(floatX*, const floatX*, const floatX*, const floatX*, const float*, const float*, int, int);
    switch (ln_cached_packs(C)) {
    case 1: kernel = layernorm_backward_kernel<1>; break;
    case 2: kernel = layernorm_backward_kernel<2>; break;
    case 4: kernel = layernorm_backward_kernel<4>; break;
    default: kernel = layernorm_backward_kernel<LN_MAX_CACHED_PACKS>; break;
    }
    launch_kernel(kernel, dim3(ceil_div(rows, LN_WARPS)), dim3(32 * LN_WARPS), 0, stream, dinp, dout, inp, weight, mean, rstd, rows, C);
    column_sums(dweight, dbias, scratch, dout, inp, mean, rstd, rows, C, stream);
}

#endif /* LLMC_LAYERNORM_CUH */
