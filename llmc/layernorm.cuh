/*
 * llmc/layernorm.cuh — layernorm over the last dimension (eps 1e-5), fused with the residual add before it.
 *
 * forward:  x = a + b (b may be NULL: x = a), residual = x (stored unless NULL),
 *           mean = Σx/C, rstd = 1/sqrt(Σ(x-mean)²/C + eps), out = (x - mean)·rstd·weight + bias.
 *           The statistics are taken of x as stored (rounded to floatX), so the backward, which reads
 *           the stored residual, differentiates exactly the function that ran.
 * backward: with n = (x - mean)·rstd and g = dout·weight:
 *           dinp += (g - mean_c(g) - n·mean_c(g·n))·rstd, dweight += Σ_rows dout·n, dbias += Σ_rows dout, and
 *           optionally dres_bias += Σ_rows dinp (the new dinp: the bias gradient of the matmul below).
 *           The parameter sums are deterministic column sums (llmc/column_sums.cuh), kept by the backward
 *           kernel itself while it holds the rows, when their shared memory fits (then one pass over dout, x
 *           and dinp in all), else taken by the separate column-sum kernels after it.
 * Both kernels: a warp per row (the backward's warps take LN_BWD_ROWS rows in turn); lane l owns the packs l,
 * l + 32, l + 64, ... of the row (W channels each, one vector load). W, a template argument, is PACKX (16 bytes: a warp reads 512 contiguous bytes) when
 * C % PACKX == 0 and the arrays are 16-byte aligned (the trainer's C % 8 == 0), else 1 (any C); the host
 * functions choose (pack_width). The first CACHED of a lane's packs are read once and kept in registers for
 * the later passes; CACHED (a template argument, 1, 2, 4 or LN_MAX_CACHED_PACKS = 8) is the smallest that
 * holds the row, so rows up to 32·8·W channels (2048 in bf16, 1024 in fp32, 256 at W = 1) are read once;
 * packs beyond are re-read from memory in each pass (any larger C). Each lane sums its channels in channel
 * order, then warp_sum. A block holds LN_WARPS warps; warps past the last row have no rows to do.
 */
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "llmc/cuda_utils.cuh"
#include "llmc/column_sums.cuh"

#define LN_WARPS 4
#define LN_MAX_CACHED_PACKS 8
#define LN_BWD_ROWS 8 /* rows a warp of the backward works in turn (a block's 32 rows: one chunk of its column sums) */
#define LN_BWD_BLOCKS 4 /* blocks an SM (16 warps) the backward's fused column sums leave shared memory for */
/* __launch_bounds__'s minimum blocks an SM of the backward: LN_BWD_BLOCKS (128 registers a thread), 3 at CACHED = 8
 * (168 registers: at 128 ptxas spills on sm_90) */
#define LN_BWD_MIN_BLOCKS(CACHED) ((CACHED) < LN_MAX_CACHED_PACKS ? LN_BWD_BLOCKS : 3)

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

/* The backward of rows [LN_BWD_ROWS·(LN_WARPS·blockIdx.x + warp), + LN_BWD_ROWS), a warp's rows in turn. With sums > 0 a
 * warp also keeps running column sums of its rows in shared memory — Σ dout·n and Σ dout (the weight's and bias's
 * gradients), and with sums = 3 Σ dinp as stored (the bias gradient of the matmul whose output the residual stream
 * adds just below this layernorm) — and at the end the block adds its warps' sums in order (warp 0 + 1 + 2 + 3) into
 * partials[blockIdx.x, s, :]: the column sums' stage 1, fused (column_sums_finish is stage 2). A warp's sums sit at
 * acc[warp][s][k][e][lane] for element e of its lane's k-th pack: every lane its own words, consecutive lanes
 * consecutive banks, so no barrier until the end and no bank conflicts. */
template <int W, int CACHED>
__global__ void __launch_bounds__(32 * LN_WARPS, LN_BWD_MIN_BLOCKS(CACHED))
    layernorm_backward_kernel(floatX* dinp, float* partials, const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                              const float* rstd, int rows, int C, int sums) {
    DYNAMIC_SMEM(float, acc);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, packs = (C + 32 * W - 1) / (32 * W); /* a lane's packs, at most */
    int warp_words = sums * packs * W * 32;
    float* my = acc + (size_t)warp * warp_words + lane;
    for (int i = 0; i < warp_words; i += 32) my[i] = 0.0f;
    int first = (blockIdx.x * LN_WARPS + warp) * LN_BWD_ROWS, last = min(first + LN_BWD_ROWS, rows);
    for (int row = first; row < last; row++) {
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
            float* slot = my + (size_t)(c / (32 * W)) * W * 32; /* this pack's words of sum 0 */
            for (int k = 0; k < W; k++) {
                float d = (float)p.dout.v[k], n = ((float)p.x.v[k] - m) * s, g = d * w[k];
                dx[k] += (g - g_mean - n * gn_mean) * s;
                if (sums) {
                    slot[k * 32] += d * n;
                    slot[packs * W * 32 + k * 32] += d;
                    if (sums == 3) slot[2 * packs * W * 32 + k * 32] += (float)(floatX)dx[k];
                }
            }
            store_floats(W, dinp + base + c, dx);
        });
    }
    if (!sums) return;
    __syncthreads();
    for (int i = threadIdx.x; i < sums * C; i += blockDim.x) {
        int a = i / C, c = i % C, pack = c / W;
        const float* src = acc + (((size_t)a * packs + pack / 32) * W + c % W) * 32 + pack % 32;
        float v = 0.0f;
        for (int w = 0; w < LN_WARPS; w++) v += src[(size_t)w * warp_words];
        partials[((size_t)blockIdx.x * sums + a) * C + c] = v;
    }
}

/* the register cache a lane needs for a row of C channels in packs of W: its pack count rounded up to a power of
 * two (fewer registers for narrow rows), at most LN_MAX_CACHED_PACKS */
static inline int ln_cached_packs(int C, int W) {
    int per_lane = ceil_div(C / W, 32), cached = 1;
    while (cached < per_lane && cached < LN_MAX_CACHED_PACKS) cached *= 2;
    return cached;
}

typedef void (*LnForwardKernel)(floatX*, floatX*, float*, float*, const floatX*, const floatX*, const floatX*, const floatX*, int, int);
typedef void (*LnBackwardKernel)(floatX*, float*, const floatX*, const floatX*, const floatX*, const float*, const float*, int, int, int);
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

/* the backward's shared memory with `sums` column sums fused (rows of C channels in packs of w) */
static inline size_t layernorm_backward_smem(int C, int w, int sums) {
    return (size_t)sums * LN_WARPS * ceil_div(C, 32 * w) * w * 32 * sizeof(float);
}

/* whether the backward keeps its column sums (fused = 1): when their shared memory leaves room for LN_BWD_BLOCKS blocks an
 * SM (16 warps; 56 KiB a block on an H100/H200: with 3 sums C <= 1024 in bf16, 1152 in fp32, as C rounds up to 32 packs), else
 * the separate column-sum kernels run after it */
static inline int layernorm_backward_fusable(int C, int w, int sums) {
    int device, per_sm;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    return layernorm_backward_smem(C, w, sums) <= (size_t)(per_sm / LN_BWD_BLOCKS - 1024);
}

/* the scratch floats layernorm_backward needs, either way */
static inline size_t layernorm_scratch_floats(long rows, long C) {
    size_t fused = (size_t)ceil_div(rows, LN_WARPS * LN_BWD_ROWS) * COLSUM_MAX_ARRAYS * C, separate = colsum_scratch_floats(rows, C);
    return fused > separate ? fused : separate;
}

/* dinp += ..., dweight += ..., dbias += ... (see the top comment), and when dres_bias != NULL dres_bias += Σ_rows dinp
 * (the sum of dinp after the add, as stored: the bias gradient of the matmul whose output the residual stream adds
 * here). fused: the column sums in the backward kernel (1) or in the column-sum kernels after it (0);
 * layernorm_backward chooses. scratch: layernorm_scratch_floats(rows, C) floats. */
static inline void layernorm_backward_fused(floatX* dinp, floatX* dweight, floatX* dbias, floatX* dres_bias, float* scratch,
                                            const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                                            const float* rstd, int rows, int C, int fused, cudaStream_t stream) {
    int w = pack_width(C, dinp, dout, inp, weight), sums = fused ? (dres_bias ? 3 : 2) : 0;
    int blocks = ceil_div(rows, LN_WARPS * LN_BWD_ROWS);
    LnBackwardKernel kernel = ln_kernels_for(C, w).backward;
    size_t smem = layernorm_backward_smem(C, w, sums);
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    launch_kernel(kernel, dim3(blocks), dim3(32 * LN_WARPS), smem, stream, dinp, scratch, dout, inp, weight, mean, rstd, rows, C, sums);
    if (fused) {
        ColumnSumOutputs outs = {{dweight, dbias, dres_bias}, sums};
        column_sums_finish(outs, scratch, blocks, C, stream);
        return;
    }
    column_sums(dweight, dbias, scratch, dout, inp, mean, rstd, rows, C, stream);
    if (dres_bias) column_sums(dres_bias, NULL, scratch, dinp, NULL, NULL, NULL, rows, C, stream);
}

static inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, floatX* dres_bias, float* scratch, const floatX* dout,
                                      const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int rows, int C,
                                      cudaStream_t stream) {
    int w = pack_width(C, dinp, dout, inp, weight), fused = layernorm_backward_fusable(C, w, dres_bias ? 3 : 2);
    layernorm_backward_fused(dinp, dweight, dbias, dres_bias, scratch, dout, inp, weight, mean, rstd, rows, C, fused, stream);
}

#endif /* LLMC_LAYERNORM_CUH */
