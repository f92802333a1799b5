/*
 * dev/cuda/lab.cuh — what the kernel lab files under dev/cuda share: device buffers (allocate, fill with hashed
 * uniform values, copy from and to host floats, free) and timing with CUDA events. Builds with nvcc and in the simulator (g++ -DCUDASIM).
 */
#ifndef DEV_CUDA_LAB_CUH
#define DEV_CUDA_LAB_CUH

#include "llmc/cuda_utils.cuh"

#include <vector>

/* n elements of T in device memory, contents undefined */
template <typename T>
static T* device_alloc(size_t n) {
    T* p;
    cudaCheck(cudaMalloc(&p, n * sizeof(T)));
    return p;
}

/* cudaFree of every pointer given */
template <typename... P>
static void device_free(P*... p) {
    (cudaCheck(cudaFree(p)), ...);
}

/* x[i] = amplitude·u, u uniform in [-1, 1) from hash_u32(i, seed); one thread per element */
template <typename T>
__global__ void fill_uniform_kernel(T* x, size_t n, uint32_t seed, float amplitude) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = (T)(amplitude * ((float)(hash_u32((uint32_t)i, seed) >> 8) / 8388608.0f - 1.0f));
}

/* a new device buffer of n elements of T filled by fill_uniform_kernel(seed, amplitude) */
template <typename T>
static T* device_uniform(size_t n, uint32_t seed, float amplitude) {
    T* p = device_alloc<T>(n);
    launch_kernel(fill_uniform_kernel<T>, dim3(ceil_div((long)n, 256)), dim3(256), 0, (cudaStream_t)0, p, n, seed, amplitude);
    return p;
}

/* a new device buffer holding host's values converted to T */
template <typename T>
static T* device_copy(const std::vector<float>& host) {
    std::vector<T> conv(host.size());
    for (size_t i = 0; i < host.size(); i++) conv[i] = (T)host[i];
    T* p = device_alloc<T>(conv.size());
    cudaCheck(cudaMemcpy(p, conv.data(), conv.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

/* the n elements of T at `device`, converted to float */
template <typename T>
static std::vector<float> host_copy(const T* device, size_t n) {
    std::vector<T> raw(n);
    cudaCheck(cudaMemcpy(raw.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i++) out[i] = (float)raw[i];
    return out;
}

/* milliseconds per call of fn on the default stream, averaged over reps calls after one warm-up call */
template <typename F>
static float time_ms(int reps, F fn) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    fn();
    cudaCheck(cudaEventRecord(start));
    for (int i = 0; i < reps; i++) fn();
    cudaCheck(cudaEventRecord(stop));
    cudaCheck(cudaEventSynchronize(stop));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    return ms / reps;
}

#endif /* DEV_CUDA_LAB_CUH */
