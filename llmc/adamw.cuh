/*
 * llmc/adamw.cuh — fused AdamW, as torch.optim.AdamW and llmc/cpu_ops.h's adamw_update, on g = grad·grad_scale:
 *   p = p·(1 - lr·wd);  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;
 *   p -= (lr/(1-β1^t))·m / (sqrt(v)/sqrt(1-β2^t) + eps)
 * m and v are fp32. p is the fp32 master weight when there is one (bf16 build, --master-weights 1), else
 * the parameter itself, read as fp32. The parameter is stored with store_stochastic (llmc/cuda_utils.cuh):
 * in bf16, stochastic rounding with the random bits hash_u32(index, adamw_seed(seed, t)) — a pure
 * function of the element's index in the whole parameter vector, the step and the run's seed, so runs
 * and resumed runs round identically (params_from_master reproduces the rounding of step t).
 * One thread per work item of a VectorSplit (llmc/cuda_utils.cuh) over the tensor's n elements: a pack of
 * PACKX elements (16-byte loads and stores: one per floatX array, PACKX·4/16 per fp32 array), or one
 * element at an unaligned head or the tail — a ZeRO-1 shard may start and end anywhere. Each element's
 * math and rounding bits depend on its index alone, so the split changes no result.
 */
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include <math.h>
#include "llmc/cuda_utils.cuh"

#define ADAMW_BLOCK 512

/* the stochastic-rounding seed of optimizer step t (1-based; 0 for the initial rounding) */
static inline uint32_t adamw_seed(uint64_t seed, int t) { return hash_u32((uint32_t)t, (uint32_t)seed ^ (uint32_t)(seed >> 32)); }

/* one element's update: p (fp32), g (unscaled), m and v in and out */
__device__ inline float adamw_value(float p, float g, float* m, float* v, float step_size, float bc2_sqrt, float decay, float beta1,
                                    float beta2, float eps, float grad_scale) {
    g *= grad_scale;
    *m = beta1 * *m + (1.0f - beta1) * g;
    *v = beta2 * *v + (1.0f - beta2) * g * g;
    return p * decay - step_size * *m / (sqrtf(*v) / bc2_sqrt + eps);
}

template <typename G> /* the gradient type: floatX, or fp32 when gradients were reduced across GPUs in fp32 */
__global__ void adamw_kernel(floatX* params, float* master, const G* grads, float* m, float* v, VectorSplit split, size_t index_base,
                             float step_size, float bc2_sqrt, float decay, float beta1, float beta2, float eps, float grad_scale,
                             uint32_t seed) {
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, i;
    if (t >= split.items) return;
    if (split_item(split, t, &i)) {
        float p[PACKX], g[PACKX], mi[PACKX], vi[PACKX];
        if (master) load_floats(PACKX, p, master + i);
        else load_floats(PACKX, p, params + i);
        load_floats(PACKX, g, grads + i);
        load_floats(PACKX, mi, m + i);
        load_floats(PACKX, vi, v + i);
        PackX out;
        for (int k = 0; k < PACKX; k++) {
            p[k] = adamw_value(p[k], g[k], &mi[k], &vi[k], step_size, bc2_sqrt, decay, beta1, beta2, eps, grad_scale);
            store_stochastic(&out.v[k], p[k], hash_u32((uint32_t)(index_base + i + k), seed));
        }
        store_floats(PACKX, m + i, mi);
        store_floats(PACKX, v + i, vi);
        if (master) store_floats(PACKX, master + i, p);
        store_pack(params + i, out);
    } else {
        float mi = m[i], vi = v[i];
        float p = adamw_value(master ? master[i] : (float)params[i], (float)grads[i], &mi, &vi, step_size, bc2_sqrt, decay, beta1, beta2,
                              eps, grad_scale);
        m[i] = mi;
        v[i] = vi;
        if (master) master[i] = p;
        store_stochastic(&params[i], p, hash_u32((uint32_t)(index_base + i), seed));
    }
}

/* params[i] = floatX(master[i]) by store_stochastic with the bits hash_u32(index_base + i, seed): the rounding adamw_kernel
 * made of the same value with the same seed. One thread per work item of the VectorSplit, as adamw_kernel: a pack of PACKX
 * elements, or one element at an unaligned head or the tail. */
__global__ void params_from_master_kernel(floatX* params, const float* master, VectorSplit split, size_t index_base, uint32_t seed) {
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, i;
    if (t >= split.items) return;
    if (split_item(split, t, &i)) {
        float p[PACKX];
        load_floats(PACKX, p, master + i);
        PackX out;
        for (int k = 0; k < PACKX; k++) store_stochastic(&out.v[k], p[k], hash_u32((uint32_t)(index_base + i + k), seed));
        store_pack(params + i, out);
    } else {
        store_stochastic(&params[i], master[i], hash_u32((uint32_t)(index_base + i), seed));
    }
}

/* one tensor of n elements at index_base of the parameter vector; master may be NULL; t >= 1 */
template <typename G>
static inline void adamw_update(floatX* params, float* master, const G* grads, float* m, float* v, size_t n, size_t index_base,
                                float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                                uint64_t seed, cudaStream_t stream) {
    float step_size = (float)((double)lr / (1.0 - pow((double)beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, t));
    float decay = 1.0f - lr * weight_decay;
    const void* arrays[] = {params, master, grads, m, v};
    const int sizes[] = {sizeof(floatX), sizeof(float), sizeof(G), sizeof(float), sizeof(float)};
    VectorSplit split = vector_split(n, PACKX, 5, arrays, sizes);
    launch_kernel(adamw_kernel<G>, dim3(ceil_div((long)split.items, ADAMW_BLOCK)), dim3(ADAMW_BLOCK), 0, stream, params, master, grads, m,
                  v, split, index_base, step_size, bc2_sqrt, decay, beta1, beta2, eps, grad_scale, adamw_seed(seed, t));
}

/* params = the floatX rounding of master that adamw_update's step t made (t = 0: the initial rounding), for n
 * elements whose index in the whole parameter vector starts at index_base */
static inline void params_from_master(floatX* params, const float* master, size_t n, size_t index_base, int t, uint64_t seed,
                                      cudaStream_t stream) {
    const void* arrays[] = {params, master};
    const int sizes[] = {sizeof(floatX), sizeof(float)};
    VectorSplit split = vector_split(n, PACKX, 2, arrays, sizes);
    launch_kernel(params_from_master_kernel, dim3(ceil_div((long)split.items, ADAMW_BLOCK)), dim3(ADAMW_BLOCK), 0, stream, params, master,
                  split, index_base, adamw_seed(seed, t));
}

#endif /* LLMC_ADAMW_CUH */
