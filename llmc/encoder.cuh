/*
 * llmc/encoder.cuh — token + position embedding.
 *   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]          one thread per output element
 *   backward: dwpe[t,c] += Σ_b dout[b,t,c]                       one thread per (t, c), b in order
 *             dwte[v,c] += Σ_{(b,t): inp[b,t]=v} dout[b,t,c]     one block per distinct token v, its threads
 *                                                                striding over c, positions in order
 * The backward is deterministic and has no atomics: the host (which holds the batch) groups the
 * positions by token (encoder_buckets), so each dwte row is owned by one block.
 */
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include <stdlib.h>
#include "llmc/cuda_utils.cuh"

#define ENCODER_BLOCK 256

__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C), bt = (int)(i / C), t = bt % T;
    out[i] = (floatX)((float)wte[(size_t)inp[bt] * C + c] + (float)wpe[(size_t)t * C + c]);
}

__global__ void encoder_backward_wpe_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * C) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += (float)dout[(size_t)b * T * C + i];
    dwpe[i] = (floatX)((float)dwpe[i] + s);
}

/* buckets: see encoder_buckets; block j owns token buckets[j] */
__global__ void encoder_backward_wte_kernel(floatX* dwte, const floatX* dout, const int* buckets, int BT, int C) {
    int token = buckets[blockIdx.x];
    const int* starts = buckets + BT;
    const int* positions = buckets + 2 * BT + 1;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = 0.0f;
        for (int j = starts[blockIdx.x]; j < starts[blockIdx.x + 1]; j++) s += (float)dout[(size_t)positions[j] * C + c];
        dwte[(size_t)token * C + c] = (floatX)((float)dwte[(size_t)token * C + c] + s);
    }
}

static int encoder_key_compare_(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}

/* Groups the BT positions by token into buckets (3·BT + 1 ints): [0, n) the n distinct tokens in
 * increasing order, [BT, BT+n] the start of each token's run in the positions array, [2BT+1, 3BT+1) the
 * positions, increasing within a run. keys: BT scratch words. Returns n. */
static inline int encoder_buckets(int* buckets, uint64_t* keys, const int* inputs, int BT) {
    for (int i = 0; i < BT; i++) keys[i] = (uint64_t)(uint32_t)inputs[i] << 32 | (uint32_t)i;
    qsort(keys, (size_t)BT, sizeof(uint64_t), encoder_key_compare_);
    int n = 0;
    for (int i = 0; i < BT; i++) {
        int token = (int)(keys[i] >> 32);
        if (i == 0 || token != buckets[n - 1]) {
            buckets[n] = token;
            buckets[BT + n] = i;
            n++;
        }
        buckets[2 * BT + 1 + i] = (int)(uint32_t)keys[i];
    }
    buckets[BT + n] = BT;
    return n;
}

static inline void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C,
                                   cudaStream_t stream) {
    launch_kernel(encoder_forward_kernel, dim3(ceil_div((long)B * T * C, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, out, inp,
                  wte, wpe, B, T, C);
}

/* buckets_dev: the device copy of encoder_buckets' output, num_buckets its return value */
static inline void encoder_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const int* buckets_dev, int num_buckets, int B,
                                    int T, int C, cudaStream_t stream) {
    launch_kernel(encoder_backward_wpe_kernel, dim3(ceil_div((long)T * C, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, dwpe,
                  dout, B, T, C);
    launch_kernel(encoder_backward_wte_kernel, dim3(num_buckets), dim3(ENCODER_BLOCK), 0, stream, dwte, dout, buckets_dev, B * T, C);
}

#endif /* LLMC_ENCODER_CUH */
