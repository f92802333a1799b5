/*
 * llmc/kv_cache.cuh — the device KV cache of incremental decoding (sample_gpt.cu): every layer's keys and values of
 * the positions fed so far, and the attention of one new position over them, so a token costs O(T) attention work.
 *
 * Layout: keys, values (L, capacity, C) floatX, position s of layer l at (l·capacity + s)·C, head h at columns
 * h·hs..h·hs+hs-1 (the k and v thirds of the qkv matmul's output row). scores (NH, capacity) fp32 scratch.
 * Math of kv_attention_forward for the new position t (its key and value already appended), hs = C/NH:
 *   p[h,s] = softmax_{s<=t}(q_h·k_{s,h} / sqrt(hs)),  atty[h·hs + i] = Σ_{s<=t} p[h,s]·v_{s,h}[i]
 * the same as llmc/flash_attention.cuh's row t (and llmc/cpu_ops.h's attention_forward). No global state.
 */
#ifndef LLMC_KV_CACHE_CUH
#define LLMC_KV_CACHE_CUH

#include "llmc/cuda_utils.cuh"

typedef struct {
    int layers, channels, heads;
    int capacity; /* positions held: the model's max_seq_len */
    int length;   /* positions filled; the next token goes to position `length` */
    floatX* keys;   /* (L, capacity, C) */
    floatX* values; /* (L, capacity, C) */
    float* scores;  /* (NH, capacity) the new position's attention probabilities, unnormalised */
} KVCache;

static inline void kv_cache_create(KVCache* kv, int layers, int capacity, int channels, int heads) {
    memset(kv, 0, sizeof(*kv));
    kv->layers = layers;
    kv->channels = channels;
    kv->heads = heads;
    kv->capacity = capacity;
    size_t n = (size_t)layers * capacity * channels;
    cudaCheck(cudaMalloc(&kv->keys, n * sizeof(floatX)));
    cudaCheck(cudaMalloc(&kv->values, n * sizeof(floatX)));
    cudaCheck(cudaMalloc(&kv->scores, (size_t)heads * capacity * sizeof(float)));
}

static inline void kv_cache_free(KVCache* kv) {
    cudaCheck(cudaFree(kv->keys));
    cudaCheck(cudaFree(kv->values));
    cudaCheck(cudaFree(kv->scores));
}

/* Copies the k and v thirds of one position's qkv row (3C) into layer l's slot at position kv->length. */
static inline void kv_cache_append(KVCache* kv, int l, const floatX* qkv, cudaStream_t stream) {
    if (kv->length >= kv->capacity) fatalf("KV cache full: %d positions", kv->capacity);
    size_t C = kv->channels, at = ((size_t)l * kv->capacity + kv->length) * C;
    cudaCheck(cudaMemcpyAsync(kv->keys + at, qkv + C, C * sizeof(floatX), cudaMemcpyDeviceToDevice, stream));
    cudaCheck(cudaMemcpyAsync(kv->values + at, qkv + 2 * C, C * sizeof(floatX), cudaMemcpyDeviceToDevice, stream));
}

/* One warp per head h (block h, 32 threads): lanes stride the positions s = lane, lane+32, ... <= t for the scores
 * (each lane a whole dot product), warp max and sum for the softmax, then lanes stride the head dims i, each
 * summing p[h,s]·v over s in order. keys, values: layer l's (capacity, C). */
__global__ void kv_attention_kernel(floatX* atty, float* scores, const floatX* q, const floatX* keys, const floatX* values, int t,
                                    int C, int NH, int capacity) {
    int h = blockIdx.x, lane = threadIdx.x, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    const floatX* qh = q + h * hs;
    float* p = scores + (size_t)h * capacity;
    float local_max = -INFINITY;
    for (int s = lane; s <= t; s += 32) {
        const floatX* k = keys + (size_t)s * C + h * hs;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += (float)qh[i] * (float)k[i];
        p[s] = dot * scale;
        local_max = fmaxf(local_max, p[s]);
    }
    float maxv = warp_max(local_max), local_sum = 0.0f;
    for (int s = lane; s <= t; s += 32) {
        p[s] = expf(p[s] - maxv);
        local_sum += p[s];
    }
    float inv = 1.0f / warp_sum(local_sum);
    __syncwarp(); /* every lane's p writes are visible to the whole warp below */
    for (int i = lane; i < hs; i += 32) {
        float o = 0.0f;
        for (int s = 0; s <= t; s++) o += p[s] * (float)values[(size_t)s * C + h * hs + i];
        atty[h * hs + i] = (floatX)(o * inv);
    }
}

/* atty (C) = attention of the position kv->length of layer l, whose query is q (C) and whose key and value
 * kv_cache_append has stored */
static inline void kv_attention_forward(floatX* atty, const KVCache* kv, int l, const floatX* q, cudaStream_t stream) {
    size_t layer = (size_t)l * kv->capacity * kv->channels;
    launch_kernel(kv_attention_kernel, dim3(kv->heads), dim3(32), 0, stream, atty, kv->scores, q, (const floatX*)kv->keys + layer,
                  (const floatX*)kv->values + layer, kv->length, kv->channels, kv->heads, kv->capacity);
}

#endif /* LLMC_KV_CACHE_CUH */
