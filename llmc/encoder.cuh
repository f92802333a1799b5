/*
 * llmc/encoder.cuh — token + position embedding.
 *   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]          one thread per 16-byte pack of PACKX
 *                                                                output elements
 *   backward: dwpe[t,c] += Σ_b dout[b,t,c]                       one thread per pack of (t, c..c+PACKX),
 *                                                                b in order
 *             dwte[v,c] += Σ_{(b,t): inp[b,t]=v} dout[b,t,c]     one block per distinct token v, its threads
 *                                                                striding over packs of c, positions in order
 * Every access is a 16-byte pack (llmc/cuda_utils.cuh): C % PACKX == 0 and 16-byte aligned arrays,
 * checked by the host functions.
 * The backward is deterministic and has no atomics: the host (which holds the batch) groups the
 * positions by token (encoder_buckets), so each dwte row is owned by one block.
 */
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include <stdlib.h>
#include "llmc/cuda_utils.cuh"

#define ENCODER_BLOCK 256

__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * PACKX;
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C), bt = (int)(i / C), t = bt % T;
    float e[PACKX], p[PACKX];
    load_floats(PACKX, e, wte + (size_t)inp[bt] * C + c);
    load_floats(PACKX, p, wpe + (size_t)t * C + c);
    for (int k = 0; k < PACKX; k++) e[k] += p[k];
    store_floats(PACKX, out + i, e);
}

__global__ void encoder_backward_wpe_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * PACKX;
    if (i >= (size_t)T * C) return;
    float s[PACKX] = {}, d[PACKX];
    for (int b = 0; b < B; b++) {
        load_floats(PACKX, d, dout + (size_t)b * T * C + i);
        for (int k = 0; k < PACKX; k++) s[k] += d[k];
    }
    load_floats(PACKX, d, dwpe + i);
    for (int k = 0; k < PACKX; k++) d[k] += s[k];
    store_floats(PACKX, dwpe + i, d);
}

/* buckets: see encoder_buckets; block j owns token buckets[j] */
__global__ void encoder_backward_wte_kernel(floatX* dwte, const floatX* dout, const int* buckets, int BT, int C) {
    int token = buckets[blockIdx.x];
    const int* starts = buckets + BT;
    const int* positions = buckets + 2 * BT + 1;
    for (int c = threadIdx.x * PACKX; c < C; c += blockDim.x * PACKX) {
        float s[PACKX] = {}, d[PACKX];
        for (int j = starts[blockIdx.x]; j < starts[blockIdx.x + 1]; j++) {
            load_floats(PACKX, d, dout + (size_t)positions[j] * C + c);
            for (int k = 0; k < PACKX; k++) s[k] += d[k];
        }
        load_floats(PACKX, d, dwte + (size_t)token * C + c);
        for (int k = 0; k < PACKX; k++) d[k] += s[k];
        store_floats(PACKX, dwte + (size_t)token * C + c, d);
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
    require_multiple(C, PACKX);
    require_pack_aligned(out);
    require_pack_aligned(wte);
    require_pack_aligned(wpe);
    launch_kernel(encoder_forward_kernel, dim3(ceil_div((long)B * T * C / PACKX, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, out, inp,
                  wte, wpe, B, T, C);
}

/* buckets_dev: the device copy of encoder_buckets' output, num_buckets its return value */
static inline void encoder_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const int* buckets_dev, int num_buckets, int B,
                                    int T, int C, cudaStream_t stream) {
    require_multiple(C, PACKX);
    require_pack_aligned(dwte);
    require_pack_aligned(dwpe);
    require_pack_aligned(dout);
    launch_kernel(encoder_backward_wpe_kernel, dim3(ceil_div((long)T * C / PACKX, ENCODER_BLOCK)), dim3(ENCODER_BLOCK), 0, stream, dwpe,
                  dout, B, T, C);
    launch_kernel(encoder_backward_wte_kernel, dim3(num_buckets), dim3(ENCODER_BLOCK), 0, stream, dwte, dout, buckets_dev, B * T, C);
}

#endif /* LLMC_ENCODER_CUH */
