/*
 * llmc/classifier.cuh — the fused classifier: softmax, cross-entropy loss and its gradient in one pass
 * per row over the logits, without materialising the probabilities. For row i (BT rows of Vp columns,
 * the first V real):
 *   losses[i] = logsumexp(logits[i,:V]) - logits[i,target_i]
 *   with dloss != 0 (training), in place: logits[i,j] = dloss·(exp(logits[i,j] - lse) - [j == target_i])
 *   for j < V, 0 for V <= j < Vp.
 * One block per row: thread i reads the 16-byte packs i, i + blockDim, ... of the row (PACKX columns per
 * load, a warp's loads 512 contiguous bytes) and keeps an online (max, Σexp) over their columns below V,
 * pack by pack (the running sum rescaled once a pack, to the pack's max when that is larger); the pairs are merged in a fixed order (warp butterfly, then warp 0 over the warps):
 * deterministic. The gradient pass writes the same packs. Needs Vp % PACKX == 0 (the trainer pads V to
 * a multiple of 128) and 16-byte aligned logits, checked by fused_classifier.
 * Targets are checked on the host before the launch (train_gpt.cu), not here.
 */
#ifndef LLMC_CLASSIFIER_CUH
#define LLMC_CLASSIFIER_CUH

#include "llmc/cuda_utils.cuh"

#define CLASSIFIER_BLOCK 512

/* merges (max, sum of exp(x - max)) pairs; an empty pair is (-inf, 0) */
__device__ inline void softmax_merge(float* maxv, float* sum, float other_max, float other_sum) {
    float m = fmaxf(*maxv, other_max);
    if (m == -INFINITY) return;
    *sum = *sum * expf(*maxv - m) + other_sum * expf(other_max - m);
    *maxv = m;
}

__device__ inline void warp_softmax_merge(float* maxv, float* sum) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        float om = __shfl_xor_sync(FULL_MASK, *maxv, offset), os = __shfl_xor_sync(FULL_MASK, *sum, offset);
        softmax_merge(maxv, sum, om, os);
    }
}

__global__ void fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp) {
    __shared__ float part_max[32], part_sum[32];
    __shared__ float row_lse;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    floatX* x = logits + (size_t)blockIdx.x * Vp;
    float maxv = -INFINITY, sum = 0.0f;
    for (int j0 = threadIdx.x * PACKX; j0 < V; j0 += blockDim.x * PACKX) {
        float xs[PACKX];
        load_floats(PACKX, xs, x + j0);
        float pack_max = -INFINITY;
        for (int k = 0; k < PACKX; k++)
            if (j0 + k < V) pack_max = fmaxf(pack_max, xs[k]);
        if (pack_max > maxv) { /* one rescale a pack, no branch per column */
            sum *= expf(maxv - pack_max);
            maxv = pack_max;
        }
        for (int k = 0; k < PACKX; k++)
            if (j0 + k < V) sum += expf(xs[k] - maxv);
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
        if (lane == 0) row_lse = maxv + logf(sum);
    }
    __syncthreads();
    int target = targets[blockIdx.x];
    float lse = row_lse;
    if (threadIdx.x == 0) losses[blockIdx.x] = lse - (float)x[target];
    __syncthreads(); /* x[target] is read before the gradient overwrites it */
    if (dloss == 0.0f) return;
    for (int j0 = threadIdx.x * PACKX; j0 < Vp; j0 += blockDim.x * PACKX) {
        float xs[PACKX];
        load_floats(PACKX, xs, x + j0);
        for (int k = 0; k < PACKX; k++) {
            int j = j0 + k;
            xs[k] = j < V ? dloss * (expf(xs[k] - lse) - (j == target ? 1.0f : 0.0f)) : 0.0f;
        }
        store_floats(PACKX, x + j0, xs);
    }
}

/* losses (BT floats); with dloss != 0 the logits are overwritten by their gradient (see the top comment) */
static inline void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int BT, int V, int Vp,
                                    cudaStream_t stream) {
    require_multiple(Vp, PACKX);
    require_pack_aligned(logits);
    launch_kernel(fused_classifier_kernel, dim3(BT), dim3(CLASSIFIER_BLOCK), 0, stream, logits, losses, targets, dloss, V, Vp);
}

#endif /* LLMC_CLASSIFIER_CUH */
