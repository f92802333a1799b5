/*
 * llmc/classifier.cuh — the fused classifier: softmax, cross-entropy loss and its gradient in one pass
 * per row over the logits, without materialising the probabilities. For row i (BT rows of Vp columns,
 * the first V real):
 *   losses[i] = logsumexp(logits[i,:V]) - logits[i,target_i]
 *   with dloss != 0 (training), in place: logits[i,j] = dloss·(exp(logits[i,j] - lse) - [j == target_i])
 *   for j < V, 0 for V <= j < Vp.
 * One block per row: each thread keeps an online (max, Σexp) over its strided columns, the pairs are
 * merged in a fixed order (warp butterfly, then warp 0 over the warps): deterministic.
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
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float xj = (float)x[j];
        if (xj > maxv) {
            sum = sum * expf(maxv - xj) + 1.0f;
            maxv = xj;
        } else {
            sum += expf(xj - maxv);
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
        if (lane == 0) row_lse = maxv + logf(sum);
    }
    __syncthreads();
    int target = targets[blockIdx.x];
    float lse = row_lse;
    if (threadIdx.x == 0) losses[blockIdx.x] = lse - (float)x[target];
    __syncthreads(); /* x[target] is read before the gradient overwrites it */
    if (dloss == 0.0f) return;
    for (int j = threadIdx.x; j < Vp; j += blockDim.x)
        x[j] = (floatX)(j < V ? dloss * (expf((float)x[j] - lse) - (j == target ? 1.0f : 0.0f)) : 0.0f);
}

/* losses (BT floats); with dloss != 0 the logits are overwritten by their gradient (see the top comment) */
static inline void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int BT, int V, int Vp,
                                    cudaStream_t stream) {
    launch_kernel(fused_classifier_kernel, dim3(BT), dim3(CLASSIFIER_BLOCK), 0, stream, logits, losses, targets, dloss, V, Vp);
}

#endif /* LLMC_CLASSIFIER_CUH */
