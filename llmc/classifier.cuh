/*
 * llmc/classifier.cuh — the fused classifier: softmax, cross-entropy loss and its gradient in one pass
 * per row over the logits, without materialising the probabilities. For row i (BT rows of Vp columns,
 * the first V real):
 *   losses[i] = logsumexp(logits[i,:V]) - logits[i,target_i]
 *   with dloss != 0 (training), in place: logits[i,j] = dloss·(exp(logits[i,j] - lse) - [j == target_i])
 *   for j < V, 0 for V <= j < Vp.
 * One block per row: thread i reads the 16-byte packs i, i + blockDim, ... of the row (PACKX columns per
 * load, a warp's loads 512 contiguous bytes) and keeps an online (max, Σ2^(x·log2e - max)) over their columns
 * below V, in base 2 (one ex2.approx a column, fast_exp2f), pack by pack (the running sum rescaled once a pack,
 * to the pack's max when that is larger); the pairs are merged in a fixed order (warp butterfly, then warp 0
 * over the warps): deterministic. The first pass also keeps the row's first `cached` columns in dynamic shared
 * memory (each thread its own packs, so no barrier guards them), and the gradient pass reads them from there:
 * the row is read from memory once when it fits (classifier_cached_columns: as much as lets two blocks share
 * an SM; the whole of GPT-2's 50304 bf16 columns on an H100/H200), else its tail a second time. The gradient
 * pass writes the same packs. Needs Vp % PACKX == 0 (the trainer pads V to a multiple of 128) and 16-byte
 * aligned logits, checked by fused_classifier.
 * Targets are checked on the host before the launch (train_gpt.cu), not here.
 */
#ifndef LLMC_CLASSIFIER_CUH
#define LLMC_CLASSIFIER_CUH

#include "llmc/cuda_utils.cuh"

#define CLASSIFIER_BLOCK 512
#define CLASSIFIER_MIN_BLOCKS 2 /* blocks an SM (__launch_bounds__); classifier_cached_columns gives each its share of shared memory */
#define CLASSIFIER_BATCH 4 /* packs a thread loads at once in the first pass */

/* merges (max, sum of 2^(x - max)) pairs (base 2); an empty pair is (-inf, 0) */
__device__ inline void softmax_merge(float* maxv, float* sum, float other_max, float other_sum) {
    float m = fmaxf(*maxv, other_max);
    if (m == -INFINITY) return;
    *sum = *sum * exp2f(*maxv - m) + other_sum * exp2f(other_max - m);
    *maxv = m;
}

__device__ inline void warp_softmax_merge(float* maxv, float* sum) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        float om = __shfl_xor_sync(FULL_MASK, *maxv, offset), os = __shfl_xor_sync(FULL_MASK, *sum, offset);
        softmax_merge(maxv, sum, om, os);
    }
}

#define LOG2E 1.4426950408889634f

__global__ void __launch_bounds__(CLASSIFIER_BLOCK, CLASSIFIER_MIN_BLOCKS)
    fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp, int cached) {
    __shared__ float part_max[32], part_sum[32];
    __shared__ float row_lse;
    DYNAMIC_SMEM(floatX, row_cache);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    floatX* x = logits + (size_t)blockIdx.x * Vp;
    float maxv = -INFINITY, sum = 0.0f; /* base 2: the max of x·log2e, Σ 2^(x·log2e - maxv) */
    int stride = blockDim.x * PACKX;
    for (int j00 = threadIdx.x * PACKX; j00 < V; j00 += CLASSIFIER_BATCH * stride) {
        PackX batch[CLASSIFIER_BATCH]; /* the batch's loads are issued together: more bytes in flight a warp */
        UNROLL
        for (int u = 0; u < CLASSIFIER_BATCH; u++)
            if (j00 + u * stride < V) batch[u] = load_pack(PACKX, x + j00 + u * stride);
        UNROLL
        for (int u = 0; u < CLASSIFIER_BATCH; u++) {
            int j0 = j00 + u * stride;
            if (j0 >= V) break;
            if (j0 < cached) store_pack(row_cache + j0, batch[u]);
            float xs[PACKX], pack_max = -INFINITY;
            for (int k = 0; k < PACKX; k++) {
                xs[k] = (float)batch[u].v[k] * LOG2E;
                if (j0 + k < V) pack_max = fmaxf(pack_max, xs[k]);
            }
            if (pack_max > maxv) { /* one rescale a pack, no branch per column */
                sum *= fast_exp2f(maxv - pack_max);
                maxv = pack_max;
            }
            for (int k = 0; k < PACKX; k++)
                if (j0 + k < V) sum += fast_exp2f(xs[k] - maxv);
        }
    }
    warp_softmax_merge(&maxv, &sum);
    if (lane == 0) {
        part_max[warp] = maxv;
        part_sum[warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
        maxv = lane < num_warps ? part_max[lane] : -INFINITY;
        sum = lane < num_warps ? part_sum[lane] : 0.0f;
        warp_softmax_merge(&maxv, &sum);
        if (lane == 0) row_lse = maxv + log2f(sum);
    }
    __syncthreads();
    int target = targets[blockIdx.x];
    float lse2 = row_lse;
    /* the target's logit scaled as in the sums: when it is the row's max, the loss is log2(sum)/log2e >= 0 exactly */
    if (threadIdx.x == 0) losses[blockIdx.x] = (lse2 - (float)x[target] * LOG2E) / LOG2E;
    __syncthreads(); /* x[target] is read before the gradient overwrites it */
    if (dloss == 0.0f) return;
    for (int j0 = threadIdx.x * PACKX; j0 < Vp; j0 += stride) {
        float xs[PACKX] = {};
        if (j0 < V) load_floats(PACKX, xs, j0 < cached ? row_cache + j0 : x + j0);
        for (int k = 0; k < PACKX; k++) {
            int j = j0 + k;
            xs[k] = j < V ? dloss * (fast_exp2f(xs[k] * LOG2E - lse2) - (j == target ? 1.0f : 0.0f)) : 0.0f;
        }
        store_floats(PACKX, x + j0, xs);
    }
}

/* the columns of a row fused_classifier keeps in shared memory: all Vp when they fit in an SM's shared memory over
 * CLASSIFIER_MIN_BLOCKS (two blocks an SM) less 2 KiB (the 1 KiB a block reserves, and its static shared memory: 384
 * bytes) and in a block's opt-in limit less the same, else as many packs as do */
static inline int classifier_cached_columns(int Vp) {
    int device, optin, per_sm;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaCheck(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    int budget = per_sm / CLASSIFIER_MIN_BLOCKS - 2048;
    if (budget > optin - 2048) budget = optin - 2048;
    int columns = budget > 0 ? budget / (int)sizeof(floatX) / PACKX * PACKX : 0;
    return columns < Vp ? columns : Vp;
}

/* losses (BT floats); with dloss != 0 the logits are overwritten by their gradient (see the top comment). cached:
 * the columns of a row kept in shared memory (a multiple of PACKX, 0..Vp); fused_classifier chooses. */
static inline void fused_classifier_cached(floatX* logits, float* losses, const int* targets, float dloss, int BT, int V, int Vp,
                                           int cached, cudaStream_t stream) {
    require_multiple(Vp, PACKX);
    require_multiple(cached, PACKX);
    require_pack_aligned(logits);
    size_t smem = (size_t)cached * sizeof(floatX);
    cudaCheck(cudaFuncSetAttribute(fused_classifier_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    launch_kernel(fused_classifier_kernel, dim3(BT), dim3(CLASSIFIER_BLOCK), smem, stream, logits, losses, targets, dloss, V, Vp, cached);
}

static inline void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int BT, int V, int Vp,
                                    cudaStream_t stream) {
    fused_classifier_cached(logits, losses, targets, dloss, BT, V, Vp, classifier_cached_columns(Vp), stream);
}

#endif /* LLMC_CLASSIFIER_CUH */
