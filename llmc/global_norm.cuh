/*
 * llmc/global_norm.cuh — the squared L2 norm of the gradient vector, deterministic.
 *   stage 1: the n elements are cut into the work items of a VectorSplit (llmc/cuda_utils.cuh): packs of
 *            16 bytes (8 bf16 or 4 fp32 read by one vector load), then the scalar elements of an
 *            unaligned head and the tail. GNORM_BLOCKS blocks (a fixed count, so the split depends on n
 *            and g's alignment only); thread i of block j sums g² over the items j·GNORM_BLOCK + i +
 *            k·GNORM_BLOCKS·GNORM_BLOCK in order (a pack's elements in order), the block adds its
 *            threads' sums (block_sum) into partial[j];
 *   stage 2: one block adds the partials (thread i takes partials i, i + GNORM_BLOCK, ..., then block_sum).
 * The clipping factor is computed by the caller from the norm (train_gpt.cu), as in the CPU trainer.
 */
#ifndef LLMC_GLOBAL_NORM_CUH
#define LLMC_GLOBAL_NORM_CUH

#include "llmc/cuda_utils.cuh"

#define GNORM_BLOCKS 256
#define GNORM_BLOCK 512

template <typename G> /* floatX, or fp32 gradients reduced across GPUs in fp32 */
__global__ void global_norm_partial_kernel(float* partial, const G* g, VectorSplit split) {
    float s = 0.0f;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, i; t < split.items; t += (size_t)gridDim.x * blockDim.x) {
        if (split_item(split, t, &i)) {
            float x[Pack16<G>::size];
            load_floats(Pack16<G>::size, x, g + i);
            for (int k = 0; k < Pack16<G>::size; k++) s += x[k] * x[k];
        } else {
            float x = (float)g[i];
            s += x * x;
        }
    }
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void global_norm_finish_kernel(float* out, const float* partial, int count) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

/* scratch: GNORM_BLOCKS + 1 floats; leaves Σ g² on the device at scratch[GNORM_BLOCKS] (no synchronisation) */
template <typename G>
static inline void global_norm_squared_launch(const G* g, size_t n, float* scratch, cudaStream_t stream) {
    const void* arrays[] = {g};
    const int sizes[] = {sizeof(G)};
    VectorSplit split = vector_split(n, Pack16<G>::size, 1, arrays, sizes);
    launch_kernel(global_norm_partial_kernel<G>, dim3(GNORM_BLOCKS), dim3(GNORM_BLOCK), 0, stream, scratch, g, split);
    launch_kernel(global_norm_finish_kernel, dim3(1), dim3(GNORM_BLOCK), 0, stream, scratch + GNORM_BLOCKS, (const float*)scratch,
                  GNORM_BLOCKS);
}

/* scratch: GNORM_BLOCKS + 1 floats; returns Σ g² (synchronises with the device to read it) */
static inline float global_norm_squared(const floatX* g, size_t n, float* scratch, cudaStream_t stream) {
    global_norm_squared_launch(g, n, scratch, stream);
    float result;
    cudaCheck(cudaMemcpyAsync(&result, scratch + GNORM_BLOCKS, sizeof(float), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return result;
}

#endif /* LLMC_GLOBAL_NORM_CUH */
