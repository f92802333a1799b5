/*
 * llmc/cuda_common.cuh — included first by every .cu/.cuh of the project.
 *
 * Under nvcc it includes the CUDA runtime and bf16 headers; with -DCUDASIM (the host C++ compiler) it
 * includes the CPU simulator dev/cudasim/cudasim.h instead, so the same kernel sources run in tests.
 * It defines the three things both builds implement:
 *   cudaCheck(call)       on error prints "error: CUDA: <call> failed: <reason> (<name>) (file:line)", exit 1
 *   launch_kernel(kernel, grid, block, smem_bytes, stream, args...)
 *                         nvcc: kernel<<<grid, block, smem_bytes, stream>>>(args...); simulator: runs the
 *                         grid on the CPU. Then checks cudaGetLastError and reports file:line and the launch
 *                         text. Template kernels need no parentheses: launch_kernel(k<float, 4>, ...).
 *   DYNAMIC_SMEM(T, name) declares `T* name` pointing at the block's dynamic shared memory (128-byte aligned)
 */
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#if defined(CUDASIM)
#include "dev/cudasim/cudasim.h"
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#else
#error "llmc/cuda_common.cuh: compile with nvcc, or with a C++ compiler and -DCUDASIM"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <utility>

static inline void cuda_check_(cudaError_t err, const char* call, const char* file, int line) {
    if (err == cudaSuccess) return;
    fprintf(stderr, "error: CUDA: %s failed: %s (%s) (%s:%d)\n", call, cudaGetErrorString(err), cudaGetErrorName(err), file, line);
    exit(1);
}
#define cudaCheck(call) cuda_check_((call), #call, __FILE__, __LINE__)

/* The number of GPUs this process sees; none (no driver, no device) exits with a message naming the
 * program's CPU twin. */
static inline int cuda_device_count(const char* cpu_twin) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        fprintf(stderr, "error: no usable NVIDIA GPU (%s): is the driver installed and a GPU visible (CUDA_VISIBLE_DEVICES)? "
                        "Without one, use %s\n", err != cudaSuccess ? cudaGetErrorString(err) : "none found", cpu_twin);
        exit(1);
    }
    return n;
}

/* launches kernel over grid x block with smem bytes of dynamic shared memory, then checks the launch */
template <typename... P, typename... A>
static inline void launch_kernel_(const char* file, int line, const char* text, void (*kernel)(P...), dim3 grid,
                                  dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
#if defined(CUDASIM)
    cudasim::launch(text, kernel, grid, block, smem, stream, std::forward<A>(args)...);
#else
    kernel<<<grid, block, smem, stream>>>(std::forward<A>(args)...);
#endif
    cuda_check_(cudaGetLastError(), text, file, line);
}
#define launch_kernel(...) launch_kernel_(__FILE__, __LINE__, #__VA_ARGS__, __VA_ARGS__)

#if defined(CUDASIM)
#define DYNAMIC_SMEM(T, name) T* name = reinterpret_cast<T*>(::cudasim::dynamic_smem())
#else
#define DYNAMIC_SMEM(T, name) \
    extern __shared__ __align__(128) unsigned char cuda_dynamic_smem_[]; \
    T* name = reinterpret_cast<T*>(cuda_dynamic_smem_)
#endif

#endif /* LLMC_CUDA_COMMON_CUH */
